"""Pure: the identifiers a Go text/template calls, read the way Go's lexer reads actions.

CAAPH renders a HelmChartProxy's valuesTemplate with sprig inside its controller. The Colony CRD
refuses `env`, `expandenv` and `getHostByName` with a CEL rule (api/colony.py
FORBIDDEN_TEMPLATE_CALL_PATTERN); the renderer checks again with this lexer, which is linear in the
template's length and needs no regular expression engine without backtracking.
"""

from __future__ import annotations

import string

from colony.api.colony import FORBIDDEN_TEMPLATE_FUNCTIONS

_WORD = frozenset(string.ascii_letters + string.digits + "_")
_QUOTES = frozenset("\"'`")
_NOT_A_CALL_AFTER = _WORD | _QUOTES | {".", "$"}
"""An identifier right after these is part of a word, a field (`.env`) or a variable (`$env`)."""


def action_identifiers(template: str) -> set[str]:
    """Identifiers inside `{{ ... }}` actions that are not fields or variables: function names,
    keywords and builtins. String, raw-string and character literals are skipped as Go skips them;
    an unterminated literal ends the scan (Go refuses such a template)."""
    found: set[str] = set()
    length = len(template)
    position = 0
    while (start := template.find("{{", position)) >= 0:
        position = start + 2
        previous = "{"
        while position < length:
            char = template[position]
            if char == "}":  # `}}` ends the action; a lone `}` is an error in Go: stop either way
                position += 1
                break
            if char in _QUOTES:
                end = _literal_end(template, position)
                if end is None:
                    return found
                previous, position = char, end
                continue
            if char in _WORD:
                end = position
                while end < length and template[end] in _WORD:
                    end += 1
                if previous not in _NOT_A_CALL_AFTER:
                    found.add(template[position:end])
                previous, position = template[end - 1], end
                continue
            previous = char
            position += 1
    return found


def _literal_end(template: str, start: int) -> int | None:
    """Index after the literal opening at `start`, or None when it never closes."""
    quote = template[start]
    if quote == "`":
        end = template.find("`", start + 1)
        return None if end < 0 else end + 1
    position = start + 1
    while position < len(template):
        char = template[position]
        if char == "\\":
            position += 2
        elif char == quote:
            return position + 1
        else:
            position += 1
    return None


def forbidden_calls(template: str | None) -> list[str]:
    """The forbidden sprig functions (FORBIDDEN_TEMPLATE_FUNCTIONS) that `template` calls."""
    if not template or "{{" not in template:
        return []
    return sorted(set(FORBIDDEN_TEMPLATE_FUNCTIONS) & action_identifiers(template))
