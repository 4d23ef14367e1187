"""What the gateway's two signed-in browser UIs, the console (``api.console``) and the client portal
(``api.portal``), share: ``sessions`` — session ids, cookies, CSRF tokens, flashes and the sign-in
throttle, once, for two scopes. It imports neither UI, so both can import it."""
