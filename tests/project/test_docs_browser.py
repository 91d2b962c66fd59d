"""The built site, as a reader's browser lays it out: no code block or table is clipped.

A code line longer than its block is cut at the block's edge and hidden behind a scroll
bar; a reader copying it by eye misses the end. The site is built once, served over HTTP on
127.0.0.1 and every page opened in headless Chromium at 1280 px, the width the docs' code
lines are written for (88 characters). Hidden content (the other tabs of a tab set, a
collapsed ``details``) is shown first, so that it is measured too. The test skips without
Chromium or the ``docs`` extra, except on CI, where it fails.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from typing import TYPE_CHECKING, Any

import pytest

from .test_docs_site import BUILD_TIMEOUT, Site, build_site, require_docs_tools

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

VIEWPORT = {"width": 1280, "height": 900}

# Shows every tab's content and opens every `details`, then returns what overflows: for a
# code block, its first line that reaches past the block's visible right edge (each line is
# a `span` of its own: `line_spans` in mkdocs.yml); for a table, its header.
MEASURE = """() => {
  const style = document.createElement("style");
  style.textContent =
    ".tabbed-set > .tabbed-content > .tabbed-block { display: block !important; }";
  document.head.append(style);
  document.querySelectorAll("details").forEach((d) => { d.open = true; });
  const clipped = [];
  for (const code of document.querySelectorAll("pre > code")) {
    if (code.scrollWidth <= code.clientWidth) continue;
    const box = code.getBoundingClientRect();
    const edge = box.left + code.clientLeft + code.clientWidth
      - parseFloat(getComputedStyle(code).paddingRight);
    // A line's span is a block as wide as the code: measure the text inside it.
    const right = (span) => {
      const range = document.createRange();
      range.selectNodeContents(span);
      return Math.max(...[...range.getClientRects()].map((rect) => rect.right));
    };
    const lines = [...code.querySelectorAll(":scope > span[id^='__span']")];
    const line = lines.find((span) => right(span) > edge + 0.5);
    const text = line ? line.textContent : code.textContent.split("\\n")[0];
    clipped.push({kind: "code", text: text.replace(/\\n$/, "")});
  }
  for (const wrap of document.querySelectorAll(".md-typeset__scrollwrap")) {
    if (wrap.scrollWidth <= wrap.clientWidth) continue;
    const header = wrap.querySelector("tr");
    clipped.push({kind: "table", text: header ? header.innerText.replace(/\\s+/g, " ") : ""});
  }
  return clipped;
}"""


def require_chromium() -> str:
    """The system's Chromium; skip without it, but fail on CI, where it must be installed."""
    chromium = shutil.which("chromium")
    if chromium is not None:
        return chromium
    message = "no `chromium` on PATH: install it (apt-get install chromium) to check the layout"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the built site without a line on stderr per request."""

    def log_message(self, format: str, *args: Any) -> None:
        del format, args


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Site:
    """The site, built once for this module; a failed build fails every test here."""
    site = build_site(tmp_path_factory.mktemp("site"))
    if site.build.returncode != 0:
        pytest.fail(f"mkdocs build --strict failed (see test_docs_site):\n{site.build.stderr}")
    return site


@pytest.fixture(scope="module")
def base_url(built: Site) -> Iterator[str]:
    """The built site over a real HTTP server on 127.0.0.1, stopped after the module."""
    handler = functools.partial(_QuietHandler, directory=str(built.directory))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/"
        finally:
            server.shutdown()
            thread.join()


def _pages(directory: Path) -> list[str]:
    return sorted(path.relative_to(directory).as_posix() for path in directory.rglob("*.html"))


def _clipped(base_url: str, pages: list[str], chromium: str) -> dict[str, list[dict[str, str]]]:
    """Each page's clipped blocks, measured in one browser, one page after the other."""
    from playwright.sync_api import sync_playwright

    found: dict[str, list[dict[str, str]]] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        try:
            tab = browser.new_context(viewport=VIEWPORT).new_page()
            for page in pages:
                response = tab.goto(base_url + page, wait_until="load")
                assert response is not None, page
                assert response.ok, f"{page}: HTTP {response.status}"
                if clipped := tab.evaluate(MEASURE):
                    found[page] = clipped
        finally:
            browser.close()
    return found


@pytest.mark.timeout(BUILD_TIMEOUT + 300)
def test_no_code_line_or_table_is_clipped_at_1280_px(built: Site, base_url: str) -> None:
    """At 1280 px no page has a code block or a table wider than the space it is given."""
    require_docs_tools()
    chromium = require_chromium()
    pages = _pages(built.directory)
    assert "index.html" in pages, f"the build wrote no index.html in {built.directory}"
    found = _clipped(base_url, pages, chromium)
    # Per page, each clipped block's first line too long (a table: its header).
    report = [
        f"{page}: {item['kind']}: {item['text']!r}"
        for page, items in found.items()
        for item in items
    ]
    assert not found, "clipped at 1280 px (wrap to 88 characters):\n" + "\n".join(report)
