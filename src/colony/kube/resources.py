"""Generic, typed-enough access to any Kubernetes resource through the dynamic client.

Everything the operator owns is written with server-side apply under one field manager, so spec
edits propagate, fields others own are left alone, and re-applying after a crash is a no-op.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.dynamic import DynamicClient
from kubernetes_asyncio.dynamic.exceptions import ResourceNotFoundError

from colony.kube.paths import group_version_path, resource_path

FIELD_MANAGER = "colony-operator"
MERGE_PATCH = "application/merge-patch+json"

Object = dict[str, Any]
Objects = list[Object]


class KubeApiError(Exception):
    """The API server answered with an error status; `reason` is Kubernetes' (NotFound, Invalid...)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason


class NotFound(KubeApiError):
    """404: the object or its kind does not exist."""


class Conflict(KubeApiError):
    """409: the object changed since it was read (or already exists)."""


async def raise_for_status(response: Any) -> None:
    """For an error answer (an aiohttp response), NotFound (404), Conflict (409) or KubeApiError
    with the reason and message of its body."""
    if response.status < 400:
        return
    body = await response.text()
    try:
        data = json.loads(body)
    except ValueError:
        data = {"message": body[:300]}
    error = {404: NotFound, 409: Conflict}.get(response.status, KubeApiError)
    raise error(response.status, str(data.get("reason", "")), str(data.get("message", data)))


async def watch_stream(response: Any) -> AsyncIterator[tuple[str, Object]]:
    """The (type, object) events of an open watch answer, bookmarks included, each line parsed once;
    an ERROR event (e.g. 410 Gone: the version is too old) raises KubeApiError with its code."""
    async for line in response.content:
        if not line.strip():
            continue
        event = json.loads(line)
        event_type, obj = str(event.get("type")), dict(event.get("object") or {})
        if event_type == "ERROR":
            raise KubeApiError(
                int(obj.get("code") or 500), str(obj.get("reason") or "WatchError"), str(obj.get("message"))
            )
        yield event_type, obj


@dataclass
class _LabelBatch:
    """Label changes for one object waiting for its next patch, and who waits for it."""

    labels: dict[str, str | None] = field(default_factory=dict)
    waiters: list[asyncio.Future[Object]] = field(default_factory=list)


class Kube:
    """One cluster's API, addressed by (apiVersion, kind).

    The dynamic client is used for discovery (kind -> path) only: its requests do not raise on
    error statuses, so every request goes through _call(), which does.
    """

    def __init__(self, api: ApiClient) -> None:
        self.api = api
        self._dynamic: DynamicClient | None = None
        # (apiVersion, kind) -> discovered resource: the dynamic client's search is costly per request.
        self._resources: dict[tuple[str, str], Any] = {}
        self._label_batches: dict[str, _LabelBatch] = {}
        self._label_writers: dict[str, asyncio.Task[None]] = {}

    async def _path(
        self,
        api_version: str,
        kind: str,
        name: str | None,
        namespace: str | None,
        subresource: str | None = None,
    ) -> str:
        """The request path of a collection or object; every name in it is one quoted segment
        (InvalidName, before any request, for one that cannot be)."""
        resource = self._resources.get((api_version, kind))
        if resource is None:
            if self._dynamic is None:
                self._dynamic = await DynamicClient(self.api)
            try:
                resource = await self._dynamic.resources.get(api_version=api_version, kind=kind)
            except ResourceNotFoundError as error:
                raise NotFound(404, "NotFound", f"{kind} ({api_version}) is not served") from error
            self._resources[(api_version, kind)] = resource
        return resource_path(
            f"/{resource.prefix}/{resource.group_version}",
            str(resource.name).lower(),
            name=name,
            namespace=namespace if resource.namespaced else None,
            subresource=subresource,
        )

    async def _call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: list[tuple[str, str]] | None = None,
        content_type: str = "application/json",
    ) -> Object:
        response = await self.api.call_api(
            path,
            method,
            {},
            query or [],
            {"Accept": "application/json", "Content-Type": content_type},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
        )
        try:
            data = await response.json(content_type=None)
        except ValueError:  # not JSON: e.g. "404 page not found" for a group version not served
            data = {"message": (await response.text())[:300]}
            if response.status < 400:
                raise KubeApiError(response.status, "NotJSON", str(data["message"])) from None
        if response.status >= 400:
            error = {404: NotFound, 409: Conflict}.get(response.status, KubeApiError)
            raise error(response.status, str(data.get("reason", "")), str(data.get("message", data)))
        result: Object = data
        return result

    async def apply(self, manifest: Mapping[str, Any]) -> Object:
        """Server-side apply `manifest` (force: the operator is the owner of what it renders)."""
        meta = manifest["metadata"]
        path = await self._path(manifest["apiVersion"], manifest["kind"], meta["name"], meta.get("namespace"))
        return await self._call(
            "PATCH",
            path,
            body=dict(manifest),
            query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
            content_type="application/apply-patch+yaml",
        )

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Object | None:
        """The object, or None when it (or its kind) does not exist."""
        try:
            return await self._call("GET", await self._path(api_version, kind, name, namespace))
        except NotFound:
            return None

    async def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[Object]:
        """Objects of a kind, each with apiVersion and kind set (empty when the kind is not served)."""
        try:
            items, _ = await self.list_with_version(
                api_version, kind, namespace, label_selector=label_selector, field_selector=field_selector
            )
        except NotFound:
            return []
        return items

    async def list_with_version(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[Objects, str]:
        """`list`, with the list's resourceVersion (where a watch of the same objects starts);
        NotFound when the kind is not served."""
        query = [("labelSelector", label_selector)] if label_selector else []
        if field_selector:
            query.append(("fieldSelector", field_selector))
        result = await self._call("GET", await self._path(api_version, kind, None, namespace), query=query)
        items: list[Object] = result.get("items", [])
        for item in items:
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        return items, str((result.get("metadata") or {}).get("resourceVersion") or "")

    async def watch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        resource_version: str,
        *,
        label_selector: str | None = None,
        timeout_s: int = 60,
    ) -> AsyncIterator[tuple[str, Object]]:
        """The (type, object) events of a watch from `resource_version`, bookmarks included, each
        line parsed once; ends when the server ends the watch (after `timeout_s`). An ERROR event
        (e.g. 410 Gone: the version is too old) raises KubeApiError. The client's watch bound
        (kube/timeouts.py) ends a stream silent for too long."""
        query = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout_s)),
        ]
        if label_selector:
            query.append(("labelSelector", label_selector))
        response = await self.api.call_api(
            await self._path(api_version, kind, None, namespace),
            "GET",
            {},
            query,
            {"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
        )
        try:
            await raise_for_status(response)
            async for event in watch_stream(response):
                yield event
        finally:
            response.release()

    async def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        """Request deletion (background propagation); False when the object was already gone."""
        try:
            await self._call(
                "DELETE",
                await self._path(api_version, kind, name, namespace),
                body={"propagationPolicy": "Background"},
            )
        except NotFound:
            return False
        return True

    async def patch_status(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None,
        status: Mapping[str, Any],
        *,
        resource_version: str | None = None,
    ) -> Object:
        """Merge-patch the status subresource.

        With `resource_version` the patch only applies to that version of the object (else 409
        Conflict): a status computed from a stale read must not overwrite a newer one.
        """
        path = await self._path(api_version, kind, name, namespace, "status")
        body: dict[str, Any] = {"status": dict(status)}
        if resource_version is not None:
            body["metadata"] = {"resourceVersion": resource_version}
        return await self._call("PATCH", path, body=body, content_type=MERGE_PATCH)

    async def patch_labels(
        self, api_version: str, kind: str, name: str, namespace: str | None, labels: Mapping[str, str | None]
    ) -> Object:
        """Merge-patch labels (a None value removes the label).

        Calls for one object made while a patch of its labels is in flight go out together in its
        next patch, their changes applied in call order: reserving GPUs for hundreds of requests on
        a few nodes costs a few writes, not hundreds that the API server serializes per node.
        """
        path = await self._path(api_version, kind, name, namespace)
        waiter: asyncio.Future[Object] = asyncio.get_running_loop().create_future()
        batch = self._label_batches.setdefault(path, _LabelBatch())
        batch.labels.update(labels)
        batch.waiters.append(waiter)
        if path not in self._label_writers:
            self._label_writers[path] = asyncio.create_task(self._write_labels(path))
        return await waiter

    async def _write_labels(self, path: str) -> None:
        """Patch the object's batched label changes until none are left; each waiter gets the
        patched object or the error of the patch that carried its change."""
        try:
            while (batch := self._label_batches.pop(path, None)) is not None:
                body = {"metadata": {"labels": batch.labels}}
                try:
                    patched = await self._call("PATCH", path, body=body, content_type=MERGE_PATCH)
                except asyncio.CancelledError:
                    for waiter in batch.waiters:
                        waiter.cancel()
                    raise
                except Exception as error:  # handed to the callers, who handle it
                    for waiter in batch.waiters:
                        if not waiter.done():
                            waiter.set_exception(error)
                else:
                    for waiter in batch.waiters:
                        if not waiter.done():
                            waiter.set_result(patched)
        finally:
            del self._label_writers[path]

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None,
        body: Any,
        *,
        subresource: str | None = None,
        json_patch: bool = False,
    ) -> Object:
        """Merge-patch an object (or one of its subresources, e.g. `status`); with `json_patch`,
        `body` is a JSON Patch (a list of operations). A `metadata.resourceVersion` in a merge patch
        makes it apply only to that version (else 409 Conflict)."""
        path = await self._path(api_version, kind, name, namespace, subresource or None)
        content_type = "application/json-patch+json" if json_patch else MERGE_PATCH
        return await self._call("PATCH", path, body=body, content_type=content_type)

    async def api_resources(self, api_version: str) -> Sequence[Object] | None:
        """The resources (with subresources, e.g. `pytorchjobs/status`) the API server serves in one
        group version, from discovery; None when it serves no such group version."""
        path = group_version_path(api_version)
        try:
            found = await self._call("GET", path)
        except NotFound:
            return None
        resources: Sequence[Object] = found.get("resources") or []
        return resources

    async def create(self, manifest: Mapping[str, Any], *, field_manager: str | None = None) -> Object:
        """Create an object (POST; `metadata.generateName` works); Conflict when it exists.
        `field_manager` names the owner of its fields (default: the client's user agent)."""
        meta = manifest["metadata"]
        path = await self._path(manifest["apiVersion"], manifest["kind"], None, meta.get("namespace"))
        query = [("fieldManager", field_manager)] if field_manager else []
        return await self._call("POST", path, body=dict(manifest), query=query)
