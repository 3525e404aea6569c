"""Open every page of the built documentation site in a headless Chromium and check it.

`make docs-check` runs this on ``build/site`` after `make docs`. The site is served on
127.0.0.1 (a port the system picks) and each page is loaded, scrolled to its end and back
(the theme's sidebar follows the headings as the page scrolls), and checked for:

- errors in the browser's console and uncaught exceptions in the page's scripts;
- requests that fail or answer an HTTP error, and any request to another host (the site
  must work offline: such a request is refused, and reported);
- images that did not load;
- links to a page or file of the site that does not exist, or to an anchor that is not
  on the page it names (links to other sites are counted, not followed: offline);
- tables wider than the text column, or a page that scrolls sideways: a wide table must
  scroll inside its own box (``docs/css/site.css``).

Playwright (the ``docs`` extra) drives the system's Chromium (``apt-get install
chromium`` on Debian; `make docs-check` installs it when run as root); its own browser
download is not needed. Without either, the check is skipped with a message and exits 0.

Run: ``python tools/docs_check.py [SITE] [--chromium PATH] [--width 1280]
[--screenshots DIR]``.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import shutil
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Offline and quiet: no sandbox (containers, root), no GPU, no background traffic.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Run in each page once it has loaded: what it shows, measured by the browser.
MEASURE = """() => {
  const root = document.documentElement;
  const main = document.querySelector('[role="main"]') || document.body;
  const column = main.getBoundingClientRect();
  // The page's own tables: not the theme's (hidden) keyboard-shortcuts dialog.
  const shown = [...main.querySelectorAll('table')].filter(t => t.getClientRects().length);
  const tables = shown.map((t, i) => {
    const r = t.getBoundingClientRect();
    return {
      index: i,
      head: (t.rows[0] ? t.rows[0].innerText : '').replace(/\\s+/g, ' ').slice(0, 60),
      left: r.left, right: r.right, scrollWidth: t.scrollWidth, clientWidth: t.clientWidth,
      overflowX: getComputedStyle(t).overflowX,
    };
  });
  const images = [...document.images].map(img => ({
    src: img.currentSrc || img.src, ok: img.complete && img.naturalWidth > 0,
  }));
  const links = [...document.querySelectorAll('a[href]')].map(a => a.href);
  const ids = [...document.querySelectorAll('[id], a[name]')].map(e => e.id || e.name);
  return {
    viewport: root.clientWidth, pageWidth: root.scrollWidth,
    column: {left: column.left, right: column.right},
    tables, images, links, ids,
  };
}"""


def find_chromium(explicit=None):
    """The Chromium to drive: ``explicit``, ``$CHROMIUM``, or the first on the PATH."""
    for candidate in (explicit, os.environ.get("CHROMIUM")):
        if candidate:
            return candidate if Path(candidate).exists() else shutil.which(candidate)
    return next(filter(None, map(shutil.which, CHROMIUM_NAMES)), None)


def site_pages(site):
    """Every HTML page of the built site, as paths relative to it (``a/index.html``)."""
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the report says what failed; no access log
        pass


def serve(site):
    """(server, base URL) serving ``site`` on 127.0.0.1, in a daemon thread."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def table_problems(measured, slack=1.0):
    """What is wrong with the width of a page and its tables, as lines of text."""
    problems = []
    if measured["pageWidth"] > measured["viewport"] + slack:
        problems.append(
            f"the page scrolls sideways: {measured['pageWidth']} px wide in a "
            f"{measured['viewport']} px window"
        )
    column = measured["column"]
    for t in measured["tables"]:
        where = f"table {t['index']} ({t['head']!r})"
        if t["right"] > column["right"] + slack or t["left"] < column["left"] - slack:
            problems.append(
                f"{where} runs past the text column ({t['left']:.0f}-{t['right']:.0f} px, "
                f"column {column['left']:.0f}-{column['right']:.0f} px)"
            )
        if t["scrollWidth"] > t["clientWidth"] + slack and t["overflowX"] not in (
            "auto",
            "scroll",
        ):
            problems.append(f"{where} is cut: wider than its box, which does not scroll")
    return problems


def split_link(href, base):
    """(site path of the page or file, fragment) for a link into the site, else None."""
    parsed = urllib.parse.urlsplit(href)
    if not href.startswith(base):
        return None
    path = urllib.parse.unquote(parsed.path)[len(urllib.parse.urlsplit(base).path) :]
    if path == "" or path.endswith("/"):
        path += "index.html"
    return path, urllib.parse.unquote(parsed.fragment)


def watch(page, problems, base, page_path):
    """Append to ``problems`` what goes wrong while ``page`` loads and runs."""

    def on_console(msg):
        if msg.type == "error":
            problems.append(f"console error: {msg.text}")

    def on_request_failed(request):
        if request.url.startswith(base):  # another host's requests are refused and reported
            problems.append(f"request failed: {request.url} ({request.failure})")

    def on_response(response):
        # The theme's 404 page is served as itself; any other error status is a fault.
        if response.status >= 400 and page_path != "404.html":
            problems.append(f"HTTP {response.status}: {response.url}")

    page.on("console", on_console)
    page.on("pageerror", lambda exc: problems.append(f"script error: {exc}"))
    page.on("requestfailed", on_request_failed)
    page.on("response", on_response)


def check(site, chromium, width=1280, height=900, screenshots=None):
    """Check every page of ``site``; returns ``(lines of problems, counts)``."""
    from playwright.sync_api import sync_playwright

    server, base = serve(site)
    problems, ids, links, counts = (
        [],
        {},
        [],
        dict.fromkeys(("pages", "tables", "images", "links", "external links"), 0),
    )
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=chromium, headless=True, args=CHROMIUM_ARGS
            )
            context = browser.new_context(viewport={"width": width, "height": height})

            def refuse_other_hosts(route):
                url = route.request.url
                if url.startswith(base) or url.startswith(("data:", "blob:")):
                    route.continue_()
                else:
                    current.append(f"requests another host: {url}")
                    route.abort()

            context.route("**/*", refuse_other_hosts)
            for page_path in site_pages(site):
                current = []
                page = context.new_page()
                watch(page, current, base, page_path)
                page.goto(base + page_path, wait_until="load")
                # Scroll to the end and back: the sidebar's scroll spy runs on each heading.
                page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
                page.wait_for_timeout(100)
                page.evaluate("window.scrollTo(0, 0)")
                page.wait_for_timeout(100)
                measured = page.evaluate(MEASURE)
                if screenshots:
                    shot = Path(screenshots) / (page_path.replace("/", "_")[:-5] + ".png")
                    shot.parent.mkdir(parents=True, exist_ok=True)
                    page.screenshot(path=str(shot))
                page.close()
                current += table_problems(measured)
                current += [
                    f"image did not load: {i['src']}" for i in measured["images"] if not i["ok"]
                ]
                ids[page_path] = set(measured["ids"])
                links += [(page_path, href) for href in measured["links"]]
                counts["pages"] += 1
                counts["tables"] += len(measured["tables"])
                counts["images"] += len(measured["images"])
                problems += [f"{page_path}: {line}" for line in current]
            browser.close()
        problems += link_problems(links, ids, base, site, counts)
    finally:
        server.shutdown()
    return problems, counts


def link_problems(links, ids, base, site, counts):
    """Broken links into the site: a missing page or file, or an anchor not on its page."""
    problems, seen = [], set()
    for page_path, href in links:
        if (page_path, href) in seen:
            continue
        seen.add((page_path, href))
        if not href.startswith(("http://", "https://")):
            continue  # mailto: and the like
        target = split_link(href, base)
        if target is None:
            counts["external links"] += 1
            continue
        counts["links"] += 1
        path, fragment = target
        if path in ids:
            if fragment and fragment not in ids[path]:
                problems.append(f"{page_path}: link to a missing anchor: {href}")
            continue
        try:
            with urllib.request.urlopen(base + urllib.parse.quote(path), timeout=10):
                pass
        except (urllib.error.URLError, OSError) as exc:
            problems.append(f"{page_path}: broken link: {href} ({exc})")
    return problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("site", nargs="?", type=Path, default=ROOT / "build" / "site")
    ap.add_argument("--chromium", help="the browser to drive (default: chromium on the PATH)")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=900)
    ap.add_argument("--screenshots", type=Path, help="save a screenshot of each page here")
    args = ap.parse_args(argv)
    if not (args.site / "index.html").exists():
        raise SystemExit(f"{args.site}/index.html not found: run `make docs` first")
    try:
        import playwright.sync_api  # noqa: F401  (the docs extra)
    except ImportError:
        print("docs-check skipped: Playwright is not installed (pip install '.[docs]')")
        return 0
    chromium = find_chromium(args.chromium)
    if chromium is None:
        print("docs-check skipped: no Chromium found (apt-get install chromium, or --chromium)")
        return 0
    problems, counts = check(args.site, chromium, args.width, args.height, args.screenshots)
    summary = ", ".join(f"{n} {what}" for what, n in counts.items())
    if problems:
        print("\n".join(problems))
        print(f"docs-check: {len(problems)} problems ({summary} checked)")
        return 1
    print(f"docs-check: every page fine in Chromium at {args.width} px ({summary} checked)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
