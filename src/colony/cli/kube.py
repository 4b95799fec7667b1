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
import sys
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, ParamSpec, TypeVar

import typer
import yaml
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from colony.cli.jsonpath import PREFIX as JSONPATH_PREFIX
from colony.cli.jsonpath import JsonPathError, JsonPathTemplate, OutputChoice, parse_template
from colony.timefmt import parse_time_lenient

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
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """An expected failure: `message` is shown as is on stderr, the command exits with `code`."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


class OutputFormat(OutputChoice, StrEnum):
    """How list/get commands print objects (kubectl's -o); `-o jsonpath=TEMPLATE` is a
    JsonPathTemplate instead."""

    table = "table"
    wide = "wide"
    name = "name"
    yaml = "yaml"
    json = "json"


@dataclass
class Target:
    """The cluster the command talks to: --kubeconfig and --context (kubectl's global flags), set
    by option callbacks wherever they are given (before or after the subcommand)."""

    kubeconfig: str | None = None
    context: str | None = None


TARGET = Target()


def _set_context(value: str | None) -> str | None:
    if value:
        TARGET.context = value
    return value


def _set_kubeconfig(value: str | None) -> str | None:
    if value:
        TARGET.kubeconfig = value
    return value


NamespaceOption = Annotated[
    str | None,
    typer.Option(
        "--namespace",
        "-n",
        metavar="NS",
        help="Namespace; default: the kubeconfig context's, else default.",
    ),
]
AllNamespacesOption = Annotated[
    bool, typer.Option("--all-namespaces", "-A", help="List across all namespaces.")
]


def output_parser(formats: type[StrEnum]) -> Callable[[Any], OutputChoice]:
    """The parser of a command's `-o`: one of `formats` (an enum mixing in OutputChoice), or
    `jsonpath=TEMPLATE` (a JsonPathTemplate); BadParameter (a one-line usage error, exit 2) for
    anything else."""
    choices: dict[str, OutputChoice] = {}
    for member in formats:
        if not isinstance(member, OutputChoice):
            raise TypeError(f"{formats.__name__} must mix in OutputChoice")
        choices[str(member.value)] = member

    def parse(value: Any) -> OutputChoice:
        if isinstance(value, OutputChoice):
            return value
        text = str(value)
        if text in choices:
            return choices[text]
        if text.startswith(JSONPATH_PREFIX):
            try:
                return parse_template(text.removeprefix(JSONPATH_PREFIX))
            except JsonPathError as error:
                raise typer.BadParameter(f"bad jsonpath template: {error}") from None
        if text == "jsonpath":
            raise typer.BadParameter("jsonpath needs a template, e.g. -o jsonpath='{.metadata.name}'")
        raise typer.BadParameter(f"{text} is not a format: use {', '.join(choices)} or jsonpath=TEMPLATE")

    return parse


def output_option(formats: type[StrEnum], help_text: str) -> Any:
    """typer's `-o/--output FORMAT` option for `formats` and jsonpath templates (completion
    offers the formats and `jsonpath=`)."""
    words = [*(str(f.value) for f in formats), JSONPATH_PREFIX]

    def complete(incomplete: str) -> list[str]:
        return [word for word in words if word.startswith(incomplete)]

    return typer.Option(
        "--output",
        "-o",
        metavar="FORMAT",
        parser=output_parser(formats),
        autocompletion=complete,
        help=help_text,
    )


OutputOption = Annotated[
    OutputChoice, output_option(OutputFormat, "table, wide, name, yaml, json or jsonpath=TEMPLATE.")
]
WatchOption = Annotated[
    bool, typer.Option("--watch", "-w", help="After listing, print each change (Ctrl-C stops).")
]
ContextOption = Annotated[
    str | None,
    typer.Option(
        "--context",
        metavar="NAME",
        callback=_set_context,
        expose_value=False,
        is_eager=True,
        help="Kubeconfig context to use.",
    ),
]
KubeconfigOption = Annotated[
    str | None,
    typer.Option(
        "--kubeconfig",
        metavar="FILE",
        callback=_set_kubeconfig,
        expose_value=False,
        is_eager=True,
        help="Kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).",
    ),
]


@dataclass
class View:
    """How tables are drawn in this invocation: -o wide adds the wide-only columns, -A a NAMESPACE
    column; rows printed by a watch keep the widths of the table printed first."""

    wide: bool = False
    all_namespaces: bool = False
    widths: list[int] | None = None
    """The column widths of the last table printed with its header (watched rows line up)."""


VIEW = View()
RenderTable = Callable[[Sequence[Mapping[str, Any]]], Table]


# -- kubeconfig and namespace -----------------------------------------------------------------


def kubeconfig_paths(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The kubeconfig files in use: --kubeconfig, else those in $KUBECONFIG (':'-separated), else
    ~/.kube/config."""
    if TARGET.kubeconfig and environ is None:
        return [Path(TARGET.kubeconfig).expanduser()]
    env = os.environ if environ is None else environ
    value = env.get("KUBECONFIG", "")
    if value:
        return [Path(p).expanduser() for p in value.split(os.pathsep) if p]
    return [Path("~/.kube/config").expanduser()]


def namespace_from_kubeconfigs(
    configs: Sequence[Mapping[str, Any]], context: str | None = None
) -> str | None:
    """The namespace of `context` (default: the current context) of merged kubeconfigs (first file
    wins, as kubectl)."""
    current = context or next((c.get("current-context") for c in configs if c.get("current-context")), None)
    if not current:
        return None
    for config in configs:
        for entry in config.get("contexts") or []:
            if entry.get("name") == current:
                namespace = (entry.get("context") or {}).get("namespace")
                return str(namespace) if namespace else None
    return None


def _existing_kubeconfigs() -> list[Path]:
    paths = [p for p in kubeconfig_paths() if p.is_file()]
    if not paths:
        raise CliError(f"no kubeconfig: pass --kubeconfig or set KUBECONFIG; {setup_hint()}")
    return paths


def setup_hint() -> str:
    """What to do when there is no cluster, for this context: a checkout runs `make dev`, an
    installed CLI points at the cluster where the operator's Helm chart is installed."""
    checkout = Path("Makefile").is_file() and Path("charts/colony-operator").is_dir()
    if checkout:
        return "in this checkout `make dev` starts a local cluster (it prints the export to use)"
    return (
        "point it at the cluster where the operator is installed "
        "(`helm install colony-operator charts/colony-operator -n colony-system`, see the README)"
    )


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
    return namespace_from_kubeconfigs(configs, TARGET.context) or DEFAULT_NAMESPACE


# -- running a command against the cluster ----------------------------------------------------


async def connect() -> Kube:
    """A client of the management cluster from the current kubeconfig (close `kube.api` after)."""
    from kubernetes_asyncio import client, config

    from colony.kube.resources import Kube
    from colony.kube.timeouts import bound_requests

    paths = _existing_kubeconfigs()
    configuration = client.Configuration()
    try:
        await config.load_kube_config(
            config_file=os.pathsep.join(str(p) for p in paths),
            context=TARGET.context,
            client_configuration=configuration,
        )
    except Exception as error:  # the loader raises ConfigException and plain errors alike
        raise CliError(f"kubeconfig {', '.join(map(str, paths))} is unusable: {error}") from error
    return Kube(bound_requests(client.ApiClient(configuration)))  # every request time-bounded


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
        fail(unreachable(error))
    except Exception as error:
        import aiohttp

        if isinstance(error, aiohttp.ClientError):
            fail(unreachable(error))
        raise


def unreachable(error: BaseException) -> str:
    """The one-line message for an API server that does not answer, with the next step."""
    context = f" of context {TARGET.context}" if TARGET.context else ""
    return f"cannot reach the Kubernetes API server{context}: {error} (is the cluster up? {setup_hint()})"


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
    """Print `error: message` on one line of stderr and exit with `code` (never returns)."""
    typer.echo(f"error: {' '.join(message.split())}", err=True)
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


MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


def manifest_files(path: Path) -> list[Path]:
    """The files `-f` names: the file itself, '-' (stdin), or a directory's .yaml/.yml/.json files
    (sorted, not recursive, as kubectl); CliError (usage) for a directory without any."""
    if str(path) != "-" and path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in MANIFEST_SUFFIXES)
        if not files:
            raise CliError(f"{path} holds no .yaml, .yml or .json files", EXIT_USAGE)
        return files
    return [path]


def load_documents(path: Path) -> list[dict[str, Any]]:
    """The YAML/JSON objects of a file, a directory's manifest files, or '-' (stdin); CliError
    (usage) when unreadable. `List` objects are unpacked."""
    items: list[dict[str, Any]] = []
    for file in manifest_files(path):
        items += _file_documents(file)
    if not items:
        raise CliError(f"{path} holds no objects", EXIT_USAGE)
    return items


def _file_documents(path: Path) -> list[dict[str, Any]]:
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text()
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except OSError as error:
        raise CliError(f"cannot read {path}: {error.strerror or error}", EXIT_USAGE) from error
    except yaml.YAMLError as error:
        raise CliError(f"{path} is not valid YAML: {' '.join(str(error).split())}", EXIT_USAGE) from error
    items: list[dict[str, Any]] = []
    for document in documents:
        if not isinstance(document, dict) or "kind" not in document:
            raise CliError(f"{path}: every document must be a Kubernetes object with a kind", EXIT_USAGE)
        if document["kind"] == "List":
            items += document.get("items") or []
        else:
            items.append(document)
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


NATURAL_LIMIT = 10_000
"""Width at which a renderable is measured for its natural (uncut) width."""


def print_table(renderable: RenderableType, *, wide: bool = False, out: Console | None = None) -> None:
    """Print a table on `out` (default: `console()`). A default table fits the console; a wide one
    prints at its natural width when that is wider, never cut: the terminal wraps long lines, as
    with kubectl's `-o wide`."""
    out = out or console()
    width = out.width
    if wide:
        natural = out.measure(renderable, options=out.options.update_width(NATURAL_LIMIT)).maximum
        out.width = max(width, natural)
    try:
        out.print(renderable)
    finally:
        out.width = width


COLUMN_FLOORS = (16, 8)
"""How far columns give way: all of them (in order) to 16 characters first, then to 8 (never
narrower than their header)."""
SHRINK_ORDER = ("message", "endpoint", "gpus", "cluster", "colony", "queue", "namespace", "name")
"""Which columns give way when a table is too wide for the terminal, first first: NAME last, as
kubectl never cuts names."""


def fitted_widths(
    natural: Sequence[int], headers: Sequence[str], shrink: Sequence[str], width: int
) -> list[int]:
    """Column widths within `width` (two spaces between columns): the columns named in `shrink`
    (headers, any case) give way in that order, down to each of `COLUMN_FLOORS` in turn (never
    below their header); the others keep their `natural` width, so the result may still be too
    wide."""
    widths = list(natural)
    excess = sum(widths) + 2 * (len(widths) - 1) - width
    for least in COLUMN_FLOORS:
        for name in shrink:
            for index, header in enumerate(headers):
                if excess > 0 and header.lower() == name.lower():
                    floor = min(widths[index], max(least, cell_len(header)))
                    cut = min(excess, widths[index] - floor)
                    widths[index] -= cut
                    excess -= cut
    return widths


class KubeTable(Table):
    """A borderless kubectl-like table whose columns give way in `shrink` order when the console is
    too narrow (`fitted_widths`), cut with an ellipsis. `widths` are those of its last rendering;
    `align` makes another table's rows line up under them (a watch prints rows one by one)."""

    def __init__(self, shrink: Sequence[str]) -> None:
        super().__init__(box=None, pad_edge=False, show_edge=False, header_style="bold")
        self.shrink = shrink
        self.natural: list[int] = []
        self.widths: list[int] = []

    def add_cells(self, cells: Sequence[str]) -> None:
        """Add a row of plain-text cells (one line each)."""
        self.natural = [max(n, cell_len(c)) for n, c in zip(self.natural, cells, strict=True)]
        self.add_row(*(cell(c) for c in cells))

    def align(self, widths: Sequence[int], *, cut: bool) -> None:
        """Columns at least `widths` wide (and, when `cut`, at most: longer cells get an ellipsis)."""
        for index, (column, width) in enumerate(zip(self.columns, widths, strict=False)):
            column.min_width = width
            self.natural[index] = width if cut else max(self.natural[index], width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        headers = [str(column.header) for column in self.columns]
        self.widths = fitted_widths(self.natural, headers, self.shrink, options.max_width)
        for column, width in zip(self.columns, self.widths, strict=True):
            column.max_width = width
        yield from super().__rich_console__(console, options)


def table(
    columns: Sequence[str],
    rows: Iterable[Sequence[str]],
    objects: Sequence[Mapping[str, Any]] | None = None,
    *,
    wide_only: Sequence[str] = (),
    shrink: Sequence[str] = SHRINK_ORDER,
) -> KubeTable:
    """A kubectl-like table: upper-case headers, no borders. Columns in `wide_only` show with
    `-o wide` only; with -A, a NAMESPACE column (from `objects`, one per row) comes first. When the
    terminal is too narrow, the `shrink` columns give way in that order (cut with an ellipsis, one
    line each): NAME last."""
    keep = [i for i, c in enumerate(columns) if VIEW.wide or c not in wide_only]
    result = KubeTable(shrink)
    namespaces = VIEW.all_namespaces and objects is not None
    headers = (["NAMESPACE"] if namespaces else []) + [columns[i].upper() for i in keep]
    for header in headers:
        result.add_column(header, no_wrap=True, overflow="ellipsis")
    result.natural = [cell_len(header) for header in headers]
    for index, row in enumerate(rows):
        cells = [row[i] for i in keep]
        if namespaces and objects is not None:
            cells.insert(0, str(objects[index]["metadata"].get("namespace", "")))
        result.add_cells(cells)
    return result


def cell(value: str) -> Text:
    """A table cell that never wraps: cut with an ellipsis when its column is narrowed."""
    return Text(value, no_wrap=True, overflow="ellipsis")


def clean(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object without managedFields (noise for humans)."""
    copy = dict(obj)
    if isinstance(copy.get("metadata"), Mapping):
        copy["metadata"] = {k: v for k, v in copy["metadata"].items() if k != "managedFields"}
    return copy


def dump(data: Any, output: OutputChoice) -> str:
    """`data` as YAML, JSON or a jsonpath template's text."""
    if isinstance(output, JsonPathTemplate):
        return output.render(data)
    if output == OutputFormat.json:  # also another command's `json` (formats are str enums)
        return json.dumps(data, indent=2, sort_keys=False)
    return yaml.safe_dump(data, sort_keys=False).rstrip("\n")


def object_name(obj: Mapping[str, Any]) -> str:
    """kubectl's `-o name`: `<kind>.<group>/<name>` (`<kind>/<name>` for core kinds)."""
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    kind = str(obj.get("kind", "")).lower()
    return f"{kind}.{group}/{obj['metadata']['name']}" if group else f"{kind}/{obj['metadata']['name']}"


def print_data(data: Any, output: OutputChoice) -> None:
    """Print `data` as YAML or JSON (with a newline), or a jsonpath template's text (as is, as
    kubectl: `{"\\n"}` ends a line)."""
    if isinstance(output, JsonPathTemplate):
        try:
            typer.echo(output.render(data), nl=False)
        except JsonPathError as error:
            raise CliError(f"bad jsonpath template: {error}", EXIT_USAGE) from None
    else:
        typer.echo(dump(data, output))
    sys.stdout.flush()


def print_objects(
    objects: Sequence[Mapping[str, Any]],
    output: OutputChoice,
    render_table: RenderTable,
    *,
    single: bool = False,
    header: bool = True,
) -> None:
    """Print objects as a table (wide: every column), names, or YAML/JSON/jsonpath (of a `List`
    unless `single`)."""
    if output in (OutputFormat.table, OutputFormat.wide):
        VIEW.wide = output is OutputFormat.wide
        rendered = render_table(objects)
        rendered.show_header = header
        if not header and VIEW.widths and isinstance(rendered, KubeTable):
            rendered.align(VIEW.widths, cut=not VIEW.wide)  # under the header printed before
        print_table(rendered, wide=VIEW.wide)
        if header and isinstance(rendered, KubeTable):
            VIEW.widths = rendered.widths
    elif output is OutputFormat.name:
        for obj in objects:
            typer.echo(object_name(obj))
    else:
        cleaned = [clean(o) for o in objects]
        data: Any = cleaned[0] if single else {"apiVersion": "v1", "kind": "List", "items": cleaned}
        print_data(data, output)
    sys.stdout.flush()


def print_event(obj: Mapping[str, Any], output: OutputChoice, render_table: RenderTable) -> None:
    """One watched change: a table row without header, a name, or the object (YAML documents are
    separated by `---`; a jsonpath template is applied to the object, as kubectl does)."""
    if output is OutputFormat.yaml:
        typer.echo("---")
    if output in (OutputFormat.yaml, OutputFormat.json) or isinstance(output, JsonPathTemplate):
        print_data(clean(obj), output)
        return
    print_objects([obj], output, render_table, header=not VIEW.widths)  # a header if none yet


def watch_forever(
    resource: ResourceDefinition,
    namespace: str | None,
    output: OutputChoice,
    render_table: RenderTable,
    *,
    field_selector: str | None = None,
    single: bool = False,
    empty: str = "",
) -> None:
    """List (and print) the objects, then print each change as the API server's watch reports it,
    until Ctrl-C (exit 130)."""
    from colony.cli.watching import list_objects, watch_events

    async def follow(kube: Kube) -> None:
        objects, version = await list_objects(kube, resource, namespace, field_selector)
        objects.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        if single and not objects:
            raise CliError(empty)
        if objects:
            print_objects(objects, output, render_table, single=single)
        elif empty:
            typer.echo(empty, err=True)
        async for event in watch_events(kube, resource, namespace, version, field_selector):
            print_event(event.object, output, render_table)

    try:
        run(follow)
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED) from None


def print_namespace_list(
    resource: ResourceDefinition,
    namespace: str | None,
    output: OutputChoice,
    render_table: RenderTable,
    plural_kind: str,
    *,
    all_namespaces: bool = False,
    watch: bool = False,
) -> None:
    """`colony <kind> list`: the resource's objects in the namespace (or all, -A), by name (a table
    says so when there are none, e.g. "no Colonies in namespace team-a"); -w then prints changes."""
    if all_namespaces and namespace:
        raise CliError("-A and -n exclude each other: drop one of them", EXIT_USAGE)
    VIEW.all_namespaces = all_namespaces
    ns = None if all_namespaces else resolve_namespace(namespace)
    where = "any namespace" if ns is None else f"namespace {ns}"
    empty = f"no {plural_kind} in {where}" if output in (OutputFormat.table, OutputFormat.wide) else ""
    if watch:
        watch_forever(resource, ns, output, render_table, empty=empty)
        return
    from colony.cli.watching import list_objects

    objects, _ = run(lambda kube: list_objects(kube, resource, ns))
    if not objects and empty:
        typer.echo(empty, err=True)
        return
    objects.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
    print_objects(objects, output, render_table)


def print_details(pairs: Iterable[tuple[str, str]]) -> None:
    """`Key: value` lines for `get` in table mode, skipping empty values."""
    lines = [(key, value) for key, value in pairs if value not in ("", "-")]
    width = max((len(key) for key, _ in lines), default=0) + 1
    for key, value in lines:
        typer.echo(f"{key + ':':<{width}} {value}")


# -- formatting helpers (pure) ------------------------------------------------------------------


parse_timestamp = parse_time_lenient
"""An RFC 3339 timestamp from the API (with Z or an offset), or None (colony.timefmt)."""


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
