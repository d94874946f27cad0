"""What workers hand back: finished `Episode`s, `WorkerStats` of a run, `SampleBatch`es of transitions."""

from __future__ import annotations

import dataclasses
import math
import threading
from typing import Any, Sequence

import numpy as np

from reference_agents.workers.envs import stack_values

RECORD_KEYS = ("states", "actions", "rewards", "next_states", "terminals", "discounts")


@dataclasses.dataclass(frozen=True)
class Episode:
    """One finished episode.

    Attributes:
        env_id: the index of the environment (0..N-1) it ran in.
        episode_return: the sum of its rewards.
        length: its number of steps.
        terminated: it ended in a terminal state (gymnasium ``terminated``).
        truncated: it was cut by a time limit (gymnasium ``truncated``).
        end_step: the worker's env-step count (summed over environments) when it ended.
        end_frame: the worker's frame count when it ended.
    """

    env_id: int
    episode_return: float
    length: int
    terminated: bool
    truncated: bool
    end_step: int
    end_frame: int


class UpdateMeans:
    """The means of a learner's update metrics since the last `take`: the learning diagnostics a `Trainer` puts
    in each metric row (`LEARNER_COLUMNS`: the policy's entropy, the gradient norm, the policy lag).

    `add` takes an update's metrics dict (as ``update_on_schedule`` or ``update`` returns it); its finite
    numbers count, bools, NaN and anything else are left out.
    """

    def __init__(self) -> None:
        self._sums: dict[str, float] = {}
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()   # a learner thread adds while the trainer's thread takes (Ape-X)

    def add(self, metrics: Any) -> None:
        """Counts one update's metrics (a dict; anything else is ignored)."""
        if not isinstance(metrics, dict):
            return
        with self._lock:
            for key, value in metrics.items():
                if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
                    continue
                if math.isfinite(value):
                    self._sums[key] = self._sums.get(key, 0.0) + float(value)
                    self._counts[key] = self._counts.get(key, 0) + 1

    def take(self) -> dict[str, float]:
        """``{metric: mean}`` over the updates added since the last call (empty after none), and a fresh start."""
        with self._lock:
            means = {k: self._sums[k] / self._counts[k] for k in self._sums}
            self._sums, self._counts = {}, {}
        return means


@dataclasses.dataclass
class WorkerStats:
    """What one `VectorEnvWorker.run` (or `sample`) did.

    Attributes:
        steps: env steps taken, summed over environments.
        frames: emulator frames taken (``steps * frames_per_step``).
        seconds: wall-clock time of the run.
        steps_per_s: ``steps / seconds``.
        frames_per_s: ``frames / seconds``.
        episodes: the episodes that finished during the run, in order.
        mean_return_100: the mean return of the worker's last 100 finished episodes (this run's and
            earlier ones'); NaN before the first.
        num_updates: the agent updates the run triggered.
        last_loss: the loss of the last of them (None if there was none).
        total_steps: the worker's env-step count after the run (all runs, resumes included).
        total_frames: the worker's frame count after the run.
        stopped_by_callback: the callback ended the run early.
    """

    steps: int = 0
    frames: int = 0
    seconds: float = 0.0
    steps_per_s: float = 0.0
    frames_per_s: float = 0.0
    episodes: list[Episode] = dataclasses.field(default_factory=list)
    mean_return_100: float = math.nan
    num_updates: int = 0
    last_loss: float | None = None
    total_steps: int = 0
    total_frames: int = 0
    stopped_by_callback: bool = False


@dataclasses.dataclass
class SampleBatch:
    """Transitions a worker folded without observing them, for a replay elsewhere (Ape-X).

    Attributes:
        records: dict of arrays with keys ``states, actions, rewards, next_states, terminals,
            discounts`` and one row per transition (empty arrays when none finished).
        priorities: the act-time ``|TD error|`` per transition with ``compute_priorities`` (`ActTimePriorities`),
            else None.
        stats: the `WorkerStats` of the steps taken.
    """

    records: dict[str, Any]
    priorities: np.ndarray | None
    stats: WorkerStats

    def __len__(self) -> int:
        return len(self.records["rewards"])


def stack_records(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per-transition dicts from `NStepAccumulator` as one dict of arrays (leading axis: transition)."""
    out = {k: stack_values([r[k] for r in records]) for k in RECORD_KEYS}
    out["rewards"] = out["rewards"].astype(np.float32)
    out["discounts"] = out["discounts"].astype(np.float32)
    out["terminals"] = out["terminals"].astype(bool)
    return out


def _concat_nested(values: Sequence[Any]) -> Any:
    first = values[0]
    if isinstance(first, dict):
        return {k: _concat_nested([v[k] for v in values]) for k in first}
    if isinstance(first, tuple):
        return tuple(_concat_nested([v[i] for v in values]) for i in range(len(first)))
    return np.concatenate(values)


def _slice_nested(value: Any, start: int, stop: int) -> Any:
    if isinstance(value, dict):
        return {k: _slice_nested(v, start, stop) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_slice_nested(v, start, stop) for v in value)
    return value[start:stop]


def slice_records(records: dict[str, Any], start: int, stop: int) -> dict[str, Any]:
    """Transitions ``start:stop`` of a record dict (nested values sliced alike)."""
    return {k: _slice_nested(v, start, stop) for k, v in records.items()}


def concat_records(batches: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Record dicts of `stack_records` joined along the transition axis (empty arrays for none)."""
    if not batches:
        return {k: np.zeros((0,)) for k in RECORD_KEYS}
    return {k: _concat_nested([b[k] for b in batches]) for k in RECORD_KEYS}


def mean_episode_return(episodes: list[Episode], last: int = 100) -> float:
    """The mean return of the last ``last`` of ``episodes`` (NaN when there is none)."""
    if not episodes:
        return math.nan
    return float(np.mean([e.episode_return for e in episodes[-last:]]))
