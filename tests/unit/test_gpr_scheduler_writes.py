"""What the GPR scheduling loop writes, and how much, when thousands of requests wait: decisions
applied concurrently (preemptions before admissions), wait estimates bounded per pass and written
only onto the version they were computed from, a deleted request released without reading every
request, and the informer that spares each pass a LIST of every request."""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

import pytest

from colony.controllers.context import OperatorContext, OperatorSettings
from colony.controllers.gpr import accept as gpr_accept
from colony.controllers.gpr import apply as gpr_apply
from colony.controllers.gpr import release as gpr_release
from colony.controllers.gpr import report as gpr_report
from colony.controllers.gpr import snapshot as gpr_snapshot
from colony.controllers.gpr import world as gpr_world
from colony.controllers.gpr import writes as gpr_writes
from colony.controllers.gpr.accept import accept
from colony.controllers.gpr.apply import apply, preempt
from colony.controllers.gpr.release import release_deleted, release_due, release_on_delete
from colony.controllers.gpr.report import ESTIMATE_WRITES_PER_PASS, write_estimates
from colony.controllers.gpr.reservations import finish_admissions, reserve_in_background
from colony.controllers.gpr.state import ParseCache
from colony.controllers.gpr.world import ClusterView, World
from colony.controllers.gpr.writes import PROCESSING_FAILED, concurrently, remember
from colony.kube.informer import Informer, newer
from colony.kube.resources import Conflict, KubeApiError
from colony.labels import FINALIZER
from colony.scheduling import backoff
from colony.scheduling.fault_rules import ledger_entry
from colony.scheduling.queueing.model import (
    Admit,
    Decisions,
    Estimate,
    NodeAllocation,
    Placement,
    Preempt,
)
from colony.scheduling.queueing.objects import gpu_nodes, reservation_label
from colony.scheduling.queueing.rules import (
    ESTIMATE_REFRESH_S,
    estimate_update,
    is_prompt,
    known_reservations,
    position_moved,
)
from colony.scheduling.visibility import visibility


def _gpr(name: str, version: int = 1, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "GPUProvisioningRequest",
        "metadata": {"name": name, "namespace": "team", "resourceVersion": str(version), "uid": name},
        "spec": {"gpuShape": "H100", "numberOfGPUs": 1},
        "status": status,
    }


class _Kube:
    """Records writes; `conflicts` names requests whose preconditioned patches fail."""

    def __init__(self, conflicts: frozenset[str] = frozenset()) -> None:
        self.patches: list[tuple[str, dict[str, Any], str | None]] = []
        self.object_patches: list[tuple[str, str, Any]] = []
        self.objects: dict[str, dict[str, Any]] = {}
        """The last version of each request written (status patches), as the server returns it."""
        self.listed: list[str] = []
        self.conflicts = conflicts
        self.in_flight = self.most_in_flight = 0
        self.api = None

    async def patch_status(
        self, api_version: str, kind: str, name: str, namespace: str | None, status: Any, **kw: Any
    ) -> dict[str, Any]:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(0.001)
        self.in_flight -= 1
        version = kw.get("resource_version")
        if version is not None and name in self.conflicts:
            raise Conflict(409, "Conflict", "changed")
        self.patches.append((name, dict(status), version))
        self.objects[name] = _gpr(name, 99, **status)
        return self.objects[name]

    async def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        return manifest

    async def patch(self, api_version: str, kind: str, name: str, namespace: str | None, body: Any) -> Any:
        self.object_patches.append((kind, f"{namespace}/{name}", body))
        if kind != "GPUProvisioningRequest":
            return body
        current = self.objects.get(name) or _gpr(name)
        written = {k: v for k, v in body["metadata"].items() if k != "resourceVersion"}
        self.objects[name] = {
            **current,
            "metadata": {**current["metadata"], **written, "resourceVersion": "100"},
        }
        return self.objects[name]

    async def list(self, api_version: str, kind: str, *args: Any, **kw: Any) -> list[dict[str, Any]]:
        self.listed.append(kind)
        return []

    async def get(self, *args: Any, **kw: Any) -> None:
        return None


def _context(kube: _Kube) -> OperatorContext:
    """An operator context watching namespace `team`, its management client `kube`; the clients
    and helpers the loop's writes never touch are left out."""
    unused: Any = None
    return OperatorContext(("team",), OperatorSettings(), cast(Any, kube), unused, (), unused, unused)


def test_positions_near_the_head_are_exact_further_back_within_a_tenth() -> None:
    assert position_moved(None, 40) and position_moved(3, 2) and position_moved(12, 9)
    assert not position_moved(7, 7)
    assert not position_moved(1000, 950) and position_moved(1000, 899)
    assert not position_moved(40, 37) and position_moved(40, 35)


async def test_estimate_writes_are_bounded_heads_first_and_only_onto_the_version_read() -> None:
    count = ESTIMATE_WRITES_PER_PASS + 50
    gprs = [_gpr(f"r{i:04d}", version=10 + i, phase="Queued") for i in range(count)]
    world = World(time.time(), gprs, [], {}, {})
    estimates = {f"team/r{i:04d}": Estimate(count - i, None, "waiting for quota") for i in range(count)}
    kube = _Kube(conflicts=frozenset({f"r{count - 1:04d}"}))
    await write_estimates(_context(kube), world, Decisions(estimates=estimates))
    assert len(kube.patches) == ESTIMATE_WRITES_PER_PASS - 1  # the head's write met a newer version
    positions = [status["positionInQueue"] for _, status, _ in kube.patches]
    assert positions == list(range(2, ESTIMATE_WRITES_PER_PASS + 1))
    assert all(version == str(10 + count - status["positionInQueue"]) for _, status, version in kube.patches)
    assert kube.most_in_flight <= gpr_report.ESTIMATE_WRITE_CONCURRENCY


def test_new_requests_heads_and_queue_changes_are_prompt_the_rest_waits_for_a_refresh() -> None:
    assert is_prompt({}, {"phase": "Queued", "positionInQueue": 400})  # a new request
    assert is_prompt({"positionInQueue": 3}, {"queue": "gpu"})
    assert is_prompt({"positionInQueue": 12}, {"positionInQueue": 10})  # reaches the head
    assert is_prompt({"positionInQueue": 2}, {"positionInQueue": 30})  # leaves it
    assert not is_prompt({"positionInQueue": 400}, {"positionInQueue": 300})
    assert not is_prompt({"positionInQueue": 3}, {"estimatedWaitSeconds": 60})
    assert not is_prompt({"positionInQueue": 3}, {"message": "waiting for quota"})


async def test_deep_positions_and_estimates_are_rewritten_once_per_refresh() -> None:
    head = _gpr("head", phase="Queued", positionInQueue=2, message="waiting for quota", queue=None)
    deep = _gpr("deep", phase="Queued", positionInQueue=400, message="waiting for quota", queue=None)
    fresh = _gpr("fresh")
    estimates = {
        "team/head": Estimate(1, None, "waiting for quota"),
        "team/deep": Estimate(300, None, "waiting for quota"),
        "team/fresh": Estimate(301, None, "waiting for quota"),
    }
    now = time.time()
    kube = _Kube()
    context = _context(kube)
    context.scheduler.estimates_refreshed_at = now - 1  # refreshed a second ago
    await write_estimates(
        context, World(now, [head, deep, fresh], [], {}, {}), Decisions(estimates=estimates)
    )
    assert sorted(name for name, _, _ in kube.patches) == ["fresh", "head"]
    kube.patches.clear()
    later = now + ESTIMATE_REFRESH_S
    await write_estimates(
        context, World(later, [head, deep, fresh], [], {}, {}), Decisions(estimates=estimates)
    )
    assert sorted(name for name, _, _ in kube.patches) == ["deep", "fresh", "head"]
    assert context.scheduler.estimates_refreshed_at == later


async def test_unchanged_estimates_are_not_written_again() -> None:
    gpr = _gpr("r", phase="Queued", positionInQueue=3, message="waiting for quota", queue=None)
    world = World(time.time(), [gpr], [], {}, {})
    kube = _Kube()
    await write_estimates(
        _context(kube), world, Decisions(estimates={"team/r": Estimate(3, None, "waiting for quota")})
    )
    assert kube.patches == []


async def test_concurrent_calls_are_bounded_all_run_and_the_first_error_is_raised() -> None:
    running = most = 0
    done: list[int] = []

    async def call(i: int) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.001)
        running -= 1
        done.append(i)
        if i in (3, 7):
            raise ValueError(i)

    with pytest.raises(ValueError, match="3"):
        await concurrently((call(i) for i in range(20)), limit=4)
    assert sorted(done) == list(range(20)) and most == 4


async def test_preemptions_are_written_before_any_admission() -> None:
    victims = [_gpr(f"low{i}", phase="Ready", nodes=[]) for i in range(5)]
    winners = [_gpr(f"high{i}", phase="Queued") for i in range(5)]
    world = World(time.time(), victims + winners, [], {}, {})
    labelling = asyncio.Event()
    world.clusters[("pool/pool", "c")] = ClusterView(
        "pool/pool", "c", cast(Any, _Cluster(gate=labelling)), [], []
    )
    placement = Placement("pool/pool", "H100", (NodeAllocation("c/n", 1),))
    decisions = Decisions(
        admitted=tuple(Admit(f"team/high{i}", placement) for i in range(5)),
        preemptions=tuple(Preempt(f"team/low{i}", f"team/high{i}", "priority") for i in range(5)),
    )
    kube = _Kube()
    context = _context(kube)
    by_key = {f"team/{g['metadata']['name']}": g for g in victims + winners}
    await apply(context, world, by_key, decisions)
    phases = [status.get("phase") for _, status, _ in kube.patches]
    assert phases.count("Queued") == 5 and phases.count("Admitted") == 0  # the pass does not wait
    # the admissions are written in the background, assumed meanwhile; labels and Ready follow
    assert set(context.scheduler.reservations_in_flight) == {f"team/high{i}" for i in range(5)}
    assert {k: a["status"]["phase"] for k, a in context.scheduler.assumed.items()} == {
        f"team/high{i}": "Admitted" for i in range(5)
    }
    await asyncio.sleep(0.05)
    phases = [status.get("phase") for _, status, _ in kube.patches]
    assert phases.count("Admitted") == 5 and phases.count("Ready") == 0 and not context.scheduler.assumed
    assert max(i for i, p in enumerate(phases) if p == "Queued") < phases.index("Admitted")
    labelling.set()
    await asyncio.gather(*context.scheduler.reservations_in_flight.values())
    phases = [status.get("phase") for _, status, _ in kube.patches]
    assert phases.count("Ready") == 5 and not context.scheduler.reservations_in_flight


async def test_an_admission_finishing_in_the_background_is_not_redone_and_preemption_waits_for_it() -> None:
    kube = _Kube()
    context = _context(kube)
    on_n = [{"cluster": "c", "node": "n", "gpus": 1}]
    admitted = _gpr("a", phase="Admitted", colony="pool/pool", nodes=on_n)
    kube.objects["a"] = admitted
    world = World(time.time(), [admitted], [], {}, {})
    release = asyncio.Event()  # the label write waits for it
    world.clusters[("pool/pool", "c")] = ClusterView(
        "pool/pool", "c", cast(Any, _Cluster(gate=release)), [], []
    )

    reserve_in_background(context, world, admitted)
    finish_admissions(context, world, {"team/a": admitted})
    assert kube.patches == []  # the in-flight admission is left to its own task
    preemption = asyncio.create_task(
        preempt(context, world, admitted, Preempt("team/a", "team/b", "priority"))
    )
    await asyncio.sleep(0.01)
    assert kube.patches == [] and not preemption.done()  # it waits for Ready to be written first
    release.set()
    await preemption
    assert [status.get("phase") for _, status, _ in kube.patches] == ["Ready", "Queued"]


def test_the_parse_cache_computes_once_per_key_and_forgets_what_a_pass_did_not_use() -> None:
    cache = ParseCache()
    calls: list[str] = []

    def parse(name: str) -> str:
        calls.append(name)
        return name.upper()

    assert cache.get(("a", 1), parse, "a") == "A" and cache.get(("a", 1), parse, "a") == "A"
    cache.get(("b", 1), parse, "b")
    cache.end_pass()
    assert cache.get(("a", 1), parse, "a") == "A"  # kept from the previous pass
    cache.end_pass()  # b was not asked for in this pass: forgotten
    cache.end_pass()
    cache.get(("b", 1), parse, "b")
    cache.get(("a", 2), parse, "a")  # a new generation is parsed again
    assert calls == ["a", "b", "b", "a"]


async def test_a_deleted_request_is_released_without_listing_every_request() -> None:
    kube = _Kube()
    gpr = _gpr("done", phase="Ready", colony="pool/pool", nodes=[{"cluster": "c", "node": "n", "gpus": 1}])
    await release_on_delete(_context(kube), gpr)
    assert kube.listed == []
    # its colony could not be read: the label left on its node is recorded on the colony
    key, value = ledger_entry(reservation_label("team/done"), ["c/n"])
    assert kube.object_patches == [("Colony", "pool/pool", {"metadata": {"annotations": {key: value}}})]


class _ChangedOnce(_Kube):
    """The first preconditioned write meets a newer version; `fresh` is what a re-read returns."""

    def __init__(self, fresh: dict[str, Any] | None) -> None:
        super().__init__(conflicts=frozenset({"r"}))
        self.fresh = fresh
        self.gets = 0

    async def get(self, *args: Any, **kw: Any) -> dict[str, Any] | None:
        self.gets += 1
        self.conflicts = frozenset()
        return self.fresh


async def test_a_phase_change_meeting_a_newer_version_is_redone_on_it_only_while_it_applies() -> None:
    read = _gpr("r", phase="Ready", colony="pool/pool", nodes=[{"cluster": "c", "node": "n", "gpus": 1}])
    released = {"phase": "Released", "nodes": []}
    update = gpr_writes.moving(read, released, ("Admitted", "Ready"), same_allocation=True)
    annotated = {**read, "metadata": {**read["metadata"], "resourceVersion": "7"}}
    kube = _ChangedOnce(annotated)
    patched, _ = await gpr_writes.write_on_version(_context(kube), read, update)
    assert patched is not None and kube.gets == 1
    assert kube.patches == [("r", released, "7")]  # onto the fresh version, never over it
    for fresh in (None, _gpr("r", 7, phase="Queued")):  # gone, or no longer holding those GPUs
        kube = _ChangedOnce(fresh)
        patched, seen = await gpr_writes.write_on_version(_context(kube), read, update)
        assert patched is None and seen is fresh and kube.patches == []


def test_informer_keeps_the_newest_version_of_each_object() -> None:
    informer = Informer(cast(Any, None), "infra.exalsius.ai", "v1", "gpuprovisioningrequests", "GPR")
    informer.replace([_gpr("a", 5), _gpr("b", 6)])
    informer.put(_gpr("a", 9, phase="Admitted"))  # our own write, answered before the watch has it
    informer.apply("MODIFIED", _gpr("a", 7, phase="Queued"))  # the watch, late
    assert {o["metadata"]["name"]: o["status"].get("phase") for o in informer.objects()} == {
        "a": "Admitted",
        "b": None,
    }
    informer.apply("DELETED", _gpr("b", 10))
    informer.put(_gpr("b", 8, phase="Ready"))  # a write answered before the deletion
    assert [o["metadata"]["name"] for o in informer.objects()] == ["a"]
    informer.apply("ADDED", _gpr("b", 12))  # created again
    informer.replace([_gpr("b", 12)])
    assert [o["metadata"]["name"] for o in informer.objects()] == ["b"]
    assert all(o["apiVersion"] == "infra.exalsius.ai/v1" for o in informer.objects())
    assert informer.get("team/b") is not None and informer.get("team/a") is None
    assert newer({"metadata": {"resourceVersion": "x"}}, _gpr("a", 3))


def test_the_gpus_of_a_request_being_deleted_are_free_before_its_label_comes_off() -> None:
    deleting = _gpr("gone", phase="Ready", colony="team/pool")
    deleting["metadata"]["deletionTimestamp"] = "2026-12-03T00:00:00Z"
    other = _gpr("other", phase="Ready", colony="elsewhere/pool")
    known = known_reservations([], [deleting, other])
    labels = {reservation_label("team/gone"): "8", reservation_label("elsewhere/other"): "4"}
    node = {
        "metadata": {"name": "n", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", **labels}},
        "status": {
            "allocatable": {"nvidia.com/gpu": "16"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    (free,) = gpu_nodes("team/pool", "c", [node], [], known.get("team/pool", set()))
    assert free.capacity == 12  # 16 - 4 held by a request of another colony; the deleting one's 8 are free


class _Cluster:
    """A colony cluster's client: records node label patches."""

    def __init__(self, unreadable: bool = False, gate: asyncio.Event | None = None) -> None:
        self.labels: list[dict[str, str | None]] = []
        self.unreadable = unreadable  # the patch answers without the label (e.g. a webhook dropped it)
        self.gate = gate  # label writes wait for it

    async def patch_labels(self, *args: Any) -> dict[str, Any]:
        if self.gate is not None:
            await self.gate.wait()
        self.labels.append(dict(args[-1]))
        if self.unreadable:
            return {"metadata": {"name": args[2], "labels": {}}}
        return {"metadata": {"name": args[2], "labels": {k: v for k, v in args[-1].items() if v is not None}}}


class _DeletedMeanwhile(_Kube):
    """The request gets deleted while it is being admitted."""

    async def patch_status(self, *args: Any, **kw: Any) -> dict[str, Any]:
        patched = await super().patch_status(*args, **kw)
        if args[4].get("phase") == "Ready":
            patched["metadata"]["deletionTimestamp"] = "2026-12-03T00:00:00Z"
        return patched


async def test_labels_put_on_a_request_deleted_during_its_admission_are_taken_off_again() -> None:
    cluster = _Cluster()
    world = World(time.time(), [], [], {}, {})
    world.clusters[("pool/pool", "c")] = ClusterView("pool/pool", "c", cast(Any, cluster), [], [])
    placement = Placement("pool/pool", "H100", (NodeAllocation("c/n", 2),))
    gpr = _gpr("short", phase="Queued")
    admit = Decisions(admitted=(Admit("team/short", placement),))
    await _applied(_context(_DeletedMeanwhile()), world, {"team/short": gpr}, admit)
    label = reservation_label("team/short")
    assert cluster.labels == [{label: "2"}, {label: None}]
    cluster.labels.clear()
    await _applied(_context(_Kube()), world, {"team/short": gpr}, admit)
    assert cluster.labels == [{label: "2"}]  # not deleted: the reservation stays


async def test_a_request_is_ready_only_once_its_labels_are_written_and_read_back() -> None:
    placement = Placement("pool/pool", "H100", (NodeAllocation("c/n", 2),))
    admit = Decisions(admitted=(Admit("team/short", placement),))
    for cluster, why in ((None, "cluster not readable"), (_Cluster(unreadable=True), "label not read back")):
        world = World(time.time(), [], [], {}, {})
        if cluster is not None:
            world.clusters[("pool/pool", "c")] = ClusterView("pool/pool", "c", cast(Any, cluster), [], [])
        kube = _Kube()
        await _applied(_context(kube), world, {"team/short": _gpr("short", phase="Queued")}, admit)
        phases = [status.get("phase") for _, status, _ in kube.patches]
        assert "Ready" not in phases
        assert f"waiting to label node(s) c/n ({why})" in kube.patches[-1][1]["message"]


async def _applied(
    context: OperatorContext, world: World, by_key: dict[str, Any], decisions: Decisions
) -> None:
    """`apply`, and the admissions it left to finish in the background."""
    await apply(context, world, by_key, decisions)
    await asyncio.gather(*context.scheduler.reservations_in_flight.values())
    await asyncio.gather(*context.scheduler.events_in_flight)


def test_candidate_colonies_are_narrowed_to_the_listed_ones_and_queue_name_is_honoured() -> None:
    """spec.colonies restricts the own/shared colonies (a plain name is in the request's namespace);
    spec.queueName is the queue when that GPUQueue lists the namespace, else the request waits. A
    colony of another namespace is a candidate only through a ColonyShare, never through its label."""
    colonies = {
        "team/a": {"metadata": {"name": "a", "namespace": "team"}},
        "team/b": {"metadata": {"name": "b", "namespace": "team"}},
        "ops/c": {"metadata": {"name": "c", "namespace": "ops"}},
        "evil/d": {
            "metadata": {"name": "d", "namespace": "evil", "labels": {"colony.exalsius.ai/shared": "true"}}
        },
    }
    share = {
        "metadata": {"name": "ops-c"},
        "spec": {"colony": {"namespace": "ops", "name": "c"}, "namespaces": ["team"]},
    }
    queues = [{"metadata": {"name": "gold"}, "spec": {"namespaces": ["team"]}}]
    world = World(0.0, [], queues, colonies, colonies)
    gpr = {"metadata": {"name": "r", "namespace": "team"}, "spec": {}}
    assert gpr_world.candidate_colonies(world, gpr) == {"team/a", "team/b"}
    world = World(0.0, [], queues, colonies, colonies, visibility([share]))
    assert gpr_world.candidate_colonies(world, gpr) == {"team/a", "team/b", "ops/c"}
    gpr["spec"]["colonies"] = ["b", "ops/c", "elsewhere/x"]
    assert gpr_world.candidate_colonies(world, gpr) == {"team/b", "ops/c"}
    gpr["spec"]["colonies"] = []
    assert gpr_world.candidate_colonies(world, gpr) == frozenset()
    assert gpr_world.gpr_queue(world, gpr, False) == "gold"
    gpr["spec"]["queueName"] = "gold"
    assert gpr_world.gpr_queue(world, gpr, False) == "gold"
    gpr["spec"]["queueName"] = "platinum"
    assert "no GPUQueue of that name lists namespace team" in gpr_world.gpr_queue(world, gpr, False)


def test_informer_keeps_objects_without_managed_fields_and_kopf_diff_base() -> None:
    informer = Informer(cast(Any, None), "infra.exalsius.ai", "v1", "gpuprovisioningrequests", "GPR")
    gpr = _gpr("a", 5)
    gpr["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    gpr["metadata"]["annotations"] = {
        "colony.exalsius.ai/last-handled-configuration": '{"spec": {}}',
        "team": "a",
    }
    informer.put(gpr)
    (kept,) = informer.objects()
    assert "managedFields" not in kept["metadata"]
    assert kept["metadata"]["annotations"] == {"team": "a"}
    assert kept["spec"] == gpr["spec"] and kept["metadata"]["resourceVersion"] == "5"
    assert "managedFields" in gpr["metadata"]  # the caller's object is not changed


def test_a_new_request_is_queued_by_the_loop_and_an_admitted_one_never_goes_back() -> None:
    now = time.time()
    new = estimate_update({}, Estimate(4, None, "waiting for quota"), now, None)
    assert new["phase"] == "Queued" and new["message"] == "waiting for quota"
    admitted = estimate_update({"phase": "Admitted"}, Estimate(4, None, "waiting for quota"), now, None)
    assert "phase" not in admitted and "message" not in admitted


class _ColonyClient:
    """A colony cluster's client: lists answer at once, or never when `hangs`."""

    def __init__(self, server: str, hangs: bool) -> None:
        self.api = type("Api", (), {"configuration": type("Conf", (), {"host": server})()})()
        self.hangs = hangs
        self.lists = 0

    async def list(self, api_version: str, kind: str, **kw: Any) -> list[dict[str, Any]]:
        self.lists += 1
        if self.hangs:
            await asyncio.Event().wait()
        return [{"kind": kind, "metadata": {"name": f"{kind.lower()}-1"}}]


def _ready_colony(name: str, clusters: list[str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "team"},
        "status": {"phase": "Ready", "clusters": [{"name": c, "phase": "Ready"} for c in clusters]},
    }


async def test_colony_reads_run_concurrently_under_one_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two hung colonies cost one deadline, not two; the healthy colony and a cluster shared by two
    colonies (one server) are read once and kept; views come in the colonies' sorted order."""
    servers = {
        "a-hung": "https://hung-1",
        "b-ok": "https://ok",
        "c-hung": "https://hung-2",
        "d-ok": "https://ok",
    }
    clients = {s: _ColonyClient(s, hangs="hung" in s) for s in set(servers.values())}

    async def cluster_client(context: Any, namespace: str, name: str, cluster: str, colony: Any) -> Any:
        return clients[servers[name]]

    monkeypatch.setattr(gpr_world, "cluster_client", cluster_client)
    monkeypatch.setattr(gpr_world, "CLUSTER_READ_TIMEOUT_S", 0.5)
    colonies = {f"team/{n}": _ready_colony(n, ["main"]) for n in servers}
    world = World(time.time(), [], [], colonies, colonies)
    started = time.monotonic()
    await gpr_world.read_colonies(_context(_Kube()), world, sorted(colonies))
    elapsed = time.monotonic() - started
    assert 0.45 < elapsed < 0.9, elapsed  # one deadline for both hung colonies, not two (1.0 s)
    assert list(world.clusters) == [("team/b-ok", "main"), ("team/d-ok", "main")]
    assert clients["https://ok"].lists == 2  # nodes and pods, once for the two colonies sharing it
    assert set(world.reads) == {"https://ok"}


ON_N = [{"cluster": "c", "node": "n", "gpus": 1}]


async def _release_deleted(context: OperatorContext, world: World) -> None:
    """`release_deleted`, and the releases it left to finish in the background."""
    release_deleted(context, world)
    await asyncio.gather(*(release.task for release in context.scheduler.releases_in_flight.values()))


def _colony_world(gprs: list[dict[str, Any]], cluster: _Cluster) -> World:
    world = World(time.time(), gprs, [], {}, {})
    world.clusters[("pool/pool", "c")] = ClusterView("pool/pool", "c", cast(Any, cluster), [], [])
    return world


async def test_admission_holds_the_finalizer_before_any_label_and_a_deleting_request_gets_none() -> None:
    """Labels are only ever put on a request that holds the operator's finalizer, so a request
    deleted while the operator is down cannot vanish with its labels on."""
    cluster, kube = _Cluster(), _Kube()
    placement = Placement("pool/pool", "H100", (NodeAllocation("c/n", 1),))
    admit = Decisions(admitted=(Admit("team/r", placement),))
    await _applied(_context(kube), _colony_world([], cluster), {"team/r": _gpr("r", phase="Queued")}, admit)
    finalizer_patch = next(
        i for i, (kind, _, _) in enumerate(kube.object_patches) if kind == "GPUProvisioningRequest"
    )
    assert kube.object_patches[finalizer_patch][2]["metadata"]["finalizers"] == [FINALIZER]
    assert cluster.labels == [{reservation_label("team/r"): "1"}]
    assert kube.patches[-1][1]["phase"] == "Ready"

    class _Deleting(_Kube):
        async def patch_status(self, *args: Any, **kw: Any) -> dict[str, Any]:
            patched = await super().patch_status(*args, **kw)
            patched["metadata"]["deletionTimestamp"] = "2026-12-05T00:00:00Z"  # deleted right after
            return patched

    cluster, kube = _Cluster(), _Deleting()
    await _applied(_context(kube), _colony_world([], cluster), {"team/r": _gpr("r", phase="Queued")}, admit)
    assert cluster.labels == [] and "Ready" not in [status.get("phase") for _, status, _ in kube.patches]


async def test_a_request_gone_from_the_read_is_released_with_what_this_process_last_wrote(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Read while Queued, admitted (status written) in that pass, deleted before the next read:
    the labels its admission put on come off, although no read ever showed it admitted."""
    cluster, kube = _Cluster(), _Kube()
    context = _context(kube)
    queued = _gpr("r", 1, phase="Queued")
    await _release_deleted(context, _colony_world([queued], cluster))
    remember(context, _gpr("r", 2, phase="Ready", colony="pool/pool", nodes=ON_N))

    async def own_colony(context: Any, status: Any) -> World:
        return _colony_world([], cluster)

    monkeypatch.setattr(gpr_release, "read_own_colony", own_colony)
    await _release_deleted(context, _colony_world([], cluster))
    assert cluster.labels == [{reservation_label("team/r"): None}]
    await _release_deleted(context, _colony_world([], cluster))
    assert cluster.labels == [{reservation_label("team/r"): None}]  # released once


async def test_the_requests_seen_are_the_informers_copies_unless_this_process_wrote_a_newer_one() -> None:
    """What this process wrote is kept only while the read has not caught up with it: then the
    read's (trimmed, compact) copy replaces the written one (a full PATCH answer, managedFields too)."""
    cluster, kube = _Cluster(), _Kube()
    context = _context(kube)
    answer = _gpr("r", 2, phase="Ready", colony="pool/pool", nodes=ON_N)
    answer["metadata"]["managedFields"] = [{"manager": "colony-operator", "fieldsV1": {"f:status": {}}}]
    remember(context, answer)
    written = context.scheduler.seen["team/r"]
    assert "managedFields" not in written["metadata"]  # kept trimmed, like the informer's copies
    assert written["status"] == answer["status"]
    await _release_deleted(context, _colony_world([_gpr("r", 1, phase="Queued")], cluster))
    assert context.scheduler.seen["team/r"] is written  # the read is behind: the written version stays
    caught_up = _gpr("r", 2, phase="Ready", colony="pool/pool", nodes=ON_N)
    await _release_deleted(context, _colony_world([caught_up], cluster))
    assert context.scheduler.seen["team/r"] is caught_up


async def test_the_finalizer_is_let_go_once_a_request_holds_no_gpus_or_is_deleted_and_released(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster, kube = _Cluster(), _Kube()
    context = _context(kube)

    def held(name: str, **status: Any) -> dict[str, Any]:
        gpr = _gpr(name, **status)
        gpr["metadata"]["finalizers"] = ["other.io/keep", FINALIZER]
        return gpr

    deleting = held("deleting", phase="Ready", colony="pool/pool", nodes=ON_N)
    deleting["metadata"]["deletionTimestamp"] = "2026-12-05T00:00:00Z"
    gprs = [
        held("running", phase="Ready", colony="pool/pool", nodes=ON_N),
        held("released", phase="Released"),
        deleting,
    ]

    async def own_colony(context: Any, status: Any) -> World:
        return _colony_world([], cluster)

    monkeypatch.setattr(gpr_release, "read_own_colony", own_colony)
    # nothing is released within the pass: the deleted request's GPUs are already free to it
    release_deleted(context, _colony_world(gprs, cluster))
    releasing = context.scheduler.releases_in_flight
    assert set(releasing) == {"team/released", "team/deleting"}  # in the background
    assert releasing["team/deleting"].nodes == {("pool/pool", "c", "n")}
    await asyncio.gather(*(release.task for release in releasing.values()))
    assert not releasing
    let_go = {
        name: body["metadata"] for kind, name, body in kube.object_patches if kind == "GPUProvisioningRequest"
    }
    assert set(let_go) == {"team/released", "team/deleting"}  # the running request keeps it
    assert all(m["finalizers"] == ["other.io/keep"] and m["resourceVersion"] == "1" for m in let_go.values())
    assert cluster.labels == [{reservation_label("team/deleting"): None}]

    # the released request then disappears from the read: it is not released a second time
    await _release_deleted(context, _colony_world(gprs[:2], cluster))
    assert cluster.labels == [{reservation_label("team/deleting"): None}]
    assert not context.scheduler.released and not releasing


async def test_a_label_on_the_node_of_a_request_being_released_waits_until_its_label_is_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pass gives a deleted request's GPUs to the next request at once; the new label goes on
    its node only after the old one is off, so the node's labels never add up to more GPUs than
    it has. A label on another node does not wait."""
    unlabelling = asyncio.Event()
    old_cluster, new_cluster, kube = _Cluster(gate=unlabelling), _Cluster(), _Kube()
    context = _context(kube)
    deleting = _gpr("old", phase="Ready", colony="pool/pool", nodes=ON_N)
    deleting["metadata"]["finalizers"] = [FINALIZER]
    deleting["metadata"]["deletionTimestamp"] = "2026-12-08T00:00:00Z"

    async def own_colony(context: Any, status: Any) -> World:
        return _colony_world([], old_cluster)

    monkeypatch.setattr(gpr_release, "read_own_colony", own_colony)
    release_deleted(context, _colony_world([deleting], old_cluster))
    world = _colony_world([], new_cluster)
    other_node = [{"cluster": "c", "node": "m", "gpus": 1}]
    for name, nodes in (("new", ON_N), ("elsewhere", other_node)):
        kube.objects[name] = _gpr(name, phase="Admitted", colony="pool/pool", nodes=nodes)
        reserve_in_background(context, world, kube.objects[name])
    reserving = context.scheduler.reservations_in_flight
    await asyncio.wait_for(reserving["team/elsewhere"], 5)
    assert new_cluster.labels == [{reservation_label("team/elsewhere"): "1"}]  # did not wait
    await asyncio.sleep(0.05)
    assert "team/new" in reserving and not old_cluster.labels  # waits for the old label
    unlabelling.set()
    await asyncio.wait_for(asyncio.gather(*reserving.values()), 5)
    assert old_cluster.labels == [{reservation_label("team/old"): None}]
    assert new_cluster.labels[-1] == {reservation_label("team/new"): "1"}
    assert not context.scheduler.releases_in_flight


async def test_a_request_deleted_while_its_admission_is_finished_is_released_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its release waits for the labels being put on, then takes them off: none is left."""
    labelling = asyncio.Event()
    cluster, kube = _Cluster(gate=labelling), _Kube()
    context = _context(kube)

    async def own_colony(context: Any, status: Any) -> World:
        return _colony_world([], cluster)

    monkeypatch.setattr(gpr_release, "read_own_colony", own_colony)
    admitted = kube.objects["r"] = _gpr("r", phase="Admitted", colony="pool/pool", nodes=ON_N)
    reserve_in_background(context, _colony_world([], cluster), admitted)
    await asyncio.sleep(0.01)  # its finalizer is on, its label waits for the gate
    deleting = {**admitted, "metadata": {**admitted["metadata"], "finalizers": [FINALIZER]}}
    deleting["metadata"] |= {"deletionTimestamp": "2026-12-08T00:00:00Z", "resourceVersion": "101"}
    release_deleted(context, _colony_world([deleting], cluster))
    releasing = context.scheduler.releases_in_flight["team/r"].task
    labelling.set()
    await asyncio.wait_for(releasing, 5)
    assert cluster.labels[0] == {reservation_label("team/r"): "1"}
    assert cluster.labels[-1] == {reservation_label("team/r"): None}


async def test_specs_are_accepted_in_bulk_onto_the_version_read_oldest_first_and_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kube = _Kube()
    context = _context(kube)
    monkeypatch.setattr(gpr_accept, "ACCEPTS_PER_PASS", 2)
    gprs = []
    for i, name in enumerate(["c", "a", "bad"]):
        gpr = _gpr(name)
        gpr["metadata"].update(generation=1, creationTimestamp=f"2026-12-05T00:00:0{i}Z")
        gprs.append(gpr)
    gprs[2]["spec"] = {"numberOfGPUs": -1}
    done = _gpr("done", observedGeneration=1)
    done["metadata"]["generation"] = 1
    world = World(time.time(), [*gprs, done], [], {}, {})
    await accept(context, world)
    assert [(name, status["observedGeneration"], version) for name, status, version in kube.patches] == [
        ("c", 1, "1"),
        ("a", 1, "1"),
    ]
    assert all(s["conditions"][0]["reason"] == "SpecValid" for _, s, _ in kube.patches)
    assert context.scheduler.seen["team/c"]["metadata"]["resourceVersion"] == "99"  # the next pass knows it
    world.gprs = [g for g in world.gprs if g["metadata"]["name"] == "bad"]
    await accept(context, world)
    name, status, _ = kube.patches[-1]
    assert name == "bad" and status["phase"] == "Failed"
    assert (
        status["conditions"][0]["reason"] == "InvalidSpec"
        and "numberOfGPUs" in status["conditions"][0]["message"]
    )


class _Failing(_Kube):
    """Status writes of the requests named in `failing` are rejected (422); Events are recorded."""

    def __init__(self, failing: set[str]) -> None:
        super().__init__()
        self.failing = failing
        self.events: list[tuple[str, str, str, str]] = []

    async def patch_status(self, api_version: str, kind: str, name: str, *args: Any, **kw: Any) -> Any:
        if name in self.failing:
            raise KubeApiError(422, "Invalid", f"status of {name} rejected")
        return await super().patch_status(api_version, kind, name, *args, **kw)

    async def create(self, manifest: dict[str, Any], **kw: Any) -> dict[str, Any]:
        if manifest.get("kind") == "Event":
            involved = manifest["involvedObject"]["name"]
            self.events.append((involved, manifest["type"], manifest["reason"], manifest["message"]))
        return manifest


def _due(name: str) -> dict[str, Any]:
    gpr = _gpr(name, phase="Ready", admittedAt="2020-01-01T00:00:00Z", gpusAllocated=1, colony="team/c")
    gpr["spec"]["exitDuration"] = "1s"
    gpr["metadata"]["generation"] = 1
    return gpr


async def test_one_requests_failed_write_is_recorded_and_backed_off_while_the_others_are_released(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 422 on one request's status write no longer stops release_due: the requests after it are
    released, the failing one gets a ProcessingFailed warning Event naming the error, is skipped
    while it backs off (1 s, then 2 s: doubling), and is released once its write goes through."""
    kube = _Failing({"bad"})
    context = _context(kube)
    clock = [1000.0]
    monkeypatch.setattr(gpr_writes, "clock", lambda: clock[0])
    world = World(time.time(), [_due("bad"), _due("good"), _due("other")], [], {}, {})
    assert await release_due(context, world)
    released = {name for name, status, _ in kube.patches if status.get("phase") == "Expired"}
    assert released == {"good", "other"}
    ((name, kind, _, message),) = [e for e in kube.events if e[2] == PROCESSING_FAILED]
    assert (name, kind) == ("bad", "Warning") and "422" in message and "status of bad rejected" in message
    assert "retried in 1s" in message

    kube.patches.clear()
    clock[0] += 0.5  # still backing off: not even tried
    world = World(time.time(), [_due("bad")], [], {}, {})
    assert not await release_due(context, world)
    assert kube.patches == [] and len(kube.events) == 3  # the ProcessingFailed and two GPRExpired

    clock[0] += 1.0  # its backoff is over: tried again, fails again, backs off twice as long
    assert not await release_due(context, world)
    assert "retried in 2s" in kube.events[-1][3]
    failure = context.scheduler.backoff.get("team/bad")
    assert failure is not None and failure.failures == 2

    bumped = _due("bad")
    bumped["metadata"]["generation"] = 2  # a new generation ends the backoff at once
    kube.failing.clear()
    assert await release_due(context, World(time.time(), [bumped], [], {}, {}))
    assert [name for name, status, _ in kube.patches if status.get("phase") == "Expired"] == ["bad"]
    context.scheduler.backoff.end_pass(clock[0])
    assert context.scheduler.backoff.get("team/bad") is None


async def test_one_failing_admission_is_recorded_and_the_others_are_admitted() -> None:
    cluster = _Cluster()
    world = _colony_world([], cluster)
    placement = Placement("pool/pool", "H100", (NodeAllocation("c/n", 1),))
    names = ["a", "bad", "c"]
    decisions = Decisions(admitted=tuple(Admit(f"team/{n}", placement) for n in names))
    kube = _Failing({"bad"})
    context = _context(kube)
    by_key = {f"team/{n}": _gpr(n, phase="Queued") for n in names}
    await _applied(context, world, by_key, decisions)
    ready = sorted(name for name, status, _ in kube.patches if status.get("phase") == "Ready")
    assert ready == ["a", "c"]
    assert [(n, r) for n, _, r, _ in kube.events if r == PROCESSING_FAILED] == [("bad", PROCESSING_FAILED)]
    assert "admission failed: KubeApiError" in next(m for n, _, r, m in kube.events if n == "bad")
    # backing off, a pending request is not scheduled; the others are scheduled as admitted (the
    # versions this process wrote, although the read is older)
    found = await gpr_snapshot.requests(context, World(time.time(), list(by_key.values()), [], {}, {}))
    assert not found.pending
    assert sorted(r.request.key for r in found.running) == ["team/a", "team/c"]


def test_backoff_doubles_up_to_its_cap_and_a_new_version_or_a_clean_pass_resets_it() -> None:
    assert [backoff.delay(n, 1.0, 10.0) for n in (1, 2, 3, 4, 5, 100000)] == [1, 2, 4, 8, 10, 10]
    tracker = backoff.Backoff(1.0, 10.0)
    assert not tracker.waiting("k", 1, 0.0)
    assert tracker.failed("k", 1, 0.0) == 1 and tracker.waiting("k", 1, 0.5)
    assert not tracker.waiting("k", 1, 1.0)
    assert tracker.failed("k", 1, 1.0) == 2 and tracker.waiting("k", 1, 2.5)
    assert not tracker.waiting("k", 2, 2.5) and tracker.get("k") is None  # a new version
    tracker.failed("k", 2, 3.0)
    tracker.end_pass(3.5)  # a pass that started while it backed off keeps it
    assert tracker.get("k") is not None
    tracker.end_pass(4.0)  # one that started after its backoff was over (and it did not fail): reset
    assert tracker.get("k") is None and len(tracker) == 0


class _ColonyKube(_Kube):
    """A management cluster holding one Colony `pool/pool` (being deleted) with an existing cluster."""

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Any:
        if kind != "Colony":
            return None
        cluster = {"clusterName": "c", "existing": {"kubeconfigSecretRef": {"name": "pool-kubeconfig"}}}
        return {
            "apiVersion": api_version,
            "kind": "Colony",
            "metadata": {"name": name, "namespace": namespace, "uid": "u", "deletionTimestamp": "now"},
            "spec": {"k8sVersion": "v1.31.0", "colonyClusters": [cluster]},
        }


class _Clients:
    """Colony cluster clients: every kubeconfig Secret gives `cluster`."""

    def __init__(self, cluster: _Cluster) -> None:
        self.cluster = cluster

    async def client(self, namespace: str, secret: str, key: str = "value") -> Any:
        return self.cluster


async def test_a_request_released_while_its_colony_is_deleted_takes_its_label_off_directly() -> None:
    # The pass did not read the colony (it is being deleted): the label is taken off through the
    # cluster's own client, not recorded in a ledger that the deletion may already have read.
    kube, cluster = _ColonyKube(), _Cluster()
    unused: Any = None
    context = OperatorContext(
        ("team",), OperatorSettings(), cast(Any, kube), cast(Any, _Clients(cluster)), (), unused, unused
    )
    gpr = _gpr("done", phase="Ready", colony="pool/pool", nodes=[{"cluster": "c", "node": "n", "gpus": 1}])
    await release_on_delete(context, gpr)
    assert cluster.labels == [{reservation_label("team/done"): None}]
    assert not [p for p in kube.object_patches if p[0] == "Colony"]  # nothing left for a ledger


async def test_an_admission_accepts_a_new_spec_and_acceptance_skips_what_the_pass_decided() -> None:
    """A request admitted by the pass that first sees it is accepted by its admission write (one
    write, not two racing onto one version); the background acceptance leaves it alone."""
    cluster = _Cluster()
    world = _colony_world([], cluster)
    placement = Placement("pool/pool", "H100", (NodeAllocation("c/n", 1),))
    new, accepted_before = _gpr("new"), _gpr("old", phase="Queued", observedGeneration=1)
    new["metadata"]["generation"] = accepted_before["metadata"]["generation"] = 1
    kube = _Kube()
    context = _context(kube)
    by_key = {"team/new": new, "team/old": accepted_before}
    decisions = Decisions(admitted=(Admit("team/new", placement), Admit("team/old", placement)))
    await _applied(context, world, by_key, decisions)
    admitted = {name: status for name, status, _ in kube.patches if status.get("phase") == "Admitted"}
    assert admitted["new"]["observedGeneration"] == 1
    assert [c["reason"] for c in admitted["new"]["conditions"]] == ["SpecValid"]
    assert "observedGeneration" not in admitted["old"] and "conditions" not in admitted["old"]
    written = len(kube.patches)
    await accept(context, World(time.time(), [new], [], {}, {}), decided={"team/new"})
    assert len(kube.patches) == written


async def test_estimates_wait_for_the_acceptance_of_a_new_spec() -> None:
    """A spec not accepted yet is written by accept.accept in the same pass: an estimate written
    onto the same version would make one of the two fail."""
    fresh = _gpr("fresh")
    fresh["metadata"]["generation"] = 1
    kube = _Kube()
    estimates = {"team/fresh": Estimate(1, None, "waiting for quota")}
    await write_estimates(
        _context(kube), World(time.time(), [fresh], [], {}, {}), Decisions(estimates=estimates)
    )
    assert kube.patches == []
    fresh["status"] = {"observedGeneration": 1}
    await write_estimates(
        _context(kube), World(time.time(), [fresh], [], {}, {}), Decisions(estimates=estimates)
    )
    assert [(name, status["phase"]) for name, status, _ in kube.patches] == [("fresh", "Queued")]


class _GatedStatus(_Kube):
    """Status writes wait for `gate`; those of `changed` requests find a newer version."""

    def __init__(self, changed: frozenset[str] = frozenset()) -> None:
        super().__init__(conflicts=changed)
        self.gate = asyncio.Event()

    async def patch_status(self, *args: Any, **kw: Any) -> dict[str, Any]:
        await self.gate.wait()
        return await super().patch_status(*args, **kw)


async def test_a_pass_during_an_admission_write_schedules_the_request_as_admitted() -> None:
    """Like Kueue's assumed workloads: the pass does not wait for the status write, and a pass
    running meanwhile counts the request's GPUs and quota as taken (never admits it twice); an
    admission whose write does not land is decided again."""
    placement = Placement("pool/pool", "H100", (NodeAllocation("c/n", 1),))
    kube = _GatedStatus(changed=frozenset({"moved"}))
    context = _context(kube)
    by_key = {f"team/{n}": _gpr(n, phase="Queued") for n in ("r", "moved")}
    decisions = Decisions(admitted=tuple(Admit(key, placement) for key in by_key))
    await apply(context, _colony_world([], _Cluster()), by_key, decisions)
    read = World(time.time(), list(by_key.values()), [], {}, {})  # the next read: still Queued
    found = await gpr_snapshot.requests(context, read)
    assert not found.pending
    assert sorted(r.request.key for r in found.running) == ["team/moved", "team/r"]
    assert found.by_key["team/r"]["status"]["phase"] == "Admitted"
    kube.gate.set()
    await asyncio.gather(*context.scheduler.reservations_in_flight.values())
    assert not context.scheduler.assumed
    found = await gpr_snapshot.requests(context, read)
    assert [r.request.key for r in found.running] == ["team/r"]  # as written
    assert [r.key for r in found.pending] == ["team/moved"]  # its write met a newer version


async def test_an_admission_that_cannot_even_be_started_is_recorded_and_the_others_go_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An error while deciding what to write (before anything runs in the background) stays with
    that request: it backs off, and the other admissions of the pass are written."""
    original = gpr_apply.gpr_queue

    def queue_of(world: World, gpr: Any, require_queue: bool) -> str:
        if gpr["metadata"]["name"] == "bad":
            raise ValueError("no queue for bad")
        return original(world, gpr, require_queue)

    monkeypatch.setattr(gpr_apply, "gpr_queue", queue_of)
    placement = Placement("pool/pool", "H100", (NodeAllocation("c/n", 1),))
    names = ["a", "bad", "c"]
    kube = _Failing(set())
    context = _context(kube)
    by_key = {f"team/{n}": _gpr(n, phase="Queued") for n in names}
    decisions = Decisions(admitted=tuple(Admit(f"team/{n}", placement) for n in names))
    await _applied(context, _colony_world([], _Cluster()), by_key, decisions)
    assert sorted(name for name, status, _ in kube.patches if status.get("phase") == "Ready") == ["a", "c"]
    assert [(n, r) for n, _, r, _ in kube.events if r == PROCESSING_FAILED] == [("bad", PROCESSING_FAILED)]
    assert "team/bad" not in context.scheduler.assumed
