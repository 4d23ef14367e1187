"""The operator console at ``/console/``: Overview, Clients, Messages and Binds, served by the gateway.

Server-rendered Jinja2 pages (``templates/``), a small script for live figures (Server-Sent Events) and
inline forms (``api/static/console/``), no front-end build and nothing loaded from another host. Turn it
off with the ``console`` setting. See docs/console.md.
"""

from __future__ import annotations

from fastapi import FastAPI

from mogateway.api.console import clients, messages, pages, people, signin
from mogateway.api.console.web import ConsoleState
from mogateway.gateway_view import GatewayView

__all__ = ["install_console"]


def install_console(app: FastAPI, gateway: GatewayView) -> None:
    """Add the console's routes to ``app`` unless the ``console`` setting is off."""
    if not gateway.settings.console:
        return
    app.state.console = ConsoleState(app, gateway)
    for module in (signin, pages, clients, messages, people):
        app.include_router(module.router)
