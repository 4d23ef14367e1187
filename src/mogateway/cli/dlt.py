"""``mogateway clients dlt-*``: a client's DLT principal entity, enforcement and templates, on a running
gateway (the API of ``mogateway.api.dlt``; the rules are in ``docs/dlt.md``).

Exit codes are the CLI's own (docs/configuration.md), plus: ``dlt-import`` exits 1 when rows were refused
(the others were imported), ``dlt-check`` exits 1 when the reply matches no template.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Column, Table

from mogateway.cli.common import (
    EXIT_USAGE,
    JSON_OPTION,
    TOKEN_OPTION,
    URL_OPTION,
    ApiClient,
    console,
    fail,
    print_json,
)
from mogateway.cli.exit_codes import Exit

__all__ = ["register"]


def register(clients_app: typer.Typer) -> None:
    """Add the ``dlt-*`` commands to the ``clients`` group."""
    for name, command in (
        ("dlt-set", dlt_set),
        ("dlt-templates", dlt_templates),
        ("dlt-add", dlt_add),
        ("dlt-remove", dlt_remove),
        ("dlt-import", dlt_import),
        ("dlt-check", dlt_check),
    ):
        clients_app.command(name)(command)


def _api(url: str, token: str | None) -> ApiClient:
    return ApiClient(url, token, "admin")


def dlt_set(
    client_id: str = typer.Argument(..., help="The client's id (cl_…)."),
    pe_id: str | None = typer.Option(
        None, "--pe-id", help="The client's DLT principal entity id (19 digits)."
    ),
    no_pe_id: bool = typer.Option(False, "--no-pe-id", help="Remove the PE id (DLT no longer applies)."),
    enforce: bool | None = typer.Option(
        None, "--enforce/--no-enforce", help="Block replies that match no template (needs a PE id)."
    ),
    url: str = URL_OPTION,
    token: str | None = TOKEN_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Set a client's DLT principal entity id and whether unmatched replies are blocked."""
    body: dict[str, Any] = {}
    if pe_id is not None and no_pe_id:
        fail("give --pe-id or --no-pe-id, not both", EXIT_USAGE)
    if pe_id is not None:
        body["dlt_pe_id"] = pe_id
    if no_pe_id:
        body["dlt_pe_id"] = None
    if enforce is not None:
        body["dlt_enforce"] = enforce
    if not body:
        fail("nothing to change: give --pe-id, --no-pe-id, --enforce or --no-enforce", EXIT_USAGE)
    client = _api(url, token).call("PATCH", f"/v1/clients/{client_id}", json_body=body)
    if as_json:
        print_json(client)
        return
    enforced = "blocked" if client["dlt_enforce"] else "sent without DLT ids"
    console.print(
        f"{client['id']}: PE id {client['dlt_pe_id'] or '-'}, {client['dlt_templates']} templates; "
        f"replies matching none are {enforced}",
        highlight=False,
    )


def dlt_templates(
    client_id: str = typer.Argument(..., help="The client's id."),
    url: str = URL_OPTION,
    token: str | None = TOKEN_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """List a client's DLT templates."""
    data = _api(url, token).call("GET", f"/v1/clients/{client_id}/dlt-templates")
    if as_json:
        print_json(data)
        return
    enforced = "enforced" if data["dlt_enforce"] else "not enforced"
    console.print(
        f"PE id {data['dlt_pe_id'] or '-'} ({enforced}), {data['count']} templates", highlight=False
    )
    table = Table(Column("template id", no_wrap=True, min_width=19), "vars", "text")
    for t in data["templates"]:
        table.add_row(t["template_id"], str(t["variables"]), t["text"])
    console.print(table)


def dlt_add(
    client_id: str = typer.Argument(..., help="The client's id."),
    template_id: str = typer.Argument(..., help="The DLT content template id (19 digits)."),
    text: str = typer.Argument(..., help="The template text as registered, with {#var#} for variables."),
    url: str = URL_OPTION,
    token: str | None = TOKEN_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Add one DLT template to a client."""
    body = {"template_id": template_id, "text": text}
    added = _api(url, token).call("POST", f"/v1/clients/{client_id}/dlt-templates", json_body=body)
    if as_json:
        print_json(added)
    else:
        console.print(f"template {added['template_id']} ({added['variables']} variables)", highlight=False)


def dlt_remove(
    client_id: str = typer.Argument(..., help="The client's id."),
    template_id: str = typer.Argument(..., help="The template id to remove."),
    url: str = URL_OPTION,
    token: str | None = TOKEN_OPTION,
) -> None:
    """Remove one DLT template from a client."""
    _api(url, token).call("DELETE", f"/v1/clients/{client_id}/dlt-templates/{template_id}")
    console.print(f"removed template {template_id}", highlight=False)


def dlt_import(
    client_id: str = typer.Argument(..., help="The client's id."),
    file: Path = typer.Argument(..., help="The content-template CSV a DLT portal exports."),
    replace: bool = typer.Option(False, "--replace", help="Make the file the whole list (others removed)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Report what would change; change nothing."),
    url: str = URL_OPTION,
    token: str | None = TOKEN_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Import a DLT portal's template export; reports every refused row and why."""
    try:
        data = file.read_bytes()
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror or exc}", EXIT_USAGE)
    report = _api(url, token).call(
        "POST",
        f"/v1/clients/{client_id}/dlt-templates/import",
        content=data,
        content_type="text/csv",
        params={"replace": "true" if replace else None, "dry_run": "true" if dry_run else None},
    )
    if as_json:
        print_json(report)
    else:
        _print_report(file, report)
    if report["refused"]:
        raise typer.Exit(Exit.FAILED)


def _print_report(file: Path, report: dict[str, Any]) -> None:
    would = "would be " if report["dry_run"] else ""
    columns = ", ".join(f"{ours} = {theirs!r}" for ours, theirs in report["columns"].items())
    console.print(f"{file}: {report['rows']} rows; columns {columns}", highlight=False)
    console.print(
        f"{would}added {len(report['added'])}, {would}updated {len(report['updated'])}, "
        f"unchanged {report['unchanged']}"
        + (f", {would}removed {len(report['removed'])}" if report["replace"] else "")
        + f", refused {len(report['refused'])}; the client {'would have' if would else 'has'} "
        f"{report['total']} templates",
        highlight=False,
    )
    if report["refused"]:
        table = Table(Column("line", justify="right"), Column("template id", no_wrap=True), "why refused")
        for row in report["refused"]:
            table.add_row(str(row["line"]), row["template_id"] or "-", row["reason"])
        console.print(table)
    if len(report.get("entity_ids", [])) > 0:
        console.print(f"entity ids in the file: {', '.join(report['entity_ids'])}", highlight=False)


def dlt_check(
    client_id: str = typer.Argument(..., help="The client's id."),
    text: str = typer.Argument(..., help="A reply, as the application would answer it."),
    url: str = URL_OPTION,
    token: str | None = TOKEN_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Say which of the client's templates a reply matches, or why none does."""
    result = _api(url, token).call("POST", f"/v1/clients/{client_id}/dlt-check", json_body={"text": text})
    if as_json:
        print_json(result)
    elif result["template_id"]:
        console.print(f"matches template {result['template_id']}: {result['text']!r}", highlight=False)
    else:
        console.print(f"no template matches ({result['verdict']})", highlight=False)
        for miss in result["closest"]:
            console.print(f"  {miss['template_id']}: {miss['why']}", highlight=False)
    if not result["template_id"]:
        raise typer.Exit(Exit.FAILED)
