"""The built book, opened page by page in headless Chromium.

Runs after the book is built (``make test`` calls it once ``_build/html`` holds the pages built from the stored
outputs; the first pytest run of ``make test`` does not collect this folder). It skips where no book has been
built or no Chromium is installed. Chromium is driven over the DevTools protocol with ``websocket-client``.

For every HTML page it asserts that
- no request leaves the machine (only ``file:``, ``data:``, ``blob:`` and ``about:`` URLs are fetched),
- no console error, uncaught exception or failed load is reported,
- every image loads (``HTMLImageElement.decode`` resolves with a non-zero natural width),
- no raw TeX delimiter (``$$``, ``\\(``, ``\\[``) is left in the rendered text once MathJax has typeset the page,
- every solution under a chapter's Exercises heading, prose and code, is collapsed until opened,
- and, at a 1280-px window (the conventions of issue 33), the typography of the text column:
  no figure image is displayed below 75 % of its natural width, and no code block, cell output, table or
  display equation scrolls or is clipped sideways (an element whose ``scrollWidth`` exceeds its
  ``clientWidth``).

The typography violations name the page, the section and the element (the cell number, the first code line or
the equation), so a chapter's owner can find them. As a script it prints every violation of every page instead
of stopping at the first::

    python tests/browser/test_browser.py --report _build/html
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_book_conventions import png_dpi as _png_dpi  # noqa: E402  (tests/, beside this folder)

websocket = pytest.importorskip("websocket", reason="websocket-client is not installed")

ROOT = Path(__file__).resolve().parents[2]
HTML = Path(os.environ.get("HAPREF_BOOK_HTML", ROOT / "_build" / "html"))
BROWSER = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
LOCAL_SCHEMES = {"file", "data", "blob", "about", "chrome-error"}
WINDOW = (1280, 900)  # a laptop window: the text column is then 676 px wide
MIN_IMAGE_SCALE = 0.75  # a figure shown below 75 % of its natural width has 4-6 px tick labels

pytestmark = [] if __name__ == "__main__" else [
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

# Runs in the loaded page (after INSPECT, so MathJax has typeset and the images are decoded): the typography of
# the article at the current window width. Each violation names the section (its id), the cell (its number among
# the page's cells) and the element itself.
TYPOGRAPHY = r"""
(() => {
  const article = document.querySelector("article.bd-article") || document.querySelector("main") || document.body;
  const cells = Array.from(article.querySelectorAll("div.cell"));
  const where = el => {
    const section = el.closest("section[id]");
    const cell = el.closest("div.cell");
    const parts = [section ? "#" + section.id : "top"];
    if (cell) { parts.push("cell " + (cells.indexOf(cell) + 1)); }
    return parts.join(", ");
  };
  const snippet = text => {
    const line = (text || "").split("\n").find(l => l.trim()) || "";
    return line.trim().slice(0, 70);
  };
  const out = [];
  const hidden = el => el.offsetParent === null || el.closest("details:not([open])");
  for (const img of article.querySelectorAll("img")) {
    if (!img.naturalWidth || hidden(img)) continue;
    const shown = img.getBoundingClientRect().width;
    const scale = shown / img.naturalWidth;
    if (scale < MIN_SCALE) {
      const src = (img.currentSrc || img.src).split("/").pop();
      out.push({kind: "image", where: where(img), src: img.currentSrc || img.src, shown: shown,
                natural: img.naturalWidth,
                what: `${src.slice(0, 16)}... shown ${Math.round(shown)} of ${img.naturalWidth} px ` +
                      `(${scale.toFixed(2)} < ${MIN_SCALE})`});
    }
  }
  for (const pre of article.querySelectorAll("pre")) {
    if (hidden(pre)) continue;
    if (pre.scrollWidth > pre.clientWidth + 1) {
      const kind = pre.closest(".cell_output, .output") ? "output" : "code";
      out.push({kind: kind, where: where(pre),
                what: `${pre.scrollWidth} px wide in a ${pre.clientWidth} px box: "${snippet(pre.textContent)}"`});
    }
  }
  for (const box of article.querySelectorAll(".pst-scrollable-table-container, div.output.text_html")) {
    if (hidden(box)) continue;
    if (box.scrollWidth > box.clientWidth + 1) {
      const text = box.textContent.replace(/\s+/g, " ");
      out.push({kind: "table", where: where(box),
                what: `${box.scrollWidth} px wide in a ${box.clientWidth} px box: "${snippet(text)}"`});
    }
  }
  for (const box of article.querySelectorAll("div.math")) {
    if (hidden(box)) continue;
    const math = box.querySelector("mjx-container") || box;
    const inner = math.firstElementChild || math;
    const needed = Math.max(box.scrollWidth, math.scrollWidth, inner.getBoundingClientRect().width);
    const room = Math.min(box.clientWidth, article.clientWidth);
    if (needed > room + 1) {
      const label = box.querySelector(".eqno a, .eqno") || box.previousElementSibling;
      const tex = (math.getAttribute && math.getAttribute("aria-label")) || box.textContent;
      const name = box.id || (label && label.id) || "";
      out.push({kind: "equation", where: where(box),
                what: `${Math.round(needed)} px wide in a ${room} px column ${name}: "${snippet(tex)}"`});
    }
  }
  return JSON.stringify(out);
})()
""".replace("MIN_SCALE", repr(MIN_IMAGE_SCALE))


# Runs in the loaded page: what a reader sees under the "Exercises" heading before opening anything. Every
# solution (a dropdown admonition) shows only its title, every code cell there shows neither its code nor its
# output; what remains visible is the exercises themselves. Reports each visible solution part.
SOLUTIONS = r"""
(() => {
  const section = document.querySelector("section#exercises");
  if (!section) { return JSON.stringify({found: false, visible: [], solutions: 0}); }
  const hidden = el => el.offsetParent === null || el.closest("details:not([open])") !== null
                       || el.getClientRects().length === 0 || getComputedStyle(el).visibility === "hidden";
  const visible = [];
  const admonitions = Array.from(section.querySelectorAll(".admonition")).filter(b => !b.closest("div.cell"));
  for (const box of admonitions) {
    const title = box.querySelector(".admonition-title, summary");
    const name = (title ? title.textContent : box.textContent).trim().slice(0, 50);
    if (!box.classList.contains("dropdown")) { visible.push(`not a dropdown: "${name}"`); continue; }
    for (const part of box.children) {
      if (part === title || part.matches(".admonition-title, summary, button, .toggle-button")) continue;
      if (!hidden(part) && part.textContent.trim()) {
        visible.push(`open solution: "${name}": "${part.textContent.trim().slice(0, 40)}"`);
      }
    }
  }
  for (const cell of section.querySelectorAll("div.cell")) {
    for (const part of cell.querySelectorAll(".cell_input, .cell_output")) {
      if (!hidden(part) && part.textContent.trim()) {
        visible.push(`visible ${part.classList.contains("cell_input") ? "code" : "output"}: ` +
                     `"${part.textContent.trim().slice(0, 40)}"`);
      }
    }
  }
  // Prose between a solution and the next exercise ("**N.**") that is outside any collapsed block.
  let solved = false;
  for (const part of section.children) {
    if (part.matches("h1, h2, h3, span")) continue;
    const strong = part.matches("p") && part.firstElementChild && part.firstElementChild.matches("strong")
                   && part.textContent.trim().startsWith(part.firstElementChild.textContent.trim());
    if (strong && /^\d+\.$/.test(part.firstElementChild.textContent.trim())) { solved = false; continue; }
    if (part.matches("div.cell, .admonition")) { solved = true; continue; }
    if (solved && !hidden(part) && part.textContent.trim()) {
      visible.push(`prose outside a collapsed block: "${part.textContent.trim().slice(0, 40)}"`);
    }
  }
  return JSON.stringify({found: true, visible: visible, solutions: admonitions.length});
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


@contextlib.contextmanager
def chromium(browser: str | None = None):
    """Headless Chromium with a 1280-px window, yielding a DevTools session on its page (used by the tests and
    by ``--report``)."""
    profile = tempfile.mkdtemp(prefix="hapref-chromium-")
    width, height = WINDOW
    args = [browser or BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-extensions",
            "--disable-default-apps", "--mute-audio", f"--user-data-dir={profile}", "--remote-debugging-port=0",
            "--hide-scrollbars", f"--window-size={width},{height}", "about:blank"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.is_file() and port_file.read_text().strip()):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Chromium did not start (exit code {proc.poll()})")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        targets = _json(f"http://127.0.0.1:{port}/json/list")
        target = next(t for t in targets if t["type"] == "page")
        session = DevTools(target["webSocketDebuggerUrl"])
        for domain in ("Page", "Network", "Runtime", "Log"):
            session.send(f"{domain}.enable")
        # The window's layout width, whatever the headless default: the text column is then 676 px wide.
        session.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                     mobile=False)
        yield session
        session.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def page():
    try:
        with chromium() as session:
            yield session
    except RuntimeError as e:
        pytest.fail(str(e))


def visit(page: DevTools, path: Path) -> dict:
    """Opens one page and returns what it showed: ``seen`` (INSPECT's report), ``problems`` (requests and errors
    from the DevTools events) and ``typography`` (TYPOGRAPHY's violations)."""
    page.events.clear()
    page.send("Page.navigate", url=path.as_uri())
    page.wait_for("Page.loadEventFired")
    result = page.send("Runtime.evaluate", expression=INSPECT, awaitPromise=True, returnByValue=True, timeout=60000)
    if "exceptionDetails" in result:
        raise RuntimeError(f"inspection script failed on {path}: {result['exceptionDetails']}")
    seen = json.loads(result["result"]["value"])
    page.drain(0.5)
    typo = page.send("Runtime.evaluate", expression=TYPOGRAPHY, returnByValue=True, timeout=60000)
    if "exceptionDetails" in typo:
        raise RuntimeError(f"typography script failed on {path}: {typo['exceptionDetails']}")
    violations = [v for v in json.loads(typo["result"]["value"]) if not _drawn_for_the_column(v)]
    sol = page.send("Runtime.evaluate", expression=SOLUTIONS, returnByValue=True, timeout=60000)
    if "exceptionDetails" in sol:
        raise RuntimeError(f"solutions script failed on {path}: {sol['exceptionDetails']}")
    return {"seen": seen, "problems": _problems(page.events), "typography": violations,
            "solutions": json.loads(sol["result"]["value"])}


def png_dpi(path: Path) -> float | None:
    """The resolution a PNG file declares (its ``pHYs`` chunk, in pixels per inch), or None where it declares none."""
    try:
        return _png_dpi(path.read_bytes())
    except OSError:
        return None


def _drawn_for_the_column(violation: dict) -> bool:
    """A PNG saved at more than 100 dpi (a sharper copy of a figure): its natural width is its width in inches at
    matplotlib's 100 dpi, the size its fonts were chosen for, not its pixel count."""
    if violation["kind"] != "image":
        return False
    url = urllib.parse.urlsplit(violation["src"])
    dpi = png_dpi(Path(urllib.parse.unquote(url.path))) if url.scheme == "file" else None
    if not dpi or dpi <= 100.5:
        return False
    natural = violation["natural"] * 100 / dpi
    scale = violation["shown"] / natural
    violation["what"] += f"; at 100 dpi {natural:.0f} px, {scale:.2f}"
    return scale >= MIN_IMAGE_SCALE


_VISITS: dict[Path, dict] = {}


def _visit_once(page: DevTools, path: Path) -> dict:
    if path not in _VISITS:
        _VISITS[path] = visit(page, path)
    return _VISITS[path]


def format_violations(name: str, violations: list[dict]) -> str:
    return "\n".join(f"{name} [{v['where']}] {v['kind']}: {v['what']}" for v in violations)


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


def _name(path: Path) -> str:
    return path.relative_to(HTML).as_posix()


@pytest.mark.parametrize("path", _pages(), ids=_name)
def test_page_renders_offline(page: DevTools, path: Path) -> None:
    shown = _visit_once(page, path)
    seen, problems = shown["seen"], shown["problems"]
    assert seen["title"], "page has no title"
    assert not problems["remote requests"], f"{path.name} fetched from other hosts: {problems['remote requests']}"
    assert not problems["errors"], f"{path.name} reported errors: {problems['errors']}"
    assert not seen["broken"], f"{path.name} has images that do not load: {seen['broken']}"
    assert not seen["tex"], f"{path.name} shows raw TeX: {seen['tex']}"


@pytest.mark.parametrize("path", _pages(), ids=_name)
def test_page_typography(page: DevTools, path: Path) -> None:
    """At a 1280-px window: figures at >= 75 % of their natural width, nothing scrolls or is clipped sideways."""
    violations = _visit_once(page, path)["typography"]
    assert not violations, (f"{len(violations)} typography violations at a {WINDOW[0]}-px window "
                            f"(figures >= {MIN_IMAGE_SCALE:.0%} of natural width, no sideways scrolling):\n"
                            + format_violations(_name(path), violations))


def _chapters() -> list[Path]:
    return [p for p in _pages() if p.parent.name == "book" and p.name[:2].isdigit()]


@pytest.mark.parametrize("path", _chapters(), ids=_name)
def test_solutions_are_collapsed(page: DevTools, path: Path) -> None:
    """Under each chapter's Exercises heading a reader sees the exercises only: every solution, prose and code,
    is collapsed until opened."""
    sol = _visit_once(page, path)["solutions"]
    assert sol["found"], f"{_name(path)} has no Exercises section"
    assert sol["solutions"] > 0, f"{_name(path)}: no collapsed solution under Exercises"
    assert not sol["visible"], f"{_name(path)}: solution parts visible before opening:\n  " + "\n  ".join(
        sol["visible"])


#: A GitHub table's separator row as text: |---| or |:---|, or its dashes typeset as dashes (|——|).
_RAW_TABLE = re.compile(r"\|\s*:?(?:-{3,}|[\u2013\u2014]+)-*:?\s*\|")


@pytest.mark.parametrize("path", _chapters(), ids=_name)
def test_markdown_tables_render_as_tables(path: Path) -> None:
    """The chapters' tables are Markdown outputs of code cells (``display(Markdown(...))``); the book renders
    them as HTML tables (``nb_render_markdown_format: gfm``), so no page shows a table's raw ``|---|`` row."""
    from html.parser import HTMLParser

    class Text(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.skip, self.chunks = 0, []

        def handle_starttag(self, tag, attrs) -> None:
            self.skip += tag in ("pre", "code", "script", "style")

        def handle_endtag(self, tag) -> None:
            self.skip -= tag in ("pre", "code", "script", "style") and self.skip > 0

        def handle_data(self, data) -> None:
            if not self.skip:
                self.chunks.append(data)

    parser = Text()
    parser.feed(path.read_text(errors="replace"))
    raw = [c.strip()[:80] for c in parser.chunks if _RAW_TABLE.search(c)]
    assert not raw, f"{_name(path)} shows Markdown tables as text: {raw}"


def report(html: Path) -> int:
    """Prints every typography violation of every page of the book built in ``html``; returns their number."""
    global HTML
    HTML = html.resolve()
    pages = _pages()
    if not pages:
        raise SystemExit(f"no built book at {html}")
    if BROWSER is None:
        raise SystemExit("no Chromium installed (chromium, chromium-browser or google-chrome)")
    total = 0
    with chromium() as session:
        for path in pages:
            shown = visit(session, path)
            violations = shown["typography"]
            total += len(violations)
            other = [*shown["problems"]["remote requests"], *shown["problems"]["errors"], *shown["seen"]["broken"],
                     *shown["seen"]["tex"]]
            print(f"{_name(path)}: {len(violations)} typography violations"
                  + (f", {len(other)} other problems" if other else ""))
            if violations:
                print(format_violations(_name(path), violations))
            for problem in other:
                print(f"{_name(path)} other: {problem}")
    print(f"total: {total} typography violations on {len(pages)} pages")
    return total


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", metavar="HTML", type=Path, default=HTML,
                        help="the built book's html folder (default: %(default)s)")
    raise SystemExit(1 if report(parser.parse_args().report) else 0)
