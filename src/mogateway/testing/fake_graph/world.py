"""The fake Graph API's world: fixtures, per-number migration records, clock, outbox, counters (the
records, the clock and Graph's limits are in ``model``).

Plain synchronous logic (no HTTP here): each Graph endpoint is a method taking the caller's token
record and the merged parameters, returning a JSON body or raising :class:`FakeGraphError`.
Validation follows the order of the reference's §9.4; the first failure wins.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

from mogateway.testing.fake_graph.callback_check import callback_uri_ok
from mogateway.testing.fake_graph.errors import FakeGraphError, invalid_parameter, migration_error, not_found
from mogateway.testing.fake_graph.fixtures import normalize
from mogateway.testing.fake_graph.model import (
    CODE_RE,
    LANGUAGE_RE,
    REGIONS,
    REGISTER_LIMIT,
    REGISTER_WINDOW_S,
    Clock,
    Migration,
    truthy,
)


class World:
    """Everything the fake knows; one instance per server, reset from fixtures."""

    def __init__(self, fixtures: dict[str, Any]) -> None:
        self.clock = Clock()
        self.reset(fixtures)

    def reset(self, fixtures: dict[str, Any]) -> None:
        """Start over from ``fixtures`` (the clock offset is kept)."""
        data = normalize(fixtures)
        self.fixtures = data
        self.apps: dict[str, Any] = data["apps"]
        self.tokens: dict[str, Any] = data["tokens"]
        self.wabas: dict[str, Any] = data["wabas"]
        self.numbers: dict[str, Any] = data["numbers"]
        self.knobs: dict[str, Any] = data["knobs"]
        now = self.clock.now()
        for token in self.tokens.values():
            if "expires_in_s" in token:
                token["expires_at"] = int(now + float(token.pop("expires_in_s")))
            token.setdefault("expires_at", 0)
            token.setdefault("valid", True)
        self.migrations: dict[str, Migration] = {}
        self.register_attempts: dict[str, list[float]] = {}
        self.pin_guesses: dict[str, int] = {}
        self.last_register: dict[str, float] = {}
        self.outbox: list[dict[str, Any]] = []
        self._next_id = 800000000000001

    def new_id(self) -> str:
        """A new numeric object id."""
        self._next_id += 1
        return str(self._next_id)

    # -- auth --------------------------------------------------------------------------------------

    def authenticate(self, token: str | None) -> dict[str, Any]:
        """The token's record, or the error Graph gives for a missing, unknown or expired token."""
        if not token:
            raise FakeGraphError(104, "An access token is required to request this resource.")
        record = self.tokens.get(token)
        if record is None or not record.get("valid", True):
            raise FakeGraphError(
                190,
                "Invalid OAuth access token - Cannot parse access token",
                subcode=None if record is None else 467,
            )
        if self._expired(record):
            raise FakeGraphError(190, "Error validating access token: Session has expired", subcode=463)
        result: dict[str, Any] = record
        return result

    def _expired(self, record: dict[str, Any]) -> bool:
        expires = int(record.get("expires_at") or 0)
        return bool(expires) and self.clock.now() >= expires

    def _waba_for(self, token: dict[str, Any], waba_id: str, method: str = "get") -> dict[str, Any]:
        waba = self.wabas.get(waba_id)
        if waba is None or waba_id not in token.get("waba_ids", []):
            raise not_found(waba_id, method)
        if "whatsapp_business_management" not in token.get("scopes", []):
            raise FakeGraphError(
                200, "Requires whatsapp_business_management permission to manage the object", subcode=1349174
            )
        result: dict[str, Any] = waba
        return result

    # -- views -------------------------------------------------------------------------------------

    @staticmethod
    def display(number: dict[str, Any]) -> str:
        """ "+91 98765 43210"-style display of a number."""
        national = number["national"]
        half = len(national) // 2
        return f"+{number['cc']} {national[:half]} {national[half:]}"

    def number_view(self, number: dict[str, Any], record: Migration | None) -> dict[str, Any]:
        """A phone number object as Graph returns it."""
        view: dict[str, Any] = {
            "id": record.pid if record else number["phone_id"],
            "display_phone_number": self.display(number),
            "verified_name": number["verified_name"],
            "name_status": number["name_status"],
            "quality_rating": "GREEN",
            "webhook_configuration": self._webhook_view(
                record.dest_waba if record else number["home_waba"], number
            ),
        }
        if record is None or record.state == "REGISTERED":
            view.update(
                status=number["status"],
                platform_type=number["platform_type"],
                code_verification_status="VERIFIED",
            )
        else:
            view.update(
                status="PENDING",
                platform_type="NOT_APPLICABLE",
                code_verification_status="VERIFIED" if record.state == "VERIFIED" else "NOT_VERIFIED",
            )
        return view

    def _webhook_view(self, waba_id: str, number: dict[str, Any]) -> dict[str, Any]:
        hook: dict[str, Any] = {"application": "https://example.com/app-default-webhook"}
        waba = self.wabas.get(waba_id, {})
        for sub in waba.get("subscribed_apps", []):
            if sub.get("override_callback_uri"):
                hook["whatsapp_business_account"] = sub["override_callback_uri"]
        if number.get("override_callback_uri"):
            hook["phone_number"] = number["override_callback_uri"]
        return hook

    def _resolve_pid(self, pid: str) -> tuple[dict[str, Any], Migration | None, str]:
        """(number, migration record or None, WABA the id lives in) for a phone number id."""
        record = self.migrations.get(pid)
        if record is not None:
            return self.numbers[record.e164], record, record.dest_waba
        for number in self.numbers.values():
            if number["phone_id"] == pid:
                return number, None, number["home_waba"]
        raise not_found(pid, "post")

    def _pid_for(
        self, token: dict[str, Any], pid: str, method: str
    ) -> tuple[dict[str, Any], Migration | None]:
        try:
            number, record, waba_id = self._resolve_pid(pid)
        except FakeGraphError:
            raise not_found(pid, method) from None
        if waba_id not in token.get("waba_ids", []):
            raise not_found(pid, method)
        return number, record

    # -- read endpoints ----------------------------------------------------------------------------

    def debug_token(self, params: dict[str, Any]) -> dict[str, Any]:
        """``GET /debug_token?input_token=``."""
        input_token = str(params.get("input_token") or "")
        if not input_token:
            raise invalid_parameter("input_token is required")
        record = self.tokens.get(input_token)
        if record is None:
            return {
                "data": {"is_valid": False, "error": {"code": 190, "message": "Invalid OAuth access token"}}
            }
        app = self.apps.get(record["app_id"], {})
        return {
            "data": {
                "app_id": record["app_id"],
                "type": record.get("type", "SYSTEM_USER"),
                "application": app.get("name", ""),
                "is_valid": bool(record.get("valid", True)) and not self._expired(record),
                "expires_at": int(record.get("expires_at") or 0),
                "scopes": list(record.get("scopes", [])),
                "granular_scopes": [
                    {"scope": scope, "target_ids": list(record.get("waba_ids", []))}
                    for scope in record.get("scopes", [])
                ],
            }
        }

    def get_object(self, token: dict[str, Any], object_id: str, params: dict[str, Any]) -> dict[str, Any]:
        """``GET /<id>``: a WABA or a phone number."""
        if object_id in self.wabas:
            waba = self._waba_for(token, object_id)
            return {
                "id": object_id,
                "name": waba["name"],
                "account_review_status": waba["review_status"],
                "business_verification_status": "verified" if waba["business_verified"] else "not_verified",
            }
        number, record = self._pid_for(token, object_id, "get")
        return _fields(self.number_view(number, record), params)

    def list_numbers(self, token: dict[str, Any], waba_id: str, params: dict[str, Any]) -> dict[str, Any]:
        """``GET /<WABA>/phone_numbers`` (one page with the ``limit``; cursors are indexes)."""
        self._waba_for(token, waba_id)
        views = []
        shown: set[str] = set()
        for record in self.migrations.values():
            if record.dest_waba == waba_id:
                views.append(self.number_view(self.numbers[record.e164], record))
                shown.add(record.e164)
        for e164, number in self.numbers.items():
            if number["home_waba"] == waba_id and e164 not in shown:
                views.append(self.number_view(number, None))
        limit = max(1, min(int(params.get("limit") or 25), 100))
        start = int(params.get("after") or 0)
        page = [_fields(v, params) for v in views[start : start + limit]]
        paging: dict[str, Any] = {"cursors": {"before": str(start), "after": str(start + len(page))}}
        if start + limit < len(views):
            paging["next"] = f"/{waba_id}/phone_numbers?after={start + limit}"
        return {"data": page, "paging": paging}

    def list_subscribed_apps(self, token: dict[str, Any], waba_id: str) -> dict[str, Any]:
        """``GET /<WABA>/subscribed_apps``."""
        waba = self._waba_for(token, waba_id)
        data = []
        for sub in waba["subscribed_apps"]:
            app = self.apps.get(sub["app_id"], {})
            item: dict[str, Any] = {
                "whatsapp_business_api_data": {
                    "id": sub["app_id"],
                    "link": app.get("link", ""),
                    "name": app.get("name", ""),
                }
            }
            if sub.get("override_callback_uri"):
                item["override_callback_uri"] = sub["override_callback_uri"]
            data.append(item)
        return {"data": data}

    def list_templates(self, token: dict[str, Any], waba_id: str) -> dict[str, Any]:
        """``GET /<WABA>/message_templates``."""
        waba = self._waba_for(token, waba_id)
        return {
            "data": [
                {
                    "id": t["id"],
                    "name": t["name"],
                    "language": t["language"],
                    "status": t["status"],
                    "category": t["category"],
                    "quality_score": {"score": t.get("quality", "UNKNOWN")},
                }
                for t in waba["templates"]
            ]
        }

    # -- subscriptions -----------------------------------------------------------------------------

    def subscribe(
        self, token: dict[str, Any], waba_id: str, params: dict[str, Any], *, check_only: bool = False
    ) -> dict[str, Any]:
        """``POST /<WABA>/subscribed_apps``: subscribe, or override the callback URL (``check_only``: raise
        what an override would raise, change nothing; the server then runs the URL's handshake)."""
        waba = self._waba_for(token, waba_id, "post")
        app_id = token["app_id"]
        current = next((s for s in waba["subscribed_apps"] if s["app_id"] == app_id), None)
        uri = params.get("override_callback_uri")
        if uri is None:
            if check_only:
                return {"success": True}
            if current is None:
                waba["subscribed_apps"].append({"app_id": app_id})
            else:
                current.pop("override_callback_uri", None)
            return {"success": True}
        uri = str(uri)
        if not params.get("verify_token"):
            raise invalid_parameter("verify_token is required with override_callback_uri")
        if not callback_uri_ok(uri):
            raise invalid_parameter("override_callback_uri must be an https URL of at most 200 characters")
        if current is None:
            raise FakeGraphError(
                100,
                "Before override the current callback uri, your app must be subscribed "
                "to receive messages for WhatsApp Business Account",
            )
        if not check_only:
            current["override_callback_uri"] = uri
        return {"success": True}

    def unsubscribe(self, token: dict[str, Any], waba_id: str) -> dict[str, Any]:
        """``DELETE /<WABA>/subscribed_apps``."""
        waba = self._waba_for(token, waba_id, "delete")
        waba["subscribed_apps"] = [s for s in waba["subscribed_apps"] if s["app_id"] != token["app_id"]]
        return {"success": True}

    # -- migration ---------------------------------------------------------------------------------

    def request_migration(
        self, token: dict[str, Any], waba_id: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        """``POST /<WABA>/phone_numbers`` with ``migrate_phone_number=true``."""
        dest = self._waba_for(token, waba_id, "post")
        cc, phone = str(params.get("cc") or ""), str(params.get("phone_number") or "")
        if not re.fullmatch(r"\d{1,3}", cc):
            raise invalid_parameter("cc must be the numeric country code")
        if not phone.isdigit():
            raise invalid_parameter("phone_number must contain digits only, without the country code")
        if not truthy(params.get("migrate_phone_number")):
            if not params.get("verified_name"):
                raise invalid_parameter("verified_name is required to add a new phone number")
            raise FakeGraphError(200000, "Cannot add phone number to WhatsApp Business Account")
        e164 = cc + phone
        if (
            e164 not in self.numbers
            and self.knobs["phone_number_format"] == "lenient"
            and phone.startswith(cc)
        ):
            e164 = phone
        number = self.numbers.get(e164)
        if number is None:
            raise migration_error(
                "Please add this phone number in your WhatsApp account",
                "This phone number is not registered; add it directly, no migration needed.",
            )
        if number["home_waba"] == waba_id or any(
            r.e164 == e164 and r.dest_waba == waba_id for r in self.migrations.values()
        ):
            raise FakeGraphError(
                100,
                "Invalid parameter",
                subcode=2388012,
                user_title="Phone number already exists",
                user_msg="This phone number already exists in your list of phone numbers.",
            )
        if dest["review_status"] != "APPROVED" or not dest["business_verified"]:
            raise migration_error("Your WhatsApp account must be approved")
        if not dest["messaging_for_approved"]:
            raise migration_error("Your 'Messaging For' request must be approved")
        if not dest["payment_method"]:
            raise migration_error("Your WhatsApp account does not have a payment account")
        if number["business_id"] != dest["business_id"]:
            raise migration_error("This phone number belongs to a different Business Manager account")
        if number["name_status"] != "APPROVED" or number["pending_name_change"]:
            raise migration_error("Registered name should be present and approved")
        if number["platform_type"] == "CLOUD_API" and not dest["subscribed_apps"]:
            raise migration_error(
                "Cannot migrate phone number",
                details="Webhooks have not been set up for the destination WABA",
            )
        if number["is_test_number"] or number["in_use_business_app"]:
            raise migration_error("There was an error migrating this phone number")
        if self.knobs["twofa_check_at"] == "initiate" and number["two_step_enabled"]:
            raise migration_error("Two-step authentication must be disabled for this phone number")
        pid = self.new_id()
        self.migrations[pid] = Migration(pid=pid, e164=e164, dest_waba=waba_id)
        return {"id": pid}

    def _migration(self, token: dict[str, Any], pid: str, not_migrating_subcode: int) -> Migration:
        _number, record = self._pid_for(token, pid, "post")
        if record is None:
            verb = "receive" if not_migrating_subcode == 2388091 else "verify"
            raise FakeGraphError(
                100,
                "Invalid parameter",
                subcode=not_migrating_subcode,
                user_title="Phone number not being migrated",
                user_msg=f"This phone number isn't eligible to {verb} a registration code "
                "since it is not being migrated.",
            )
        return record

    def request_code(self, token: dict[str, Any], pid: str, params: dict[str, Any]) -> dict[str, Any]:
        """``POST /<PHONE_NUMBER_ID>/request_code``."""
        self._pid_for(token, pid, "post")
        method = str(params.get("code_method") or "")
        if method not in ("SMS", "VOICE"):
            raise invalid_parameter("code_method must be SMS or VOICE")
        language = str(params.get("language") or "")
        if not LANGUAGE_RE.match(language):
            raise invalid_parameter("language must be a locale such as en_US")
        record = self._migration(token, pid, 2388091)
        if record.state in ("VERIFIED", "REGISTERED"):
            raise FakeGraphError(136024, "Request code error", details="Phone number is already verified.")
        now = self.clock.now()
        window = float(self.knobs["request_code_window_s"])
        record.code_requests = [t for t in record.code_requests if now - t < window]
        if len(record.code_requests) >= int(self.knobs["request_code_max"]):
            raise FakeGraphError(
                136024,
                "Request code error",
                details="Too many requests for a registration code; try again later.",
            )
        record.code_requests.append(now)
        number = self.numbers[record.e164]
        queued = number.get("codes") or []
        record.code = str(queued.pop(0)) if queued else f"{secrets.randbelow(10**6):06d}"
        record.code_expires = now + float(self.knobs["code_ttl_s"])
        record.attempts = 0
        record.state = "CODE_SENT"
        if number["sms_deliverable" if method == "SMS" else "voice_deliverable"]:
            self.outbox.append(
                {
                    "phone": "+" + record.e164,
                    "phone_number_id": pid,
                    "code": record.code,
                    "method": method,
                    "language": language,
                    "at": now,
                }
            )
        return {"success": True}

    def verify_code(self, token: dict[str, Any], pid: str, params: dict[str, Any]) -> dict[str, Any]:
        """``POST /<PHONE_NUMBER_ID>/verify_code``."""
        self._pid_for(token, pid, "post")
        code = str(params.get("code") or "")
        if not CODE_RE.match(code):
            raise invalid_parameter("code must be the 6-digit registration code")
        record = self._migration(token, pid, 2388093)
        if record.code is None or record.state != "CODE_SENT":
            raise FakeGraphError(136025, "Verify code error", details="No registration code was requested.")
        if self.clock.now() >= record.code_expires:
            record.code = None
            raise FakeGraphError(136025, "Verify code error", details="The code expired; request a new one.")
        if not secrets.compare_digest(code, record.code):
            record.attempts += 1
            if record.attempts >= int(self.knobs["max_verify_attempts"]):
                record.code = None
                raise FakeGraphError(
                    136025, "Verify code error", details="Too many wrong codes; request a new code."
                )
            raise FakeGraphError(136025, "Verify code error", details="The code is wrong.")
        record.code = None
        record.state = "VERIFIED"
        return {"success": True}

    def register(self, token: dict[str, Any], pid: str, params: dict[str, Any]) -> dict[str, Any]:
        """``POST /<PHONE_NUMBER_ID>/register``."""
        number, record = self._pid_for(token, pid, "post")
        if params.get("messaging_product") != "whatsapp":
            raise invalid_parameter("messaging_product must be whatsapp")
        pin = str(params.get("pin") or "")
        if not CODE_RE.match(pin):
            raise invalid_parameter("pin must be 6 digits")
        region = params.get("data_localization_region")
        if region is not None and region not in REGIONS:
            raise FakeGraphError(131009, "Parameter value is not valid", details="data_localization_region")
        e164 = record.e164 if record else number["cc"] + number["national"]
        self._count_register(e164)
        now = self.clock.now()
        if number.get("deleted_until") and float(number["deleted_until"]) > now:
            raise FakeGraphError(
                133015,
                "Please wait a few minutes before attempting to register this number",
                details="The phone number you are attempting to register was recently deleted.",
            )
        if record is not None and record.state not in ("VERIFIED", "REGISTERED"):
            raise FakeGraphError(
                133006,
                "Phone number needs to be verified before registering",
                details="Verify the phone number with request_code and verify_code first.",
            )
        gap = float(self.knobs["pin_min_interval_s"])
        last = self.last_register.get(e164)
        self.last_register[e164] = now
        if gap and last is not None and now - last < gap:
            raise FakeGraphError(
                133009,
                "Two step verification PIN was entered too quickly",
                details=f"Wait {gap:.0f} seconds before trying again.",
            )
        if number["two_step_enabled"] and not secrets.compare_digest(pin, str(number["two_step_pin"] or "")):
            self.pin_guesses[e164] = self.pin_guesses.get(e164, 0) + 1
            if self.pin_guesses[e164] > int(self.knobs["pin_max_guesses"]):
                raise FakeGraphError(
                    133008,
                    "Too many two step verification PIN guesses for this phone number",
                    details="Try again in 12 hours.",
                )
            raise FakeGraphError(
                133005,
                "Two step verification PIN Mismatch",
                details="The PIN does not match the two-step verification PIN of this number.",
            )
        if record is not None and record.state == "VERIFIED":
            self._complete_migration(number, record, pin)
        return {"success": True}

    def _count_register(self, e164: str) -> None:
        now = self.clock.now()
        attempts = [t for t in self.register_attempts.get(e164, []) if now - t < REGISTER_WINDOW_S]
        if len(attempts) >= REGISTER_LIMIT:
            self.register_attempts[e164] = attempts
            raise FakeGraphError(
                133016,
                "Account register deregister rate limit exceeded",
                details="Too many register/deregister requests in 72 hours.",
            )
        attempts.append(now)
        self.register_attempts[e164] = attempts

    def _complete_migration(self, number: dict[str, Any], record: Migration, pin: str) -> None:
        source = self.wabas.get(number["home_waba"])
        dest = self.wabas[record.dest_waba]
        record.state = "REGISTERED"
        number.update(
            home_waba=record.dest_waba,
            phone_id=record.pid,
            status="CONNECTED",
            platform_type="CLOUD_API",
            two_step_enabled=True,
            two_step_pin=pin,
        )
        if source is None:
            return
        names = {(t["name"], t["language"]) for t in dest["templates"]}
        for template in source["templates"]:
            if len(dest["templates"]) >= int(dest["template_limit"]):
                break
            good = template["status"] == "APPROVED" and template.get("quality") == "GREEN"
            if good and (template["name"], template["language"]) not in names:
                dest["templates"].append({**template, "id": self.new_id(), "quality": "UNKNOWN"})

    def deregister(self, token: dict[str, Any], pid: str) -> dict[str, Any]:
        """``POST /<PHONE_NUMBER_ID>/deregister`` (shares register's 10 per 72 h)."""
        number, record = self._pid_for(token, pid, "post")
        self._count_register(record.e164 if record else number["cc"] + number["national"])
        number["status"] = "DISCONNECTED"
        return {"success": True}

    def update_number(self, token: dict[str, Any], pid: str, params: dict[str, Any]) -> dict[str, Any]:
        """``POST /<PHONE_NUMBER_ID>``: phone-level webhook override or two-step PIN."""
        number, _record = self._pid_for(token, pid, "post")
        hook = params.get("webhook_configuration")
        if isinstance(hook, dict):
            uri = str(hook.get("override_callback_uri") or "")
            if uri and (not uri.startswith("https://") or len(uri) > 200 or not hook.get("verify_token")):
                raise invalid_parameter("override_callback_uri must be https (≤200) with a verify_token")
            number["override_callback_uri"] = uri or None
            return {"success": True}
        pin = params.get("pin")
        if pin is not None:
            if not CODE_RE.match(str(pin)):
                raise invalid_parameter("pin must be 6 digits")
            number.update(two_step_enabled=True, two_step_pin=str(pin))
            return {"success": True}
        raise invalid_parameter("nothing to update")

    def migrate_templates(
        self, token: dict[str, Any], waba_id: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        """``POST /<DEST_WABA>/migrate_message_templates?source_waba_id=``."""
        dest = self._waba_for(token, waba_id, "post")
        source = self.wabas.get(str(params.get("source_waba_id") or ""))
        if source is None:
            raise invalid_parameter("source_waba_id is not a WABA")
        migrated, failed = [], []
        for template in source["templates"]:
            if template["status"] != "APPROVED" or template.get("quality") != "GREEN":
                failed.append(
                    {"id": template["id"], "reason": "only APPROVED high-quality templates migrate"}
                )
            elif len(dest["templates"]) >= int(dest["template_limit"]):
                failed.append({"id": template["id"], "reason": "template limit reached"})
            else:
                copy = {**template, "id": self.new_id(), "quality": "UNKNOWN"}
                dest["templates"].append(copy)
                migrated.append(copy["id"])
        return {"migrated_templates": migrated, "failed_templates": failed}

    def snapshot(self) -> dict[str, Any]:
        """Everything, for ``GET /__fake/state``."""
        return {
            "now": self.clock.now(),
            "wabas": self.wabas,
            "numbers": self.numbers,
            "migrations": {pid: r.as_json() for pid, r in self.migrations.items()},
            "register_attempts": self.register_attempts,
            "knobs": self.knobs,
        }


def _fields(view: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    wanted = params.get("fields")
    if not wanted:
        return view
    keep = {f.strip() for f in str(wanted).split(",")} | {"id"}
    return {k: v for k, v in view.items() if k in keep}
