"""`colony simulate`: replay GPU job traces through the real scheduler core with simulated time.

trace: load the canonical CSV trace format; cluster: the synthetic cluster, tenant queues and gang
requests a trace becomes; replay: the discrete-event loop around `schedule(snapshot)`; metrics: waits,
JCT, utilization and tenant shares of a replay.
"""

from colony.simulate.cluster import SimCluster
from colony.simulate.metrics import Metrics, compute_metrics
from colony.simulate.replay import JobOutcome, ReplayResult, Scheduler, SimulationError, replay
from colony.simulate.trace import TraceError, TraceJob, load_trace, parse_trace

__all__ = [
    "JobOutcome",
    "Metrics",
    "ReplayResult",
    "Scheduler",
    "SimCluster",
    "SimulationError",
    "TraceError",
    "TraceJob",
    "compute_metrics",
    "load_trace",
    "parse_trace",
    "replay",
]
