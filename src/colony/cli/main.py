"""Entry point of the `colony` command: the user commands talking to the management cluster
(`colony jobs`, `colony colonies`, `colony gpr`, `colony queue`), offline ones (`colony offers`,
`colony render`, `colony simulate`), and, apart in the help, `colony operator` and the developer
commands (`colony dev`, `colony crds`).

Errors are one line on stderr (`error: ...`), usage errors included (exit 2), as kubectl.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer._click import exceptions as click_errors  # typer 0.29 vendors click as typer._click

from colony.cli import colonies, gprs, helpformat, jobs
from colony.cli.completion import completion
from colony.cli.kube import EXIT_INTERRUPTED, EXIT_USAGE, ContextOption, KubeconfigOption, fail
from colony.cli.offers import offers
from colony.cli.queue import queue
from colony.cli.render import render
from colony.cli.simulate import simulate
from colony.cli.version import version

helpformat.install()


def usage_error_line(error: click_errors.UsageError) -> str:
    """A click usage error as one kubectl-style line: the problem and where to read the usage."""
    message = " ".join(error.format_message().split()).rstrip(".")
    if error.ctx is not None:
        message += f" (see `{error.ctx.command_path} --help`)"
    return message


class ColonyApp(typer.Typer):
    """typer's app, but every error (usage errors included) is one `error: ...` line on stderr."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from typer._completion_classes import completion_init

        completion_init()  # typer's bash/zsh/fish answers for `colony completion`'s scripts
        command = typer.main.get_command(self)
        kwargs.setdefault("prog_name", "colony")
        kwargs["standalone_mode"] = False
        try:
            result = command.main(*args, **kwargs)
        except click_errors.NoArgsIsHelpError as error:
            typer.echo(error.ctx.get_help() if error.ctx else "")
            sys.exit(0)
        except click_errors.UsageError as error:
            typer.echo(f"error: {usage_error_line(error)}", err=True)
            sys.exit(EXIT_USAGE)
        except click_errors.ClickException as error:
            typer.echo(f"error: {' '.join(error.format_message().split())}", err=True)
            sys.exit(error.exit_code)
        except typer.Abort:
            typer.echo("", err=True)
            sys.exit(EXIT_INTERRUPTED)
        sys.exit(result if isinstance(result, int) else 0)


app = ColonyApp(
    name="colony",
    help="GPU colonies on Cluster API, and distributed training on them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        version()
        raise typer.Exit(0)


@app.callback()
def root(
    context: ContextOption = None,
    kubeconfig: KubeconfigOption = None,
    show_version: Annotated[
        bool,
        typer.Option(
            "--version",
            is_eager=True,
            expose_value=False,
            callback=_print_version,
            help="Print the CLI and operator versions, then exit.",
        ),
    ] = False,
) -> None:
    """GPU colonies on Cluster API, and distributed training on them.

    Cluster commands read your kubeconfig as kubectl does: --kubeconfig, else $KUBECONFIG, else
    ~/.kube/config; --context picks a context; -n a namespace, -A all of them.
    """


def operator(
    namespace: Annotated[
        list[str] | None,
        typer.Option(
            "--namespace", "-n", metavar="NS", help="Namespace to watch (repeatable); default: all."
        ),
    ] = None,
    liveness: Annotated[
        str | None,
        typer.Option(metavar="URL", help="Serve a liveness probe, e.g. http://0.0.0.0:8080/healthz."),
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log debug details.")] = False,
    json_logs: Annotated[bool, typer.Option("--json-logs", help="One JSON object per log line.")] = False,
    metrics_port: Annotated[
        int | None,
        typer.Option("--metrics-port", metavar="PORT", help="Serve Prometheus metrics on this port."),
    ] = None,
    webhook_port: Annotated[
        int | None,
        typer.Option(
            "--webhook-port",
            metavar="PORT",
            help="Serve the validating admission webhook of WorkloadDefinitions on this port (HTTPS).",
        ),
    ] = None,
    webhook_cert_dir: Annotated[
        Path,
        typer.Option(
            "--webhook-cert-dir", metavar="DIR", help="Directory with the webhook's tls.crt and tls.key."
        ),
    ] = Path("/etc/colony/webhook"),
    webhook_addr: Annotated[
        str, typer.Option("--webhook-addr", metavar="ADDR", help="Address the webhook listens on.")
    ] = "0.0.0.0",
    leader_election_namespace: Annotated[
        str | None,
        typer.Option(
            "--leader-election-namespace",
            metavar="NS",
            help="Elect a leader on a Lease in this namespace; only the leader runs the handlers.",
        ),
    ] = None,
    leader_election_lease: Annotated[
        str,
        typer.Option("--leader-election-lease", metavar="NAME", help="Name of the leader election Lease."),
    ] = "colony-operator-leader",
    lease_duration: Annotated[
        float,
        typer.Option("--lease-duration", metavar="SECONDS", help="Take over a Lease unrenewed this long."),
    ] = 8.0,
    lease_renew_deadline: Annotated[
        float,
        typer.Option(
            "--lease-renew-deadline", metavar="SECONDS", help="Stop leading when unrenewed this long."
        ),
    ] = 5.0,
    lease_retry_period: Annotated[
        float,
        typer.Option("--lease-retry-period", metavar="SECONDS", help="Renew or try the Lease this often."),
    ] = 1.0,
) -> None:
    """Run the operator (the Helm chart's Deployment runs this).

    It uses the in-cluster service account, else the current kubeconfig.

    The offer catalog that prices colonies is the shipped one unless COLONY_OFFERS_CSV (a file) or
    COLONY_OFFERS_CONFIGMAP (namespace/name, key gpu-offers.csv) names another.

    With --leader-election-namespace, several replicas may run: the holder of the Lease runs the
    handlers and loops, the others serve the webhook and liveness and take over when it dies.
    """
    from colony.import_guard import keep_unused_clients_out

    keep_unused_clients_out()  # before kopf is imported
    from colony.kube.leader import ElectionTimings
    from colony.operator import LeaderElection, run_operator
    from colony.settings import SettingsError

    try:
        webhook = None
        if webhook_port is not None:  # (importing the controllers reads the settings)
            from colony.controllers.webhook import WebhookOptions

            webhook = WebhookOptions(port=webhook_port, cert_dir=webhook_cert_dir, addr=webhook_addr)
        election = None
        if leader_election_namespace:
            timings = ElectionTimings(lease_duration, lease_renew_deadline, lease_retry_period)
            election = LeaderElection(leader_election_namespace, leader_election_lease, timings)
        run_operator(
            namespace or (),
            liveness_endpoint=liveness,
            verbose=verbose,
            json_logs=json_logs,
            metrics_port=metrics_port,
            webhook=webhook,
            election=election,
        )
    except (SettingsError, ValueError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None


# The chart keeps its copy in files/crds/: templates/crds.yaml installs it as templates, so `helm
# upgrade` updates the CRDs (Helm never upgrades a chart's crds/ directory).
CRD_DIRS = (Path("crds"), Path("charts/colony-operator/files/crds"))


@app.command(hidden=True)
def crds(
    output_dir: Annotated[
        list[Path] | None,
        typer.Option(
            "--output-dir",
            "-o",
            metavar="DIR",
            help="Where to write (repeatable); default: crds/ and the chart.",
        ),
    ] = None,
    check: Annotated[
        bool, typer.Option("--check", help="Only verify that the files are up to date (exit 1 if not).")
    ] = False,
) -> None:
    """Generate the CRD YAML from the API models (the models are the source of truth)."""
    from colony.api import RESOURCES
    from colony.api.crdgen import crd_file_name, render_crd_yaml, write_crds

    if output_dir is None and not CRD_DIRS[1].parent.is_dir():
        fail(
            "`colony crds` writes into a colony-operator checkout (crds/ and the chart); run it from "
            "one, or pass --output-dir DIR",
            EXIT_USAGE,
        )
    directories = output_dir or list(CRD_DIRS)
    if check:
        stale = [
            str(directory / crd_file_name(r))
            for directory in directories
            for r in RESOURCES
            if not (directory / crd_file_name(r)).is_file()
            or (directory / crd_file_name(r)).read_text() != render_crd_yaml(r)
        ]
        if stale:
            typer.echo(f"out of date: {', '.join(stale)}; run `make crds`", err=True)
            raise typer.Exit(1)
        typer.echo("crds are up to date")
        return
    for directory in directories:
        for path in write_crds(RESOURCES, directory):
            typer.echo(f"wrote {path}")


@app.command(hidden=True)
def dev(
    gpu_nodes: Annotated[int, typer.Option(metavar="N", help="Fake A100 nodes in the colony cluster.")] = 2,
    state_dir: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="Where to write the kubeconfigs (default: .dev/)."),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Build what is missing without asking.")] = False,
) -> None:
    """Developers: a local management and colony cluster, then the operator (Ctrl-C stops).

    Needs a colony-operator checkout; the first run builds the control plane (20-30 minutes).
    """
    from colony.devenv.dev import run_dev
    from colony.devenv.tools import ToolsError, ensure_tools

    try:
        ensure_tools(build=False)
    except ToolsError:
        if not yes:
            if not sys.stdin.isatty():
                fail(
                    "the first `colony dev` builds the control plane (20-30 minutes): pass --yes", EXIT_USAGE
                )
            typer.confirm(
                "The control plane is not built yet: build it now (20-30 minutes on 2 cores)?",
                abort=True,
            )

    run_dev(gpu_nodes=gpu_nodes, state_dir=state_dir)


app.command("offers")(offers)
app.command("simulate")(simulate)
app.command("render")(render)
app.command("queue")(queue)
app.command("version")(version)
app.command("completion")(completion)
app.add_typer(jobs.app, name="jobs")
app.add_typer(colonies.app, name="colonies")
app.add_typer(gprs.app, name="gpr")
app.command("operator")(operator)
