"""An informer: the objects of one kind kept in memory by a LIST and a WATCH from its version.

A reader takes `objects()` instead of listing the kind again (a LIST of thousands of objects costs
the API server and the reader seconds; the watch delivers only changes). Writers that know a newer
version of an object than the watch has delivered yet (the answer to their own PATCH) `put` it, so
the next reader sees their write at once. Each object keeps the newest version seen, by
resourceVersion (etcd revisions, compared as integers; a version that is not an integer always wins).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping
from typing import Any, TypeVar

from kubernetes_asyncio import client, watch

from colony.kube.resources import Kube
from colony.kube.timeouts import DEFAULT_TIMEOUTS, ApiTimeouts
from colony.labels import LAST_HANDLED_ANNOTATION

log = logging.getLogger(__name__)

RELIST_DELAY_S = 1.0
"""Pause before listing again after the watch failed."""

T = TypeVar("T")


class WatchStalled(TimeoutError):
    """A watch delivered no event and no bookmark within its stall bound (a half-open connection, or
    a server that stopped answering): its informer lists again."""


async def until_stalled(events: AsyncIterable[T], stall_s: float) -> AsyncIterator[T]:
    """The items of `events`; WatchStalled when the next one takes longer than `stall_s` seconds.

    The stall detector of a watch: the server ends every healthy watch after its timeoutSeconds
    (below `stall_s`), so silence beyond it means the stream is dead even if its socket is open.
    """
    iterator = aiter(events)
    while True:
        try:
            async with asyncio.timeout(stall_s):
                item = await anext(iterator)
        except StopAsyncIteration:
            return
        except TimeoutError:
            raise WatchStalled(f"no event or bookmark for {stall_s:g}s") from None
        yield item


def resource_version(obj: Mapping[str, Any] | None) -> int | None:
    """An object's resourceVersion as an integer (an etcd revision); None when it has none."""
    value = str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")
    return int(value) if value.isdigit() else None


def newer(candidate: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Whether `candidate` is at least as new as `current` (two versions of one object)."""
    a, b = resource_version(candidate), resource_version(current)
    return a is None or b is None or a >= b


DROPPED_ANNOTATIONS = (LAST_HANDLED_ANNOTATION,)
"""Annotations no reader of an informer needs: kopf's diff base repeats the whole spec."""


SHARED_STRING_MAX = 64
"""Strings up to this length are shared between the objects an informer keeps (sys.intern)."""


def compact(value: Any) -> Any:
    """`value` rebuilt with one shared copy of each dict key and short string.

    Each watch event is parsed on its own, so every object comes with its own copies of the same
    keys ("metadata", "lastTransitionTime", ...) and values ("True", a reason, a queue name): shared,
    a stored GPR takes 2.0 KB instead of 5.1 KB (tests/unit/test_informer.py measures it)."""
    if isinstance(value, dict):
        return {sys.intern(k) if isinstance(k, str) else k: compact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [compact(item) for item in value]
    if isinstance(value, str) and len(value) <= SHARED_STRING_MAX:
        return sys.intern(value)
    return value


def trimmed(obj: Mapping[str, Any]) -> dict[str, Any]:
    """`obj` without what only the API server and kopf read (managedFields, kopf's diff base): a
    third to half of a stored GPR, times the thousands an informer keeps; compacted (`compact`)."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    annotations = meta.get("annotations")
    if annotations and any(key in annotations for key in DROPPED_ANNOTATIONS):
        meta["annotations"] = {k: v for k, v in annotations.items() if k not in DROPPED_ANNOTATIONS}
    stored: dict[str, Any] = compact({**obj, "metadata": meta})
    return stored


def object_key(obj: Mapping[str, Any]) -> str:
    """`namespace/name` (or `name` for a cluster-scoped object)."""
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta["name"])


class Informer:
    """The objects of one custom resource kind, cluster-wide, kept by LIST + WATCH (`run`)."""

    def __init__(
        self,
        api: client.ApiClient,
        group: str,
        version: str,
        plural: str,
        kind: str,
        on_event: Callable[[str, Mapping[str, Any]], None] | None = None,
        timeouts: ApiTimeouts = DEFAULT_TIMEOUTS,
    ) -> None:
        """`on_event(type, object)` is called after each watch event is applied."""
        self.api = api
        self.timeouts = timeouts
        self.on_event = on_event
        self.group, self.version, self.plural, self.kind = group, version, plural, kind
        self._objects: dict[str, dict[str, Any]] = {}
        self._deleted: dict[str, int] = {}
        """Versions at which objects were seen deleted (a late `put` must not bring them back)."""
        self.synced = asyncio.Event()
        """Set once the first LIST is in; `objects()` is complete from then on."""

    def objects(self) -> list[dict[str, Any]]:
        """Every object, newest version known (the dicts are never changed in place)."""
        return list(self._objects.values())

    def get(self, key: str) -> dict[str, Any] | None:
        """The object `namespace/name` (or `name`), None when there is none."""
        return self._objects.get(key)

    def put(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        """Keep `obj` (trimmed) unless a newer version of it (or its deletion) is known; the copy
        kept, or None when it was not."""
        key = object_key(obj)
        current = self._objects.get(key)
        deleted, version = self._deleted.get(key), resource_version(obj)
        if deleted is not None and version is not None and version <= deleted:
            return None
        if current is not None and not newer(obj, current):
            return None
        api_version = f"{self.group}/{self.version}" if self.group else self.version
        kept = {"apiVersion": api_version, "kind": self.kind, **trimmed(obj)}
        self._objects[key] = kept
        return kept

    def remove(self, obj: Mapping[str, Any]) -> None:
        """The object was deleted (at `obj`'s version)."""
        key = object_key(obj)
        current = self._objects.get(key)
        if current is not None and not newer(obj, current):
            return  # a later version was seen: the object was created again
        self._objects.pop(key, None)
        if (version := resource_version(obj)) is not None:
            self._deleted[key] = version

    def apply(self, event_type: str, obj: Mapping[str, Any]) -> None:
        """One watch event."""
        if event_type == "DELETED":
            self.remove(obj)
        elif event_type in ("ADDED", "MODIFIED"):
            self.put(obj)
        else:
            return
        if self.on_event is not None:
            self.on_event(event_type, obj)

    def replace(self, items: list[dict[str, Any]]) -> None:
        """A fresh LIST: exactly these objects (newer versions already known are kept)."""
        fresh = {object_key(item): item for item in items}
        for key in list(self._objects):
            if key not in fresh:
                del self._objects[key]
        self._deleted.clear()
        for item in items:
            self.put(item)

    async def run(self) -> None:
        """LIST, then WATCH from the list's version; LIST again whenever the watch fails."""
        api = client.CustomObjectsApi(self.api)
        while True:
            try:
                listed = await api.list_cluster_custom_object(self.group, self.version, self.plural)
                self.replace(listed.get("items") or [])
                self.synced.set()
                await self._watch(api, listed["metadata"]["resourceVersion"])
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the API server went away or expired our version: relist
                log.warning("%s watch ended (%s); listing again", self.plural, error)
            await asyncio.sleep(RELIST_DELAY_S)

    async def _watch(self, api: client.CustomObjectsApi, version: str) -> None:
        """Apply events until the stream fails (an expired version raises ApiException 410, a
        stream with no event and no bookmark past the stall bound raises WatchStalled).

        The server ends each watch after `timeouts.watch_s`; the next one resumes from the last
        version seen, so a healthy watch never relists and a dead one is noticed within the stall bound.
        """
        while True:
            stream = watch.Watch()
            events = stream.stream(
                api.list_cluster_custom_object,
                self.group,
                self.version,
                self.plural,
                resource_version=version,
                allow_watch_bookmarks=True,
                timeout_seconds=max(1, int(self.timeouts.watch_s)),
                _request_timeout=self.timeouts.watch(),
            )
            try:
                async for event in until_stalled(events, self.timeouts.watch_stall_s):
                    self.apply(str(event.get("type")), event["object"])
            finally:
                with contextlib.suppress(Exception):
                    await stream.close()
            version = stream.resource_version or version


class SelectedInformer(Informer):
    """The objects of any kind (core kinds too) in one namespace that match a label selector, kept
    by LIST + WATCH through a `Kube` client; objects are stored as `view(object)` (what readers need).

    Besides the objects it knows `seen_version`, the newest resourceVersion the API server has
    delivered (list, event or bookmark): a writer that knows the version of its own write can tell
    whether the objects already include it. `current` is False from a failed watch until the next
    LIST is in (the objects may be stale meanwhile).
    """

    def __init__(
        self,
        kube: Kube,
        api_version: str,
        kind: str,
        namespace: str,
        label_selector: str,
        view: Callable[[Mapping[str, Any]], dict[str, Any]] = dict,
        timeouts: ApiTimeouts = DEFAULT_TIMEOUTS,
        index_label: str | None = None,
    ) -> None:
        """`index_label`: the objects are also kept by that label's value (`labelled`)."""
        group, _, version = api_version.rpartition("/")
        super().__init__(kube.api, group, version, "", kind, timeouts=timeouts)
        self.kube, self.namespace, self.label_selector, self.view = kube, namespace, label_selector, view
        self.index_label = index_label
        self._keys_by_value: dict[str, set[str]] = {}
        self._value_of_key: dict[str, str] = {}
        self.seen_version = 0
        self.current = False

    def labelled(self, value: str) -> list[dict[str, Any]]:
        """The objects whose `index_label` is `value`."""
        return [self._objects[key] for key in self._keys_by_value.get(value, ())]

    def _index(self, key: str) -> None:
        if self.index_label is None:
            return
        old = self._value_of_key.pop(key, None)
        if old is not None:
            keys = self._keys_by_value[old]
            keys.discard(key)
            if not keys:
                del self._keys_by_value[old]
        stored = self._objects.get(key)
        value = ((stored or {}).get("metadata", {}).get("labels") or {}).get(self.index_label)
        if value is not None:
            self._value_of_key[key] = value
            self._keys_by_value.setdefault(value, set()).add(key)

    def remove(self, obj: Mapping[str, Any]) -> None:
        """The object was deleted (at `obj`'s version)."""
        super().remove(obj)
        self._index(object_key(obj))

    def replace(self, items: list[dict[str, Any]]) -> None:
        """A fresh LIST: exactly these objects."""
        super().replace(items)
        self._keys_by_value, self._value_of_key = {}, {}
        for key in self._objects:
            self._index(key)

    def _saw(self, version: str | int | None) -> None:
        text = str(version or "")
        if text.isdigit():
            self.seen_version = max(self.seen_version, int(text))

    def put(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        """Keep the view of `obj` (with its metadata's name, namespace and resourceVersion)."""
        kept = super().put(self.view(obj))
        self._index(object_key(obj))
        return kept

    async def run(self) -> None:
        """LIST, then WATCH from the list's version; LIST again whenever the watch fails."""
        api_version = f"{self.group}/{self.version}" if self.group else self.version
        failures = 0
        while True:
            try:
                items, version = await self.kube.list_with_version(
                    api_version, self.kind, self.namespace, label_selector=self.label_selector
                )
                self.replace(items)
                self._saw(version)
                self.current = True
                self.synced.set()
                failures = 0
                while True:  # the server ends each watch after watch_s; resume from the last version
                    events = self.kube.watch(
                        api_version,
                        self.kind,
                        self.namespace,
                        version,
                        label_selector=self.label_selector,
                        timeout_s=max(1, int(self.timeouts.watch_s)),
                    )
                    async for event_type, obj in until_stalled(events, self.timeouts.watch_stall_s):
                        self.apply(event_type, obj)
                        version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                        self._saw(version)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the API server went away or expired our version: relist
                self.current = False
                failures += 1
                log.log(
                    logging.WARNING if failures == 1 else logging.DEBUG,
                    "%s %s watch in %s ended (%s); listing again",
                    self.kind,
                    self.label_selector,
                    self.namespace,
                    error,
                )
            # an unreachable server is retried less and less often (1 s doubling to 32 s)
            await asyncio.sleep(RELIST_DELAY_S * 2 ** min(max(failures - 1, 0), 5))
