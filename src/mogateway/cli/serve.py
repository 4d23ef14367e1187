"""``mogateway serve``: run the gateway (API, dispatcher, binds) until interrupted."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path
from typing import Any

import typer

from mogateway.cli.common import fail
from mogateway.config import ConfigError, Settings, load_settings
from mogateway.logs import setup_logging

__all__ = ["register"]


async def _run(settings: Settings) -> int:
    import uvicorn

    from mogateway.api.app import create_app
    from mogateway.service.app import Gateway

    try:
        gateway = Gateway(settings)
    except ConfigError as exc:
        fail(str(exc), 2)
    try:
        await gateway.start()
    except ConfigError as exc:
        await _quiet_stop(gateway)
        fail(str(exc), 2)
    except (OSError, sqlite3.Error, RuntimeError, ValueError, ImportError) as exc:
        await _quiet_stop(gateway)
        fail(f"cannot start: {exc}", 1)
    config = uvicorn.Config(
        create_app(gateway, manage_lifecycle=False),
        host=settings.host,
        port=settings.port,
        lifespan="off",
        access_log=False,
        log_config=None,
        server_header=False,
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    logging.getLogger("mogateway").info(
        "mogateway listening on http://%s:%d (journal %s, queue %s)",
        settings.host,
        settings.port,
        settings.database,
        settings.queue,
    )
    try:
        await server.serve()
    finally:
        await gateway.stop()
    return 0 if server.started else 1


async def _quiet_stop(gateway: Any) -> None:
    try:
        await gateway.stop()
    except Exception:
        pass


def register(app: typer.Typer) -> None:
    @app.command()
    def serve(
        config: Path | None = typer.Option(None, "--config", "-c", help="TOML settings file."),
        host: str | None = typer.Option(None, "--host", help="Address to listen on (default 127.0.0.1)."),
        port: int | None = typer.Option(None, "--port", help="Port to listen on (default 8080)."),
    ) -> None:
        """Run the gateway on its embedded default (SQLite journal, in-process queue) or as configured."""
        try:
            settings = load_settings(config, host=host, port=port)
        except ConfigError as exc:
            fail(str(exc), 2)
        setup_logging(settings.log_level, settings.log_format)
        try:
            import uvloop

            runner: Any = uvloop.run
        except ImportError:
            runner = asyncio.run
        code = runner(_run(settings))
        raise typer.Exit(code)
