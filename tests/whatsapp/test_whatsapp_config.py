"""The [whatsapp] settings: the table, the secrets from the environment, and nothing without it."""

from __future__ import annotations

from pathlib import Path

import pytest

from mogateway.config import ConfigError, load_settings

TOML = """
[whatsapp]
app_secret = "app-secret-from-file"
verify_token = "verify-token-file"
graph_url = "http://127.0.0.1:9/"

[[whatsapp.numbers]]
phone_number_id = "106540352242922"
display_phone_number = "+91 98765 43210"
access_token = "token-from-file"
mark_read = true
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mogateway.toml"
    path.write_text(text)
    return path


def test_without_the_table_there_is_no_whatsapp(tmp_path: Path) -> None:
    assert load_settings(_write(tmp_path, "port = 8081\n")).whatsapp is None


def test_the_table_is_read_and_normalised(tmp_path: Path) -> None:
    wa = load_settings(_write(tmp_path, TOML)).whatsapp
    assert wa is not None
    assert wa.graph_url == "http://127.0.0.1:9"
    assert wa.api_version == "v21.0"
    (number,) = wa.numbers
    assert number.display_phone_number == "919876543210"
    assert number.access_token.get_secret_value() == "token-from-file"
    assert number.mark_read is True
    assert wa.number("106540352242922") is number
    assert wa.number("1") is None
    assert "token-from-file" not in repr(wa)


def test_secrets_come_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOGATEWAY_WHATSAPP__APP_SECRET", "app-secret-from-env")
    monkeypatch.setenv("MOGATEWAY_WHATSAPP_ACCESS_TOKEN_106540352242922", "token-from-env")
    wa = load_settings(_write(tmp_path, TOML)).whatsapp
    assert wa is not None
    assert wa.app_secret.get_secret_value() == "app-secret-from-env"
    assert wa.verify_token.get_secret_value() == "verify-token-file"
    assert wa.numbers[0].access_token.get_secret_value() == "token-from-env"


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (
            ('display_phone_number = "+91 98765 43210"', 'display_phone_number = "12345"'),
            "display_phone_number",
        ),
        (('phone_number_id = "106540352242922"', 'phone_number_id = "abc"'), "phone_number_id"),
        (('access_token = "token-from-file"', ""), "access_token"),
        (("graph_url = ", 'api_version = "21"\ngraph_url = '), "api_version"),
    ],
)
def test_bad_settings_are_named_without_their_secret(
    tmp_path: Path, change: tuple[str, str], named: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(_write(tmp_path, TOML.replace(*change)))
    assert named in str(info.value)
    assert "token-from-file" not in str(info.value)
    assert "app-secret-from-file" not in str(info.value)
