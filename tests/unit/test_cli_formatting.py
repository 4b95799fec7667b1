"""Pure helpers of the cluster-facing `colony` commands: durations, money, namespaces, job stages,
worker selection, cluster choice and input files."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.live import Live

from colony.cli.colonies import choose_cluster, gpus
from colony.cli.gprs import estimated_start, requested_gpus
from colony.cli.jobs import Progress, elapsed, job_stage, pick_workers, progress_line, queued_detail
from colony.cli.kube import (
    CliError,
    age,
    conditions_rows,
    duration,
    kubeconfig_paths,
    load_documents,
    money,
    namespace_from_kubeconfigs,
    with_namespace,
)
from colony.render.contract import RenderedCluster

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def _stamp(delta_s: float) -> str:
    return (NOW + timedelta(seconds=delta_s)).strftime("%Y-%m-%dT%H:%M:%SZ")


DURATIONS = [(-5, "0s"), (0, "0s"), (45, "45s"), (200, "3m20s"), (600, "10m"), (7500, "2h5m"), (7200, "2h")]


@pytest.mark.parametrize(("seconds", "text"), [*DURATIONS, (86400 * 4 + 3 * 3600, "4d3h"), (86400, "1d")])
def test_duration_is_short_like_kubectl(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_age_and_elapsed() -> None:
    assert age(_stamp(-90), NOW) == "1m30s"
    assert age(None, NOW) == "-" and age("not a time", NOW) == "-"
    assert elapsed(5) == "0:05" and elapsed(65) == "1:05" and elapsed(3725) == "1:02:05"


def test_money() -> None:
    assert money(None) == "-"
    assert money(0) == "$0.00"
    assert money(1234.5) == "$1,234.50"
    assert money(0.0042) == "$0.0042"


def test_namespace_comes_from_the_current_context_of_the_first_file_that_names_one() -> None:
    first = {"current-context": "dev", "contexts": []}
    second = {"contexts": [{"name": "dev", "context": {"cluster": "c", "namespace": "team-a"}}]}
    assert namespace_from_kubeconfigs([first, second]) == "team-a"
    assert (
        namespace_from_kubeconfigs([{"current-context": "x", "contexts": [{"name": "x", "context": {}}]}])
        is None
    )
    assert namespace_from_kubeconfigs([{}]) is None


def test_kubeconfig_paths_split_kubeconfig_or_fall_back_to_home(tmp_path: Path) -> None:
    assert kubeconfig_paths({"KUBECONFIG": f"{tmp_path}/a:{tmp_path}/b"}) == [tmp_path / "a", tmp_path / "b"]
    assert kubeconfig_paths({}) == [Path("~/.kube/config").expanduser()]


def test_conditions_rows() -> None:
    rows = list(
        conditions_rows(
            [
                {
                    "type": "Placed",
                    "status": "True",
                    "reason": "Placed",
                    "message": "on x",
                    "lastTransitionTime": _stamp(-5),
                }
            ],
            NOW,
        )
    )
    assert rows == ["Placed=True Placed (5s): on x"]


def _job(phase: str | None = None, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "j"},
        "spec": {"parallelism": 2, "targetColony": "c"},
        "status": {"phase": phase, **status} if phase else status,
    }


def _gpr(phase: str | None = "Queued", **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "j-gpus"}, "status": {"phase": phase, **status}}


def test_job_stages_from_queue_to_finish() -> None:
    queued = job_stage(
        _job(),
        _gpr(positionInQueue=2, estimatedWaitSeconds=180, estimatedStartTime=_stamp(180), message="waits"),
        now=NOW,
    )
    assert queued.name == "queued"
    assert queued.detail == "GPR j-gpus: position 2, estimated wait 3m (start ~12:03:00 UTC) - waits"
    # A new estimate alone does not make a new line; a new position does.
    assert job_stage(_job(), _gpr(positionInQueue=2, estimatedWaitSeconds=100), now=NOW).key == queued.key
    assert job_stage(_job(), _gpr(positionInQueue=1), now=NOW).key != queued.key
    provisioning = job_stage(_job("Pending"), _gpr("Provisioning", provisionedColony="gpr-x"))
    assert (provisioning.name, provisioning.detail) == (
        "provisioning",
        "GPR j-gpus: colony gpr-x provisioning",
    )
    colony = {
        "metadata": {"name": "c"},
        "status": {"phase": "Provisioning", "readyClusters": 0, "totalClusters": 1},
    }
    assert job_stage(_job("Pending"), colony=colony).detail == "colony c Provisioning (0/1 clusters ready)"
    assert job_stage(_job("Pending", message="colony c does not exist")).detail == "colony c does not exist"
    scheduling = job_stage(_job("Scheduling", workersReady=1, workersTotal=2, colony="c", cluster="k"))
    assert (scheduling.name, scheduling.detail) == ("scheduling", "pods 1/2 running on c/k")
    running = job_stage(_job("Running", workersReady=2, workersTotal=2, cluster="management"))
    assert running.detail == "2/2 workers running on management" and not running.done
    restarting = job_stage(_job("Restarting", attempt=1, message="worker-1 failed"))
    assert restarting.detail == "attempt 1: worker-1 failed"
    done = job_stage(_job("Succeeded", message="all 2 workers exited 0", gpuHours=0.5, cost=1.25))
    assert done.done and done.succeeded
    assert done.detail == "Succeeded: all 2 workers exited 0 (0.50 GPU-h, $1.25)"
    failed = job_stage(_job("Failed", message="exit code 7"))
    assert failed.done and not failed.succeeded and failed.detail == "Failed: exit code 7"
    gone = job_stage(None)
    assert gone.done and not gone.succeeded


def test_queued_detail_leaves_out_a_start_in_the_past() -> None:
    assert queued_detail(_gpr(estimatedWaitSeconds=0, estimatedStartTime=_stamp(-60)), NOW) == (
        "GPR j-gpus: estimated wait 0s"
    )


def test_progress_line() -> None:
    line = progress_line(65, "j", job_stage(_job("Running", workersReady=2, workersTotal=2, cluster="k")))
    assert line == "[ 1:05] j  running      2/2 workers running on k"


def _pod(rank: int, attempt: int) -> dict[str, Any]:
    labels = {"training.exalsius.ai/replica-index": str(rank), "training.exalsius.ai/attempt": str(attempt)}
    return {"metadata": {"name": f"j-worker-{rank}-a{attempt}", "labels": labels}}


def test_pick_workers_of_the_current_attempt_by_rank() -> None:
    pods = [_pod(1, 1), _pod(0, 1), _pod(0, 0), _pod(1, 0)]
    assert pick_workers(pods, 1, None) == [(0, "j-worker-0-a1"), (1, "j-worker-1-a1")]
    assert pick_workers(pods, 1, 1) == [(1, "j-worker-1-a1")]
    assert pick_workers(pods, 1, 5) == []


def test_choose_cluster_needs_a_choice_when_there_are_several() -> None:
    one = RenderedCluster("a", "docker", "c-a", (), "c-a-kubeconfig")
    two = RenderedCluster("b", "existing", None, (), "kc")
    assert choose_cluster("c", "ns", [one], None) is one
    assert choose_cluster("c", "ns", [one, two], "b") is two
    with pytest.raises(CliError, match=r"2 clusters \(a, b\): pick one with --cluster") as usage:
        choose_cluster("c", "ns", [one, two], None)
    assert usage.value.code == 2
    with pytest.raises(CliError, match="has no cluster z; its clusters: a, b") as missing:
        choose_cluster("c", "ns", [one, two], "z")
    assert missing.value.code == 1


def test_gpr_and_colony_cells() -> None:
    assert requested_gpus({"gpuShapes": ["H100", "A100-80GB"], "numberOfGPUNodes": 2, "numberOfGPUs": 8}) == (
        "2 x 8 H100|A100-80GB"
    )
    assert requested_gpus({"gpuShape": "A100", "numberOfGPUs": 1}) == "1 x 1 A100"
    assert estimated_start({"phase": "Queued", "estimatedStartTime": _stamp(300)}, NOW) == "in 5m (12:05 UTC)"
    assert estimated_start({"phase": "Ready", "estimatedStartTime": _stamp(300)}, NOW) == "-"
    assert gpus({"gpus": [{"product": "A100", "capacity": 16}, {"product": "H100", "capacity": 8}]}) == (
        "16 x A100, 8 x H100"
    )


def test_with_namespace_places_objects_and_refuses_a_contradiction() -> None:
    job = {"kind": "DDPJob", "metadata": {"name": "j"}}
    assert with_namespace(job, None, "dflt")["metadata"]["namespace"] == "dflt"
    assert with_namespace(job, "a", "dflt")["metadata"]["namespace"] == "a"
    assert "namespace" not in job["metadata"]  # a copy
    written = {"kind": "DDPJob", "metadata": {"name": "j", "namespace": "b"}}
    assert with_namespace(written, None, "dflt")["metadata"]["namespace"] == "b"
    with pytest.raises(CliError, match="in namespace b in the file but -n says a"):
        with_namespace(written, "a", "dflt")


def test_load_documents_reads_lists_and_rejects_what_is_not_an_object(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_text("kind: List\nitems: [{kind: A}, {kind: B}]\n---\nkind: C\n---\n")
    assert [d["kind"] for d in load_documents(path)] == ["A", "B", "C"]
    path.write_text("just text\n")
    with pytest.raises(CliError, match="must be a Kubernetes object") as error:
        load_documents(path)
    assert error.value.code == 2
    with pytest.raises(CliError, match="cannot read"):
        load_documents(tmp_path / "missing.yaml")
    path.write_text("a: [\n")
    with pytest.raises(CliError, match="not valid YAML"):
        load_documents(path)


def test_plain_progress_prints_a_line_per_new_stage_only(capsys: pytest.CaptureFixture[str]) -> None:
    progress = Progress(None)
    progress.update("j", job_stage(_job(), _gpr(positionInQueue=2, estimatedWaitSeconds=100), now=NOW))
    progress.update("j", job_stage(_job(), _gpr(positionInQueue=2, estimatedWaitSeconds=90), now=NOW))
    progress.update("j", job_stage(_job("Running", workersReady=2, workersTotal=2, cluster="k")))
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "[ 0:00] j  queued       GPR j-gpus: position 2, estimated wait 1m40s",
        "[ 0:00] j  running      2/2 workers running on k",
    ]


def test_live_progress_refreshes_the_current_line_in_place() -> None:
    terminal = Console(file=StringIO(), force_terminal=True, width=120)
    with Live(console=terminal, auto_refresh=False) as live:
        progress = Progress(live)
        progress.update("j", job_stage(_job(), _gpr(positionInQueue=2, estimatedWaitSeconds=100), now=NOW))
        progress.update("j", job_stage(_job(), _gpr(positionInQueue=2, estimatedWaitSeconds=90), now=NOW))
        progress.update("k", job_stage(_job("Scheduling", workersReady=0, workersTotal=2, cluster="c")))
    screen = Console(file=StringIO(), width=120)
    screen.print(progress.render())
    text = screen.file.getvalue()  # type: ignore[attr-defined]
    assert "estimated wait 1m30s" in text and "1m40s" not in text
    assert "k  scheduling   pods 0/2 running on c" in text and "Ctrl-C stops watching" in text
