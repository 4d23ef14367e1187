"""``mogateway simulate --dlt-templates``: which DLT template a real application's answer would match."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from test_client_simulate import TOKEN, run

from mogateway.client import CallbackApp, InboundMessage
from mogateway.testing.callback_apps import serve_asgi

PE = "1201159178420181234"
T_BAL = "1107161234567890001"
T_OTP = "1107161234567890002"

EXPORT = f"""Template Id,Template Content,Status,Entity Id
{T_BAL},Your balance is Rs {{#numeric#}}.,Approved,{PE}
{T_OTP},"Your OTP is {{#numeric#}}.
Valid 10 minutes.",Approved,{PE}
1107161234567890003,Old {{#var#}},Rejected,{PE}
"""


def bank(message: InboundMessage) -> str:
    if message.message == "BAL":
        return "Your balance is Rs 4520."
    if message.message == "OTP":
        return "Your OTP is 123456.\\nValid 10 minutes."  # \\n: the gateway makes it a line break
    return "Balance: Rs 4,520"


@pytest.fixture
def export(tmp_path: Path) -> Path:
    path = tmp_path / "templates.csv"
    path.write_text(EXPORT, encoding="utf-8")
    return path


def test_the_matching_template_and_the_ids_the_reply_would_carry(export: Path) -> None:
    with serve_asgi(CallbackApp(bank, TOKEN)) as url:
        code, output = run(url, "--token", TOKEN, "--dlt-templates", str(export), "--pe-id", PE, "BAL")
        otp_code, otp = run(url, "--token", TOKEN, "--dlt-templates", str(export), "--pe-id", PE, "OTP")
    assert code == 0, output
    assert f"DLT (2 templates from {export}, 1 row refused): matches template {T_BAL}" in output
    assert f"sent with PE id {PE} and template id {T_BAL}" in output
    assert otp_code == 0 and f"matches template {T_OTP}" in otp  # after the newline unescaping


def test_no_match_says_why_and_exits_9_when_enforced(export: Path) -> None:
    with serve_asgi(CallbackApp(bank, TOKEN)) as url:
        lenient, output = run(url, "--token", TOKEN, "--dlt-templates", str(export), "--pe-id", PE, "HI")
        args = ["--dlt-templates", str(export), "--pe-id", PE, "--dlt-enforce", "--json", "HI"]
        strict, doc_text = run(url, "--token", TOKEN, *args)
    assert lenient == 0
    assert "no template matches" in output and "without the client's DLT ids" in output
    assert f"{T_BAL}: the reply differs from the template at character" in output
    doc: dict[str, Any] = orjson.loads(doc_text)
    assert strict == 9 and doc["exit_code"] == 9
    assert doc["outcome"] == "reply" and doc["dlt"]["verdict"] == "blocked"
    assert doc["dlt"]["closest"][0]["template_id"] == T_BAL


def test_repeated_callbacks_count_the_templates_matched(export: Path) -> None:
    with serve_asgi(CallbackApp(bank, TOKEN)) as url:
        code, output = run(url, "--token", TOKEN, "--dlt-templates", str(export), "--repeat", "3", "BAL")
    assert code == 0
    assert f"DLT templates matched: {T_BAL} 3" in output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pe-id", PE], "needs --dlt-templates"),
        (["--dlt-templates", "{export}", "--pe-id", "123"], "19 digits"),
        (["--dlt-templates", "{export}", "--dlt-enforce"], "needs --pe-id"),
        (["--dlt-templates", "{missing}"], "cannot read"),
        (["--dlt-templates", "{latin1}"], "CSV UTF-8"),
    ],
)
def test_dlt_usage_errors_exit_2_with_one_message(
    export: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    latin1 = tmp_path / "latin1.csv"
    latin1.write_bytes("Template Id,Template Content\n1,café\n".encode("cp1252"))
    paths = {"{export}": str(export), "{missing}": str(tmp_path / "nope.csv"), "{latin1}": str(latin1)}
    code, output = run("http://127.0.0.1:9/", "--token", TOKEN, *[paths.get(a, a) for a in args], "HI")
    assert code == 2, output
    assert message in output and "Traceback" not in output
