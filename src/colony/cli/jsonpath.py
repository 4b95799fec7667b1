"""kubectl's `-o jsonpath=TEMPLATE`: the template form (`{...}` actions among literal text) on top
of jsonpath-ng, which evaluates each path.

A template is literal text with actions in braces, as in kubectl:

- `{.items[*].metadata.name}`: a path, relative to the current object (`.x`, `@.x` or `x`) or to
  the root (`$.x`); its matches are printed separated by spaces; a path that matches nothing prints
  nothing (kubectl's default `--allow-missing-template-keys`);
- `{"\\n"}`, `{'\\t'}`: quoted text, with the escapes \\n \\t \\r \\\\ \\" \\';
- `{range .items[*]}...{end}`: the inner template once per match, paths relative to the match.

Field names are taken literally (`{.metadata.labels.app\\.kubernetes\\.io/name}` or
`{.metadata.labels['app.kubernetes.io/name']}`); filters `[?(@.status.phase=="Ready")]`, slices and
`..` are jsonpath-ng's. Strings print as they are, numbers and booleans as in JSON, objects and
lists as compact JSON. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when a template is parsed: every command imports this module
    from jsonpath_ng import JSONPath

PREFIX = "jsonpath="
"""How `-o` names a template: `-o jsonpath='{.items[*].metadata.name}'`."""

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'"}
_QUOTES = ("'", '"')
_NAME_CHARS = "_-/"
"""Besides letters and digits, what an unquoted field name holds (`\\.` is a dot in it)."""


class JsonPathError(ValueError):
    """A template that cannot be parsed or evaluated; the message says where and why."""


class OutputChoice:
    """What a command's `-o` parses to: one of its formats (an enum mixing this in) or a
    `JsonPathTemplate`."""


@dataclass(frozen=True)
class _Text:
    text: str


@dataclass(frozen=True)
class _Path:
    source: str
    path: JSONPath
    absolute: bool


@dataclass(frozen=True)
class _Range:
    path: _Path
    body: tuple[_Text | _Path | _Range, ...]


_Node = _Text | _Path | _Range


@dataclass(frozen=True, eq=False)
class JsonPathTemplate(OutputChoice):
    """A parsed kubectl jsonpath template; `render(data)` is what `-o jsonpath=...` prints."""

    source: str
    nodes: tuple[_Node, ...]

    def render(self, data: Any) -> str:
        """The template's text for `data` (the object, or the List that `-o json` would print)."""
        return "".join(_render(self.nodes, data, data))


def parse_template(template: str) -> JsonPathTemplate:
    """Parse a kubectl jsonpath template (without the `jsonpath=` prefix); JsonPathError when it
    is malformed: an unclosed `{`, an empty `{}`, a `range` without `end` (or the reverse), or a
    path jsonpath-ng cannot parse."""
    if not template:
        raise JsonPathError("the template is empty, e.g. jsonpath='{.metadata.name}'")
    stack: list[tuple[_Path | None, list[_Node]]] = [(None, [])]
    for literal, action in _split(template):
        body = stack[-1][1]
        if literal:
            body.append(_Text(literal))
        if action is None:
            continue
        words = action.split(maxsplit=1)
        if action[:1] in _QUOTES:
            body.append(_Text(_unquote(action)))
        elif words == ["end"]:
            if len(stack) == 1:
                raise JsonPathError("{end} without a {range ...} before it")
            path, inner = stack.pop()
            assert path is not None
            stack[-1][1].append(_Range(path, tuple(inner)))
        elif words[0] == "range":
            if len(words) == 1:
                raise JsonPathError("{range} needs a path, e.g. {range .items[*]}")
            stack.append((compile_path(words[1]), []))
        else:
            body.append(compile_path(action))
    if len(stack) > 1:
        unclosed = stack[-1][0]
        raise JsonPathError(f"{{range {unclosed.source if unclosed else ''}}} has no {{end}}")
    return JsonPathTemplate(template, tuple(stack[0][1]))


def _split(template: str) -> list[tuple[str, str | None]]:
    """(literal text, action inside braces or None) pairs; braces inside quotes do not count."""
    parts: list[tuple[str, str | None]] = []
    literal: list[str] = []
    index = 0
    while index < len(template):
        char = template[index]
        if char != "{":
            literal.append(char)
            index += 1
            continue
        end = _closing_brace(template, index + 1)
        action = template[index + 1 : end].strip()
        if not action:
            raise JsonPathError(f"empty {{}} at character {index + 1}")
        parts.append(("".join(literal), action))
        literal = []
        index = end + 1
    if literal:
        parts.append(("".join(literal), None))
    return parts


def _closing_brace(template: str, start: int) -> int:
    quote = ""
    index = start
    while index < len(template):
        char = template[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in _QUOTES:
            quote = char
        elif char == "}":
            return index
        elif char == "{":
            break
        index += 1
    raise JsonPathError(f"the {{ at character {start} is not closed")


def _unquote(action: str) -> str:
    quote = action[0]
    if len(action) < 2 or action[-1] != quote:
        raise JsonPathError(f"unterminated text {action}")
    out: list[str] = []
    chars = iter(action[1:-1])
    for char in chars:
        if char != "\\":
            out.append(char)
            continue
        escaped = next(chars, "")
        if escaped not in _ESCAPES:
            raise JsonPathError(f"unknown escape \\{escaped} in {action}")
        out.append(_ESCAPES[escaped])
    return "".join(out)


def compile_path(expression: str) -> _Path:
    """One path of a template (`.items[*].metadata.name`, `$.kind`, `@.x`, `metadata.name`),
    compiled by jsonpath-ng after `to_jsonpath_ng` quotes its field names."""
    from jsonpath_ng.exceptions import JSONPathError
    from jsonpath_ng.ext.parser import parse as parse_path

    source = expression.strip()
    try:
        path = parse_path(to_jsonpath_ng(source))
    except (JSONPathError, ValueError, TypeError, IndexError) as error:
        reason = re.sub(r" at \d+:\d+|Error on line \d+, col \d+: ", "", " ".join(str(error).split()))
        raise JsonPathError(f"cannot parse {{{source}}}: {reason}") from error
    return _Path(source, path, source.startswith("$"))


def to_jsonpath_ng(expression: str) -> str:
    """kubectl's path syntax in jsonpath-ng's: rooted at `$`, every dotted field name quoted
    (so `where`, `1` or `nvidia.com/gpu` are names, `\\.` is a dot inside a name). Brackets
    (indexes, slices, filters, quoted names) pass through unchanged."""
    rest = expression[1:] if expression[:1] in ("$", "@") else expression
    if rest == ".":  # `{.}`: the current object itself
        rest = ""
    if rest and rest[0] not in ".[":
        rest = "." + rest
    out = ["$"]
    index = 0
    while index < len(rest):
        char = rest[index]
        if char == "[":
            end = _closing_bracket(rest, index)
            out.append(rest[index : end + 1])
            index = end + 1
        elif char == ".":
            dots = ".." if rest.startswith("..", index) else "."
            index += len(dots)
            name, index = _field_name(rest, index)
            if name is None and not rest.startswith("[", index):
                raise JsonPathError(f"a field name must follow the {dots} in {expression}")
            if name is None:  # `.[0]`: the dot only leads to a bracket
                out.append(".." if dots == ".." else "")
            else:
                out.append(dots + name)
        else:  # something a path cannot hold: jsonpath-ng names it
            out.append(rest[index:])
            break
    return "".join(out)


def _closing_bracket(text: str, start: int) -> int:
    depth, quote, index = 0, "", start
    while index < len(text):
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in _QUOTES:
            quote = char
        elif char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth == 0:
                return index
        index += 1
    raise JsonPathError(f"a [ in {text} is not closed")


def _field_name(text: str, start: int) -> tuple[str | None, int]:
    """The (quoted) field name at `start` and where it ends; None when there is none."""
    if start < len(text) and text[start] in _QUOTES:
        end = start + 1
        while end < len(text) and text[end] != text[start]:
            end += 2 if text[end] == "\\" else 1
        return text[start : end + 1], end + 1
    if text.startswith("*", start):
        return "*", start + 1
    name: list[str] = []
    index = start
    while index < len(text):
        if text.startswith("\\.", index):
            name.append(".")
            index += 2
        elif text[index].isalnum() or text[index] in _NAME_CHARS:
            name.append(text[index])
            index += 1
        else:
            break
    return (json.dumps("".join(name)) if name else None), index


def _render(nodes: Sequence[_Node], root: Any, current: Any) -> list[str]:
    out: list[str] = []
    for node in nodes:
        if isinstance(node, _Text):
            out.append(node.text)
        elif isinstance(node, _Path):
            out.append(" ".join(format_value(v) for v in _find(node, root, current)))
        else:
            for match in _find(node.path, root, current):
                for item in match if isinstance(match, list) else [match]:
                    out += _render(node.body, root, item)
    return out


def _find(path: _Path, root: Any, current: Any) -> list[Any]:
    try:
        return [match.value for match in path.path.find(root if path.absolute else current)]
    except Exception as error:  # jsonpath-ng's filters raise what the comparison raises
        raise JsonPathError(f"{{{path.source}}} cannot be evaluated: {error}") from error


def format_value(value: Any) -> str:
    """A matched value as kubectl prints it: strings as they are, the rest as compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return json.dumps(value, separators=(",", ":"))
