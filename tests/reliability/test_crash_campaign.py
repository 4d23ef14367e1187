"""The crash campaign (bench/chaos.py) at CI size: 3,000 MOs over HTTP and SMPP, four SIGKILLs of a real
``mogateway serve`` while thousands of MOs wait queued, the gateway started again on the same journal
each time, and the core promise checked from outside:

1. no acknowledged MO is missing at the application;
2. no MO reaches the application under two message ids;
3. exactly one reply per answered MO (SMPP: submit_sm at the simulator; HTTP: reply_submitted).

The seed fixes the kill plan: the first kill comes while a burst of deliver_sm is stored and not yet
acknowledged (the simulator stalls, the gateway is killed with the answers still in its socket), the
second while replies are at the SMSC unconfirmed (``--smsc-latency-ms``), then an HTTP batch in flight
and a random instant. One campaign runs for the module; each check is its own test, so a known fault
marks only its own assertion.

Reproduce the same campaign with its full report:
``python bench/chaos.py --seed 7 --mos 3000 --kills 4 --aim deliver_sm,submit_sm,batch,any --rate 300
--concurrency 16``
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import chaos

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> chaos.CampaignResult:
    lines: list[str] = []
    # The campaign of the module docstring: about 30-60 s on the shared 2-core machine.
    options = chaos.Options(
        seed=7,
        mos=3000,
        kills=4,
        aim="deliver_sm,submit_sm,batch,any",
        rate=300.0,
        concurrency=16,
        max_seconds=240.0,
        workdir=tmp_path_factory.mktemp("chaos"),
        echo=lines.append,
    )
    result = asyncio.run(chaos.run_campaign(options))
    print("\n".join([*lines, "", chaos.summary(result)]))  # shown with any failure below
    return result


def test_the_campaign_is_as_large_as_it_claims(campaign: chaos.CampaignResult) -> None:
    figures = campaign.figures
    assert figures["http"].mos >= 1000 and figures["smpp"].mos >= 1000
    assert len(campaign.kills) >= 3 and campaign.restarts == len(campaign.kills)
    # A backlog beyond the recovery page (1,000) and the intake batch (500) at some kill.
    assert campaign.max_recovered > 1000
    # The kills hit what they aimed at: deliver_sm stored and unacknowledged, replies at the SMSC.
    aimed = {k.aim: k for k in campaign.kills}
    assert aimed["deliver_sm"].deliver_sm_unanswered > 0
    assert aimed["submit_sm"].submit_sm_unanswered > 0
    assert campaign.traffic["smpp_redelivered"] > 0


def test_the_gateway_drains_every_mo_after_the_last_restart(campaign: chaos.CampaignResult) -> None:
    assert campaign.drained
    assert campaign.figures["all"].unfinished == 0
    assert campaign.figures["all"].acknowledged == campaign.figures["all"].mos


def test_1_no_acknowledged_mo_is_missing_at_the_application(campaign: chaos.CampaignResult) -> None:
    assert campaign.figures["all"].missing == 0, campaign.examples.get("missing")


def test_2_http_mos_reach_the_application_under_one_id(campaign: chaos.CampaignResult) -> None:
    http = campaign.figures["http"]
    assert (http.two_ids, http.stored_twice) == (0, 0), campaign.examples.get("two_ids")


def test_2_smpp_mos_reach_the_application_under_one_id(campaign: chaos.CampaignResult) -> None:
    assert campaign.figures["smpp"].two_ids == 0, campaign.examples.get("two_ids")


def test_3_every_answered_mo_has_its_reply_and_only_to_its_sender(campaign: chaos.CampaignResult) -> None:
    figures = campaign.figures["all"]
    assert figures.answered == figures.mos  # the application answers every MO with a reply
    assert figures.replies_missing == 0, campaign.examples.get("replies_missing")
    assert figures.wrong_number == 0, campaign.examples.get("wrong_number")


def test_3_http_mos_have_one_reply_submitted_each(campaign: chaos.CampaignResult) -> None:
    assert campaign.figures["http"].replies_duplicated == 0, campaign.examples.get("replies_duplicated")


def test_3_smpp_no_message_is_replied_twice(campaign: chaos.CampaignResult) -> None:
    smpp = campaign.figures["smpp"]
    assert smpp.duplicated_same_id == 0, campaign.examples.get("duplicated_same_id")


def test_3_smpp_no_mo_is_replied_under_a_second_id(campaign: chaos.CampaignResult) -> None:
    smpp = campaign.figures["smpp"]
    assert smpp.duplicated_second_id == 0, campaign.examples.get("duplicated_second_id")
