"""The WhatsApp Cloud API edge: the Graph API client that sends replies (webhooks arrive through the API)."""
