"""The built book, opened page by page in headless Chromium.

Runs after the book is built (``make test`` calls it once ``_build/html`` holds the pages built from the stored
outputs; the first pytest run of ``make test`` does not collect this folder). It skips where no book has been
built or no Chromium is installed. Chromium is driven over the DevTools protocol with ``websocket-client``.

For every HTML page it asserts that
- no request leaves the machine (only ``file:``, ``data:``, ``blob:`` and ``about:`` URLs are fetched),
- no console error, uncaught exception or failed load is reported,
- every image loads (``HTMLImageElement.decode`` resolves with a non-zero natural width),
- no raw TeX delimiter (``$$``, ``\\(``, ``\\[``) is left in the rendered text once MathJax has typeset the page.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse
from pathlib import Path

import pytest

websocket = pytest.importorskip("websocket", reason="websocket-client is not installed")

ROOT = Path(__file__).resolve().parents[2]
HTML = Path(os.environ.get("HAPREF_BOOK_HTML", ROOT / "_build" / "html"))
BROWSER = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
LOCAL_SCHEMES = {"file", "data", "blob", "about", "chrome-error"}

pytestmark = [
    pytest.mark.skipif(not (HTML / "index.html").is_file(), reason=f"no built book at {HTML}"),
    pytest.mark.skipif(BROWSER is None, reason="no Chromium installed"),
]

# Runs in the page once it has loaded: waits for MathJax, then reports broken images and raw TeX left in the text
# (code blocks, scripts and typeset math are skipped: they may hold dollar signs or backslashes legitimately).
INSPECT = r"""
(async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  const images = Array.from(document.images);
  images.forEach(img => { img.loading = "eager"; });
  const broken = (await Promise.all(images.map(img => img.decode().then(
      () => (img.naturalWidth > 0 ? null : img.currentSrc || img.src), () => img.currentSrc || img.src))))
      .filter(src => src !== null);
  const skip = "pre, code, script, style, textarea, mjx-container, .highlight";
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const tex = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.parentElement && node.parentElement.closest(skip)) continue;
    const text = node.textContent;
    for (const delim of ["$$", "\\(", "\\)", "\\[", "\\]"]) {
      const at = text.indexOf(delim);
      if (at >= 0) { tex.push(text.slice(Math.max(0, at - 30), at + 30)); break; }
    }
  }
  return JSON.stringify({broken: broken, tex: tex, title: document.title});
})()
"""


class DevTools:
    """A minimal DevTools-protocol session on one page target: commands by id, events kept in a list."""

    def __init__(self, ws_url: str) -> None:
        self.ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self.ids = itertools.count(1)
        self.events: list[dict] = []

    def send(self, method: str, **params) -> dict:
        cid = next(self.ids)
        self.ws.send(json.dumps({"id": cid, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == cid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_for(self, method: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(e["method"] == method for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {method} within {timeout} s")
            self.events.append(json.loads(self.ws.recv()))

    def drain(self, seconds: float) -> None:
        """Collects the events that arrive within ``seconds`` (late requests, console messages)."""
        self.ws.settimeout(0.1)
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                try:
                    msg = json.loads(self.ws.recv())
                except websocket.WebSocketTimeoutException:
                    continue
                if "method" in msg:
                    self.events.append(msg)
        finally:
            self.ws.settimeout(60)

    def close(self) -> None:
        self.ws.close()


@pytest.fixture(scope="module")
def page():
    profile = tempfile.mkdtemp(prefix="hapref-chromium-")
    args = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-extensions",
            "--disable-default-apps", "--mute-audio", f"--user-data-dir={profile}", "--remote-debugging-port=0",
            "about:blank"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.is_file() and port_file.read_text().strip()):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"Chromium did not start (exit code {proc.poll()})")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        targets = _json(f"http://127.0.0.1:{port}/json/list")
        target = next(t for t in targets if t["type"] == "page")
        session = DevTools(target["webSocketDebuggerUrl"])
        for domain in ("Page", "Network", "Runtime", "Log"):
            session.send(f"{domain}.enable")
        yield session
        session.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(profile, ignore_errors=True)


def _json(url: str):
    import urllib.request

    for _ in range(50):
        try:
            with urllib.request.urlopen(url, timeout=5) as reply:  # the local DevTools endpoint only
                return json.load(reply)
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"DevTools endpoint {url} does not answer")


def _pages() -> list[Path]:
    if not HTML.is_dir():
        return []
    skip = {"_static", "_sources", "_images"}
    pages = (p for p in HTML.rglob("*.html") if not skip & set(p.relative_to(HTML).parts))
    # The top-level index.html of a Jupyter Book is a bare redirect to the root page, which is checked itself.
    return sorted(p for p in pages if 'http-equiv="Refresh"' not in p.read_text(errors="replace")[:500])


def _problems(events: list[dict]) -> dict[str, list[str]]:
    remote, errors = [], []
    for e in events:
        method, params = e["method"], e.get("params", {})
        if method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            if urllib.parse.urlsplit(url).scheme not in LOCAL_SCHEMES:
                remote.append(url)
        elif method == "Network.loadingFailed" and not params.get("canceled"):
            errors.append(f"load failed: {params.get('errorText')} ({params.get('type')})")
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            errors.append(f"exception: {details.get('exception', {}).get('description') or details.get('text')}")
        elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            errors.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            errors.append(f"log: {params['entry']['text']} {params['entry'].get('url', '')}")
    return {"remote requests": remote, "errors": errors}


def test_book_pages_are_found():
    names = {p.relative_to(HTML).as_posix() for p in _pages()}
    assert "book/index.html" in names and any(n.startswith("book/") for n in names), sorted(names)


@pytest.mark.parametrize("path", _pages(), ids=lambda p: p.relative_to(HTML).as_posix())
def test_page_renders_offline(page: DevTools, path: Path) -> None:
    page.events.clear()
    page.send("Page.navigate", url=path.as_uri())
    page.wait_for("Page.loadEventFired")
    result = page.send("Runtime.evaluate", expression=INSPECT, awaitPromise=True, returnByValue=True, timeout=60000)
    if "exceptionDetails" in result:
        pytest.fail(f"inspection script failed: {result['exceptionDetails']}")
    seen = json.loads(result["result"]["value"])
    page.drain(0.5)
    problems = _problems(page.events)
    assert seen["title"], "page has no title"
    assert not problems["remote requests"], f"{path.name} fetched from other hosts: {problems['remote requests']}"
    assert not problems["errors"], f"{path.name} reported errors: {problems['errors']}"
    assert not seen["broken"], f"{path.name} has images that do not load: {seen['broken']}"
    assert not seen["tex"], f"{path.name} shows raw TeX: {seen['tex']}"
