"""Helm on colony clusters, through pyhelm3 and the pinned helm binary (I/O only).

helm only takes a kubeconfig file, so each call gets the colony's kubeconfig written with 0600
permissions into a private (0700) temporary directory that is removed as soon as the call returns.
A tenant's kubeconfig must never run code or read the operator's files: `check_kubeconfig` passes
it through the operator's one safe parser and writes only what that accepted.

Releases the operator installs carry Helm release labels (`helm upgrade --labels`): the colony's
uid, which finds every release of a colony on a cluster (to uninstall removed dependencies), and
the plan's spec hash, which tells an up-to-date release from one that needs an upgrade.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pyhelm3 import Command

from colony.kube.safe_kubeconfig import KubeconfigError, minimal_kubeconfig, parse_kubeconfig
from colony.kube.timeouts import DEFAULT_TIMEOUTS
from colony.labels import HELM_OWNER_LABEL, HELM_SPEC_LABEL
from colony.render.existing_addons import HelmReleasePlan

OWNER_LABEL = HELM_OWNER_LABEL
SPEC_LABEL = HELM_SPEC_LABEL
LIST_TIMEOUT = "30s"


class UnsafeKubeconfig(ValueError):
    """The kubeconfig would run a program, read a file or is otherwise refused; never handed to helm."""


def check_kubeconfig(kubeconfig: object, *, allow_unsafe: bool = False) -> dict[str, Any]:
    """The kubeconfig helm gets: rebuilt from what the operator's one safe parser accepts
    (kube.safe_kubeconfig: inline credentials over https, no exec, auth provider or file path);
    UnsafeKubeconfig naming the refused field otherwise."""
    try:
        credentials = parse_kubeconfig(kubeconfig, allow_unsafe=allow_unsafe)
    except KubeconfigError as error:
        raise UnsafeKubeconfig(str(error)) from None
    return minimal_kubeconfig(credentials)


@contextmanager
def private_kubeconfig(kubeconfig: Mapping[str, Any]) -> Iterator[Path]:
    """The kubeconfig (as `check_kubeconfig` rebuilds it) as a 0600 file in a fresh 0700
    directory, removed on exit."""
    safe = check_kubeconfig(kubeconfig)
    directory = Path(tempfile.mkdtemp(prefix="colony-helm-"))
    try:
        path = directory / "kubeconfig"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            yaml.safe_dump(safe, file)
        yield path
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def find_helm() -> Path | None:
    """The helm binary: $COLONY_HELM, else `helm` on PATH, else the pinned one built by hack/."""
    if configured := os.environ.get("COLONY_HELM"):
        return Path(configured)
    if found := shutil.which("helm"):
        return Path(found)
    from colony.devenv.tools import binary_dir

    pinned = binary_dir() / "helm"
    return pinned if pinned.is_file() else None


@dataclass(frozen=True)
class Release:
    """One release as `helm list` reports it."""

    name: str
    namespace: str
    status: str
    """deployed, failed, pending-install, pending-upgrade, uninstalling, ..."""
    chart: str


class HelmClient:
    """pyhelm3 commands against one colony cluster (a kubeconfig dict)."""

    def __init__(self, helm: Path, kubeconfig: Mapping[str, Any]) -> None:
        self.helm = helm
        self.kubeconfig = check_kubeconfig(kubeconfig)

    @contextmanager
    def _command(self, labels: Mapping[str, str] | None = None) -> Iterator[Command]:
        with private_kubeconfig(self.kubeconfig) as path:
            command = _LabelledCommand(executable=str(self.helm), kubeconfig=path, default_timeout="10m")
            command.labels = dict(labels or {})
            yield command

    async def releases(self, owner_uid: str, spec_hash: str | None = None) -> list[Release]:
        """Every release (any state) labelled for the colony, optionally with one spec hash."""
        selector = f"{OWNER_LABEL}={owner_uid}"
        if spec_hash is not None:
            selector += f",{SPEC_LABEL}={spec_hash}"
        with self._command() as command:
            out = await command.run(
                [
                    "list",
                    "--all-namespaces",
                    "--all",
                    "--selector",
                    selector,
                    "--output",
                    "json",
                    "--max",
                    "1000",
                ]
            )
        return [
            Release(r["name"], r["namespace"], r.get("status", ""), r.get("chart", ""))
            for r in json.loads(out)
        ]

    async def install_or_upgrade(self, plan: HelmReleasePlan, owner_uid: str) -> str:
        """`helm upgrade --install` the plan's release; returns the release status."""
        labels = {OWNER_LABEL: owner_uid, SPEC_LABEL: plan.spec_hash}
        with self._command(labels) as command:
            result: Mapping[str, Any] = await command.install_or_upgrade(
                plan.release_name,
                plan.chart_ref,
                dict(plan.values),
                repo=plan.repo,
                version=plan.version,
                namespace=plan.namespace,
                create_namespace=plan.create_namespace,
                wait=plan.wait,
                timeout=plan.timeout,
                atomic=False,
            )
        return str((result.get("info") or {}).get("status", "unknown"))

    async def uninstall(self, release: str, namespace: str) -> None:
        """`helm uninstall`; a release that is already gone is fine."""
        with self._command() as command:
            try:
                await command.uninstall(release, namespace=namespace, timeout="5m", wait=True)
            except Exception as error:
                # helm's answer for a release that is gone; other errors may say "not found" too
                # (a hook of a kind the cluster does not serve: "resource mapping not found")
                if "release: not found" not in str(getattr(error, "stderr", error)).lower():
                    raise


LONG_COMMANDS = ("install", "upgrade", "uninstall")
"""helm commands that may wait for workloads (their own `--timeout`, at most 10m here)."""
LONG_COMMAND_BOUND_S = 11 * 60.0


def command_bound(command: Sequence[Any]) -> float:
    """Most seconds one helm process may run: a release operation its own `--timeout` (10m) and a
    minute more, anything else (list, status, show) two request bounds. helm sets no bound of its own
    on a server that accepts connections and never answers; pyhelm3 terminates the process when
    its task is cancelled."""
    if command and str(command[0]) in LONG_COMMANDS:
        return LONG_COMMAND_BOUND_S
    return 2 * DEFAULT_TIMEOUTS.request_s


class _LabelledCommand(Command):  # type: ignore[misc]
    """pyhelm3's Command, adding `--labels` to `helm upgrade` (pyhelm3 has no argument for it), with
    every helm process time-bounded (`command_bound`)."""

    labels: dict[str, str]

    async def run(self, command: list[Any], input: bytes | None = None) -> bytes:
        if command and command[0] == "upgrade" and self.labels:
            command = [
                *command,
                "--labels",
                ",".join(f"{k}={v}" for k, v in sorted(self.labels.items())),
            ]
        async with asyncio.timeout(command_bound(command)):
            out: bytes = await super().run(command, input)
        return out
