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
    # the stack's only steps are Dense.apply, which declares its output spaces: none runs on samples
    assert ", 0 graph-function steps run on samples to infer their outputs, " in out
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


# ---- issue 20: commands listed, validation all at once, quiet TensorFlow, config files named ----------------


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for command in ("demo", "train", "build", "spaces", "spec", "new"):
        assert f"    {command} " in out, out
    assert "--verbose" in out
    with pytest.raises(SystemExit):
        main(["spec", "--help"])
    out = capsys.readouterr().out
    for command in ("test", "validate", "coverage", "schema"):
        assert f"    {command} " in out, out


def test_spec_validate_reports_every_problem_at_once(tmp_path, capsys):
    spec = tmp_path / "dense.yaml"
    spec.write_text("component: reference_agents.components.common.Dens\nconfig: {units: 3}\n"
                    "input_spaces: {inputs: 'float32[B,4'}\nmethods:\n  apply: {oracle: reference_agents.oracles.nope.f}\n"
                    "tolerance: {rtol: -1}\n")
    assert main(["spec", "validate", str(spec)]) == 1
    out = capsys.readouterr().out
    # schema problems and the import problems behind them, in one run
    for key, text in (("input_spaces.inputs", "bad space"), ("tolerance.rtol", "greater than or equal to 0"),
                      ("component", "has no attribute 'Dens'"), ("methods.apply.oracle", "oracle does not import")):
        assert f"{spec}: {key}: " in out and text in out.split(f"{spec}: {key}: ", 1)[1].splitlines()[0], out


def _quiet_env():
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS")}
    return dict(env, OMP_NUM_THREADS="1")


NOISE = ("absl::InitializeLog", "oneDNN custom operations", "cudart_stub", "cuInit", "cpu_feature_guard")


def test_tensorflow_start_up_noise_is_off_unless_verbose():
    args = [sys.executable, "-m", "spacegraph.cli", "build", STACK, "--config", '{"blocks": 1}', "--space",
            "inputs=float32[B,4]", "--backend", "tf"]
    quiet = subprocess.run(args, capture_output=True, text=True, timeout=240, env=_quiet_env())
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert "apply(inputs: float32[B,4])" in quiet.stdout
    assert quiet.stderr == "", quiet.stderr[-2000:]
    verbose = subprocess.run([*args, "--verbose"], capture_output=True, text=True, timeout=240, env=_quiet_env())
    assert verbose.returncode == 0
    # the same run shows TensorFlow's C++ start-up lines with --verbose: the quiet run dropped them
    assert any(text in verbose.stderr for text in NOISE), verbose.stderr[-2000:]


def test_unknown_env_id_names_the_config_file_and_key(tmp_path, capsys):
    path = tmp_path / "cartpol.yaml"
    path.write_text("agent: dqn\nenv: {id: CartPol-v1}\nnetwork: {layers: [{type: dense, units: 8}]}\n")
    assert main(["train", str(path), "--steps", "10", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert f"spacegraph train: {path}: 1 problem(s) in the agent config\n  env.id: unknown environment id " \
           f"'CartPol-v1'; close matches: ['CartPole-v1'" in err
    assert not (tmp_path / "run").exists()


def test_a_bare_config_name_prefers_the_project_copy_and_says_which(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "dqn_cartpole.yaml").write_text("agent: dqn\nenv: {id: CartPole-v1}\nnetwork: {}\n")
    assert main(["train", "dqn_cartpole", "--steps", "10"]) == 2
    err = capsys.readouterr().err
    local = tmp_path / "configs" / "dqn_cartpole.yaml"
    assert f"spacegraph train: config {local}\n" in err
    assert f"configs/dqn_cartpole.yaml: 1 problem(s) in the agent config\n  network.layers: Field required" in err


def test_resume_below_the_checkpoint_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)                    # no configs here: the bare name is the package's config
    assert main(["train", "dqn_cartpole", "--backend", "torch", "--steps", "200", "--eval-episodes", "2",
                 "--out", "run", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "spacegraph train: config " in err and "reference_agents/configs/dqn_cartpole.yaml" in err
    assert main(["train", "--resume", "run", "--steps", "100", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert "spacegraph train: run is already at 200 env steps (--steps 100); nothing to train. --steps is the " \
           "run's total: give more than 200 to go on" in captured.err
    assert "env steps     200 of 200" in captured.out
