"""What every cluster-facing `colony` command shares: the kubeconfig, the namespace, one async client
per command, output formats (table, yaml, json) and error messages that say what to do.

Exit codes: 0 ok, 1 failure (not found, rejected by the API server, unreachable), 2 usage (bad
options, unreadable or unsupported input files). Expected errors are raised as `CliError` and
printed as one line on stderr, never as a stack trace.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, ParamSpec, TypeVar

import typer
import yaml
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:  # the client library takes 0.4 s to import: only commands that talk to a cluster do
    from colony.api.base import ResourceDefinition
    from colony.kube.resources import Kube, KubeApiError

T = TypeVar("T")
P = ParamSpec("P")

PIPED_WIDTH = 200
"""Table width when stdout is not a terminal (rich's default, 80, would wrap the columns)."""
DEFAULT_NAMESPACE = "default"
EXIT_FAILURE = 1
EXIT_USAGE = 2


class CliError(Exception):
    """An expected failure: `message` is shown as is on stderr, the command exits with `code`."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


class OutputFormat(StrEnum):
    """How list/get commands print objects."""

    table = "table"
    yaml = "yaml"
    json = "json"


NamespaceOption = Annotated[
    str | None,
    typer.Option(
        "--namespace", "-n", help="Namespace; default: the kubeconfig context's namespace, else default."
    ),
]
OutputOption = Annotated[OutputFormat, typer.Option("--output", "-o", help="table, yaml or json.")]


# -- kubeconfig and namespace -----------------------------------------------------------------


def kubeconfig_paths(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The kubeconfig files in use: those in $KUBECONFIG (':'-separated), else ~/.kube/config."""
    env = os.environ if environ is None else environ
    value = env.get("KUBECONFIG", "")
    if value:
        return [Path(p).expanduser() for p in value.split(os.pathsep) if p]
    return [Path("~/.kube/config").expanduser()]


def namespace_from_kubeconfigs(configs: Sequence[Mapping[str, Any]]) -> str | None:
    """The namespace of the current context of merged kubeconfigs (first file wins, as kubectl)."""
    current = next((c.get("current-context") for c in configs if c.get("current-context")), None)
    if not current:
        return None
    for config in configs:
        for context in config.get("contexts") or []:
            if context.get("name") == current:
                namespace = (context.get("context") or {}).get("namespace")
                return str(namespace) if namespace else None
    return None


def _existing_kubeconfigs() -> list[Path]:
    paths = [p for p in kubeconfig_paths() if p.is_file()]
    if not paths:
        raise CliError("no kubeconfig: set KUBECONFIG or run `make dev` (it prints the export to use)")
    return paths


def resolve_namespace(namespace: str | None) -> str:
    """`-n` when given, else the current context's namespace, else "default"."""
    if namespace:
        return namespace
    configs = []
    for path in kubeconfig_paths():
        try:
            loaded = yaml.safe_load(path.read_text()) if path.is_file() else None
        except (OSError, yaml.YAMLError):
            loaded = None
        if isinstance(loaded, dict):
            configs.append(loaded)
    return namespace_from_kubeconfigs(configs) or DEFAULT_NAMESPACE


# -- running a command against the cluster ----------------------------------------------------


async def connect() -> Kube:
    """A client of the management cluster from the current kubeconfig (close `kube.api` after)."""
    from kubernetes_asyncio import client, config

    from colony.kube.resources import Kube

    paths = _existing_kubeconfigs()
    configuration = client.Configuration()
    try:
        await config.load_kube_config(
            config_file=os.pathsep.join(str(p) for p in paths), client_configuration=configuration
        )
    except Exception as error:  # the loader raises ConfigException and plain errors alike
        raise CliError(f"kubeconfig {', '.join(map(str, paths))} is unusable: {error}") from error
    return Kube(client.ApiClient(configuration))


def run(work: Callable[[Kube], Awaitable[T]]) -> T:
    """Run `work` with a management-cluster client; expected errors become a message and exit code."""

    from colony.kube.resources import KubeApiError

    async def main() -> T:
        kube = await connect()
        try:
            return await work(kube)
        finally:
            await kube.api.close()

    try:
        return asyncio.run(main())
    except CliError as error:
        fail(str(error), error.code)
    except KubeApiError as error:
        fail(api_error_message(error))
    except (OSError, TimeoutError) as error:
        fail(f"cannot reach the Kubernetes API server: {error} (is the cluster up? `make dev` starts one)")
    except Exception as error:
        import aiohttp

        if isinstance(error, aiohttp.ClientError):
            fail(
                f"cannot reach the Kubernetes API server: {error} (is the cluster up? `make dev` starts one)"
            )
        raise


def cli_errors(command: Callable[P, T]) -> Callable[P, T]:
    """Decorate a command so expected errors raised outside `run` (bad files, options) print one
    line and exit with their code instead of a stack trace."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return command(*args, **kwargs)
        except CliError as error:
            fail(str(error), error.code)

    return wrapper


async def create_objects(
    kube: Kube, documents: Sequence[Mapping[str, Any]], kind: str, list_command: str
) -> None:
    """Create each object (POST: an existing one is an error, never overwritten)."""
    from colony.kube.resources import Conflict, KubeApiError

    for document in documents:
        meta = document["metadata"]
        try:
            await kube.create(document)
        except Conflict as error:
            raise CliError(
                f"{kind} {meta.get('name')} already exists in namespace {meta['namespace']}: "
                f"`colony {list_command} -n {meta['namespace']}`, delete it or pick another name"
            ) from error
        except KubeApiError as error:
            raise CliError(f"{kind} {meta.get('name')} was rejected: {error}") from error
        typer.echo(f"{kind.lower()} {meta['name']} created in namespace {meta['namespace']}", err=True)


def fail(message: str, code: int = EXIT_FAILURE) -> NoReturn:
    """Print `error: message` on stderr and exit with `code` (never returns)."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def api_error_message(error: KubeApiError) -> str:
    """A one-line explanation of an API server error, with what to try."""
    hints = {
        401: "your kubeconfig's credentials were not accepted",
        403: "your kubeconfig's user is not allowed to do this (RBAC)",
    }
    hint = hints.get(error.status)
    return f"the API server refused: {error}" + (f" ({hint})" if hint else "")


def not_found(kind: str, name: str, namespace: str, list_command: str) -> CliError:
    """The error for a missing object, naming the command that lists what exists."""
    return CliError(
        f"{kind} {name} not found in namespace {namespace}: `colony {list_command} -n {namespace}`"
    )


# -- files --------------------------------------------------------------------------------------


def load_documents(path: Path) -> list[dict[str, Any]]:
    """The YAML/JSON documents of a file ('-' reads stdin); CliError (usage) when unreadable."""
    import sys

    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text()
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except OSError as error:
        raise CliError(f"cannot read {path}: {error.strerror or error}", EXIT_USAGE) from error
    except yaml.YAMLError as error:
        raise CliError(f"{path} is not valid YAML: {error}", EXIT_USAGE) from error
    items: list[dict[str, Any]] = []
    for document in documents:
        if not isinstance(document, dict) or "kind" not in document:
            raise CliError(f"{path}: every document must be a Kubernetes object with a kind", EXIT_USAGE)
        if document["kind"] == "List":
            items += document.get("items") or []
        else:
            items.append(document)
    if not items:
        raise CliError(f"{path} holds no objects", EXIT_USAGE)
    return items


def with_namespace(document: Mapping[str, Any], namespace: str | None, default: str) -> dict[str, Any]:
    """A copy of `document` placed in `namespace` (-n), its own one, or `default`; CliError (usage)
    when -n contradicts the namespace written in the file."""
    copy: dict[str, Any] = json.loads(json.dumps(document))
    meta = copy.setdefault("metadata", {})
    written = meta.get("namespace")
    if namespace and written and written != namespace:
        raise CliError(
            f"{copy['kind']} {meta.get('name')} is in namespace {written} in the file but -n says "
            f"{namespace}: drop one of them",
            EXIT_USAGE,
        )
    meta["namespace"] = namespace or written or default
    return copy


# -- output -------------------------------------------------------------------------------------


def console() -> Console:
    """A console on stdout, wide enough for tables when piped."""
    out = Console()
    return out if out.is_terminal else Console(width=PIPED_WIDTH)


def table(columns: Sequence[str], rows: Iterable[Sequence[str]]) -> Table:
    """A kubectl-like table: upper-case headers, no borders."""
    result = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for column in columns:
        result.add_column(column.upper(), no_wrap=True, overflow="fold")
    for row in rows:
        result.add_row(*row)
    return result


def clean(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object without managedFields (noise for humans)."""
    copy = dict(obj)
    if isinstance(copy.get("metadata"), Mapping):
        copy["metadata"] = {k: v for k, v in copy["metadata"].items() if k != "managedFields"}
    return copy


def dump(data: Any, output: OutputFormat) -> str:
    """`data` as YAML or JSON text."""
    if output is OutputFormat.json:
        return json.dumps(data, indent=2, sort_keys=False)
    return yaml.safe_dump(data, sort_keys=False).rstrip("\n")


def print_objects(
    objects: Sequence[Mapping[str, Any]],
    output: OutputFormat,
    render_table: Callable[[Sequence[Mapping[str, Any]]], Table],
    *,
    single: bool = False,
) -> None:
    """Print objects as a table, or as YAML/JSON (a `List` unless `single`)."""
    if output is OutputFormat.table:
        console().print(render_table(objects))
        return
    cleaned = [clean(o) for o in objects]
    data: Any = cleaned[0] if single else {"apiVersion": "v1", "kind": "List", "items": cleaned}
    typer.echo(dump(data, output))


def print_namespace_list(
    resource: ResourceDefinition,
    namespace: str | None,
    output: OutputFormat,
    render_table: Callable[[Sequence[Mapping[str, Any]]], Table],
    plural_kind: str,
) -> None:
    """`colony <kind> list`: the resource's objects in the namespace, by name (a table says so
    when there are none, e.g. "no Colonies in namespace team-a")."""
    ns = resolve_namespace(namespace)
    objects = run(lambda kube: kube.list(resource.api_version, resource.kind, ns))
    if not objects and output is OutputFormat.table:
        typer.echo(f"no {plural_kind} in namespace {ns}", err=True)
        return
    print_objects(sorted(objects, key=lambda o: str(o["metadata"]["name"])), output, render_table)


def print_details(pairs: Iterable[tuple[str, str]]) -> None:
    """`Key: value` lines for `get` in table mode, skipping empty values."""
    lines = [(key, value) for key, value in pairs if value not in ("", "-")]
    width = max((len(key) for key, _ in lines), default=0) + 1
    for key, value in lines:
        typer.echo(f"{key + ':':<{width}} {value}")


# -- formatting helpers (pure) ------------------------------------------------------------------


def parse_timestamp(value: Any) -> datetime | None:
    """An RFC 3339 timestamp from the API (with Z or an offset), or None."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def duration(seconds: float) -> str:
    """A short human duration, kubectl style: 45s, 3m, 3m20s, 2h5m, 4d3h."""
    total = max(0, int(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m{secs}s" if secs and minutes < 10 else f"{minutes}m"
    return f"{secs}s"


def age(timestamp: Any, now: datetime | None = None) -> str:
    """Time since `timestamp` (e.g. metadata.creationTimestamp), or "-"."""
    start = parse_timestamp(timestamp)
    if start is None:
        return "-"
    return duration(((now or datetime.now(UTC)) - start).total_seconds())


def money(value: Any) -> str:
    """USD with two decimals (four below one cent), or "-" when unknown."""
    if value is None:
        return "-"
    amount = float(value)
    return f"${amount:,.4f}" if 0 < abs(amount) < 0.01 else f"${amount:,.2f}"


def number(value: Any, digits: int = 2) -> str:
    """A number with `digits` decimals, or "-" when unknown."""
    return "-" if value is None else f"{float(value):,.{digits}f}"


def text(value: Any) -> str:
    """A value as a table cell: "-" for None or empty."""
    return "-" if value is None or value == "" else str(value)


def conditions_rows(conditions: Iterable[Mapping[str, Any]], now: datetime | None = None) -> Iterator[str]:
    """One line per condition: `Type=Status Reason (age): message`."""
    for condition in conditions:
        since = age(condition.get("lastTransitionTime"), now)
        message = f": {condition['message']}" if condition.get("message") else ""
        yield (
            f"{condition.get('type')}={condition.get('status')} {condition.get('reason') or ''} "
            f"({since}){message}"
        ).replace("  ", " ")
