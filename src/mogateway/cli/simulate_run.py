"""The work of ``mogateway simulate`` (its options, help and exit codes are in cli/simulate.py): send the
MO, judge the answers, print the verdict and exit with its code. Imported only when the command runs."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import orjson
import typer

from mogateway.client.dlt import DltJudge
from mogateway.core.callback_url import UrlRefused, check_url_shape
from mogateway.core.contract import TsunixUnit
from mogateway.core.dlt import DltInvalid, check_dlt_id
from mogateway.core.text import count_parts
from mogateway.core.whatsapp_answer import decode_reply, describe
from mogateway.core.whatsapp_send import MAX_TEXT_UNITS as WHATSAPP_TEXT_LIMIT
from mogateway.core.whatsapp_send import split_text, utf16_units
from mogateway.service.caller import Exchange
from mogateway.simulation import (
    LatencySummary,
    Run,
    SimulatedMO,
    WhatsAppExchange,
    exit_code,
    simulate_many,
)
from mogateway.testing.defaults import DEFAULT_BUSINESS_NUMBER, DEFAULT_SHORTCODE, Channel

__all__ = ["EXIT_DLT_BLOCKED", "run"]

#: Exit code when a reply matches none of the --dlt-templates and --dlt-enforce is given.
EXIT_DLT_BLOCKED = 9


def run(
    url: str,
    message: str | None,
    token: str,
    shortcode: str | None,
    whatsapp: bool,
    msisdn: str,
    operator: str,
    circle: str,
    timeout: float,
    tsunix_unit: str,
    repeat: int,
    concurrency: int,
    unescape_newlines: bool,
    json_output: bool,
    signing_secret: str | None,
    dlt_templates: Path | None,
    pe_id: str | None,
    dlt_enforce: bool,
    dlt_var_max: int,
    whatsapp_type: str | None = None,
    details: dict[str, Any] | None = None,
) -> None:
    """Send the MO as asked and exit with the verdict's code (cli/simulate.py)."""
    unit = _unit(tsunix_unit)
    given = {k: v for k, v in (details or {}).items() if v is not None}
    if not whatsapp and (whatsapp_type is not None or given):
        option = "--type" if whatsapp_type is not None else "--" + next(iter(given)).replace("_", "-")
        raise typer.BadParameter("is for a WhatsApp MO: add --whatsapp", param_hint=option)
    message = _message(message, whatsapp_type if whatsapp else None)
    if whatsapp and (dlt_templates is not None or pe_id is not None or dlt_enforce):
        raise typer.BadParameter("DLT does not apply to WhatsApp replies", param_hint="--whatsapp")
    dlt = _dlt(dlt_templates, pe_id, dlt_enforce, dlt_var_max, unescape_newlines)
    channel: Channel = "whatsapp" if whatsapp else "sms"
    if shortcode is None:
        shortcode = DEFAULT_BUSINESS_NUMBER if whatsapp else DEFAULT_SHORTCODE
    try:
        check_url_shape(url)
    except UrlRefused as exc:
        raise typer.BadParameter(str(exc), param_hint="URL") from None
    secrets = tuple(part.strip() for part in (signing_secret or "").split(",") if part.strip())
    if signing_secret is not None and not secrets:
        raise typer.BadParameter("must not be empty", param_hint="--signing-secret")
    mo = SimulatedMO(message, token, msisdn, shortcode, operator, circle, unit, secrets, channel)
    if whatsapp and (whatsapp_type is not None or given):
        from mogateway.testing.simulated_whatsapp import Details

        mo = dataclasses.replace(mo, whatsapp_type=whatsapp_type or "text", details=Details(**given))
    try:
        mo.check()
    except ValueError as exc:
        hint_of = getattr(exc, "option", None)  # simulated_whatsapp.DetailError names its option
        if isinstance(hint_of, str):
            raise typer.BadParameter(getattr(exc, "reason", str(exc)), param_hint=hint_of) from None
        if "calls back" in str(exc) or "would not take" in str(exc):
            raise typer.BadParameter(str(exc), param_hint="--type") from None
        hint = "--shortcode" if "shortcode" in str(exc) or "business" in str(exc) else "--msisdn"
        raise typer.BadParameter(str(exc), param_hint=hint) from None

    run = asyncio.run(
        simulate_many(
            url,
            mo,
            repeat=repeat,
            concurrency=concurrency,
            deadline_s=timeout,
            unescape_newlines=unescape_newlines,
        )
    )
    code = exit_code([x.outcome.kind for x in run.exchanges])
    replies = [x.outcome.reply for x in run.exchanges if x.outcome.reply is not None]
    if dlt is not None and dlt.enforce and code == 0 and any(dlt.verdict(r)[0] == "blocked" for r in replies):
        code = EXIT_DLT_BLOCKED
    if json_output:
        document = _single_json(run.exchanges[0], channel) if repeat == 1 else _summary_json(run)
        document["channel"] = channel
        if dlt is not None:
            document["dlt"] = dlt.json(replies[0]) if repeat == 1 and replies else dlt.summary(replies)
        typer.echo(orjson.dumps({**document, "exit_code": code}, option=orjson.OPT_INDENT_2).decode())
    elif repeat == 1:
        typer.echo(_single_text(url, mo, run.exchanges[0]))
        if dlt is not None and replies:
            typer.echo("\n".join(dlt.lines(replies[0])))
    else:
        typer.echo(_summary_text(url, run))
        if dlt is not None:
            counts = ", ".join(f"{template} {n}" for template, n in dlt.summary(replies).items())
            typer.echo(f"DLT templates matched: {counts or '-'}")
    raise typer.Exit(code)


def _dlt(
    path: Path | None, pe_id: str | None, enforce: bool, var_max: int, unescape_newlines: bool
) -> DltJudge | None:
    if path is None:
        if pe_id is not None or enforce:
            raise typer.BadParameter("needs --dlt-templates FILE.csv", param_hint="--pe-id/--dlt-enforce")
        return None
    if pe_id is not None:
        try:
            check_dlt_id(pe_id, "--pe-id")
        except DltInvalid as exc:
            raise typer.BadParameter(exc.reason, param_hint="--pe-id") from None
    elif enforce:
        raise typer.BadParameter("needs --pe-id (as dlt_enforce needs dlt_pe_id)", param_hint="--dlt-enforce")
    try:
        return DltJudge.from_csv(
            path, pe_id=pe_id, enforce=enforce, var_max=var_max, unescape_newlines=unescape_newlines
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--dlt-templates") from None


def _message(message: str | None, whatsapp_type: str | None) -> str:
    """MESSAGE, or the default text of the WhatsApp type (``testing.simulated_whatsapp``)."""
    if message is not None:
        return message
    if whatsapp_type is not None:
        from mogateway.testing.simulated_whatsapp import DEFAULT_TEXT

        default = DEFAULT_TEXT.get(whatsapp_type)
        if default is not None:
            return default
        if whatsapp_type in DEFAULT_TEXT:
            raise typer.BadParameter(f"a {whatsapp_type} message needs its text", param_hint="MESSAGE")
        return ""  # an unknown type: check() names --type
    raise typer.BadParameter("the text of the MO is required", param_hint="MESSAGE")


def _unit(value: str) -> TsunixUnit:
    if value == "ms":
        return "ms"
    if value == "s":
        return "s"
    raise typer.BadParameter("must be ms or s", param_hint="--tsunix-unit")


# ------------------------------------------------------------------------------------------ one


def _sms(reply: str) -> dict[str, Any]:
    parts = count_parts(reply)
    return {"encoding": parts.encoding, "units": parts.units, "parts": parts.parts}


def _attempts(x: Exchange) -> list[dict[str, Any]]:
    return [
        {"started_ms": round(a.started_ms, 1), "elapsed_ms": round(a.elapsed_ms, 1), "status": a.status}
        | ({"error": a.error} if a.error else {})
        for a in x.attempts
    ]


def _whatsapp(reply: str) -> dict[str, Any]:
    rich = decode_reply(reply)
    if rich is not None:  # a JSON answer the gateway would send as these messages, in order
        return {"messages": len(rich), "rich": describe(rich), "sent": list(rich)}
    parts = split_text(reply)
    return {"messages": len(parts), "limit": WHATSAPP_TEXT_LIMIT, "lengths": [utf16_units(p) for p in parts]}


def _shown_reply(reply: str) -> str:
    """The reply as the JSON of its messages for a rich one, else as it is."""
    rich = decode_reply(reply)
    return reply if rich is None else orjson.dumps(list(rich), option=orjson.OPT_INDENT_2).decode()


def _single_json(x: Exchange, channel: Channel = "sms") -> dict[str, Any]:
    o = x.outcome
    document: dict[str, Any] = {
        "outcome": o.kind.value,
        "sends_reply": o.sends_reply,
        "status": o.status,
        "reply": None if o.reply is None else _shown_reply(o.reply),
        "detail": o.detail,
        "elapsed_ms": round(x.elapsed_ms, 1),
        "attempts": _attempts(x),
    }
    if o.reply is not None:
        if channel == "whatsapp":
            document["whatsapp"] = _whatsapp(o.reply)
        else:
            document["sms"] = _sms(o.reply)
    if isinstance(x, WhatsAppExchange):
        document["member"] = None if x.member is None else orjson.loads(x.member)
        if x.withheld_reply is not None:
            document["withheld_reply"] = x.withheld_reply
    return document


_MAX_ATTEMPT_LINES = 5


def _single_text(url: str, mo: SimulatedMO, x: Exchange) -> str:
    o = x.outcome
    signed = "  (signed)" if mo.signing_secrets else ""
    kind = "MO"
    if mo.channel == "whatsapp":
        kind = "WhatsApp MO" if mo.whatsapp_type in (None, "text") else f"WhatsApp {mo.whatsapp_type} MO"
    lines = [f"POST {url}  {kind} {mo.msisdn} -> {mo.shortcode}: {mo.message!r}{signed}"]
    if isinstance(x, WhatsAppExchange) and x.member is not None and mo.whatsapp_type is not None:
        lines.append(f"whatsapp member: {x.member}")
    took = f"{x.elapsed_ms:.0f} ms"
    rich = decode_reply(o.reply) if o.reply is not None and mo.channel == "whatsapp" else None
    if rich is not None:
        lines.append(f"reply (status {o.status}) in {took}:")
        lines.extend(f"  | {line}" for line in _shown_reply(o.reply or "").splitlines())
        plural = "" if len(rich) == 1 else "s"
        lines.append(
            f"WhatsApp: a rich reply, {len(rich)} message{plural} in order: {', '.join(describe(rich))}"
        )
    elif o.reply is not None and mo.channel == "whatsapp":
        lengths = _whatsapp(o.reply)["lengths"]
        lines.append(f"reply (status {o.status}) in {took}:")
        lines.extend(f"  | {line}" for line in o.reply.splitlines())
        plural = "" if len(lengths) == 1 else "s"
        lines.append(
            f"WhatsApp: {len(lengths)} text message{plural} (split at {WHATSAPP_TEXT_LIMIT:,} characters), "
            f"{' + '.join(str(n) for n in lengths)} UTF-16 units"
        )
    elif o.reply is not None:
        sms = count_parts(o.reply)
        alphabet, unit = ("GSM-7", "septets") if sms.encoding == "gsm7" else ("UCS-2", "UTF-16 units")
        lines.append(f"reply (status {o.status}) in {took}:")
        lines.extend(f"  | {line}" for line in o.reply.splitlines())
        plural = "" if sms.parts == 1 else "s"
        lines.append(f"SMS: {sms.parts} part{plural}, {alphabet}, {sms.units} {unit}")
    else:
        lines.append(f"no reply ({o.kind.value}): {o.detail} — after {took}")
        if isinstance(x, WhatsAppExchange) and x.withheld_reply is not None:
            lines.append(f"the answer, withheld: {x.withheld_reply!r}")
        if mo.channel != "whatsapp" and o.detail == "content type 'application/json'":
            lines.append('a JSON answer {"whatsapp": ...} is a rich reply on WhatsApp only (try --whatsapp)')
    if len(x.attempts) > 1:
        lines.append(f"attempts: {len(x.attempts)}")
        previous = ""
        for a in x.attempts[:_MAX_ATTEMPT_LINES]:
            # A retried connection failure repeats the same error: say it once.
            error = "" if a.error == previous else a.error
            previous = a.error
            status = a.status if a.status is not None else "-"
            lines.append(f"  at {a.started_ms:6.0f} ms: {status} {error}".rstrip())
        if len(x.attempts) > _MAX_ATTEMPT_LINES:
            lines.append(f"  ... {len(x.attempts) - _MAX_ATTEMPT_LINES} more")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ many


def _first_details(run: Run) -> dict[str, str]:
    details: dict[str, str] = {}
    for x in run.exchanges:
        details.setdefault(x.outcome.kind.value, x.outcome.detail or (x.outcome.reply or ""))
    return details


def _summary_json(run: Run) -> dict[str, Any]:
    latency = LatencySummary.of(run.exchanges)
    return {
        "count": len(run.exchanges),
        "concurrency": run.concurrency,
        "wall_s": round(run.wall_s, 3),
        "rate_per_s": round(len(run.exchanges) / run.wall_s, 1) if run.wall_s else None,
        "outcomes": {kind.value: n for kind, n in run.outcomes.most_common()},
        "latency_ms": {k: round(getattr(latency, k), 1) for k in ("p50", "p90", "p99", "max", "min", "mean")},
        "first_detail": _first_details(run),
    }


def _summary_text(url: str, run: Run) -> str:
    n = len(run.exchanges)
    latency = LatencySummary.of(run.exchanges)
    rate = f"{n / run.wall_s:.1f}/s" if run.wall_s else "-"
    outcomes = ", ".join(f"{kind.value} {count}" for kind, count in run.outcomes.most_common())
    lines = [
        f"POST {url}  {n} callbacks, concurrency {run.concurrency}, {run.wall_s:.2f} s ({rate})",
        f"outcomes: {outcomes}",
        f"latency ms: p50 {latency.p50:.1f}  p90 {latency.p90:.1f}  p99 {latency.p99:.1f}  "
        f"max {latency.max:.1f}",
    ]
    for kind, detail in _first_details(run).items():
        label = "first reply" if kind == "reply" else kind
        lines.append(f"  {label}: {detail}")
    return "\n".join(lines)
