"""`Trainer`: trains an agent on a `VectorEnvWorker`, evaluates, logs metrics, plots and checkpoints (resumable).

A run directory holds::

    metrics.csv, metrics.jsonl   one row per evaluation (METRIC_COLUMNS), appended and flushed row by row
    episodes.csv                 one row per finished training episode (EPISODE_COLUMNS)
    learning_curve.png           training returns and evaluation means against env steps (needs matplotlib)
    tensorboard/                 TensorBoard scalars of the rows and episodes at env steps (needs tensorboard;
                                 tensorboard --logdir RUN/tensorboard; Trainer(tensorboard=False) writes none)
    checkpoint/                  the agent's checkpoint, worker.json and trainer.json (replaced atomically)

Typical use (the ``spacegraph train`` command does the same)::

    agent = build_agent("dqn_cartpole", backend="torch", seed=0)
    result = Trainer(agent, "runs/cartpole").train(steps=100_000)   # evaluation: the config's section
    result.solved_at_step                       # None if no full evaluation's mean reached the target
    Trainer.resume("runs/cartpole").train(steps=150_000)   # continues to 150k steps in all

"Solved" has one definition (`evaluation`: `EvaluationProtocol`, the config's ``evaluation`` section):
the mean return of ``episodes`` greedy episodes reaching ``target_return``, played only when a
``screen_episodes`` screen reaches it; the learning tests and the reports apply the same one.

Modules: `trainer` (`Trainer`, `train`), `evaluation` (`EvaluationProtocol`, `run_evaluation`,
`evaluate_worker`), `result` (`TrainResult`), `files` (metrics, episodes and
the learning curve), `checkpoints` (atomic checkpoints, trainer state, what a resume loads),
`progress` (`ProgressBar`), `threads` (`set_framework_threads`), `scalars` (the TensorBoard event files).
"""

from __future__ import annotations

from .checkpoints import CHECKPOINT, TRAINER_STATE, WORKER_STATE, read_trainer_state
from .evaluation import Evaluation, EvaluationProtocol, evaluate_worker, run_evaluation
from .files import (
    EPISODE_COLUMNS, EPISODES_CSV, LEARNING_CURVE, METRIC_COLUMNS, METRICS_CSV, METRICS_JSONL, plot_learning_curve)
from .progress import ProgressBar
from .result import TrainResult
from .threads import set_framework_threads
from .trainer import Trainer, train

__all__ = [
    "CHECKPOINT", "EPISODE_COLUMNS", "EPISODES_CSV", "Evaluation", "EvaluationProtocol", "LEARNING_CURVE", "METRIC_COLUMNS", "METRICS_CSV",
    "METRICS_JSONL", "ProgressBar", "TRAINER_STATE", "TrainResult", "Trainer", "WORKER_STATE", "plot_learning_curve",
    "evaluate_worker", "read_trainer_state", "run_evaluation", "set_framework_threads", "train",
]
