"""Help text as kubectl prints it: arguments as `NAME` / `[FILE]` in usage lines and without a type
(`<str>`) beside them. typer 0.29 writes a required argument as `{name}` and adds its type; the two
methods replaced here are the only ones that do (options get explicit metavars instead)."""

from __future__ import annotations

from typing import Any

from typer.core import TyperArgument


def _usage_display_name(self: TyperArgument) -> str:
    name = self.display_name_raw.upper()
    if not self.required and not name.startswith("["):
        name = f"[{name}]"
    return name + ("..." if self.nargs != 1 else "")


def _rich_display_name(self: TyperArgument) -> str:
    return self.display_name_raw.upper() + ("..." if self.metavar is None and self.nargs != 1 else "")


def _no_type(self: TyperArgument, ctx: Any) -> str | None:
    return None


def install() -> None:
    """Make every typer argument's help kubectl-like (idempotent)."""
    TyperArgument._usage_display_name = _usage_display_name  # type: ignore[method-assign]
    TyperArgument._rich_display_name = _rich_display_name  # type: ignore[method-assign]
    TyperArgument.display_type_rich = _no_type  # type: ignore[method-assign,assignment]
