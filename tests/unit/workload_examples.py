"""Shared helpers of the test_workload_* tests: the vendored upstream examples and the definitions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from colony.workloads.definition import WorkloadDefinition, load_builtin_definitions

EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "upstream-examples"


def example(relative: str) -> dict[str, Any]:
    """The framework object of a vendored example file (other documents in the file are skipped)."""
    documents = [d for d in yaml.safe_load_all((EXAMPLES / relative).read_text()) if d]
    found = [d for d in documents if d.get("apiVersion", "").split("/")[0] not in ("v1", "")]
    assert len(found) == 1, f"{relative}: expected one framework object, found {len(found)}"
    document: dict[str, Any] = found[0]
    return document


def builtin(kind: str) -> WorkloadDefinition:
    """The shipped definition of a kind."""
    matches = [d for d in load_builtin_definitions() if d.kind == kind]
    assert len(matches) == 1, kind
    return matches[0]
