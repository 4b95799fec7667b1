"""`python -m colony.simulate tile TRACE.csv TOTAL > OUT.csv`: a larger trace from a shipped one."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from colony.simulate.trace import load_trace, tile, write_trace


def main(argv: Sequence[str] | None = None) -> None:
    """Tile a canonical trace to TOTAL jobs (back-to-back copies, see trace.tile) on stdout."""
    parser = argparse.ArgumentParser(prog="python -m colony.simulate", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    tiling = commands.add_parser("tile", help="back-to-back copies of a trace, cut at TOTAL jobs")
    tiling.add_argument("trace", type=Path)
    tiling.add_argument("total", type=int)
    args = parser.parse_args(argv)
    write_trace(tile(load_trace(args.trace), args.total), sys.stdout)


if __name__ == "__main__":
    main()
