"""URLs as shown in logs and by ``mogateway doctor``: user-info passwords and every query value whose
key names a secret hidden, everything else exactly as written."""

from __future__ import annotations

import pytest

from mogateway.core.redaction import redact_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "https://sms.example.in/send?user=acme&password=Pw1&to={to}&text={text}",
            "https://sms.example.in/send?user=acme&password=***&to={to}&text={text}",
        ),
        (
            "postgresql://postgres:Pw2@127.0.0.1:5432/db?sslmode=require&password=Pw3",
            "postgresql://postgres:***@127.0.0.1:5432/db?sslmode=require&password=***",
        ),
        (
            "http://h/x?pass=a&pwd=b&passwd=c&secret=d&token=e&access_token=f&api_key=g&apikey=h"
            "&auth=i&signature=j&sig=k&client_secret=l&Api-Key=m&sslkey=n&from={from}",
            "http://h/x?pass=***&pwd=***&passwd=***&secret=***&token=***&access_token=***&api_key=***"
            "&apikey=***&auth=***&signature=***&sig=***&client_secret=***&Api-Key=***&sslkey=***&from={from}",
        ),
        ("http://h/x?pass%77ord=Pw4", "http://h/x?pass%77ord=***"),  # the key is read decoded
        ("http://user:p%40ss@[::1]:8080/cb", "http://user:***@[::1]:8080/cb"),
        ("nats://Tok5@127.0.0.1:4222", "nats://***@127.0.0.1:4222"),
        (
            "nats://a:Pw6@n1:4222,nats://a:Pw6@n2:4222",
            "nats://a:***@n1:4222,nats://a:***@n2:4222",
        ),
        ("postgresql://postgres@127.0.0.1/db", "postgresql://postgres@127.0.0.1/db"),  # nothing secret
        ("http://127.0.0.1:9/cb?shortcode=56767&flag", "http://127.0.0.1:9/cb?shortcode=56767&flag"),
        ("http://[::1:8080/x?token=Pw7", "***"),  # does not parse, might hold a secret: hidden whole
    ],
)
def test_secrets_in_urls_are_hidden_and_the_rest_is_kept(url: str, shown: str) -> None:
    assert redact_url(url) == shown
