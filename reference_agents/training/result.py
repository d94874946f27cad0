"""`TrainResult`: what `Trainer.train` did (a run and its resumes together)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from .files import as_float


@dataclasses.dataclass
class TrainResult:
    """What `Trainer.train` did (a run and its resumes together).

    Attributes:
        history: the metric rows (one per evaluation, keys `METRIC_COLUMNS`), oldest first.
        solved_at_step: the env step of the first evaluation whose full mean reached the target
            (`EvaluationProtocol`; a screen alone never counts); None when none did.
        total_steps: env steps taken in all (summed over environments).
        total_frames: emulator frames taken in all.
        episodes: training episodes finished in all.
        seconds: wall-clock seconds of this `train` call.
        total_seconds: wall-clock seconds of all calls (resumes included), evaluation included.
        train_seconds: of those, seconds spent stepping and updating (evaluation excluded).
        stop_reason: ``"steps"``, ``"target_return"``, ``"max_seconds"``, ``"callback"`` or ``"interrupted"``.
        out_dir: the run directory (None without one).
        checkpoint: the checkpoint directory written last (None if none was written).
        strategy: the strategy the agent's update ran with (`strategy_record`: ``{"type", "mode", "replicas",
            "backend", "devices"}``; None for an agent without an executor).
    """

    history: list[dict[str, Any]]
    solved_at_step: int | None
    total_steps: int
    total_frames: int
    episodes: int
    seconds: float
    total_seconds: float
    train_seconds: float
    stop_reason: str
    out_dir: str | None = None
    checkpoint: str | None = None
    strategy: dict[str, Any] | None = None

    @property
    def final_eval_return(self) -> float:
        """The last evaluation's mean return (NaN before the first)."""
        return as_float(self.history[-1]["eval_return"]) if self.history else math.nan

    @property
    def steps_per_s(self) -> float:
        """Env steps per second of stepping and updating, over all calls."""
        return self.total_steps / self.train_seconds if self.train_seconds > 0 else math.nan
