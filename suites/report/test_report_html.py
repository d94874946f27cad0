"""The report's HTML (`spacegraph.report.writers.html_page`) escapes everything that comes from data: hostile
names in every field of a report stay text (read back with the standard library's HTML parser)."""

from __future__ import annotations

from harness.measure.figures import Baseline, Figure, Ratio, Table
from spacegraph.report import writers
from spacegraph.report.runner import Report
from suites.html_checks import parse_page

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16  # a few bytes: the page embeds them as they are


def hostile(field: str) -> str:
    """A value for ``field`` that is markup if it is not escaped (and names the field, to find it again)."""
    return f"{field} </td></table><script>window.__pwned=1</script><img src=x onerror=\"alert('{field}')\"> \"' &amp;"


def hostile_report() -> Report:
    figure = Figure(name=hostile("figure name"), title=hostile("figure title"), figure_ref=hostile("figure ref"),
                    tables=[Table(hostile("table title"), [hostile("table header")], [[hostile("table cell")]])],
                    ratios=[Ratio(hostile("ratio"), 2.0, ours=hostile("ours"), peer=hostile("peer"),
                                  note=hostile("ratio note"), verdict=hostile("verdict"))],
                    notes=[hostile("note")], peer_missing=hostile("peer missing"),
                    baselines=[Baseline(hostile("baseline label"), hostile("source"), hostile("where"),
                                        hostile("hardware"), hostile("measured"),
                                        [{"x": hostile("baseline x"), "y": 1.0}], unit=hostile("unit"))],
                    meta={key: hostile(f"meta {key}") for key in ("command", "revision", "machine", "load", "versions",
                                                                 "duration", "load_warning")})
    machine = {"cpu": hostile("cpu"), "cores": 2, "memory_gib": 8, "gpus": [hostile("gpu")], "os": hostile("os"),
               "python": hostile("python")}
    return Report([figure], hostile("command"), hostile("revision"), machine, {"torch": hostile("version")},
                  hostile("started"), 60.0, [0.1, 0.1, 0.1], [0.2, 0.2, 0.2], 0.3, hostile("load warning"), True, 1,
                  hostile("peers note"), hostile("baselines note"))


def test_hostile_names_in_a_report_stay_text():
    report = hostile_report()
    page = parse_page(writers.html_page(report, {report.figures[0].name: PNG}))
    assert page.scripts == [] and page.handler_attributes() == []
    assert [img["src"].startswith("data:image/png;base64,") for img in page.tags("img")] == [True]
    fields = ["figure title", "figure ref", "table title", "table header", "table cell", "ratio",
              "ours", "peer", "ratio note", "verdict", "note", "peer missing", "baseline label", "source", "where",
              "hardware", "measured", "baseline x", "unit", "cpu", "gpu", "os", "python", "command", "revision",
              "version", "started", "load warning", "peers note", "baselines note",
              *(f"meta {key}" for key in ("command", "revision", "machine", "load", "versions", "duration",
                                          "load_warning"))]
    missing = [field for field in fields if hostile(field) not in page.text]
    assert missing == [], "not shown as text"
    ids = [attrs.get("id") for _, attrs in page.elements if attrs.get("id")]
    assert ids == [hostile("figure name")]  # the figure's anchor: the whole name, inside its attribute
    assert [attrs.get("href") for attrs in page.tags("a")] == ["#" + hostile("figure name")]
