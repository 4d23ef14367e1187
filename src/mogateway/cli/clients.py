"""``mogateway clients``: register and manage client applications on a running gateway."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Column, Table

from mogateway.cli import dlt
from mogateway.cli.admin_command import admin_command
from mogateway.cli.common import JSON_OPTION, TOKEN_OPTION, URL_OPTION, ApiClient, console, print_json

__all__ = ["register"]

clients_app = typer.Typer(help="Register and manage client applications.", no_args_is_help=True)


def _show(client: dict[str, Any]) -> None:
    table = Table(show_header=False, box=None)
    for key in (
        "id",
        "name",
        "shortcodes",
        "whatsapp_numbers",
        "keywords",
        "callback_url",
        "timeout_s",
        "max_concurrency",
        "tsunix_unit",
        "unescape_newlines",
        "sign_callbacks",
        "signing_grace_until",
        "dlt_pe_id",
        "dlt_enforce",
        "dlt_templates",
        "created_at",
        "updated_at",
        "token",
        "signing_secret",
    ):
        if key in client:
            value = client[key]
            if isinstance(value, list):
                value = ", ".join(value) or "-"
            table.add_row(f"[bold]{key}[/bold]", "-" if value is None else str(value))
    console.print(table)
    shown = [
        what for key, what in (("token", "token"), ("signing_secret", "signing secret")) if key in client
    ]
    if shown:
        console.print(
            f"[yellow]The {' and the '.join(shown)} {'are' if len(shown) > 1 else 'is'} shown only now: "
            "give it to the application owner.[/yellow]"
        )


@clients_app.command("add")
def add(
    name: str = typer.Option(..., "--name", help="A name for people."),
    shortcode: list[str] = typer.Option([], "--shortcode", "-s", help="Shortcode (repeat for several)."),
    whatsapp: list[str] = typer.Option(
        [], "--whatsapp", help="WhatsApp business number, digits with the country code (repeat for several)."
    ),
    callback_url: str = typer.Option(..., "--callback-url", "-u", help="Where MOs are POSTed."),
    keyword: list[str] = typer.Option([], "--keyword", "-k", help="Only MOs starting with this word."),
    timeout: float = typer.Option(30.0, "--timeout", help="Seconds the application has to answer (1-30)."),
    max_concurrency: int | None = typer.Option(
        None, "--max-concurrency", help="Callbacks in flight at most."
    ),
    tsunix_unit: str = typer.Option("ms", "--tsunix-unit", help="ms (default) or s."),
    unescape_newlines: bool = typer.Option(
        True, "--unescape-newlines/--keep-backslash-n", help=r"Turn \n in answers into line breaks."
    ),
    sign: bool = typer.Option(
        False, "--sign", help="Sign its callbacks (x-mogateway-signature); prints the signing secret once."
    ),
    url: str = URL_OPTION,
    token: str | None = TOKEN_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Register a client application; prints its id and bearer token (and signing secret, with --sign).
    It takes the MOs of its shortcodes and WhatsApp numbers (at least one of them)."""
    body: dict[str, Any] = {
        "name": name,
        "shortcodes": shortcode,
        "whatsapp_numbers": whatsapp,
        "callback_url": callback_url,
        "keywords": keyword,
        "timeout_s": timeout,
        "tsunix_unit": tsunix_unit,
        "unescape_newlines": unescape_newlines,
        "sign_callbacks": sign,
    }
    if max_concurrency is not None:
        body["max_concurrency"] = max_concurrency
    client = ApiClient(url, token, "admin").call("POST", "/v1/clients", json_body=body)
    print_json(client) if as_json else _show(client)


@clients_app.command("list")
def list_(url: str = URL_OPTION, token: str | None = TOKEN_OPTION, as_json: bool = JSON_OPTION) -> None:
    """List client applications."""
    data = ApiClient(url, token, "admin").call("GET", "/v1/clients")
    if as_json:
        print_json(data)
        return
    # Ids must stay whole (people copy them), whatever the terminal's width.
    table = Table(
        Column("id", no_wrap=True, min_width=19),
        "name",
        "shortcodes",
        "keywords",
        "callback_url",
        "timeout",
        "max conc.",
    )
    for c in data["clients"]:
        table.add_row(
            c["id"],
            c["name"],
            ", ".join([*c["shortcodes"], *(f"wa:{n}" for n in c.get("whatsapp_numbers", []))]),
            ", ".join(c["keywords"]) or "(default)",
            c["callback_url"],
            f"{c['timeout_s']:g} s",
            str(c["max_concurrency"]),
        )
    console.print(table)


# The commands that are one call about a client, its answer shown: name, method, path, help.
for _name, _method, _path, _help in (
    ("show", "GET", "/v1/clients/{}", "Show one client application."),
    (
        "rotate-token",
        "POST",
        "/v1/clients/{}/token",
        "Give a client a new bearer token (the old one stops being sent at once).",
    ),
    (
        "rotate-secret",
        "POST",
        "/v1/clients/{}/signing-secret",
        "Give a signing client a new signing secret; the old one also signs until the grace period ends.",
    ),
):
    admin_command(clients_app, _name, _help, key="client_id", method=_method, path=_path, render=_show)


@clients_app.command("signing")
def signing(
    client_id: str,
    on: bool = typer.Option(..., "--on/--off", help="Sign this client's callbacks, or stop signing them."),
    url: str = URL_OPTION,
    token: str | None = TOKEN_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Turn signing of a client's callbacks on (prints a new signing secret once) or off."""
    client = ApiClient(url, token, "admin").call(
        "PATCH", f"/v1/clients/{client_id}", json_body={"sign_callbacks": on}
    )
    print_json(client) if as_json else _show(client)


@clients_app.command("remove")
def remove(client_id: str, url: str = URL_OPTION, token: str | None = TOKEN_OPTION) -> None:
    """Remove a client application (its MOs become unroutable)."""
    ApiClient(url, token, "admin").call("DELETE", f"/v1/clients/{client_id}")
    console.print(f"removed {client_id}")


@clients_app.command("invite")
def invite(
    client_id: str,
    email: str = typer.Option(..., "--email", help="The person's e-mail address (their sign-in name)."),
    role: str = typer.Option("viewer", "--role", help="viewer (reads) or admin (also changes and rotates)."),
    url: str = URL_OPTION,
    token: str | None = TOKEN_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Invite a person to a client's portal: prints a one-time link (it expires) that sets their password."""
    if role not in ("viewer", "admin"):
        raise typer.BadParameter("viewer or admin", param_hint="--role")
    data = ApiClient(url, token, "admin").call(
        "POST", f"/v1/clients/{client_id}/portal/invites", json_body={"email": email, "role": role}
    )
    data["invite_link"] = url.rstrip("/") + data.pop("invite_path")
    if as_json:
        print_json(data)
        return
    console.print(f"{data['email']} ({data['role']}) is invited to the portal of {client_id}.")
    console.print(
        f"[yellow]The link is shown only now; it works once, within {data['invite_hours']} hours:[/yellow]"
    )
    print(data["invite_link"])


@clients_app.command("portal-disable")
def portal_disable(
    client_id: str,
    user_id: str | None = typer.Option(None, "--user", help="One person's id; without it, everyone."),
    url: str = URL_OPTION,
    token: str | None = TOKEN_OPTION,
) -> None:
    """Disable one person of a client's portal, or all of them; their sessions end at once."""
    where = f"/v1/clients/{client_id}/portal" + (f"/users/{user_id}/disable" if user_id else "/disable")
    data = ApiClient(url, token, "admin").call("POST", where)
    console.print(f"disabled {data['disabled']}")


def register(app: typer.Typer) -> None:
    dlt.register(clients_app)  # clients dlt-set, dlt-templates, dlt-add, dlt-remove, dlt-import, dlt-check
    app.add_typer(clients_app, name="clients")
