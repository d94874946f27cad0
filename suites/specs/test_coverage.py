"""`spacegraph spec coverage` on a temporary package and on the repository."""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from harness.specs.cli import add_spec_parser
from harness.specs.coverage import coverage, format_report

REPO = Path(__file__).resolve().parents[2]

MODULE = '''
from harness.graph import Component, api


class Specced(Component):
    def __init__(self, scope="specced"):
        super().__init__(scope=scope)

    @api
    def apply(self, inputs):
        return inputs


class Unspecced(Specced):
    pass


class Base(Component):
    spec_exempt = "abstract base of the layers below"


class FromBase(Base):
    pass


class Fixture(Component):
    spec_covers = (Unspecced,)


class NotAComponent:
    pass
'''

AGENTS = '''
from dataclasses import dataclass


@dataclass(frozen=True)
class ToyConfig:
    lr: float = 0.1


class ToyAgent:
    def get_actions(self, states):
        return states

    def update(self, batch=None):
        return 0.0
'''


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    """A fresh importable package ``(name, spec root)`` with components and no specs yet.

    The package lies at ``spec_root.parent / "src" / name``.
    """
    name = f"covpkg_{uuid.uuid4().hex[:8]}"
    root = tmp_path / "src" / name
    (root / "layers").mkdir(parents=True)
    (root / "__init__.py").write_text('"""A package for coverage tests."""\n')
    (root / "layers" / "__init__.py").write_text("")
    (root / "layers" / "mod.py").write_text(MODULE)
    (tmp_path / "specs" / "components").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    yield name, tmp_path / "specs"
    for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[module]


def add_spec(spec_root: Path, kind: str, stem: str, key: str, target: str) -> None:
    folder = spec_root / kind
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stem}.yaml").write_text(f"{key}: {target}\ninput_spaces: {{}}\nmethods: {{apply: {{}}}}\n")


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="spacegraph")
    add_spec_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.fn(args)


def test_reports_classes_without_specs(package: tuple[str, Path]) -> None:
    name, specs = package
    add_spec(specs, "components", "specced", "component", f"{name}.layers.mod.Specced")
    report = coverage(name, specs)
    mod = f"{name}.layers.mod"
    assert report.missing_components == [f"{mod}.Fixture", f"{mod}.FromBase", f"{mod}.Unspecced"]
    assert report.exempt == {f"{mod}.Base": "abstract base of the layers below"}
    assert f"{mod}.NotAComponent" not in report.components
    assert not report.ok
    text = format_report(report)
    assert "3 of 4 component classes have no spec:" in text and f"  {mod}.Unspecced" in text


def test_spec_covers_and_reexported_paths_count(package: tuple[str, Path]) -> None:
    name, specs = package
    (specs.parent / "src" / name / "__init__.py").write_text("from .layers.mod import Specced\n")
    add_spec(specs, "components", "specced", "component", f"{name}.Specced")  # re-exported path
    add_spec(specs, "components", "fixture", "component", f"{name}.layers.mod.Fixture")
    add_spec(specs, "components", "from_base", "component", f"{name}.layers.mod.FromBase")
    report = coverage(name, specs)
    assert report.ok, format_report(report)
    assert format_report(report) == "all 4 component classes have specs"
    assert "exempt:" in format_report(report, verbose=True)


def test_cli_exit_codes(package: tuple[str, Path], capsys: pytest.CaptureFixture) -> None:
    name, specs = package
    assert run_cli(["spec", "coverage", "--package", name, "--specs", str(specs)]) == 1
    assert "Specced" in capsys.readouterr().out
    for cls in ("Specced", "Fixture", "FromBase"):
        add_spec(specs, "components", cls.lower(), "component", f"{name}.layers.mod.{cls}")
    assert run_cli(["spec", "coverage", "--package", name, "--specs", str(specs), "-v"]) == 0
    out = capsys.readouterr().out
    assert "all 4 component classes have specs" in out and "exempt:" in out


def test_agents_need_agent_specs(package: tuple[str, Path]) -> None:
    name, specs = package
    agents = specs.parent / "src" / name / "agents"
    agents.mkdir()
    (agents / "__init__.py").write_text("")
    (agents / "toy.py").write_text(AGENTS)
    for cls in ("Specced", "Fixture", "FromBase"):
        add_spec(specs, "components", cls.lower(), "component", f"{name}.layers.mod.{cls}")
    report = coverage(name, specs)
    assert report.missing_agents == [f"{name}.agents.toy.ToyAgent"]  # the config dataclass is no agent
    assert "1 of 1 agent classes have no spec:" in format_report(report)
    add_spec(specs, "agents", "toy", "agent", f"{name}.agents.toy.ToyAgent")
    report = coverage(name, specs)
    assert report.ok, format_report(report)
    assert format_report(report) == "all 4 component classes have specs; all 1 agent classes have specs"


def test_broken_module_and_spec_are_problems(package: tuple[str, Path]) -> None:
    name, specs = package
    (specs.parent / "src" / name / "layers" / "broken.py").write_text("import not_a_module_anywhere\n")
    add_spec(specs, "components", "ghost", "component", f"{name}.layers.mod.Ghost")
    (specs / "components" / "unreadable.yaml").write_text("component: [\n")
    report = coverage(name, specs)
    text = format_report(report)
    assert f"problem: module '{name}.layers.broken' does not import: ModuleNotFoundError" in text
    assert "ghost.yaml: class does not import" in text
    assert "unreadable.yaml does not read" in text
    assert not report.ok


def test_missing_package_is_a_problem(tmp_path: Path) -> None:
    report = coverage("no_such_package_for_coverage", tmp_path)
    assert report.problems and "does not import" in report.problems[0]
    assert not report.ok


def test_repository_has_a_spec_for_every_component() -> None:
    report = coverage("reference_agents", REPO / "specs")
    assert report.ok, format_report(report)
    assert "reference_agents.components.common.dense.Dense" in report.components
    assert "reference_agents.components.common.synchronizer.Synchronizer" in report.covered
    assert format_report(report).startswith(f"all {len(report.components)} component classes have specs")


def test_repository_coverage_command(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from spacegraph.cli import main

    monkeypatch.chdir(REPO)
    assert main(["spec", "coverage"]) == 0        # the spacegraph command covers reference_agents by default
    assert "component classes have specs" in capsys.readouterr().out


def test_harness_spec_parser_needs_a_package(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):                # the harness knows no package of its own
        run_cli(["spec", "coverage"])
    assert "--package" in capsys.readouterr().err


def test_exemption_is_not_inherited(package: tuple[str, Path]) -> None:
    name, specs = package
    report = coverage(name, specs)
    assert f"{name}.layers.mod.FromBase" in report.components


HUBER = '''
from harness.graph import Component, api


class Huber(Component):
    spec_default_only = {"device": "no spec can place a component elsewhere"}

    def __init__(self, units, delta=1.0, reduction="sum", shape=(2, 2), device=None, scope="huber"):
        super().__init__(scope=scope)

    @api
    def apply(self, inputs):
        return inputs
'''


def add_config_spec(spec_root: Path, stem: str, target: str, config: str) -> None:
    (spec_root / "components" / f"{stem}.yaml").write_text(
        f"component: {target}\nconfig: {config}\ninput_spaces: {{}}\nmethods: {{apply: {{}}}}\n")


def test_reports_hyperparameters_only_run_at_their_default(package: tuple[str, Path],
                                                           capsys: pytest.CaptureFixture) -> None:
    name, specs = package
    (specs.parent / "src" / name / "layers" / "mod.py").write_text(HUBER)
    huber = f"{name}.layers.mod.Huber"
    add_config_spec(specs, "huber", huber, "{units: 3}")
    add_config_spec(specs, "huber_same", huber, "{units: 4, delta: 1, shape: [2, 2]}")  # defaults, spelled out
    report = coverage(name, specs)
    assert report.default_only == {huber: ["delta", "reduction", "shape"]}   # units has no default
    assert report.default_exempt == {huber: {"device": "no spec can place a component elsewhere"}}
    assert not report.ok
    assert f"  {huber}: delta, reduction, shape" in format_report(report)
    assert run_cli(["spec", "coverage", "--package", name, str(specs)]) == 1
    assert "only ever run at their default" in capsys.readouterr().out
    add_config_spec(specs, "huber_off", huber, "{units: 3, delta: 0.5, reduction: mean}")
    assert coverage(name, specs).default_only == {huber: ["shape"]}
    add_config_spec(specs, "huber_shape", huber, "{units: 3, shape: [2, 3]}")
    report = coverage(name, specs)
    assert report.default_only == {} and report.ok, format_report(report)
    assert run_cli(["spec", "coverage", "--package", name, str(specs), "-v"]) == 0
    assert f"default only: {huber}.device (no spec can place" in capsys.readouterr().out


def test_repository_runs_every_hyperparameter_off_its_default() -> None:
    report = coverage("reference_agents", REPO / "specs")
    assert report.default_only == {}, format_report(report)
    components = [c for c in report.covered if c.startswith("reference_agents.components.")]
    assert "reference_agents.components.losses.impala_loss.IMPALALoss" in components
