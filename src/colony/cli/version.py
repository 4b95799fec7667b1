"""`colony version`: the CLI's version and the operator's, as installed in the current cluster."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from importlib import metadata
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from colony.kube.resources import Kube

OPERATOR_SELECTOR = "app.kubernetes.io/name=colony-operator"
"""The label the Helm chart puts on the operator Deployment."""
LOOKUP_TIMEOUT_S = 5.0
UNKNOWN = "unknown"


def cli_version() -> str:
    """The installed package's version (of this checkout when installed editable)."""
    try:
        return metadata.version("colony-operator")
    except metadata.PackageNotFoundError:
        return UNKNOWN


def image_tag(image: str) -> str | None:
    """The tag of an image reference (`repo/name:tag`, `host:5000/name:tag@sha256:...`), or None."""
    reference = image.split("@", 1)[0]
    name, _, tag = reference.rpartition(":")
    return tag if name and "/" not in tag else None


def deployment_version(deployments: Sequence[Mapping[str, Any]]) -> str:
    """The operator's version from its Deployment: the `app.kubernetes.io/version` label, else the
    operator container's image tag; "unknown" when there is none."""
    for deployment in deployments:
        label = ((deployment.get("metadata") or {}).get("labels") or {}).get("app.kubernetes.io/version")
        if label:
            return str(label)
        containers = (((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
            "containers"
        ) or []
        for container in containers:
            tag = image_tag(str(container.get("image") or ""))
            if tag:
                return tag
    return UNKNOWN


async def _operator_version(kube: Kube) -> str:
    deployments = await asyncio.wait_for(
        kube.list("apps/v1", "Deployment", None, label_selector=OPERATOR_SELECTOR), LOOKUP_TIMEOUT_S
    )
    return deployment_version(deployments)


def operator_version() -> str:
    """The operator's version in the current cluster, or "unknown" when it cannot be read (no
    kubeconfig, unreachable, not installed, not allowed)."""
    from colony.cli.kube import connect

    async def lookup() -> str:
        kube = await connect()
        try:
            return await _operator_version(kube)
        finally:
            await kube.api.close()

    try:
        return asyncio.run(lookup())
    except Exception:  # any failure means the same to the user: the version is not known
        return UNKNOWN


def version() -> None:
    """Print the CLI and operator versions.

    The operator's is read from its Deployment in the current cluster ("unknown" when the cluster
    cannot be reached or has no operator installed by the chart).
    """
    typer.echo(f"CLI version:      {cli_version()}")
    typer.echo(f"Operator version: {operator_version()}")
