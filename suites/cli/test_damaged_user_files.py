"""Files a user hands over besides checkpoints - configs, component specs, baseline YAML, report result JSON, model
files - that are binary, nested too deep, of the wrong shape or damaged give one error naming the file (never a
traceback)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from harness.execution.serialization import BadFileError
from harness.specs.coverage import coverage, format_report
from harness.specs.loader import SpecError, load_spec
from reference_agents.agents import ConfigError, DQNAgent
from reference_agents.agents import load_config
from spacegraph.cli import main
from spacegraph.report import baselines
from suites.cli.test_train import write_config

NOT_TEXT = b"\x89PNG\r\n\x1a\n\xff\xfe\x00 not text"
TOO_DEEP = b"[" * 100_000


@pytest.mark.parametrize("content, message", [(NOT_TEXT, "not a text file (UTF-8)"), (TOO_DEEP, "not valid YAML")])
def test_a_config_that_is_no_yaml_text_is_a_config_error(tmp_path, capsys, content, message):
    path = tmp_path / "broken.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=re.escape(f"{path}: 1 problem(s) in the agent config\n  <top>: {message}")):
        load_config(str(path))
    assert main(["train", str(path), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert f"{path}: 1 problem(s)" in err and message in err and "Traceback" not in err


@pytest.mark.parametrize("content, message, error", [(NOT_TEXT, "not a text file (UTF-8)", "UnicodeDecodeError"),
                                                     (TOO_DEEP, "not valid YAML", "RecursionError")])
def test_a_spec_that_is_no_yaml_text_is_a_spec_error(tmp_path, content, message, error):
    path = tmp_path / "specs" / "components" / "broken.yaml"
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    with pytest.raises(SpecError, match=re.escape(f"{path}: 1 problem(s)\n  <top>: {message}")):
        load_spec(path)
    assert f"broken.yaml does not read: {error}" in format_report(coverage("json", tmp_path / "specs"))


@pytest.mark.parametrize("content, message", [
    (NOT_TEXT, "cannot read it as YAML (UnicodeDecodeError"), (b"- just\n- a list\n", "expected a mapping at the top"),
    (b"source: x\nbaselines: [3]\n", "baselines[0] is '3', expected a mapping"),
    (b"source: x\nbaselines: [{scenario: s, label: l, where: w, hardware: h, measured: m, points: 5}]\n",
     "baselines[0].points is '5', expected a list")])
def test_a_damaged_baseline_file_is_named(tmp_path, capsys, content, message):
    (tmp_path / "b.yaml").write_bytes(content)
    with pytest.raises(ValueError, match=re.escape(f"b.yaml: {message}")):
        baselines.load(tmp_path)
    assert main(["report", "--only", "sampling", "--baselines", str(tmp_path), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("spacegraph report: ") and message in err and "Traceback" not in err


@pytest.mark.parametrize("content, message", [
    (b"", "is empty"), (NOT_TEXT, "is not UTF-8 text"), (b'{"sides": ', "is not valid JSON"),
    (b"[1, 2]", "(a JSON object): it holds a JSON list")])
def test_a_damaged_report_result_is_named_with_its_flag(tmp_path, capsys, content, message):
    path = tmp_path / "result.json"
    path.write_bytes(content)
    assert main(["report", "--from-json", str(path), "--only", "act", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"spacegraph report: --from-json: {path} ") and message in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("damage", ["cut", "npy", "pickle", "foreign"])
def test_a_damaged_model_file_is_named(tmp_path, damage):
    agent = DQNAgent(write_config(tmp_path))
    path = agent.export_model(str(tmp_path / "model"))
    data = open(path, "rb").read()
    if damage == "cut":
        open(path, "wb").write(data[:len(data) // 3])
    elif damage == "npy":
        np.save(open(path, "wb"), np.zeros(3))
    elif damage == "pickle":
        open(path, "wb").write(b"\x80\x04\x95" + data[3:40])
    else:
        np.savez(path, w=np.zeros(3))
    with pytest.raises(BadFileError) as info:
        agent.import_model(path)
    assert info.value.path == path and str(info.value).startswith(f"DQNAgent.import_model: {path} ")


@pytest.mark.parametrize("content, message", [(NOT_TEXT, "not a text file (UTF-8)"), (b"a: [1, 2\n", "not valid YAML")])
def test_spacegraph_graph_names_a_damaged_file(tmp_path, capsys, content, message):
    path = tmp_path / "broken.yaml"
    path.write_bytes(content)
    with pytest.raises(SystemExit) as exit_:
        main(["graph", str(path), "--format", "dot"])
    text = str(exit_.value.code)
    assert text.startswith(f"spacegraph graph: {path}: 1 problem(s)") and message in text


@pytest.mark.parametrize("content, message", [(NOT_TEXT, "not a text file (UTF-8)"), (b"a: [1, 2\n", "not valid YAML")])
def test_an_agent_specs_damaged_config_is_a_spec_error(tmp_path, content, message):
    from harness.specs.agents import load_agent_spec

    (tmp_path / "broken.yaml").write_bytes(content)
    spec = tmp_path / "specs" / "agents" / "a.yaml"
    spec.parent.mkdir(parents=True)
    spec.write_text("agent: reference_agents.agents.DQNAgent\nconfig: broken.yaml\napi: {act: 'int64[B](0,1)'}\n")
    loaded = load_agent_spec(str(spec), root=str(tmp_path))
    with pytest.raises(SpecError, match=re.escape(f"{tmp_path / 'broken.yaml'}: 1 problem(s)\n  <top>: {message}")):
        loaded.config()
