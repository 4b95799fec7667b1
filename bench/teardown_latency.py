"""Benchmark: time from a DDPJob's completion to the deletion request of its ephemeral colony.

Runs N jobs (default 50), each on its own ephemeral colony (an `existing` cluster: a local API
server with kwok GPU nodes), against the real operator process. A watch in this process records,
for each job, when it saw its last worker pod turn Succeeded (in the colony cluster: the job's real
completion) and when it saw the colony's deletion begin.

Baseline, measured the same way in the same run: a colony deleted directly with the API; its
latency is the time from issuing the delete call to the watch seeing the deletion. The ratio
shows how much the operator adds on top of the API server's own watch latency.

    .venv/bin/python -m bench.teardown_latency [--size tiny|quick|full]
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes

from bench.report import Table
from colony.devenv.environment import start_colony_cluster, start_management_cluster
from colony.devenv.kwok import OUTCOME_ANNOTATION
from colony.devenv.process import ManagedProcess
from colony.devenv.tools import ensure_tools

NAMESPACE = "bench"


class Recorder:
    """Watches DDPJobs and Colonies; remembers when each event of interest was first seen."""

    def __init__(self, kubeconfig: str, colony_kubeconfig: str) -> None:
        self.api = kubernetes.client.CustomObjectsApi(kubernetes.config.new_client_from_config(kubeconfig))
        self.pods = kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(colony_kubeconfig))
        self.succeeded: dict[str, float] = {}
        self.deleting: dict[str, float] = {}
        self._stop = threading.Event()

    def _watch(self, group: str, plural: str, on_event: Any) -> None:
        while not self._stop.is_set():
            stream = kubernetes.watch.Watch().stream(
                self.api.list_namespaced_custom_object, group, "v1", NAMESPACE, plural, timeout_seconds=5
            )
            for event in stream:
                on_event(event["type"], event["object"], time.monotonic())

    def _watch_pods(self) -> None:
        while not self._stop.is_set():
            stream = kubernetes.watch.Watch().stream(
                self.pods.list_namespaced_pod, NAMESPACE, timeout_seconds=5
            )
            for event in stream:
                pod = event["object"]
                if pod.status and pod.status.phase == "Succeeded":
                    job = (pod.metadata.labels or {}).get("training.exalsius.ai/job-name")
                    if job:
                        self.succeeded.setdefault(job, time.monotonic())

    def _on_colony(self, type_: str, obj: dict[str, Any], now: float) -> None:
        if type_ == "DELETED" or obj["metadata"].get("deletionTimestamp"):
            self.deleting.setdefault(obj["metadata"]["name"], now)

    def start(self) -> None:
        threading.Thread(target=self._watch_pods, daemon=True).start()
        args = ("infra.exalsius.ai", "colonies", self._on_colony)
        threading.Thread(target=self._watch, args=args, daemon=True).start()

    def stop(self) -> None:
        self._stop.set()


def _wait(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.2)
    raise TimeoutError(what)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _batches(count: int, size: int) -> Iterator[range]:
    for start in range(0, count, size):
        yield range(start, min(count, start + size))


SIZES = {"tiny": (3, 3, 3), "quick": (20, 10, 10), "full": (50, 10, 20)}
"""size -> (jobs, jobs started at once, direct deletes for the baseline)."""


def measure(jobs: int, parallel: int, baselines: int) -> dict[str, Any]:
    """Run `jobs` ephemeral-colony jobs against the real operator; latencies and the baseline."""
    tools = ensure_tools()
    management = start_management_cluster(tools)
    colony = start_colony_cluster(tools, "bench-colony")
    log = Path(tempfile.mkdtemp()) / "operator.log"
    env = {**os.environ, "KUBECONFIG": str(management.kubeconfig_path)}
    operator = ManagedProcess(
        "operator", [sys.executable, "-m", "colony", "operator", "-n", NAMESPACE], log, env=env
    )
    try:
        management.kubectl("create", "namespace", NAMESPACE)
        colony.kubectl("create", "namespace", NAMESPACE)
        operator.start()
        recorder = Recorder(str(management.kubeconfig_path), str(colony.kubeconfig_path))
        recorder.start()
        secret = base64.b64encode(colony.kubeconfig().encode()).decode()
        management.apply(
            [
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": "gpu", "namespace": NAMESPACE},
                    "data": {"value": secret},
                }
            ]
        )
        for batch in _batches(jobs, parallel):
            objects: list[dict[str, Any]] = []
            for i in batch:
                objects.append(
                    {
                        "apiVersion": "infra.exalsius.ai/v1",
                        "kind": "Colony",
                        "metadata": {
                            "name": f"c{i}",
                            "namespace": NAMESPACE,
                            "labels": {"colony.exalsius.ai/ephemeral": "true"},
                        },
                        "spec": {
                            "k8sVersion": "v1.36.3",
                            "colonyClusters": [
                                {"clusterName": "gpu", "existing": {"kubeconfigSecretRef": {"name": "gpu"}}}
                            ],
                        },
                    }
                )
                objects.append(
                    {
                        "apiVersion": "training.exalsius.ai/v1",
                        "kind": "DDPJob",
                        "metadata": {"name": f"j{i}", "namespace": NAMESPACE},
                        "spec": {
                            "targetColony": f"c{i}",
                            "parallelism": 1,
                            "nprocPerNode": 1,
                            "cpuJob": True,
                            "gangScheduler": "default",
                            "image": "bench",
                            "scriptPath": "/bench.py",
                        },
                    }
                )
            management.apply(objects)
            for i in batch:
                pod = f"j{i}-worker-0-a0"
                _wait(
                    lambda pod=pod: (
                        colony.kubectl(
                            "get", "pod", pod, "-n", NAMESPACE, "-o", "jsonpath={.status.phase}", check=False
                        ).stdout
                        == "Running"
                    ),
                    120,
                    f"{pod} Running",
                )
                colony.kubectl("annotate", "pod", pod, "-n", NAMESPACE, f"{OUTCOME_ANNOTATION}=Succeeded")
            _wait(
                lambda batch=batch: all(f"c{i}" in recorder.deleting for i in batch), 120, "colonies deleted"
            )
        latencies = [recorder.deleting[f"c{i}"] - recorder.succeeded[f"j{i}"] for i in range(jobs)]

        baseline: list[float] = []
        for i in range(baselines):
            name = f"baseline-{i}"
            management.apply(
                [
                    {
                        "apiVersion": "infra.exalsius.ai/v1",
                        "kind": "Colony",
                        "metadata": {"name": name, "namespace": NAMESPACE},
                        "spec": objects[0]["spec"],
                    }
                ]
            )
            _wait(
                lambda name=name: (
                    name not in recorder.deleting
                    and management.kubectl("get", "colony", name, "-n", NAMESPACE, check=False).returncode
                    == 0
                ),
                30,
                name,
            )
            called = time.monotonic()
            recorder.api.delete_namespaced_custom_object(
                "infra.exalsius.ai", "v1", NAMESPACE, "colonies", name
            )
            _wait(lambda name=name: name in recorder.deleting, 30, f"{name} deletion seen")
            baseline.append(recorder.deleting[name] - called)
        recorder.stop()

        return {"latencies": latencies, "baseline": baseline}
    finally:
        operator.stop()
        colony.stop()
        management.stop()


def run(size: str) -> list[Table]:
    """Teardown latency at `size`: one table, the operator's latency beside the direct-delete baseline."""
    jobs, parallel, baselines = SIZES[size]
    measured = measure(jobs, parallel, baselines)
    latencies, baseline = measured["latencies"], measured["baseline"]
    rows = [
        {
            "path": "job completion -> colony deletion (operator)",
            "n": len(latencies),
            "p50 s": _percentile(latencies, 0.5),
            "p99 s": _percentile(latencies, 0.99),
            "max s": max(latencies),
            "mean s": statistics.mean(latencies),
        },
        {
            "path": "delete call -> deletion seen (API server baseline)",
            "n": len(baseline),
            "p50 s": _percentile(baseline, 0.5),
            "p99 s": _percentile(baseline, 0.99),
            "max s": max(baseline),
            "mean s": statistics.mean(baseline),
        },
    ]
    b50 = rows[1]["p50 s"]
    ratio = f"{rows[0]['p50 s'] / b50:.1f}x" if b50 > 0 else "-"
    notes = [
        f"p50 ratio operator / API-server baseline: {ratio}; target p99 under 2 s: "
        + ("met" if rows[0]["p99 s"] < 2.0 else "MISSED"),
        f"{parallel} jobs at a time, each on its own ephemeral existing-provider colony.",
    ]
    columns = ["path", "n", "p50 s", "p99 s", "max s", "mean s"]
    return [Table("teardown", "Teardown latency", columns, rows, notes, {"p99_s": 2.0})]


def main() -> None:
    """Print the table for --size."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", choices=list(SIZES), default="full")
    for table in run(parser.parse_args().size):
        print(table.markdown())


if __name__ == "__main__":
    main()
