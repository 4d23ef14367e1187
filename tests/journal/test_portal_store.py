"""The client portal's rows and its client-scoped reads, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import time

from mogateway.core import totp
from mogateway.core.message import Message, Sender
from mogateway.core.portal_accounts import PortalUser, invite_key
from mogateway.core.ports import Journal, MessageFilter
from mogateway.core.timeline import Change, Event, EventKind
from mogateway.service.portal_accounts import InviteRefused, PortalAccounts


def mo(message_id: str, *, received_at: float, shortcode: str = "56767") -> Message:
    return Message(
        id=message_id,
        shortcode=shortcode,
        msisdn="919812345678",
        text="VOTE 7",
        received_at=received_at,
        origin="http",
        source_id="src-" + message_id,
        sender=Sender(91, 9812, 345678, "airtel", "DL"),
    )


def outcome(kind: str, **data: object) -> Event:
    return Event(EventKind.OUTCOME, time.time(), {"outcome": kind, **data})


async def _two_clients_traffic(journal: Journal) -> None:
    now = time.time()
    await journal.store([mo(f"a{n}", received_at=now - n) for n in range(3)])
    await journal.store([mo(f"b{n}", received_at=now - n, shortcode="56999") for n in range(2)])
    await journal.apply(
        [Change(f"a{n}", outcome("reply", reply="hi"), client_id="cl_a", reply_text="hi") for n in range(3)]
    )
    await journal.apply([Change(f"b{n}", outcome("blank"), client_id="cl_b") for n in range(2)])


async def test_every_client_read_is_filtered_by_the_client_in_sql(journal: Journal) -> None:
    await _two_clients_traffic(journal)
    store = journal.portal()
    now = time.time()
    mine = await store.client_find("cl_a", MessageFilter(client_id="cl_b", limit=50))
    assert sorted(r.id for r in mine) == ["a0", "a1", "a2"]  # a filter naming another client is overruled
    assert await store.client_find("cl_a", MessageFilter(shortcode="56999")) == []
    assert await store.client_history("cl_a", "b0") is None  # another client's message: as if absent
    found = await store.client_history("cl_b", "b0")
    assert found is not None and found[0].id == "b0" and len(found[1]) >= 2
    a1 = await store.client_history("cl_a", "a1")
    assert a1 is not None
    recent = a1[0].message.received_at  # a0 and a1 were received in the recent part, a2 before it
    (row,) = (await store.client_traffic("cl_a", now - 60, recent, now + 1)).states
    assert row in (("56767", "sms", "replied", 3, 2), ("56767", "sms", "answered", 3, 2))
    (row,) = (await store.client_traffic("cl_b", now - 60, recent, now + 1)).states
    assert row[3:] == (2, 2)
    # a recent part that begins before the window is cut at the window's start
    assert (await store.client_traffic("cl_a", now - 1.5, now - 60, now + 1)).states[0][3:] == (2, 2)
    assert await store.client_count("cl_b", now - 60, now + 1) == 2
    page = await store.client_page("cl_a", now - 60, now + 1, None, 2)
    rest = await store.client_page("cl_a", now - 60, now + 1, (page[-1].message.received_at, page[-1].id), 2)
    assert [r.id for r in page + rest] == ["a2", "a1", "a0"]  # oldest first, keyset paging, no repeat


async def test_an_invite_is_single_use_and_expires(journal: Journal) -> None:
    accounts = PortalAccounts(journal.portal())
    user, token = await accounts.invite("cl_a", "Ann@Example.com", "admin", 1, "operator")
    assert user.email == "ann@example.com" and not user.active
    assert (await accounts.invite_user(token)) is not None
    accepted = await accounts.accept(token, "correct horse battery")
    assert accepted.active
    try:
        await accounts.accept(token, "another password here")
        raise AssertionError("an invite works once")
    except InviteRefused:
        pass
    assert await accounts.check_password("ann@example.com", "correct horse battery") is not None
    # a new invite of the same person (a password reset) replaces an open one
    _, first = await accounts.invite("cl_a", "ann@example.com", "viewer", 1, "operator")
    _, second = await accounts.invite("cl_a", "ann@example.com", "viewer", 1, "operator")
    assert await accounts.invite_user(first) is None and await accounts.invite_user(second) is not None
    assert await accounts.check_password("ann@example.com", "wrong password!!") is None
    # the same address cannot belong to another client
    try:
        await accounts.invite("cl_b", "ann@example.com", "viewer", 1, "operator")
        raise AssertionError("one address, one client")
    except InviteRefused as exc:
        assert "another client" in str(exc)
    expired = PortalAccounts(journal.portal(), clock=lambda: time.time() - 7200)
    _, old = await expired.invite("cl_a", "bob@example.com", "viewer", 1, "operator")
    assert await accounts.invite_user(old) is None
    assert await journal.portal().accept_invite(invite_key(old), time.time(), "x") is None


async def test_totp_codes_work_once_and_recovery_codes_once(journal: Journal) -> None:
    accounts = PortalAccounts(journal.portal())
    _, token = await accounts.invite("cl_a", "t@example.com", "viewer", 1, "operator")
    user = await accounts.accept(token, "correct horse battery")
    secret = accounts.new_totp_secret()
    raw = totp.from_base32(secret)
    assert (
        await accounts.turn_totp_on(
            user, secret, "000000" if totp.totp(raw, time.time()) != "000000" else "1"
        )
        is None
    )
    codes = await accounts.turn_totp_on(user, secret, totp.totp(raw, time.time()))
    assert codes is not None and len(codes) == 10
    user2 = await journal.portal().user(user.id)
    assert user2 is not None and user2.totp_secret == secret
    # the code used to turn it on is spent; the next step's code works once
    later = time.time() + 30
    timed = PortalAccounts(journal.portal(), clock=lambda: later)
    code = totp.totp(raw, later)
    assert await timed.second_factor(user2, code)
    fresh = await journal.portal().user(user.id)
    assert fresh is not None and not await timed.second_factor(fresh, code)
    assert await accounts.second_factor(fresh, codes[0].upper())
    assert not await accounts.second_factor(fresh, codes[0])
    assert await journal.portal().recovery_codes_left(user.id) == 9


async def test_disabling_ends_sessions_everywhere(journal: Journal) -> None:
    store = journal.portal()
    accounts = PortalAccounts(store)
    _, token = await accounts.invite("cl_a", "d@example.com", "viewer", 1, "operator")
    user = await accounts.accept(token, "correct horse battery")
    now = time.time()
    await store.add_session("k1", user.id, "cl_a", now + 60, now, 100)
    assert await store.session("k1", now) is not None
    assert await accounts.disable("cl_b", user.id, "operator") == 0  # not that client's person
    assert await store.session("k1", now) is not None
    assert await accounts.disable("cl_a", None, "operator") == 1
    assert await store.session("k1", now) is None
    assert await accounts.check_password("d@example.com", "correct horse battery") is None
    entries = await store.audit("cl_a", 10)
    assert [e.action for e in entries][:2] == ["disable all", "password set"]
    assert await store.audit("cl_b", 10) == []


def test_a_portal_user_repr_hides_secrets() -> None:
    user = PortalUser("pu_1", "cl_a", "a@example.com", "admin", 0.0, "$argon2id$secret", "SECRETKEY")
    assert "argon2" not in repr(user) and "SECRETKEY" not in repr(user)


async def test_paging_both_ways_skips_and_repeats_nothing_even_at_equal_times(journal: Journal) -> None:
    now = time.time()
    # 7 messages, three of them at one instant: the cursor's id breaks the tie.
    times = [now - 5, now - 4, now - 3, now - 3, now - 3, now - 2, now - 1]
    await journal.store([mo(f"p{n}", received_at=at) for n, at in enumerate(times)])
    await journal.apply([Change(f"p{n}", outcome("blank"), client_id="cl_a") for n in range(7)])
    store = journal.portal()
    seen: list[str] = []
    before = None
    while True:
        page = await store.client_find("cl_a", MessageFilter(limit=2, before=before))
        seen += [r.id for r in page]
        if len(page) < 2:
            break
        before = (page[-1].message.received_at, page[-1].id)
    assert seen == ["p6", "p5", "p4", "p3", "p2", "p1", "p0"]
    forward: list[str] = []
    after = None
    while page := await store.client_page("cl_a", now - 60, now + 1, after, 2):
        forward += [r.id for r in page]
        after = (page[-1].message.received_at, page[-1].id)
    assert forward == ["p0", "p1", "p2", "p3", "p4", "p5", "p6"]
