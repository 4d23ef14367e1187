"""The DLT decision for each reply (service/dlt.py): settings in the client document, verdicts, counters."""

from __future__ import annotations

from dataclasses import replace

from mogateway.core.clients import ClientRecord
from mogateway.core.dlt import DltIds
from mogateway.core.timeline import EventKind, State, transition
from mogateway.service.dlt import BLOCKED_REASON, DltGate, DltProfile, StoredTemplate
from mogateway.service.metrics import Metrics

PE = "1201159178420181234"
T1 = "1107161234567890001"
T2 = "1107161234567890002"


def client(profile: DltProfile, **fields: object) -> ClientRecord:
    base = ClientRecord("cl_a", "a", ["56767"], [], "http://127.0.0.1/", "t", updated_at=1.0)
    return profile.put_on(replace(base, **fields))  # type: ignore[arg-type]


def counted(metrics: Metrics, client_id: str, result: str) -> float:
    value = metrics.registry.get_sample_value(
        "mogateway_dlt_replies_total", {"client": client_id, "result": result}
    )
    return value or 0.0


def test_the_profile_lives_in_the_client_document_and_round_trips() -> None:
    profile = DltProfile(PE, True, (StoredTemplate(T1, "Bal {#var#}", 5.0),))
    record = client(profile)
    assert record.extra["dlt"] == {
        "pe_id": PE,
        "enforce": True,
        "templates": [{"template_id": T1, "text": "Bal {#var#}", "added_at": 5.0}],
    }
    assert DltProfile.of(record) == profile
    assert "dlt" not in DltProfile().put_on(record).extra  # cleared settings leave no trace
    changed = profile.with_template(StoredTemplate(T1, "Balance {#var#}", 6.0)).with_template(
        StoredTemplate(T2, "OTP {#numeric#}")
    )
    assert [(t.template_id, t.text) for t in changed.templates] == [
        (T1, "Balance {#var#}"),
        (T2, "OTP {#numeric#}"),
    ]
    assert [t.template_id for t in changed.without_template(T1).templates] == [T2]


def test_a_client_without_a_pe_id_is_not_touched() -> None:
    gate = DltGate()
    assert gate.verdict(None, "x").ids is None
    plain = client(DltProfile())
    assert gate.verdict(plain, "anything") == gate.verdict(None, "")
    templates_only = client(DltProfile(None, False, (StoredTemplate(T1, "Bal {#var#}"),)))
    verdict = gate.verdict(templates_only, "Bal 5")
    assert verdict.ids is None and not verdict.blocked and verdict.data == {}


def test_matched_unmatched_and_blocked_verdicts_are_counted_per_client() -> None:
    metrics = Metrics()
    gate = DltGate(30, metrics.dlt_replies)
    templates = (StoredTemplate(T1, "Bal {#var#}"), StoredTemplate(T2, "OTP {#numeric#}"))
    lenient = client(DltProfile(PE, False, templates))
    strict = client(DltProfile(PE, True, templates), id="cl_b")

    matched = gate.verdict(lenient, "OTP 1234")
    assert matched.ids == DltIds(PE, T2) and matched.data == {"dlt_template": T2, "dlt_pe_id": PE}

    unmatched = gate.verdict(lenient, "Hello")
    assert unmatched.ids is None and not unmatched.blocked
    assert unmatched.data["dlt"] == f"{BLOCKED_REASON}; sent without the client's DLT ids"

    blocked = gate.verdict(strict, "OTP 12ab")
    assert blocked.blocked and blocked.ids is None
    assert blocked.data["reason"] == BLOCKED_REASON and blocked.data["templates"] == 2
    assert blocked.data["closest"][0]["template_id"] == T2
    change = blocked.blocked_change("m1", 1.0)
    assert transition(State.ANSWERED, change.event) is State.REPLY_BLOCKED
    assert change.event.kind is EventKind.REPLY_BLOCKED and change.event.data["reason"] == BLOCKED_REASON

    assert counted(metrics, "cl_a", "matched") == 1
    assert counted(metrics, "cl_a", "unmatched") == 1
    assert counted(metrics, "cl_b", "blocked") == 1


def test_templates_are_compiled_again_when_the_client_changes() -> None:
    gate = DltGate()
    before = client(DltProfile(PE, True, (StoredTemplate(T1, "Bal {#var#}"),)))
    assert gate.verdict(before, "OTP 5").blocked
    after = DltProfile.of(before).with_template(StoredTemplate(T2, "OTP {#numeric#}")).put_on(before)
    after = replace(after, updated_at=2.0)
    assert gate.verdict(after, "OTP 5").ids == DltIds(PE, T2)


def test_the_clients_newline_rule_applies_to_its_templates() -> None:
    gate = DltGate()
    templates = (StoredTemplate(T1, "Bal {#var#}\\nThanks"),)
    unescaping = client(DltProfile(PE, True, templates))
    assert gate.verdict(unescaping, "Bal 5\nThanks").ids == DltIds(PE, T1)
    keeping = client(DltProfile(PE, True, templates), id="cl_k", unescape_newlines=False)
    assert gate.verdict(keeping, "Bal 5\\nThanks").ids == DltIds(PE, T1)
    assert gate.verdict(keeping, "Bal 5\nThanks").blocked


def test_a_stored_template_that_no_longer_parses_is_ignored_not_fatal() -> None:
    gate = DltGate()
    broken = client(
        DltProfile(PE, True, (StoredTemplate(T1, "{#var#}"), StoredTemplate(T2, "OTP {#numeric#}")))
    )
    assert gate.verdict(broken, "OTP 42").ids == DltIds(PE, T2)
    assert gate.verdict(broken, "x").data["templates"] == 1
