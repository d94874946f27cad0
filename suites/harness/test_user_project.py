"""The harness outside this repository: a user's project in a temporary folder, tested by the pytest
plugin (``pytest --spacegraph-specs``, the ``spacegraph_specs`` ini option) and by ``spacegraph spec``.

The project is ``examples/my_components`` copied to ``tmp_path`` (its own package, spec and
pyproject); nothing is installed and nothing is imported into this process: every run is a
subprocess with this interpreter, started in the copy, so its package imports only through the
plugin's project root on ``sys.path``.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "my_components"
SPEC = "specs/components/soft_clip.yaml"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A fresh copy of the example project."""
    target = tmp_path / "proj"
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    return target


def run(project: Path, *args: str, backends: str = "torch", timeout: int = 240) -> subprocess.CompletedProcess:
    """``python ARGS`` in ``project``, with one framework thread and without this repository on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    env.update(SPACEGRAPH_BACKENDS=backends, OMP_NUM_THREADS="1", TF_NUM_INTRAOP_THREADS="1",
               TF_NUM_INTEROP_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, *args], cwd=project, env=env, capture_output=True, text=True,
                          timeout=timeout)


def plant_bug(project: Path) -> None:
    """SoftClip squashes with a sigmoid instead of tanh: outputs stay in bounds, the oracle disagrees."""
    source = project / "my_components" / "soft_clip.py"
    text = source.read_text()
    assert "F.tanh(inputs * self.gain)" in text
    source.write_text(text.replace("F.tanh(inputs * self.gain)", "F.sigmoid(inputs * self.gain)"))


def test_the_example_is_not_importable_here() -> None:
    # the subprocesses below import my_components only because the plugin puts the project root on sys.path
    with pytest.raises(ImportError):
        __import__("my_components")


def test_plain_pytest_in_the_project_runs_every_check_on_both_backends(project: Path) -> None:
    proc = run(project, "-m", "pytest", "-p", "no:cacheprovider", "-v", backends="tf,torch")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    ids = re.findall(r"^(\S+::\S+) PASSED", proc.stdout, re.M)
    assert ids == [f"{SPEC}::{check}[{backend}]" for check in ("build", "in-space", "oracle", "determinism",
                                                                  "bad-spaces") for backend in ("tf", "torch")] \
        + [f"{SPEC}::parity[tf-torch]"]
    assert "spacegraph specs: specs (backends: tf,torch)" in proc.stdout


def test_a_planted_bug_fails_naming_the_spec_and_the_check(project: Path) -> None:
    plant_bug(project)
    proc = run(project, "-m", "pytest", "-p", "no:cacheprovider", "--spacegraph-specs", "specs/components",
               "-k", "oracle or in-space", "specs/components")
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert f"{project / SPEC}: check 'oracle' on torch failed: method 'apply' disagrees with its oracle " \
           f"my_components.oracles.soft_clip_apply" in proc.stdout
    assert f"FAILED {SPEC}::oracle[torch]" in proc.stdout and "1 failed, 1 passed" in proc.stdout

    cli = run(project, "-m", "spacegraph.cli", "spec", "test", "specs", "--backend", "torch", "-k", "oracle")
    assert cli.returncode == 1, cli.stdout[-3000:]
    assert f"{project / SPEC}: check 'oracle' on torch failed" in cli.stdout
    assert f"FAILED {SPEC}::oracle[torch]" in cli.stdout


def test_the_spec_test_command_passes_a_correct_component(project: Path) -> None:
    proc = run(project, "-m", "spacegraph.cli", "spec", "test", "specs", "--backend", "torch", "-v")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert f"{SPEC}::bad-spaces[torch] PASSED" in proc.stdout and "5 passed" in proc.stdout


def test_a_broken_spec_lists_every_problem(project: Path) -> None:
    spec = project / SPEC
    spec.write_text(spec.read_text().replace("component: my_components.SoftClip", "component: my_components.SoftClp")
                    .replace("config: {bound: 2.0}", "config: {bound: 2.0}\nseeed: 3")
                    .replace('inputs: "float32[B,3]"', 'inputs: "float32[B,3"'))
    proc = run(project, "-m", "spacegraph.cli", "spec", "validate", "specs")
    assert proc.returncode == 1
    for text in (f"{SPEC}: seeed: unknown key", f"{SPEC}: input_spaces.inputs: bad space",
                 f"{SPEC}: component: class does not import: module 'my_components' has no attribute 'SoftClp'"):
        assert text in proc.stdout, proc.stdout
    tests = run(project, "-m", "pytest", "-p", "no:cacheprovider", "--spacegraph-specs", "specs", "specs")
    assert tests.returncode == 1
    assert f"FAILED {SPEC}::load" in tests.stdout and "3 problem(s)" in tests.stdout


def test_coverage_of_the_project(project: Path) -> None:
    proc = run(project, "-m", "spacegraph.cli", "spec", "coverage", "specs")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == ["package my_components, specs specs:", "all 1 component classes have specs"]
    (project / "my_components" / "extra.py").write_text(
        "from harness.graph import Component\n\nclass Unspecced(Component):\n    pass\n")
    proc = run(project, "-m", "spacegraph.cli", "spec", "coverage", "specs")
    assert proc.returncode == 1
    assert "1 of 2 component classes have no spec:\n  my_components.extra.Unspecced" in proc.stdout
    nowhere = run(project, "-m", "spacegraph.cli", "spec", "coverage", "my_components")
    assert nowhere.returncode == 2 and "holds no components/ or agents/ folder" in nowhere.stderr


def test_a_missing_spec_location_is_a_usage_error(project: Path) -> None:
    proc = run(project, "-m", "pytest", "-p", "no:cacheprovider", "--spacegraph-specs", "nowhere")
    assert proc.returncode == 4
    assert f"spacegraph specs: {project / 'nowhere'} is neither a spec file nor a folder" in proc.stderr


def spacegraph_command() -> list[str]:
    """The installed ``spacegraph`` console script next to this interpreter (``-m spacegraph.cli`` without one)."""
    script = Path(sys.executable).parent / "spacegraph"
    return [str(script)] if script.exists() else [sys.executable, "-m", "spacegraph.cli"]


def test_the_example_agent_config_trains_with_the_projects_own_layer(project: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    env.update(OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3")
    cmd = [*spacegraph_command(), "train", "configs/dqn_soft_clip.yaml", "--steps", "300", "--out", "run", "--quiet"]
    proc = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"spacegraph train: config {project / 'configs' / 'dqn_soft_clip.yaml'}\n" in proc.stderr
    assert "solved means  mean of 100 greedy episodes >= 475 (played when a 10-episode screen reaches 475)" \
        in proc.stdout
    with open(project / "run" / "metrics.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["env_steps"]) for r in rows] == [300] and int(rows[0]["eval_episodes"]) in (10, 100)
    assert (project / "run" / "episodes.csv").exists()
    with np.load(project / "run" / "checkpoint" / "agent_variables.npz") as weights:
        gains = [k for k in weights.files if k.endswith("softclip_1/gain")]
        assert len(gains) == 2 and all(weights[k].shape == (128,) for k in gains), weights.files  # Q and target

    # a class path that does not resolve is named with the file and the key
    config = project / "configs" / "dqn_soft_clip.yaml"
    config.write_text(config.read_text().replace("my_components.SoftClip", "my_components.SoftClp"))
    proc = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert "configs/dqn_soft_clip.yaml: 1 problem(s) in the agent config" in proc.stderr
    assert "network: NeuralNetwork: layers[1]: key 'type': module 'my_components' has no 'SoftClp' " \
           "(from 'my_components.SoftClp')" in proc.stderr, proc.stderr


@pytest.mark.parametrize("kind, message", [
    ("no_such_package.Layer", "layers[0]: key 'type': cannot import module 'no_such_package' of "
                              "'no_such_package.Layer' (ModuleNotFoundError"),
    ("reference_agents.components.common.NoSuch", "layers[0]: key 'type': module "
                                                  "'reference_agents.components.common' has no 'NoSuch'"),
    ("os.path.join", "layers[0]: key 'type': 'os.path.join' must be a Component subclass; got <function join"),
    ("harness.graph.Component", "layers[0]: key 'type': 'harness.graph.Component' has no 'apply' API method"),
    ("SoftClip", "layers[0]: key 'type' must be one of ['conv2d', 'dense', 'flatten', 'max_pool2d', "
                 "'residual_block']; got 'SoftClip' (or the class path of a Component"),
])
def test_a_layer_class_path_that_is_not_a_layer_is_named(kind: str, message: str) -> None:
    from reference_agents.components.nn import NeuralNetwork

    with pytest.raises(ValueError) as info:
        NeuralNetwork([{"type": kind}])
    assert str(info.value).startswith("NeuralNetwork: ") and message in str(info.value), str(info.value)


def test_a_layer_class_path_builds_like_a_named_type() -> None:
    from harness.execution.executor import GraphExecutor
    from reference_agents.components.nn import NeuralNetwork

    net = NeuralNetwork([{"type": "reference_agents.components.common.Dense", "units": 3},
                         {"type": "dense", "units": 2}])
    assert [layer.scope for layer in net.layers] == ["dense_0", "dense_1"]
    out = GraphExecutor(net, {"inputs": "float32[B,4]"}, backend="torch").execute("apply", np.ones((5, 4), np.float32))
    assert np.asarray(out).shape == (5, 2)
