"""The migration, as one ordered list of steps: what the real run and the dry run both walk.

Rules this package keeps:
* :data:`FLOW` is the only description of the migration's steps; ``Migration.run`` does them and
  ``plan`` (``--dry-run``) lists their calls, so a step is added in one place: a
  :class:`~mogateway.waba.flow.step.FlowStep` in its own module, put in :data:`FLOW`;
* the steps record every :class:`~mogateway.waba.state.Step` of the state file once, in its order;
* every step's outcome is saved before the next step starts, so a run stopped anywhere continues;
* on each run, Graph is asked what it already knows (number on the WABA, verified, connected)
  before a step is repeated, because a run may die after Graph acted but before the save;
* ``register`` is never repeated by the tool (10 per number per 72 h, then a 72 h block), except
  once after Meta's documented 5-minute wait for 133015;
* a step may send the flow back once per run (register's 133006 back to the code), never in a loop;
* every stop is a :class:`~mogateway.waba.errors.MigrationStopped` carrying the exit status, the
  meaning and what to do.

The steps, in order (module → step):

* ``preflight``: token, WABA, number already there, app subscribed, checklist;
* ``migration_request``: ``POST /<WABA>/phone_numbers`` with ``migrate_phone_number=true``;
* ``ownership``: request the registration code and verify it;
* ``register``: register the number with the two-step PIN;
* ``webhooks``: this app is subscribed; the optional callback URL override (the seed's step 6:
  ``--gateway-url`` points it at this gateway's ``/v1/whatsapp/webhook``), then that URL's handshake;
* ``final_status``: the number is CONNECTED.
"""

from __future__ import annotations

from mogateway.waba.flow.context import Context
from mogateway.waba.flow.final_status import FinalStatus
from mogateway.waba.flow.migration_request import RequestMigration
from mogateway.waba.flow.ownership import ConfirmOwnership
from mogateway.waba.flow.preflight import Preflight
from mogateway.waba.flow.register import Register
from mogateway.waba.flow.step import FlowStep, PlanInputs, PlannedCall, Rewind
from mogateway.waba.flow.webhooks import CheckSubscription, OverrideCallback, VerifyWebhook

FLOW: tuple[FlowStep, ...] = (
    Preflight(),
    RequestMigration(),
    ConfirmOwnership(),
    Register(),
    CheckSubscription(),
    OverrideCallback(),
    VerifyWebhook(),
    FinalStatus(),
)

__all__ = ["FLOW", "Context", "FlowStep", "PlanInputs", "PlannedCall", "Rewind"]
