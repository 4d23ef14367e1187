"""Reading the project's Markdown as the tests that run the docs as written need it: the text under a
heading, and the fenced blocks of one language in it.

A ``#`` line inside a fenced block is a shell comment, not a heading; a section ends at the next heading
of its own level or a higher one. A heading the doc no longer has fails the test that asked for it,
naming the doc: the test is to be adapted with the doc, never to pass on nothing."""

from __future__ import annotations

import re
from functools import cached_property
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_HEADING = re.compile(r"(#{1,6}) ")


class MarkdownDoc:
    """One Markdown file of the repository, e.g. ``MarkdownDoc("docs/dlt.md")``."""

    def __init__(self, relative: str) -> None:
        self.name = relative
        self.path = ROOT / relative

    @cached_property
    def text(self) -> str:
        return self.path.read_text()

    def section(self, heading: str, *, subsections: bool = True) -> str:
        """The text under the heading line that is ``heading`` (``"## Retention"``), or else the one
        heading line that starts with it (``"## 1. Install"`` for ``"## 1. Install (30 s)"``), up to the
        next heading of its level or a higher one (of any level: without its ``subsections``)."""
        lines = self.text.splitlines()
        marks = _outside_fences(lines)
        headings = [n for n, mark in enumerate(marks) if mark is not None]
        exact = [n for n in headings if lines[n] == heading]
        found = exact or [n for n in headings if lines[n].startswith(heading)]
        assert len(found) == 1, f"{self.name} has no single heading {heading!r}: adapt the test to the doc"
        start = found[0]
        level = len(marks[start] or "") if subsections else 6
        taken: list[str] = []
        for line, mark in zip(lines[start + 1 :], marks[start + 1 :], strict=True):
            if mark is not None and len(mark) <= level:
                break
            taken.append(line)
        return "\n".join(taken) + "\n"

    def blocks(self, heading: str, language: str = "sh", *, subsections: bool = True) -> list[str]:
        """The fenced blocks of ``language`` under ``heading``, in order."""
        return fenced_blocks(self.section(heading, subsections=subsections), language)


def fenced_blocks(text: str, language: str) -> list[str]:
    """The bodies of the fenced blocks of ``language`` in ``text`` (``""``: the fences that name none),
    in order, each ending with a newline."""
    found: list[str] = []
    body: list[str] | None = None
    lang = ""
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith("```"):
            if body is None:
                body, lang = [], line.lstrip()[3:].strip()
            else:
                if lang == language:
                    found.append("".join(body))
                body = None
        elif body is not None:
            body.append(line)
    return found


def _level(line: str) -> str:
    matched = _HEADING.match(line)
    return matched.group(1) if matched else ""


def _outside_fences(lines: list[str]) -> list[str | None]:
    """For each line: its heading's hashes when it is a heading outside any fenced block, else None."""
    marks: list[str | None] = []
    fenced = False
    for line in lines:
        if line.lstrip().startswith("```"):
            fenced = not fenced
            marks.append(None)
        else:
            marks.append(None if fenced else (_level(line) or None))
    return marks
