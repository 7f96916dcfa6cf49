"""A small Chrome DevTools Protocol client over `--remote-debugging-pipe`, standard library only.

Chromium reads commands from its descriptor 3 and writes replies and events to its descriptor 4, one JSON
message per NUL-terminated frame. `Browser` starts headless Chromium with those pipes, opens one page
and drives it: evaluate JavaScript, click an element with real mouse events (Input.dispatchMouseEvent,
so the page's own listeners run as for a user), take a screenshot. Console messages and uncaught
exceptions are collected (`Browser.console`).
"""

from __future__ import annotations

import base64
import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.chromium import CHROMIUM

TIMEOUT_S = 60


class CdpError(Exception):
    pass


class Browser:
    def __init__(self, profile: Path, width: int = 1280, height: int = 900) -> None:
        self._to_chrome_r, self._to_chrome_w = os.pipe()
        self._from_chrome_r, self._from_chrome_w = os.pipe()
        # Chromium expects the pipes on descriptors 3 and 4 of its own process.
        self._proc = subprocess.Popen(
            [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-extensions", "--remote-debugging-pipe", f"--user-data-dir={profile}",
             f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(3, 4), preexec_fn=self._map_fds, start_new_session=True,
        )  # fmt: skip
        os.close(self._to_chrome_r)
        os.close(self._from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        self.console: list[str] = []
        self.session = ""
        self.width, self.height = width, height

    def _map_fds(self) -> None:
        os.dup2(self._to_chrome_r, 3)
        os.dup2(self._from_chrome_w, 4)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        try:
            os.close(self._to_chrome_w)
            os.close(self._from_chrome_r)
        except OSError:
            pass
        if self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGKILL)  # the session this browser started, nothing else
        self._proc.wait()

    # -- the wire

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_chrome_r], [], [], left)[0]:
                raise CdpError("Chromium did not answer in time")
            chunk = os.read(self._from_chrome_r, 1 << 20)
            if not chunk:
                raise CdpError("Chromium closed its pipe")
            self._buffer += chunk
        frame, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(frame)
        return message

    def send(self, method: str, params: dict[str, Any] | None = None, *, browser: bool = False) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if not browser and self.session:
            message["sessionId"] = self.session
        os.write(self._to_chrome_w, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise CdpError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self._event(reply)

    def _event(self, message: dict[str, Any]) -> None:
        self._events.append(message)
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.consoleAPICalled":
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            self.console.append(f"console.{params.get('type')}: {args}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.console.append(f"uncaught: {details.get('exception', {}).get('description', details.get('text'))}")
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            if entry.get("level") in ("error", "warning"):
                self.console.append(f"log {entry.get('level')}: {entry.get('text')}")

    def wait_event(self, method: str) -> dict[str, Any]:
        for index, message in enumerate(self._events):
            if message.get("method") == method:
                del self._events[index]
                return message
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            message = self._read_message(deadline)
            if message.get("method") == method:
                self._event(message)
                self._events.remove(message)
                return message
            self._event(message)

    # -- the page

    def open(self, url: str) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"}, browser=True)["targetId"]
        attached = self.send("Target.attachToTarget", {"targetId": target, "flatten": True}, browser=True)
        self.session = attached["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False})
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        reply = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in reply:
            raise CdpError(f"{expression}: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def click(self, selector: str) -> None:
        """Scroll the element into view and click inside its first line box with the mouse (pressed, then released)."""
        box = self.evaluate(
            f"(function () {{ var e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
            " e.scrollIntoView({block: 'center'}); var r = e.getClientRects()[0];"  # an inline box's first line
            " return [r.left + Math.min(r.width / 2, 20), r.top + r.height / 2]; })()"
        )
        if box is None:
            raise CdpError(f"no element matches {selector}")
        x, y = box
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent",
                      {"type": kind, "x": x, "y": y, "button": "left" if kind != "mouseMoved" else "none",
                       "clickCount": 1 if kind != "mouseMoved" else 0})

    def screenshot(self, path: Path, selector: str | None = None) -> Path:
        """A PNG of the viewport, or of the element `selector` scrolled to the top of it."""
        params: dict[str, Any] = {"format": "png"}
        if selector is not None:
            self.evaluate(f"document.querySelector({json.dumps(selector)}).scrollIntoView({{block: 'start'}})")
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", params)["data"]))
        return path
