"""What ``mogateway simulate`` says about DLT: which of the templates an answer would match, or why none.

The templates come from the CSV a DLT portal exports (read as ``mogateway clients dlt-import`` reads it)
and are matched by the gateway's own matcher (core.dlt), so a developer learns before going live what
the gateway will do: send the reply with the PE id and template id, block it (``--dlt-enforce``), or send
it without the ids.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mogateway.core.dlt import DEFAULT_VAR_MAX, Template, TemplateSet
from mogateway.core.dlt_csv import DltCsvError, decode_csv, read_dlt_csv

__all__ = ["DltJudge"]


@dataclass(frozen=True, slots=True)
class DltJudge:
    """The templates of one file and the client settings they are judged with."""

    templates: TemplateSet
    pe_id: str | None
    enforce: bool
    source: str
    refused_rows: int

    @classmethod
    def from_csv(
        cls,
        path: Path,
        *,
        pe_id: str | None,
        enforce: bool,
        var_max: int = DEFAULT_VAR_MAX,
        unescape_newlines: bool = True,
    ) -> DltJudge:
        """Read ``path``; ValueError with one line for people when it cannot be used."""
        try:
            text = decode_csv(path.read_bytes())
            found = read_dlt_csv(text, pe_id=pe_id, unescape_newlines=unescape_newlines)
        except OSError as exc:
            raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
        except DltCsvError as exc:
            raise ValueError(f"{path}: {exc}") from None
        # Compared as the gateway compares them: with the client's newline rule.
        pairs = [(t.template_id, t.text) for _, t in found.templates]
        templates = TemplateSet.compile(pairs, var_max=var_max, unescape_newlines=unescape_newlines)
        return cls(templates, pe_id, enforce, str(path), len(found.refused))

    def verdict(self, reply: str) -> tuple[str, Template | None]:
        """("matched", template) | ("blocked" | "unmatched" | "not_applied", None)."""
        found = self.templates.match(reply)
        if found is not None:
            return "matched", found.template
        if self.pe_id is None:
            return "not_applied", None
        return ("blocked" if self.enforce else "unmatched"), None

    def json(self, reply: str) -> dict[str, Any]:
        verdict, template = self.verdict(reply)
        doc: dict[str, Any] = {
            "verdict": verdict,
            "template_id": template.template_id if template else None,
            "template": template.text if template else None,
            "pe_id": self.pe_id,
            "templates": len(self.templates),
            "refused_rows": self.refused_rows,
        }
        if template is None:
            doc["closest"] = [
                {"template_id": m.template_id, "why": m.reason} for m in self.templates.explain(reply)
            ]
        return doc

    def lines(self, reply: str) -> list[str]:
        """The report for one reply, for people."""
        verdict, template = self.verdict(reply)
        count = len(self.templates)
        head = f"DLT ({count} template{'' if count == 1 else 's'} from {self.source}"
        refused = self.refused_rows
        head += f", {refused} row{'' if refused == 1 else 's'} refused)" if refused else ")"
        if template is not None:
            carries = (
                f"sent with PE id {self.pe_id} and template id {template.template_id}"
                if self.pe_id
                else "but without --pe-id the gateway applies no DLT"
            )
            return [f"{head}: matches template {template.template_id}: {template.text!r}", f"  {carries}"]
        outcome = {
            "blocked": "the gateway would block this reply (dlt_enforce): nothing is sent, reply_blocked",
            "unmatched": "the gateway would send it without the client's DLT ids (the bind's own TLVs)",
            "not_applied": "without --pe-id the gateway applies no DLT",
        }[verdict]
        out = [f"{head}: no template matches", f"  {outcome}"]
        out.extend(f"  {m.template_id}: {m.reason}" for m in self.templates.explain(reply))
        return out

    def summary(self, replies: Sequence[str]) -> dict[str, int]:
        """How many of ``replies`` matched each template ("none" for no match)."""
        counts: Counter[str] = Counter()
        for reply in replies:
            found = self.templates.match(reply)
            counts[found.template_id if found else "none"] += 1
        return dict(counts.most_common())
