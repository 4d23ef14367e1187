"""DLT on the SMPP link: the TLVs a reply's submit_sm carries, and what an operator's DLT errors mean.

Rules stated before the code:

* A reply that matched one of its client's templates carries, on every part, the client's PE id in the
  bind's ``dlt_pe_tlv`` (0x1400 by default) and the template id in ``dlt_template_tlv`` (0x1401), and,
  when the bind names both ``dlt_chain_tlv`` and ``dlt_tm_id``, the PE→telemarketer chain hash
  (core.dlt.chain_hash) in ``dlt_chain_tlv``. Values are the plain ASCII string, no trailing NUL.
* These replace the bind's ``reply_tlvs`` of the same tags in place; the bind's other reply TLVs stay,
  in their order, and the DLT ones it lacks follow. A reply that matched nothing carries the bind's
  ``reply_tlvs`` exactly as configured.
* DLT errors are described from a table of receipt ``err:`` codes and submit_sm_resp statuses
  (:class:`DltErrors`, built from rows already read; the shipped one is ``mogateway/data/dlt_errors.csv``,
  read by ``edges.dlt_errors``). A code not in the table is shown as it came.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

from mogateway.core.dlt import DltIds, chain_hash
from mogateway.core.immutable import immutable
from mogateway.smpp.tlv import Tlv

__all__ = ["DltError", "DltErrors", "reply_tlvs"]

Where = Literal["receipt", "submit_sm_resp"]


def reply_tlvs(
    base: tuple[Tlv, ...],
    ids: DltIds | None,
    *,
    pe_tag: int = 0x1400,
    template_tag: int = 0x1401,
    chain_tag: int | None = None,
    tm_id: str | None = None,
) -> tuple[Tlv, ...]:
    """The TLVs every part of a reply carries: ``base`` (the bind's reply_tlvs) with the DLT ids of a
    matched reply put in."""
    if ids is None:
        return base
    wanted: dict[int, bytes] = {
        pe_tag: ids.pe_id.encode("ascii"),
        template_tag: ids.template_id.encode("ascii"),
    }
    if chain_tag is not None and tm_id:
        wanted[chain_tag] = chain_hash(ids.pe_id, tm_id).encode("ascii")
    out = [Tlv(t.tag, wanted.pop(t.tag)) if t.tag in wanted else t for t in base]
    out.extend(Tlv(tag, value) for tag, value in wanted.items())
    return tuple(out)


# ------------------------------------------------------------------------------------------ errors


@immutable
class DltError:
    """One row of the table: what an operator's code means, and whether two sources agree on it."""

    where: Where
    code: int
    name: str
    meaning: str
    verified: bool

    def describe(self) -> str:
        unverified = "" if self.verified else ", unverified"
        return f"DLT {self.name}: {self.meaning}{unverified}"


class DltErrors:
    """What operators' DLT error codes mean: (where, code) → :class:`DltError`, where is ``receipt`` (a
    delivery receipt's ``err:``) or ``submit_sm_resp`` (a ``command_status``)."""

    def __init__(self, errors: Iterable[DltError] = ()) -> None:
        # A code given twice: the later row wins, as when the table was a dict built row by row.
        self._errors: dict[tuple[str, int], DltError] = {(e.where, e.code): e for e in errors}

    @classmethod
    def from_rows(cls, rows: Iterable[Mapping[str, str]], source: str = "") -> DltErrors:
        """The table from rows with the columns ``where,code,name,meaning,verified`` (a code in decimal
        or ``0x`` hex; verified ``yes`` or anything else). Raises ValueError for an unknown place."""
        errors: list[DltError] = []
        for row in rows:
            where = row["where"]
            if where not in ("receipt", "submit_sm_resp"):
                raise ValueError(f"{source}: unknown place {where!r}")
            errors.append(
                DltError(
                    "receipt" if where == "receipt" else "submit_sm_resp",
                    int(row["code"], 0),
                    row["name"],
                    row["meaning"],
                    row["verified"] == "yes",
                )
            )
        return cls(errors)

    def get(self, where: Where, code: int) -> DltError | None:
        """The row for ``code`` at ``where``, or None."""
        return self._errors.get((where, code))

    def describe_receipt_error(self, err: str) -> str | None:
        """The meaning of a receipt's ``err:`` value when it is a known DLT code, else None."""
        text = err.strip()
        if not text.isdigit() or not text.isascii():
            return None
        found = self._errors.get(("receipt", int(text)))
        return None if found is None else found.describe()

    def describe_status(self, status: int) -> str | None:
        """The DLT meaning of a submit_sm_resp ``command_status``, when the table knows one."""
        found = self._errors.get(("submit_sm_resp", status))
        return None if found is None else found.describe()

    def __len__(self) -> int:
        return len(self._errors)
