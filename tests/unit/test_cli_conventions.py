"""kubectl conventions of the `colony` CLI that need no cluster: one-line errors (usage errors
included, exit 2), help that reads at 80 columns, completion scripts, `version` without a
cluster, -f with a directory, and the pure parts of watching and waiting."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from colony.api import COLONY, GPUQUEUE
from colony.cli.kube import CliError, load_documents, namespace_from_kubeconfigs, object_name
from colony.cli.main import app
from colony.cli.version import deployment_version, image_tag
from colony.cli.waiting import outcome, parse_duration, progress_lines
from colony.cli.watching import collection_path

runner = CliRunner()

USAGE_ERRORS = [
    ["no-such-command"],
    ["offers"],  # --gpu missing
    ["offers", "--gpu", "A100", "-o", "xml"],
    ["offers", "--gpu", "A100", "--nodes", "0"],
    ["offers", "--gpu", "A100", "--nodes", "two"],
    ["jobs", "get"],
    ["jobs", "list", "--bogus"],
    ["jobs", "submit"],
    ["jobs", "submit", "a.yaml", "-f", "b.yaml"],
    ["jobs", "logs", "x", "--rank", "-1"],
    ["colonies", "list", "-A", "-n", "team-a"],
    ["colonies", "create"],
    ["colonies", "create", "-f", "/no/such/file.yaml"],
    ["gpr", "list", "-o", "xml"],
    ["queue", "-A", "-n", "team-a"],
    ["completion", "tcsh"],
    ["render", "-f", "-", "-o", "toml"],
    ["simulate"],
    ["colonies", "list", "-o", "jsonpath={.items[*].metadata.name"],
    ["jobs", "get", "x", "-o", "jsonpath"],
    ["gpr", "list", "-w", "-o", "jsonpath={range .items[*]}{.x}"],
    ["offers", "--gpu", "A100", "-o", "jsonpath={end}"],
    ["render", "-f", "-", "-o", "jsonpath={.a b}"],
    ["simulate", "trace.csv", "-o", "jsonpath={}"],
    ["colonies", "create", "-f", "/no/such/file.yaml", "--wait", "--timeout", "5x"],
    ["colonies", "delete", "x", "--wait", "--timeout", "soon"],
    ["queue", "-o", "xml"],
]


def _run(args: list[str], tmp_path: Path) -> tuple[int, str, str]:
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "none"), "COLUMNS": "80"}
    process = subprocess.run(
        [sys.executable, "-m", "colony", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    return process.returncode, process.stdout, process.stderr


def test_every_usage_error_is_one_line_and_exits_2(tmp_path: Path) -> None:
    for args in USAGE_ERRORS:
        code, out, err = _run(args, tmp_path)
        assert code == 2, (args, out, err)
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, err)
        assert "Traceback" not in err and "╭" not in err and out == "", (args, out)


def _usage_errors_of_the_tree() -> list[list[str]]:
    """For every command and group of the CLI (hidden ones included): an unknown option, each of
    its options that takes a value given none, and, when it has required parameters, none."""
    from typer.core import TyperGroup, TyperOption

    cases: list[list[str]] = []

    def walk(command: Any, path: list[str]) -> None:
        cases.append([*path, "--no-such-option"])
        for param in command.params:
            if isinstance(param, TyperOption) and not param.is_flag and not param.count:
                cases.append([*path, param.opts[0]])
        if any(param.required for param in command.params):
            cases.append(path)
        if isinstance(command, TyperGroup):
            for name, sub in sorted(command.commands.items()):
                walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return cases


def test_every_usage_error_of_the_command_tree_is_one_line_and_exits_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    cases = _usage_errors_of_the_tree()
    assert len(cases) > 60 and ["jobs", "get"] in cases and ["queue", "--output"] in cases
    for args in cases:
        with pytest.raises(SystemExit) as exited:
            app(args, prog_name="colony")
        out, err = capsys.readouterr()
        assert exited.value.code == 2, (args, out, err)
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, err)
        assert out == "", (args, out)


def test_a_bad_timeout_is_refused_before_anything_is_created_or_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import colony.cli.colonies as colonies_cli

    called: list[object] = []
    monkeypatch.setattr(colonies_cli, "run", lambda work: called.append(work))
    manifest = Path(__file__).resolve().parents[2] / "examples" / "colony-existing.yaml"
    for args in (
        ["colonies", "create", "-f", str(manifest), "--wait", "--timeout", "5x"],
        ["colonies", "delete", "c", "--wait", "--timeout", "soon"],
        ["colonies", "delete", "c", "--timeout", ""],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert "use a duration such as 90s" in result.output
    assert called == []  # nothing was sent to the cluster


def test_a_usage_error_names_the_help_of_its_command(tmp_path: Path) -> None:
    code, _, err = _run(["jobs", "get"], tmp_path)
    assert code == 2
    assert err.strip() == "error: Missing argument 'name' (see `colony jobs get --help`)"


def test_unreachable_or_missing_kubeconfig_is_one_line_with_the_next_step(tmp_path: Path) -> None:
    code, _, err = _run(["colonies", "list"], tmp_path)
    assert code == 1
    assert len(err.splitlines()) == 1 and err.startswith("error: no kubeconfig")
    broken = tmp_path / "kubeconfig"
    broken.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\nclusters: [{name: c, cluster: {server: "
        "'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
    )
    code, _, err = _run(["jobs", "list", "--kubeconfig", str(broken)], tmp_path)
    assert code == 1 and len(err.splitlines()) == 1, err
    assert err.startswith("error: cannot reach the Kubernetes API server")
    code, _, err = _run(["--kubeconfig", str(broken), "jobs", "list", "--context", "nope"], tmp_path)
    assert code == 1 and "nope" in err and len(err.splitlines()) == 1, err


def _commands() -> list[list[str]]:
    groups = {
        "jobs": ["submit", "list", "get", "logs", "delete"],
        "colonies": ["list", "get", "create", "delete", "kubeconfig"],
        "gpr": ["list", "get"],
    }
    single = ["offers", "render", "simulate", "queue", "version", "completion", "operator", "dev", "crds"]
    return (
        [[]]
        + [[c] for c in single]
        + [[g, c] for g, cs in groups.items() for c in cs]
        + [[g] for g in groups]
    )


@pytest.mark.parametrize("command", _commands(), ids=lambda c: " ".join(c) or "colony")
def test_help_reads_cleanly_at_80_columns(command: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("TERMINAL_WIDTH", "80")
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    for line in result.stdout.splitlines():
        assert len(line) <= 80, line
    for noise in ("RANGE", "x>=", "INTEGER", "FLOAT", "{"):
        assert noise not in result.stdout, (command, noise)
    assert not re.search(r"<[a-z]", result.stdout), (command, result.stdout)


def test_developer_commands_are_out_of_the_way(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    listing = runner.invoke(app, ["--help"]).stdout.split("Commands:")[1]
    commands = [line.split()[0] for line in listing.splitlines() if line.startswith("  ")]
    assert "crds" not in commands and "dev" not in commands  # hidden: `make crds` / `make dev` run them
    assert commands.index("operator") > commands.index("completion")  # after the user commands


def test_crds_outside_a_checkout_refuses_to_write_into_the_current_directory(tmp_path: Path) -> None:
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "none")}
    process = subprocess.run(
        [sys.executable, "-m", "colony", "crds"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert process.returncode == 2 and "--output-dir" in process.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(shell: str) -> None:
    result = runner.invoke(app, ["completion", shell])
    assert result.exit_code == 0, result.output
    assert "_COLONY_COMPLETE" in result.stdout and "colony" in result.stdout


def test_completion_answers_subcommands(tmp_path: Path) -> None:
    env = {**os.environ, "_COLONY_COMPLETE": "complete_bash", "COMP_WORDS": "colony col", "COMP_CWORD": "1"}
    process = subprocess.run([sys.executable, "-m", "colony"], env=env, capture_output=True, text=True)
    assert "colonies" in process.stdout, process.stdout + process.stderr
    env |= {"COMP_WORDS": "colony offers --gpu A100 -o j", "COMP_CWORD": "5"}
    process = subprocess.run([sys.executable, "-m", "colony"], env=env, capture_output=True, text=True)
    assert process.stdout.split() == ["json", "jsonpath="], process.stdout + process.stderr


def test_version_without_a_cluster_says_unknown(tmp_path: Path) -> None:
    code, out, err = _run(["version"], tmp_path)
    assert code == 0, err
    assert out.splitlines()[0].startswith("CLI version:")
    assert out.splitlines()[1].split() == ["Operator", "version:", "unknown"]
    assert _run(["--version"], tmp_path)[1] == out


def test_operator_version_from_the_deployment() -> None:
    assert image_tag("ghcr.io/exalsius/colony-operator:0.4.1") == "0.4.1"
    assert image_tag("localhost:5000/colony-operator:dev@sha256:abc") == "dev"
    assert image_tag("localhost:5000/colony-operator") is None
    labelled = {"metadata": {"labels": {"app.kubernetes.io/version": "0.3.0"}}}
    by_image = {"spec": {"template": {"spec": {"containers": [{"image": "x/colony-operator:1.2"}]}}}}
    assert deployment_version([labelled]) == "0.3.0"
    assert deployment_version([by_image]) == "1.2"
    assert deployment_version([]) == "unknown"


def test_file_option_reads_a_directory_of_manifests(tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_text("kind: DDPJob\nmetadata: {name: b}\n")
    (tmp_path / "a.json").write_text('{"kind": "DDPJob", "metadata": {"name": "a"}}')
    (tmp_path / "notes.txt").write_text("not a manifest")
    assert [d["metadata"]["name"] for d in load_documents(tmp_path)] == ["a", "b"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CliError, match=r"holds no \.yaml"):
        load_documents(empty)


def test_context_namespace_and_object_names() -> None:
    config = {
        "current-context": "a",
        "contexts": [
            {"name": "a", "context": {"namespace": "ns-a"}},
            {"name": "b", "context": {"namespace": "ns-b"}},
        ],
    }
    assert namespace_from_kubeconfigs([config]) == "ns-a"
    assert namespace_from_kubeconfigs([config], "b") == "ns-b"
    colony = {"apiVersion": "infra.exalsius.ai/v1", "kind": "Colony", "metadata": {"name": "c"}}
    assert object_name(colony) == "colony.infra.exalsius.ai/c"
    assert object_name({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}) == "pod/p"


def test_watch_paths() -> None:
    assert collection_path(COLONY, "t") == "/apis/infra.exalsius.ai/v1/namespaces/t/colonies"
    assert collection_path(COLONY, None) == "/apis/infra.exalsius.ai/v1/colonies"
    assert collection_path(GPUQUEUE, "t") == "/apis/infra.exalsius.ai/v1/gpuqueues"


def test_wait_durations_and_outcomes() -> None:
    assert parse_duration("90s") == 90 and parse_duration("30m") == 1800 and parse_duration("1h30m") == 5400
    assert parse_duration("45") == 45
    with pytest.raises(CliError):
        parse_duration("5x")
    provisioning = {
        "metadata": {"name": "c"},
        "status": {
            "phase": "Provisioning",
            "clusters": [
                {"name": "d1", "phase": "Provisioning", "readyNodes": 1, "totalNodes": 2, "gpus": []}
            ],
        },
    }
    lines = progress_lines("c", provisioning, gone=False)
    assert [line.text() for line in lines] == [
        "c  Provisioning  nodes 1/2  gpus 0",
        "c/d1  Provisioning  nodes 1/2  gpus 0",
    ]
    assert outcome(["c"], {"c": provisioning}, gone=False) is None
    ready = {
        "metadata": {"name": "c"},
        "status": {
            "phase": "Ready",
            "clusters": [{"name": "d1", "phase": "Ready", "gpus": [{"product": "A100", "capacity": 16}]}],
        },
    }
    assert outcome(["c"], {"c": ready}, gone=False) == (True, "c Ready (16 GPUs)")
    failed = {
        "metadata": {"name": "c"},
        "status": {
            "phase": "Failed",
            "clusters": [{"name": "d1", "phase": "Failed", "message": "quota exceeded"}],
        },
    }
    assert outcome(["c"], {"c": failed}, gone=False) == (False, "colony c Failed: d1: quota exceeded")
    degraded = {
        "metadata": {"name": "c"},
        "status": {
            "phase": "Degraded",
            "clusters": [
                {"name": "d1", "phase": "Failed", "message": "VcpuLimitExceeded"},
                {"name": "d2", "phase": "Ready"},
            ],
        },
    }
    assert outcome(["c"], {"c": degraded}, gone=False) == (False, "colony c Failed: d1: VcpuLimitExceeded")
    unreachable = {
        "metadata": {"name": "c"},
        "status": {
            "phase": "Degraded",
            "clusters": [{"name": "d1", "phase": "Unreachable", "message": "connection refused"}],
        },
    }
    assert outcome(["c"], {"c": unreachable}, gone=False) is None  # may come back: wait
    assert outcome(["c"], {"c": None}, gone=True) == (True, "c deleted")
    assert outcome(["c"], {"c": ready}, gone=True) is None


def test_dev_without_the_control_plane_asks_first_and_needs_yes_when_piped(tmp_path: Path) -> None:
    env = {**os.environ, "COLONY_CACHE_DIR": str(tmp_path / "empty-cache"), "KUBECONFIG": str(tmp_path / "k")}
    process = subprocess.run(
        [sys.executable, "-m", "colony", "dev"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert process.returncode == 2, process.stdout + process.stderr
    assert process.stderr.splitlines() == [
        "error: the first `colony dev` builds the control plane (20-30 minutes): pass --yes"
    ]
    assert not (tmp_path / "empty-cache").exists()  # nothing was built


def test_refresh_aws_without_credentials_exits_1_and_says_prices_were_not_refreshed(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    process = subprocess.run(
        [sys.executable, "-m", "colony", "offers", "--gpu", "A100", "--refresh-aws"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert process.returncode == 1, process.stdout + process.stderr
    assert process.stdout == ""  # no table whose caption could claim live prices
    assert process.stderr.startswith("error: AWS prices were not refreshed: ")
    assert len(process.stderr.splitlines()) == 1


def test_manifests_from_stdin_with_file_dash(tmp_path: Path) -> None:
    seed = (Path(__file__).resolve().parents[2] / "examples" / "ddpjob.yaml").read_text()
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "none")}
    args = [
        sys.executable,
        "-m",
        "colony",
        "render",
        "-f",
        "-",
        "-n",
        "team-a",
        "-o",
        "jsonpath={.items[*].kind}",
    ]
    process = subprocess.run(args, env=env, input=seed, capture_output=True, text=True, timeout=60)
    assert process.returncode == 0, process.stderr
    assert "Service" in process.stdout.split() and "Pod" in process.stdout.split()


def test_colony_wait_prints_changed_lines_when_plain_and_a_table_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    from rich.console import Console
    from rich.live import Live

    from colony.cli.waiting import ClusterLine, Display, plain_output

    monkeypatch.setenv("NO_COLOR", "")
    assert plain_output()  # NO_COLOR, whatever its value, asks for plain lines
    first = [
        ClusterLine("c", "", "Provisioning", "0/2", 0, ""),
        ClusterLine("c", "d1", "Pending", "0/2", 0, ""),
    ]
    second = [first[0], ClusterLine("c", "d1", "Provisioning", "1/2", 8, "joining")]
    plain = Display(None)
    plain.update(first)
    plain.update(second)
    printed = [line.split("] ", 1)[1] for line in capsys.readouterr().out.splitlines()]
    assert printed == [
        "c  Provisioning  nodes 0/2  gpus 0",
        "c/d1  Pending  nodes 0/2  gpus 0",
        "c/d1  Provisioning  nodes 1/2  gpus 8  joining",  # only what changed
    ]

    buffer = io.StringIO()
    screen = Console(file=buffer, force_terminal=True, width=80, color_system=None)
    with Live(console=screen, auto_refresh=False) as live:
        Display(live).update(second)
    shown = buffer.getvalue()
    assert "COLONY" in shown and "PROVISIONING" not in shown and "joining" in shown
    assert "Ctrl-C stops waiting" in shown
