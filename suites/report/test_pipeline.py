"""One report pipeline: ``--from-json`` draws a committed run again without measuring, the headline figures table
is what the generator makes of the committed latest runs, and nothing under ``reports/`` names a local path."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

import spacegraph.report.scenarios  # noqa: F401  (registers the scenarios)
from harness.measure.figures import Baseline, Figure, Panel, Ratio, Series, Table
from harness.measure.progress import Progress
from spacegraph.report import headline, rerender, runner, writers
from spacegraph.report.cli import main as report_main
from spacegraph.report.registry import SCENARIOS, Context, Scenario

REPO = Path(__file__).resolve().parents[2]
REPORTS = REPO / "reports"


def draw(result: dict) -> list[Figure]:
    """A tiny scenario's drawing: one series and a table of ``result["rates"]``, a ratio of the first two."""
    rates = result["rates"]
    return [Figure(name="tiny", title="Tiny", figure_ref="Fig. T", panels=[Panel(title="rates")],
                   series=[Series("ours", list(range(len(rates))), rates, panel="rates")],
                   tables=[Table("rates", ["i", "rate"], [[i, r] for i, r in enumerate(rates)])],
                   ratios=[Ratio("first / second", rates[0] / rates[1], target="> 1.0")], raw=result,
                   headline=f"first rate {rates[0]}")]


def tiny_run(ctx: Context) -> list[Figure]:
    ctx.progress.step("tiny")
    return draw({"rates": [4.0, 2.0], "environment": {"git_revision": "abc1234def", "processor": "a CPU"}})


TINY = Scenario(name="tiny", title="Tiny", figure_ref="Fig. T", run=tiny_run, render=draw)


def test_a_written_report_is_drawn_again_from_its_json(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "peers_missing", lambda: None)
    report = runner.run([TINY], quick=True, seeds=1, only=["tiny"], baseline_dir=tmp_path / "none", stream=None)
    paths = writers.write(report, tmp_path / "run")
    doc = json.loads(paths["json"].read_text())
    doc["figures"][0]["raw"]["rates"] = [9.0, 3.0]  # the drawing comes from the measured result it keeps
    (tmp_path / "edited.json").write_text(json.dumps(doc))
    again = rerender.rerender(tmp_path / "edited.json", {"tiny": TINY})
    (fig,) = again.figures
    assert fig.tables[0].rows == [[0, 9.0], [1, 3.0]] and fig.ratios[0].value == 3.0
    assert fig.headline == "first rate 9.0"
    assert fig.meta["command"] == report.figures[0].meta["command"] and fig.meta["scenario"] == "tiny"
    assert again.revision == report.revision and again.machine == report.machine
    assert "edited.json" in fig.meta["rendered from"]
    writers.write(again, tmp_path / "again")  # the writer takes it as it takes a measured run
    assert "first rate 9.0" in (tmp_path / "again" / "report.md").read_text()


def test_a_figure_reads_back_what_it_wrote():
    (fig,) = tiny_run(Context(quick=True, seeds=1, progress=Progress("tiny", stream=None)))
    fig.baselines = [Baseline("paper", "a source", "Table 1", "a big machine", "rate", [{"x": 1, "y": 2.0}])]
    fig.meta, fig.peer_missing, fig.notes = {"command": "spacegraph report"}, "no peer", ["a note"]
    assert Figure.from_dict(json.loads(json.dumps(fig.to_dict()))) == fig
    assert Figure.from_dict({**fig.to_dict(), "from_a_later_version": 1}) == fig


def test_a_measured_result_is_drawn_by_the_scenario_named(tmp_path):
    path = tmp_path / "tiny_result.json"
    path.write_text(json.dumps({"rates": [6.0, 2.0], "commit": "feedbeef", "machine": "a big box",
                                "date": "2026-11-01"}))
    report = rerender.rerender(path, {"tiny": TINY}, ["tiny"], baseline_dir=tmp_path)
    (fig,) = report.figures
    assert fig.ratios[0].value == 3.0 and report.revision == "feedbeef" and fig.meta["machine"] == "a big box"
    assert fig.meta["command"].endswith("spacegraph report --only tiny --seeds 2")
    assert fig.meta["rendered from"] == "tiny_result.json (measured 2026-11-01)"  # no local path
    assert "a big box" in writers.markdown(report, {})


@pytest.mark.parametrize("content, only, message", [
    ('{"rates": [1.0, 2.0]}', None, "a measured result, not a report.json; name the scenario that draws it with "
                                    "--only NAME"),
    ('{"something": "else"}', ["tiny"], "not a result of scenario 'tiny' \\(KeyError"),
    ("[1, 2]", ["tiny"], "--from-json: .*holds a JSON list, not an object"),
    ("{not json", ["tiny"], "--from-json: .*"),
    ('{"figures": [{"title": "no name"}]}', None, "figures\\[0\\]: a figure needs 'name'"),
])
def test_what_cannot_be_drawn_is_named(tmp_path, content, only, message):
    path = tmp_path / "result.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        rerender.rerender(path, {"tiny": TINY}, only)


def test_the_command_says_what_it_cannot_draw_in_one_line(tmp_path, capsys):
    path = tmp_path / "result.json"
    path.write_text('{"rates": [1.0, 2.0]}')
    assert report_main(["--from-json", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("spacegraph report: --from-json result.json: this is a measured result") and "\n" not in err
    assert not (tmp_path / "out").exists()


def test_the_committed_headline_table_is_what_the_committed_runs_make():
    committed = (REPORTS / "headline.md").read_text(encoding="utf-8")
    assert committed == headline.markdown(REPORTS, list(SCENARIOS)), (
        "reports/headline.md is stale: run `spacegraph report --headline` and commit it")


def test_the_headline_follows_the_runs_and_names_command_commit_and_machine(tmp_path):
    for name in ("act", "learning"):
        shutil.copytree(REPORTS / name, tmp_path / name)
    table = headline.markdown(tmp_path, list(SCENARIOS))
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 2 and rows[0].startswith("| Act throughput") and "| [learning](learning/report.md) |" in rows[1]
    assert "`spacegraph report --only act" in rows[0] and "AMD EPYC" in rows[0]
    doc = json.loads((tmp_path / "act" / "report.json").read_text())
    doc["figures"][0]["headline"], doc["figures"][0]["meta"]["revision"] = "a new result", "0123456789abcdef"
    (tmp_path / "act" / "report.json").write_text(json.dumps(doc))
    changed = headline.markdown(tmp_path, list(SCENARIOS))
    assert changed != table and "| a new result | `spacegraph report --only act" in changed and "| 0123456 |" in changed
    (tmp_path / "act" / "report.json").write_text("{broken")
    with pytest.raises(ValueError, match="act/report.json: not a report.json of spacegraph report"):
        headline.markdown(tmp_path, list(SCENARIOS))



@pytest.mark.parametrize("revision, short", [
    ("0123456789abcdef", "0123456"), ("0123456789abcdef+dirty", "0123456-dirty"), ("0123456-dirty", "0123456-dirty"),
    ("", "unknown"), ("unknown", "unknown"),
    # a figure whose runs were measured on several commits (learning_long's seeds spread over sessions)
    ("2 values: 0123456789ab+dirty, fedcba987654", "0123456-dirty, fedcba9")])
def test_the_headline_shortens_each_commit_a_figure_names(revision, short):
    assert runner.short_revision(revision) == short

def test_the_readme_carries_the_generated_headline_section():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    expected = headline.section(REPORTS, list(SCENARIOS), link_base="reports/")
    assert headline.readme_section(readme) == expected, (
        "README.md's headline section is not what the committed runs make: run `spacegraph report --headline`")


def test_headline_rewrites_only_the_marked_readme_section(tmp_path, capsys):
    shutil.copytree(REPORTS / "act", tmp_path / "reports" / "act")
    readme = tmp_path / "README.md"
    start, end = headline.README_MARKERS
    readme.write_text(f"# project\n\nintro\n{start}\nan old table\n{end}\n\nthe rest\n", encoding="utf-8")
    assert report_main(["--headline", str(tmp_path / "reports")]) == 0
    text = readme.read_text(encoding="utf-8")
    assert text.startswith(f"# project\n\nintro\n{start}\nGenerated by") and text.endswith(f"{end}\n\nthe rest\n")
    assert "an old table" not in text and "| [act](reports/act/report.md) |" in text
    assert f"wrote {readme}" in capsys.readouterr().out
    readme.write_text("# no markers here\n", encoding="utf-8")
    assert report_main(["--headline", str(tmp_path / "reports")]) == 0
    assert readme.read_text(encoding="utf-8") == "# no markers here\n"


def test_headline_names_a_folder_that_is_not_one(tmp_path, capsys):
    assert report_main(["--headline", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"spacegraph report: --headline {tmp_path / 'nope'}: not a folder; expected the reports folder "
                   "that holds NAME/report.json for each scenario (default reports)")
    assert report_main(["--headline", str(tmp_path)]) == 0  # no runs yet: a table saying so
    assert "(no committed scenario runs)" in (tmp_path / "headline.md").read_text()


def test_every_latest_run_folder_is_a_scenario_and_holds_its_report():
    folders = [p for p in REPORTS.iterdir() if (p / "report.json").exists()]
    assert folders, "no committed scenario runs under reports/<scenario>/"
    for folder in folders:
        assert folder.name in SCENARIOS, f"reports/{folder.name}/ is not a scenario's latest run"
        for stem in ("report.md", "report.html"):
            assert (folder / stem).exists(), f"reports/{folder.name}/{stem} is missing"


def test_every_committed_run_is_what_its_scenario_draws_today():
    """A change to a scenario's drawing must come with its committed runs drawn again
    (``spacegraph report --from-json reports/NAME/report.json --out reports/NAME``, then ``--headline``)."""
    for path in sorted(REPORTS.glob("*/report.json")):
        committed = [Figure.from_dict(f) for f in json.loads(path.read_text())["figures"]]
        drawn = rerender.rerender(path, SCENARIOS).figures
        for old, new in zip(committed, drawn, strict=True):
            where = f"{path.relative_to(REPO)}: {old.name}"
            assert (new.headline, new.tables, new.ratios, new.notes) == (old.headline, old.tables, old.ratios,
                                                                         old.notes), f"{where} is stale"


LOCAL = re.compile(r"/work/main|/home/\w|/Users/\w|\.venv/|^cd /", re.MULTILINE)


def test_no_committed_report_names_a_local_path():
    found = []
    for path in REPORTS.rglob("*"):
        if path.is_file() and path.suffix in {".md", ".json", ".csv", ".html", ".txt", ".svg", ".yaml", ".py"}:
            text = path.read_text(encoding="utf-8", errors="replace")
            if str(REPO) in text or LOCAL.search(text):
                found.append(str(path.relative_to(REPO)))
    assert not found, f"local paths in {', '.join(found)}"
