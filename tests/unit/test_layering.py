"""The layering rule of docs/development.md, enforced on the source tree.

Pure packages import no I/O library, and from `colony` only the layers below them (an allow-list
per package). The check reads every import statement with `ast`, so it sees imports inside
functions too.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "colony"

IO_LIBRARIES = {"kubernetes_asyncio", "kubernetes", "kopf", "httpx", "aiohttp", "boto3", "requests"}

# Pure layers, bottom to top: each may import itself and what is listed (and no I/O library).
LEAVES = {"colony.timefmt", "colony.gpu", "colony.versions", "colony.labels"}
ALLOWED: dict[str, set[str]] = {
    "timefmt.py": set(),
    "labels.py": set(),
    "api": {"colony.api", "colony.timefmt"},
    "scheduling": {"colony.api", "colony.scheduling"} | LEAVES,
    "render": {"colony.api", "colony.render", "colony.scheduling"} | LEAVES,
    "status": {"colony.api", "colony.render", "colony.scheduling", "colony.status"} | LEAVES,
    "placement": {"colony.api", "colony.placement", "colony.scheduling"} | LEAVES,
    "simulate": {"colony.scheduling", "colony.simulate"} | LEAVES,
}


def _modules(entry: str) -> list[Path]:
    path = SRC / entry
    return [path] if path.is_file() else sorted(path.rglob("*.py"))


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _violations(paths: list[Path], allowed: set[str]) -> list[str]:
    found = []
    for path in paths:
        for name in _imports(path):
            top = name.split(".")[0]
            inside = top == "colony" and not any(
                name == layer or name.startswith(layer + ".") for layer in allowed
            )
            if top in IO_LIBRARIES or inside or name == "colony":
                found.append(f"{path.name} imports {name}")
    return found


@pytest.mark.parametrize("entry", sorted(ALLOWED))
def test_pure_layer_imports_no_io_and_no_upper_layer(entry: str) -> None:
    """Every module of a pure package imports only pure code from the layers below it."""
    assert _modules(entry), f"{entry} has no modules: the rule would pass vacuously"
    assert _violations(_modules(entry), ALLOWED[entry]) == []


def test_rule_catches_a_violation(tmp_path: Path) -> None:
    """The checker flags an I/O import and an upper-layer import, and accepts an allowed one."""
    module = tmp_path / "bad.py"
    module.write_text(
        "import kopf\nfrom colony.controllers.gpr import x\nfrom colony.api import y\n"
        "def f():\n    from colony.status.cost import z\n"
    )
    assert _violations([module], ALLOWED["scheduling"]) == [
        "bad.py imports kopf",
        "bad.py imports colony.controllers.gpr",
        "bad.py imports colony.status.cost",
    ]


GPR_LOOP_ORDER = [
    "state",
    "world",
    "writes",
    "accept",
    "reservations",
    "release",
    "reconcile",
    "apply",
    "snapshot",
    "report",
    "loop",
]
"""The modules of `colony.controllers.gpr` in the order of a pass: each imports only those before it."""


def test_gpr_loop_modules_import_only_the_steps_before_them() -> None:
    """The scheduling loop's package reads top-down: no module reaches forward (no import cycle)."""
    package = SRC / "controllers" / "gpr"
    assert sorted(p.stem for p in package.glob("*.py") if p.stem != "__init__") == sorted(GPR_LOOP_ORDER)
    for index, name in enumerate(GPR_LOOP_ORDER):
        inside = {
            imported.removeprefix("colony.controllers.gpr.")
            for imported in _imports(package / f"{name}.py")
            if imported.startswith("colony.controllers.gpr.")
        }
        assert inside <= set(GPR_LOOP_ORDER[:index]), f"{name} imports {inside - set(GPR_LOOP_ORDER[:index])}"


def _runtime_imports(path: Path) -> list[str]:
    """The modules `path` imports when it runs (its imports outside `if TYPE_CHECKING:` blocks)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skipped = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        for inner in ast.walk(node)
    }
    names: list[str] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def test_the_scheduler_state_imports_no_controller_so_the_context_can_hold_it() -> None:
    """`controllers.context` imports `gpr.state` (OperatorContext.scheduler): neither that module
    nor the package's `__init__` (run first) may import a controller, or importing the context
    would import itself."""
    package = SRC / "controllers" / "gpr"
    for name in ("__init__", "state"):
        found = [m for m in _runtime_imports(package / f"{name}.py") if m.startswith("colony.controllers")]
        assert found == [], f"gpr/{name}.py imports {found}"


def test_the_context_imports_first_and_the_handlers_after_it() -> None:
    """Whichever is imported first (the context, or the package of handlers), both load."""
    for first in ("colony.controllers.context", "colony.controllers.gpr.world", "colony.controllers"):
        subprocess.run(
            [sys.executable, "-c", f"import {first}; import colony.controllers; import colony.operator"],
            check=True,
            cwd=SRC.parents[1],
        )


def _compiled_modules() -> list[Path]:
    """The modules setup.py hands to mypyc: queueing/*.py less the names in its exclusion set."""
    setup = ast.parse((SRC.parents[1] / "setup.py").read_text())
    excluded = next(
        {elt.value for elt in node.elts if isinstance(elt, ast.Constant)}
        for node in ast.walk(setup)
        if isinstance(node, ast.Set)
        and any(isinstance(e, ast.Constant) and e.value == "__init__.py" for e in node.elts)
    )
    return [p for p in sorted((SRC / "scheduling" / "queueing").glob("*.py")) if p.name not in excluded]


def test_compiled_modules_reach_only_the_standard_library() -> None:
    """The image compiles them in an isolated build that has only setuptools and mypy: whatever they
    import, directly or through other colony modules, must resolve there (no pydantic, no kopf)."""
    seen: set[Path] = set()
    outside: set[str] = set()
    todo = _compiled_modules()
    assert todo, "setup.py compiles nothing"
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in _imports(path):
            top = name.split(".")[0]
            if top == "colony":
                module = SRC.parent / Path(*name.split("."))
                todo += [p for p in (module.with_suffix(".py"), module / "__init__.py") if p.is_file()]
            elif top not in sys.stdlib_module_names and top != "__future__":
                outside.add(f"{path.relative_to(SRC)} imports {name}")
    assert not outside, sorted(outside)
