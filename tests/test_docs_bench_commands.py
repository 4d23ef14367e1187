"""Every bench command the docs quote still runs as quoted.

docs/benchmarks.md, docs/reliability.md and the other docs give their figures with the command that made
them (``python bench/throughput.py --count 20000 --runs 3 --workers 1,2``). A figure is only worth
something if a reader can run that command again: the script must exist, and every option quoted must
still be one of the script's. This test reads every docs/*.md and README.md, finds each command that
runs a script of bench/ (``python bench/X.py``, ``bash bench/X.sh``, ``./bench/X``, ``bench/X.py
--opt``, behind ``VAR=value`` or ``py-spy ... --`` prefixes, in code blocks or inline code spanning
lines), and checks it against the script itself: its own argparse parser parses the quoted argv (the
parser is taken from the script as it builds it, without running the bench). Then the two most-quoted
scripts run once for real, with the smallest counts their parsers allow, to show they still work end to
end on this machine (Kannel comparisons only parse: Kannel may be absent).

Placeholders a reader fills in (``<src>``, ``$rate``, ``…``, ``[optional]``, ``a|b`` alternatives) are
replaced or expanded before parsing; nothing else of a quoted command is changed."""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]

#: Scripts a doc still quotes for the record after they were removed: what replaced them. The doc must
#: say so beside each command that runs one (the word "replaced" in the same paragraph).
RETIRED = {"bench/compiled_tree.py": "scripts/compile.py (docs/benchmarks.md §0.15)"}

#: The cheapest real invocation of the most-quoted scripts: the smallest counts their parsers allow, one
#: worker, so each takes seconds. Kannel is left out (it may not be installed here).
CHEAP = {
    "bench/smpp_throughput.py": ["--count", "1", "--runs", "1", "--workers", "1"],
    "bench/throughput.py": ["--count", "1", "--runs", "1", "--workers", "1"],
}

_PATH = re.compile(r"(?<![\w/.-])(\./)?(bench/[\w.-]+(?:/[\w.-]*)*)")
_INTERPRETER = re.compile(r"(?:^|/)(?:python[\d.]*|bash|sh)$")
# Where a shell command ends: a comment, a list or pipe operator, the end of a substitution or span.
_END = re.compile(r"\s#|&&|\|\||;|\s&(?:\s|$)|&$|\s\|\s|\)")
_ASSIGN = re.compile(r"^[A-Za-z_]\w*=")
_START = re.compile(r"&&|\|\||;|\s&\s|\s\|\s|\$\(|\(")


@dataclass(frozen=True)
class Quote:
    """A bench script named in a doc: ``args`` is the text after it when it is run (None: named only)."""

    doc: str
    line: int
    script: str
    args: str | None
    text: str

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def segments(markdown: str) -> list[tuple[int, str]]:
    """The shell-like pieces of a markdown text with their first line: each command line of a fenced or
    indented code block (``\\`` continuations joined, a ``$ `` prompt dropped) and each inline code span
    of the prose (one may run over several lines of a paragraph)."""
    found: list[tuple[int, str]] = []
    paragraph: list[tuple[int, str]] = []

    def flush() -> None:
        if paragraph:
            first = paragraph[0][0]
            text = "\n".join(line for _, line in paragraph)
            for m in re.finditer(r"`([^`]+)`", text):
                found.append((first + text.count("\n", 0, m.start()), m.group(1).replace("\n", " ")))
            paragraph.clear()

    fenced = False
    previous_blank = True
    pending: tuple[int, str] | None = None
    for number, line in enumerate(markdown.splitlines(), 1):
        if line.lstrip().startswith("```"):
            flush()
            fenced = not fenced
            previous_blank = True
            continue
        indented_code = not paragraph and previous_blank and line.startswith("    ") and "`" not in line
        if fenced or indented_code:
            text = line.strip().removeprefix("$ ")
            start, text = (pending[0], f"{pending[1]} {text}") if pending else (number, text)
            pending = (start, text[:-1]) if text.endswith("\\") else None
            if pending is None:
                found.append((start, text))
            previous_blank = indented_code or previous_blank
            continue
        previous_blank = not line.strip()
        if previous_blank:
            flush()
        else:
            paragraph.append((number, line))
    flush()
    return found


def quotes(markdown: str, doc: str) -> list[Quote]:
    """Every bench/ path of a markdown text, as a command with its arguments or as a name only.

    A path is run when the word before it is an interpreter (``python``, ``.venv/bin/python``, ``bash``;
    whatever stands before that, ``VAR=value`` or ``py-spy record ... --``, is a prefix), when it is
    written ``./bench/...``, or when it starts its piece and arguments follow it."""
    found = []
    for line, text in segments(markdown):
        for m in _PATH.finditer(text):
            before = [w for w in _START.split(text[: m.start()])[-1].split() if not _ASSIGN.match(w)]
            after = _END.split(text[m.end() :])[0]
            if before:
                run = bool(_INTERPRETER.search(before[-1]))
            else:
                run = bool(m.group(1)) or bool(after.strip() and after[:1].isspace())
            found.append(Quote(doc, line, m.group(2), after.strip() if run else None, text))
    return found


@cache
def all_quotes() -> tuple[Quote, ...]:
    """Every bench/ path in an inline span or a code block of the docs (each read once per session)."""
    return tuple(q for doc in DOCS for q in quotes(doc.read_text(), str(doc.relative_to(ROOT))))


def argv_variants(args: str) -> list[list[str]]:
    """The argument lists a quoted command stands for: placeholders (``<src>``, ``$rate``) made a word,
    ``[optional]`` brackets and ``…`` dropped, a table's ``\\|`` unescaped, and each ``a|b`` alternative
    expanded (``--ids time|source`` is two commands)."""
    text = args.replace("\\|", "|").replace("…", " ")
    text = re.sub(r"<[^<>]*>", "PLACEHOLDER", text)
    text = re.sub(r"\$\{?\w+\}?", "1", text)
    text = text.replace("[", " ").replace("]", " ")
    words = [w.split("|") if "|" in w else [w] for w in shlex.split(text)]
    return [list(choice) for choice in itertools.product(*words)]


def option_names(argv: list[str]) -> list[str]:
    return [word.split("=", 1)[0] for word in argv if re.match(r"--?[A-Za-z]", word)]


# Runs in a subprocess, per script: the script's module runs as ``__main__`` until it asks its argparse
# parser to parse the command line, where it stops; that parser then parses each quoted argv.
_HARNESS = r"""
import argparse, contextlib, io, json, runpy, sys
script, quoted = sys.argv[1], json.loads(sys.stdin.read())
real, built = argparse.ArgumentParser.parse_args, []
class Built(Exception):
    pass
def capture(self, *args, **kwargs):
    built.append(self)
    raise Built
argparse.ArgumentParser.parse_args = capture
sys.argv = [script]
sys.path.insert(0, script.rsplit("/", 1)[0])
try:
    runpy.run_path(script, run_name="__main__")
except Built:
    pass
if not built:
    sys.exit(f"{script} never parsed its command line with argparse")
parser, errors = built[0], []
for argv in quoted:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            real(parser, argv)
        errors.append(None)
    except SystemExit as exc:
        errors.append(err.getvalue().strip().splitlines()[-1] if exc.code else None)
# Every option string the parser knows (argparse keeps them in this table since its first release).
print(json.dumps({"options": sorted(parser._option_string_actions), "errors": errors}))
"""


@cache
def parse_with_script(script: str, argvs: tuple[tuple[str, ...], ...]) -> tuple[set[str], list[str | None]]:
    """The option strings of ``script``'s parser, and for each argv its parse error (None: parsed)."""
    done = subprocess.run(
        [sys.executable, "-c", _HARNESS, str(ROOT / script)],
        input=json.dumps([list(a) for a in argvs]),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "MOGATEWAY_PURE": "1"},
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"{script}: its parser could not be built:\n{done.stderr}"
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    return set(answer["options"]), answer["errors"]


@cache
def run_quotes() -> dict[str, list[Quote]]:
    """The quoted commands, by the script they run."""
    by_script: dict[str, list[Quote]] = {}
    for q in all_quotes():
        if q.args is not None:
            by_script.setdefault(q.script, []).append(q)
    return by_script


# The extraction, on a doc made for it: what it must find, so the checks below cannot pass vacuously.


def test_the_extraction_finds_commands_however_the_docs_write_them() -> None:
    doc = "\n".join(
        [
            "Run it (`python bench/a.py --count 20000",  # 1: an inline span over two lines
            "--runs 3`) and read `bench/_common.py: process_tree`.",
            "",
            "| x | `PYTHONPATH=<src> python bench/b.py --ids time\\|source` |",  # 4: a table cell
            "",
            "```sh",
            "python bench/c.py --count 1 &     # then, while it runs:",  # 7
            "py-spy record -o x -- .venv/bin/python bench/d.py \\",  # 8: continued
            "  --rate $rate",
            "$ MOGATEWAY_PURE=1 ./bench/e.sh 18931 .",  # 10
            "```",
            "",
            "    python bench/f.py --runs 3 [--loop uvloop|asyncio]",  # 13: an indented block
            "",
            "See `bench/kannel/` and `bench/g.sh PORT [REPO]`; `bench/h.py`.",  # 15
        ]
    )
    got = [(q.line, q.script, q.args) for q in quotes(doc, "x.md")]
    assert got == [
        (1, "bench/a.py", "--count 20000 --runs 3"),
        (2, "bench/_common.py", None),
        (4, "bench/b.py", "--ids time\\|source"),
        (7, "bench/c.py", "--count 1"),
        (8, "bench/d.py", "--rate $rate"),
        (10, "bench/e.sh", "18931 ."),
        (13, "bench/f.py", "--runs 3 [--loop uvloop|asyncio]"),
        (15, "bench/kannel/", None),
        (15, "bench/g.sh", "PORT [REPO]"),
        (15, "bench/h.py", None),
    ]
    assert argv_variants("--ids time\\|source --src <a b>") == [
        ["--ids", "time", "--src", "PLACEHOLDER"],
        ["--ids", "source", "--src", "PLACEHOLDER"],
    ]
    assert argv_variants('--rate $rate --only="doctor --help" …') == [["--rate", "1", "--only=doctor --help"]]
    assert option_names(["--only=--help", "--runs", "3", "-d"]) == ["--only", "--runs", "-d"]


def test_the_docs_quote_the_benches_they_are_known_to() -> None:
    """A guard on the extraction over the real docs: commands known to be there are found."""
    found = {(q.doc, q.script, q.args) for q in all_quotes()}
    assert ("docs/scaling.md", "bench/cluster.py", "--count 20000") in found
    assert ("docs/benchmarks.md", "bench/throughput.py", "--count 20000 --runs 5 --with-console") in found
    assert any(d == "docs/reliability.md" and s == "bench/chaos.py" and a for d, s, a in found)
    assert ("README.md", "bench/chaos.py", None) in found


# The real docs.


def test_every_bench_script_the_docs_name_exists() -> None:
    """Commands and plain mentions alike, in code or in prose: each bench/ path a doc names is there."""
    missing = [
        f"{doc.relative_to(ROOT)}:{number}: {m.group(2)} does not exist"
        for doc in DOCS
        for number, line in enumerate(doc.read_text().splitlines(), 1)
        for m in _PATH.finditer(line)
        if not (ROOT / m.group(2)).exists() and m.group(2) not in RETIRED
    ]
    assert not missing, "\n".join(missing)


def test_a_retired_script_is_gone_and_quoted_only_as_replaced() -> None:
    for script in RETIRED:
        assert not (ROOT / script).exists(), f"{script} is back: take it out of RETIRED"
    for q in all_quotes():
        if q.script in RETIRED and q.args is not None:
            paragraphs = (ROOT / q.doc).read_text().split("\n\n")
            said = any(q.script in p and "replaced" in p and q.args.split()[0] in p for p in paragraphs)
            assert said, (
                f"{q.where}: runs {q.script}, which is gone: say what replaced it ({RETIRED[q.script]})"
            )


def test_the_check_fails_on_an_option_a_script_does_not_have() -> None:
    """The parser taken from a script refuses what the script refuses (so the test below can fail): an
    option it never had, a prefix of one, a value of the wrong type."""
    argvs = (("--with-kannel",), ("--coun", "5"), ("--workers", "one"), ("--count", "5", "--workers", "1,2"))
    options, errors = parse_with_script("bench/throughput.py", argvs)
    assert "--count" in options and "--with-kannel" not in options and "--coun" not in options
    assert "unrecognized arguments: --with-kannel" in (errors[0] or "")
    assert errors[1] is None  # argparse takes a prefix: hence the exact-name check below
    assert "--workers" in (errors[2] or "")
    assert errors[3] is None


@pytest.mark.parametrize("script", sorted(s for s in run_quotes() if s.endswith(".py") and s not in RETIRED))
def test_every_quoted_option_is_one_the_script_accepts(script: str) -> None:
    """Each quoted command's argv (each alternative of it) parsed by the script's own parser, and each
    option quoted by its exact name (argparse would also take a prefix of a longer one): an option the
    script no longer has fails, naming the doc, its line and the option."""
    quoted = run_quotes()[script]
    variants = [(q, argv) for q in quoted for argv in argv_variants(q.args or "")]
    options, errors = parse_with_script(script, tuple(tuple(argv) for _, argv in variants))
    problems = []
    for (q, argv), error in zip(variants, errors, strict=True):
        for name in option_names(argv):
            if name not in options:
                problems.append(f"{q.where}: `{name}` is not an option of {script}: {' '.join(argv)}")
        if error is not None:
            problems.append(f"{q.where}: {script} {' '.join(argv)}: {error}")
    assert not problems, "\n".join(dict.fromkeys(problems))


def test_every_quoted_chaos_aim_is_one_the_campaign_takes() -> None:
    """chaos.py checks ``--aim`` after parsing (``plan_kills``): each quoted aim is put to that check."""
    aims: dict[str, str] = {}
    for q in run_quotes()["bench/chaos.py"]:
        for argv in argv_variants(q.args or ""):
            for word, value in itertools.pairwise([*argv, ""]):
                if word == "--aim" or word.startswith("--aim="):
                    aims[word.removeprefix("--aim=") if "=" in word else value] = q.where
    assert "any" in aims and "deliver_sm,submit_sm,batch,any" in aims  # the extraction saw them
    check = (
        "import json, random, sys\n"
        "from _chaos_kills import plan_kills\n"
        "for aim in json.load(sys.stdin):\n"
        "    try:\n"
        "        plan_kills(random.Random(0), 1, aim)\n"
        "    except ValueError as exc:\n"
        "        print(json.dumps([aim, str(exc)]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", check],
        input=json.dumps(sorted(aims)),
        capture_output=True,
        text=True,
        cwd=ROOT / "bench",
        timeout=60,
        check=True,
    )
    refused = [json.loads(line) for line in done.stdout.splitlines()]
    assert not refused, "\n".join(f"{aims[aim]}: --aim {aim}: {why}" for aim, why in refused)


def test_the_chaos_options_reliability_lists_are_chaos_options() -> None:
    """docs/reliability.md names the rest of chaos.py's options in prose ("Other options: ..."), not in a
    command: each must be one of the script's too."""
    text = (ROOT / "docs" / "reliability.md").read_text()
    paragraph = text.split("Other options: ", 1)[1].split("\n\n", 1)[0]
    listed = re.findall(r"`(--[\w-]+)", paragraph)
    assert len(listed) >= 10, paragraph
    options, _ = parse_with_script("bench/chaos.py", ())
    missing = [name for name in listed if name not in options]
    assert not missing, f"docs/reliability.md names options bench/chaos.py does not have: {missing}"


@pytest.mark.parametrize("script", sorted(s for s in run_quotes() if s.endswith(".sh")))
def test_every_quoted_shell_script_runs_as_quoted(script: str) -> None:
    """A shell bench quoted as ``bench/X.sh`` is run directly, so it must be executable; and bash must
    read all of it (``bash -n``)."""
    path = ROOT / script
    direct = [q.where for q in run_quotes()[script] if not re.search(rf"(bash|sh)\s+(\./)?{script}", q.text)]
    if direct:
        assert os.access(path, os.X_OK), f"{script} is quoted as a command ({direct}) but is not executable"
    checked = subprocess.run(
        ["bash", "-n", str(path)], capture_output=True, text=True, timeout=30, check=False
    )
    assert checked.returncode == 0, checked.stderr


def test_the_two_most_quoted_scripts_are_the_ones_run_below() -> None:
    counts = Counter(q.script for q in all_quotes() if q.args is not None)
    top = {script for script, _ in counts.most_common(2)}
    assert top == set(CHEAP), f"the most-quoted benches are now {counts.most_common(3)}: give CHEAP theirs"


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(CHEAP))
def test_a_most_quoted_bench_runs_end_to_end(script: str, tmp_path: Path) -> None:
    """One real run, a single MO through a real ``mogateway serve``: exit 0 and the MO/s line its docs
    quote figures from. The bench starts and stops its own processes; a timeout kills it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MOGATEWAY_")}
    env.update(MOGATEWAY_PURE="1", TMPDIR=str(tmp_path))
    # Its own process group: should it hang, the bench and every process it started go with it.
    bench = subprocess.Popen(
        [sys.executable, str(ROOT / script), *CHEAP[script]],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    try:
        out, err = bench.communicate(timeout=120)
    finally:
        if bench.poll() is None:
            os.killpg(bench.pid, signal.SIGKILL)
            bench.communicate()
    assert bench.returncode == 0, out + err
    runs = [line for line in out.splitlines() if line.startswith("run 1")]
    assert runs and re.search(r"\d MO/s", runs[0]), out
    assert re.search(r"^\s*(median of 1\b.*|\S+\s+\d+ MO/s)", out, re.M), out
