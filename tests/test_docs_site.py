"""The documentation site works from its own files, and every page is in its navigation.

The site is built here as `make docs` builds it (``mkdocs build --strict``, so a warning
fails too), into a temporary folder; then every HTML page and stylesheet is read for what
a browser would load: no ``<script src>``, stylesheet, icon, image, frame or font may
come from another host (offline, on a cluster or behind a firewall, it would not load).
Skipped where mkdocs (the ``docs`` extra) is not installed. `make docs-check` opens the
same pages in a browser (tools/docs_check.py).
"""

import html.parser
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

# Attributes whose URL the browser fetches as the page loads, per tag.
LOADED = {
    "script": ("src",),
    "img": ("src", "srcset"),
    "source": ("src", "srcset"),
    "iframe": ("src",),
    "frame": ("src",),
    "embed": ("src",),
    "object": ("data",),
    "video": ("src", "poster"),
    "audio": ("src",),
    "track": ("src",),
    "input": ("src",),
    "link": ("href",),
}
# <link> relations that name a page rather than load something.
LINK_NOT_LOADED = {"canonical", "alternate", "next", "prev", "author", "license", "help"}
CSS_URL = re.compile(r"""url\(\s*(['"]?)(.*?)\1\s*\)|@import\s+(['"])(.*?)\3""", re.S)


def is_external(url):
    url = url.strip()
    return bool(re.match(r"(?i)^(?:[a-z][a-z0-9+.-]*:)?//", url)) and not url.lower().startswith(
        "file:"
    )


def css_urls(text):
    """Every URL a stylesheet (or a style attribute) loads, data: URLs left out."""
    urls = []
    for match in CSS_URL.finditer(text):
        url = match.group(2) if match.group(2) is not None else match.group(4)
        if not url.strip().lower().startswith("data:"):
            urls.append(url.strip())
    return urls


class _Loads(html.parser.HTMLParser):
    """Collects the URLs an HTML page loads, and the ids of its elements."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.urls, self.ids, self._in_style = [], [], False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.append(attrs["id"])
        rel = set((attrs.get("rel") or "").lower().split())
        if tag == "link" and rel and rel <= LINK_NOT_LOADED:
            return
        for name in LOADED.get(tag, ()):
            value = attrs.get(name)
            if not value:
                continue
            if name == "srcset":
                self.urls += [part.strip().split()[0] for part in value.split(",") if part.strip()]
            else:
                self.urls.append(value)
        if attrs.get("style"):
            self.urls += css_urls(attrs["style"])
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        if tag == "style":
            self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.urls += css_urls(data)


def page_loads(text):
    """(URLs the page loads, ids of its elements)."""
    parser = _Loads()
    parser.feed(text)
    parser.close()
    return parser.urls, parser.ids


def external_loads(site):
    """``[(file, url)]`` for every external URL the built site at ``site`` loads."""
    found = []
    for path in sorted(site.rglob("*")):
        if path.suffix == ".html":
            urls = page_loads(path.read_text(errors="replace"))[0]
        elif path.suffix == ".css":
            urls = css_urls(path.read_text(errors="replace"))
        else:
            continue
        found += [(path.relative_to(site).as_posix(), u) for u in urls if is_external(u)]
    return found


def nav_pages(nav):
    """The Markdown files a mkdocs ``nav`` names, at any depth."""
    if isinstance(nav, str):
        return [nav] if nav.endswith(".md") else []
    if isinstance(nav, list):
        return [page for item in nav for page in nav_pages(item)]
    if isinstance(nav, dict):
        return [page for item in nav.values() for page in nav_pages(item)]
    return []


def test_the_scanner_sees_what_a_page_would_load():
    page = (
        '<link rel="stylesheet" href="https://cdn.example/x.css">'
        '<link rel="canonical" href="https://example.org/page/">'
        '<script src="//cdn.example/hl.js"></script><script src="js/base.js"></script>'
        '<img src="a.png" srcset="b.png 1x, https://img.example/c.png 2x">'
        "<div style=\"background: url('https://img.example/d.png')\"></div>"
        "<style>@import 'https://fonts.example/e.css';</style>"
        '<a href="https://example.org/">a link loads nothing</a><h2 id="3-d">x</h2>'
    )
    urls, ids = page_loads(page)
    assert [u for u in urls if is_external(u)] == [
        "https://cdn.example/x.css",
        "//cdn.example/hl.js",
        "https://img.example/c.png",
        "https://img.example/d.png",
        "https://fonts.example/e.css",
    ]
    assert ids == ["3-d"]
    css = "a{background:url(data:image/svg+xml;utf8,<svg xmlns='http://www.w3.org/2000/svg'/>)}"
    css += "@font-face{src:url(../webfonts/fa.woff2) format('woff2'),url(https://f.example/x.ttf)}"
    assert css_urls(css) == ["../webfonts/fa.woff2", "https://f.example/x.ttf"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The built site: the one `make docs` just built (``THEANO_DAG_DOCS_SITE``), or a
    fresh build."""
    built = os.environ.get("THEANO_DAG_DOCS_SITE")
    if built:
        return pathlib.Path(built).resolve()
    pytest.importorskip("mkdocs", reason="mkdocs is in the docs extra")
    pytest.importorskip("mkdocstrings", reason="mkdocstrings is in the docs extra")
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}{proc.stderr}"
    return out


def test_the_site_loads_nothing_from_another_host(site):
    assert (site / "index.html").exists()
    assert external_loads(site) == []


def test_code_is_coloured_at_build_time(site):
    tutorial = (site / "tutorial" / "index.html").read_text()
    assert '<div class="highlight">' in tutorial and '<span class="kn">import</span>' in tutorial
    assert "hljs" not in tutorial


def test_every_markdown_page_is_in_the_nav():
    import yaml  # mkdocs's own dependency

    yaml_loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml_loader)
    in_nav = nav_pages(config["nav"])
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(set(in_nav)) == pages
    assert len(in_nav) == len(set(in_nav)), "a page is in the nav twice"


def test_no_heading_id_starts_with_a_digit(site):
    """An id such as ``3-d-convolution`` is not a valid CSS selector: the theme's sidebar
    stops following the section."""
    bad = []
    for path in sorted(site.rglob("index.html")):
        ids = page_loads(path.read_text())[1]
        bad += [(path.relative_to(site).as_posix(), i) for i in ids if i[:1].isdigit()]
    assert bad == []


def test_headings_name_topics_not_tickets():
    heading = re.compile(r"^#{1,6} .*$", re.M)
    bad = []
    for path in sorted(DOCS.rglob("*.md")):
        text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
        bad += [
            (path.name, h)
            for h in heading.findall(text)
            if re.search(r"(?i)\b(issue|ticket|bug) #?\d+|\(#\d+\)", h)
        ]
    assert bad == []


def test_examples_paste_into_a_plain_install():
    """A user pastes the examples into an install without the test tools: no block may
    need pytest (an expected error is caught and printed, and its ```text shows it)."""
    block = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
    bad = []
    for path in sorted(DOCS.rglob("*.md")):
        for k, code in enumerate(block.findall(path.read_text())):
            if re.search(r"^\s*(import|from)\s+pytest\b|\bpytest\.", code, re.M):
                bad.append(f"{path.name} block {k}")
    assert bad == []


def _docs_check():
    import importlib.util

    path = ROOT / "tools" / "docs_check.py"
    spec = importlib.util.spec_from_file_location("docs_check", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _measured(**table):
    t = {"index": 0, "head": "a b", "left": 300.0, "right": 1200.0, "overflowX": "auto"}
    t |= {"scrollWidth": 900, "clientWidth": 900} | table
    return {
        "viewport": 1280,
        "pageWidth": 1280,
        "column": {"left": 300.0, "right": 1200.0},
        "tables": [t],
    }


def test_the_browser_check_judges_table_widths():
    check = _docs_check()
    assert check.table_problems(_measured()) == []
    # wider than its box but scrolling inside it: fine
    assert check.table_problems(_measured(scrollWidth=2400)) == []
    cut = check.table_problems(_measured(scrollWidth=2400, overflowX="visible"))
    assert cut == ["table 0 ('a b') is cut: wider than its box, which does not scroll"]
    past = _measured(right=1350.0)
    past["pageWidth"] = 1350
    assert check.table_problems(past) == [
        "the page scrolls sideways: 1350 px wide in a 1280 px window",
        "table 0 ('a b') runs past the text column (300-1350 px, column 300-1200 px)",
    ]


def test_the_browser_check_splits_links_into_the_site():
    check = _docs_check()
    base = "http://127.0.0.1:8000/"
    assert check.split_link(base + "engines/#the-call-path", base) == (
        "engines/index.html",
        "the-call-path",
    )
    assert check.split_link(base, base) == ("index.html", "")
    assert check.split_link(base + "performance.png", base) == ("performance.png", "")
    assert check.split_link("https://docs.dask.org", base) is None


def test_every_page_passes_the_browser_check(site):
    """`make docs-check` in a test: skipped without Playwright or a Chromium."""
    pytest.importorskip("playwright.sync_api", reason="Playwright is in the docs extra")
    check = _docs_check()
    chromium = check.find_chromium()
    if chromium is None:
        pytest.skip("no Chromium (apt-get install chromium)")
    problems, counts = check.check(site, chromium)
    assert problems == []
    pages = len(check.site_pages(site))
    assert counts["pages"] == pages >= 10 and counts["links"] > 100 and counts["tables"] > 20
