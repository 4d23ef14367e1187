"""The names a newcomer reads first exist: docs/architecture.md and README.md's Layout, checked.

tests/test_architecture.py checks the code's shape (imports, cycles, lengths); this checks that the two
pages describing that shape name only what is there, so a renamed module or class fails here instead of
misleading the next reader.

docs/architecture.md: every path in backticks (``core/ports.py``, ``api/console/``, ``tests/journal/``,
``edges/storage/sqlite*.py``) and every module or package in its layer diagram exists; a bare
``module.py`` is one at the top of ``src/mogateway`` or beside the path named before it in the same
paragraph. A dotted name (``waba.flow``, ``mogateway.core.timeline.advance``) imports. A class or
function is checked in its module: written right after it (the module's path, then ``'s`` or a space
or an opening bracket, then the name: "``config/smpp.py``'s ``BindConfig``"), it is defined there, not
merely imported; the names in brackets after "members of ``Mode``" are members of that class; any other
``CamelCase`` (or ``ALL_CAPS``, ``@decorator``) name is defined in a module named in its paragraph or
earlier in its section, so a class that moved fails even where the page names no module beside it.

README.md's Layout: each package line lists its modules by short name after its description's colon
(``core/      pure domain: message (...), timeline (...), ...``); an item that is one lowercase word is a
module or package of that package (``numbering/``), while prose items (``DLT gate``, ``PDUs``) are
read, not checked. Every package directly under ``src/mogateway`` has a line there.

Failures name the doc, its line and the missing name.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "mogateway"
#: First components of a path that are the repository's own folders, not mogateway's packages.
REPO_DIRS = frozenset({"src", "tests", "docs", "bench", "examples", "scripts"})

# -- resolving --------------------------------------------------------------------------------------


def path_exists(token: str, base: Path) -> bool:
    """Whether ``token`` (a file, a ``folder/`` or a glob) names something under ``base``; a folder of
    ``src/mogateway`` must be a package."""
    if any(c in token for c in "*?["):
        return any(base.glob(token))
    target = base / token.rstrip("/")
    if token.endswith("/"):
        inside_src = PKG in target.parents or target == PKG
        return target.is_dir() and (not inside_src or (target / "__init__.py").is_file() or target == PKG)
    return target.exists()


def base_of(token: str) -> Path:
    """Where a path in the docs is read from: the repository for its own folders, else src/mogateway."""
    return ROOT if token.split("/", 1)[0] in REPO_DIRS else PKG


def dotted(path: Path) -> str | None:
    """The module a file or package under src/mogateway imports as (None: not a module)."""
    if PKG not in path.parents and path != PKG:
        return None
    rel = path.relative_to(PKG.parent)
    if path.is_dir():
        return ".".join(rel.parts) if (path / "__init__.py").is_file() else None
    return ".".join(rel.with_suffix("").parts) if path.suffix == ".py" else None


def lookup(module: str, chain: list[str]) -> bool:
    """Whether ``module`` defines ``chain[0]`` (not merely imports it) and the rest are its members,
    annotation-only class attributes included."""
    try:
        obj: object = importlib.import_module(module)
    except ImportError:
        return False
    for depth, name in enumerate(chain):
        if not hasattr(obj, name):
            annotated = isinstance(obj, type) and any(
                name in vars(k).get("__annotations__", {}) for k in obj.__mro__
            )
            return annotated and depth == len(chain) - 1
        obj = getattr(obj, name)
        if depth == 0:
            owner = getattr(obj, "__module__", None)
            if isinstance(owner, str) and owner != module and not owner.startswith(module + "."):
                return False  # imported there, defined elsewhere
    return True


def import_dotted(name: str) -> bool:
    """Whether a dotted name imports: the longest module prefix, then attributes of it."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            module: ModuleType = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        obj: object = module
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def top_names() -> set[str]:
    return {p.stem for p in PKG.glob("*.py")} | {
        p.name for p in PKG.iterdir() if (p / "__init__.py").is_file()
    }


# -- docs/architecture.md ---------------------------------------------------------------------------

TICK = re.compile(r"`([^`\n]+)`")
PATH = re.compile(r"[\w.*-]+(?:/[\w.*-]*)*")
DOTTED = re.compile(r"@?[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
CLASSLIKE = re.compile(r"[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*|[A-Z][A-Z0-9_]{2,}|@[a-z_]\w*")
#: A name tied to the module right before it: `x.py`'s `Name`, `x.py` `Name`, `x.py` (`name`.
TIED = re.compile(r"`([^`\s]+\.py)`(?:'s)?\s+(?:\(\s*)?`(@?[A-Za-z_][\w.]*)`")
MEMBERS = re.compile(r"members of `(\w+)`\s*\(([^)]*)\)")


@dataclass
class Paragraph:
    section: str
    first_line: int
    text: str

    def line_at(self, offset: int) -> int:
        return self.first_line + self.text.count("\n", 0, offset)


@dataclass
class Report:
    doc: str
    problems: list[str] = field(default_factory=list)
    checked: int = 0

    def check(self, ok: bool, line: int, name: str, why: str) -> None:
        self.checked += 1
        if not ok:
            self.problems.append(f"{self.doc}:{line}: `{name}`: {why}")


def paragraphs(text: str) -> Iterator[Paragraph]:
    """The prose of a markdown page in paragraphs (a list item is one), with its section; code blocks
    are left out (the layer diagram is read by :func:`diagram_names`)."""
    section, lines, start, in_code = "", list[str](), 0, False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            in_code = not in_code
        starts = not line.strip() or line.startswith("#") or re.match(r"(\d+\.|-) ", line)
        if (starts or in_code or line.startswith("```")) and lines:
            yield Paragraph(section, start, "\n".join(lines))
            lines = []
        if line.startswith("#"):
            section = line.lstrip("#").strip()
        elif line.strip() and not in_code and not line.startswith("```"):
            if not lines:
                start = number
            lines.append(line)
    if lines:
        yield Paragraph(section, start, "\n".join(lines))


def diagram_names(text: str) -> Iterator[tuple[int, str, Path]]:
    """The modules and packages of the layer diagram (the first code block): ``name/`` and ``name.py``
    at the top of src/mogateway, and every word inside the ``edges/`` box as one of edges'."""
    block = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            if block:
                return
            block = True
            continue
        if not block:
            continue
        boxed = re.search(r"│([^│]*)│", line)
        if boxed:
            for word in boxed.group(1).split():
                yield number, word, PKG / "edges"
            line = line.replace(boxed.group(0), " ")
        outside = re.sub(r"\([^)]*\)?|^[^(]*\)", " ", line)  # a note in brackets may span lines
        for word in re.findall(r"(?<![\w/])([a-z_][a-z0-9_]*(?:/|\.py))(?![\w/])", outside):
            yield number, word, PKG


def check_architecture(text: str, doc: str) -> Report:
    report = Report(doc)
    for number, word, base in diagram_names(text):
        report.check(
            path_exists(word, base) or path_exists(word + ".py", base), number, word, "no such module"
        )
    named_in_section: dict[str, list[str]] = {}
    for para in paragraphs(text):
        earlier = named_in_section.setdefault(para.section, [])
        here: list[str] = []
        previous: Path | None = None
        for match in TICK.finditer(para.text):
            token, line = match.group(1), para.line_at(match.start())
            if token.startswith(("/", "-")) or " " in token or not PATH.fullmatch(token):
                continue
            if "/" in token or token.endswith((".py", ".md")):
                if "/" in token:
                    base = base_of(token)
                    ok = path_exists(token, base)
                else:  # a bare file: at the top, or beside the path named before it
                    candidates = [PKG / token] + ([previous.parent / token] if previous else [])
                    ok = any(c.exists() for c in candidates)
                    base = next((c.parent for c in candidates if c.exists()), PKG)
                report.check(ok, line, token, "no such module, package or file")
                if ok and not any(c in token for c in "*?["):
                    previous = base / token.rstrip("/")
                    module = dotted(previous)
                    if module:
                        here.append(module)
        modules = here + earlier
        tied: set[str] = set()
        for match in TIED.finditer(para.text):
            path, name = match.group(1), match.group(2)
            # a bare file is the one of that name this paragraph or section named (or the top's)
            stem = "." + path.removesuffix(".py").replace("/", ".")
            module = dotted(PKG / path) or next((m for m in modules if m.endswith(stem)), None)
            tied.add(name)
            ok = module is not None and lookup(module, name.lstrip("@").split("."))
            report.check(ok, para.line_at(match.start(2)), name, f"not defined in {path}")
        for match in MEMBERS.finditer(para.text):
            owner = match.group(1)
            home = next((m for m in modules if lookup(m, [owner])), None)
            for member in TICK.finditer(match.group(2)):
                name = member.group(1)
                if re.fullmatch(r"\w+", name):
                    ok = home is not None and lookup(home, [owner, name])
                    line = para.line_at(match.start(2) + member.start())
                    report.check(ok, line, f"{owner}.{name}", "no such member")
        for match in TICK.finditer(para.text):
            token, line = match.group(1), para.line_at(match.start())
            if token in tied or "/" in token or token.endswith((".py", ".md")):
                continue
            if DOTTED.fullmatch(token):
                head = token.lstrip("@").split(".")[0]
                if head[0].isupper():
                    ok = any(lookup(m, token.split(".")) for m in modules)
                elif head == "mogateway" or head in top_names():
                    ok = import_dotted(token if head == "mogateway" else "mogateway." + token)
                else:
                    ok = import_dotted(token)
                report.check(ok, line, token, "does not import")
            elif CLASSLIKE.fullmatch(token):
                ok = any(lookup(m, [token.lstrip("@")]) for m in modules)
                why = "defined in none of the modules named in its paragraph or before it in its section"
                report.check(ok, line, token, f"{why} ({', '.join(modules) or 'none'})")
        earlier.extend(here)
    return report


# -- README.md's Layout ----------------------------------------------------------------------------


@dataclass
class LayoutEntry:
    name: str  # "core/" or "node.py", as the line starts
    line: int
    text: str  # the description, continuation lines joined by newlines


def layout_block(readme: str) -> tuple[int, list[str]]:
    """The first line number and the lines of the code block in README.md's "## Layout" section."""
    lines = readme.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "## Layout")
    opening = next(i for i in range(start, len(lines)) if lines[i].startswith("```"))
    closing = next(i for i in range(opening + 1, len(lines)) if lines[i].startswith("```"))
    return opening + 2, lines[opening + 1 : closing]


def check_layout(readme: str, doc: str) -> tuple[Report, list[LayoutEntry]]:
    report = Report(doc)
    first, lines = layout_block(readme)
    entries: list[LayoutEntry] = []
    for number, line in enumerate(lines, first):
        entry = re.match(r"  (\S+)\s+(.*)", line)
        if entry and not line.startswith("   "):
            entries.append(LayoutEntry(entry.group(1), number, entry.group(2)))
        elif line.startswith("   ") and entries:
            entries[-1].text += "\n" + line.strip()
        else:  # src/mogateway/ itself, and the repository's other folders
            for word in line.split():
                report.check(path_exists(word, ROOT), number, word, "no such folder")
    for entry in entries:
        report.check(path_exists(entry.name, PKG), entry.line, entry.name, "no such module or package")
        if not entry.name.endswith("/"):
            continue
        for number, item in layout_items(entry):
            ok = path_exists(entry.name + item, PKG) or (
                not item.endswith("/") and path_exists(f"{entry.name}{item}.py", PKG)
            )
            report.check(ok, number, entry.name + item, "no such module or package")
    return report, entries


def layout_items(entry: LayoutEntry) -> Iterator[tuple[int, str]]:
    """The module names of a package line: after its description's colon (notes in brackets left
    out), the items between commas, semicolons, ``+`` and ``over`` that are one lowercase word."""
    text = entry.text
    while re.search(r"\([^()]*\)", text):  # blank the notes, keeping offsets and line breaks
        text = re.sub(r"\([^()]*\)", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    colon = text.rfind(":")
    offset = colon + 1
    for index, piece in enumerate(re.split(r"([,;+]|\bover\b)", text[offset:])):
        word = piece.strip()
        if index % 2 == 0 and re.fullmatch(r"[a-z_][a-z0-9_]*/?", word):
            yield entry.line + text.count("\n", 0, offset + piece.index(word)), word
        offset += len(piece)


# -- the tests -------------------------------------------------------------------------------------


def test_architecture_names_only_modules_and_classes_that_exist() -> None:
    report = check_architecture((ROOT / "docs/architecture.md").read_text(), "docs/architecture.md")
    assert report.checked >= 50, f"only {report.checked} names found: did the page's shape change?"
    assert not report.problems, "\n".join(report.problems)


def test_readme_layout_names_only_modules_that_exist() -> None:
    report, entries = check_layout((ROOT / "README.md").read_text(), "README.md")
    assert len(entries) >= 8 and report.checked >= 40, "README.md's Layout changed shape: adapt the reader"
    assert not report.problems, "\n".join(report.problems)


def test_every_package_has_a_line_in_readme_layout() -> None:
    _, entries = check_layout((ROOT / "README.md").read_text(), "README.md")
    lined = {e.name for e in entries}
    first, _ = layout_block((ROOT / "README.md").read_text())
    packages = sorted(p.name + "/" for p in PKG.iterdir() if (p / "__init__.py").is_file())
    missing = [
        f"README.md:{first}: `{p}`: package without a line in the Layout" for p in packages if p not in lined
    ]
    assert not missing, "\n".join(missing)


def test_a_wrong_name_is_reported_with_its_doc_line_and_name() -> None:
    page = (
        "# Page\n\n## One\n\n```\n  core/  nowhere/\n```\n\n"
        "The message is `core/message.py` (`Message`, `Missing`); `core/gone.py` and\n"
        "`config/smpp.py`'s `NoConfig`, `waba.nope`, the members of `Message` (`id`, `absent`).\n"
    )
    report = check_architecture(page, "page.md")
    assert report.problems == [
        "page.md:6: `nowhere/`: no such module",
        "page.md:9: `core/gone.py`: no such module, package or file",
        "page.md:10: `NoConfig`: not defined in config/smpp.py",
        "page.md:10: `Message.absent`: no such member",
        "page.md:9: `Missing`: defined in none of the modules named in its paragraph or before it in its "
        "section (mogateway.core.message, mogateway.config.smpp)",
        "page.md:10: `waba.nope`: does not import",
    ]
    readme = "# R\n\n## Layout\n\n```\nsrc/mogateway/\n  core/   pure: message, gone (old),\n"
    readme += "          ports\n```\n"
    layout, entries = check_layout(readme, "R.md")
    assert [e.name for e in entries] == ["core/"]
    assert layout.problems == ["R.md:7: `core/gone`: no such module or package"]
