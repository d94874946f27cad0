"""Reproducible one-process runs: ``spacegraph train`` twice with the same config, seed, backend and threads (in
one process, on CPU) writes the same ``metrics.csv`` rows (less the wall-time columns), the same
``episodes.csv`` and the same final weights (docs/reproducibility.md).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from spacegraph.cli import main

CONFIGS = Path(__file__).resolve().parents[2] / "reference_agents" / "configs"
STEPS = 3000
#: The metrics.csv columns measured on the wall clock: they differ from run to run by design.
WALL_TIME_COLUMNS = {"wall_s", "train_s", "eval_s", "steps_per_s", "frames_per_s"}
#: Each agent's shipped CartPole config made cheap enough for twice 3,000 steps (DQN: a smaller network, updates
#: every 4 steps from step 200; IMPALA: 4 environments, so that 3,000 steps make 37 updates; both: a short
#: evaluation every 1,000 steps); everything else as shipped.
SMALL = {
    "dqn_cartpole": {"network": {"layers": [{"type": "dense", "units": 32, "activation": "relu"}], "dueling": True},
                     "update": {"batch_size": 32, "start_after": 200, "every": 4, "repeats": 1},
                     "exploration": {"type": "linear", "from": 1.0, "to": 0.02, "steps": 1500}},
    "impala_cartpole": {"env": {"id": "CartPole-v1", "num_envs": 4}},
    "impala_cartpole_lstm": {"env": {"id": "CartPole-v1", "num_envs": 4}},
}
EVALUATION = {"every": 1000, "screen_episodes": 2, "episodes": 3, "target_return": 475}


def small_config(folder: Path, name: str) -> str:
    config = yaml.safe_load((CONFIGS / f"{name}.yaml").read_text(encoding="utf-8"))
    config.update(SMALL[name], evaluation=EVALUATION)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return str(path)


def train(config: str, backend: str, out: Path) -> None:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        code = main(["train", config, "--backend", backend, "--seed", "3", "--steps", str(STEPS), "--out", str(out),
                     "--threads", "1"])
    assert code == 0, err.getvalue()[-2000:]


def rows(path: Path, drop: set[str] = frozenset()) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return [{k: v for k, v in row.items() if k not in drop} for row in csv.DictReader(fh)]


#: The checkpoint metadata's entries that record when it was written.
SAVE_TIME_KEYS = {"saved_at"}


def arrays(checkpoint: Path) -> dict[str, Any]:
    """Every array of every ``.npz`` file of a checkpoint, keyed ``file/array`` (a JSON metadata array read as a
    dict, less its `SAVE_TIME_KEYS`)."""
    out: dict[str, Any] = {}
    for path in sorted(checkpoint.rglob("*.npz")):
        with np.load(path, allow_pickle=False) as npz:
            for k in npz.files:
                value = npz[k]
                if k == "__meta__":
                    value = {m: v for m, v in json.loads(str(value)).items() if m not in SAVE_TIME_KEYS}
                out[f"{path.relative_to(checkpoint)}/{k}"] = value
    return out


def assert_same_run(a: Path, b: Path) -> None:
    first, second = rows(a / "metrics.csv", WALL_TIME_COLUMNS), rows(b / "metrics.csv", WALL_TIME_COLUMNS)
    assert len(first) == STEPS // EVALUATION["every"] and int(first[-1]["env_steps"]) >= STEPS
    assert first == second
    assert rows(a / "episodes.csv") == rows(b / "episodes.csv")
    weights, again = arrays(a / "checkpoint"), arrays(b / "checkpoint")
    assert weights and sorted(weights) == sorted(again)
    differ = [k for k in weights if not (weights[k] == again[k] if isinstance(weights[k], dict)
                                          else np.array_equal(weights[k], again[k]))]
    assert differ == [], f"final arrays differ: {differ[:10]}"


@pytest.mark.parametrize("name, backend", [("dqn_cartpole", "tf"), ("dqn_cartpole", "torch"), ("impala_cartpole", "tf"),
                                           ("impala_cartpole", "torch"), ("impala_cartpole_lstm", "torch")])
def test_a_local_run_repeats_exactly(tmp_path, name, backend):
    config = small_config(tmp_path, name)
    train(config, backend, tmp_path / "first")
    train(config, backend, tmp_path / "second")
    assert_same_run(tmp_path / "first", tmp_path / "second")


def test_another_seed_gives_another_run(tmp_path):
    # (so that the comparison above can tell runs apart: metrics and weights depend on the seed)
    config = small_config(tmp_path, "impala_cartpole")
    train(config, "torch", tmp_path / "first")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["train", config, "--backend", "torch", "--seed", "4", "--steps", str(STEPS),
                     "--out", str(tmp_path / "other")]) == 0
    with pytest.raises(AssertionError):
        assert_same_run(tmp_path / "first", tmp_path / "other")
