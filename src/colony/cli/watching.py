"""Watching custom resources as kubectl does: one list (with its resourceVersion), then the API
server's watch stream from there, re-listing when the version has expired (410 Gone).

Used by `-w/--watch` on list/get, `colony queue -w` and the `--wait` of `colonies create/delete`:
a change is printed as soon as the API server sends it, nothing polls.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from colony.api.base import ResourceDefinition
    from colony.kube.resources import Kube

WATCH_TIMEOUT_S = 240
"""Server-side timeout of one watch request; the stream is reopened after it."""
GONE = 410


@dataclass(frozen=True)
class Event:
    """One change: ADDED, MODIFIED or DELETED, and the object as it is now (or was last)."""

    type: str
    object: dict[str, Any]


def collection_path(resource: ResourceDefinition, namespace: str | None) -> str:
    """The API path of a custom resource's collection, in one namespace or (None) all of them."""
    base = f"/apis/{resource.group}/{resource.version}"
    if resource.scope == "Namespaced" and namespace:
        return f"{base}/namespaces/{namespace}/{resource.plural}"
    return f"{base}/{resource.plural}"


def _query(field_selector: str | None, **extra: str) -> list[tuple[str, str]]:
    query = [("fieldSelector", field_selector)] if field_selector else []
    return query + list(extra.items())


async def _request(kube: Kube, path: str, query: list[tuple[str, str]]) -> Any:
    """GET `path`; a watch may stay silent until its server-side timeout (and a little more)."""
    from colony.kube.timeouts import DEFAULT_TIMEOUTS, ApiTimeouts

    watching = any(key == "watch" for key, _ in query)
    bound = ApiTimeouts(DEFAULT_TIMEOUTS.connect_s, watch_s=WATCH_TIMEOUT_S).watch() if watching else None
    return await kube.api.call_api(
        path,
        "GET",
        {},
        query,
        {"Accept": "application/json"},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
        _request_timeout=bound,
    )


def _typed(items: list[dict[str, Any]], resource: ResourceDefinition) -> list[dict[str, Any]]:
    for item in items:
        item.setdefault("apiVersion", resource.api_version)
        item.setdefault("kind", resource.kind)
    return items


async def list_objects(
    kube: Kube, resource: ResourceDefinition, namespace: str | None, field_selector: str | None = None
) -> tuple[list[dict[str, Any]], str]:
    """(objects, the list's resourceVersion) of one namespace or, with None, all namespaces."""
    from colony.kube.resources import raise_for_status

    response = await _request(kube, collection_path(resource, namespace), _query(field_selector))
    try:
        await raise_for_status(response)
        data = await response.json(content_type=None)
    finally:
        response.release()
    return _typed(list(data.get("items") or []), resource), str(data["metadata"].get("resourceVersion", ""))


async def watch_events(
    kube: Kube,
    resource: ResourceDefinition,
    namespace: str | None,
    resource_version: str,
    field_selector: str | None = None,
) -> AsyncIterator[Event]:
    """Every change after `resource_version`, forever (reopening the stream after its timeout; after a
    410 Gone, a fresh list is sent as MODIFIED events)."""
    from colony.kube.resources import KubeApiError, raise_for_status, watch_stream

    version = resource_version
    path = collection_path(resource, namespace)
    while True:
        query = _query(
            field_selector,
            watch="true",
            resourceVersion=version,
            allowWatchBookmarks="true",
            timeoutSeconds=str(WATCH_TIMEOUT_S),
        )
        response = await _request(kube, path, query)
        expired = False
        try:
            await raise_for_status(response)
            async for event_type, obj in watch_stream(response):
                version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                if event_type == "BOOKMARK":
                    continue
                yield Event(event_type, _typed([obj], resource)[0])
        except KubeApiError as error:
            if error.status != GONE:
                raise
            expired = True
        finally:
            response.release()
        if expired:
            objects, version = await list_objects(kube, resource, namespace, field_selector)
            for obj in objects:
                yield Event("MODIFIED", obj)
