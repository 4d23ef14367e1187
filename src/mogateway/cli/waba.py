"""CLI: ``mogateway waba migrate`` (move a WhatsApp number to the Cloud API) and ``waba fake-graph``.

A thin layer over :mod:`mogateway.waba`: it reads options and the token, draws the steps with rich,
and turns a :class:`MigrationStopped` into one clear message and an exit status.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mogateway.waba.endpoint import DEFAULT_GRAPH_URL, DEFAULT_VERSION

# The migration (phonenumbers, pydantic) is imported when a command runs, not to list them (cli/__init__.py).
from mogateway.waba.errors import ExitCode, GraphError, MigrationStopped, TransportError

if TYPE_CHECKING:
    from mogateway.waba import GraphRequest, Mark, MigrationOptions, StateFile

EXIT_CODES_HELP = "Exit status: " + "; ".join(
    f"{int(code)} {text}"
    for code, text in (
        (ExitCode.OK, "registered (or dry run done)"),
        (ExitCode.ERROR, "unknown Graph error"),
        (ExitCode.USAGE, "bad arguments, state file of another number, no PIN/token"),
        (ExitCode.NEEDS_CODE, "waiting for the code: run again with --code XXXXXX"),
        (ExitCode.AUTH, "token invalid, expired or lacking permissions"),
        (ExitCode.NOT_ELIGIBLE, "Meta refuses the migration (wrong id, approval, payment, name...)"),
        (ExitCode.TWO_STEP, "two-step PIN mismatch: turn two-step verification off at the old provider"),
        (ExitCode.REGISTER_BLOCKED, "register limit reached, wait 72 h"),
        (ExitCode.CODE, "code refused or not sent"),
        (ExitCode.UNAVAILABLE, "Graph unreachable/throttled after retries: run again"),
        (ExitCode.ABORTED, "you answered no"),
        (ExitCode.INTERRUPTED, "Ctrl-C: run again to continue"),
    )
)

waba_app = typer.Typer(
    help="Move a WhatsApp business number to Meta's Cloud API (and rehearse it against a fake Graph API).",
    no_args_is_help=True,
)


def _redact(text: str, *secrets: str) -> str:
    from mogateway.waba.graph import redact  # the Graph client (httpx): only when a command runs

    return redact(text, *secrets)


#: How each :class:`~mogateway.waba.prompts.Mark` is shown, by its name.
_MARKS = {
    "OK": "[green]✓[/green]",
    "FAIL": "[red]✗[/red]",
    "UNKNOWN": "[yellow]?[/yellow]",
    "WARN": "[yellow]![/yellow]",
}


class RichUI:
    """The terminal front end of a migration; every text goes through the token redactor."""

    def __init__(self, out: Console, interactive: bool, secrets: list[str]) -> None:
        self.out = out
        self._interactive = interactive
        self._secrets = secrets

    def clean(self, text: str) -> str:
        """``text`` without secrets, escaped for rich markup."""
        return escape(_redact(text, *self._secrets))

    def step(self, title: str) -> None:
        """A step starts."""
        self.out.print(f"\n[bold cyan]▶ {self.clean(title)}[/bold cyan]")

    def check(self, mark: Mark, text: str) -> None:
        """One checked fact."""
        self.out.print(f"  {_MARKS[mark.name]} {self.clean(text)}")

    def info(self, text: str) -> None:
        """Progress or advice."""
        self.out.print(f"    {self.clean(text)}")

    def interactive(self) -> bool:
        """True when prompts can be answered."""
        return self._interactive

    def confirm(self, question: str) -> bool:
        """Yes/no question."""
        answer = self.out.input(f"  {self.clean(question)} \\[y/N] ").strip().lower()
        return answer in ("y", "yes")

    def ask(self, prompt: str) -> str:
        """A line of text."""
        return self.out.input(f"  {self.clean(prompt)}: ")

    def ask_secret(self, prompt: str) -> str:
        """A hidden line of text."""
        # click's hidden prompt (getpass underneath) also works under test runners.
        return str(
            typer.prompt(
                f"  {_redact(prompt, *self._secrets)}", hide_input=True, default="", show_default=False
            )
        )


def _read_secret_file(path: Path, what: str) -> str:
    try:
        with path.open("r", encoding="utf-8") as fh:
            return fh.read(4096).strip()
    except OSError as exc:
        raise _usage(f"cannot read {what} file {path}: {exc.strerror}") from None


class _UsageError(Exception):
    pass


def _usage(message: str) -> _UsageError:
    return _UsageError(message)


def _refuse(console: Console, text: str, code: ExitCode = ExitCode.USAGE) -> NoReturn:
    """Print ``text`` (rich markup, escaped by the caller) as one ✗ line and exit with ``code``."""
    console.print(f"[red]✗[/red] {text}")
    raise typer.Exit(code) from None


def _request_lines(request: GraphRequest, client_url: str, secrets: list[str]) -> list[str]:
    import httpx

    url = httpx.URL(client_url, params=dict(request.params) or None)
    lines = [f"{request.method} {url}", "Authorization: Bearer ***"]
    if request.json is not None:
        lines += ["Content-Type: application/json", json.dumps(dict(request.json))]
    return [_redact(line, *secrets) for line in lines]


def _continue_command(args: dict[str, Any]) -> str:
    parts = ["mogateway waba migrate", f"--waba-id {args['waba_id']}", f"--phone '{args['phone']}'"]
    if args["graph_url"] != DEFAULT_GRAPH_URL:
        parts.append(f"--graph-url {args['graph_url']}")
    if args["graph_version"] != DEFAULT_VERSION:
        parts.append(f"--graph-version {args['graph_version']}")
    if args["token_env"] != "WABA_TOKEN":
        parts.append(f"--token-env {args['token_env']}")
    parts.append(f"--state {args['state']}")
    if args.get("pin_file"):
        parts.append(f"--pin-file {args['pin_file']}")
    parts.append("--code XXXXXX")
    return " ".join(parts)


@waba_app.command("migrate", epilog=EXIT_CODES_HELP)
def migrate(
    waba_id: Annotated[str, typer.Option("--waba-id", help="Destination WhatsApp Business Account id.")],
    phone: Annotated[str, typer.Option("--phone", help='The number, international form: "+91 98765 43210".')],
    code_method: Annotated[str, typer.Option("--code-method", help="SMS or VOICE.")] = "SMS",
    language: Annotated[str, typer.Option("--language", help="Language of the code message.")] = "en_US",
    pin: Annotated[str | None, typer.Option("--pin", help="6-digit two-step PIN for register.")] = None,
    pin_file: Annotated[Path | None, typer.Option("--pin-file", help="File holding the PIN.")] = None,
    code: Annotated[
        str | None, typer.Option("--code", help="The 6-digit code (non-interactive runs).")
    ] = None,
    new_code: Annotated[
        bool, typer.Option("--new-code", help="Request a new code (after a cool-down).")
    ] = False,
    graph_version: Annotated[str, typer.Option("--graph-version")] = DEFAULT_VERSION,
    graph_url: Annotated[str, typer.Option("--graph-url", help="Graph host (a fake for rehearsals).")] = (
        DEFAULT_GRAPH_URL
    ),
    callback_url: Annotated[
        str | None, typer.Option("--callback-url", help="Override the WABA's callback URL (https).")
    ] = None,
    verify_token: Annotated[
        str | None, typer.Option("--verify-token", help="Verify token for --callback-url.")
    ] = None,
    gateway_url: Annotated[
        str | None,
        typer.Option(
            "--gateway-url",
            help="Point the number's webhooks at this mogateway (its public https base URL) as the last "
            "step, then check its handshake; the verify token defaults to $MOGATEWAY_WHATSAPP__VERIFY_TOKEN.",
        ),
    ] = None,
    state: Annotated[
        Path | None, typer.Option("--state", help="State file (default ./waba-<digits>.json).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the calls; send nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    token_env: Annotated[
        str, typer.Option("--token-env", help="Environment variable holding the access token.")
    ] = "WABA_TOKEN",
    interactive: Annotated[
        bool | None,
        typer.Option("--interactive/--no-interactive", help="Force prompts on or off (default: terminal?)."),
    ] = None,
) -> None:
    """Migrate a WhatsApp business number into your WABA on the Cloud API, resumably.

    Runs preflight checks, requests the migration, the code, verifies it, registers the number,
    checks the webhook subscription, optionally points the webhooks at a callback URL (--gateway-url:
    this gateway's /v1/whatsapp/webhook) and checks its handshake, and records every step
    in the state file so that running the same command again continues where it stopped. The access
    token is read from the environment (never from an argument).
    """
    from mogateway.waba import (
        GraphClient,
        Mark,
        Migration,
        MigrationOptions,
        PhoneError,
        StateFile,
        StateFileError,
        parse_phone,
    )
    from mogateway.waba.options import GATEWAY_VERIFY_TOKEN_ENV, gateway_callback_url

    out = Console(soft_wrap=True, highlight=False)
    err = Console(stderr=True, soft_wrap=True, highlight=False)
    is_interactive = sys.stdin.isatty() if interactive is None else interactive
    secrets: list[str] = []
    try:
        number = parse_phone(phone)
        state_path = state or Path(f"waba-{number.digits}.json")
        token = os.environ.get(token_env, "").strip()
        if not token and not dry_run:
            if not is_interactive:
                raise _usage(f"no access token: set {token_env} in the environment")
            token = typer.prompt("Access token (hidden)", hide_input=True).strip()
        secrets.append(token)
        if pin is not None and pin_file is not None:
            raise _usage("give --pin or --pin-file, not both")
        if pin_file is not None:
            pin = _read_secret_file(pin_file, "PIN")
        # PIN and code are never printed (dry runs show placeholders); redacting 6 digits everywhere
        # would also mangle ids that happen to contain them.
        if gateway_url is not None:
            if callback_url is not None:
                raise _usage("give --gateway-url or --callback-url, not both")
            callback_url = gateway_callback_url(gateway_url)
            verify_token = verify_token or os.environ.get(GATEWAY_VERIFY_TOKEN_ENV, "").strip() or None
        if verify_token:
            secrets.append(verify_token)
        options = MigrationOptions(
            waba_id=waba_id.strip(),
            phone=number,
            code_method=code_method.upper(),
            language=language,
            pin=pin,
            code=code,
            new_code=new_code,
            callback_url=callback_url,
            verify_token=verify_token,
            assume_yes=yes,
        )
        options.validate()
    except (PhoneError, _UsageError) as exc:
        _refuse(err, escape(str(exc)))
    except MigrationStopped as stop:
        _refuse(err, escape(_redact(stop.title, *secrets)), stop.exit_code)

    state_file = StateFile(state_path)
    if dry_run:
        _dry_run(out, options, state_file, graph_url, graph_version, secrets)
        raise typer.Exit(ExitCode.OK)

    ui = RichUI(out, is_interactive, secrets)

    def on_retry(request: GraphRequest, failure: Exception, attempt: int, delay: float) -> None:
        ui.check(Mark.WARN, f"{request.method} {request.path}: {failure}; retry {attempt} in {delay:.1f} s")

    args = {
        "waba_id": waba_id,
        "phone": phone,
        "graph_url": graph_url,
        "graph_version": graph_version,
        "token_env": token_env,
        "state": state_path,
        "pin_file": pin_file,
    }
    out.print(
        f"[bold]Migrating {number.e164} into WABA {escape(options.waba_id)}[/bold] (state: {state_path})"
    )
    with GraphClient(token, graph_url=graph_url, version=graph_version, on_retry=on_retry) as client:
        try:
            migration = Migration(client, options, state_file, ui)
            final = migration.run()
        except MigrationStopped as stop:
            _report_stop(err, stop, state_path, args, secrets)
            raise typer.Exit(stop.exit_code) from None
        except KeyboardInterrupt:
            err.print(
                f"\n[yellow]Interrupted.[/yellow] Progress is saved in {state_path}; run the same "
                "command again to continue."
            )
            raise typer.Exit(ExitCode.INTERRUPTED) from None
        except StateFileError as exc:
            _refuse(err, escape(str(exc)))
        except OSError as exc:
            _refuse(err, f"cannot write the state file {state_path}: {escape(str(exc))}")

    table = Table(title=f"{number.e164} on the Cloud API", show_header=False)
    for key in (
        "id",
        "display_phone_number",
        "verified_name",
        "status",
        "code_verification_status",
        "name_status",
        "platform_type",
        "quality_rating",
    ):
        table.add_row(key, escape(str(getattr(final, key) or "")))
    if final.webhook_configuration:
        table.add_row("webhook_configuration", escape(json.dumps(dict(final.webhook_configuration))))
    out.print(table)
    out.print(
        "[green]Done.[/green] Approved high-quality templates are copied by Meta (quality starts "
        "UNKNOWN); check them before deleting anything at the old provider."
    )


def _report_stop(
    err: Console, stop: MigrationStopped, state_path: Path, args: dict[str, Any], secrets: list[str]
) -> None:
    def clean(text: str) -> str:
        return escape(_redact(text, *secrets))

    if stop.exit_code is ExitCode.NEEDS_CODE:
        err.print(f"\n[yellow]…[/yellow] {clean(stop.title)}")
        err.print(f"  When it arrives, run:\n    {clean(_continue_command(args))}")
        err.print(f"  Progress is saved in {state_path}.")
        return
    err.print(f"\n[red]✗ {clean(stop.title)}[/red]")
    if isinstance(stop.error, GraphError):
        err.print(f"  Meta said: {clean(stop.error.text)}")
        err.print(f"  ({clean(stop.error.reference)})")
    elif isinstance(stop.error, TransportError):
        err.print(f"  {clean(str(stop.error))}")
    if stop.advice:
        err.print(f"  Next: {clean(stop.advice)}")
    err.print(f"  Progress is saved in {state_path}; exit status {int(stop.exit_code)}.")


def _dry_run(
    out: Console,
    options: MigrationOptions,
    state_file: StateFile,
    graph_url: str,
    version: str,
    secrets: list[str],
) -> None:
    from mogateway.waba import StateFileError, plan

    pid = None
    if state_file.exists():
        try:
            pid = state_file.load().phone_number_id
        except StateFileError:
            pid = None
    token = secrets[0] if secrets and secrets[0] else "***"
    out.print("Dry run: nothing is sent. The calls, in order (secrets shown as *** or <PLACEHOLDER>):")
    base = graph_url.rstrip("/") + "/" + version
    for index, (request, when) in enumerate(plan(options, pid, token), start=1):
        lines = _request_lines(request, f"{base}/{request.path}", [token, *secrets])
        out.print(f"\n{index:2}. {escape(lines[0])}", soft_wrap=True)
        for line in lines[1:]:
            out.print(f"    {escape(line)}", soft_wrap=True)
        out.print(f"    [dim]({escape(when)})[/dim]")


@waba_app.command("fake-graph")
def fake_graph(
    port: Annotated[int, typer.Option("--port", help="TCP port on 127.0.0.1.")] = 8765,
    fixtures: Annotated[
        Path | None, typer.Option("--fixtures", help="JSON fixtures (default: built-in rehearsal world).")
    ] = None,
    tls_cert: Annotated[
        Path | None, typer.Option("--tls-cert", help="Serve HTTPS with this PEM certificate.")
    ] = None,
    tls_key: Annotated[Path | None, typer.Option("--tls-key", help="The certificate's PEM key.")] = None,
) -> None:
    """Run a fake Graph API on 127.0.0.1 to rehearse a migration before touching a real number."""
    import ssl

    from mogateway.testing.fake_graph import default_fixtures, load_fixtures, serve_forever
    from mogateway.testing.fake_graph.fixtures import DEST_WABA, TOKEN

    out = Console(highlight=False, soft_wrap=True)
    try:
        world = load_fixtures(fixtures) if fixtures else default_fixtures()
    except (OSError, ValueError) as exc:
        _refuse(out, f"cannot load fixtures: {escape(str(exc))}")

    context: ssl.SSLContext | None = None
    if (tls_cert is None) != (tls_key is None):
        _refuse(out, "--tls-cert and --tls-key go together")
    if tls_cert is not None and tls_key is not None:
        try:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(tls_cert, tls_key)
        except (OSError, ssl.SSLError) as exc:
            _refuse(out, f"cannot load the certificate: {escape(str(exc))}")

    def ready(url: str) -> None:
        out.print(f"Fake Graph API on [bold]{url}[/bold] (Ctrl-C to stop)")
        if fixtures is None:
            out.print(f"  token: {TOKEN}   destination WABA: {DEST_WABA}")
            out.print(
                "  numbers: +91 98765 43210 (clean), …211 (two-step on, PIN 246810), "
                "…212 (name pending), …213 (SMS undeliverable: use VOICE)"
            )
            out.print(
                f"  try:  WABA_TOKEN={TOKEN} mogateway waba migrate --graph-url {url} "
                f"--waba-id {DEST_WABA} --phone '+91 98765 43210' --state rehearsal.json"
            )
        out.print(f"  codes: curl {url}/__fake/outbox   state: curl {url}/__fake/state")

    try:
        serve_forever(world, "127.0.0.1", port, ready, context)
    except OSError as exc:
        _refuse(out, f"cannot listen on 127.0.0.1:{port}: {escape(str(exc))}")


def register(app: typer.Typer) -> None:
    """Add the ``waba`` group to ``app``."""
    app.add_typer(waba_app, name="waba")
