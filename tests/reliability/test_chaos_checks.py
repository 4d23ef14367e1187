"""The crash campaign's checks (bench/_chaos_checks.py) count what they claim, on observations made up for
the purpose: a check that could never fail would prove nothing about the gateway."""

from __future__ import annotations

import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from _chaos_checks import Observed, SentMo, Stored, evaluate, format_table, possibly_sent

REPLIED = ("received", "stored", "routed", "attempt", "outcome", "reply_submitted")


def stored(message_id: str, state: str = "replied", events: tuple[str, ...] = REPLIED) -> Stored:
    return Stored(message_id, state, events, answered="outcome" in events and state != "no_reply")


def observed(**overrides: object) -> Observed:
    """Two HTTP and two SMPP MOs, each acknowledged, called once and replied once."""
    mos = {
        "H1": SentMo("H1", "http", "919800000001", True, {"h1"}),
        "H2": SentMo("H2", "http", "919800000002", True, {"h2"}),
        "S1": SentMo("S1", "smpp", "919900000001", True),
        "S2": SentMo("S2", "smpp", "919900000002", True),
    }
    base = Observed(
        mos=mos,
        calls=[("H1", "h1"), ("H2", "h2"), ("S1", "s1"), ("S2", "s2")],
        stored={"H1": [stored("h1")], "H2": [stored("h2")], "S1": [stored("s1")], "S2": [stored("s2")]},
        submits=[("919900000001", "S1", "s1"), ("919900000002", "S2", "s2")],
        log_replies=collections.Counter({"h1": 1, "h2": 1}),
    )
    for key, value in overrides.items():
        setattr(base, key, value)
    return base


def test_a_clean_run_passes_every_check() -> None:
    figures = evaluate(observed())
    assert figures.passed
    assert (figures.mos, figures.acknowledged, figures.answered) == (4, 4, 4)
    assert "1. acknowledged, never at the callback" in format_table([figures])


def test_an_acknowledged_mo_that_never_reached_the_application_is_missing() -> None:
    figures = evaluate(observed(calls=[("H1", "h1"), ("S1", "s1"), ("S2", "s2")]))
    assert figures.missing == 1 and figures.examples["missing"] == ["H2"]
    assert not figures.check_missing and not figures.passed
    # An MO that was never acknowledged may be missing: the source still has it.
    o = observed(calls=[("H1", "h1"), ("S1", "s1"), ("S2", "s2")])
    o.mos["H2"].acknowledged = False
    assert evaluate(o).missing == 0


def test_a_redelivery_under_a_second_id_fails_check_2_and_its_reply_check_3() -> None:
    o = observed(
        calls=[("H1", "h1"), ("H2", "h2"), ("S1", "s1"), ("S1", "s1b"), ("S2", "s2")],
        submits=[("919900000001", "S1", "s1"), ("919900000001", "S1", "s1b"), ("919900000002", "S2", "s2")],
    )
    o.stored["S1"] = [stored("s1"), stored("s1b")]
    smpp = evaluate(o, ["smpp"])
    assert (smpp.two_ids, smpp.stored_twice) == (1, 1)
    assert (smpp.replies_duplicated, smpp.duplicated_second_id, smpp.duplicated_same_id) == (1, 1, 0)
    assert evaluate(o, ["http"]).passed


def test_an_acknowledgement_naming_another_id_than_the_callback_fails_check_2() -> None:
    o = observed()
    o.mos["H1"].ack_ids.add("other")
    assert evaluate(o).two_ids == 1


def test_the_same_message_replied_twice_and_a_reply_missing_fail_check_3() -> None:
    o = observed(submits=[("919900000001", "S1", "s1"), ("919900000001", "S1", "s1")])
    figures = evaluate(o, ["smpp"])
    assert (figures.replies_duplicated, figures.duplicated_same_id, figures.replies_missing) == (1, 1, 1)
    assert figures.examples["replies_missing"] == ["S2"]
    http = observed()
    http.stored["H1"] = [stored("h1", events=(*REPLIED, "reply_submitted"))]
    http.stored["H2"] = [stored("h2", state="reply_failed", events=(*REPLIED[:-1], "reply_failed"))]
    figures = evaluate(http, ["http"])
    assert (figures.replies_duplicated, figures.replies_missing) == (1, 1)


def test_a_reply_to_another_msisdn_fails_check_3() -> None:
    o = observed(submits=[("919900000002", "S1", "s1"), ("919900000002", "S2", "s2")])
    assert evaluate(o).wrong_number == 1


def test_a_reply_recorded_as_possibly_sent_is_reported_and_not_missing() -> None:
    o = observed(submits=[("919900000001", "S1", "s1")])
    o.stored["S2"] = [stored("s2", state="reply_unknown", events=(*REPLIED[:-1], "reply_unknown"))]
    figures = evaluate(o, ["smpp"])
    assert (figures.possibly_sent, figures.replies_missing) == (1, 0)
    assert possibly_sent(o.stored["S2"][0]) and not possibly_sent(stored("x"))


def test_unfinished_mos_and_lookups_that_failed_are_counted_unfinished() -> None:
    o = observed()
    o.stored["H1"] = [stored("h1", state="answered", events=REPLIED[:-1])]
    o.stored["S1"] = None
    figures = evaluate(o)
    assert figures.unfinished == 2 and not figures.passed


def test_redeliveries_no_reply_and_log_duplicates_are_reported_beside_the_checks() -> None:
    o = observed(calls=[("H1", "h1"), ("H1", "h1"), ("H2", "h2"), ("S1", "s1"), ("S2", "s2"), ("S2", "s2")])
    o.log_replies["h1"] = 2
    o.stored["H2"] = [Stored("h2", "timed_out", ("received", "stored", "outcome"), answered=False)]
    figures = evaluate(o)
    assert (figures.redeliveries, figures.log_duplicates, figures.no_reply) == (2, 1, 1)
    assert figures.no_reply_states == collections.Counter({"timed_out": 1})
    assert figures.passed  # none of these breaks a promise


# ------------------------------------------------------------------------------------------ WhatsApp


def with_whatsapp() -> Observed:
    """The four MOs above, and two WhatsApp MOs (webhooks answered 200 with their ids), each called once
    and replied once at the fake Graph API."""
    o = observed()
    o.mos["W1"] = SentMo("W1", "whatsapp", "919700000001", True, {"w1"})
    o.mos["W2"] = SentMo("W2", "whatsapp", "919700000002", True, {"w2"})
    o.calls += [("W1", "w1"), ("W2", "w2")]
    o.stored.update({"W1": [stored("w1")], "W2": [stored("w2")]})
    o.submits += [("919700000001", "W1", "w1"), ("919700000002", "W2", "w2")]
    return o


def test_whatsapp_mos_are_counted_in_their_own_column_and_in_all() -> None:
    o = with_whatsapp()
    whatsapp, everything = evaluate(o, ["whatsapp"]), evaluate(o)
    assert whatsapp.passed and everything.passed
    assert (whatsapp.mos, whatsapp.acknowledged, whatsapp.answered) == (2, 2, 2)
    assert everything.mos == 6
    assert evaluate(o, ["http", "smpp"]).mos == 4


def test_a_webhook_answered_200_whose_message_never_reached_the_application_is_missing() -> None:
    o = with_whatsapp()
    o.calls.remove(("W2", "w2"))
    figures = evaluate(o, ["whatsapp"])
    assert figures.missing == 1 and figures.examples["missing"] == ["W2"] and not figures.passed


def test_a_redelivered_webhook_stored_as_a_second_message_fails_check_2_and_its_second_reply_check_3() -> (
    None
):
    o = with_whatsapp()
    o.mos["W1"].ack_ids.add("w1b")  # the redelivery was answered with another id
    o.calls.append(("W1", "w1b"))
    o.stored["W1"] = [stored("w1"), stored("w1b")]
    o.submits.append(("919700000001", "W1", "w1b"))
    figures = evaluate(o, ["whatsapp"])
    assert (figures.two_ids, figures.stored_twice) == (1, 1)
    assert (figures.replies_duplicated, figures.duplicated_second_id) == (1, 1)


def test_whatsapp_replies_are_counted_at_the_graph_api_not_in_the_timeline() -> None:
    # Twice at Graph for one message (the timeline says one reply_submitted): duplicated; none: missing.
    o = with_whatsapp()
    o.submits = [s for s in o.submits if s[1] != "W2"] + [("919700000001", "W1", "w1")]
    figures = evaluate(o, ["whatsapp"])
    assert (figures.replies_duplicated, figures.duplicated_same_id, figures.replies_missing) == (1, 1, 1)
    assert figures.examples["replies_missing"] == ["W2"]


def test_a_whatsapp_reply_to_another_wa_id_fails_check_3() -> None:
    o = with_whatsapp()
    o.submits = [s for s in o.submits if s[1] != "W1"] + [("919700000002", "W1", "w1")]
    assert evaluate(o, ["whatsapp"]).wrong_number == 1


def test_a_whatsapp_reply_possibly_sent_and_never_at_graph_is_reported_not_missing() -> None:
    o = with_whatsapp()
    o.submits = [s for s in o.submits if s[1] != "W2"]
    o.stored["W2"] = [stored("w2", state="reply_unknown", events=(*REPLIED[:-1], "reply_unknown"))]
    figures = evaluate(o, ["whatsapp"])
    assert (figures.possibly_sent, figures.possibly_sent_unsent, figures.replies_missing) == (1, 1, 0)
    assert figures.passed


def test_the_campaign_splits_its_mos_and_gives_whatsapp_mos_their_own_tokens_and_wa_ids() -> None:
    import chaos
    from _chaos_traffic import make_mos, wamid_of

    options = chaos.Options(seed=1, mos=1000, whatsapp_share=0.2)
    assert options.split() == (400, 400, 200)
    assert chaos.Options(seed=1, mos=10, transport="http").split() == (10, 0, 0)
    mos = make_mos(2, 2, 3)
    whatsapp = [mo for mo in mos.values() if mo.transport == "whatsapp"]
    assert [mo.token for mo in whatsapp] == ["W000000", "W000001", "W000002"]
    assert len({mo.msisdn for mo in mos.values()}) == 7
    assert all(len(mo.msisdn) == 12 and mo.msisdn.startswith("91") for mo in whatsapp)
    assert wamid_of("W000001") == wamid_of("W000001") != wamid_of("W000002")
