"""Pure rendering: models to manifests (Cluster API per provider, add-ons, training workloads). No I/O.

Entry points: `render_colony` (everything a Colony needs in the management cluster) and
`allocate_hosted_ports` (deterministic NodePorts of hosted control planes).
"""

from colony.render.colony import render_colony
from colony.render.contract import (
    ColonyRef,
    HostedControlPlanePorts,
    Manifest,
    RenderedCluster,
    RenderedColony,
)
from colony.render.ports import allocate_hosted_ports, hosted_ports_key

__all__ = [
    "ColonyRef",
    "HostedControlPlanePorts",
    "Manifest",
    "RenderedCluster",
    "RenderedColony",
    "allocate_hosted_ports",
    "hosted_ports_key",
    "render_colony",
]
