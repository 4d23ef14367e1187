"""The DLT error table shipped with the package (``mogateway/data/dlt_errors.csv``), read from its file.

Rules stated before the code:

* The file is read once per process, on first use; what its rows mean is :class:`DltErrors` (smpp.dlt).
* :func:`describe_status` and :func:`parse_receipt` are the SMPP adapters' entry points: the pure
  functions of ``smpp`` with the shipped table passed in.
"""

from __future__ import annotations

import csv
import functools
import importlib.resources
import io
from typing import Final

from mogateway.smpp import receipt
from mogateway.smpp.dlt import DltErrors
from mogateway.smpp.pdu import DeliverSm

__all__ = ["ERRORS_FILE", "describe_status", "parse_receipt", "shipped_dlt_errors"]

#: The table's file in the package's ``data`` directory.
ERRORS_FILE: Final = "dlt_errors.csv"


@functools.cache
def shipped_dlt_errors() -> DltErrors:
    """The shipped table, read once."""
    resource = importlib.resources.files("mogateway") / "data" / ERRORS_FILE
    text = resource.read_text(encoding="utf-8")
    return DltErrors.from_rows(csv.DictReader(io.StringIO(text)), source=ERRORS_FILE)


def describe_status(status: int) -> str | None:
    """The DLT meaning of a submit_sm_resp ``command_status``, when the shipped table knows one."""
    return shipped_dlt_errors().describe_status(status)


def parse_receipt(pdu: DeliverSm) -> receipt.Receipt | None:
    """The receipt in ``pdu`` (:func:`mogateway.smpp.receipt.parse_receipt`), its ``err:`` described
    from the shipped table."""
    return receipt.parse_receipt(pdu, shipped_dlt_errors())
