"""Headless Chromium driven over the DevTools protocol on a pipe, for the web pages' tests.

``--remote-debugging-pipe`` makes Chromium read commands from its file descriptor 3 and write
answers and events to 4, each message JSON ending in a NUL byte: no port, no network, no
WebSocket library. :class:`Browser` is deliberately synchronous (a test of a trio server calls it
from a worker thread) and small: open a page, evaluate an expression (awaiting a promise), press
a key. Every wait is bounded by ``timeout`` seconds and inside the page, never a sleep here.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import select
import subprocess
import time
from pathlib import Path
from typing import Any

__all__ = ["Browser", "BrowserError"]


class BrowserError(Exception):
    """Chromium refused a command, an expression threw, or a wait ran out."""


class Browser:
    """One headless Chromium with one page."""

    def __init__(self, executable: str, profile: Path, timeout: float = 60.0) -> None:
        self.timeout = timeout
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def fds() -> None:  # in the child: the pipe ends where Chromium expects them
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self.proc = subprocess.Popen(
            [
                executable,
                "--headless",
                "--no-sandbox",  # the tests may run as root (CI does)
                "--disable-gpu",
                "--no-first-run",
                "--disable-extensions",
                "--disable-background-networking",
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=fds,
            # close_fds would close 3 and 4 after fds() made them; every other descriptor Python
            # opened is non-inheritable already, so nothing else leaks into Chromium.
            close_fds=False,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._ids = itertools.count(1)
        self._buf = b""
        self.session = ""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})
        self.session = attached["sessionId"]

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Send one command (to the page once attached) and return its result."""
        n = next(self._ids)
        msg: dict[str, Any] = {"id": n, "method": method, "params": params or {}}
        if self.session:
            msg["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            answer = self._next(deadline)
            if answer.get("id") == n:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                return answer.get("result", {})

    def _next(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("Chromium did not answer in time")
            ready, _, _ = select.select([self._from_chrome], [], [], left)
            if ready:
                data = os.read(self._from_chrome, 1 << 16)
                if not data:
                    raise BrowserError("Chromium closed its pipe")
                self._buf += data
        raw, self._buf = self._buf.split(b"\0", 1)
        value: dict[str, Any] = json.loads(raw)
        return value

    def open(self, url: str) -> None:
        """Load ``url`` and wait until its document has loaded."""
        self.call("Page.navigate", {"url": url})
        self.wait("document.readyState === 'complete'")

    def eval(self, expression: str) -> Any:
        """The value of ``expression`` in the page (a promise is awaited)."""
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait(self, condition: str, timeout: float | None = None) -> Any:
        """Wait, inside the page, until ``condition`` is truthy; its value."""
        ms = int(1000 * (timeout if timeout is not None else self.timeout / 2))
        said = json.dumps(f"timed out: {condition}")
        return self.eval(
            "new Promise(function (ok, fail) {"
            f" var end = Date.now() + {ms};"
            " (function look() {"
            f"  var v; try {{ v = ({condition}); }} catch (e) {{ v = undefined; }}"
            "  if (v) ok(v);"
            f"  else if (Date.now() > end) fail(new Error({said}));"
            "  else setTimeout(look, 20);"
            " })();"
            "})"
        )

    def key(self, key: str) -> None:
        """Press and release ``key`` (a DOM key name: ``ArrowRight``, ``End``)."""
        codes = {"ArrowRight": 39, "ArrowLeft": 37, "Home": 36, "End": 35}
        for kind in ("keyDown", "keyUp"):
            self.call(
                "Input.dispatchKeyEvent",
                {"type": kind, "key": key, "code": key, "windowsVirtualKeyCode": codes[key]},
            )

    def close(self) -> None:
        """Stop Chromium."""
        self.session = ""  # the browser's own command, not the page's
        with contextlib.suppress(BrowserError, OSError):
            self.call("Browser.close")
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)
