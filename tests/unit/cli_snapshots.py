"""80-column snapshots of CLI output: rendered as a terminal of 80 columns, compared with
tests/unit/golden/cli/<name>. Regenerate after an intended change with `UPDATE_GOLDEN=1 pytest ...`."""

from __future__ import annotations

import io
import os
from pathlib import Path

from rich.console import Console, RenderableType

from colony.cli.kube import print_table

GOLDEN = Path(__file__).parent / "golden" / "cli"
WIDTH = 80


def render_80(renderable: RenderableType, *, wide: bool = False) -> str:
    """What an 80-column terminal shows (no colours), trailing spaces removed. `wide`: as the CLI
    prints `-o wide` there (at the table's natural width, for the terminal to wrap)."""
    console = Console(width=WIDTH, file=io.StringIO(), record=True, color_system=None)
    print_table(renderable, wide=wide, out=console)
    return "\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n"


def assert_snapshot(text: str, name: str, *, fits: bool = True) -> None:
    """`text` equals the golden file `name` and, when `fits`, fits 80 columns."""
    too_wide = [line for line in text.splitlines() if len(line) > WIDTH]
    assert not (fits and too_wide), f"wider than {WIDTH} columns: {too_wide}"
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"{path} is missing: run with UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(), f"{name} changed; regenerate with UPDATE_GOLDEN=1 if intended"
