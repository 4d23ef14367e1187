"""The dry run: the calls a run would send, in order, listed from the same steps the run walks.

Rules this file keeps:
* nothing is sent and no state file is written;
* the calls come from each step's ``plan`` in :data:`~mogateway.waba.flow.FLOW` (optional steps only
  when asked for), so the dry run cannot drift from the run;
* ids not known yet appear as ``<PHONE_NUMBER_ID>``, the code as ``<CODE>``, the PIN as ``<PIN>``,
  the verify token as ``<VERIFY_TOKEN>``; the access token is redacted by the caller.
"""

from __future__ import annotations

from mogateway.waba.flow import FLOW, FlowStep, PlanInputs
from mogateway.waba.graph import GraphRequest
from mogateway.waba.options import MigrationOptions

UNKNOWN_PHONE_NUMBER_ID = "<PHONE_NUMBER_ID>"


def plan(
    options: MigrationOptions,
    phone_number_id: str | None,
    token: str,
    *,
    flow: tuple[FlowStep, ...] = FLOW,
) -> list[tuple[GraphRequest, str]]:
    """The calls a run makes, in order, each with when it is made; for ``--dry-run``."""
    inputs = PlanInputs(options, phone_number_id or UNKNOWN_PHONE_NUMBER_ID, token)
    return [call for step in flow if step.applies(options) for call in step.plan(inputs)]
