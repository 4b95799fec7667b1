"""`make dev`: a management cluster and a colony cluster on this machine, and the operator."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from pathlib import Path

from colony.devenv.demo import COLONY_NAME as DEMO_COLONY
from colony.devenv.demo import Demo
from colony.devenv.environment import (
    DEFAULT_COLONY_NODES,
    running,
    start_colony_cluster,
    start_management_cluster,
)
from colony.devenv.kwok import GPUNodeSpec
from colony.devenv.tools import ensure_tools, repo_root

DEV_COLONY = "dev-colony"


def _say(text: str) -> None:
    print(f"[colony dev] {text}", flush=True)


def run_dev(gpu_nodes: int = 2, state_dir: Path | None = None) -> None:
    """Start everything, print how to use it, run the operator in the foreground; Ctrl-C stops all.

    Kubeconfigs go to `state_dir` (default .dev/ in the repository) and are removed on exit.
    """
    started = time.monotonic()
    _say("checking control-plane binaries and CRDs (first run builds them: ~20-30 min on 2 cores)")
    tools = ensure_tools()
    state = state_dir or repo_root() / ".dev"
    state.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        _say("starting the management cluster (etcd, kube-apiserver, scheduler, controller-manager, kwok)")
        management = stack.enter_context(running(start_management_cluster(tools)))
        nodes = [
            GPUNodeSpec("a100", product="NVIDIA-A100-SXM4-80GB", gpus=8, count=gpu_nodes),
            *DEFAULT_COLONY_NODES[1:],
        ]
        _say(f"starting colony cluster {DEV_COLONY} with {gpu_nodes + 1} fake GPU nodes")
        colony = stack.enter_context(running(start_colony_cluster(tools, DEV_COLONY, nodes)))
        mgmt_config = state / "management.kubeconfig"
        colony_config = state / f"{DEV_COLONY}.kubeconfig"
        mgmt_config.write_text(management.kubeconfig())
        colony_config.write_text(colony.kubeconfig())
        # The colony cluster's kubeconfig as Cluster API publishes it: Secret <cluster>-kubeconfig, key value.
        management.kubectl(
            "create",
            "secret",
            "generic",
            f"{DEV_COLONY}-kubeconfig",
            "--namespace=default",
            f"--from-file=value={colony_config}",
        )
        # Cluster API cannot run without Docker: the harness plays it, every colony Cluster becomes
        # the dev colony cluster (for the examples a user applies; the demo's colony is `existing`).
        colony_kubeconfig = colony.kubeconfig()
        # The kubernetes package reads $KUBECONFIG once, when first imported (kopf's login uses
        # it): set the variable before the harness imports it.
        os.environ["KUBECONFIG"] = str(mgmt_config)
        from colony.devenv.capi_harness import CapiHarness

        stack.enter_context(CapiHarness(str(mgmt_config), lambda _ns, _name: colony_kubeconfig))
        _say(f"clusters ready in {time.monotonic() - started:.0f}s; starting the operator and the demo")
        explore = _explore_hints(tools.kubectl, mgmt_config, colony_config)
        demo = Demo(management, f"{DEV_COLONY}-kubeconfig", colony, _say, gpu_nodes=gpu_nodes)
        threading.Thread(target=_run_demo, args=(demo, explore), daemon=True).start()
        from colony.operator import run_operator

        with contextlib.suppress(KeyboardInterrupt):
            run_operator()
        _say("stopping")
    _cleanup(state)


def _explore_hints(kubectl: Path, mgmt_config: Path, colony_config: Path) -> str:
    cli = Path(sys.executable).parent / "colony"
    return f"""
  Explore, in another shell:
    export KUBECONFIG={mgmt_config}
    alias kubectl={kubectl}            # the pinned kubectl
    kubectl get colonies,ddpjobs,gprs,gpuqueues
    kubectl describe gpr demo-low       # status, events, why it waited
    {cli} jobs list; {cli} gpr list; {cli} colonies kubeconfig {DEMO_COLONY}
    kubectl --kubeconfig={colony_config} get nodes -L nvidia.com/gpu.product
    kubectl apply -f {repo_root() / "examples" / "colony-docker-ray.yaml"}   # Cluster API is played locally

  The operator runs below; Ctrl-C stops it and both clusters.
"""


def _run_demo(demo: Demo, explore: str) -> None:
    """Run the scripted demo (from a background thread) and print its summary."""
    try:
        lines = demo.run()
    except Exception as error:  # the demo must not take the environment down: say what failed
        _say(f"demo failed: {error}")
        print(explore, flush=True)
        return
    summary = "\n".join(f"    ✔ {line}" for line in lines)
    _say(f"demo summary ({time.monotonic() - demo.started:.0f}s):\n{summary}")
    print(explore, flush=True)


def _cleanup(state: Path) -> None:
    for path in state.glob("*.kubeconfig"):
        path.unlink(missing_ok=True)
