"""Indian mobile numbering: normalise an msisdn, refuse what is not an Indian mobile, build ``sender``.

This package is the public API (``docs/numbering.md``, "Python API"); each name is defined in one module:

* :mod:`~mogateway.core.numbering.msisdn`: :func:`normalize_msisdn`, :class:`NumberRejected` and its
  reasons, :func:`split_msisdn`;
* :mod:`~mogateway.core.numbering.names`: the 22 circles and the operator names, current and legacy;
* :mod:`~mogateway.core.numbering.sender`: the series table, ported numbers and the order of trust that
  fills ``sender.operator`` and ``sender.circle`` (:class:`SenderResolver`).

The core takes tables as rows already read; reading them from files (the shipped series table, an
operator's ``series_csv`` and ``ported_csv``) is :mod:`mogateway.edges.numbering_files`.
"""

from mogateway.core.numbering.msisdn import (
    TON_ALPHANUMERIC,
    TON_INTERNATIONAL,
    TON_NATIONAL,
    TON_UNKNOWN,
    NumberRejected,
    normalize_msisdn,
    split_msisdn,
)
from mogateway.core.numbering.names import (
    CIRCLES,
    CURRENT_OPERATORS,
    DEFUNCT_OPERATORS,
    MAX_ID_CHARS,
    Circle,
    circle_by_id,
    normalize_circle,
    normalize_operator,
)
from mogateway.core.numbering.sender import (
    NumberedRow,
    NumberingDataError,
    OperatorCircle,
    PortedResolver,
    PortedTable,
    SenderResolver,
    SeriesTable,
)

__all__ = [
    "CIRCLES",
    "CURRENT_OPERATORS",
    "DEFUNCT_OPERATORS",
    "MAX_ID_CHARS",
    "TON_ALPHANUMERIC",
    "TON_INTERNATIONAL",
    "TON_NATIONAL",
    "TON_UNKNOWN",
    "Circle",
    "NumberRejected",
    "NumberedRow",
    "NumberingDataError",
    "OperatorCircle",
    "PortedResolver",
    "PortedTable",
    "SenderResolver",
    "SeriesTable",
    "circle_by_id",
    "normalize_circle",
    "normalize_msisdn",
    "normalize_operator",
    "split_msisdn",
]
