"""CLI: ``mogateway smsc-sim`` — run the SMSC simulator and watch (or drive) the SMPP loop."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.console import Console

from mogateway.cli.exit_codes import Exit

if TYPE_CHECKING:  # the simulator (the SMPP stack) is imported when the command runs
    from mogateway.testing.smsc import SimulatedSmsc

console = Console(stderr=True, highlight=False)

_HELP_LINE = "type: <msisdn> <shortcode> <text...>   (or 'quit')"


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    app.command("smsc-sim")(smsc_sim)


def smsc_sim(
    port: Annotated[int, typer.Option(help="TCP port to listen on (127.0.0.1)")] = 2775,
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    system_id: Annotated[str | None, typer.Option(help="accept only this system_id")] = None,
    password: Annotated[str | None, typer.Option(help="accept only this password")] = None,
    mo: Annotated[
        list[str] | None,
        typer.Option(help="inject an MO once an ESME binds: 'msisdn,shortcode,text' (repeatable)"),
    ] = None,
    split: Annotated[str, typer.Option(help="how long MOs are split: udh | sar | payload")] = "udh",
    receipt: Annotated[str, typer.Option(help="stat of delivery receipts: DELIVRD, UNDELIV, EXPIRED...")] = (
        "DELIVRD"
    ),
    receipt_err: Annotated[
        str | None, typer.Option(help="err: of delivery receipts, e.g. 630 for an operator's DLT refusal")
    ] = None,
    interactive: Annotated[bool, typer.Option(help="read MOs to inject from standard input")] = True,
) -> None:
    """Run an SMSC simulator: accepts binds, prints submit_sm, sends receipts, injects MOs you type."""
    import asyncio

    if split not in ("udh", "sar", "payload"):
        console.print(f"[red]error:[/] --split must be udh, sar or payload, not {split!r}")
        raise typer.Exit(Exit.USAGE)
    parsed: list[tuple[str, str, str]] = []
    for item in mo or []:
        parts = item.split(",", 2)
        if len(parts) != 3 or not parts[2]:
            console.print(f"[red]error:[/] --mo {item!r}: expected 'msisdn,shortcode,text'")
            raise typer.Exit(Exit.USAGE)
        parsed.append((parts[0], parts[1], parts[2]))
    try:
        asyncio.run(
            _run(host, port, system_id, password, parsed, split, receipt.upper(), receipt_err, interactive)  # type: ignore[arg-type]
        )
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        console.print(f"[red]error:[/] cannot listen on {host}:{port}: {exc.strerror or exc}")
        raise typer.Exit(Exit.FAILED) from None


async def _run(
    host: str,
    port: int,
    system_id: str | None,
    password: str | None,
    mos: list[tuple[str, str, str]],
    split: Literal["udh", "sar", "payload"],
    receipt: str,
    receipt_err: str | None,
    interactive: bool,
) -> None:
    import asyncio

    from mogateway.testing.smsc import SimulatedSmsc

    smsc = SimulatedSmsc(
        host,
        port,
        system_id=system_id,
        password=password,
        receipt_stat=receipt,
        receipt_err=receipt_err,
        on_event=lambda text: console.print(f"[dim]smsc[/] {text}"),
    )
    await smsc.start()
    console.print(f"SMSC simulator listening on {host}:{smsc.port}")
    try:
        if mos:
            console.print("waiting for an ESME to bind as receiver or transceiver…")
            await smsc.wait_bound(timeout=3600)
            await asyncio.sleep(0.2)
            for msisdn, shortcode, text in mos:
                await _inject(smsc, msisdn, shortcode, text, split)
        if interactive and sys.stdin.isatty():
            console.print(_HELP_LINE)
            loop = asyncio.get_running_loop()
            while True:
                line = await loop.run_in_executor(None, sys.stdin.readline)
                if not line or line.strip() in ("quit", "exit"):
                    break
                fields = line.strip().split(" ", 2)
                if len(fields) != 3:
                    console.print(_HELP_LINE)
                    continue
                await _inject(smsc, fields[0], fields[1], fields[2], split)
        else:
            await asyncio.Event().wait()  # serve until interrupted
    finally:
        await smsc.stop()


async def _inject(smsc: SimulatedSmsc, msisdn: str, shortcode: str, text: str, split: str) -> None:
    try:
        statuses = await smsc.inject_mo(msisdn, shortcode, text, split=split)  # type: ignore[arg-type]
    except (RuntimeError, TimeoutError, ConnectionError, ValueError) as exc:
        console.print(f"[red]could not inject:[/] {exc}")
        return
    console.print(f"injected MO {msisdn} -> {shortcode} ({len(statuses)} part(s)), answers {statuses}")
