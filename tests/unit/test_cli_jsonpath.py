"""`-o jsonpath=TEMPLATE`: kubectl's template form over jsonpath-ng (colony.cli.jsonpath), and the
commands that print with it without a cluster (offers, simulate, render)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from colony.cli.jsonpath import JsonPathError, JsonPathTemplate, parse_template, to_jsonpath_ng
from colony.cli.kube import OutputFormat, output_parser
from colony.cli.main import app

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"

LIST: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "List",
    "items": [
        {
            "kind": "Colony",
            "metadata": {
                "name": "alpha",
                "namespace": "team-a",
                "labels": {"app.kubernetes.io/name": "colony"},
            },
            "status": {
                "phase": "Ready",
                "readyNodes": 2,
                "cost": 12.5,
                "ready": True,
                "capacity": {"nvidia.com/gpu": "8"},
                "clusters": [{"name": "d1", "gpus": [{"product": "A100", "capacity": 8}]}],
            },
        },
        {
            "kind": "Colony",
            "metadata": {"name": "beta", "namespace": "team-b"},
            "status": {"phase": "Failed"},
        },
    ],
}


@pytest.mark.parametrize(
    ("template", "text"),
    [
        ("{.items[*].metadata.name}", "alpha beta"),
        ('{.items[*].metadata.name}{"\\n"}', "alpha beta\n"),
        ("names: {.items[*].metadata.name}.", "names: alpha beta."),
        ("{.items[0].status.phase}", "Ready"),
        (
            '{range .items[*]}{.metadata.name}{"\\t"}{.status.phase}{"\\n"}{end}',
            "alpha\tReady\nbeta\tFailed\n",
        ),
        ("{range .items}{.metadata.name},{end}", "alpha,beta,"),  # a list match is iterated
        ("{range .items[*]}{$.kind}/{.metadata.name} {end}", "List/alpha List/beta "),
        ('{.items[?(@.status.phase=="Failed")].metadata.name}', "beta"),
        ("{.items[-1:].metadata.name}", "beta"),
        ("{..phase}", "Ready Failed"),
        ("{.items[0].metadata.labels.app\\.kubernetes\\.io/name}", "colony"),
        ("{.items[0].metadata.labels['app.kubernetes.io/name']}", "colony"),
        ("{.items[0].status.capacity.nvidia\\.com/gpu}", "8"),
        ("{.items[0].status.readyNodes} {.items[0].status.cost} {.items[0].status.ready}", "2 12.5 true"),
        ("{.items[0].status.clusters[0].gpus}", '[{"product":"A100","capacity":8}]'),
        ("{.items[*].status.clusters[*].gpus[*].product}", "A100"),
        ("{.items[1].status.missing}|{.nothing.at.all}|", "||"),  # missing keys print nothing
        ("{kind} {@.kind} {$.kind} { .kind }", "List List List List"),
        ("{'}'}{\"{\"}", "}{"),  # braces inside quotes are text
        ("plain text", "plain text"),
    ],
)
def test_templates_render_as_kubectl_prints_them(template: str, text: str) -> None:
    assert parse_template(template).render(LIST) == text


def test_a_root_that_is_a_list_and_the_whole_object() -> None:
    rows = [{"cloud": "aws"}, {"cloud": "gcp"}]
    assert parse_template("{[*].cloud}").render(rows) == "aws gcp"
    assert parse_template("{.[1].cloud}").render(rows) == "gcp"
    assert parse_template("{.}").render({"a": 1}) == '{"a":1}'


def test_field_names_are_literal_in_jsonpath_ng_syntax() -> None:
    assert to_jsonpath_ng(".items[*].metadata.name") == '$."items"[*]."metadata"."name"'
    assert to_jsonpath_ng("status.where") == '$."status"."where"'  # `where` is a jsonpath-ng keyword
    assert to_jsonpath_ng("$.a\\.b/c..d.*") == '$."a.b/c".."d".*'
    assert to_jsonpath_ng('@.x[?(@.y=="z")]') == '$."x"[?(@.y=="z")]'


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("", "the template is empty"),
        ("{.metadata.name", "is not closed"),
        ("{}", "empty {}"),
        ("{.items[*}", "is not closed"),
        ("{range .items[*]}{.x}", "has no {end}"),
        ("{end}", "{end} without a {range"),
        ("{range}", "{range} needs a path"),
        ("{.a b}", "cannot parse {.a b}"),
        ("{.a.}", "a field name must follow"),
        ("{.a#}", "Unexpected character: #"),
        ("{.items[?(@.x==)]}", "cannot parse"),
        ('{"\\q"}', "unknown escape \\q"),
    ],
)
def test_bad_templates_say_why(template: str, message: str) -> None:
    with pytest.raises(JsonPathError) as error:
        parse_template(template)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_the_output_option_parses_formats_and_templates() -> None:
    parse = output_parser(OutputFormat)
    assert parse("wide") is OutputFormat.wide and parse(OutputFormat.json) is OutputFormat.json
    template = parse("jsonpath={.kind}")
    assert isinstance(template, JsonPathTemplate) and template.render(LIST) == "List"
    for bad, message in [
        ("xml", "xml is not a format: use table, wide, name, yaml, json or jsonpath=TEMPLATE"),
        ("jsonpath", "jsonpath needs a template"),
        ("jsonpath={.a", "bad jsonpath template: the { at character 1 is not closed"),
    ]:
        with pytest.raises(Exception, match=message):
            parse(bad)


def test_offers_jsonpath_reads_what_json_prints() -> None:
    args = ["offers", "--gpu", "A100", "--gpus-per-node", "8"]
    rows = json.loads(runner.invoke(app, [*args, "-o", "json"]).stdout)
    template = '{range [*]}{.cloud} {.instance_type} {.price_per_hour}{"\\n"}{end}'
    result = runner.invoke(app, [*args, "-o", f"jsonpath={template}"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"{r['cloud']} {r['instance_type']} {r['price_per_hour']}" for r in rows
    ]


def test_simulate_and_render_jsonpath() -> None:
    trace = TRACES / "tiresias-60.csv"
    args = ["simulate", str(trace), "--gpus", "8", "--policy", "fifo", "--policy", "shortest"]
    result = runner.invoke(app, [*args, "-o", "jsonpath={[*].policy}"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "fifo shortest"

    seed = EXAMPLES / "ddpjob.yaml"
    result = runner.invoke(app, ["render", "-f", str(seed), "-n", "t", "-o", "jsonpath={.items[*].kind}"])
    assert result.exit_code == 0, result.output
    kinds = result.stdout.split()
    assert "Service" in kinds and "Pod" in kinds
    assert result.stdout == " ".join(kinds)  # as kubectl: no newline unless the template has one
