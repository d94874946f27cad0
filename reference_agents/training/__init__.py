"""`Trainer`: trains an agent on a `VectorEnvWorker`, evaluates, logs metrics, plots and checkpoints (resumable).

A run directory holds::

    metrics.csv, metrics.jsonl   one row per evaluation (METRIC_COLUMNS), appended and flushed row by row
    episodes.csv                 one row per finished training episode (EPISODE_COLUMNS)
    learning_curve.png           training returns and evaluation means against env steps (needs matplotlib)
    checkpoint/                  the agent's checkpoint, worker.json and trainer.json (replaced atomically)

Typical use (the ``spacegraph train`` command does the same)::

    agent = build_agent("dqn_cartpole", backend="torch", seed=0)
    result = Trainer(agent, "runs/cartpole", eval_episodes=100, target_return=475.0).train(steps=100_000)
    result.solved_at_step                       # None if the target was not reached
    Trainer.resume("runs/cartpole").train(steps=150_000)   # continues to 150k steps in all

Modules: `trainer` (`Trainer`, `train`), `result` (`TrainResult`), `files` (metrics, episodes and
the learning curve), `checkpoints` (atomic checkpoints, trainer state, what a resume loads),
`progress` (`ProgressBar`), `threads` (`set_framework_threads`).
"""

from __future__ import annotations

from .checkpoints import CHECKPOINT, TRAINER_STATE, WORKER_STATE, read_trainer_state
from .files import (
    EPISODE_COLUMNS, EPISODES_CSV, LEARNING_CURVE, METRIC_COLUMNS, METRICS_CSV, METRICS_JSONL, plot_learning_curve)
from .progress import ProgressBar
from .result import TrainResult
from .threads import set_framework_threads
from .trainer import Trainer, train

__all__ = [
    "CHECKPOINT", "EPISODE_COLUMNS", "EPISODES_CSV", "LEARNING_CURVE", "METRIC_COLUMNS", "METRICS_CSV",
    "METRICS_JSONL", "ProgressBar", "TRAINER_STATE", "TrainResult", "Trainer", "WORKER_STATE", "plot_learning_curve",
    "read_trainer_state", "set_framework_threads", "train",
]
