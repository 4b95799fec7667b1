"""`colony render`: print the manifests the operator would create for a Colony or DDPJob, offline.

It calls the same pure functions the controllers call (render.resources, then render_colony /
render_ddpjob), so what it prints is what the operator applies: for a Colony, the Cluster API
objects and HelmChartProxies in the management cluster; for a DDPJob, the Service, PodGroup and
worker pods of its current attempt in the cluster it is placed on. An object read back from the
cluster (`kubectl get ddpjob x -o yaml`) renders with its uid, recorded ports and attempt.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from pydantic import ValidationError

from colony.api import COLONY, DDPJOB
from colony.cli.jsonpath import JsonPathTemplate, OutputChoice
from colony.cli.kube import (
    EXIT_USAGE,
    CliError,
    NamespaceOption,
    cli_errors,
    load_documents,
    output_option,
    print_data,
    resolve_namespace,
    with_namespace,
)
from colony.render.contract import Manifest
from colony.render.resources import render_colony_resource, render_ddpjob_resource


class OutputFormat(OutputChoice, StrEnum):
    """How `colony render` prints the manifests (or `-o jsonpath=TEMPLATE` on what `-o json`
    prints: a List)."""

    yaml = "yaml"
    json = "json"


def render_document(document: dict[str, Any]) -> tuple[list[Manifest], list[str]]:
    """(manifests, problems) for one Colony or DDPJob object with metadata.namespace set."""
    kind, name = document.get("kind"), document["metadata"].get("name")
    if not name:
        raise CliError(f"a {kind} without metadata.name cannot be rendered", EXIT_USAGE)
    try:
        if kind == COLONY.kind and document.get("apiVersion") == COLONY.api_version:
            # the controller's own list of what it applies (imported here: it loads kopf)
            from colony.controllers.colony_children import desired_objects

            rendered = render_colony_resource(document)
            return desired_objects(rendered), list(rendered.problems)
        if kind == DDPJOB.kind and document.get("apiVersion") == DDPJOB.api_version:
            return list(render_ddpjob_resource(document).manifests), []
    except ValidationError as error:
        problems = "; ".join(f"spec.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors())
        raise CliError(f"{kind} {name} is invalid: {problems}") from error
    except ValueError as error:
        raise CliError(f"{kind} {name} cannot be rendered: {error}") from error
    raise CliError(
        f"{kind} {name}: render knows {COLONY.kind} ({COLONY.api_version}) and "
        f"{DDPJOB.kind} ({DDPJOB.api_version})",
        EXIT_USAGE,
    )


def gpu_name_warnings(names: list[str], known: set[str]) -> list[str]:
    """A warning per GPU name the catalog does not know, with the closest known names (difflib);
    the wildcard `*` (every type) is no name."""
    import difflib

    from colony.scheduling.offers.gpu_names import normalize_gpu

    warnings = []
    for name in names:
        canonical = normalize_gpu(str(name))
        if canonical in known or name == "*":
            continue
        close = difflib.get_close_matches(canonical, sorted(known), n=3, cutoff=0.5)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        warnings.append(f"GPU type {name} is not in the offer catalog{hint}")
    return warnings


def known_gpu_names() -> set[str]:
    """The canonical GPU names of the shipped offer catalog."""
    from colony.pricing.catalog_source import load_default_catalog

    return {offer.accelerator for offer in load_default_catalog()}


def document_gpu_names(document: dict[str, Any]) -> list[str]:
    """The GPU type names a DDPJob asks for (spec.gpuTypes)."""
    if document.get("kind") != DDPJOB.kind:
        return []
    return [str(n) for n in (document.get("spec") or {}).get("gpuTypes") or []]


def to_yaml(sections: list[tuple[dict[str, Any], list[Manifest]]]) -> str:
    """Multi-document YAML, each source object's manifests under a comment naming it."""
    parts = []
    for source, manifests in sections:
        meta = source["metadata"]
        header = f"# {source['kind']} {meta['namespace']}/{meta['name']}: {len(manifests)} object(s)"
        documents = [yaml.safe_dump(m, sort_keys=False).rstrip("\n") for m in manifests]
        parts.append(header + "\n" + "\n---\n".join(documents))
    return "\n---\n".join(parts)


@cli_errors
def render(
    file: Annotated[
        Path,
        typer.Option(
            "--file",
            "-f",
            metavar="FILE|DIR|-",
            help="Colonies and/or DDPJobs: a YAML file, a directory or - (stdin).",
        ),
    ],
    output: Annotated[
        OutputChoice, output_option(OutputFormat, "yaml, json or jsonpath=TEMPLATE.")
    ] = OutputFormat.yaml,
    namespace: NamespaceOption = None,
) -> None:
    """Print what the operator would create for Colonies and DDPJobs.

    The manifests for the Colonies and DDPJobs in FILE.
    No cluster is needed; problems such as unknown add-ons or GPU types go to stderr.
    """
    default = resolve_namespace(None) if namespace is None else namespace
    sections = []
    for document in load_documents(file):
        placed = with_namespace(document, namespace, default)
        manifests, problems = render_document(placed)
        names = document_gpu_names(placed)
        if names:
            problems = [*problems, *gpu_name_warnings(names, known_gpu_names())]
        for problem in problems:
            typer.echo(f"warning: {placed['kind']} {placed['metadata']['name']}: {problem}", err=True)
        sections.append((placed, manifests))
    if output is OutputFormat.json or isinstance(output, JsonPathTemplate):
        items = [m for _, manifests in sections for m in manifests]
        print_data({"apiVersion": "v1", "kind": "List", "items": items}, output)
    else:
        typer.echo(to_yaml(sections))
