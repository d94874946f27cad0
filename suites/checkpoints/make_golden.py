"""Writes the golden checkpoints `test_golden.py` loads: small CartPole runs of each agent on each backend, saved
by today's code, under ``golden/format_<N>/<case>/`` (N: the newest version among the checkpoint formats they
hold), each a run directory (``checkpoint/``: what ``spacegraph train`` saved) with ``expected.json`` beside it:
fixed observations and the greedy actions and Q-values (DQN, Ape-X's learner) or state values (IMPALA) that the
policy restored from it gave when it was written.

    python suites/checkpoints/make_golden.py [--only CASE ...] [--force]

An existing ``format_<N>`` case is never overwritten without ``--force``: the golden checkpoints of earlier
formats stay as they were written, and the test keeps loading them.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
from typing import Any

import numpy as np
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "golden")
#: Observations per case (CartPole states, drawn once from a fixed generator).
NUM_OBSERVATIONS = 8

_DQN = {"agent": "dqn", "seed": 0, "env": {"id": "CartPole-v1", "num_envs": 1},
        "network": {"layers": [{"type": "dense", "units": 16, "activation": "relu"}], "dueling": True},
        "memory": {"type": "replay", "capacity": 64},
        "loss": {"gamma": 0.99, "double_q": True, "huber_delta": 1.0, "n_step": 3},
        "optimizer": {"type": "adam", "learning_rate": 0.001, "clip_grad_norm": 10.0},
        "exploration": {"type": "linear", "from": 1.0, "to": 0.05, "steps": 200},
        "update": {"batch_size": 16, "start_after": 50, "every": 1, "repeats": 1},
        "target_sync": {"every": 1, "tau": 0.01},
        "evaluation": {"every": 200, "screen_episodes": 1, "episodes": 1, "target_return": 475}}
_IMPALA = {"agent": "impala", "seed": 0, "env": {"id": "CartPole-v1", "num_envs": 2},
           "network": {"layers": [{"type": "dense", "units": 16, "activation": "tanh"}], "lstm_units": None},
           "rollout": {"length": 5, "batch_size": 1},
           "optimizer": {"type": "rmsprop", "learning_rate": 0.001, "decay": 0.99, "epsilon": 0.00001,
                         "clip_grad_norm": 40},
           "evaluation": {"every": 200, "screen_episodes": 1, "episodes": 1, "target_return": 475}}
_APEX = dict(_DQN, agent="apex", memory={"type": "prioritized", "capacity": 64, "alpha": 0.6, "beta": 0.4},
             apex={"workers": 1, "shards": 1, "sample_steps": 20, "epsilon": 0.4, "alpha": 7, "publish_every": 5,
                   "prefetch": 2, "throttle": True, "max_update_lag": 100})
#: case (without the backend) -> (config, extra `spacegraph train` arguments).
CASES: dict[str, tuple[dict[str, Any], list[str]]] = {
    "dqn": (_DQN, []),
    "impala": (_IMPALA, []),
    "impala_lstm": (dict(_IMPALA, network={**_IMPALA["network"], "lstm_units": 8}), []),
    "apex": (_APEX, ["--executor", "local"]),
}
BACKENDS = ("tf", "torch")
STEPS = 200


def observations() -> np.ndarray:
    """The fixed CartPole observations every case is checked on."""
    rng = np.random.default_rng(44)
    return (rng.uniform(-1, 1, (NUM_OBSERVATIONS, 4)) * [2.0, 1.5, 0.2, 1.5]).astype(np.float32)


def policy_outputs(agent: Any, obs: np.ndarray) -> dict[str, list]:
    """The greedy actions and the values (Q-values or state values) ``agent`` gives for ``obs`` (IMPALA LSTM: the
    values first, from fresh recurrent states, then the actions)."""
    if hasattr(agent, "q_values"):
        return {"q_values": agent.q_values(obs).tolist(), "actions": agent.get_actions(obs, explore=False).tolist()}
    values = agent.values(obs).tolist()
    return {"values": values, "actions": agent.get_actions(obs, explore=False).tolist()}


def format_dir() -> str:
    """``format_<N>``: N the newest current version among the formats a golden checkpoint holds."""
    import reference_agents.agents  # noqa: F401  (declares the agents' formats)
    import reference_agents.training.apex  # noqa: F401  (apex.json, shard snapshots, trainer.json)
    from harness.execution.formats import FORMATS

    return f"format_{max(f.version for f in FORMATS.values())}"


def make_case(name: str, backend: str, out: str) -> None:
    """Trains case ``name`` on ``backend`` for `STEPS` env steps and writes its run directory to ``out``."""
    from reference_agents.agents import load_checkpoint
    from spacegraph.cli import main

    config, extra = CASES[name]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"{name}.yaml")
        with open(path, "w") as fh:
            yaml.safe_dump(dict(config, backend=backend), fh)
        run = os.path.join(tmp, "run")
        with contextlib.redirect_stdout(io.StringIO()) as said:
            rc = main(["train", path, "--steps", str(STEPS), "--out", run, "--quiet", "--no-tensorboard", *extra])
        if rc != 0:
            raise SystemExit(f"make_golden: spacegraph train of {name} on {backend} exited {rc}:\n{said.getvalue()}")
        if os.path.exists(out):
            shutil.rmtree(out)
        shutil.copytree(os.path.join(run, "checkpoint"), os.path.join(out, "checkpoint"))
    obs = observations()
    agent = load_checkpoint(os.path.join(out, "checkpoint"))
    expected = {"case": name, "agent": config["agent"], "backend": backend,
                "observations": obs.tolist(), **policy_outputs(agent, obs)}
    getattr(agent, "close", lambda: None)()
    with open(os.path.join(out, "expected.json"), "w") as fh:
        json.dump(expected, fh, indent=1)
        fh.write("\n")


def main(argv: list[str] | None = None) -> int:
    """Writes the golden checkpoints of today's formats (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", metavar="CASE", help=f"case_backend (e.g. dqn_tf); default all "
                                                                         f"of {sorted(CASES)} x {BACKENDS}")
    parser.add_argument("--force", action="store_true", help="overwrite cases that exist")
    args = parser.parse_args(argv)
    folder = os.path.join(GOLDEN, format_dir())
    wanted = [f"{c}_{b}" for c in CASES for b in BACKENDS]
    unknown = sorted(set(args.only or []) - set(wanted))
    if unknown:
        parser.error(f"--only: unknown case(s) {unknown}; cases: {wanted}")
    for case in args.only or wanted:
        out = os.path.join(folder, case)
        if os.path.exists(out) and not args.force:
            print(f"{out} exists: kept (--force overwrites it)")
            continue
        name, backend = case.rsplit("_", 1)
        make_case(name, backend, out)
        size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(out) for f in fs)
        print(f"wrote {out} ({size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # run as a script from anywhere in the checkout
    sys.exit(main())
