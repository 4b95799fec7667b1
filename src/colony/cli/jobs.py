"""`colony jobs`: submit DDPJobs (and watch them to the end), list, inspect, read logs, delete.

`submit --wait` polls the DDPJob (and the GPR it created, or its target colony) once a second and
shows one line per stage: queued, provisioning, scheduling, running, restarting, finished, each
with the time since submission. Exit 0 when every job Succeeded, 1 otherwise; Ctrl-C stops
watching (exit 130) and leaves the jobs running.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from colony.api import COLONY, DDPJOB, GPR
from colony.cli.kube import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    AllNamespacesOption,
    CliError,
    ContextOption,
    KubeconfigOption,
    NamespaceOption,
    OutputFormat,
    OutputOption,
    WatchOption,
    age,
    cli_errors,
    conditions_rows,
    console,
    create_objects,
    duration,
    fail,
    load_documents,
    money,
    not_found,
    number,
    parse_timestamp,
    print_details,
    print_namespace_list,
    print_objects,
    resolve_namespace,
    run,
    table,
    text,
    watch_forever,
    with_namespace,
)
from colony.labels import ATTEMPT_LABEL, JOB_LABEL, RANK_LABEL
from colony.render.resources import gpu_request_name

if TYPE_CHECKING:
    from colony.kube.colony_clusters import ColonyClusterClients
    from colony.kube.resources import Kube

POLL_S = 1.0
FINISHED = ("Succeeded", "Failed")

app = typer.Typer(help="Submit, watch and inspect DDPJobs.", no_args_is_help=True, rich_markup_mode=None)


# -- stages of a job (pure) ---------------------------------------------------------------------


@dataclass(frozen=True)
class Stage:
    """Where a job stands, for one progress line."""

    name: str
    """queued, provisioning, pending, scheduling, running, restarting or finished."""
    detail: str
    key: tuple[Any, ...] = field(default=(), compare=False)
    """What makes a new line: the stage and the counts that matter (not a ticking estimate)."""

    @property
    def done(self) -> bool:
        """Whether the job has finished (or is gone)."""
        return self.name == "finished"

    @property
    def succeeded(self) -> bool:
        """Whether the job finished with phase Succeeded."""
        return self.key == ("finished", "Succeeded")


def _workers(status: Mapping[str, Any], spec: Mapping[str, Any]) -> str:
    ready = status.get("workersReady") or 0
    total = status.get("workersTotal") or spec.get("parallelism") or 1
    return f"{ready}/{total}"


def _where(status: Mapping[str, Any], namespace: str | None = None) -> str:
    colony = status.get("colony")
    if colony and status.get("colonyNamespace") not in (None, namespace):  # another namespace's colony
        colony = f"{status['colonyNamespace']}/{colony}"
    return "/".join(str(p) for p in (colony, status.get("cluster")) if p) or "-"


def queued_detail(gpr: Mapping[str, Any], now: datetime | None = None) -> str:
    """`GPR x: position 2, estimated wait 3m (start ~12:04:00 UTC): message` for a waiting GPR."""
    status = gpr.get("status") or {}
    parts = []
    if status.get("positionInQueue") is not None:
        parts.append(f"position {status['positionInQueue']}")
    if status.get("estimatedWaitSeconds") is not None:
        wait = f"estimated wait {duration(status['estimatedWaitSeconds'])}"
        start = parse_timestamp(status.get("estimatedStartTime"))
        if start is not None and start >= (now or datetime.now(UTC)):
            wait += f" (start ~{start:%H:%M:%S} UTC)"
        parts.append(wait)
    detail = f"GPR {gpr['metadata']['name']}"
    if parts:
        detail += ": " + ", ".join(parts)
    if status.get("message"):
        detail += f" - {status['message']}"
    return detail


def job_stage(
    job: Mapping[str, Any] | None,
    gpr: Mapping[str, Any] | None = None,
    colony: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> Stage:
    """The stage of a DDPJob, given the GPR it created and the colony it targets (when known)."""
    if job is None:
        return Stage("finished", "deleted before it finished", ("deleted",))
    spec = job.get("spec") or {}
    status = job.get("status") or {}
    phase = status.get("phase")
    message = status.get("message") or ""
    where = _where(status, (job.get("metadata") or {}).get("namespace"))
    if phase in FINISHED:
        usage = [f"{number(status.get('gpuHours'))} GPU-h"] if status.get("gpuHours") is not None else []
        if status.get("cost") is not None:
            usage.append(money(status.get("cost")))
        tail = f" ({', '.join(usage)})" if usage else ""
        return Stage("finished", f"{phase}{': ' + message if message else ''}{tail}", ("finished", phase))
    if phase == "Scheduling":
        workers = _workers(status, spec)
        return Stage("scheduling", f"pods {workers} running on {where}", ("scheduling", workers))
    if phase == "Running":
        workers = _workers(status, spec)
        return Stage("running", f"{workers} workers running on {where}", ("running", workers))
    if phase == "Restarting":
        attempt = status.get("attempt")
        return Stage("restarting", f"attempt {attempt}: {message}", ("restarting", attempt))
    # Pending (or not seen by the operator yet): what it waits for.
    if gpr is not None:
        gpr_status = gpr.get("status") or {}
        gpr_phase = gpr_status.get("phase")
        if gpr_phase == "Provisioning":
            provisioned = gpr_status.get("provisionedColony") or "a new colony"
            return Stage(
                "provisioning",
                f"GPR {gpr['metadata']['name']}: colony {provisioned} provisioning",
                ("provisioning", provisioned),
            )
        if gpr_phase == "Ready":
            return Stage(
                "pending",
                f"GPUs reserved on {gpr_status.get('colony')}: creating the workers",
                ("pending", "reserved"),
            )
        return Stage(
            "queued", queued_detail(gpr, now), ("queued", gpr_phase, gpr_status.get("positionInQueue"))
        )
    if colony is not None:
        colony_status = colony.get("status") or {}
        colony_phase = colony_status.get("phase")
        if colony_phase != "Ready":
            ready = f"{colony_status.get('readyClusters') or 0}/{colony_status.get('totalClusters') or '?'}"
            return Stage(
                "provisioning",
                f"colony {colony['metadata']['name']} {colony_phase or 'Pending'} ({ready} clusters ready)",
                ("provisioning", colony_phase, ready),
            )
    return Stage("pending", message or "waiting for the operator", ("pending", message))


def elapsed(seconds: float) -> str:
    """`m:ss` (or `h:mm:ss`) since submission, for the start of a progress line."""
    total = max(0, int(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def progress_line(seconds: float, job: str, stage: Stage) -> str:
    """One progress line: `[0:05] job  queued        GPR job-gpus: position 1`."""
    return f"[{elapsed(seconds):>5}] {job}  {stage.name:<12} {stage.detail}"


# -- watching -----------------------------------------------------------------------------------


class Progress:
    """Progress lines of the watched jobs: printed as they come (not a TTY) or in a live view whose
    last line per job is refreshed in place."""

    def __init__(self, live: Live | None) -> None:
        self.live = live
        self.lines: list[tuple[str, float, Stage]] = []
        self._last: dict[str, Stage] = {}
        self._started = time.monotonic()

    def update(self, job: str, stage: Stage) -> None:
        """Record the job's current stage: a new line when its key changed, else refresh the text."""
        now = time.monotonic() - self._started
        previous = self._last.get(job)
        self._last[job] = stage
        if previous is None or previous.key != stage.key:
            self.lines.append((job, now, stage))
            if self.live is None:
                typer.echo(progress_line(now, job, stage))
        elif previous.detail != stage.detail:
            index = max(i for i, (name, _, _) in enumerate(self.lines) if name == job)
            self.lines[index] = (job, self.lines[index][1], stage)
        if self.live is not None:
            self.live.update(self.render())

    def render(self, *, footer: bool = True) -> Group:
        """The live view: every line so far and, while watching, a footer with the elapsed time."""
        seconds = time.monotonic() - self._started
        body = [Text(progress_line(at, job, stage)) for job, at, stage in self.lines]
        if footer:
            body.append(Text(f"elapsed {elapsed(seconds)} - Ctrl-C stops watching", style="dim"))
        return Group(*body)


async def _observe(kube: Kube, namespace: str, name: str) -> Stage:
    job = await kube.get(DDPJOB.api_version, DDPJOB.kind, name, namespace)
    if job is None:
        return job_stage(None)
    spec, status = job.get("spec") or {}, job.get("status") or {}
    gpr = colony = None
    if status.get("phase") in (None, "Pending"):
        if spec.get("gpuTypes") and not spec.get("targetColony"):
            gpr = await kube.get(GPR.api_version, GPR.kind, gpu_request_name(name), namespace)
        elif spec.get("targetColony"):
            colony = await kube.get(COLONY.api_version, COLONY.kind, spec["targetColony"], namespace)
    return job_stage(job, gpr, colony)


async def watch(kube: Kube, namespace: str, names: Sequence[str], progress: Progress) -> dict[str, Stage]:
    """Poll the jobs until every one has finished; their final stages."""
    final: dict[str, Stage] = {}
    while len(final) < len(names):
        for name in names:
            if name in final:
                continue
            stage = await _observe(kube, namespace, name)
            progress.update(name, stage)
            if stage.done:
                final[name] = stage
        if len(final) < len(names):
            await asyncio.sleep(POLL_S)
    return final


# -- commands -----------------------------------------------------------------------------------


def _ddpjobs(path: Path, namespace: str | None) -> list[dict[str, Any]]:
    documents = load_documents(path)
    for document in documents:
        if document.get("kind") != DDPJOB.kind or document.get("apiVersion") != DDPJOB.api_version:
            raise CliError(
                f"{path}: {document.get('kind')} is not a DDPJob ({DDPJOB.api_version}); "
                "`colony jobs submit` only creates DDPJobs",
                EXIT_USAGE,
            )
    default = resolve_namespace(None)
    return [with_namespace(d, namespace, default) for d in documents]


@app.command()
@cli_errors
def submit(
    path: Annotated[
        Path | None, typer.Argument(metavar="FILE", help="Same as -f.", show_default=False)
    ] = None,
    file: Annotated[
        Path | None,
        typer.Option(
            "--file", "-f", metavar="FILE|DIR|-", help="DDPJobs: a YAML file, a directory or - (stdin)."
        ),
    ] = None,
    wait: Annotated[bool, typer.Option("--wait", "-w", help="Follow the job(s) until they end.")] = False,
    namespace: NamespaceOption = None,
    context: ContextOption = None,
    kubeconfig: KubeconfigOption = None,
) -> None:
    """Create the DDPJob(s) in FILE; --wait follows them to the end.

    With --wait: one line per stage (queued, provisioning, scheduling, running, finished) with the
    time since submission; exit 0 when every job Succeeded, 1 when one failed, 130 on Ctrl-C (the
    jobs keep running).
    """
    if (path is None) == (file is None):
        raise CliError("name the DDPJobs once: -f FILE (or FILE)", EXIT_USAGE)
    file = file or path
    assert file is not None
    documents = _ddpjobs(file, namespace)
    names = [d["metadata"]["name"] for d in documents]
    job_namespace = documents[0]["metadata"]["namespace"]
    if len({d["metadata"]["namespace"] for d in documents}) > 1:
        fail("all DDPJobs of one submission must be in one namespace", EXIT_USAGE)

    async def create_and_watch(kube: Kube) -> dict[str, Stage]:
        await create_objects(kube, documents, DDPJOB.kind, "jobs list")
        if not wait:
            return {}
        out = console()
        if out.is_terminal:
            with Live(console=out, refresh_per_second=4, transient=False) as live:
                progress = Progress(live)
                final = await watch(kube, job_namespace, names, progress)
                live.update(progress.render(footer=False))
                return final
        return await watch(kube, job_namespace, names, Progress(None))

    try:
        final = run(create_and_watch)
    except KeyboardInterrupt:
        typer.echo(
            f"\nstopped watching; the job(s) keep running: `colony jobs get {names[0]} -n {job_namespace}`"
            f" (delete with `colony jobs delete {names[0]} -n {job_namespace}`)",
            err=True,
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    if not wait:
        return
    failed = [name for name, stage in final.items() if not stage.succeeded]
    for name, stage in final.items():
        typer.echo(f"DDPJob {name}: {stage.detail}")
    if failed:
        raise typer.Exit(1)


def jobs_table(jobs: Sequence[Mapping[str, Any]], now: datetime | None = None) -> Table:
    """NAME PHASE COLONY CLUSTER WORKERS RESTARTS AGE (-o wide: GPU-H and COST before AGE)."""
    columns = ("name", "phase", "colony", "cluster", "workers", "restarts", "gpu-h", "cost", "age")
    rows = []
    for job in jobs:
        spec, status = job.get("spec") or {}, job.get("status") or {}
        rows.append(
            (
                job["metadata"]["name"],
                text(status.get("phase")),
                text(status.get("colony") or spec.get("targetColony")),
                text(status.get("cluster")),
                _workers(status, spec),
                text(status.get("restarts")),
                number(status.get("gpuHours")),
                money(status.get("cost")),
                age(job["metadata"].get("creationTimestamp"), now),
            )
        )
    return table(columns, rows, jobs, wide_only=("gpu-h", "cost"))


def job_details(job: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The `colony jobs get` lines of one job."""
    meta, spec, status = job["metadata"], job.get("spec") or {}, job.get("status") or {}
    return [
        ("Name", meta["name"]),
        ("Namespace", meta.get("namespace", "")),
        ("Phase", text(status.get("phase"))),
        ("Message", text(status.get("message"))),
        ("Image", text(spec.get("image"))),
        ("Script", " ".join([spec.get("scriptPath", ""), *spec.get("args", [])]).strip()),
        ("Workers", f"{_workers(status, spec)} ready, {spec.get('nprocPerNode', 1)} process(es) each"),
        ("Target colony", text(spec.get("targetColony"))),
        ("GPU types", ", ".join(spec.get("gpuTypes") or [])),
        ("Colony", text(status.get("colony"))),
        ("Cluster", text(status.get("cluster"))),
        ("GPU request", text(status.get("gpuRequest"))),
        ("Attempt", text(status.get("attempt"))),
        ("Restarts", f"{status.get('restarts') or 0} of {spec.get('backoffLimit', 3)}"),
        ("Started", text(status.get("startTime"))),
        ("Completed", text(status.get("completionTime"))),
        ("GPU-hours", number(status.get("gpuHours"))),
        ("Cost", money(status.get("cost"))),
        ("Age", age(meta.get("creationTimestamp"))),
    ]


@app.command("list")
@cli_errors
def list_jobs(
    namespace: NamespaceOption = None,
    all_namespaces: AllNamespacesOption = False,
    output: OutputOption = OutputFormat.table,
    watch: WatchOption = False,
    context: ContextOption = None,
    kubeconfig: KubeconfigOption = None,
) -> None:
    """List the DDPJobs of a namespace (-A: of all namespaces)."""
    print_namespace_list(
        DDPJOB, namespace, output, jobs_table, "DDPJobs", all_namespaces=all_namespaces, watch=watch
    )


async def get_job(kube: Kube, name: str, namespace: str) -> dict[str, Any]:
    """The DDPJob, or a not-found CliError naming the list command."""
    job = await kube.get(DDPJOB.api_version, DDPJOB.kind, name, namespace)
    if job is None:
        raise not_found("DDPJob", name, namespace, "jobs list")
    return job


@app.command("get")
@cli_errors
def get(
    name: str,
    namespace: NamespaceOption = None,
    output: OutputOption = OutputFormat.table,
    watch: WatchOption = False,
    context: ContextOption = None,
    kubeconfig: KubeconfigOption = None,
) -> None:
    """Show one DDPJob: phase, placement, workers, restarts, cost and conditions.

    With -w: its row (or object) again on every change.
    """
    ns = resolve_namespace(namespace)
    if watch:
        watch_forever(
            DDPJOB,
            ns,
            output,
            jobs_table,
            field_selector=f"metadata.name={name}",
            single=True,
            empty=str(not_found("DDPJob", name, ns, "jobs list")),
        )
        return
    job = run(lambda kube: get_job(kube, name, ns))
    if output not in (OutputFormat.table, OutputFormat.wide):
        print_objects([job], output, jobs_table, single=True)
        return
    print_details(job_details(job))
    conditions = list(conditions_rows((job.get("status") or {}).get("conditions") or []))
    if conditions:
        typer.echo("Conditions:")
        for line in conditions:
            typer.echo(f"  {line}")


@app.command()
@cli_errors
def delete(
    name: str,
    namespace: NamespaceOption = None,
    context: ContextOption = None,
    kubeconfig: KubeconfigOption = None,
) -> None:
    """Delete a DDPJob; the operator removes its workers (and its GPU request)."""
    ns = resolve_namespace(namespace)

    async def remove(kube: Kube) -> None:
        if not await kube.delete(DDPJOB.api_version, DDPJOB.kind, name, ns):
            raise not_found("DDPJob", name, ns, "jobs list")

    run(remove)
    typer.echo(f"ddpjob {name} deleted from namespace {ns}")


# -- logs ---------------------------------------------------------------------------------------


def pick_workers(pods: Sequence[Mapping[str, Any]], attempt: int, rank: int | None) -> list[tuple[int, str]]:
    """(rank, pod name) of the attempt's workers, by rank; only `rank` when given."""
    found = sorted(
        (int(p["metadata"]["labels"].get(RANK_LABEL, -1)), str(p["metadata"]["name"]))
        for p in pods
        if p["metadata"].get("labels", {}).get(ATTEMPT_LABEL) == str(attempt)
    )
    if rank is None:
        return found
    return [(r, pod) for r, pod in found if r == rank]


async def _reason(response: Any) -> str:
    """The message of an error Status the API server answered with (else the body's start)."""
    body = await response.text()
    try:
        return str(json.loads(body)["message"])
    except (ValueError, KeyError, TypeError):
        return str(body).strip()[:300]


async def _stream(kube: Kube, namespace: str, pod: str, follow: bool, prefix: str) -> None:
    from kubernetes_asyncio.client import CoreV1Api

    response: Any = await CoreV1Api(kube.api).read_namespaced_pod_log(
        pod, namespace, container="worker", follow=follow, _preload_content=False
    )
    try:
        if response.status >= 400:
            raise CliError(f"cannot read the logs of pod {pod}: {response.status} {await _reason(response)}")
        async for line in response.content:
            typer.echo(prefix + line.decode(errors="replace").rstrip("\n"))
    finally:
        response.release()


async def _cluster_client(
    kube: Kube, clients: ColonyClusterClients, namespace: str, colony: str, cluster: str
) -> Kube:
    """The client of the colony cluster a job runs on, through its kubeconfig Secret (the
    management cluster itself when the job names no colony)."""
    from colony.cli.colonies import choose_cluster, get_colony
    from colony.render.resources import render_colony_resource

    if not colony:
        return kube
    rendered = render_colony_resource(await get_colony(kube, colony, namespace))
    target = choose_cluster(colony, namespace, rendered.clusters, cluster)
    return await clients.client(namespace, target.kubeconfig_secret, target.kubeconfig_key)


@app.command()
@cli_errors
def logs(
    name: str,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep streaming new lines.")] = False,
    rank: Annotated[
        int | None, typer.Option("--rank", metavar="N", help="Only the worker of this node rank.")
    ] = None,
    namespace: NamespaceOption = None,
    context: ContextOption = None,
    kubeconfig: KubeconfigOption = None,
) -> None:
    """Print the workers' logs (current attempt) from the cluster the job runs on.

    Each line is prefixed with its worker's rank unless --rank picks one worker.
    """
    from colony.kube.colony_clusters import ClusterAccessError, ColonyClusterClients
    from colony.scheduling.visibility import job_colony

    if rank is not None and rank < 0:
        raise CliError(f"--rank {rank}: ranks start at 0", EXIT_USAGE)
    ns = resolve_namespace(namespace)

    async def read(kube: Kube) -> None:
        job = await get_job(kube, name, ns)
        status = job.get("status") or {}
        if not status.get("cluster"):
            raise CliError(
                f"DDPJob {name} has no workers yet ({status.get('phase') or 'new'}: "
                f"{status.get('message') or 'not placed'}): `colony jobs get {name} -n {ns}`"
            )
        clients = ColonyClusterClients(kube)
        try:
            try:
                try:
                    colony_ns, colony = job_colony(ns, status)
                except ValueError as refused:
                    raise ClusterAccessError(str(refused)) from refused
                target = await _cluster_client(kube, clients, colony_ns, colony, status["cluster"])
            except ClusterAccessError as error:
                raise CliError(f"cannot reach cluster {status['cluster']}: {error}") from error
            attempt = int(status.get("attempt") or 0)
            pods = await target.list("v1", "Pod", ns, label_selector=f"{JOB_LABEL}={name}")
            workers = pick_workers(pods, attempt, rank)
            if not workers:
                which = f"of rank {rank} " if rank is not None else ""
                ranks = [r for r, _ in pick_workers(pods, attempt, None)]
                have = f"ranks {', '.join(map(str, ranks))} exist" if ranks else "none exist (job ended?)"
                raise CliError(f"DDPJob {name} has no worker {which}in attempt {attempt}: {have}")
            await asyncio.gather(
                *(
                    _stream(target, ns, pod, follow, "" if rank is not None else f"[rank {r}] ")
                    for r, pod in workers
                )
            )
        finally:
            await clients.close()

    try:
        run(read)
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED) from None
