"""Typed wrapper around the `jq` package: compiled-expression cache and evaluation helpers.

Expressions are compiled once per distinct text (an LRU cache), so validating a definition at load
time also warms the cache for every later evaluation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import jq

PathKey = str | int
"""One step of a jq path: an object key or an array index."""


class JqError(ValueError):
    """A jq expression did not compile or failed on its input."""


@lru_cache(maxsize=2048)
def _compiled(expression: str) -> Any:
    try:
        return jq.compile(expression)
    except ValueError as error:
        raise JqError(_first_line(error)) from None


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return "; ".join(lines[:2]) if lines else type(error).__name__


def check(expression: str) -> None:
    """Raise `JqError` unless the expression compiles."""
    _compiled(expression)


def plain(value: Any) -> Any:
    """A deep copy of JSON-like data with every Mapping a dict and every sequence a list.

    Objects from kopf handlers are Mapping views (kopf.Body), which JSON encoders refuse.
    """
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


def evaluate_all(expression: str, value: Any) -> list[Any]:
    """Every output of the expression on `value` (JSON-like Python data; Mapping views are fine)."""
    program = _compiled(expression)
    try:
        try:
            return list(program.input_value(value).all())
        except TypeError:  # not JSON-serialisable as it is: a Mapping view somewhere inside
            return list(program.input_value(plain(value)).all())
    except ValueError as error:
        raise JqError(_first_line(error)) from None


def evaluate_first(expression: str, value: Any) -> Any:
    """The first output of the expression on `value`; None when it yields nothing."""
    outputs = evaluate_all(expression, value)
    return outputs[0] if outputs else None


def paths(expression: str, value: Any) -> list[list[PathKey]]:
    """The paths `path(expression)` yields on `value`; the expression must be a path expression."""
    return [list(p) for p in evaluate_all(f"path({expression})", value)]


def is_path_expression(expression: str) -> bool:
    """False when jq rejects `path(expression)` as not a path expression (checked on a null input).

    Other runtime errors on null (such as iterating over null without `?`) do not count: they depend
    on the object the expression will see.
    """
    try:
        paths(expression, None)
    except JqError as error:
        return "Invalid path expression" not in str(error)
    return True


def get_path(value: Any, path: Sequence[PathKey]) -> Any:
    """The value at `path` (jq's getpath): None where the path does not exist."""
    for key in path:
        if isinstance(key, int) and isinstance(value, list):
            value = value[key] if -len(value) <= key < len(value) else None
        elif isinstance(key, str) and isinstance(value, dict):
            value = value.get(key)
        else:
            return None
    return value
