"""Imports point one way: down the layers that docs/architecture.md draws.

Every import counts, the ones inside functions and under ``TYPE_CHECKING`` too: an import made
late is still a dependency, only a hidden one. A module may import its own layer and the ones
below it; a service imports no other service.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Bottom to top. A name belongs to the longest prefix listed (arroyo.sql.planner is above
# arroyo.sql).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "foundation",
        (
            "arroyo.__init__",
            "arroyo.errors",
            "arroyo.config",
            "arroyo.logging",
            "arroyo.filelock",
            "arroyo.program",
            "arroyo_rpc",
            "arroyo_udf",
        ),
    ),
    ("language", ("arroyo.sql",)),
    (
        "io",
        (
            "arroyo.formats",
            "arroyo.udfs",
            "arroyo.udf_static",
            "arroyo.tls",
            "arroyo.rpc",
            "arroyo.store",
            "arroyo.service",
        ),
    ),
    ("connectors", ("arroyo.connectors",)),
    ("planner", ("arroyo.sql.planner",)),
    ("engine", ("arroyo.engine",)),
    (
        "roles",
        (
            "arroyo.compiler",
            "arroyo.worker",
            "arroyo.controller",
            "arroyo.api",
            "arroyo.node",
            "arroyo.testing",
        ),
    ),
    ("services", ("arroyo_services",)),
    ("cli", ("arroyo_cli",)),
)
# Where each installed package lives in the checkout (setup.py).
SOURCES = {
    "arroyo": ROOT / "libs" / "arroyo",
    "arroyo_udf": ROOT / "libs" / "arroyo_udf",
    "arroyo_services": ROOT / "services",
    "arroyo_cli": ROOT / "cli",
}


def layer_of(module: str) -> int | None:
    if module == "arroyo":
        module = "arroyo.__init__"  # the package's own docstring, not every arroyo.* module
    best: tuple[int, int] | None = None
    for rank, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            inside = module == prefix or module.startswith(prefix + ".")
            if inside and (best is None or len(prefix) > best[1]):
                best = (rank, len(prefix))
    return None if best is None else best[0]


def modules() -> dict[str, Path]:
    found = {}
    for package, directory in SOURCES.items():
        for path in directory.rglob("*.py"):
            if path.name.endswith(("_pb2.py", "_pb2_grpc.py")):
                continue
            parts = path.relative_to(directory).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


def resolve(name: str, known: dict[str, Path]) -> str:
    """The module an imported name lives in (``from package import name`` names a submodule or
    a name in the package's body); names outside our packages come back as they are."""
    target = name
    while target and target not in known:
        target = target.rpartition(".")[0]
    return target or name


def imports_of(module: str, path: Path) -> list[tuple[str, int]]:
    """Every module ``path`` imports (absolute names), with its line."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            # `from package import module` depends on the module, not on the package's body.
            found += [(f"{name}.{alias.name}", node.lineno) for alias in node.names]
    return found


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(m for m in modules() if layer_of(m) is None)
    assert unplaced == [], f"modules in no layer (add them to LAYERS and the docs): {unplaced}"


def test_imports_point_down() -> None:
    upward = set()
    known = modules()
    for module, path in sorted(known.items()):
        own = layer_of(module)
        assert own is not None
        for imported, line in imports_of(module, path):
            name = resolve(imported, known)
            target = layer_of(name)
            if target is not None and target > own:
                where = f"{path.relative_to(ROOT)}:{line}"
                upward.add(
                    f"{where}: {module} ({LAYERS[own][0]}) imports {name} ({LAYERS[target][0]})"
                )
    assert not upward, "imports against the layers:\n" + "\n".join(sorted(upward))


def test_no_service_imports_another() -> None:
    crossing = []
    for module, path in sorted(modules().items()):
        if not module.startswith("arroyo_services."):
            continue
        service = module.split(".")[1]
        for name, line in imports_of(module, path):
            parts = name.split(".")
            if parts[0] == "arroyo_services" and len(parts) > 1 and parts[1] != service:
                crossing.append(f"{path.relative_to(ROOT)}:{line}: {module} imports {name}")
    assert crossing == []


@pytest.mark.parametrize(
    ("module", "layer"),
    [
        ("arroyo.sql.planner.script", "planner"),
        ("arroyo.sql.time", "language"),
        ("arroyo.engine.build", "engine"),
        ("arroyo_cli.main", "cli"),
    ],
)
def test_layer_of_takes_the_longest_prefix(module: str, layer: str) -> None:
    rank = layer_of(module)
    assert rank is not None and LAYERS[rank][0] == layer


def test_no_import_cycles() -> None:
    """No two modules import each other, directly or round a loop (every import counts)."""
    known = modules()
    graph: dict[str, set[str]] = {}
    for module, path in known.items():
        targets = set()
        for name, _ in imports_of(module, path):
            target = resolve(name, known)
            if target in known and target != module:
                targets.add(target)
        graph[module] = targets
    cycles = [sorted(c) for c in _strongly_connected(graph) if len(c) > 1]
    assert cycles == [], f"import cycles: {cycles}"


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively (the import graph is deep enough to matter)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root, children in graph.items():
        if root in index:
            continue
        work = [(root, iter(sorted(children)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, pending = work[-1]
            child = next(pending, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(component)
    return found
