"""Kubernetes Events on the operator's objects: one helper for every state change a user cares about.

- `post`: from a kopf handler or timer (kopf's poster sends it in the background, never blocks);
- `post_now`: from code outside kopf's handlers (the GPR scheduling loop), created through a client.

Messages are cut to what the API accepts and scrubbed of anything that looks like a credential
(`token=…`, `password: …`, bearer tokens); callers name Secrets, never their values.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any, cast

import kopf

from colony import metrics
from colony.kube.resources import Kube, KubeApiError
from colony.timefmt import now_rfc3339

MAX_MESSAGE = 1024
COMPONENT = "colony-operator"
_CREDENTIAL = re.compile(r"(?i)\b(bearer\s+|(?:token|password|passwd|secret|api[_-]?key)\s*[=:]\s*)[^\s,;]+")

log = logging.getLogger(__name__)


def clean(message: str) -> str:
    """`message` without credential-looking values, at most MAX_MESSAGE characters."""
    scrubbed = _CREDENTIAL.sub(lambda m: m.group(1) + "<redacted>", message)
    return scrubbed if len(scrubbed) <= MAX_MESSAGE else scrubbed[: MAX_MESSAGE - 3] + "..."


def post(body: Mapping[str, Any], reason: str, message: str, *, warning: bool = False) -> None:
    """An Event on `body` (a kopf body or a plain object with apiVersion, kind and metadata)."""
    # kopf.event, not kopf.info/warn: those drop what is below settings.posting.level, which only
    # keeps handler logs (kopf's "Handler ... succeeded" included) from becoming Events.
    kind = "Warning" if warning else "Normal"
    kopf.event(cast(kopf.Body, body), type=kind, reason=reason, message=clean(message))
    metrics.count_event(str(body.get("kind") or ""), reason, warning)


async def post_now(
    kube: Kube,
    api_version: str,
    kind: str,
    meta: Mapping[str, Any],
    reason: str,
    message: str,
    *,
    warning: bool = False,
) -> None:
    """An Event on the object `meta` describes, created at once; a failure is logged, not raised."""
    now = now_rfc3339()
    try:
        await kube.create(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
                "involvedObject": {
                    "apiVersion": api_version,
                    "kind": kind,
                    "name": meta["name"],
                    "namespace": meta["namespace"],
                    "uid": meta.get("uid"),
                },
                "reason": reason,
                "message": clean(message),
                "type": "Warning" if warning else "Normal",
                "source": {"component": COMPONENT},
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            }
        )
    except KubeApiError as error:
        log.warning("could not post event %s on %s/%s: %s", reason, meta["namespace"], meta["name"], error)
        return
    metrics.count_event(kind, reason, warning)
