"""The settings' model and loader; ``mogateway.config`` (the package) is what the rest imports."""

from __future__ import annotations

import ipaddress
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

from mogateway.config.sealed import SealedValueError
from mogateway.config.secret_key import parse_key
from mogateway.config.smpp import SmppSettings
from mogateway.config.whatsapp import WhatsAppSettings
from mogateway.core.media_url import derive_key
from mogateway.core.whatsapp_media import META_MAX_BYTES

__all__ = ["ConfigError", "Settings", "load_settings", "media_url_keys"]


class ConfigError(Exception):
    """Settings that cannot be used; the message is one line naming the setting."""


class Settings(BaseSettings):
    """Everything an operator can set. Defaults run a laptop gateway on SQLite."""

    model_config = SettingsConfigDict(
        env_prefix="MOGATEWAY_", extra="forbid", env_nested_delimiter="__", validate_default=True
    )

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=1, le=65535)
    database: str = "mogateway.db"
    queue: str = "local"
    node_name: str = ""

    admin_token: SecretStr | None = None
    ingest_token: SecretStr | None = None
    tokens_file: Path | None = None
    allow_private_callbacks: bool = False
    metrics_public: bool = False
    # Proxies whose X-Forwarded-For/-Proto are believed (addresses or networks); none by default, so a
    # client cannot pick the address the console's sign-in throttle counts. Comma-separated in the env.
    trusted_proxies: Annotated[list[str], NoDecode] = Field(default_factory=list)

    workers: int = Field(0, ge=0, le=256)
    max_inflight: int = Field(1000, ge=1, le=100_000)
    default_client_concurrency: int = Field(64, ge=1, le=10_000)
    journal_sync: Literal["full", "stores", "normal"] = "stores"
    # The free-space guard (service.journal_health): intake refuses new MOs while the SQLite journal's
    # file system has less free than the smaller of the two. 0 turns it off.
    journal_min_free_bytes: int = Field(1 << 30, ge=0)
    journal_min_free_percent: float = Field(5.0, ge=0, le=50)

    reply_channel: Literal["log", "http"] = "log"
    reply_http_url: str | None = None
    reply_max_parts: int = Field(6, ge=1, le=255)
    reply_validity_s: float = Field(300.0, ge=1, le=86_400)
    reply_at_least_once: bool = False
    dlt_var_max_chars: int = Field(30, ge=1, le=2000)

    ported_csv: Path | None = None
    series_csv: Path | None = None

    max_body_bytes: int = Field(64 * 1024, ge=1024)
    max_batch_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    max_batch_items: int = Field(2000, ge=1)
    max_connections: int = Field(1000, ge=8, le=1_000_000)
    max_header_bytes: int = Field(16 * 1024, ge=1024, le=1024 * 1024)
    header_timeout_s: int = Field(10, ge=1, le=600)
    idle_timeout_s: int = Field(15, ge=1, le=3600)

    # Client secrets at rest (edges/storage/sealing.py) and signed callbacks (core/signing.py).
    secret_key: SecretStr | None = None
    old_secret_key: SecretStr | None = None
    signing_grace_s: float = Field(24 * 3600.0, ge=0, le=30 * 24 * 3600.0)

    console: bool = True
    console_session_minutes: int = Field(480, ge=5, le=7 * 24 * 60)
    # The client portal at /portal/ (api/portal, docs/portal.md): client applications' own people.
    portal: bool = True
    portal_session_minutes: int = Field(480, ge=5, le=7 * 24 * 60)
    portal_invite_hours: int = Field(72, ge=1, le=30 * 24)
    stats_flush_s: float = Field(2.0, ge=0.5, le=60)
    stats_retention_days: int = Field(8, ge=1, le=400)
    # Retention (service.retention): finished messages received more than this many days ago are
    # deleted (0 keeps everything); each day's are first written to retention_export_dir, when set.
    message_retention_days: int = Field(30, ge=0, le=36_500)
    retention_export_dir: Path | None = None

    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["text", "json"] = "text"

    smpp: SmppSettings = Field(default_factory=SmppSettings)
    nats: dict[str, Any] = Field(default_factory=dict)
    # The WhatsApp numbers served (config.whatsapp); None: no [whatsapp] table, no WhatsApp.
    whatsapp: WhatsAppSettings | None = None
    # WhatsApp media through the gateway (api.whatsapp_media, docs/whatsapp.md "Media"): the gateway's
    # external base URL (what clients reach it by, behind a TLS proxy); without it callbacks carry no
    # media url. A signed url lives whatsapp_media_url_ttl_s; a media above whatsapp_media_max_bytes
    # (Meta's largest, a 100 MB document, by default) is refused; each client fetches at most
    # whatsapp_media_client_concurrency media at once per process.
    public_url: str | None = None
    whatsapp_media_url_ttl_s: int = Field(3600, ge=60, le=7 * 86400)
    whatsapp_media_max_bytes: int = Field(META_MAX_BYTES, ge=1024, le=META_MAX_BYTES)
    whatsapp_media_client_concurrency: int = Field(4, ge=1, le=1000)
    # Off by default: a directory keeping each media message's bytes under the journal's retention
    # (edges.whatsapp.media_store), so media outlive Meta's 7 days.
    whatsapp_media_store: Path | None = None

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip().rstrip("/")
        if not value.startswith(("https://", "http://")) or "?" in value or "#" in value:
            raise ValueError("must be an http(s) base URL without a query, e.g. https://gw.example.com")
        if not value.partition("://")[2].split("/")[0]:
            raise ValueError("must name a host, e.g. https://gw.example.com")
        return value

    @field_validator("database")
    @classmethod
    def _database(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must be a SQLite path or a postgresql:// URL")
        if "://" in value and not value.startswith(("postgresql://", "postgres://", "sqlite://")):
            raise ValueError("must be a SQLite path or a postgresql:// URL")
        return value

    @field_validator("queue")
    @classmethod
    def _queue(cls, value: str) -> str:
        if value != "local" and not value.startswith(("nats://", "tls://")):
            raise ValueError("must be 'local' or a nats:// URL")
        return value

    @field_validator("reply_http_url")
    @classmethod
    def _reply_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL template")
        return value

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _proxies(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        for entry in value if isinstance(value, list) else []:
            try:
                ipaddress.ip_network(str(entry), strict=False)
            except ValueError:
                raise ValueError(f"{entry!r} is not an IP address or network (e.g. 10.0.0.0/8)") from None
        return value

    @field_validator("admin_token", "ingest_token")
    @classmethod
    def _token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError("must be at least 16 characters")
        return value

    @field_validator("secret_key", "old_secret_key")
    @classmethod
    def _key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            parse_key(value.get_secret_value())  # ValueError says the shape, never the value
        return value

    @model_validator(mode="after")
    def _open_sealed(self) -> Settings:
        # Sealed secrets (config.sealed) are opened here, once: whatever reads the settings sees the
        # secret. SealedValueError is not a ValueError: it leaves as itself (load_settings).
        if self.whatsapp is not None:
            keys = [parse_key(k.get_secret_value()) for k in (self.secret_key, self.old_secret_key) if k]
            self.whatsapp = self.whatsapp.opened(keys)
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _TomlSource(settings_cls))


def media_url_keys(settings: Settings) -> list[bytes]:
    """The keys of signed media URLs (``core.media_url``), the signing one first: derived from
    ``secret_key`` (then ``old_secret_key``, which still verifies during a rotation) or, without one,
    from the ``[whatsapp]`` app secret — secrets every node of a cluster shares. Empty without either."""
    secrets = [parse_key(k.get_secret_value()) for k in (settings.secret_key, settings.old_secret_key) if k]
    if not secrets and settings.whatsapp is not None:
        secrets = [settings.whatsapp.app_secret.get_secret_value().encode("utf-8")]
    return [derive_key(secret) for secret in secrets]


class _TomlSource(PydanticBaseSettingsSource):
    """Reads the file named by ``load_settings`` (a module-level slot: settings load once per process)."""

    path: Path | None = None

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        if _TomlSource.path is None:
            return {}
        with _TomlSource.path.open("rb") as fh:
            data = tomllib.load(fh)
        # Allow both a flat file and one with a [gateway] table for the top-level settings.
        gateway = data.pop("gateway", {})
        return {**gateway, **data}


def describe_error(exc: ValidationError, within: tuple[str, ...] = ()) -> str:
    """One line naming the first invalid setting, its environment variable, and why. ``within`` names
    the table the validated settings are (``("nats",)`` for the ``[nats]`` settings)."""
    first = exc.errors()[0]
    loc = [*within, *(str(p) for p in first.get("loc", ()))]
    name = ".".join(loc) or "settings"
    # Nested tables (SMPP binds) live in the TOML file only; flat settings also have a variable.
    env = "MOGATEWAY_" + "__".join(loc).upper() if len(loc) > len(within) and loc[0] != "smpp" else ""
    message = first.get("msg", "is invalid")
    if first.get("type") == "extra_forbidden":
        message = "is not a known setting"
    where = f"{name} ({env})" if env else f"{name} (config file)"
    given = first.get("input")
    secret = "token" in name or "key" in name or "secret" in name
    shown = "" if isinstance(given, dict | SecretStr) or secret else f" (got {given!r})"
    return f"invalid setting {where}: {message}{shown}"


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Settings from ``config_file`` + environment + ``overrides`` (None values are ignored)."""
    if config_file is not None and not config_file.is_file():
        raise ConfigError(f"config file {config_file} does not exist")
    _TomlSource.path = config_file
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        raise ConfigError(describe_error(exc)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {config_file} is not valid TOML: {exc}") from None
    except SealedValueError as exc:
        raise ConfigError(str(exc)) from None
    finally:
        _TomlSource.path = None
