"""The pinned versions of everything external (binaries, upstream CRDs, Helm charts).

They live in `versions.env` beside this module, the one place where they are pinned: the hack/
build scripts source it, and the operator reads it (it ships inside the package).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

PINNED_VERSIONS_FILE = Path(__file__).with_name("versions.env")


@cache
def read_pinned_versions() -> dict[str, str]:
    """KEY=VALUE pairs of versions.env (comments and blank lines skipped)."""
    versions = {}
    for raw in PINNED_VERSIONS_FILE.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            versions[key] = value
    return versions


def pinned(key: str) -> str:
    """One pinned version, e.g. pinned("KUBERNETES_VERSION"); KeyError names the missing key."""
    try:
        return read_pinned_versions()[key]
    except KeyError:
        raise KeyError(f"{key} is not pinned in {PINNED_VERSIONS_FILE}") from None
