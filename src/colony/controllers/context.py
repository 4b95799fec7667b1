"""The operator's state as one typed object: settings read once, clients, caches and the catalog.

`operator.py` builds an OperatorContext before kopf starts (so no handler or loop ever waits for
a client to appear) and closes it after kopf stops. kopf hands it to its handlers in their memo
(`context_of(memo)`); the batch loops get it as an argument.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from colony import settings
from colony.controllers.existing_addons import ExistingClusterAddons
from colony.controllers.gpr.state import SchedulerState
from colony.controllers.job_pods import JobPods
from colony.controllers.job_targets import JobTargets
from colony.kube.colony_clusters import ColonyClusterClients
from colony.kube.config import default_api_client
from colony.kube.helm import find_helm
from colony.kube.resources import Kube
from colony.pricing.operator_catalog import load_operator_catalog
from colony.render.context import DEFAULT_AWS_INSTANCE_PROFILES
from colony.scheduling.offers.model import Offer
from colony.scheduling.queueing.model import DEFAULT_AGING_S, PlacementStrategy, QueueOrder
from colony.workloads.sandbox import ExpressionSandbox, Limits


@dataclass(frozen=True)
class OperatorSettings:
    """Every environment setting of the operator (colony.settings), read and checked once at start:
    a bad value stops `colony operator` with one line naming the variable."""

    schedule_interval_s: float = 1.0
    """COLONY_SCHEDULE_INTERVAL_SECONDS: the longest time between two GPR scheduling passes."""
    require_queue: bool = False
    """COLONY_REQUIRE_QUEUE: a GPR in a namespace no GPUQueue serves waits instead of using the
    namespace's own unlimited queue."""
    placement_policy: PlacementStrategy = "cheapest"
    """COLONY_PLACEMENT_POLICY: how GPRs are placed on nodes."""
    queue_policy: QueueOrder = "default"
    """COLONY_QUEUE_POLICY: the scheduler's queue order."""
    queue_aging_s: float = DEFAULT_AGING_S
    """COLONY_QUEUE_AGING_SECONDS: per period waited, a request rises one priority level, and once
    aged it goes first at its (effective) priority."""
    placement_interval_s: float = 1.0
    """COLONY_PLACEMENT_INTERVAL_SECONDS: the time between two placement passes."""
    placement_kinds: frozenset[str] | None = None
    """COLONY_PLACEMENT_KINDS: the framework resources placed; None: every defined kind."""
    cost_refresh_s: float = 60.0
    """COLONY_COST_REFRESH_SECONDS: how often a colony's accrued cost is brought forward."""
    allow_unsafe_kubeconfigs: bool = False
    """COLONY_ALLOW_UNSAFE_KUBECONFIGS: also accept proxy-url and insecure-skip-tls-verify."""
    aws_instance_profiles: frozenset[str] = DEFAULT_AWS_INSTANCE_PROFILES
    """COLONY_AWS_INSTANCE_PROFILES: the IAM instance profiles aws workers may get."""
    expression_limits: Limits = field(default_factory=Limits)
    """COLONY_EXPRESSION_TIMEOUT_SECONDS / COLONY_EXPRESSION_MEMORY_MB: bounds of jq expressions."""

    @classmethod
    def from_env(cls) -> OperatorSettings:
        """The settings in the environment; colony.settings.SettingsError names a bad one."""
        return cls(
            schedule_interval_s=settings.positive_seconds("COLONY_SCHEDULE_INTERVAL_SECONDS", 1.0),
            require_queue=settings.flag("COLONY_REQUIRE_QUEUE"),
            placement_policy=settings.placement_policy(),
            queue_policy=settings.queue_policy(),
            queue_aging_s=settings.queue_aging_seconds(),
            placement_interval_s=settings.positive_seconds("COLONY_PLACEMENT_INTERVAL_SECONDS", 1.0),
            placement_kinds=settings.placement_kinds(),
            cost_refresh_s=settings.positive_seconds("COLONY_COST_REFRESH_SECONDS", 60.0),
            allow_unsafe_kubeconfigs=settings.allow_unsafe_kubeconfigs(),
            aws_instance_profiles=settings.aws_instance_profiles(),
            expression_limits=Limits.from_env(),
        )


@dataclass
class OperatorContext:
    """What every controller of one operator process shares, for the process's life."""

    namespaces: tuple[str, ...]
    """The namespace patterns watched (fnmatch); empty: the whole cluster."""
    settings: OperatorSettings
    kube: Kube
    """The management cluster's client."""
    colony_clients: ColonyClusterClients
    """Clients of colony clusters, from their kubeconfig Secrets (cached, safe loading)."""
    catalog: tuple[Offer, ...]
    """The GPU offers that price colonies and auto-provisioning."""
    existing_addons: ExistingClusterAddons
    """Helm runs installing add-ons on existing clusters."""
    expressions: ExpressionSandbox
    """The bounded evaluator of WorkloadDefinition expressions."""
    job_targets: JobTargets = field(default_factory=JobTargets)
    """Colony cluster clients of running DDPJobs, kept a few seconds, and their GPU counts."""
    job_pods: JobPods = field(default_factory=JobPods)
    """The worker pods of running DDPJobs, from one watch per cluster and namespace."""
    scheduler: SchedulerState = field(default_factory=SchedulerState)
    """What the GPR scheduling loop keeps between passes (colony.controllers.gpr)."""
    reservation_cleanup_tries: dict[str, int] = field(default_factory=dict)
    """Failed tries, by colony uid, of taking a deleted colony's reservation labels off its
    existing clusters (colony.controllers.colony_reservations)."""
    tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    """The background loops, by name (started with `start`, cancelled by `close`)."""

    def start(self, name: str, loop: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run `loop` in the background for the operator's life (until `stop` or `close`)."""
        task = self.tasks[name] = asyncio.create_task(loop, name=name)
        return task

    async def stop(self, *names: str) -> None:
        """Cancel the named background loops (every one when none is named) and wait for them."""
        for name in names or tuple(self.tasks):
            task = self.tasks.pop(name, None)
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    def watches(self, namespace: str) -> bool:
        """Whether `namespace` is one this operator serves."""
        return not self.namespaces or any(fnmatch.fnmatchcase(namespace, p) for p in self.namespaces)

    async def close(self) -> None:
        """Stop the background loops, helm runs and the expression worker; close every client."""
        await self.stop()
        await self.job_pods.close()
        await self.existing_addons.close()
        await self.expressions.close()
        await self.colony_clients.close()
        await self.kube.api.close()


async def open_context(namespaces: Sequence[str], operator_settings: OperatorSettings) -> OperatorContext:
    """Connect to the management cluster (in-cluster service account, else the kubeconfig) and build
    the context; the caller closes it."""
    kube = Kube(await default_api_client())
    return OperatorContext(
        namespaces=tuple(namespaces),
        settings=operator_settings,
        kube=kube,
        colony_clients=ColonyClusterClients(kube, allow_unsafe=operator_settings.allow_unsafe_kubeconfigs),
        catalog=await load_operator_catalog(kube),
        existing_addons=ExistingClusterAddons(kube, find_helm()),
        expressions=ExpressionSandbox(operator_settings.expression_limits),
    )


def context_of(memo: Any) -> OperatorContext:
    """The context kopf carries in a handler's memo (put there by colony.operator)."""
    context: OperatorContext = memo.context
    return context
