"""What the gateway's two signed-in browser UIs, the console (``api.console``) and the client portal
(``api.portal``), share, written once: ``sessions`` — session ids, the session type and what both
session stores do, cookies, CSRF tokens, flashes and the sign-in throttle, for two scopes; ``render`` —
the Jinja2 environment, display filters and security headers, and ``templates/``, the markup both UIs
show (read as ``browser/...``). It imports neither UI, so both can import it."""
