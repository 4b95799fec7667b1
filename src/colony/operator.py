"""Run the kopf operator in this process against the current kubeconfig."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import kopf


def run_operator(
    namespaces: Sequence[str] = (),
    *,
    liveness_endpoint: str | None = None,
    verbose: bool = False,
    json_logs: bool = False,
    metrics_port: int | None = None,
) -> None:
    """Run until SIGINT/SIGTERM. Watches `namespaces`, or the whole cluster when empty; serves
    Prometheus metrics on `metrics_port` when given."""
    import colony.controllers  # noqa: F401 - registers the handlers
    from colony import metrics

    if metrics_port is not None:
        metrics.serve(metrics_port)

    kopf.configure(
        verbose=verbose,
        log_format=kopf.LogFormat.JSON if json_logs else kopf.LogFormat.FULL,
        log_refkey="object" if json_logs else None,
    )
    asyncio.run(
        kopf.operator(
            clusterwide=not namespaces,
            namespaces=list(namespaces),
            standalone=True,
            liveness_endpoint=liveness_endpoint,
            memo=kopf.Memo(namespaces=list(namespaces)),
        )
    )
