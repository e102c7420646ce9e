"""A small Chrome DevTools Protocol client driving Debian's headless Chromium for page tests.

Starts a fresh browser (own profile, no network services), opens one page target and
records console errors and uncaught exceptions from before the first navigation.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import websocket

CHROMIUM = "/usr/bin/chromium"
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)  # fmt: skip


def chromium_or_skip() -> str:
    """The Chromium binary; a skip locally when absent, a failure under CI (which installs it)."""
    found = shutil.which("chromium") or (CHROMIUM if Path(CHROMIUM).exists() else None)
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed but CI is set (Debian package 'chromium')")
    pytest.skip("chromium is not installed")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Browser:
    def __init__(self, profile: Path, width: int = 1600, height: int = 1000) -> None:
        self.port = _free_port()
        self.process = subprocess.Popen(
            [chromium_or_skip(), *FLAGS, f"--user-data-dir={profile}",
             f"--remote-debugging-port={self.port}", f"--window-size={width},{height}",
             "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.events: list[dict[str, Any]] = []
        self._next_id = 0
        self.socket = websocket.create_connection(
            self._page_socket_url(), timeout=30, suppress_origin=True
        )
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=width, height=height, deviceScaleFactor=1, mobile=False,
        )  # fmt: skip

    def _page_socket_url(self) -> str:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list") as reply:
                    targets = json.load(reply)
                pages = [t for t in targets if t.get("type") == "page"]
                if pages:
                    return pages[0]["webSocketDebuggerUrl"]
            except OSError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("chromium did not open its DevTools endpoint")
            time.sleep(0.1)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        self.socket.send(json.dumps({"id": self._next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, event: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        seen = len(self.events)
        while time.monotonic() < deadline:
            for message in self.events[seen:]:
                if message.get("method") == event:
                    return message
            seen = len(self.events)
            self.socket.settimeout(max(0.1, deadline - time.monotonic()))
            self.events.append(json.loads(self.socket.recv()))
        raise TimeoutError(event)

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click at the centre of the first element matching `selector`."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        x, y = box
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries seen so far."""
        found = []
        for message in self.events:
            method, params = message.get("method"), message.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append(str(params["exceptionDetails"]))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append(str(params.get("args")))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                found.append(str(params["entry"]))
        return found

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.socket.close()
        finally:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
