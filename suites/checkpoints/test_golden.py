"""Every golden checkpoint of every format directory (``golden/format_<N>/<case>/``, written by
`make_golden.py`, and ``*_unversioned``: the same cases written by the code before formats carried versions) loads
through the public loader and its restored policy gives the greedy actions and values it gave when written; it
loads on the other backend too (DQN, IMPALA and Ape-X's learner checkpoints are backend-neutral); and a run
continues from it with ``spacegraph train --resume``, saving every file stamped with today's format versions."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from harness.execution.formats import FORMATS, PROJECT_VERSION
from harness.execution.serialization import read_json, read_npz
from harness.testing.plugin import selected_backends
from reference_agents.agents import load_checkpoint
from suites.checkpoints.make_golden import policy_outputs

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(GOLDEN.glob("format_*/*/expected.json"))
IDS = [f"{p.parent.parent.name}/{p.parent.name}" for p in CASES]
#: Values as written, on either backend (the other backend's kernels round float32 differently: measured at most
#: 2.4e-7 apart on these cases).
ATOL = 1e-5


def test_there_are_golden_checkpoints_of_each_agent_and_backend():
    cases = {(json.loads(p.read_text())["case"], json.loads(p.read_text())["backend"]) for p in CASES}
    assert cases >= {(c, b) for c in ("dqn", "impala", "impala_lstm", "apex") for b in ("tf", "torch")}, cases
    total = sum(f.stat().st_size for f in GOLDEN.rglob("*") if f.is_file())
    assert total < 2_000_000, f"the golden checkpoints take {total:,} bytes; keep them well under 2 MB"


def _check(expected: dict, agent) -> None:
    got = policy_outputs(agent, np.asarray(expected["observations"], np.float32))
    key = "q_values" if "q_values" in expected else "values"
    np.testing.assert_allclose(got[key], expected[key], atol=ATOL, rtol=0, err_msg=f"{key} differ")
    assert got["actions"] == expected["actions"]


def _expected(path: Path, backend: str) -> dict:
    if backend not in selected_backends():
        pytest.skip(f"the {backend} backend is not selected (SPACEGRAPH_BACKENDS)")
    return json.loads(path.read_text())


@pytest.mark.parametrize("path", CASES, ids=IDS)
def test_a_golden_checkpoint_restores_the_policy_it_was_written_with(path):
    expected = _expected(path, json.loads(path.read_text())["backend"])
    agent = load_checkpoint(str(path.parent / "checkpoint"))
    assert agent.backend == expected["backend"]
    _check(expected, agent)


@pytest.mark.parametrize("path", CASES, ids=IDS)
def test_a_golden_checkpoint_loads_on_the_other_backend(path):
    other = {"tf": "torch", "torch": "tf"}[json.loads(path.read_text())["backend"]]
    expected = _expected(path, other)
    agent = load_checkpoint(str(path.parent / "checkpoint"), backend=other)
    assert agent.backend == other
    _check(expected, agent)


#: One case of each agent per format directory continues with `spacegraph train --resume` (each costs a run).
RESUMED = [p for p in CASES if p.parent.name.endswith(("_torch", "_torch_unversioned"))
           and not p.parent.name.startswith("impala_lstm")]


@pytest.mark.parametrize("path", RESUMED, ids=[f"{p.parent.parent.name}/{p.parent.name}" for p in RESUMED])
def test_a_run_continues_from_a_golden_checkpoint(path, tmp_path, capsys):
    from spacegraph.cli import main

    expected = dict(_expected(path, "torch"), steps=None)
    run = tmp_path / "run"
    shutil.copytree(path.parent, run)
    with open(run / "checkpoint" / "worker.json") as fh:
        steps = expected["steps"] = json.load(fh)["total_steps"]
    assert main(["train", "--resume", str(run), "--steps", str(steps + 40), "--quiet", "--no-tensorboard"]) == 0, \
        capsys.readouterr().err
    capsys.readouterr()
    with open(run / "checkpoint" / "worker.json") as fh:
        assert json.load(fh)["total_steps"] >= steps + 40
    with open(run / "checkpoint" / "trainer.json") as fh:  # the golden run's evaluation row, then the new one
        assert [r["env_steps"] for r in json.load(fh)["history"]][:1] == [expected["steps"]]
    assert_stamped(run / "checkpoint")


def assert_stamped(ckpt: Path) -> None:
    """Every file of a checkpoint that has metadata names its format at the current version and this spacegraph."""
    metas = {"agent_state.npz": read_npz(ckpt / "agent_state.npz", meta_key="__meta__", versions=False)[0],
             "trainer.json": read_json(ckpt / "trainer.json", versions=False)}
    if (ckpt / "apex.json").exists():
        metas["apex.json"] = read_json(ckpt / "apex.json", versions=False)
        metas["shard-0.npz"] = read_npz(ckpt / "shards" / "shard-0.npz", meta_key="__meta__", versions=False)[0]
    for name, meta in metas.items():
        assert meta.get("format") in FORMATS, (name, meta.get("format"))
        assert (meta.get("format_version"), meta.get("spacegraph")) == (FORMATS[meta["format"]].version,
                                                                         PROJECT_VERSION), name
