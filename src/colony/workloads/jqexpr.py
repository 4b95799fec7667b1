"""Typed wrapper around the `jq` package: compiled-expression cache and evaluation helpers.

Expressions are compiled once per distinct text (an LRU cache), so validating a definition at load
time also warms the cache for every later evaluation. Every evaluation is bounded in its output:
at most `MAX_OUTPUTS` results of together at most `MAX_OUTPUT_BYTES` (JSON) bytes. Time is bounded
by the caller: the operator evaluates user expressions only in a worker process it can kill
(`colony.workloads.sandbox`), because jq runs in C and holds the GIL for as long as it runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import jq

PathKey = str | int
"""One step of a jq path: an object key or an array index."""


MAX_OUTPUTS = 10_000
"""Results one evaluation may yield."""
MAX_OUTPUT_BYTES = 1024 * 1024
"""JSON bytes all results of one evaluation may take together."""


class JqError(ValueError):
    """A jq expression did not compile or failed on its input."""


class OutputTooLarge(JqError):
    """An evaluation yielded more results, or more bytes, than the bounds allow."""


MODULE_DIRECTIVE = re.compile(r"\b(import|include)\s*\"|\bmodule\s*\{")
"""jq's module directives: `import "x" as $d {search: "/"}` reads any x.json on the filesystem."""


@lru_cache(maxsize=2048)
def _compiled(expression: str) -> Any:
    if MODULE_DIRECTIVE.search(expression):
        raise JqError("module directives (import, include, module) are not allowed: they read files")
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


def output_size(value: Any) -> int:
    """The length of `value` as compact JSON (a string's length without encoding it)."""
    if isinstance(value, str):
        return len(value) + 2
    if value is None or isinstance(value, bool | int | float):
        return 8
    return len(json.dumps(value, separators=(",", ":"), default=str))


def _bounded(outputs: Any, expression: str) -> list[Any]:
    found: list[Any] = []
    size = 0
    for output in outputs:
        size += output_size(output)
        if len(found) >= MAX_OUTPUTS or size > MAX_OUTPUT_BYTES:
            raise OutputTooLarge(
                f"{expression!r} yields more than {MAX_OUTPUTS} results or {MAX_OUTPUT_BYTES} bytes"
            )
        found.append(output)
    return found


def evaluate_all(expression: str, value: Any) -> list[Any]:
    """Every output of the expression on `value` (JSON-like Python data; Mapping views are fine).

    Raises `OutputTooLarge` past the output bounds (`MAX_OUTPUTS`, `MAX_OUTPUT_BYTES`), `JqError`
    when jq fails.
    """
    program = _compiled(expression)
    try:
        try:
            return _bounded(iter(program.input_value(value)), expression)
        except TypeError:  # not JSON-serialisable as it is: a Mapping view somewhere inside
            return _bounded(iter(program.input_value(plain(value))), expression)
    except OutputTooLarge:
        raise
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
