"""kopf handlers: observe, call the pure core, apply, write status. No business logic here.

Importing this package registers every handler with kopf's default registry, each one wrapped (here,
in one place) to count its runs, results and latency as Prometheus metrics (colony.metrics).
"""

import kopf

from colony import metrics
from colony.api import RESOURCES
from colony.controllers import colony, ddpjob, gpr, kopf_settings, placement
from colony.controllers.gpr import loop as gpr_loop

metrics.instrument_handlers(
    kopf.get_default_registry(), {r.plural: r.kind for r in RESOURCES} | {"clusters": "Cluster"}
)

__all__ = ["colony", "ddpjob", "gpr", "gpr_loop", "kopf_settings", "placement"]
