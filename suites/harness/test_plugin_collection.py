"""The pytest plugin: item ids, backend selection, load failures and failure reports, in a nested session."""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from harness.testing.plugin import selected_backends

HERE = Path(__file__).resolve().parent

CONFTEST = """
from harness.testing.plugin import SpecModule

def pytest_pycollect_makemodule(module_path, parent):
    if module_path.name == "test_specs.py":
        return SpecModule.from_parent(parent, path=module_path)
"""


class _Recorder:
    """A plugin for the nested session: collected ids and call-phase reports."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.reports: dict[str, Any] = {}

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.ids = [item.nodeid for item in session.items]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or report.outcome != "passed":
            self.reports[report.nodeid] = report


def _project(tmp_path: Path, specs: dict[str, Path | str]) -> Path:
    """A test folder whose ``test_specs.py`` points at a spec folder holding ``specs`` (name -> file or text)."""
    spec_dir = tmp_path / "specs"
    spec_dir.mkdir()
    for name, source in specs.items():
        target = spec_dir / f"{name}.yaml"
        if isinstance(source, Path):
            shutil.copy(source, target)
        else:
            target.write_text(textwrap.dedent(source))
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text(CONFTEST)
    (tests / "test_specs.py").write_text(
        f"import pathlib\nSPEC_ROOT = pathlib.Path({str(spec_dir)!r})\n\ndef test_plain():\n    pass\n")
    return tests


def _pytest(tests: Path | str, *args: str) -> tuple[int, _Recorder]:
    recorder = _Recorder()
    tests = str(tests)
    root = tests.split("::")[0].removesuffix("/test_specs.py")
    try:
        code = pytest.main([tests, "-p", "no:cacheprovider", "--import-mode=importlib", "--rootdir", root, "-q",
                            *args], plugins=[recorder])
    finally:
        # The next nested session's test_specs.py has the same module name: forget this one.
        for name, module in list(sys.modules.items()):
            if str(getattr(module, "__file__", None) or "").startswith(root):
                del sys.modules[name]
    return int(code), recorder


def test_item_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SPACEGRAPH_BACKENDS", "tf,torch")
    tests = _project(tmp_path, {"affine": HERE / "specs_ok" / "affine.yaml",
                                "ring": HERE / "specs_ok" / "ring_buffer.yaml"})
    code, rec = _pytest(tests, "--collect-only")
    assert code == 0
    ids = [i.split("::", 1)[1] for i in rec.ids]
    both = lambda name, checks: [f"{name}::{c}[{b}]" for c in checks for b in ("tf", "torch")]  # noqa: E731
    assert ids == (["test_plain"]
                   + both("affine", ["build", "in-space", "oracle", "determinism", "bad-spaces"])
                   + ["affine::parity[tf-torch]"]
                   + both("ring", ["build", "in-space", "oracle", "determinism", "stateful"])
                   + ["ring::parity[tf-torch]"])
    assert all(i.startswith("test_specs.py::") for i in rec.ids)


@pytest.mark.parametrize("selection, expected", [
    ("test_specs.py::affine::oracle[torch]", ["affine::oracle[torch]"]),
    ("test_specs.py::affine::oracle", ["affine::oracle[tf]", "affine::oracle[torch]"]),
    ("test_specs.py::affine::parity[tf-torch]", ["affine::parity[tf-torch]"]),
])
def test_node_ids_select_items(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, selection: str,
                               expected: list[str]):
    monkeypatch.setenv("SPACEGRAPH_BACKENDS", "tf,torch")
    tests = _project(tmp_path, {"affine": HERE / "specs_ok" / "affine.yaml"})
    code, rec = _pytest(tests / selection, "--collect-only")
    assert code == 0 and [i.split("::", 1)[1] for i in rec.ids] == expected


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_one_backend_selected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str):
    monkeypatch.setenv("SPACEGRAPH_BACKENDS", backend)
    tests = _project(tmp_path, {"affine": HERE / "specs_ok" / "affine.yaml"})
    code, rec = _pytest(tests, "--collect-only")
    assert code == 0
    items = [i.split("::", 1)[1] for i in rec.ids if "[" in i]
    assert items and all(i.startswith("affine::") and i.endswith(f"[{backend}]") for i in items)


def test_spec_backends_limit_the_items(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("SPACEGRAPH_BACKENDS", raising=False)
    tf_only = (HERE / "specs_ok" / "affine.yaml").read_text() + "\nbackends: [tf]\n"
    tests = _project(tmp_path, {"tf_only": tf_only})
    code, rec = _pytest(tests, "--collect-only")
    items = [i.split("::", 1)[1] for i in rec.ids if "[" in i]
    assert items and all(i.endswith("[tf]") for i in items)


def test_unknown_backend_is_a_usage_error(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SPACEGRAPH_BACKENDS", "tf,jax")
    with pytest.raises(pytest.UsageError, match=r"unknown backend\(s\) \['jax'\]"):
        selected_backends()


def test_a_spec_that_does_not_load_fails_one_item(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SPACEGRAPH_BACKENDS", "torch")
    tests = _project(tmp_path, {
        "affine": HERE / "specs_ok" / "affine.yaml",
        "typo": """
            component: broken.components.Affine
            input_spaces: {inputs: "float32[B,4]"}
            methods: {apply: {outptu_space: "float32[B,4]"}}
        """,
    })
    code, rec = _pytest(tests, "-k", "typo or (affine and build)")
    assert code == 1
    failed = {k: r for k, r in rec.reports.items() if r.failed}
    assert list(failed) == ["test_specs.py::typo::load"]
    text = failed["test_specs.py::typo::load"].longreprtext
    assert "typo.yaml" in text and "methods.apply.outptu_space: unknown key" in text
    assert rec.reports["test_specs.py::affine::build[torch]"].passed


def test_failure_report_names_spec_check_backend_and_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SPACEGRAPH_BACKENDS", "torch")
    tests = _project(tmp_path, {"offset": HERE / "broken" / "specs" / "oracle_mismatch.yaml"})
    code, rec = _pytest(tests, "-k", "oracle")
    assert code == 1
    report = rec.reports["test_specs.py::offset::oracle[torch]"]
    assert report.failed
    text = report.longreprtext
    for part in ("offset.yaml: check 'oracle' on torch failed", "method 'apply'", "largest absolute difference",
                 "inputs:", "check_example(\n    inputs={'inputs': array("):
        assert part in text, f"{part!r} not in the report:\n{text}"
    assert "Falsifying example" in text or "Failing test case" in text  # hypothesis' own print
    assert "Traceback" not in text and "site-packages" not in text  # the message, not a framework traceback
    assert report.location[0].endswith("offset.yaml")
