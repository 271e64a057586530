"""Headless Chromium driven over the DevTools protocol: what a person sees and clicks.

``--dump-dom`` shows the page's markup, not what is visible (a cell's CSS can
still cut an id) and cannot click. :func:`evaluate` loads a page in Debian's
``chromium`` and runs a script in it, awaiting its promise, over the DevTools
websocket (aiohttp's client, already a dependency).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import aiohttp
from demo_helpers import free_port


def _page_socket(port: int, timeout_s: float) -> str:
    """The websocket URL of the browser's page, once its DevTools endpoint answers."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as r:
                pages = [t for t in json.loads(r.read()) if t.get("type") == "page"]
            if pages:
                return str(pages[0]["webSocketDebuggerUrl"])
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"chromium's DevTools endpoint did not answer within {timeout_s}s")


async def _run(socket_url: str, url: str, expression: str, timeout_s: float) -> Any:
    """Navigate the page to ``url``, wait for its load event, evaluate ``expression``."""
    async with aiohttp.ClientSession() as session, \
            session.ws_connect(socket_url, max_msg_size=0) as ws:
        await ws.send_json({"id": 1, "method": "Page.enable"})
        await ws.send_json({"id": 2, "method": "Page.navigate", "params": {"url": url}})
        async with asyncio.timeout(timeout_s):
            async for message in ws:
                reply = json.loads(message.data)
                if reply.get("method") == "Page.loadEventFired":
                    await ws.send_json({"id": 3, "method": "Runtime.evaluate", "params": {
                        "expression": expression, "awaitPromise": True,
                        "returnByValue": True}})
                if reply.get("id") != 3:
                    continue
                result = reply.get("result", {})
                if "exceptionDetails" in result:
                    raise AssertionError(f"the script failed: {result['exceptionDetails']}")
                return result["result"].get("value")
    raise AssertionError("the DevTools connection closed before the script's answer")


def evaluate(url: str, tmp: Path, expression: str, timeout_s: float = 90) -> Any:
    """Open ``url`` in headless Chromium (1400 x 900) and return the value of
    ``expression`` (a promise is awaited) once the page has loaded."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "chromium is not installed (apt-get install chromium)"
    port = free_port()
    argv = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", f"--user-data-dir={tmp / f'profile-{uuid.uuid4().hex[:6]}'}",
            f"--remote-debugging-port={port}", "--remote-allow-origins=*",
            "--window-size=1400,900", "about:blank"]
    browser = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        return asyncio.run(_run(_page_socket(port, timeout_s), url, expression, timeout_s))
    finally:
        browser.terminate()
        try:
            browser.wait(timeout=10)
        except subprocess.TimeoutExpired:
            browser.kill()
            browser.wait()
