"""The shape of the code, checked: arrows point inward and nothing imports in a circle.

Every ``import`` in every module of ``src/mogateway`` is read from its syntax tree — at the top of a
file or inside a function alike, so a lazy import cannot hide an arrow. The layers, innermost first::

    core        the message, its timeline, the ports, contract, numbering, text, DLT (pure)
    smpp        the SMPP protocol, sans-IO
    config      the settings, validated: plain data every layer above may read
    service     the use cases, over the ports
    edges       adapters: journals, queues, binds, HTTP client, reply channels, cluster
    modes       how a node runs (one process, worker processes, a cluster): the parts that differ
    node        the one wiring module
    api, cli    what people and operators drive it with

beside them ``client`` (the SDK applications use: core only), ``testing`` (simulators shipped for
users' tests) and ``waba`` (the WhatsApp migration tool, on its own). A module may import its own layer
and the layers inside it, never one outside; no package (``edges``, ``edges.smpp``...) imports one
that imports it back, and no module is longer than :data:`MAX_LINES`. The package root holds only
``__version__``, which any module may read, and first imports ``compiled`` (whether the pure layers
run compiled: it imports nothing of mogateway).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = SRC / "mogateway"

#: package (first component under mogateway, or a top-level module) -> the packages it may import.
ALLOWED: dict[str, frozenset[str]] = {
    "core": frozenset({"core"}),
    "smpp": frozenset({"core", "smpp"}),
    "config": frozenset({"core", "smpp", "config"}),
    "service": frozenset({"core", "smpp", "service"}),
    "edges": frozenset({"core", "smpp", "config", "service", "edges"}),
    "modes": frozenset({"core", "smpp", "service", "edges", "config", "modes"}),
    "node": frozenset({"core", "smpp", "service", "edges", "config", "modes", "node"}),
    "gateway_view": frozenset({"core", "config", "service", "gateway_view"}),
    "api": frozenset(
        {"core", "smpp", "service", "edges", "config", "node", "gateway_view", "api", "version"}
    ),
    "cli": frozenset(
        {
            "core",
            "smpp",
            "service",
            "edges",
            "config",
            "modes",
            "node",
            "api",
            "cli",
            "client",
            "testing",
            "waba",
            "simulation",
            "logs",
            "version",
            "compiled",
        }
    ),
    "simulation": frozenset({"core", "service", "edges", "testing", "simulation", "version"}),
    "client": frozenset({"core", "client"}),
    # edges: the payload helpers derive ``sender`` as the gateway does, from the shipped series table,
    # which only an edge reads (edges.numbering_files).
    "testing": frozenset({"core", "smpp", "edges", "client", "testing", "version"}),
    "waba": frozenset({"waba"}),
    "logs": frozenset({"logs"}),
    "version": frozenset({"version", "compiled"}),
    # whether the pure layers run compiled: imported first by the package root, read by the CLI
    "compiled": frozenset({"compiled"}),
}


def _package_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "mogateway":
        raise ValueError(module)
    if len(parts) == 1 or parts[1] == "__init__":
        return "version"  # ``from mogateway import __version__``: the package root holds only that
    if parts[1] == "__main__":
        return "cli"  # ``python -m mogateway`` is the CLI
    return parts[1]


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(SRC).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), path


def _imports(module: str, path: Path) -> Iterator[str]:
    """Every mogateway module ``module`` imports, resolved to a module name."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("mogateway"):
                    yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if not target.startswith("mogateway"):
                continue
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                yield candidate if _exists(candidate) else target


def _exists(module: str) -> bool:
    rel = Path(*module.split("."))
    return (SRC / rel).with_suffix(".py").exists() or (SRC / rel / "__init__.py").exists()


GRAPH: dict[str, set[str]] = {
    name: {imp for imp in _imports(name, path) if imp != name} for name, path in _modules()
}


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_arrows_point_inward(module: str) -> None:
    own = _package_of(module)
    allowed = ALLOWED[own] | {"version"}
    outward = sorted(imp for imp in GRAPH[module] if _package_of(imp) not in allowed)
    assert not outward, f"{module} ({own}) imports {outward}, outside {sorted(allowed)}"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of ``graph`` with more than one member, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(module: str) -> None:
        index[module] = low[module] = counter[0]
        counter[0] += 1
        stack.append(module)
        on_stack.add(module)
        for target in graph.get(module, ()):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def test_no_module_imports_in_a_circle() -> None:
    """Every strongly connected component of the module graph is a single module (package ``__init__``
    files re-exporting their own modules excepted)."""
    graph = {
        module: {m for m in imports if m in GRAPH and not module.startswith(m + ".")}
        for module, imports in GRAPH.items()
    }
    cycles = _cycles(graph)
    assert not cycles, f"import cycles: {cycles}"


def _unit(module: str) -> str:
    """The package ``module`` belongs to (a package is its own); a module at the top of ``mogateway``
    (``node``, ``logs``...) is a unit of its own."""
    path = SRC / Path(*module.split("."))
    unit = module if (path / "__init__.py").exists() else module.rpartition(".")[0]
    return module if unit == "mogateway" else unit


def _reexports(module: str, target: str) -> bool:
    """A package's ``__init__`` naming what its own subpackages hold (its public face), not an arrow."""
    return (SRC / Path(*module.split(".")) / "__init__.py").exists() and target.startswith(module + ".")


PACKAGE_GRAPH: dict[str, set[str]] = {}
for _module, _targets in GRAPH.items():
    PACKAGE_GRAPH.setdefault(_unit(_module), set()).update(
        _unit(t) for t in _targets if _unit(t) != _unit(_module) and not _reexports(_module, t)
    )


LAYER_GRAPH: dict[str, set[str]] = {}
for _module, _targets in GRAPH.items():
    LAYER_GRAPH.setdefault(_package_of(_module), set()).update(
        _package_of(t) for t in _targets if _package_of(t) != _package_of(_module)
    )


def test_no_package_imports_in_a_circle() -> None:
    """Packages, not just modules: ``config`` importing ``edges`` while ``edges`` imports ``config`` is
    a circle even when no two modules import each other. Checked twice: between the top-level packages
    (``core``, ``edges``, ``config``, ``node``...), and between every package at any depth (``edges``,
    ``edges.smpp``, ``waba.flow``...), so a subpackage and its parent may not import each other either."""
    assert not _cycles(LAYER_GRAPH), f"import cycles between top-level packages: {_cycles(LAYER_GRAPH)}"
    cycles = _cycles(PACKAGE_GRAPH)
    assert not cycles, f"package import cycles: {cycles}"


def test_the_package_check_sees_a_circle() -> None:
    """The package check fails on a package-level circle made of modules that form none."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"a"}}
    assert _cycles(graph) == [["a", "b"]]
    assert _unit("mogateway.edges.smpp.bind") == "mogateway.edges.smpp"
    assert _unit("mogateway.edges.smpp") == "mogateway.edges.smpp"
    assert _unit("mogateway.node") == "mogateway.node"


#: The house rule: a module longer than this is two concepts (split it along a real seam).
MAX_LINES = 600


def test_no_module_is_over_the_line_limit() -> None:
    long = {
        str(path.relative_to(SRC)): lines
        for _, path in _modules()
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    note = ""
    if set(long) <= {"mogateway/edges/storage/postgres.py"} and long:
        note = " (postgres.py is being split on the journal helper's branch; the merge ends this)"
    assert not long, f"modules over {MAX_LINES} lines: {long}{note}"


def test_the_check_sees_lazy_imports() -> None:
    """A module importing outward inside a function is still caught (the rule has no blind spot)."""
    probe = "def f():\n    from mogateway.node import Gateway\n"
    tree = ast.parse(probe)
    found = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert found == ["mogateway.node"]
    assert "node" not in ALLOWED["service"]


def test_every_package_has_a_rule() -> None:
    assert {_package_of(m) for m in GRAPH} <= set(ALLOWED)
