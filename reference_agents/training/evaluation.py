"""What "solved" means, and the greedy evaluation that decides it: one definition for `spacegraph train`,
`Trainer`, the learning tests and the reports.

`EvaluationProtocol` (a config's ``evaluation`` section)::

    evaluation: {every: 2500, screen_episodes: 10, episodes: 100, target_return: 475}

Every ``every`` env steps the greedy policy plays ``screen_episodes`` episodes (the screen);
only when their mean reaches ``target_return`` does it play the full ``episodes`` (a separate set of
episodes). A run is solved at the first evaluation whose *full* mean reaches ``target_return``:
the screen alone never declares it (a 10-episode screen at 480 and a 100-episode mean at 419.5
is not solved). Without a target nothing is decided and each evaluation is the screen alone (a
progress reading); when ``screen_episodes`` is None or not below ``episodes`` there is no screen and
each evaluation plays ``episodes``.

`run_evaluation` applies the protocol to any ``play(stage, episodes)``; `evaluate_worker` is the
one for a `VectorEnvWorker` (screen on its own environments seeded ``seed + 10_000``, the full
evaluation on up to 20 seeded ``seed + 50_000``, each environment a fixed quota of episodes).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Callable, Sequence

import numpy as np

from harness.seeds import derive_seed
#: The most environments a full evaluation runs in lockstep by default.
FULL_EVAL_ENVS = 20

def _positive_int(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, np.integer)) and value > 0


@dataclasses.dataclass(frozen=True)
class EvaluationProtocol:
    """When to evaluate, how, and what counts as solved.

    Args:
        every: env steps between evaluations.
        episodes: episodes of the full evaluation, whose mean decides "solved".
        screen_episodes: episodes of the screen played first (None or >= ``episodes``: no screen).
        target_return: the full evaluation's mean return that counts as solved (None: no target; each
            evaluation is then the screen alone, or ``episodes`` without a screen).
        envs: environments each evaluation runs in lockstep (None: the screen one per episode, the full
            evaluation ``min(episodes, 20)``).

    Raises:
        ValueError: naming the field that is not a positive int (or a finite number for ``target_return``).
    """

    every: int = 2500
    episodes: int = 100
    screen_episodes: int | None = 10
    target_return: float | None = None
    envs: int | None = None

    def __post_init__(self) -> None:
        for name in ("every", "episodes", "screen_episodes", "envs"):
            value = getattr(self, name)
            if not (value is None and name in ("screen_episodes", "envs")) and not _positive_int(value):
                raise ValueError(f"evaluation.{name} must be a positive int; got {value!r}")
        t = self.target_return
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float, np.number))
                              or not math.isfinite(t)):
            raise ValueError(f"evaluation.target_return must be a finite number or None; got {t!r}")
        for name in ("every", "episodes", "screen_episodes", "envs"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, int(value))
        if t is not None:
            object.__setattr__(self, "target_return", float(t))

    @classmethod
    def from_config(cls, section: Any = None, **overrides: Any) -> "EvaluationProtocol":
        """The protocol of a config's ``evaluation`` section (an object with these attributes, a dict or None),
        with the ``overrides`` that are not None replacing its values."""
        fields = [f.name for f in dataclasses.fields(cls)]
        if isinstance(section, dict):
            values = {k: section[k] for k in fields if k in section}
        else:
            values = {k: getattr(section, k) for k in fields if section is not None and hasattr(section, k)}
        unknown = sorted(set(overrides) - set(fields))
        if unknown:
            raise ValueError(f"EvaluationProtocol: unknown setting {unknown[0]!r}; the settings are {fields}")
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    @property
    def screened(self) -> bool:
        """Whether evaluations start with a screen (fewer screen episodes than full ones)."""
        return self.screen_episodes is not None and self.screen_episodes < self.episodes

    def describe(self) -> str:
        """What "solved" means, in words: ``mean of 100 greedy episodes >= 475 (played when a 10-episode
        screen reaches 475)``."""
        if self.target_return is None:
            n = self.screen_episodes if self.screened else self.episodes
            return f"no target (each evaluation: the mean of {n} greedy episodes)"
        text = f"mean of {self.episodes} greedy episodes >= {self.target_return:g}"
        return text + (f" (played when a {self.screen_episodes}-episode screen reaches {self.target_return:g})"
                       if self.screened else "")

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """One evaluation under an `EvaluationProtocol`.

    Attributes:
        screen_returns: the screen's returns (None when no screen was played).
        full_returns: the full evaluation's returns (None when the screen did not pass).
        solved: whether the full mean reached the target (never from the screen alone).
        seconds: wall-clock seconds of the evaluation.
    """

    screen_returns: tuple[float, ...] | None
    full_returns: tuple[float, ...] | None
    solved: bool
    seconds: float = 0.0

    @staticmethod
    def _mean(returns: tuple[float, ...] | None) -> float:
        return float(np.mean(returns)) if returns else math.nan

    @property
    def screen_mean(self) -> float:
        return self._mean(self.screen_returns)

    @property
    def full_mean(self) -> float:
        """The full evaluation's mean (NaN when it was not played)."""
        return self._mean(self.full_returns)

    @property
    def returns(self) -> tuple[float, ...]:
        """The returns of the most complete evaluation played (the full one when played, else the screen)."""
        return self.full_returns if self.full_returns is not None else (self.screen_returns or ())

    @property
    def mean(self) -> float:
        """The mean of `returns`."""
        return self._mean(self.returns)


def run_evaluation(protocol: EvaluationProtocol,
                   play: Callable[[str, int], Sequence[float]]) -> Evaluation:
    """Applies ``protocol`` once: ``play("screen", screen_episodes)`` first when it screens, then
    ``play("full", episodes)`` when the screen's mean reaches the target (or at once without a screen);
    solved only from the full mean. Without a target a screened protocol plays the screen alone.

    Args:
        protocol: the protocol.
        play: ``play(stage, episodes) -> returns`` with ``stage`` ``"screen"`` or ``"full"``.
    """
    start = time.perf_counter()
    screen = None
    if protocol.screened:
        screen = tuple(float(r) for r in play("screen", protocol.screen_episodes))
        if protocol.target_return is None or not screen or float(np.mean(screen)) < protocol.target_return:
            return Evaluation(screen, None, False, time.perf_counter() - start)
    full = tuple(float(r) for r in play("full", protocol.episodes))
    solved = bool(protocol.target_return is not None and full and float(np.mean(full)) >= protocol.target_return)
    return Evaluation(screen, full, solved, time.perf_counter() - start)


def evaluate_worker(worker: Any, protocol: EvaluationProtocol, seed: int | None = None) -> Evaluation:
    """`run_evaluation` with ``worker.evaluate``: the screen on ``screen_episodes`` environments (one episode
    each) seeded ``seed + 10_000``, the full evaluation on ``min(episodes, 20)`` seeded ``seed + 50_000``
    (``protocol.envs`` caps both); ``seed`` defaults to the worker's.
    """
    base = int(getattr(worker, "seed", 0) if seed is None else seed)

    def play(stage: str, episodes: int) -> list[float]:
        default = episodes if stage == "screen" else min(episodes, FULL_EVAL_ENVS)
        envs = default if protocol.envs is None else min(protocol.envs, episodes)
        return worker.evaluate(episodes, num_envs=envs, seed=derive_seed(base, f"eval_{stage}"))

    return run_evaluation(protocol, play)
