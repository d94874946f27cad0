"""Checks of the HTML pages the project writes, shared by the graph view and report suites.

`parse_page` reads a page with the standard library's HTML parser (not the writer's own code) into
its elements, script elements and visible text; `browser` is a headless Chromium driven by selenium
(Debian's ``/usr/bin/chromium`` and ``chromedriver``), skipped with the reason when either is missing.
Use the fixture as ``from suites.html_checks import browser  # noqa: F401`` in a test module.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from html.parser import HTMLParser

import pytest

#: Chromium's flags: headless, nothing fetched or synced in the background.
CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--window-size=1280,800"]

#: Seconds a page may take to load, or a script to run, before the browser gives up.
PAGE_TIMEOUT_S = 60


@dataclass
class Page:
    """A parsed page: every start tag ``(tag, attrs)``, every script ``(attrs, content)``, the text outside scripts."""

    elements: list[tuple[str, dict[str, str | None]]] = field(default_factory=list)
    scripts: list[tuple[dict[str, str | None], str]] = field(default_factory=list)
    text: str = ""

    def handler_attributes(self) -> list[tuple[str, str]]:
        """``(tag, attribute)`` of every event-handler attribute (``onerror=`` ...) in the page."""
        return [(tag, name) for tag, attrs in self.elements for name in attrs if name.lower().startswith("on")]

    def tags(self, name: str) -> list[dict[str, str | None]]:
        """The attributes of every ``<name>`` element."""
        return [attrs for tag, attrs in self.elements if tag == name]


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page, self._script, self._text = Page(), None, []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.page.elements.append((tag, dict(attrs)))
        if tag == "script":
            self._script = (dict(attrs), [])

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._script is not None:
            self.page.scripts.append((self._script[0], "".join(self._script[1])))
            self._script = None

    def handle_data(self, data: str) -> None:
        (self._script[1] if self._script is not None else self._text).append(data)


def parse_page(text: str) -> Page:
    """The elements, scripts and text of an HTML page."""
    reader = _Reader()
    reader.feed(text)
    reader.close()
    reader.page.text = "".join(reader._text)
    return reader.page


def browser_missing() -> str | None:
    """Why no browser test can run here (selenium, chromium or chromedriver missing), or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install selenium)"
    for binary in ("chromium", "chromedriver"):
        if shutil.which(binary) is None:
            return f"{binary} is not installed (apt-get install chromium chromium-driver)"
    return None


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium with its own temporary profile, its console log kept (``get_log("browser")``)."""
    missing = browser_missing()
    if missing:
        pytest.skip(missing)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="spacegraph-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    options.binary_location = shutil.which("chromium")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    driver.set_page_load_timeout(PAGE_TIMEOUT_S)
    driver.set_script_timeout(PAGE_TIMEOUT_S)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)
