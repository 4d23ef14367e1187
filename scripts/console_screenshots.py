"""Screenshots of every console page at 1280×800 (desktop) and 390×844 (phone), for docs/console.md.

    .venv/bin/python scripts/console_screenshots.py [--out docs/console]

Runs the real thing on loopback: an SMSC simulator, three callback applications (fast, slow, broken),
``mogateway serve`` as it runs by default — a worker process per core, at least two, so the browser's
connections reach either worker — with an SMPP bind to the simulator and a WhatsApp number served
through the fake Graph API, some traffic over HTTP, SMPP and signed WhatsApp webhooks, then Debian's
Chromium (through Playwright) signs in and photographs each page. Needs what
``scripts/test.sh`` sets up (the test extra and /usr/bin/chromium). Nothing leaves 127.0.0.1: any other
request is aborted and fails the script.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from mogateway.testing.fake_graph import FakeGraphServer
from mogateway.testing.fake_graph import webhooks as wh
from mogateway.testing.recorder import Answer, CallbackRecorder
from mogateway.testing.smsc import SimulatedSmsc

ADMIN = "screenshot-admin-token-0123456789"
INGEST = "screenshot-ingest-token-012345678"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORTS = {"desktop": (1280, 800), "phone": (390, 844)}
APP_SECRET = "screenshot-app-secret-0123456789"
WA_PNID = "106540352242922"  # the fake Graph API's default cloud number
WA_NUMBER = "919876543210"


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def smsc_in_thread(port: int) -> Iterator[tuple[SimulatedSmsc, asyncio.AbstractEventLoop]]:
    loop = asyncio.new_event_loop()
    smsc = SimulatedSmsc(port=port, system_id="gw", password="pw")
    started = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(smsc.start())
        started.set()
        loop.run_forever()
        loop.run_until_complete(smsc.stop())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    started.wait(10)
    try:
        yield smsc, loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def start_gateway(workdir: Path, port: int, smsc_port: int, graph_url: str) -> subprocess.Popen[bytes]:
    config = workdir / "gateway.toml"
    config.write_text(
        f"""
[whatsapp]
app_secret = "{APP_SECRET}"
verify_token = "screenshot-verify-token"
graph_url = "{graph_url}"

[[whatsapp.numbers]]
phone_number_id = "{WA_PNID}"
display_phone_number = "{WA_NUMBER}"
access_token = "rehearsal-token"

[[smpp.binds]]
name = "airtel-dl"
host = "127.0.0.1"
port = {smsc_port}
system_id = "gw"
password = "pw"
operator = "airtel"
circle = "delhi"
window = 10
throughput = 50

[[smpp.binds]]
name = "jio-mh"
host = "127.0.0.1"
port = {free_port()}
system_id = "gw"
password = "pw"
operator = "jio"
circle = "maharashtra"
"""
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MOGATEWAY_")}
    env.update(
        MOGATEWAY_DATABASE=str(workdir / "journal.db"),
        MOGATEWAY_ADMIN_TOKEN=ADMIN,
        MOGATEWAY_INGEST_TOKEN=INGEST,
        MOGATEWAY_ALLOW_PRIVATE_CALLBACKS="true",
        MOGATEWAY_LOG_LEVEL="error",
        MOGATEWAY_NODE_NAME="mumbai-1",
        MOGATEWAY_STATS_FLUSH_S="1",
    )
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "mogateway", "serve", "--config", str(config), "--port", str(port)),
            *("--workers", str(max(2, os.cpu_count() or 1))),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(workdir / "serve.log").open("wb"),
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            raise SystemExit("the gateway did not start: " + (workdir / "serve.log").read_text())
        time.sleep(0.1)


def traffic(base: str, smsc: SimulatedSmsc, loop: asyncio.AbstractEventLoop, seconds: float) -> None:
    """A few minutes' worth of a small shortcode's day, compressed: mostly replies, some failures, some
    WhatsApp messages; the last one a WhatsApp photo (the message page shows it)."""
    ingest = {"authorization": f"Bearer {INGEST}"}
    rng = random.Random(7)
    ends = time.monotonic() + seconds
    n = 0
    meta = wh.WebhookSender(base + "/v1/whatsapp/webhook", APP_SECRET)
    with meta, httpx.Client(base_url=base, headers=ingest, timeout=10) as http:
        while time.monotonic() < ends:
            burst = rng.randint(2, 9)
            items = []
            for _ in range(burst):
                n += 1
                shortcode = rng.choice(["56767", "56767", "56767", "57575", "58888"])
                word = rng.choice(["BAL", "VOTE 3", "HELP", "RECHARGE 199", "STOP"])
                items.append(
                    {
                        "shortcode": shortcode,
                        "msisdn": f"9198{rng.randint(10**7, 10**8 - 1)}",
                        "message": word,
                    }
                )
            if n % 7 == 0:
                items.append({"shortcode": "59999", "msisdn": "919810012345", "message": "WHO"})
            if n % 11 == 0:
                items.append({"shortcode": "56767", "msisdn": "14155550100", "message": "HI"})
            http.post("/v1/inbound/batch", json=items)
            if n % 4 == 0:
                asyncio.run_coroutine_threadsafe(
                    smsc.inject_mo(f"9199{rng.randint(10**7, 10**8 - 1)}", "56767", "BAL"), loop
                ).result(10)
            if n % 3 == 0:
                sender = f"9197{rng.randint(10**7, 10**8 - 1)}"
                meta.send(wh.text(sender, rng.choice(["ORDER 12", "TRACK 4471", "Hi, is the shop open?"])))
            time.sleep(rng.uniform(0.1, 0.6))
        photo = wh.media("919812345678", "image", caption="Photo of my bill", media_id="1003383421387123")
        meta.send(photo)
        time.sleep(1.0)  # its callback and reply


def screenshots(base: str, out: Path) -> None:
    from playwright.sync_api import Route, sync_playwright

    outside: list[str] = []

    def guard(route: Route) -> None:
        host = urlsplit(route.request.url).hostname or ""
        if host in ("127.0.0.1", "localhost") or route.request.url.startswith(("data:", "blob:")):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for name, (width, height) in VIEWPORTS.items():
            context = browser.new_context(viewport={"width": width, "height": height}, device_scale_factor=1)
            context.route("**/*", guard)
            page = context.new_page()
            page.goto(base + "/console/login")
            page.screenshot(path=str(out / f"signin-{name}.png"))
            page.get_by_label("Admin token").fill(ADMIN)
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url("**/console/")
            page.wait_for_timeout(2500)  # a few live updates
            page.screenshot(path=str(out / f"overview-{name}.png"), full_page=True)
            page.goto(base + "/console/clients")
            page.locator("details.test summary").first.click()
            page.locator("details.test input[name=msisdn]").first.fill("919810012345")
            page.locator("details.test button[type=submit]").first.click()
            page.locator(".test-result .result").first.wait_for()
            page.screenshot(path=str(out / f"clients-{name}.png"), full_page=True)
            page.goto(base + "/console/messages")
            # 50 messages make a long page: the search and the first results say it all.
            clip = {"x": 0, "y": 0, "width": width, "height": min(2 * height, 1700)}
            page.screenshot(path=str(out / f"messages-{name}.png"), full_page=True, clip=clip)
            # the newest WhatsApp message: the photo sent last (its channel, wamid and media notes)
            whatsapp = page.locator("table.messages tr", has=page.locator('[data-channel="whatsapp"]'))
            whatsapp.first.locator("a").click()
            page.wait_for_url("**/console/messages/*")
            page.screenshot(path=str(out / f"message-{name}.png"), full_page=True)
            page.goto(base + "/console/binds")
            page.wait_for_timeout(1500)
            page.screenshot(path=str(out / f"binds-{name}.png"), full_page=True)
            context.close()
        browser.close()
    if outside:
        raise SystemExit(f"the console asked for something outside 127.0.0.1: {outside}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "console")
    parser.add_argument("--traffic-s", type=float, default=25.0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(3)

    def sometimes_slow(_: Any) -> Answer:
        return Answer.text("Your balance is Rs 42.50", delay_s=rng.choice([0.02, 0.05, 0.3, 1.2]))

    with (
        tempfile.TemporaryDirectory(prefix="mogw-shots-") as tmp,
        CallbackRecorder.in_thread(Answer.text("Thanks! Your vote is counted.")) as fast,
        CallbackRecorder.in_thread(sometimes_slow) as slow,
        CallbackRecorder.in_thread(Answer.with_status(503, b"maintenance")) as broken,
        CallbackRecorder.in_thread(Answer.text("Thanks, we got it. Open 9 to 9.")) as shop,
        FakeGraphServer() as graph,
        smsc_in_thread(free_port()) as (smsc, smsc_loop),
    ):
        port = free_port()
        gateway = start_gateway(Path(tmp), port, smsc.port, graph.url)
        base = f"http://127.0.0.1:{port}"
        try:
            admin = httpx.Client(base_url=base, headers={"authorization": f"Bearer {ADMIN}"}, timeout=10)
            for name, shortcodes, app, extra in (
                ("tv-vote", ["56767"], fast, {}),
                ("bank-balance", ["57575"], slow, {"timeout_s": 1}),
                ("recharge-offers", ["58888"], broken, {}),
                ("corner-shop", [], shop, {"whatsapp_numbers": [WA_NUMBER]}),
            ):
                body = {"name": name, "shortcodes": shortcodes, "callback_url": app.url, **extra}
                admin.post("/v1/clients", json=body).raise_for_status()
            traffic(base, smsc, smsc_loop, args.traffic_s)
            screenshots(base, args.out)
        finally:
            gateway.terminate()
            gateway.wait(15)
    print(f"screenshots in {args.out}")


if __name__ == "__main__":
    main()
