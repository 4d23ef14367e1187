"""CLI: ``mogateway simulate`` — send a contract-exact MO to a callback URL and judge the answer.

Exit codes (so it fits in CI scripts): 0 reply, 1 mixed outcomes with some no reply (``--repeat``),
2 usage error, 3 blank answer, 4 timeout, 5 HTTP status other than 200, 6 bad response (content type,
charset, over 64 KiB), 7 could not connect, 9 a reply the gateway would block because it matches none
of the ``--dlt-templates`` (with ``--dlt-enforce``). With ``--repeat`` the code is the common outcome's
when every callback ended alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from mogateway.core.contract import CALLBACK_TIMEOUT_S
from mogateway.testing.defaults import DEFAULT_BUSINESS_NUMBER, DEFAULT_SHORTCODE

__all__ = ["register", "simulate"]

_WA = "WhatsApp message (--whatsapp)"


def _wa_option(flag: str, help: str, **more: Any) -> Any:
    """An option of the WhatsApp message (None: not given), listed in the help's WhatsApp panel."""
    return typer.Option(None, flag, help=help, rich_help_panel=_WA, **more)


_EPILOG = (
    "Exit codes: 0 reply, 1 mixed outcomes (--repeat), 2 usage error, 3 blank, 4 timeout, "
    "5 HTTP status other than 200, 6 bad response, 7 could not connect, "
    "9 the reply would be blocked by DLT (--dlt-enforce)."
)


def register(app: typer.Typer) -> None:
    """Add ``simulate`` to ``app``."""
    app.command("simulate", epilog=_EPILOG)(simulate)


def simulate(
    url: str = typer.Argument(..., help="The callback URL of the application (http or https)."),
    message: str | None = typer.Argument(
        None,
        help="The text of the MO, as the subscriber typed it. With --whatsapp --type: what the type's text "
        "is (a caption, a button's title, an emoji…; see docs/whatsapp.md); optional where the type has a "
        "default.",
        show_default=False,
    ),
    token: str = typer.Option(
        ...,
        "--token",
        envvar="MOGATEWAY_CLIENT_TOKEN",
        help="Bearer token the gateway sends (env MOGATEWAY_CLIENT_TOKEN).",
        show_envvar=False,
    ),
    shortcode: str | None = typer.Option(
        None,
        help=f"Shortcode the MO was sent to (default {DEFAULT_SHORTCODE}); with --whatsapp the business "
        f"number (default {DEFAULT_BUSINESS_NUMBER}).",
    ),
    whatsapp: bool = typer.Option(
        False,
        "--whatsapp",
        help='Send a WhatsApp MO\'s callback (with "channel": "whatsapp"); the answer is judged as a '
        "WhatsApp reply (messages of up to 4,096 characters, not SMS parts).",
    ),
    whatsapp_type: str | None = typer.Option(
        None,
        "--type",
        help="With --whatsapp: the WhatsApp message type (text, image, audio, video, document, sticker, "
        "location, contacts, reaction, interactive, button_reply, list_reply, nfm_reply, button, order, "
        "system, unsupported); the callback carries it typed, as the gateway would. Default text. "
        "(system: refused, as the gateway never calls a system notice back.)",
        rich_help_panel=_WA,
    ),
    media_id: str | None = _wa_option("--media-id", "Meta's media id (media)."),
    mime_type: str | None = _wa_option("--mime-type", "The MIME type (media)."),
    filename: str | None = _wa_option("--filename", "The file name (document)."),
    file_size: int | None = _wa_option("--file-size", "The size in bytes (document).", min=0),
    voice: bool | None = _wa_option("--voice/--no-voice", "A voice note or not (audio; default voice)."),
    animated: bool | None = _wa_option("--animated/--static", "An animated sticker or not (sticker)."),
    latitude: float | None = _wa_option("--latitude", "Latitude (location)."),
    longitude: float | None = _wa_option("--longitude", "Longitude (location)."),
    address: str | None = _wa_option("--address", "Address (location)."),
    phone: str | None = _wa_option("--phone", "The card's phone (contacts)."),
    reply_id: str | None = _wa_option(
        "--reply-id",
        "The button's or list row's id (interactive, button_reply, list_reply); the payload (button).",
    ),
    description: str | None = _wa_option("--description", "The list row's description (list_reply)."),
    reacted_to: str | None = _wa_option("--reacted-to", "The wamid reacted to (reaction)."),
    reply_to: str | None = _wa_option(
        "--reply-to", "Any type: the wamid of the business's message it replies to."
    ),
    forwarded: str | None = _wa_option("--forwarded", "Any type: forwarded 'once' or 'frequently'."),
    referral: str | None = _wa_option(
        "--referral", "Any type: the click-to-WhatsApp ad's URL the person came from."
    ),
    msisdn: str = typer.Option("919812345678", help="Sender, an Indian mobile number."),
    operator: str = typer.Option("", help="sender.operator (e.g. airtel)."),
    circle: str = typer.Option("", help="sender.circle (e.g. delhi)."),
    timeout: float = typer.Option(
        CALLBACK_TIMEOUT_S, min=0.001, max=600, help="Deadline for the whole exchange, in seconds."
    ),
    tsunix_unit: str = typer.Option("ms", "--tsunix-unit", help="Unit of tsunix: ms or s."),
    repeat: int = typer.Option(1, min=1, max=100_000, help="Send the MO this many times."),
    concurrency: int = typer.Option(1, min=1, max=1000, help="At most this many callbacks at once."),
    unescape_newlines: bool = typer.Option(
        True, help="Judge like a client whose literal \\n in replies becomes a line break."
    ),
    json_output: bool = typer.Option(False, "--json", help="Print one JSON object instead of text."),
    signing_secret: str | None = typer.Option(
        None,
        "--signing-secret",
        envvar="MOGATEWAY_SIGNING_SECRET",
        help="Sign each callback as the gateway does (env MOGATEWAY_SIGNING_SECRET); several "
        "comma-separated, newest first, sign as during a rotation.",
        show_envvar=False,
    ),
    dlt_templates: Path | None = typer.Option(
        None, "--dlt-templates", help="A DLT portal's template export (CSV): say which one the reply matches."
    ),
    pe_id: str | None = typer.Option(None, "--pe-id", help="The client's DLT principal entity id."),
    dlt_enforce: bool = typer.Option(
        False, "--dlt-enforce", help="Judge like a client with dlt_enforce: a reply matching none is blocked."
    ),
    dlt_var_max: int = typer.Option(30, "--dlt-var-max", min=1, max=2000, help="Characters a {#var#} holds."),
) -> None:
    """Send a contract-exact MO to URL and report how the gateway would judge the answer."""
    from mogateway.cli.simulate_run import run  # the work, and what it imports, only when it runs

    details = {
        "media_id": media_id,
        "mime_type": mime_type,
        "filename": filename,
        "file_size": file_size,
        "voice": voice,
        "animated": animated,
        "latitude": latitude,
        "longitude": longitude,
        "address": address,
        "phone": phone,
        "reply_id": reply_id,
        "description": description,
        "reacted_to": reacted_to,
        "context": reply_to,
        "forwarded": forwarded,
        "referral": referral,
    }
    run(
        url=url,
        message=message,
        whatsapp_type=whatsapp_type,
        details=details,
        token=token,
        shortcode=shortcode,
        whatsapp=whatsapp,
        msisdn=msisdn,
        operator=operator,
        circle=circle,
        timeout=timeout,
        tsunix_unit=tsunix_unit,
        repeat=repeat,
        concurrency=concurrency,
        unescape_newlines=unescape_newlines,
        json_output=json_output,
        signing_secret=signing_secret,
        dlt_templates=dlt_templates,
        pe_id=pe_id,
        dlt_enforce=dlt_enforce,
        dlt_var_max=dlt_var_max,
    )
