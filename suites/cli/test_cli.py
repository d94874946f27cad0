"""The `spacegraph` command: build (with --profile/--json), spaces and demo, as a user runs them."""

import json
import os
import subprocess
import sys

import pytest

from spacegraph.cli import main

STACK = "spacegraph.reports.graphs.DenseStack"


def run_cli(*args: str, timeout: int = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, "-m", "spacegraph.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.mark.parametrize("backend", ["tf", "torch"])
def test_build_profile_prints_phases_and_api_table(capsys, backend):
    assert main(["build", STACK, "--config", '{"blocks": 2}', "--space", "inputs=float32[B,16]",
                 "--backend", backend, "--profile", "--repeats", "2"]) == 0
    out = capsys.readouterr().out
    assert f"backend {backend}: median of 2 builds, 7 components" in out
    for phase in ("assembly", "build overhead", "backend variable creation", "backend op creation",
                  "framework overhead"):
        assert phase in out
    assert "  apply(inputs: float32[B,16])\n      -> float32[B,16]" in out


def test_build_json_gives_the_same_figures(capsys):
    assert main(["build", STACK, "--config", '{"blocks": 13}', "--space", "inputs=float32[B,8]",
                 "--backend", "torch", "--json", "--profile", "--repeats", "1"]) == 0
    result = json.loads(capsys.readouterr().out)
    median = result["median"]
    assert median["components"] == 40 and median["variables"] == 52
    assert median["framework_overhead_s"] == pytest.approx(median["assembly_s"] + median["build_overhead_s"])
    assert median["build_total_s"] >= median["variable_creation_s"] + median["op_creation_s"]


def test_build_from_a_spec_file(tmp_path, capsys):
    spec = tmp_path / "dense.yaml"
    spec.write_text("component: reference_agents.components.common.Dense\nconfig: {units: 3}\n"
                    "input_spaces: {inputs: 'float32[B,5]'}\nmethods:\n  apply: {output_space: 'float32[B,3]'}\n")
    assert main(["build", str(spec), "--backend", "tf"]) == 0
    assert "  apply(inputs: float32[B,5])\n      -> float32[B,3]" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["build", "no.such.Class"], "cannot import class 'no.such.Class'"),
    (["build", STACK, "--config", "{bad"], "--config is not valid JSON"),
    (["build", STACK, "--space", "inputs"], "--space must look like NAME=VALUE"),
    (["build", STACK, "--space", "inputs=float32[B,"], "bad space text"),
    (["build", STACK], "no input space for root API argument(s) apply(inputs)"),
    (["build", STACK, "--space", "inputs=int64[B,16]"], "space mismatch at stack/block0/a.apply(inputs)"),
    (["spaces", "float32[4]", "--size", "3"], "space's extra ranks (no batch or time rank)"),
])
def test_bad_input_gives_a_clear_error(args, message):
    with pytest.raises(SystemExit) as info:
        main(args)
    assert message in str(info.value)


def test_spaces_command(capsys):
    assert main(["spaces", "[B]{obs: float32[4](-1.0,1.0), mask: bool[2]}", "--size", "3"]) == 0
    out = capsys.readouterr().out
    assert "space:  [B]{mask: bool[2], obs: float32[4](-1.0,1.0)}" in out
    assert "sample obs: shape (3, 4) dtype float32" in out and "contained: True" in out


def test_demo_runs_end_to_end():
    proc = run_cli("demo", "--train-steps", "1200", "--train-seconds", "8")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    for text in ("== spaces", "uint8[B,84,84,4]", "is above the upper bound 1.0", "ALE/Pong-v5",
                 "== Q-network on tf", "== Q-network on torch", "q_values(states: float32[B,4])",
                 "== cross-backend", "== DQN on CartPole-v1", "A demo, not a solved run", "demo finished"):
        assert text in out
    diff = float(out.split("same seed, same weights: max |tf - torch| = ")[1].split()[0])
    assert diff < 1e-5
    table = out.split("== DQN on CartPole-v1")[1].splitlines()
    header = table[2].split()
    assert header == ["backend", "steps", "steps/s", "episodes", "return(100)", "eval(5)", "updates", "epsilon",
                      "seconds"]
    rows = {cells[0]: dict(zip(header, cells)) for cells in (line.split() for line in table[3:5])}
    assert sorted(rows) == ["tf", "torch"]
    for row in rows.values():
        steps = int(row["steps"].replace(",", ""))
        assert 0 < steps <= 1200 and int(row["episodes"].replace(",", "")) > 0
        assert float(row["eval(5)"]) > 0 and 0 < float(row["epsilon"]) <= 1
