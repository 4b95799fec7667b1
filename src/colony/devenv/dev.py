"""`make dev`: a management cluster and a colony cluster on this machine, and the operator."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

from colony.devenv.cluster import LocalCluster
from colony.devenv.environment import (
    DEFAULT_COLONY_NODES,
    running,
    start_colony_cluster,
    start_management_cluster,
)
from colony.devenv.kwok import GPUNodeSpec
from colony.devenv.tools import ensure_tools, repo_root

DEV_COLONY = "dev-colony"
DEMO_COLONY = repo_root() / "examples" / "colony-docker-ray.yaml"
DEMO_COLONY_NAME = "docker-colony-ray"


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
        kubectl = tools.kubectl
        _say(f"ready in {time.monotonic() - started:.0f}s. In another shell:")
        print(
            f"""
    export KUBECONFIG={mgmt_config}
    alias kubectl={kubectl}            # the pinned kubectl
    kubectl apply -f {repo_root() / "examples"}/
    kubectl get colonies,ddpjobs,gprs
    kubectl --kubeconfig={colony_config} get nodes -L nvidia.com/gpu.product

  The colony cluster's kubeconfig is also in Secret default/{DEV_COLONY}-kubeconfig (key: value).
  The operator runs below; Ctrl-C stops it and both clusters.
""",
            flush=True,
        )
        # Cluster API cannot run without Docker: the harness plays it, every colony Cluster becomes
        # the dev colony cluster.
        colony_kubeconfig = colony.kubeconfig()
        # The kubernetes package reads $KUBECONFIG once, when first imported (kopf's login uses
        # it): set the variable before the harness imports it.
        os.environ["KUBECONFIG"] = str(mgmt_config)
        from colony.devenv.capi_harness import CapiHarness

        stack.enter_context(CapiHarness(str(mgmt_config), lambda _ns, _name: colony_kubeconfig))
        management.kubectl("apply", "-n", "default", "-f", str(DEMO_COLONY))
        threading.Thread(target=_show_when_ready, args=(management,), daemon=True).start()
        from colony.operator import run_operator

        with contextlib.suppress(KeyboardInterrupt):
            run_operator()
        _say("stopping")
    _cleanup(state)


def _show_when_ready(management: LocalCluster, timeout: float = 180) -> None:
    """Print the demo colony once it is Ready (from a background thread)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = management.kubectl(
            "get", "colony", DEMO_COLONY_NAME, "-n", "default", "-o", "jsonpath={.status.phase}", check=False
        )
        if result.stdout == "Ready":
            table = management.kubectl("get", "colonies", "-n", "default", "-o", "wide").stdout
            _say(f"demo colony {DEMO_COLONY_NAME} is Ready:\n{table}")
            return
        time.sleep(1)
    _say(f"demo colony {DEMO_COLONY_NAME} is not Ready after {timeout:.0f}s; see `kubectl describe colony`")


def _cleanup(state: Path) -> None:
    for path in state.glob("*.kubeconfig"):
        path.unlink(missing_ok=True)
