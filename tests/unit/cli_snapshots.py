"""80-column snapshots of CLI output: rendered as a terminal of 80 columns, compared with
tests/unit/golden/cli/<name>. Regenerate after an intended change with `UPDATE_GOLDEN=1 pytest ...`."""

from __future__ import annotations

import io
import os
from pathlib import Path

from rich.console import Console, RenderableType

GOLDEN = Path(__file__).parent / "golden" / "cli"
WIDTH = 80


def render_80(renderable: RenderableType) -> str:
    """What an 80-column terminal shows (no colours), trailing spaces removed."""
    console = Console(width=WIDTH, file=io.StringIO(), record=True, color_system=None)
    console.print(renderable)
    return "\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n"


def assert_snapshot(text: str, name: str) -> None:
    """`text` fits 80 columns and equals the golden file `name`."""
    too_wide = [line for line in text.splitlines() if len(line) > WIDTH]
    assert not too_wide, f"wider than {WIDTH} columns: {too_wide}"
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"{path} is missing: run with UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(), f"{name} changed; regenerate with UPDATE_GOLDEN=1 if intended"
