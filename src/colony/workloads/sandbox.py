"""User jq expressions evaluated with a time, output and memory bound, off the operator's event loop.

jq holds the GIL while it runs (measured: a thread evaluating `def f: f; f` stops every other
thread), and neither a thread nor a C loop can be interrupted; so every expression of a
WorkloadDefinition runs in one persistent worker process (`colony.workloads.sandbox_worker`) that
is killed, and replaced on the next call, when an answer takes longer than the bound. The operator
awaits the answers, so its event loop (controllers, liveness probe) runs on meanwhile.

- `ExpressionSandbox.definition(manifest)`: a user's WorkloadDefinition checked once per spec
  (cached by a digest of name and spec, so once per generation): structure in process (pydantic,
  no jq), each expression in the worker (compiles, is a path where needed, finishes in time and
  within the output bounds on probe inputs). Raises `DefinitionError` naming the field.
- `read_objects` / `read_phases`: what placement needs of framework objects, batched per pass and
  cached per (definition, object uid, resourceVersion): an unchanged object costs no evaluation.

This is the one module of `colony.workloads` that does I/O (it runs a process).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from colony import settings
from colony.workloads import sandbox_worker
from colony.workloads.definition import (
    DefinitionError,
    WorkloadDefinition,
    definition_from_manifest,
    expression_fields,
    spec_fingerprint,
)
from colony.workloads.sandbox_worker import (
    HEADER,
    MEMORY_ENV,
    Answer,
    ObjectReading,
    PhaseReading,
    Request,
    probe_inputs,
)

TIMEOUT_ENV = "COLONY_EXPRESSION_TIMEOUT_SECONDS"
DEFAULT_TIMEOUT_S = 1.0
"""How long one evaluation (one object, or one expression on the probe inputs) may take."""
START_TIMEOUT_S = 30.0
"""How long the worker may take to start and to take in a batch."""
WORKER_COMMAND = "from colony.workloads.sandbox_worker import main; main()"
"""The worker's program (not `-m`: its classes must pickle under their module's name)."""
WORKER_ENVIRONMENT = frozenset(
    ("PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV", "LANG", "LC_ALL", "TMPDIR")
)
"""The only environment variables the worker inherits (jq's `$ENV` shows them to expressions)."""
CHECK_CACHE_SIZE = 1024
"""Definition verdicts kept (by digest of name and spec)."""

log = logging.getLogger(__name__)
T = TypeVar("T")


class SandboxUnavailable(RuntimeError):
    """The worker process could not be started or did not take a batch."""


@dataclass(frozen=True)
class Limits:
    """Bounds of user expressions: time per evaluation, worker address space (MiB)."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    memory_mb: int = sandbox_worker.DEFAULT_MEMORY_MB

    @classmethod
    def from_env(cls) -> Limits:
        """COLONY_EXPRESSION_TIMEOUT_SECONDS and COLONY_EXPRESSION_MEMORY_MB, else the defaults;
        `colony.settings.SettingsError` when one is not a positive number."""
        timeout = settings.positive_seconds(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)
        memory = settings.positive_seconds(MEMORY_ENV, sandbox_worker.DEFAULT_MEMORY_MB)
        return cls(timeout, int(memory))


class _Process:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.defined: set[str] = set()

    async def send(self, value: Any) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(sandbox_worker.frame(value))
        await self.process.stdin.drain()

    async def receive(self) -> Any:
        assert self.process.stdout is not None
        header = await self.process.stdout.readexactly(HEADER.size)
        (length,) = HEADER.unpack(header)
        return pickle.loads(await self.process.stdout.readexactly(length))

    async def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        with contextlib.suppress(Exception):
            await self.process.wait()


class ExpressionSandbox:
    """The worker process and the caches of its answers (see the module docstring)."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits.from_env()
        self._process: _Process | None = None
        self._lock = asyncio.Lock()
        self._verdicts: dict[str, WorkloadDefinition | str] = {}
        self._readings: dict[tuple[str, str, str, str], Any] = {}
        self._used: set[tuple[str, str, str, str]] = set()
        self.restarts = 0
        """Workers killed (late or dead) so far."""
        self.evaluations = 0
        """Items evaluated by the worker so far (cache hits excluded)."""

    # -- the process --------------------------------------------------------------------------------

    async def _ensure(self) -> _Process:
        if self._process is not None and self._process.process.returncode is None:
            return self._process
        # jq's `$ENV` and `env` show the environment: the worker gets only what Python needs
        env = {k: v for k, v in os.environ.items() if k in WORKER_ENVIRONMENT}
        env[MEMORY_ENV] = str(self.limits.memory_mb)
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                WORKER_COMMAND,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                env=env,
            )
        except OSError as error:
            raise SandboxUnavailable(f"cannot start the expression worker: {error}") from error
        self._process = _Process(process)
        return self._process

    async def _discard(self, why: str) -> None:
        if self._process is not None:
            log.warning("expression worker (pid %s) killed: %s", self._process.process.pid, why)
            await self._process.kill()
            self._process = None
            self.restarts += 1

    async def close(self) -> None:
        """Stop the worker (a later call starts a new one)."""
        async with self._lock:
            if self._process is not None:
                await self._process.kill()
                self._process = None

    async def run(
        self,
        items: Sequence[Request],
        definitions: Mapping[str, WorkloadDefinition] | None = None,
        describe: Callable[[int], str] | None = None,
        stop_after_failure: bool = False,
    ) -> list[Answer]:
        """Each item's answer, in order. An item that takes longer than the time bound, or during
        which the worker dies, is answered (False, message) and the worker replaced; with
        `stop_after_failure`, the items after it are answered (False, "not evaluated") instead.
        `describe(i)` names item i in the log."""
        definitions = definitions or {}
        answers: list[Answer] = []
        async with self._lock:
            while len(answers) < len(items):
                pending = items[len(answers) :]
                process = await self._ensure()
                defines = {k: d for k, d in definitions.items() if k not in process.defined}
                try:
                    await process.send({"define": defines, "items": list(pending)})
                    ack = await asyncio.wait_for(process.receive(), START_TIMEOUT_S)
                except (OSError, EOFError, asyncio.IncompleteReadError, TimeoutError) as error:
                    await self._discard(f"it did not take a batch ({type(error).__name__})")
                    raise SandboxUnavailable(
                        f"the expression worker did not take a batch: {error!r}"
                    ) from None
                if ack != "ack":
                    await self._discard(f"unexpected answer {ack!r}")
                    raise SandboxUnavailable("the expression worker answered out of turn")
                process.defined |= defines.keys()
                for _ in pending:
                    index = len(answers)
                    try:
                        answer: Answer = await asyncio.wait_for(process.receive(), self.limits.timeout_s)
                    except TimeoutError:
                        why = f"did not finish within {self.limits.timeout_s:g}s"
                    except (EOFError, asyncio.IncompleteReadError, OSError):
                        why = "stopped the expression worker (out of memory?)"
                    else:
                        answers.append(answer)
                        self.evaluations += 1
                        continue
                    what = describe(index) if describe else f"item {index}"
                    await self._discard(f"{what} {why}")
                    answers.append((False, why))
                    if stop_after_failure:
                        answers += [(False, "not evaluated")] * (len(items) - len(answers))
                    break
        return answers

    # -- definitions --------------------------------------------------------------------------------

    async def definition(self, manifest: Mapping[str, Any]) -> WorkloadDefinition:
        """The user's WorkloadDefinition checked (see the module docstring); `DefinitionError` when
        it is invalid. Verdicts are cached by the digest of name and spec."""
        metadata = manifest.get("metadata") or {}
        name = str(metadata.get("name") or "") if isinstance(metadata, Mapping) else ""
        key = spec_fingerprint(name, manifest.get("spec"))
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = await self._check(manifest)
            if len(self._verdicts) >= CHECK_CACHE_SIZE:
                self._verdicts.pop(next(iter(self._verdicts)))
            self._verdicts[key] = verdict
        if isinstance(verdict, str):
            raise DefinitionError(verdict)
        return verdict

    async def _check(self, manifest: Mapping[str, Any]) -> WorkloadDefinition | str:
        try:
            definition = definition_from_manifest(manifest, check_expressions=False)
        except DefinitionError as error:
            return str(error)
        fields = expression_fields(definition.spec)
        probes = probe_inputs(definition)
        items: list[Request] = [("check", None, (f, e, path, probes)) for f, e, path in fields]
        answers = await self.run(
            items,
            describe=lambda i: f"WorkloadDefinition {definition.name} {fields[i][0]}",
            stop_after_failure=True,
        )
        problems = []
        for (field, expression, _), (ok, value) in zip(fields, answers, strict=True):
            if ok and value is not None:
                problems.append(str(value))
            elif not ok and value != "not evaluated":
                problems.append(f"{field}: jq expression {expression!r} {value} on a probe input")
        if problems:
            return f"WorkloadDefinition {definition.name!r} is invalid: " + "; ".join(problems)
        return definition

    # -- objects ------------------------------------------------------------------------------------

    async def read_objects(
        self, pairs: Sequence[tuple[WorkloadDefinition, Mapping[str, Any]]]
    ) -> list[ObjectReading]:
        """Each object's demand and pod template paths (see `sandbox_worker.read_object`)."""
        return await self._cached("read", pairs, ObjectReading.failed)

    async def read_phases(
        self, pairs: Sequence[tuple[WorkloadDefinition, Mapping[str, Any]]]
    ) -> list[PhaseReading]:
        """Each object's standard phase (see `sandbox_worker.read_phase`)."""
        return await self._cached("phase", pairs, lambda message: PhaseReading(error=message))

    def sweep(self) -> None:
        """Forget the readings not asked for since the last sweep (call once per pass)."""
        self._readings = {k: v for k, v in self._readings.items() if k in self._used}
        self._used = set()

    async def _cached(
        self,
        op: str,
        pairs: Sequence[tuple[WorkloadDefinition, Mapping[str, Any]]],
        failed: Callable[[str], T],
    ) -> list[T]:
        found: list[T | None] = []
        missing: list[int] = []
        keys: list[tuple[str, str, str, str] | None] = []
        for index, (definition, obj) in enumerate(pairs):
            meta = obj.get("metadata") or {}
            uid, version = meta.get("uid"), meta.get("resourceVersion")
            key = (definition.fingerprint, op, str(uid), str(version)) if uid and version else None
            keys.append(key)
            if key is not None:
                self._used.add(key)
            if key is not None and key in self._readings:
                found.append(self._readings[key])
            else:
                found.append(None)
                missing.append(index)
        if missing:
            definitions = {pairs[i][0].fingerprint: pairs[i][0] for i in missing}
            items: list[Request] = [(op, pairs[i][0].fingerprint, pairs[i][1]) for i in missing]

            def describe(n: int) -> str:
                definition, obj = pairs[missing[n]]
                meta = obj.get("metadata") or {}
                return f"{definition.kind} {meta.get('namespace')}/{meta.get('name')} ({op})"

            answers = await self.run(items, definitions, describe)
            for index, (ok, value) in zip(missing, answers, strict=True):
                definition, obj = pairs[index]
                if not ok:
                    meta = obj.get("metadata") or {}
                    value = failed(
                        f"WorkloadDefinition {definition.name!r}: evaluating its expressions on "
                        f"{definition.kind} {meta.get('namespace')}/{meta.get('name')} {value} "
                        "(the bound on user expressions)"
                    )
                found[index] = value
                key = keys[index]
                if key is not None:
                    self._readings[key] = value
        return [value for value in found if value is not None]
