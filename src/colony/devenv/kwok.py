"""kwok configuration for local clusters: fake GPU nodes and the stages that drive pod phases.

kwok only plays the kubelet: it marks managed nodes Ready and moves bound pods through their phases
according to Stage objects. Besides kwok's stock stages (node initialise/heartbeat, pod
ready/complete/delete), two custom stages let a test decide how a pod ends, by annotation:

    colony.exalsius.ai/simulated-outcome: Succeeded | Failed
    colony.exalsius.ai/simulated-exit-code: "3"          (Failed only; default 1)
    colony.exalsius.ai/simulated-runtime: "2s"            (how long the pod runs first; default 1s)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from colony.gpu import GPU_PRODUCT_LABEL, GPU_RESOURCE

MANAGED_ANNOTATION = "kwok.x-k8s.io/node"
OUTCOME_ANNOTATION = "colony.exalsius.ai/simulated-outcome"
EXIT_CODE_ANNOTATION = "colony.exalsius.ai/simulated-exit-code"
RUNTIME_ANNOTATION = "colony.exalsius.ai/simulated-runtime"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"

STOCK_STAGES = (
    "node-initialize.yaml",
    "node-heartbeat.yaml",
    "pod-ready.yaml",
    "pod-complete.yaml",
    "pod-delete.yaml",
)


@dataclass(frozen=True)
class GPUNodeSpec:
    """A fake node: `count` nodes named `<name_prefix>-<i>` with `gpus` GPUs of `product` each."""

    name_prefix: str
    product: str = "NVIDIA-A100-SXM4-80GB"
    gpus: int = 8
    gpu_memory_mib: int = 81920
    count: int = 1
    cpu: str = "96"
    memory: str = "1024Gi"
    labels: dict[str, str] = field(default_factory=dict)


def gpu_node_manifests(spec: GPUNodeSpec) -> list[dict[str, Any]]:
    """Node objects for `spec`, managed by kwok, with GPU capacity and NVIDIA product labels."""
    nodes = []
    for index in range(spec.count):
        name = f"{spec.name_prefix}-{index}"
        resources = {"cpu": spec.cpu, "memory": spec.memory, "pods": "110"}
        if spec.gpus:
            resources[GPU_RESOURCE] = str(spec.gpus)
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
            **spec.labels,
        }
        if spec.gpus:
            labels |= {
                GPU_PRODUCT_LABEL: spec.product,
                GPU_MEMORY_LABEL: str(spec.gpu_memory_mib),
                "nvidia.com/gpu.count": str(spec.gpus),
            }
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": labels,
                    "annotations": {MANAGED_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
                },
                "status": {"capacity": resources, "allocatable": resources},
            }
        )
    return nodes


def _outcome_stage(outcome: str) -> dict[str, Any]:
    exit_code = (
        "0"
        if outcome == "Succeeded"
        else f'{{{{ or (index $.metadata.annotations "{EXIT_CODE_ANNOTATION}") "1" }}}}'
    )
    reason = "Completed" if outcome == "Succeeded" else "Error"
    template = f"""{{{{ $now := Now }}}}
containerStatuses:
{{{{ range .spec.containers }}}}
- image: {{{{ .image | Quote }}}}
  name: {{{{ .name | Quote }}}}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: {exit_code}
      finishedAt: {{{{ $now | Quote }}}}
      reason: {reason}
      startedAt: {{{{ $now | Quote }}}}
{{{{ end }}}}
phase: {outcome}
"""
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": f"colony-pod-{outcome.lower()}"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchExpressions": [
                    {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                    {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                    {
                        "key": f'.metadata.annotations["{OUTCOME_ANNOTATION}"]',
                        "operator": "In",
                        "values": [outcome],
                    },
                ]
            },
            "delay": {
                "durationMilliseconds": 1000,
                "durationFrom": {"expressionFrom": f'.metadata.annotations["{RUNTIME_ANNOTATION}"]'},
            },
            "next": {"statusTemplate": template},
        },
    }


def kwok_config(stock_stage_dir: Path) -> str:
    """The multi-document kwok config: the stock stages and the outcome stages.

    There is no KwokConfiguration document on purpose: kwok then applies its own defaults (with
    a partial one it leaves e.g. the lease parallelism at 0 and refuses to start); options are flags.
    """
    documents: list[dict[str, Any]] = []
    for name in STOCK_STAGES:
        documents.append(yaml.safe_load((stock_stage_dir / name).read_text()))
    documents += [_outcome_stage("Succeeded"), _outcome_stage("Failed")]
    return yaml.safe_dump_all(documents, sort_keys=False)
