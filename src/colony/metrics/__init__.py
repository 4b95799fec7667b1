"""Prometheus metrics of the operator (prefix `colony_`), served by `colony operator --metrics-port`.

- cost: price and accrued cost per colony, GPU-hours and cost per job (colony.metrics.cost);
- reconcile: handler runs, errors and latency per kind, Events posted (colony.metrics.reconcile);
- scheduling: queue depth and estimated wait per queue, GPUs allocated/free per colony and GPU type
  (colony.metrics.scheduling);
- teardown: latency from the end of an ephemeral colony's work to its deletion (colony.metrics.teardown).

Series of deleted objects are removed (forget_colony, forget_job; queues and GPUs on each pass).
"""

from __future__ import annotations

from prometheus_client import start_http_server

from colony.metrics.cost import (
    COST_ACCRUED,
    JOB_COST,
    JOB_GPU_HOURS,
    PRICE_PER_HOUR,
    forget_colony_cost,
    forget_job,
    record_colony_cost,
    record_job_usage,
)
from colony.metrics.reconcile import (
    EVENTS,
    JOB_POD_READS,
    RECONCILE_DURATION,
    RECONCILE_ERRORS,
    RECONCILES,
    count_event,
    instrument,
    instrument_handlers,
    observe_handler,
    observes_itself,
    record_job_pod_read,
)
from colony.metrics.scheduling import (
    GPUS_ALLOCATED,
    GPUS_FREE,
    QUEUE_ADMITTED,
    QUEUE_PENDING,
    QUEUE_WAIT_MAX,
    QUEUE_WAIT_MEDIAN,
    QueueStats,
    forget_colony_gpus,
    record_gpus,
    record_queues,
)
from colony.metrics.teardown import TEARDOWN_LATENCY, observe_teardown


def serve(port: int, address: str = "0.0.0.0") -> None:
    """Serve /metrics on `address:port` from a background thread."""
    start_http_server(port, addr=address)


def forget_colony(namespace: str, colony: str) -> None:
    """Drop a deleted colony's series (cost and GPUs)."""
    forget_colony_cost(namespace, colony)
    forget_colony_gpus(namespace, colony)


__all__ = [
    "COST_ACCRUED",
    "EVENTS",
    "GPUS_ALLOCATED",
    "GPUS_FREE",
    "JOB_COST",
    "JOB_GPU_HOURS",
    "JOB_POD_READS",
    "PRICE_PER_HOUR",
    "QUEUE_ADMITTED",
    "QUEUE_PENDING",
    "QUEUE_WAIT_MAX",
    "QUEUE_WAIT_MEDIAN",
    "RECONCILES",
    "RECONCILE_DURATION",
    "RECONCILE_ERRORS",
    "TEARDOWN_LATENCY",
    "QueueStats",
    "count_event",
    "forget_colony",
    "forget_job",
    "instrument",
    "instrument_handlers",
    "observe_handler",
    "observe_teardown",
    "observes_itself",
    "record_colony_cost",
    "record_gpus",
    "record_job_pod_read",
    "record_job_usage",
    "record_queues",
    "serve",
]
