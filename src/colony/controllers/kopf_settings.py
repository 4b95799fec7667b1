"""Operator-wide kopf settings."""

from __future__ import annotations

import logging
from typing import Any

import kopf

from colony.kube.timeouts import DEFAULT_TIMEOUTS
from colony.labels import FINALIZER

FIELD_MANAGER = "colony-operator"
DIFFBASE_IGNORED_FIELDS = ("spec.wandbApiKey",)
"""Fields kept out of kopf's last-handled-configuration annotation: kopf writes that annotation from
the body as it was before the handler's patch, in the same PATCH that moves a plain `wandbApiKey`
into a Secret, so the key would otherwise stay on the object for everyone who can read it."""


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """Standalone (no peering CRDs needed), short watch timeouts, our own finalizer name."""
    settings.peering.standalone = True
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="colony.exalsius.ai")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="colony.exalsius.ai", key="last-handled-configuration", ignored_fields=DIFFBASE_IGNORED_FIELDS
    )
    # kopf's watches are bounded like the informers' (kube/timeouts.py): the server ends each one
    # after watch_s; a stream with no event past the stall bound (inactivity) is dropped and
    # opened again, and none lives longer than watch_s plus the stall bound
    settings.watching.server_timeout = max(1, int(DEFAULT_TIMEOUTS.watch_s))
    settings.watching.inactivity_timeout = DEFAULT_TIMEOUTS.watch_stall_s
    settings.watching.client_timeout = DEFAULT_TIMEOUTS.watch_s + DEFAULT_TIMEOUTS.watch_stall_s
    settings.watching.connect_timeout = DEFAULT_TIMEOUTS.connect_s
    # kopf's own requests (patches, Events) are bounded like ours (kube/timeouts.py)
    settings.networking.connect_timeout = DEFAULT_TIMEOUTS.connect_s
    settings.networking.request_timeout = DEFAULT_TIMEOUTS.request_s
    settings.execution.max_workers = 20
    # Handler logs of WARNING and above become Kubernetes Events (with every state change, which is
    # posted explicitly by colony.events); INFO lines, kopf's "Handler ... succeeded" among them,
    # stay in the log: as Events they were several API writes per object and timer run.
    settings.posting.level = logging.WARNING
    # A deleted object keeps its finalizer until its timers have exited; a timer caught mid-run is
    # re-checked after this many seconds (kopf's default of 60 s stalled deletions for a minute).
    settings.background.cancellation_polling = 1.0
    settings.background.instant_exit_timeout = 0.2
