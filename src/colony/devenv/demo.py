"""The `make dev` demo, scripted against the local clusters while the operator runs:

1. an `existing`-provider Colony over the local colony cluster (kwok GPU nodes) becomes Ready;
2. the seed DDPJob (examples/ddpjob.yaml, unchanged) runs on it to Succeeded;
3. two GPUProvisioningRequests queue behind a third that holds the A100s, and are admitted in
   priority order (the later, higher-priority one first) when it expires;

then a short summary. kwok plays the kubelet, so the demo also plays the training script: it marks
the job's worker pods as finished (annotation colony.exalsius.ai/simulated-outcome).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from colony.devenv.cluster import LocalCluster
from colony.devenv.kwok import OUTCOME_ANNOTATION
from colony.devenv.tools import repo_root
from colony.labels import JOB_LABEL

NAMESPACE = "default"
COLONY_NAME = "test-colony"
"""The name the seed DDPJob targets, so that it applies unchanged."""
SEED_JOB = repo_root() / "examples" / "ddpjob.yaml"
SEED_JOB_NAME = "test-ddp-job"
GPU_TYPE = "A100-80GB"
HOLD, LOW, HIGH = "demo-hold", "demo-low", "demo-high"


class DemoError(RuntimeError):
    """A demo step did not reach its goal in time (the message says which and what was seen)."""


@dataclass
class Demo:
    """Drives the demo; `lines` collects the summary."""

    management: LocalCluster
    colony_secret: str
    """Secret (key `value`) with the colony cluster's kubeconfig, in NAMESPACE."""
    colony: LocalCluster
    say: Callable[[str], None]
    gpu_nodes: int = 2
    lines: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def run(self) -> list[str]:
        """All steps in order; returns the summary lines."""
        self.colony_ready()
        self.seed_job()
        self.gprs_in_priority_order()
        return self.lines

    # -- steps ------------------------------------------------------------------------------------

    def colony_ready(self) -> None:
        """Register the local colony cluster as an existing-cluster Colony and wait for Ready."""
        t0 = time.monotonic()
        self._apply(
            {
                "apiVersion": "infra.exalsius.ai/v1",
                "kind": "Colony",
                "metadata": {"name": COLONY_NAME, "namespace": NAMESPACE},
                "spec": {
                    "k8sVersion": "v1.36.3",
                    "colonyClusters": [
                        {
                            "clusterName": "local",
                            "existing": {"kubeconfigSecretRef": {"name": self.colony_secret}},
                        }
                    ],
                },
            }
        )
        self.say(f"applied Colony {COLONY_NAME} (existing provider: the local colony cluster)")
        status = self._wait("Colony", COLONY_NAME, lambda s: s.get("phase") == "Ready", 120)
        self._done(f"Colony {COLONY_NAME} Ready with {status.get('gpus')} GPUs", t0)

    def seed_job(self) -> None:
        """Apply the seed DDPJob unchanged, let its workers finish, wait for Succeeded."""
        t0 = time.monotonic()
        self.management.kubectl("apply", "-n", NAMESPACE, "-f", str(SEED_JOB))
        self.say(f"applied the seed DDPJob {SEED_JOB_NAME} (examples/ddpjob.yaml, unchanged)")
        self._wait("DDPJob", SEED_JOB_NAME, lambda s: s.get("phase") == "Running", 120)
        self.say("workers are running; playing the training script: marking them finished")
        pods = self._colony_pods(f"{JOB_LABEL}={SEED_JOB_NAME}")
        if not pods:
            raise DemoError(f"DDPJob {SEED_JOB_NAME} is Running but no worker pod is in the colony cluster")
        for pod in pods:
            self.colony.kubectl(
                "annotate", "pod", pod, "-n", NAMESPACE, f"{OUTCOME_ANNOTATION}=Succeeded", "--overwrite"
            )
        status = self._wait("DDPJob", SEED_JOB_NAME, lambda s: s.get("phase") in ("Succeeded", "Failed"), 120)
        if status.get("phase") != "Succeeded":
            raise DemoError(f"DDPJob {SEED_JOB_NAME} ended {status.get('phase')}: {status.get('message')}")
        self._done(f"DDPJob {SEED_JOB_NAME} Succeeded ({len(pods)} workers)", t0)

    def gprs_in_priority_order(self) -> None:
        """A GPR holds every A100 for a few seconds; a low- then a high-priority one queue behind it."""
        t0 = time.monotonic()
        nodes = self.gpu_nodes
        self._apply(self._gpr(HOLD, priority=150, nodes=nodes, exit_duration="8s"))
        self._wait("GPUProvisioningRequest", HOLD, lambda s: s.get("phase") == "Ready", 60)
        self.say(f"GPR {HOLD} holds all {8 * nodes} A100s for 8s")
        self._apply(self._gpr(LOW, priority=50, nodes=nodes, exit_duration="5s"))
        time.sleep(1)  # the low-priority request is the earlier one
        self._apply(self._gpr(HIGH, priority=250, nodes=nodes, exit_duration="5s"))
        queued = self._wait(
            "GPUProvisioningRequest",
            HIGH,
            lambda s: s.get("phase") == "Queued" and s.get("estimatedWaitSeconds") is not None,
            30,
        )
        self.say(
            f"GPRs {LOW} (priority 50) and {HIGH} (priority 250) are Queued; {HIGH} is "
            f"#{queued.get('positionInQueue')}, estimated wait {queued.get('estimatedWaitSeconds')}s"
        )
        admitted = {}
        for name in (HIGH, LOW):
            status = self._wait("GPUProvisioningRequest", name, lambda s: bool(s.get("admittedAt")), 90)
            admitted[name] = status["admittedAt"]
        if not admitted[HIGH] < admitted[LOW]:
            raise DemoError(f"admission order is wrong: {admitted}")
        self._done(
            f"GPRs admitted in priority order: {HIGH} at {admitted[HIGH]}, then {LOW} at {admitted[LOW]}", t0
        )

    # -- helpers ----------------------------------------------------------------------------------

    @staticmethod
    def _gpr(name: str, priority: int, nodes: int, exit_duration: str) -> dict[str, Any]:
        return {
            "apiVersion": "infra.exalsius.ai/v1",
            "kind": "GPUProvisioningRequest",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "gpuShape": GPU_TYPE,
                "numberOfGPUNodes": nodes,
                "numberOfGPUs": 8,
                "priority": priority,
                "exitDuration": exit_duration,
            },
        }

    def _apply(self, manifest: dict[str, Any]) -> None:
        self.management.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(manifest))

    def _status(self, kind: str, name: str) -> dict[str, Any]:
        result = self.management.kubectl("get", kind, name, "-n", NAMESPACE, "-o", "json", check=False)
        if result.returncode != 0:
            return {}
        status: dict[str, Any] = json.loads(result.stdout).get("status") or {}
        return status

    def _wait(
        self, kind: str, name: str, goal: Callable[[dict[str, Any]], bool], timeout: float
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        status: dict[str, Any] = {}
        while time.monotonic() < deadline:
            status = self._status(kind, name)
            if goal(status):
                return status
            time.sleep(0.5)
        raise DemoError(
            f"{kind} {name} did not get there in {timeout:.0f}s: phase {status.get('phase')!r}, "
            f"message {status.get('message')!r} (kubectl describe {kind.lower()} {name})"
        )

    def _colony_pods(self, selector: str) -> list[str]:
        result = self.colony.kubectl("get", "pods", "-n", NAMESPACE, "-l", selector, "-o", "name")
        return [line.split("/", 1)[1] for line in result.stdout.split()]

    def _done(self, what: str, t0: float) -> None:
        line = f"{what} ({time.monotonic() - t0:.0f}s)"
        self.lines.append(line)
        self.say(line)
