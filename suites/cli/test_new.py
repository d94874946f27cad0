"""``spacegraph new component``: a template component, spec and oracle stub that the spec checks fail on
(with the stub's message) until the oracle is written, then pass; refusals name what is wrong."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from spacegraph.cli import main

STUB = "NotImplementedError: write the oracle my_components.oracles.my_scale_apply"


def spec_test(project: Path, *args: str) -> subprocess.CompletedProcess:
    """``spacegraph spec test specs --backend torch ARGS`` in ``project``, without this repository on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    env.update(OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, "-m", "spacegraph.cli", "spec", "test", "specs", "--backend", "torch",
                           *args], cwd=project, env=env, capture_output=True, text=True, timeout=240)


def test_the_template_fails_on_its_oracle_stub_until_the_oracle_is_written(tmp_path, capsys):
    project = tmp_path / "proj"
    assert main(["new", "component", "MyScale", "--dir", str(project)]) == 0
    out = capsys.readouterr().out
    for path in ("pyproject.toml", "my_components/__init__.py", "my_components/my_scale.py",
                 "my_components/oracles.py", "specs/components/my_scale.yaml"):
        assert f"wrote {project / path}\n" in out
    failing = spec_test(project, "-v")
    assert failing.returncode == 1, failing.stdout[-3000:]
    assert STUB in failing.stdout
    assert "FAILED specs/components/my_scale.yaml::oracle[torch]" in failing.stdout
    assert "4 passed" in failing.stdout  # build, in-space, determinism, bad-spaces: the template itself works

    oracles = project / "my_components" / "oracles.py"
    text = oracles.read_text()
    stub = text[text.index("    raise NotImplementedError"):]
    oracles.write_text(text.replace(stub, '    x = inputs["inputs"]\n'
                                          '    return (x * weights["scale"]).astype(x.dtype)\n'))
    passing = spec_test(project, "-v")
    assert passing.returncode == 0, passing.stdout[-3000:]
    assert "specs/components/my_scale.yaml::oracle[torch] PASSED" in passing.stdout and "5 passed" in passing.stdout


def test_a_second_component_joins_the_package_and_nothing_is_overwritten(tmp_path, capsys):
    project = tmp_path / "proj"
    assert main(["new", "component", "MyScale", "--dir", str(project)]) == 0
    assert main(["new", "component", "QHead", "--dir", str(project)]) == 0
    capsys.readouterr()
    oracles = (project / "my_components" / "oracles.py").read_text()
    assert "def my_scale_apply(" in oracles and "def q_head_apply(" in oracles
    assert "component: my_components.q_head.QHead" in (project / "specs/components/q_head.yaml").read_text()
    assert not (project / "pyproject.toml").read_text().count("[project]") > 1

    before = (project / "my_components" / "my_scale.py").read_text()
    assert main(["new", "component", "MyScale", "--dir", str(project)]) == 2
    assert f"{project / 'my_components' / 'my_scale.py'} exists already; nothing written" in capsys.readouterr().err
    assert (project / "my_components" / "my_scale.py").read_text() == before

    (project / "other").mkdir()
    (project / "other" / "__init__.py").write_text("")
    assert main(["new", "component", "Third", "--dir", str(project)]) == 2
    assert "holds several packages (my_components, other); choose one with --package" in capsys.readouterr().err
    assert main(["new", "component", "Third", "--dir", str(project), "--package", "other"]) == 0
    assert (project / "other" / "third.py").exists()
    assert main(["new", "component", "my_layer", "--dir", str(project)]) == 2
    assert "NAME must be a class name in CapWords (e.g. MyLayer); got 'my_layer'" in capsys.readouterr().err
