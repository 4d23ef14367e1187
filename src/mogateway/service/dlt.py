"""A client's DLT settings, kept in its document, and the decision taken for each of its replies.

Rules stated before the code:

* A client's DLT settings live in its document, ``ClientRecord.extra["dlt"]`` = ``{"pe_id", "enforce",
  "templates": [{"template_id", "text", "added_at"}]}``: they reach every node with the client registry
  (one journal row per client, already loaded into memory and refreshed), with no table of their own.
* DLT applies to a client that has a PE id; ``enforce`` needs one. Its templates are compiled once per
  version of the client (its ``updated_at``), with the client's newline rule and the gateway's
  ``dlt_var_max_chars``, and matched against the reply text that is actually sent.
* A reply that matches: it carries the PE id and the template id, and its reply event names the template.
* A reply that matches none: with ``enforce`` it is not sent — the message ends ``reply_blocked``, the
  event saying "no DLT template matches" and why the closest templates did not; without ``enforce`` it is
  sent without the client's ids (an SMPP bind adds its own ``reply_tlvs``) and the event says so.
* The per-reply cost is one match: a client's settings and compiled templates are kept until the client
  changes.
* Every decision is counted per client in ``mogateway_dlt_replies_total{client, result}``, result
  ``matched``, ``unmatched`` or ``blocked``.
"""

from __future__ import annotations

import logging
from dataclasses import field, replace
from typing import Any, Final

from mogateway.core.clients import ClientRecord
from mogateway.core.dlt import DEFAULT_VAR_MAX, DltIds, DltInvalid, Template, TemplateSet, parse_template
from mogateway.core.immutable import immutable
from mogateway.core.timeline import Change, Event, EventKind

__all__ = ["BLOCKED_REASON", "DltGate", "DltProfile", "StoredTemplate", "Verdict"]

log = logging.getLogger(__name__)

#: The reason a blocked reply's timeline gives.
BLOCKED_REASON: Final = "no DLT template matches"
_KEY: Final = "dlt"


@immutable
class StoredTemplate:
    """A template as the client's document keeps it: the text as registered (stripped)."""

    template_id: str
    text: str
    added_at: float = 0.0

    def to_doc(self) -> dict[str, Any]:
        return {"template_id": self.template_id, "text": self.text, "added_at": self.added_at}


@immutable
class DltProfile:
    """A client's DLT settings."""

    pe_id: str | None = None
    enforce: bool = False
    templates: tuple[StoredTemplate, ...] = ()

    @classmethod
    def of(cls, client: ClientRecord) -> DltProfile:
        doc = client.extra.get(_KEY)
        if not isinstance(doc, dict):
            return cls()
        templates = tuple(
            StoredTemplate(str(t["template_id"]), str(t["text"]), float(t.get("added_at", 0.0)))
            for t in doc.get("templates", ())
            if isinstance(t, dict) and "template_id" in t and "text" in t
        )
        pe_id = doc.get("pe_id")
        return cls(pe_id if isinstance(pe_id, str) else None, bool(doc.get("enforce", False)), templates)

    def to_doc(self) -> dict[str, Any]:
        return {
            "pe_id": self.pe_id,
            "enforce": self.enforce,
            "templates": [t.to_doc() for t in self.templates],
        }

    def put_on(self, client: ClientRecord) -> ClientRecord:
        """``client`` with these settings in its document."""
        extra = dict(client.extra)
        if self == DltProfile():
            extra.pop(_KEY, None)
        else:
            extra[_KEY] = self.to_doc()
        return replace(client, extra=extra)

    def template(self, template_id: str) -> StoredTemplate | None:
        return next((t for t in self.templates if t.template_id == template_id), None)

    def with_template(self, template: StoredTemplate) -> DltProfile:
        """These settings with ``template`` added, or replacing the one of the same id in place."""
        kept = [t for t in self.templates if t.template_id != template.template_id]
        if len(kept) == len(self.templates):
            return replace(self, templates=(*self.templates, template))
        return replace(
            self,
            templates=tuple(template if t.template_id == template.template_id else t for t in self.templates),
        )

    def without_template(self, template_id: str) -> DltProfile:
        return replace(self, templates=tuple(t for t in self.templates if t.template_id != template_id))


def compile_templates(
    templates: tuple[StoredTemplate, ...], *, unescape_newlines: bool, var_max: int
) -> TemplateSet:
    """The matcher for stored templates. One that no longer parses (stored before a rule changed) is left
    out and logged, rather than making every reply of the client fail."""
    parsed: list[Template] = []
    for stored in templates:
        try:
            parsed.append(
                parse_template(stored.template_id, stored.text, unescape_newlines=unescape_newlines)
            )
        except DltInvalid as exc:
            log.warning("DLT template %s is not usable and is ignored: %s", stored.template_id, exc)
    parsed.sort(key=Template.specificity)
    return TemplateSet(tuple(parsed), var_max)


@immutable
class Verdict:
    """What to do with one reply: send it with ``ids`` (None: without the client's DLT ids), or block it.

    ``data`` goes into the timeline event of the reply (submitted, failed or blocked).
    """

    ids: DltIds | None = None
    blocked: bool = False
    data: dict[str, Any] = field(default_factory=dict)

    def blocked_change(self, message_id: str, now: float) -> Change:
        """The journal change that ends a blocked reply's message (answered -> reply_blocked)."""
        return Change(message_id, Event(EventKind.REPLY_BLOCKED, now, dict(self.data)))


NO_DLT: Final = Verdict()


class DltGate:
    """Decides, for each reply, what DLT says; keeps each client's compiled templates."""

    def __init__(self, var_max: int = DEFAULT_VAR_MAX, counter: Any = None) -> None:
        self.var_max = var_max
        self._counter = counter
        # client id -> (its updated_at, its newline rule, its settings, its compiled templates)
        self._compiled: dict[str, tuple[float, bool, DltProfile, TemplateSet]] = {}
        self._children: dict[tuple[str, str], Any] = {}

    def _entry(self, client: ClientRecord) -> tuple[DltProfile, TemplateSet]:
        """The client's settings and compiled templates, read again only when the client changed."""
        cached = self._compiled.get(client.id)
        if cached is not None and cached[0] == client.updated_at and cached[1] == client.unescape_newlines:
            return cached[2], cached[3]
        profile = DltProfile.of(client)
        compiled = compile_templates(
            profile.templates, unescape_newlines=client.unescape_newlines, var_max=self.var_max
        )
        self._compiled[client.id] = (client.updated_at, client.unescape_newlines, profile, compiled)
        return profile, compiled

    def templates_of(self, client: ClientRecord) -> TemplateSet:
        """The client's compiled templates."""
        return self._entry(client)[1]

    def verdict(self, client: ClientRecord | None, text: str) -> Verdict:
        """What DLT says about sending ``text`` as ``client``'s reply."""
        if client is None or _KEY not in client.extra:
            return NO_DLT
        profile, templates = self._entry(client)
        if profile.pe_id is None:
            return NO_DLT
        found = templates.match(text)
        if found is not None:
            self._count(client.id, "matched")
            return Verdict(
                DltIds(profile.pe_id, found.template_id),
                data={"dlt_template": found.template_id, "dlt_pe_id": profile.pe_id},
            )
        if profile.enforce:
            self._count(client.id, "blocked")
            closest = [{"template_id": m.template_id, "why": m.reason} for m in templates.explain(text)]
            return Verdict(
                blocked=True,
                data={
                    "reason": BLOCKED_REASON,
                    "client_id": client.id,
                    "templates": len(templates),
                    "closest": closest,
                },
            )
        # Not explained here: unmatched replies of a lenient client may be many, and dlt-check says why.
        self._count(client.id, "unmatched")
        return Verdict(data={"dlt": f"{BLOCKED_REASON}; sent without the client's DLT ids"})

    def _count(self, client_id: str, result: str) -> None:
        if self._counter is None:
            return
        child = self._children.get((client_id, result))
        if child is None:
            child = self._children[(client_id, result)] = self._counter.labels(client_id, result)
        child.inc()
