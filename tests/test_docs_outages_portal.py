"""docs/outages.md and docs/portal.md name what exists: the metrics, log lines, probes and tests of the
outages page, and the portal's routes, settings, CLI commands and cookies, each checked against the
code or a real ``mogateway serve`` (with its default workers), so a rename shows up as a failing doc.

One gateway serves the whole module: the probes, /metrics, the portal's invite (through the CLI, as the
doc shows it) and a sign-in that sets the cookies the doc describes."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent / "gateway"))
sys.path.insert(0, str(Path(__file__).parent / "portal"))
from gateway_harness import (
    ADMIN_TOKEN,
    GatewayClient,
    ServeProcess,
    default_workers,
    mogateway_command,
    serve_env,
    start_serve,
    wait_all_workers,
)
from portal_harness import PASSWORD, accept, invite, sign_in

from markdown_doc import MarkdownDoc
from mogateway.api import portal_admin, whatsapp_media
from mogateway.api.portal import account, callback, credentials, pages, reports, signin
from mogateway.config import Settings
from mogateway.service.journal_health import KINDS

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
OUTAGES_DOC = MarkdownDoc("docs/outages.md")
PORTAL_DOC = MarkdownDoc("docs/portal.md")
OUTAGES = OUTAGES_DOC.text
PORTAL = PORTAL_DOC.text


def section(doc: MarkdownDoc, title: str) -> str:
    """The text of the ``## `` section whose heading starts with ``title``."""
    return doc.section(f"## {title}")


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayClient]:
    """A real ``mogateway serve`` (default workers) with the tests' tokens, on a fresh journal."""
    workdir = tmp_path_factory.mktemp("docs-gw")
    served: ServeProcess = start_serve(workdir, serve_env(workdir))
    client = GatewayClient(served.url, keep_alive=False)
    try:
        wait_all_workers(served.url, default_workers(), timeout=60)
        yield client
    finally:
        client.close()
        served.stop()


# ============================================================================ docs/outages.md


def test_healthz_and_readyz_answer_as_the_first_section_says(gw: GatewayClient) -> None:
    """Both answer without a token; on a healthy gateway /healthz is 200 and /readyz ``200 {"ready": true}``
    (asked on new connections, so any worker may answer each); the readiness kinds are the code's."""
    table = section(OUTAGES_DOC, "Liveness and readiness")
    assert "`GET /healthz` | `200`" in table and '`200 {"ready": true}`' in table
    for _ in range(8):
        assert gw.request("GET", "/healthz").status_code == 200
        ready = gw.request("GET", "/readyz")
        assert ready.status_code == 200 and ready.json() == {"ready": True}, ready.text
    kinds = set(re.findall(r"^\| `(\w+)` \|", table.split("| `kind` | while |", 1)[1], re.M))
    assert kinds == {"journal_not_writable", "free_space_low", "no_bind_up"}
    source = (ROOT / "src/mogateway/service/readiness.py").read_text()
    for kind in kinds:
        assert f'Reason("{kind}"' in source, kind
    # The 503 example's type and title are the problem the code answers with.
    example = re.search(r"```json\n(.*?)```", table, re.S)
    assert example and '"urn:mogateway:problem:not-ready"' in example[1] and '"Unavailable"' in example[1]


def test_every_metric_the_page_names_is_exposed(gw: GatewayClient) -> None:
    """Each ``mogateway_*`` name of the page is a family of a real gateway's /metrics, with the labels the
    page gives (``kind`` of the write errors, ``worker`` of readiness, 1 on a healthy gateway)."""
    exposed = gw.admin("GET", "/metrics")
    assert exposed.status_code == 200, exposed.text
    text = exposed.text
    named = set(re.findall(r"\b(mogateway_[a-z_]+)", OUTAGES))
    assert {
        "mogateway_journal_write_errors_total",
        "mogateway_ready",
        "mogateway_journal_free_bytes",
    } <= named
    for name in named:
        assert re.search(rf"^{name}(\{{|\s)", text, re.M), f"{name} is not in /metrics"
    # {kind}: one series per kind the page lists, and those are the code's kinds.
    listed = section(OUTAGES_DOC, "What the log").split("One line per kind", 1)[1].split("\n\n", 1)[0]
    assert set(re.findall(r"`(\w+)`", listed)) >= set(KINDS)
    for kind in KINDS:
        assert re.search(rf'^mogateway_journal_write_errors_total\{{[^}}]*kind="{kind}"', text, re.M), kind
    # "/metrics has every worker's mogateway_ready{worker="…"}": one series per worker, each 1.
    ready = dict(re.findall(r'^mogateway_ready\{[^}]*worker="([^"]+)"[^}]*\} (\S+)', text, re.M))
    assert len(ready) == default_workers() and all(float(v) == 1.0 for v in ready.values()), ready


FORMAT_PLACEHOLDER = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?[sdrifgx]|\{[^{}]*\}")


@cache
def log_formats() -> tuple[tuple[str, ...], frozenset[str]]:
    """Every string of src/ that could be a log message (f-strings with ``{}`` for their values), and
    every logger name given to ``logging.getLogger``."""
    found: list[str] = []
    loggers: set[str] = set()
    for path in (ROOT / "src" / "mogateway").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.append(node.value)
            elif isinstance(node, ast.JoinedStr):
                found.append(
                    "".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values)
                )
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "getLogger"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                loggers.add(str(node.args[0].value))
    # A format of (almost) nothing but placeholders would match any text: not a quotable line.
    formats = tuple(f for f in found if len(FORMAT_PLACEHOLDER.sub("", f).strip()) >= 8)
    return formats, frozenset(loggers)


def format_regexes(fmt: str, text: str, truncated: bool) -> Iterator[re.Pattern[str]]:
    """``fmt`` as regexes for ``text``: each run of placeholders one group; when the quote was cut short
    (``…``), each prefix of ``fmt`` of three words or more that ends with the quote's last word or with
    a placeholder (whose text is then cut short)."""
    parts: list[tuple[str, str]] = []
    for piece in re.split(f"((?:{FORMAT_PLACEHOLDER.pattern})+)", fmt):
        if not piece:
            continue
        if re.fullmatch(f"(?:{FORMAT_PLACEHOLDER.pattern})+", piece):
            parts.append(("(.*?)", ""))
        else:
            parts.extend((re.escape(w), w.strip()) for w in re.split(r"(?<=\s)", piece) if w)
    if not truncated:
        yield re.compile("".join(p for p, _ in parts), re.S)
        return
    last = text.split()[-1]
    for end, (pattern, word) in enumerate(parts, 1):
        said = sum(1 for _, w in parts[:end] if w)  # a prefix of a word or two would fit anything
        if said >= 3 and (word == last or pattern == "(.*?)"):
            yield re.compile("".join(p for p, _ in parts[:end]).rstrip("\\ "), re.S)


def is_value(text: str) -> bool:
    """A placeholder's text that is a value, not a phrase of the source: a word or two, a number, an
    exception as ``journal_health._short`` writes it (``OperationalError: <the library's message>``)."""
    return len(text.split()) <= 2 or bool(re.match(r"\w+(Error|Exception): ", text))


def quoted_by_source(text: str, truncated: bool, depth: int = 0) -> bool:
    """Whether ``text`` is a source format with its placeholders filled by values or, one level down,
    by other source formats (a log line whose ``%s`` is itself a sentence of the code)."""
    if depth > 3:
        return False
    formats, _ = log_formats()
    for fmt in formats:
        if truncated and not text.startswith(FORMAT_PLACEHOLDER.split(fmt, 1)[0] or "\0"):
            continue  # a quote cut short is matched from a format's first words
        for regex in format_regexes(fmt, text, truncated):
            found = regex.fullmatch(text)
            if found is None:
                continue
            groups = found.groups()
            cut = truncated and regex.pattern.endswith("(.*?)")  # the quote ends in the last value
            if all(
                is_value(g) or quoted_by_source(g, cut and i == len(groups) - 1, depth + 1)
                for i, g in enumerate(groups)
            ):
                return True
    return False


def test_every_quoted_log_line_is_a_format_string_of_the_code() -> None:
    """The log lines the page quotes: level, worker tag and logger as logs.py writes them, the logger
    one the code names, and the message a format string of src/ (an id cut short ``01e7…`` stands for
    its value, a trailing ``…`` for the rest of the line)."""
    block = re.search(r"```\n(.*?)```", section(OUTAGES_DOC, "What the log"), re.S)
    assert block, "the log block of the page"
    lines = [line for line in block[1].splitlines() if line.strip()]
    assert len(lines) >= 3
    _, loggers = log_formats()
    for line in lines:
        head = re.match(r"(ERROR|WARNING|INFO) +\[w\d+\] ([\w.]+): (.*)$", line)
        assert head, f"not a line of logs.py's format: {line}"
        assert len(head[1]) == 7 or line.startswith(f"{head[1]}{' ' * (8 - len(head[1]))}["), line
        assert head[2] in loggers, f"no logger named {head[2]} in src/"
        message = head[3]
        truncated = message.endswith("…")
        message = message.removesuffix("…").rstrip()
        message = re.sub(r"\b\w+…", "01e7", message)
        assert quoted_by_source(message, truncated), f"no format string of src/ says: {line}"


def test_the_tested_section_cites_tests_that_exist() -> None:
    """Every test file of "Tested" exists in the directory it names, with a test function."""
    tested = section(OUTAGES_DOC, "Tested")
    (directory,) = re.findall(r"`(tests/\w+/)`", tested)
    files = list(dict.fromkeys(re.findall(r"`(test_\w+\.py)`", tested)))
    assert len(files) == 3, files
    for name in files:
        path = ROOT / directory / name
        assert path.is_file(), path
        assert re.search(r"^(async )?def test_", path.read_text(), re.M), path
    # The ones said to mount a tmpfs (and so to need root) are those whose code does.
    said = re.search(r"\)\. (.*?) mount a tmpfs", tested, re.S)
    assert said, tested
    for name in files:
        mounts = "tmpfs(" in (ROOT / directory / name).read_text()
        assert (f"`{name}`" in said[1]) == mounts, (name, said[1])


# ============================================================================ docs/portal.md

PORTAL_ROUTES = {
    (method, str(route.path))  # type: ignore[attr-defined]
    for module in (signin, pages, callback, credentials, reports, account, portal_admin, whatsapp_media)
    for route in module.router.routes
    for method in route.methods  # type: ignore[attr-defined]
}


def route_of(method: str | None, path: str) -> bool:
    """Whether ``path`` (``{x}`` or a cut-short ``...`` for a value) is a route of the app."""
    path = re.sub(r"\.\.\.$", "x", path)
    for known_method, template in PORTAL_ROUTES:
        if method is not None and known_method != method:
            continue
        pattern = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template))
        if re.fullmatch(pattern, re.sub(r"\{[^}]+\}", "x", path)):
            return True
    return False


def test_every_path_and_admin_route_the_portal_page_names_is_a_route() -> None:
    """Every ``/portal/...`` path and every ``/v1/...`` route of docs/portal.md (with its method when the
    page gives one) is a route of the portal's or the admin API's routers."""
    with_method = re.findall(r"`(GET|POST|PUT|PATCH|DELETE) (/v1/[^`\s]+)`", PORTAL)
    assert len(with_method) >= 5, with_method
    for method, path in with_method:
        assert route_of(method, path), f"{method} {path}"
    paths = set(re.findall(r"(?:^|[\s`(]|:\d+)(/(?:portal|v1)/[\w{}/.-]*)", PORTAL, re.M))
    paths -= {"/portal/"}  # the cookies' Path and the portal's home, checked below
    assert any(p.startswith("/portal/invite/") for p in paths), paths
    for path in paths:
        assert route_of(None, path.rstrip(".") + ("..." if path.endswith("...") else "")), path
    assert route_of("GET", "/portal/")


def test_the_portal_pages_named_are_the_bar_of_a_signed_in_person(gw: GatewayClient) -> None:
    """ "Seven pages, from the bar at the top": each is a link of the bar a signed-in person sees."""
    names = re.search(r"Seven pages, from the bar at the top: (.*?)\.\n", PORTAL, re.S)
    assert names
    pages_named = re.findall(r"\*\*(\w+)\*\*", names[1])
    assert len(pages_named) == 7, pages_named
    client = gw.add_client(shortcodes=["56700"], callback_url="http://127.0.0.1:9/cb", name="Bar")
    browser = accept(gw.url, invite(gw, client["id"], "bar@bar.example", "viewer"))
    try:
        home = browser.get("/portal/", follow_redirects=True)
        assert home.status_code == 200, home.text[:300]
        nav = re.search(r"<nav.*?</nav>", home.text, re.S)
        assert nav, home.text[:1000]
        links = re.findall(r'<a [^>]*href="(/portal/[^"]*)"[^>]*>\s*([^<]+?)\s*<', nav[0])
        shown = [label for _, label in links]
        for name in pages_named:
            assert name in shown, (name, shown)
    finally:
        browser.close()


def test_every_setting_of_the_table_exists_with_its_default_and_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each row of "Settings": the field, its default, its environment variable and its bounds."""
    table = section(PORTAL_DOC, "Settings")
    rows = re.findall(r"^\| `(\w+)` \| `(\w+)` \| `([^`]+)` \| (.*) \|$", table, re.M)
    assert {row[0] for row in rows} == {"portal", "portal_session_minutes", "portal_invite_hours"}
    fields = Settings.model_fields
    for name, variable, default, what in rows:
        assert name in fields, name
        assert str(fields[name].default).lower() == default.lower(), (name, fields[name].default)
        bounds = re.search(r"\((\d+) to (\d+)\)", what)
        if bounds:
            low, high = int(bounds[1]), int(bounds[2])
            monkeypatch.setenv(variable, str(low))
            assert getattr(Settings(), name) == low
            monkeypatch.setenv(variable, str(high))
            assert getattr(Settings(), name) == high
            for outside in (low - 1, high + 1):
                monkeypatch.setenv(variable, str(outside))
                with pytest.raises(ValueError):
                    Settings()
            monkeypatch.delenv(variable)
        else:
            monkeypatch.setenv(variable, "false")
            assert getattr(Settings(), name) is False
            monkeypatch.delenv(variable)
    # Other settings the page names in passing are settings too.
    for name in ("trusted_proxies", "secret_key", "old_secret_key", "allow_private_callbacks", "public_url"):
        assert f"`{name}`" in PORTAL and name in fields, name


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*mogateway_command(), *args], capture_output=True, text=True, timeout=60, env=env)


def documented_commands() -> list[str]:
    """The ``mogateway`` commands of the page: the lines of its sh blocks and its inline code."""
    found = [
        line.strip()
        for block in re.findall(r"```sh\n(.*?)```", PORTAL, re.S)
        for line in block.splitlines()
        if line.startswith("mogateway ")
    ]
    found += re.findall(r"`(mogateway [^`]+)`", PORTAL)
    return found


def test_every_cli_command_shown_parses() -> None:
    """Each command's path answers ``--help`` and knows every option the page gives it."""
    commands = documented_commands()
    assert any(c.startswith("mogateway clients invite") for c in commands), commands
    assert any(c.startswith("mogateway clients portal-disable") for c in commands), commands
    for command in commands:
        words = command.split()[1:]
        path = [w for w in words[:2] if re.fullmatch(r"[a-z][a-z-]*", w)]
        shown = cli(*path, "--help")
        assert shown.returncode == 0, (command, shown.stderr)
        for option in re.findall(r"(--[a-z][a-z-]*)", command):
            assert option in shown.stdout, (command, option)


def test_the_invite_command_prints_what_the_page_shows(gw: GatewayClient, tmp_path: Path) -> None:
    """``mogateway clients invite`` against a real gateway, as the page shows it: its three lines, the
    link a portal route that opens the set-your-password page."""
    (block,) = [b for b in re.findall(r"```sh\n(.*?)```", PORTAL, re.S) if "clients invite" in b]
    command, *said = block.strip().splitlines()
    said = [line.removeprefix("# ") for line in said]
    client = gw.add_client(shortcodes=["56701"], callback_url="http://127.0.0.1:9/cb", name="Invite")
    args = command.split()[1:]
    args[args.index("cl_abc")] = client["id"]
    env = serve_env(tmp_path, MOGATEWAY_URL=gw.url)
    ran = cli(*args, "--url", gw.url, "--token", ADMIN_TOKEN, env=env)
    assert ran.returncode == 0, ran.stderr
    out = [line for line in ran.stdout.splitlines() if line.strip()]
    assert len(out) == len(said) == 3, (out, said)
    assert out[0] == said[0].replace("cl_abc", client["id"])
    assert out[1] == said[1], (out[1], said[1])
    prefix = said[2].removesuffix("...").replace("http://127.0.0.1:8080", gw.url)
    link = out[2]
    assert link.startswith(prefix.rsplit("/", 1)[0] + "/"), (link, said[2])
    page = httpx.get(link, timeout=30)
    assert page.status_code == 200 and "password" in page.text.lower()


def set_cookies(response: httpx.Response) -> dict[str, str]:
    """The Set-Cookie headers of an answer, by cookie name."""
    found = {}
    for header in response.headers.get_list("set-cookie"):
        found[header.split("=", 1)[0]] = header
    return found


def test_the_cookies_of_a_sign_in_are_as_the_page_says(gw: GatewayClient) -> None:
    """Accepting an invite and signing in set the session's cookie and ``mogateway_portal_device``:
    HttpOnly, SameSite=Strict, Path=/portal/, not Secure over plain HTTP; the device cookie lasts
    30 days, the session ``portal_session_minutes`` (480 by default)."""
    device_name = re.search(r"The device cookie, `(\w+)`", PORTAL)
    assert device_name and device_name[1] == "mogateway_portal_device"
    assert "lasts **30 days**" in PORTAL and "`portal_session_minutes` (8 hours)" in PORTAL
    client = gw.add_client(shortcodes=["56702"], callback_url="http://127.0.0.1:9/cb", name="Cookie")
    path = invite(gw, client["id"], "ann@cookie.example", "admin")
    browser = httpx.Client(base_url=gw.url, timeout=30)
    try:
        assert browser.get(path).status_code == 200
        accepted = browser.post(path, data={"password": PASSWORD, "again": PASSWORD})
        assert accepted.status_code == 303, accepted.text
    finally:
        browser.close()
    signed_in = sign_in(gw.url, "ann@cookie.example")
    assert signed_in.status_code == 303, signed_in.text
    for answer in (accepted, signed_in):
        cookies = set_cookies(answer)
        assert {"mogateway_portal", "mogateway_portal_device"} <= cookies.keys(), cookies
        lifetimes = {"mogateway_portal": 480 * 60, "mogateway_portal_device": 30 * 24 * 3600}
        for name, lifetime in lifetimes.items():
            attributes = {a.strip().lower() for a in cookies[name].split(";")[1:]}
            assert {"httponly", "samesite=strict", "path=/portal/", f"max-age={lifetime}"} <= attributes, (
                cookies[name]
            )
            assert "secure" not in attributes, cookies[name]


def test_the_portal_answers_on_the_paths_the_page_gives(gw: GatewayClient) -> None:
    """A real gateway serves the portal at ``/portal/`` (to sign in first) and its sign-in page."""
    home = gw.request("GET", "/portal/", follow_redirects=False)
    assert home.status_code in (302, 303, 307), home.status_code
    assert home.headers["location"].startswith("/portal/login")
    assert gw.request("GET", "/portal/login").status_code == 200


def test_the_throttles_warnings_are_the_codes() -> None:
    """The three warnings the page quotes (``…`` for what it leaves out, a quoted value for a ``%r``):
    their pieces stand in that order in one of the code's format strings."""
    quotes = [" ".join(q.split()) for q in re.findall(r"`(portal sign-in throttled\s+by\s[^`]+)`", PORTAL)]
    assert len(quotes) == 3, quotes
    formats, _ = log_formats()
    for quote in quotes:
        pieces = [re.sub(r"'[^']*'", "%r", p).strip() for p in quote.split("…") if p.strip()]
        found = [f for f in formats if re.search(".*".join(map(re.escape, pieces)), f, re.S)]
        assert found and all(f.startswith(pieces[0]) for f in found), (quote, found)
