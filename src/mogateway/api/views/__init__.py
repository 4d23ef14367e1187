"""How the web layer shows things, shared by the API (``api``), the console and the client portal
(``api.portal``): a package of its own inside ``api`` that imports nothing else of it, so that the
portal can use it without importing ``api`` (which mounts the portal) back."""
