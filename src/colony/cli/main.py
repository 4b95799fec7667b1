"""Entry point of the `colony` command: `colony operator`, `colony crds`, `colony dev`, and the user
commands talking to the management cluster (`colony jobs`, `colony colonies`, `colony gpr`) or
rendering offline (`colony render`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from colony.cli import colonies, gprs, jobs
from colony.cli.offers import offers
from colony.cli.render import render
from colony.cli.simulate import simulate

app = typer.Typer(
    name="colony",
    help="GPU colonies on Cluster API, and distributed training on them.",
    no_args_is_help=True,
    add_completion=False,
)


@app.command()
def operator(
    namespace: Annotated[
        list[str] | None,
        typer.Option("--namespace", "-n", help="Namespace to watch (repeatable); default: all."),
    ] = None,
    liveness: Annotated[
        str | None, typer.Option(help="Serve a liveness probe, e.g. http://0.0.0.0:8080/healthz.")
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log debug details.")] = False,
    json_logs: Annotated[bool, typer.Option("--json-logs", help="One JSON object per log line.")] = False,
    metrics_port: Annotated[
        int | None, typer.Option("--metrics-port", help="Serve Prometheus metrics on this port (/metrics).")
    ] = None,
) -> None:
    """Run the operator against the current kubeconfig (KUBECONFIG or in-cluster).

    The offer catalog that prices colonies is the shipped one unless COLONY_OFFERS_CSV (a file) or
    COLONY_OFFERS_CONFIGMAP (namespace/name, key gpu-offers.csv) names another.
    """
    from colony.operator import run_operator
    from colony.settings import SettingsError

    try:
        run_operator(
            namespace or (),
            liveness_endpoint=liveness,
            verbose=verbose,
            json_logs=json_logs,
            metrics_port=metrics_port,
        )
    except SettingsError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None


# The chart keeps its copy in files/crds/: templates/crds.yaml installs it as templates, so `helm
# upgrade` updates the CRDs (Helm never upgrades a chart's crds/ directory).
CRD_DIRS = (Path("crds"), Path("charts/colony-operator/files/crds"))


@app.command()
def crds(
    output_dir: Annotated[
        list[Path] | None,
        typer.Option("--output-dir", "-o", help="Where to write (repeatable); default: crds/ and the chart."),
    ] = None,
    check: Annotated[
        bool, typer.Option("--check", help="Only verify that the files are up to date (exit 1 if not).")
    ] = False,
) -> None:
    """Generate the CRD YAML from the API models (the models are the source of truth)."""
    from colony.api import RESOURCES
    from colony.api.crdgen import crd_file_name, render_crd_yaml, write_crds

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


@app.command()
def dev(
    gpu_nodes: Annotated[int, typer.Option(help="Fake A100 nodes in the colony cluster.")] = 2,
    state_dir: Annotated[
        Path | None, typer.Option(help="Where to write the kubeconfigs (default: .dev/).")
    ] = None,
) -> None:
    """Start a local management cluster and a colony cluster, then run the operator (Ctrl-C stops)."""
    from colony.devenv.dev import run_dev

    run_dev(gpu_nodes=gpu_nodes, state_dir=state_dir)


app.command("offers")(offers)
app.command("simulate")(simulate)
app.command("render")(render)
app.add_typer(jobs.app, name="jobs")
app.add_typer(colonies.app, name="colonies")
app.add_typer(gprs.app, name="gpr")
