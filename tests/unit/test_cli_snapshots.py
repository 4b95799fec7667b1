"""80-column snapshots of `colony queue`, `colony jobs list` and `colony gpr list` (offers:
test_cli_offers.py), with their `-o wide` forms (never cut: printed at their natural width), and the
pure rules and data behind the queue view."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from typer.testing import CliRunner

from colony.cli.gprs import gprs_table
from colony.cli.jobs import jobs_table
from colony.cli.kube import VIEW, OutputFormat, fitted_widths, print_event, print_objects
from colony.cli.main import app
from colony.cli.queue import queue_data, queue_view, quota_usage
from tests.unit.cli_snapshots import assert_snapshot, render_80

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def _gpr(name: str, phase: str, **status: Any) -> dict[str, Any]:
    spec = status.pop("spec", {"gpuShape": "A100", "numberOfGPUs": 8, "numberOfGPUNodes": 1})
    return {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "GPUProvisioningRequest",
        "metadata": {"name": name, "namespace": status.pop("namespace", "team-a")},
        "spec": spec,
        "status": {"phase": phase, **status},
    }


QUEUES = [
    {
        "metadata": {"name": "research"},
        "spec": {
            "cohort": "ml",
            "quotas": [{"gpuType": "A100", "nominal": 16}, {"gpuType": "H100", "nominal": 8}],
        },
        "status": {"usage": [{"gpuType": "A100", "used": 24, "borrowed": 8}]},
    },
    {"metadata": {"name": "idle"}, "spec": {"quotas": [{"gpuType": "L4", "nominal": 4}]}, "status": {}},
]
GPRS = [
    _gpr(
        "pretrain-llama-70b-with-a-very-long-name",
        "Queued",
        queue="research",
        positionInQueue=2,
        estimatedStartTime="2026-12-03T12:45:00Z",
        message="waiting for 16 A100 GPUs: 0 free in cohort ml, 8 would be reclaimed at 12:40",
        spec={"gpuShape": "A100", "numberOfGPUs": 8, "numberOfGPUNodes": 2, "priority": 200},
    ),
    _gpr(
        "finetune",
        "Queued",
        queue="research",
        positionInQueue=1,
        estimatedStartTime="2026-12-03T12:00:00Z",
        message="no colony has 8 free H100 GPUs",
        spec={"gpuShapes": ["H100", "A100-80GB"], "numberOfGPUs": 8},
    ),
    _gpr("eval", "Admitted", queue="research", colony="gpu-farm", admittedAt="2026-12-03T11:00:00Z"),
    _gpr(
        "sweep",
        "Ready",
        queue="research",
        colony="gpu-farm",
        admittedAt="2026-12-03T11:30:00Z",
        namespace="team-b",
    ),
    _gpr("done", "Released", queue="research"),
    _gpr(
        "orphan",
        "Queued",
        positionInQueue=1,
        message="no GPUQueue serves namespace team-c",
        namespace="team-c",
    ),
]


@pytest.fixture
def view() -> Iterator[None]:
    """Tables as `-A` draws them; the -o wide switch is reset after the test."""
    VIEW.wide, VIEW.all_namespaces, VIEW.widths = False, True, None
    yield
    VIEW.wide, VIEW.all_namespaces, VIEW.widths = False, False, None


def test_queue_view_snapshot() -> None:
    text = render_80(queue_view(QUEUES, GPRS, namespaces=True, now=NOW))
    assert_snapshot(text, "queue.txt")
    reason = "waiting for 16 A100 GPUs: 0 free in cohort ml, 8 would be reclaimed at 12:40"
    assert reason in " ".join(text.split())  # whole, on lines of its own under the row
    assert "     why: no colony has 8 free H100 GPUs" in text.splitlines()


def test_queue_wide_snapshot_has_every_reason_in_a_column() -> None:
    text = render_80(queue_view(QUEUES, GPRS, namespaces=True, wide=True, now=NOW), wide=True)
    assert_snapshot(text, "queue-wide.txt", fits=False)
    row = next(line for line in text.splitlines() if line.lstrip().startswith("2 "))
    assert row.split()[1] == "pretrain-llama-70b-with-a-very-long-name"
    assert row.endswith("waiting for 16 A100 GPUs: 0 free in cohort ml, 8 would be reclaimed at 12:40")
    assert "why:" not in text


def test_queue_command_prints_yaml_json_and_jsonpath(monkeypatch: pytest.MonkeyPatch) -> None:
    import colony.cli.queue as queue_cli

    monkeypatch.setattr(queue_cli, "run", lambda work: (QUEUES, GPRS))
    runner = CliRunner()
    result = runner.invoke(app, ["queue", "-A", "-o", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data == json.loads(json.dumps(queue_data(QUEUES, GPRS)))
    assert [q["name"] for q in data["queues"]] == ["idle", "research", None]
    research = data["queues"][1]
    assert [r["name"] for r in research["pending"]] == [
        "finetune",
        "pretrain-llama-70b-with-a-very-long-name",
    ]
    assert research["pending"][1]["message"].endswith("8 would be reclaimed at 12:40")
    assert [(r["name"], r["colony"]) for r in research["admitted"]] == [
        ("eval", "gpu-farm"),
        ("sweep", "gpu-farm"),
    ]
    assert research["quotas"][0] == {"gpuType": "A100", "nominal": 16} and research["cohort"] == "ml"
    result = runner.invoke(app, ["queue", "-A", "-o", "jsonpath={.queues[*].pending[*].name}"])
    assert result.stdout.split() == ["finetune", "pretrain-llama-70b-with-a-very-long-name", "orphan"]
    result = runner.invoke(app, ["queue", "-A", "-o", "yaml"])
    assert result.exit_code == 0 and "positionInQueue" not in result.stdout and "position: 2" in result.stdout
    result = runner.invoke(app, ["queue", "-A"])
    assert result.exit_code == 0 and "why: no GPUQueue serves namespace team-c" in result.stdout


def test_queue_view_rules() -> None:
    text = render_80(queue_view(QUEUES, GPRS, namespaces=False, now=NOW))
    lines = text.splitlines()
    assert lines[0].startswith("idle  L4 0/4  pending 0, admitted 0")
    research = next(i for i, line in enumerate(lines) if line.startswith("research"))
    assert "A100 24/16 (+8 borrowed), H100 0/8  cohort ml  pending 2, admitted 2" in lines[research]
    table = [line for line in lines[research + 2 :] if not line.lstrip().startswith(("why:", "12:40"))]
    rows = [line.split()[:2] for line in table[:4]]
    assert [position for position, _ in rows] == ["1", "2", "-", "-"]
    assert [name[:4] for _, name in rows] == ["fine", "pret", "eval", "swee"]
    assert "done" not in text  # released requests hold nothing and wait for nothing
    assert lines[-4].startswith("(no queue)") and lines[-1] == "     why: no GPUQueue serves namespace team-c"
    assert "in 45m" in text and "now" in text


def test_quota_usage_of_a_type_without_quota() -> None:
    queue = {"spec": {"quotas": []}, "status": {"usage": [{"gpuType": "T4", "used": 2}]}}
    assert quota_usage(queue) == "T4 2/0"
    assert quota_usage({"spec": {}, "status": {}}) == "no quota"


JOBS = [
    {
        "apiVersion": "training.exalsius.ai/v1",
        "kind": "DDPJob",
        "metadata": {
            "name": "resnet50-imagenet-baseline",
            "namespace": "team-a",
            "creationTimestamp": "2026-12-03T10:30:00Z",
        },
        "spec": {"parallelism": 4, "targetColony": "gpu-farm"},
        "status": {
            "phase": "Running",
            "colony": "gpu-farm",
            "cluster": "aws-us-east-1",
            "workersReady": 4,
            "workersTotal": 4,
            "restarts": 1,
            "gpuHours": 37.5,
            "cost": 112.5,
        },
    },
    {
        "apiVersion": "training.exalsius.ai/v1",
        "kind": "DDPJob",
        "metadata": {"name": "llm-sft", "namespace": "team-b", "creationTimestamp": "2026-12-03T11:58:00Z"},
        "spec": {"parallelism": 2, "gpuTypes": ["H100"]},
        "status": {"phase": "Pending"},
    },
]


def test_jobs_list_snapshot(view: None) -> None:
    text = render_80(jobs_table(JOBS, now=NOW))
    assert text.splitlines()[0].split() == [
        "NAMESPACE",
        "NAME",
        "PHASE",
        "COLONY",
        "CLUSTER",
        "WORKERS",
        "RESTARTS",
        "AGE",
    ]
    assert_snapshot(text, "jobs-list.txt")


def test_jobs_list_wide_is_printed_whole(view: None) -> None:
    VIEW.wide = True
    text = render_80(jobs_table(JOBS, now=NOW), wide=True)
    header = text.splitlines()[0].split()
    assert header == [
        "NAMESPACE",
        "NAME",
        "PHASE",
        "COLONY",
        "CLUSTER",
        "WORKERS",
        "RESTARTS",
        "GPU-H",
        "COST",
        "AGE",
    ]
    assert "…" not in text and "resnet50-imagenet-baseline" in text and "$112.50" in text
    assert_snapshot(text, "jobs-list-wide.txt", fits=False)


def test_gpr_list_wide_is_printed_whole(view: None) -> None:
    VIEW.wide = True
    text = render_80(gprs_table(GPRS, now=NOW), wide=True)
    assert text.splitlines()[0].split()[:2] == ["NAMESPACE", "NAME"]
    assert "…" not in text and "pretrain-llama-70b-with-a-very-long-name" in text
    assert_snapshot(text, "gpr-list-wide.txt", fits=False)
    VIEW.wide = False
    assert "NAME" in render_80(gprs_table(GPRS, now=NOW)).splitlines()[0].split()


def test_columns_give_way_in_order_and_name_last() -> None:
    headers = ["NAME", "PHASE", "CLUSTER"]
    assert fitted_widths([26, 7, 13], headers, ["cluster", "name"], 80) == [26, 7, 13]  # fits
    # 50 wide with its gaps, 14 too many: NAME gives 10 (to 16; CLUSTER is narrower), CLUSTER 4
    assert fitted_widths([26, 7, 13], headers, ["cluster", "name"], 36) == [16, 7, 9]
    assert fitted_widths([26, 7, 13], headers, ["cluster", "name"], 10) == [8, 7, 8]  # floors
    assert fitted_widths([26, 7, 13], headers, ["cluster"], 36) == [26, 7, 8]  # NAME kept: too wide


def test_watched_rows_line_up_under_the_header(
    view: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    from rich.console import Console

    import colony.cli.kube as kube

    # the list, then a change: a longer name is cut to the header's widths; wide rows are never
    # cut (a longer one would push its cells right), so here the change is the shorter one
    for output, listed, changed in ((OutputFormat.table, 1, 0), (OutputFormat.wide, 0, 1)):
        VIEW.widths = None
        screen = Console(width=80, file=io.StringIO(), record=True, color_system=None)
        monkeypatch.setattr(kube, "console", lambda screen=screen: screen)
        print_objects([JOBS[listed]], output, jobs_table)
        print_event(JOBS[changed], output, jobs_table)
        lines = screen.export_text().splitlines()
        assert lines[0].startswith("NAMESPACE") and len(lines) == 3, lines
        starts = [[word.start() for word in re.finditer(r"\S+", line)] for line in lines]
        assert starts[0] == starts[1] == starts[2], lines  # every cell under its header
        assert ("…" in lines[2]) is (output is OutputFormat.table), lines  # wide: never cut
    VIEW.widths = None
    print_event(JOBS[0], OutputFormat.name, jobs_table)
    assert capsys.readouterr().out == "ddpjob.training.exalsius.ai/resnet50-imagenet-baseline\n"
