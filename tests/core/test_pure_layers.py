"""The pure layers stay pure: an import check of every module in ``core/`` and ``smpp/``
(docs/architecture.md, "Arrows point inward": they use no sockets, files, threads or clocks not given).

Rules, checked on each module's syntax tree (so a lazy import inside a function, or one under
``TYPE_CHECKING``, counts like any other: it is still a dependency):

* No I/O: no import of asyncio, socket, ssl, threading, sqlite3, os, pathlib, importlib.resources or io,
  and no call of ``open()``; no ``__import__()``/``import_module()`` either, which would hide an import
  from this check. What a pure module needs from the outside world is passed in as a value.
* Arrows point inward: ``core/`` imports no other mogateway package; ``smpp/`` imports only ``core/``
  and ``smpp/`` (tests/test_architecture.py checks the arrows of every layer; this test adds what
  "pure" means for these two).
* No exemptions: the SMPP binds, the reply channel and their settings are adapters, in ``edges/smpp/``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).parents[2] / "src" / "mogateway"

#: Modules no pure module may import (the module itself or anything inside it).
IO_MODULES = (
    "asyncio",
    "socket",
    "ssl",
    "threading",
    "sqlite3",
    "os",
    "pathlib",
    "importlib.resources",
    "io",
)
#: The mogateway packages each pure layer may import.
ALLOWED_PACKAGES = {"core": frozenset({"core"}), "smpp": frozenset({"core", "smpp"})}
#: Calls that open files or import modules by name.
BANNED_CALLS = frozenset({"open", "__import__", "import_module"})


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(tree: ast.AST, name: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of everything ``tree`` imports; ``from a import b`` gives ``a`` and ``a.b``
    (``b`` may be a module: ``from importlib import resources``)."""
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            yield node.lineno, source
            for alias in node.names:
                yield node.lineno, f"{source}.{alias.name}"


def violations(source: str, name: str, layer: str, is_package: bool = False) -> list[str]:
    """Every rule ``source`` (the text of module ``name`` in ``layer``) breaks, one line each."""
    tree = ast.parse(source)
    found: list[str] = []
    for line, imported in imports(tree, name, is_package):
        for banned in IO_MODULES:
            if imported == banned or imported.startswith(banned + "."):
                found.append(f"line {line}: imports {imported} (I/O)")
                break
        parts = imported.split(".")
        if parts[0] == "mogateway" and (len(parts) < 2 or parts[1] not in ALLOWED_PACKAGES[layer]):
            found.append(f"line {line}: imports {imported} ({layer}/ may import only its own layers)")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in BANNED_CALLS:
            found.append(f"line {node.lineno}: calls {func.id}()")
        # importlib.import_module(); but x.open() is a method of something passed in (Journal.open).
        elif isinstance(func, ast.Attribute) and func.attr == "import_module":
            found.append(f"line {node.lineno}: calls {func.attr}()")
    return sorted(set(found))


def pure_modules() -> Iterator[tuple[str, Path]]:
    for layer in ALLOWED_PACKAGES:
        for path in sorted((SRC / layer).rglob("*.py")):
            yield layer, path


def test_pure_layers_do_no_io_and_import_only_inward() -> None:
    report: list[str] = []
    checked = 0
    for layer, path in pure_modules():
        checked += 1
        name = module_name(path)
        text = path.read_text(encoding="utf-8")
        for problem in violations(text, name, layer, is_package=path.name == "__init__.py"):
            report.append(f"{path.relative_to(SRC.parent)}: {problem}")
    assert checked > 20, "the walk found too few modules: is SRC right?"
    assert not report, "the pure layers must stay pure:\n" + "\n".join(report)


# ------------------------------------------------------------------------------ the check itself


@pytest.mark.parametrize(
    ("source", "layer", "expected"),
    [
        ("import os", "core", "imports os (I/O)"),
        ("import os.path", "core", "imports os.path (I/O)"),
        ("from pathlib import Path", "smpp", "imports pathlib (I/O)"),
        ("import importlib.resources", "core", "imports importlib.resources (I/O)"),
        ("from importlib import resources", "core", "imports importlib.resources (I/O)"),
        ("def f():\n    import asyncio", "smpp", "imports asyncio (I/O)"),
        ("from io import StringIO", "core", "imports io (I/O)"),
        ("data = open('x').read()", "core", "calls open()"),
        ("m = __import__('socket')", "core", "calls __import__()"),
        ("import importlib\nm = importlib.import_module('socket')", "core", "calls import_module()"),
        ("from mogateway.service import intake", "core", "imports mogateway.service"),
        ("from mogateway.smpp.pdu import Tlv", "core", "imports mogateway.smpp"),
        ("from mogateway import config", "smpp", "imports mogateway.config"),
        ("from ...service import intake", "core", "imports mogateway.service"),
        ("from mogateway.edges.dlt_errors import parse_receipt", "smpp", "imports mogateway.edges"),
    ],
)
def test_the_check_finds_each_kind_of_impurity(source: str, layer: str, expected: str) -> None:
    found = violations(source, f"mogateway.{layer}.numbering.sender", layer)
    assert any(expected in problem for problem in found), found


@pytest.mark.parametrize(
    ("source", "layer"),
    [
        ("from mogateway.core.contract import Sender", "core"),
        ("from mogateway.core.contract import Sender\nfrom mogateway.smpp.tlv import Tlv", "smpp"),
        ("from . import names\nfrom .msisdn import normalize_msisdn", "core"),
        ("import re, struct, csv, functools\nfrom typing import Final", "core"),
        ("async def f(journal):\n    await journal.open()", "core"),  # a port's method, not open()
        ("import iota", "core"),  # a name that only starts like a banned one
    ],
)
def test_the_check_lets_pure_code_through(source: str, layer: str) -> None:
    assert violations(source, f"mogateway.{layer}.numbering.sender", layer) == []
