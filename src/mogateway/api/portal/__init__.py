"""The client portal at ``/portal/``: each client application's own people see and manage their own
traffic, and nothing else (docs/portal.md).

Server-rendered pages like the console's (its stylesheet and script, nothing from another host), for
people invited per client (``core.portal_accounts``), in sessions of their own
(``api.portal.sessions``). Every handler reads and changes through one
:class:`~mogateway.service.client_scope.ClientScope` made from the session (``api.portal.web.Visit``).
Turn it off with the ``portal`` setting.
"""

from __future__ import annotations

from fastapi import FastAPI

from mogateway.api.portal import account, callback, credentials, pages, reports, signin
from mogateway.api.portal.web import PortalState
from mogateway.gateway_view import GatewayView

__all__ = ["install_portal"]


def install_portal(app: FastAPI, gateway: GatewayView) -> None:
    """Add the portal's routes to ``app`` unless the ``portal`` setting is off."""
    if not gateway.settings.portal:
        return
    app.state.portal = PortalState(gateway)
    for module in (signin, pages, callback, credentials, reports, account):
        app.include_router(module.router)
