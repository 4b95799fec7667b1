"""Kubernetes-safe object names: length limits and deterministic shortening."""

from __future__ import annotations

import hashlib
import re

MAX_NAME_LENGTH = 63
"""Longest name we render: Cluster API and CAAPH copy object names into label values (<= 63)."""

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_HASH_LENGTH = 8


def short_hash(text: str, length: int = _HASH_LENGTH) -> str:
    """A stable lowercase hex digest prefix of `text` (sha256)."""
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def bounded_name(name: str, max_length: int = MAX_NAME_LENGTH) -> str:
    """`name` itself if short enough, else a truncated prefix plus `-<hash of the full name>`.

    Deterministic, so the same input always maps to the same object; distinct long names that
    share a prefix still get distinct results (the hash covers the whole name).
    """
    if len(name) <= max_length:
        return name
    prefix = name[: max_length - _HASH_LENGTH - 1].rstrip("-.")
    return f"{prefix}-{short_hash(name)}"


def name_problem(name: str) -> str | None:
    """Why `name` cannot be used for a rendered object, or None when it can."""
    if len(name) > MAX_NAME_LENGTH:
        return f"name {name!r} is {len(name)} characters long; at most {MAX_NAME_LENGTH} are allowed"
    if not _DNS_SUBDOMAIN.match(name):
        return f"name {name!r} is not a lowercase RFC 1123 DNS name"
    return None
