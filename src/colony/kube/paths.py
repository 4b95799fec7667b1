"""Request paths of the Kubernetes API, built so that no name can leave its namespace or resource.

Names reach these paths from tenants' specs (Secret references, colony names, ...). Admission
validates them as DNS names already; this is the second wall: every segment is percent-quoted
(`/`, `?`, `#` and `%` cannot change the path's shape), and the segments the HTTP client would
resolve as dot segments (`.`, `..`: yarl normalises them, quoted or not) are refused outright, with
the empty name, before any request is made.
"""

from __future__ import annotations

from urllib.parse import quote

_REFUSED = frozenset({"", ".", ".."})


class InvalidName(ValueError):
    """A name that cannot be one path segment of a request; no request was made."""


def path_segment(value: str, what: str = "name") -> str:
    """`value` as one quoted path segment; InvalidName when it is empty, `.`, `..` or has a `/`."""
    if value in _REFUSED or "/" in value:
        raise InvalidName(f"{what} {value!r} is not a valid object name (empty, '.', '..' or with '/')")
    return quote(value, safe="")


def resource_path(
    group_version_path: str,
    plural: str,
    *,
    name: str | None = None,
    namespace: str | None = None,
    subresource: str | None = None,
) -> str:
    """The path of a collection (`name` None) or of one object (and its `subresource`).

    `group_version_path` is the served prefix from discovery, e.g. `/api/v1` or `/apis/apps/v1`;
    `namespace` is given for namespaced resources only (None or empty: cluster-wide).
    """
    parts = [group_version_path.rstrip("/")]
    if namespace:
        parts += ["namespaces", path_segment(namespace, "namespace")]
    parts.append(path_segment(plural, "resource"))
    if name is not None:
        parts.append(path_segment(name))
    if subresource is not None:
        if name is None:
            raise InvalidName(f"subresource {subresource!r} needs an object name")
        parts.append(path_segment(subresource, "subresource"))
    return "/".join(parts)


def group_version_path(api_version: str) -> str:
    """`/api/v1` for the core group, `/apis/<group>/<version>` otherwise; each part quoted."""
    if "/" not in api_version:
        return f"/api/{path_segment(api_version, 'version')}"
    group, version = api_version.split("/", 1)
    return f"/apis/{path_segment(group, 'group')}/{path_segment(version, 'version')}"
