"""The documentation site: every page under docs/ is in the nav of mkdocs.yml, the site builds with
``mkdocs build --strict`` (what ``tox -e docs`` runs), and a broken link, a missing anchor or a page left
out of the nav fails that build. The builds need the ``docs`` extra and skip without it."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from suites.docs.docs_blocks import DOCS, ROOT

CONFIG = ROOT / "mkdocs.yml"
NEEDED = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")


def _nav_pages(entry) -> list[str]:
    if isinstance(entry, str):
        return [entry] if entry.endswith(".md") else []
    if isinstance(entry, list):
        return [page for item in entry for page in _nav_pages(item)]
    if isinstance(entry, dict):
        return [page for value in entry.values() for page in _nav_pages(value)]
    return []


def site_pages() -> set[str]:
    """The Markdown pages of docs/, relative to it (the committed reports it links to are no pages of it)."""
    return {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if "reports" not in p.relative_to(DOCS).parts}


def test_every_page_is_in_the_nav_and_every_nav_entry_exists() -> None:
    config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    nav = _nav_pages(config["nav"])
    assert len(nav) == len(set(nav)), f"pages twice in the nav: {sorted(p for p in nav if nav.count(p) > 1)}"
    pages = site_pages()
    assert not pages - set(nav), f"docs/ pages missing from the nav of mkdocs.yml: {sorted(pages - set(nav))}"
    assert not set(nav) - pages, f"nav entries of mkdocs.yml without a page: {sorted(set(nav) - pages)}"


def _installed(name: str) -> bool:
    """Whether module ``name`` imports (a dotted name whose parent package is missing does not)."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # find_spec imports the parent package of a dotted name
        return False


def _build(config: Path, site: Path) -> subprocess.CompletedProcess:
    missing = [name for name in NEEDED if not _installed(name)]
    if missing:
        pytest.skip(f"the docs extra is not installed ({', '.join(missing)} missing): pip install -e '.[docs]'")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["NO_MKDOCS_2_WARNING"] = "1"
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_the_site_builds_strict(tmp_path: Path) -> None:
    proc = _build(CONFIG, tmp_path / "site")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (tmp_path / "site" / "api" / "spaces" / "index.html").read_text().count("FloatBox") > 3


def test_a_broken_link_an_unknown_anchor_or_a_page_outside_the_nav_fail_the_build(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs, ignore=shutil.ignore_patterns("reports"))
    (docs / "reports").symlink_to(ROOT / "reports", target_is_directory=True)
    config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    config["docs_dir"] = str(docs)
    config["plugins"][1]["mkdocstrings"]["handlers"]["python"]["paths"] = [str(ROOT)]
    copy = tmp_path / "mkdocs.yml"
    copy.write_text(yaml.safe_dump(config), encoding="utf-8")
    assert _build(copy, tmp_path / "site-ok").returncode == 0, "the unchanged copy must build"

    index = docs / "index.md"
    index.write_text(index.read_text() + "\n[gone](tutorials/no_such_page.md) [anchor](cli.md#no-such-heading)\n")
    (docs / "orphan.md").write_text("# Not in the nav\n")
    proc = _build(copy, tmp_path / "site")
    assert proc.returncode != 0
    for named in ("tutorials/no_such_page.md", "no-such-heading", "orphan.md"):
        assert named in proc.stderr, f"{named!r} not reported:\n{proc.stderr[-3000:]}"


def test_the_readme_links_resolve() -> None:
    """README.md is no page of the site (mkdocs does not check it): each relative link names a file of the tree."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [link.split("#", 1)[0] for link in links if not re.match(r"[a-z]+:", link) and not link.startswith("#")]
    assert len(local) > 20
    missing = sorted({link for link in local if not (ROOT / link).exists()})
    assert not missing, f"README.md links to missing paths: {missing}"
