"""The valuesTemplate guard: sprig's env, expandenv and getHostByName never reach CAAPH, whether the
API server's CEL rule (a regular expression) or the renderer's lexer looks at the template."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from colony.api.colony import FORBIDDEN_TEMPLATE_CALL_PATTERN
from colony.render.go_templates import action_identifiers, forbidden_calls

CEL_REGEX = re.compile(FORBIDDEN_TEMPLATE_CALL_PATTERN, re.ASCII)

# Each parses in Go's text/template and calls the function (checked with Go 1.2x text/template).
HOSTILE = {
    "plain": ('{{ env "AWS_SECRET_ACCESS_KEY" }}', ["env"]),
    "no-spaces": ('{{env "HOME"}}', ["env"]),
    "trimmed": ('{{- env "HOME" -}}', ["env"]),
    "pipeline": ('{{ "HOME" | env }}', ["env"]),
    "pipeline-tight": ('{{"HOME"|env}}', ["env"]),
    "parenthesised": ('key: {{ printf "%s" (env "HOME") }}', ["env"]),
    "expandenv": ('token: {{ expandenv "$AWS_SESSION_TOKEN" }}', ["expandenv"]),
    "dns": ('ip: {{ getHostByName "kubernetes.default" }}', ["getHostByName"]),
    "assigned": ('{{ $x := env "HOME" }}{{ $x }}', ["env"]),
    "after-closing-braces-in-a-string": ('{{ "}}" | env }}', ["env"]),
    "after-a-raw-string": ("{{ `}}` | env }}", ["env"]),
    "after-a-char": ("{{ printf \"%c\" '}' | env }}", ["env"]),
    "escaped-quote": ('{{ "a\\"}}" | env }}', ["env"]),
    "multi-line": ('a: 1\nb: {{\n  env\n  "HOME"\n}}\n', ["env"]),
    "all-three": (
        '{{ env "A" }}{{ expandenv "B" }}{{ getHostByName "c" }}',
        ["env", "expandenv", "getHostByName"],
    ),
    "second-action": ('{{ .Cluster.metadata.name }}: {{ env "A" }}', ["env"]),
}

# Valid templates that must stay accepted: the words as YAML keys, fields, variables, strings,
# and longer identifiers.
BENIGN = [
    "toolkit:\n  env:\n    - name: CONTAINERD_CONFIG\n      value: /etc/k0s/containerd.d/nvidia.toml\n",
    "env: {{ .Cluster.metadata.name }}\nexpandenv: x\ngetHostByName: y\n",
    "name: {{ .Cluster.metadata.name }}",
    "e: {{ .Cluster.spec.env }}",
    "e: {{ $env := 1 }}{{ $env }}",
    'e: {{ "env" }} {{ `expandenv` }}',
    "e: {{ environment }} {{ myenv }} {{ env_x }}",
    "e: {{ getHostByNameX }}",
    "plain: values\n",
    "",
]


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_forbidden_calls_are_found_by_the_lexer_and_the_cel_regex(case: str) -> None:
    template, expected = HOSTILE[case]
    assert forbidden_calls(template) == expected
    assert CEL_REGEX.search(template), template


@pytest.mark.parametrize("template", BENIGN)
def test_benign_templates_pass_both(template: str) -> None:
    assert forbidden_calls(template) == []
    assert not CEL_REGEX.search(template), template


def test_identifiers_are_those_of_actions_only() -> None:
    template = 'env: {{ if eq .a "env" }}{{ include "x" . | indent 2 }}{{ end }} text env'
    assert action_identifiers(template) == {"if", "eq", "include", "indent", "2", "end"}  # and numbers


def test_an_unterminated_literal_ends_the_scan() -> None:
    # Go refuses the whole template (it never runs); the lexer stops where Go's lexer fails.
    assert forbidden_calls('{{ "open env }}') == []


def test_the_lexer_is_linear_on_hostile_input() -> None:
    # A backtracking regex would take quadratic time on this; the lexer walks it once.
    template = "{{" * 8000 + " x"
    assert forbidden_calls(template) == []


_TEMPLATE_ALPHABET = st.sampled_from(
    [
        "{{",
        "}}",
        "}",
        "{",
        '"',
        "'",
        "`",
        "\\",
        " ",
        "\n",
        ".",
        "$",
        "|",
        "(",
        ")",
        "env",
        "expandenv",
        "x",
        "-",
    ]
)


@given(st.lists(_TEMPLATE_ALPHABET, max_size=24).map("".join))
def test_whenever_the_lexer_sees_a_call_the_cel_regex_does_too(template: str) -> None:
    """The API server refuses at least what the renderer refuses (the regex may refuse more, only
    in templates Go itself rejects or where a `{{` sits inside a string)."""
    if forbidden_calls(template):
        assert CEL_REGEX.search(template), template
