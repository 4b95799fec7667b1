"""DDPJob handlers: place the job on a colony cluster (or the management cluster), create its
Service, PodGroup and worker pods there, follow the workers, restart the whole gang on a failure,
and clean up on deletion. Never blocks: waiting is a TemporaryError or the next tracking step."""

from __future__ import annotations

import base64
import contextlib
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import aiohttp
import kopf

from colony import events, metrics, redaction
from colony.api import COLONY, DDPJOB, GPR
from colony.api.base import SecretKeyReference
from colony.api.conditions import now_rfc3339, set_condition
from colony.api.ddpjob import DDPJobSpec
from colony.controllers.acceptance import accept_spec
from colony.controllers.cluster_access import MANAGEMENT, cluster_client
from colony.controllers.colony_shares import read_visibility
from colony.controllers.context import OperatorContext, context_of
from colony.controllers.loops import first_error, gather_bounded, run_all
from colony.kube.colony_clusters import ClusterAccessError
from colony.kube.informer import newer, resource_version
from colony.kube.resources import FIELD_MANAGER, Conflict, Kube, NotFound
from colony.labels import ATTEMPT_LABEL, JOB_LABEL, MANAGED_BY, MANAGED_BY_LABEL
from colony.render.ddpjob import JobRef, render_ddpjob
from colony.render.resources import (
    LAST_APPLIED_ANNOTATION,
    gpu_request_name,
    moved_wandb_secret_name,
    on_reservation,
    without_plain_wandb_key,
)
from colony.scheduling.capacity import choose_cluster
from colony.scheduling.cleanup import (
    CLEANUP_ABANDONED,
    CLEANUP_FAILED,
    DELETE_RETRY_DELAY_S,
    abandoned_message,
    failed_try_message,
    gives_up,
)
from colony.scheduling.teardown import expired, is_ephemeral, teardown_due
from colony.scheduling.visibility import job_colony, split_colony_key, visible
from colony.status.cost import job_usage, price_per_gpu_hour
from colony.status.ddpjob import TERMINAL_PHASES, JobProgress, job_progress
from colony.timefmt import parse_time

TRACK_INTERVAL_S = 0.5
TRACK_BACKOFF_MAX_S = 30.0
"""The longest pause after failed tracking steps (0.5 s doubling)."""
TRACK_CANCELLATION_S = 10.0
"""A tracking step still running this long after its job's deletion or the operator's exit is cancelled."""
SETTLE_AFTER_S = 5.0
"""A finished job whose ephemeral colony still runs other jobs leaves its teardown to the last of
them, once it has been finished this long (so that two jobs finishing at once cannot both leave it
to the other: each sees the other finished by then)."""
LAUNCH_CONCURRENCY = 32
"""Creates of one launch in flight at once (a job of many nodes launches in waves of this size)."""
CLEANUP_KINDS = (
    ("v1", "Pod"),
    ("scheduling.volcano.sh/v1beta1", "PodGroup"),
    ("v1", "Service"),
)
"""What a job leaves in its cluster, found by the job label and deleted with the job."""
WAIT_S = 5.0
USAGE_REFRESH_S = 30.0

Logger = logging.Logger | logging.LoggerAdapter[logging.Logger]


class Unplaceable(kopf.TemporaryError):
    """The job cannot be placed yet; the message is the reason shown in status."""


async def _target(context: OperatorContext, namespace: str, colony: str, cluster: str) -> Kube:
    """The client of a cluster of the job's colony, kept a few seconds (JobTargets)."""
    return await context.job_targets.client(context, namespace, colony, cluster)


async def _place(
    context: OperatorContext, namespace: str, spec: DDPJobSpec
) -> tuple[str, str, str, float | None, Kube | None]:
    """(colony, cluster, why, the colony's price per GPU-hour, the cluster's client when already
    made) for the job; raises Unplaceable with the reason when it must wait."""
    if not spec.target_colony:
        return "", MANAGEMENT, "no targetColony: the management cluster", None, None
    colony = await context.kube.get(COLONY.api_version, COLONY.kind, spec.target_colony, namespace)
    if colony is None:
        raise Unplaceable(f"colony {spec.target_colony} does not exist", delay=WAIT_S)
    clusters = (colony.get("status") or {}).get("clusters") or []
    used: dict[str, int] = {}
    clients: dict[str, Kube] = {}
    for cluster in clusters:
        if cluster.get("phase") == "Ready":
            try:
                kube = await _target(context, namespace, spec.target_colony, cluster["name"])
                used[cluster["name"]] = await context.job_targets.used_gpus(kube)
                clients[cluster["name"]] = kube
            except ClusterAccessError:
                used[cluster["name"]] = 10**9
    needed = 0 if spec.cpu_job else spec.parallelism * spec.nproc_per_node
    chosen, why = choose_cluster(clusters, used, needed)
    if chosen is None:
        raise Unplaceable(f"colony {spec.target_colony}: {why}", delay=WAIT_S)
    price = price_per_gpu_hour(colony.get("status") or {})
    return spec.target_colony, chosen, why, price, clients.get(chosen)


def _owned_by_job(meta: Mapping[str, Any], name: str) -> dict[str, Any]:
    """Metadata of an object the job owns in the management cluster (garbage-collected with it)."""
    owner = {"apiVersion": DDPJOB.api_version, "kind": DDPJOB.kind, "name": meta["name"], "uid": meta["uid"]}
    return {
        "name": name,
        "namespace": meta["namespace"],
        "labels": {JOB_LABEL: meta["name"], MANAGED_BY_LABEL: MANAGED_BY},
        "ownerReferences": [owner],
    }


async def _place_on_gpu_request(
    context: OperatorContext, body: kopf.Body, spec: DDPJobSpec
) -> tuple[str, str, str, str, float | None, dict[str, Any]]:
    """gpuTypes without targetColony: the job asks the GPR scheduler for its GPUs (creating, when
    needed, the cheapest colony for them) and runs on the reservation once it is Ready: (the
    colony's namespace, colony, cluster, why, price per GPU-hour, the reservation's status fields).

    The request may have been admitted onto a colony of another namespace that an admin shared
    with the job's (ColonyShare): the job then runs there, and only while the share still holds
    (the one way a job reaches another namespace's colony)."""
    meta = body["metadata"]
    name = gpu_request_name(meta["name"])
    await context.kube.apply(
        {
            "apiVersion": GPR.api_version,
            "kind": GPR.kind,
            "metadata": _owned_by_job(meta, name),
            "spec": {
                "gpuShapes": list(spec.gpu_types),
                "numberOfGPUNodes": spec.parallelism,
                "numberOfGPUs": spec.nproc_per_node,
                "autoProvision": True,
            },
        }
    )
    gpr = await context.kube.get(GPR.api_version, GPR.kind, name, meta["namespace"]) or {}
    status = gpr.get("status") or {}
    if status.get("phase") != "Ready":
        state = status.get("phase") or "new"
        detail = f": {status['message']}" if status.get("message") else ""
        raise Unplaceable(f"waiting for GPU request {name} ({state}){detail}", delay=WAIT_S)
    key = str(status["colony"])
    colony_namespace, colony = split_colony_key(key, meta["namespace"])
    if colony_namespace != meta["namespace"] and not visible(
        key, meta["namespace"], await read_visibility(context.kube)
    ):
        raise Unplaceable(
            f"GPU request {name} holds GPUs on colony {key}, which is not shared with namespace "
            f"{meta['namespace']} (ColonyShare)",
            delay=WAIT_S,
        )
    cluster = status["nodes"][0]["cluster"]
    reservation = {"gpuRequest": name, "reservationLabel": status["reservationLabel"]}
    why = f"GPUs reserved by {name}"
    return colony_namespace, colony, cluster, why, status.get("pricePerGpuHour"), reservation


async def _wandb_secret(
    context: OperatorContext, body: kopf.Body, spec: DDPJobSpec, patch: kopf.Patch
) -> tuple[SecretKeyReference | None, str | None]:
    """Where the W&B key is, and its base64 value to copy into the target cluster.

    A plain `wandbApiKey` is moved into Secret `<job>-wandb` (owned by the job), the spec is switched
    to a reference, and a warning Event says so: the key never stays in the spec, nor in kubectl's
    last-applied-configuration annotation (kopf's own annotation leaves it out: controllers.kopf_settings),
    and the log redacts it from then on.
    """
    meta = body["metadata"]
    if spec.wandb_api_key:
        redaction.remember(spec.wandb_api_key)
        name = moved_wandb_secret_name(meta["name"])
        await context.kube.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": _owned_by_job(meta, name),
                "stringData": {"value": spec.wandb_api_key},
            }
        )
        patch.spec["wandbApiKey"] = None
        patch.spec["wandbApiKeySecretRef"] = {"name": name, "key": "value"}
        applied = without_plain_wandb_key((meta.get("annotations") or {}).get(LAST_APPLIED_ANNOTATION, ""))
        if applied is not None:
            patch.metadata.annotations[LAST_APPLIED_ANNOTATION] = applied
        events.post(
            body,
            "PlainSecretMoved",
            f"wandbApiKey was moved into Secret {name}; use wandbApiKeySecretRef instead",
            warning=True,
        )
        return SecretKeyReference(name=name, key="value"), base64.b64encode(
            spec.wandb_api_key.encode()
        ).decode()
    ref = spec.wandb_api_key_secret_ref
    if ref is None:
        return None, None
    secret = await context.kube.get("v1", "Secret", ref.name, meta["namespace"])
    value = ((secret or {}).get("data") or {}).get(ref.key)
    if value is None:
        raise Unplaceable(f"Secret {ref.name} with key {ref.key} does not exist", delay=WAIT_S)
    return ref, str(value)


async def _create_unless_present(target: Kube, manifest: Mapping[str, Any]) -> int | None:
    """Create the object (POST: the API server's cheapest write) and return its resourceVersion; one
    that already exists is the same object from an earlier run of this launch (a crash in between):
    names are fixed per attempt and an attempt's objects never change, so it is kept as it is."""
    with contextlib.suppress(Conflict):
        return resource_version(await target.create(manifest, field_manager=FIELD_MANAGER))
    return None


async def _launch(
    context: OperatorContext,
    target: Kube,
    job: JobRef,
    spec: DDPJobSpec,
    attempt: int,
    wandb: SecretKeyReference | None,
) -> None:
    """Create the attempt's objects: the Service and PodGroup together, then every pod together (the
    PodGroup exists before its pods; a crash in between is converged by the next launch). The
    newest pod's version is noted (JobPods): tracking trusts the pod watch once it has seen it."""
    rendered = render_ddpjob(job, spec, attempt=attempt, wandb_secret=wandb)
    first = [rendered.service, *([rendered.pod_group] if rendered.pod_group else [])]
    await run_all((_create_unless_present(target, manifest) for manifest in first), LAUNCH_CONCURRENCY)
    created = await gather_bounded(
        (_create_unless_present(target, pod) for pod in rendered.pods), LAUNCH_CONCURRENCY
    )
    context.job_pods.wrote(job.uid, max((v for v in created if isinstance(v, int)), default=None))
    if (error := first_error(created)) is not None:
        raise error


async def _start_attempt(
    context: OperatorContext,
    target: Kube,
    job: JobRef,
    spec: DDPJobSpec,
    attempt: int,
    wandb: SecretKeyReference | None,
    wandb_value: str | None,
    *,
    copy_secret: bool,
) -> None:
    """The job's W&B Secret (when it has one and `copy_secret`: the target is a colony cluster; on
    the management cluster the Secret is already in the job's namespace, and the user's own Secret is
    never rewritten) and the attempt's objects in the job's namespace of the target cluster. The
    namespace is created when a write finds it missing, not applied again before every job."""

    async def write() -> None:
        if copy_secret and wandb is not None and wandb_value is not None:
            labels = {JOB_LABEL: job.name}
            await target.apply(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": wandb.name, "namespace": job.namespace, "labels": labels},
                    "data": {wandb.key: wandb_value},
                }
            )
        await _launch(context, target, job, spec, attempt, wandb)

    try:
        await write()
    except NotFound:
        await target.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": job.namespace}})
        await write()


@kopf.on.resume(DDPJOB.group, DDPJOB.version, DDPJOB.plural)
@kopf.on.create(DDPJOB.group, DDPJOB.version, DDPJOB.plural)
async def start_ddpjob(
    body: kopf.Body,
    spec: kopf.Spec,
    status: kopf.Status,
    meta: kopf.Meta,
    patch: kopf.Patch,
    memo: kopf.Memo,
    logger: Logger,
    **_: Any,
) -> None:
    """Place the job and start its first attempt (idempotent: objects of fixed names, created once)."""
    context = context_of(memo)
    parsed = accept_spec(DDPJobSpec, spec, status, meta.get("generation"), patch, logger)
    if not isinstance(parsed, DDPJobSpec) or status.get("phase") in TERMINAL_PHASES:
        return
    patch.status["workersTotal"] = parsed.parallelism
    reservation: dict[str, Any] = {}
    target: Kube | None = None
    colony_namespace = meta["namespace"]  # targetColony: always the job's own namespace
    try:
        wandb, wandb_value = await _wandb_secret(context, body, parsed, patch)
        if parsed.gpu_types and not parsed.target_colony:
            colony_namespace, colony, cluster, why, gpu_hour_price, reservation = await _place_on_gpu_request(
                context, body, parsed
            )
        else:
            colony, cluster, why, gpu_hour_price, target = await _place(context, meta["namespace"], parsed)
        if target is None:
            target = await _target(context, colony_namespace, colony, cluster)
    except (Unplaceable, ClusterAccessError) as waiting:
        if status.get("phase") != "Pending":
            events.post(body, "JobPending", f"waiting to be placed: {waiting}")
        patch.status["phase"] = "Pending"
        patch.status["message"] = str(waiting)
        patch.status["conditions"] = set_condition(
            patch.status["conditions"],
            type_="Placed",
            status="False",
            reason="Waiting",
            message=str(waiting),
            observed_generation=meta.get("generation"),
        )
        raise kopf.TemporaryError(str(waiting), delay=WAIT_S) from waiting
    attempt = int(status.get("attempt") or 0)
    parsed = on_reservation(parsed, reservation)
    job = JobRef(meta["name"], meta["namespace"], meta["uid"])
    await _start_attempt(context, target, job, parsed, attempt, wandb, wandb_value, copy_secret=bool(colony))
    patch.status.update(
        {
            "phase": "Scheduling",
            "colony": colony or None,
            "colonyNamespace": colony_namespace if colony else None,
            "cluster": cluster,
            "attempt": attempt,
            "restarts": int(status.get("restarts") or 0),
            "message": f"placed on {cluster}: {why}",
            "pricePerGpuHour": gpu_hour_price,
            **reservation,
            "conditions": set_condition(
                patch.status["conditions"],
                type_="Placed",
                status="True",
                reason="Placed",
                message=f"cluster {cluster} ({why})",
                observed_generation=meta.get("generation"),
            ),
        }
    )
    events.post(body, "Placed", f"workers created on cluster {cluster}")


def needs_tracking(spec: kopf.Spec, status: kopf.Status, **_: Any) -> bool:
    """Whether a job is tracked (its daemon runs): not once the job finished, its follow-up is done
    (settledAt) and no ttlSecondsAfterFinished is left to wait for. kopf re-checks this on every
    change of the job and stops the daemon when it turns False: a finished job costs no steps,
    calls or log lines."""
    return not (
        status.get("phase") in TERMINAL_PHASES
        and status.get("settledAt")
        and spec.get("ttlSecondsAfterFinished") is None
    )


@kopf.daemon(
    DDPJOB.group,
    DDPJOB.version,
    DDPJOB.plural,
    when=needs_tracking,
    cancellation_timeout=TRACK_CANCELLATION_S,
)
@metrics.observes_itself
async def track_ddpjob(
    body: kopf.Body, memo: kopf.Memo, logger: Logger, stopped: kopf.DaemonStopped, **_: Any
) -> None:
    """Follow the job while it needs it (needs_tracking): one tracking step every TRACK_INTERVAL_S,
    each counted and timed as a `track_ddpjob` reconcile; returns once the job is settled.

    A daemon, not a kopf timer: one coroutine that sleeps between steps, where a timer cost a kopf
    handler cycle and a log line per job and tick. Each step writes only what changed, and reads the
    newest version it knows (kopf's live body, or the answer to its own last write when the watch
    has not delivered that yet). A failing step is logged and retried after a growing pause."""
    context = context_of(memo)
    written: Mapping[str, Any] | None = None
    failures = 0
    while not stopped:
        job = _fresher(body, written)
        patch = kopf.Patch()
        try:
            with metrics.observe_handler(DDPJOB.kind, "track_ddpjob"):
                done = await _track_step(context, job, patch, logger, stopped)
                if patch.get("status"):
                    written = await _write_status(context, job, patch)
                    if written is None:
                        return  # the job is gone
        except Exception as failure:  # a failing step never ends the tracking (issue 17)
            failures += 1
            logger.warning("tracking step failed (%s: %s); retrying", type(failure).__name__, failure)
            await stopped.wait(min(TRACK_INTERVAL_S * 2**failures, TRACK_BACKOFF_MAX_S))
            continue
        failures = 0
        if done:
            return
        await stopped.wait(TRACK_INTERVAL_S)


async def _write_status(
    context: OperatorContext, job: Mapping[str, Any], patch: kopf.Patch
) -> dict[str, Any] | None:
    """Merge-patch the step's status changes; the job as written, None when it no longer exists."""
    meta = job["metadata"]
    try:
        return await context.kube.patch_status(
            DDPJOB.api_version, DDPJOB.kind, meta["name"], meta["namespace"], dict(patch["status"])
        )
    except NotFound:
        return None


def _fresher(body: Mapping[str, Any], written: Mapping[str, Any] | None) -> dict[str, Any]:
    """The newer of kopf's live body and the object our last status write returned (a shallow
    copy: kopf replaces the live body's content on each event, it never changes it in place)."""
    newest = written if written is not None and not newer(body, written) else body
    return dict(newest)


async def _track_step(
    context: OperatorContext,
    body: dict[str, Any],
    patch: kopf.Patch,
    logger: Logger,
    stopped: kopf.DaemonStopped,
) -> bool:
    """Follow the current attempt's pods; restart the gang on a failure; after the end, only tear down
    an ephemeral colony and expire the job (ttlSecondsAfterFinished). True when nothing is left to
    follow (settled without a TTL, or expired)."""
    spec, status, meta = body.get("spec") or {}, body.get("status") or {}, body["metadata"]
    parsed = DDPJobSpec.model_validate(dict(spec))
    if status.get("phase") in TERMINAL_PHASES:
        if status.get("settledAt"):  # only the TTL is left: one wait for it, not a step every 0.5 s
            await _expire_when_due(context, body, status, parsed, stopped)
            return True
        await _after_finish(context, body, status, parsed, patch, logger)
        return bool(patch.status.get("settledAt")) and parsed.ttl_seconds_after_finished is None
    if status.get("phase") in ("Pending", None) or not status.get("cluster"):
        return False
    colony_namespace, colony = _job_colony(meta, status)
    target = await _target(context, colony_namespace, colony, status["cluster"])
    job = JobRef(meta["name"], meta["namespace"], meta["uid"])
    wandb = parsed.wandb_api_key_secret_ref
    watch_key = (colony_namespace, colony, status["cluster"], meta["namespace"])
    pods = await context.job_pods.pods(target, watch_key, meta["name"], meta["uid"])
    progress = job_progress(pods, parsed.parallelism, int(status.get("attempt") or 0), parsed.backoff_limit)
    started = parse_time(meta.get("creationTimestamp")) or datetime.now(UTC)
    if progress.phase not in TERMINAL_PHASES and expired(
        started, parsed.active_deadline_seconds, datetime.now(UTC)
    ):
        for pod in pods:
            await target.delete("v1", "Pod", pod["metadata"]["name"], meta["namespace"])
        message = f"activeDeadlineSeconds {parsed.active_deadline_seconds} exceeded; workers deleted"
        progress = JobProgress("Failed", progress.attempt, 0, message)
    for stale in progress.stale_pods:
        await target.delete("v1", "Pod", stale, meta["namespace"])
    update: dict[str, Any] = {
        "workersReady": progress.workers_ready,
        "message": progress.message,
        "attempt": progress.attempt,
        "restarts": progress.attempt,
    }
    if progress.phase == "Running" and not status.get("startTime"):
        update["startTime"] = now_rfc3339()
    if progress.phase in TERMINAL_PHASES:
        update["completionTime"] = now_rfc3339()
    usage = _usage(parsed, status, update, progress.phase != status.get("phase"))
    if usage:
        metrics.record_job_usage(meta["namespace"], DDPJOB.kind, meta["name"], usage)
    update |= usage
    parsed = on_reservation(parsed, status)
    if progress.relaunch:
        await _launch(context, target, job, parsed, progress.attempt, wandb)
    if progress.restart:
        # The new attempt first, then the old pods go: a crash in between leaves pods of the newer
        # attempt, which the next observation takes as current.
        await _launch(context, target, job, parsed, progress.attempt + 1, wandb)
        for pod in pods:
            if pod["metadata"]["labels"].get(ATTEMPT_LABEL) == str(progress.attempt):
                await target.delete("v1", "Pod", pod["metadata"]["name"], meta["namespace"])
        update |= {"attempt": progress.attempt + 1, "restarts": progress.attempt + 1}
        events.post(body, "GangRestarted", progress.message, warning=True)
    if progress.phase != status.get("phase"):
        warning = progress.phase in ("Failed", "Restarting")
        events.post(body, f"Job{progress.phase}", progress.message, warning=warning)
        logger.info("phase %s -> %s: %s", status.get("phase"), progress.phase, progress.message)
    update["phase"] = progress.phase
    # Only what changed: most ticks change nothing, and an empty patch is not sent at all.
    patch.status.update({key: value for key, value in update.items() if status.get(key) != value})
    if progress.phase in TERMINAL_PHASES:
        context.job_pods.forget(meta["uid"])
        await _after_finish(context, body, {**status, **update}, parsed, patch, logger)
    return False


def _usage(
    spec: DDPJobSpec, status: Mapping[str, Any], update: Mapping[str, Any], phase_changed: bool
) -> dict[str, Any]:
    """gpuHours and cost, brought forward on every phase change and every USAGE_REFRESH_S of running
    (not on every tick: status is not rewritten twice a second for a counter)."""
    start = parse_time(update.get("startTime") or status.get("startTime"))
    if start is None:
        return {}
    gpus = 0 if spec.cpu_job else spec.parallelism * spec.nproc_per_node
    end = parse_time(update.get("completionTime")) or datetime.now(UTC)
    usage = job_usage(gpus, start, end, status.get("pricePerGpuHour"))
    recorded = float(status.get("gpuHours") or 0.0)
    stale = gpus and (usage["gpuHours"] or 0.0) - recorded >= gpus * USAGE_REFRESH_S / 3600
    return usage if phase_changed or stale or "gpuHours" not in status else {}


def _job_colony(meta: Mapping[str, Any], status: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name) of the colony the job was placed on (visibility.job_colony); a status naming
    another namespace's colony without a GPU request is refused as a cluster that cannot be used."""
    try:
        return job_colony(meta["namespace"], status)
    except ValueError as refused:
        raise ClusterAccessError(str(refused)) from refused


def _runs_on(job: Mapping[str, Any], namespace: str, colony: str) -> bool:
    """Whether a job of `namespace` names or was placed on colony `colony` of its own namespace."""
    status = job.get("status") or {}
    if (job.get("spec") or {}).get("targetColony") == colony:
        return True
    return status.get("colony") == colony and (status.get("colonyNamespace") or namespace) == namespace


async def _active_jobs(context: OperatorContext, namespace: str, colony: str, except_job: str) -> int:
    jobs = await context.kube.list(DDPJOB.api_version, DDPJOB.kind, namespace)
    return sum(
        1
        for job in jobs
        if job["metadata"]["name"] != except_job
        and _runs_on(job, namespace, colony)
        and (job.get("status") or {}).get("phase") not in TERMINAL_PHASES
    )


async def _after_finish(
    context: OperatorContext,
    body: Mapping[str, Any],
    status: Mapping[str, Any],
    spec: DDPJobSpec,
    patch: kopf.Patch,
    logger: Logger,
) -> None:
    """Delete the job's GPR; tear down its ephemeral colony once no other job needs it; delete the job
    after its TTL. Marks the job settled (settledAt) once nothing but the TTL is left to do."""
    meta = body["metadata"]
    finished = parse_time(status.get("completionTime")) or datetime.now(UTC)
    now = datetime.now(UTC)
    colony_done = await _colony_follow_up(context, body, status, patch, finished, now, logger)
    if status.get("gpuRequest"):
        await context.kube.delete(GPR.api_version, GPR.kind, status["gpuRequest"], meta["namespace"])
    if colony_done:
        patch.status["settledAt"] = now_rfc3339()
        logger.info("finished and settled: no more tracking")
    if expired(finished, spec.ttl_seconds_after_finished, now):
        await _expire(context, body, spec)


async def _colony_follow_up(
    context: OperatorContext,
    body: Mapping[str, Any],
    status: Mapping[str, Any],
    patch: kopf.Patch,
    finished: datetime,
    now: datetime,
    logger: Logger,
) -> bool:
    """Request the teardown of the job's ephemeral colony when it is due; True when nothing is left
    for this job to do about its colony (none, not ephemeral, teardown requested, or other jobs
    still run on it and the last of them will). A colony of another namespace (shared with the
    job's) is never the job's to tear down."""
    meta = body["metadata"]
    colony_name = status.get("colony")
    if not colony_name or status.get("teardownRequestedAt"):
        return True
    if (status.get("colonyNamespace") or meta["namespace"]) != meta["namespace"]:
        return True
    colony = await context.kube.get(COLONY.api_version, COLONY.kind, colony_name, meta["namespace"])
    if colony is None or not is_ephemeral(colony["metadata"]) or colony["metadata"].get("deletionTimestamp"):
        return True
    active = await _active_jobs(context, meta["namespace"], colony_name, meta["name"])
    if teardown_due(colony["metadata"], active, finished, now):
        await context.kube.delete(COLONY.api_version, COLONY.kind, colony_name, meta["namespace"])
        patch.status["teardownRequestedAt"] = now_rfc3339()
        metrics.observe_teardown(metrics.teardown.JOB, (now - finished).total_seconds())
        events.post(body, "ColonyTornDown", f"ephemeral colony {colony_name} deletion requested")
        logger.info("requested deletion of ephemeral colony %s", colony_name)
        return True
    return active > 0 and (now - finished).total_seconds() >= SETTLE_AFTER_S


async def _expire(context: OperatorContext, body: Mapping[str, Any], spec: DDPJobSpec) -> None:
    """Delete the job: its ttlSecondsAfterFinished elapsed."""
    meta = body["metadata"]
    if not meta.get("deletionTimestamp"):
        events.post(body, "JobExpired", f"ttlSecondsAfterFinished {spec.ttl_seconds_after_finished} elapsed")
    await context.kube.delete(DDPJOB.api_version, DDPJOB.kind, meta["name"], meta["namespace"])


async def _expire_when_due(
    context: OperatorContext,
    body: Mapping[str, Any],
    status: Mapping[str, Any],
    spec: DDPJobSpec,
    stopped: kopf.DaemonStopped,
) -> None:
    """A settled job with a TTL: wait for it (unless the daemon is stopped first), then delete the job."""
    if spec.ttl_seconds_after_finished is None:
        return
    finished = parse_time(status.get("completionTime")) or datetime.now(UTC)
    remaining = (spec.ttl_seconds_after_finished or 0) - (datetime.now(UTC) - finished).total_seconds()
    if remaining > 0:
        await stopped.wait(remaining)
        if stopped:
            return
    await _expire(context, body, spec)


@kopf.on.delete(DDPJOB.group, DDPJOB.version, DDPJOB.plural)
async def delete_ddpjob(
    body: kopf.Body,
    spec: kopf.Spec,
    meta: kopf.Meta,
    status: kopf.Status,
    memo: kopf.Memo,
    retry: int,
    logger: Logger,
    **_: Any,
) -> None:
    """Delete the job's objects in its cluster. While the cluster cannot be reached, retry with a
    delay and a warning Event, DELETE_RETRIES times; then give up on the remote objects (an Event
    says so) rather than keep the job stuck in deletion forever.

    Secrets are deleted by name, never listed: the W&B Secret copied into a colony cluster, while it
    is labelled as this job's (the label of its last writer). On the
    management cluster the job's Secrets stay: the user's own, or `<job>-wandb`, which the job owns
    (garbage-collected with it)."""
    metrics.forget_job(meta["namespace"], DDPJOB.kind, meta["name"])
    context_of(memo).job_pods.forget(meta["uid"])
    if not status.get("cluster"):
        return
    left: list[str] | None = None  # what still exists in the cluster, once listed
    try:
        colony_namespace, colony = _job_colony(meta, status)
        target = await cluster_client(context_of(memo), colony_namespace, colony, status["cluster"])
        selector = f"{JOB_LABEL}={meta['name']}"
        found = [
            (api_version, kind, obj["metadata"]["name"])
            for api_version, kind in CLEANUP_KINDS
            for obj in await target.list(api_version, kind, meta["namespace"], label_selector=selector)
        ]
        left = [f"{kind} {name}" for _, kind, name in found]
        for api_version, kind, name in found:
            await target.delete(api_version, kind, name, meta["namespace"])
            left.remove(f"{kind} {name}")
        wandb = (spec.get("wandbApiKeySecretRef") or {}).get("name")
        if status.get("colony") and wandb:
            # Only while the copy is still this job's (another job on the colony may share the Secret).
            copy = await target.get("v1", "Secret", str(wandb), meta["namespace"])
            if copy is not None and (copy["metadata"].get("labels") or {}).get(JOB_LABEL) == meta["name"]:
                await target.delete("v1", "Secret", str(wandb), meta["namespace"])
    except Exception as failure:
        # any error class (colony.scheduling.cleanup): a 401/403 or a 5xx from a colony is as final
        # for us as an unreachable one, and so is an error nobody foresaw
        where = f"cluster {status['cluster']}"
        if not gives_up(retry + 1):
            unreachable = isinstance(
                failure, ClusterAccessError | aiohttp.ClientError | OSError | TimeoutError
            )
            events.post(
                body,
                "ClusterUnreachable" if unreachable else CLEANUP_FAILED,
                failed_try_message(where, retry + 1, failure),
                warning=True,
            )
            raise kopf.TemporaryError(str(failure), delay=DELETE_RETRY_DELAY_S) from failure
        message = abandoned_message(where, failure, left)
        events.post(body, CLEANUP_ABANDONED, message, warning=True)
        logger.warning("abandoning remote cleanup: %s", message)
