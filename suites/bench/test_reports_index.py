"""reports/README.md indexes every report in reports/ and each of its relative links resolves."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REPORTS = ROOT / "reports"
INDEX = REPORTS / "README.md"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def relative_links(markdown: str) -> list[str]:
    """Targets of the Markdown links that are not URLs or in-page anchors, without their #fragment."""
    return [t.split("#", 1)[0] for t in LINK.findall(markdown) if not re.match(r"^[a-z]+:|^#", t)]


def reports(folder: Path = REPORTS) -> list[Path]:
    """The Markdown reports in ``folder`` (sub-folders are represented by their README.md)."""
    found = [p for p in folder.glob("*.md") if p.name != "README.md"]
    found += [p / "README.md" for p in folder.iterdir() if p.is_dir() and (p / "README.md").exists()]
    return sorted(found)


def unindexed(index: Path = INDEX) -> list[str]:
    """Reports next to ``index`` that it does not link to."""
    linked = {(index.parent / t).resolve() for t in relative_links(index.read_text(encoding="utf-8"))}
    linked |= {p / "README.md" for p in linked if p.is_dir()}
    return [str(p.relative_to(index.parent)) for p in reports(index.parent) if p.resolve() not in linked]


def dead_links(index: Path = INDEX) -> list[str]:
    """Relative links of ``index`` whose target does not exist."""
    return [t for t in relative_links(index.read_text(encoding="utf-8")) if not (index.parent / t).exists()]


def test_every_report_is_indexed():
    missing = unindexed()
    assert not missing, f"reports/README.md does not link to: {', '.join(missing)} (add a line under 'Reports')"


def test_index_links_resolve():
    dead = dead_links()
    assert not dead, f"reports/README.md links to missing paths: {', '.join(dead)}"


def test_checks_catch_a_missing_entry_and_a_dead_link(tmp_path):
    (tmp_path / "a.md").write_text("# a\n")
    (tmp_path / "b.md").write_text("# b\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "README.md").write_text("# sub\n")
    index = tmp_path / "README.md"
    index.write_text("[a](a.md) [web](https://x.org/b.md) [anchor](#b) [gone](gone.md) [sub](sub/)\n")
    assert unindexed(index) == ["b.md"]
    assert dead_links(index) == ["gone.md"]
    index.write_text("[a](a.md#top) [b](./b.md) [sub](sub/README.md)\n")
    assert unindexed(index) == [] and dead_links(index) == []

