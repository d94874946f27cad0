"""DQN learning against RLlib: what counts as solved (`Criterion`), when a run stops (`Budget`), and the evaluation.

Every ``eval_every`` env steps (evaluation steps are not training steps) the greedy policy
plays the same evaluation episodes on every side (`greedy_returns`: episode ``i`` reset with
seed ``eval_seed + i``): 10 screening episodes, and when their mean reaches ``min_return``
all 100; the run is solved when the 100-episode mean reaches ``min_return``.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

REPO = Path(__file__).resolve().parents[2]
AGENT_CONFIG = REPO / "reference_agents" / "configs" / "dqn_cartpole.yaml"
ENV_ID = "CartPole-v1"
SIDES = ("ours_tf", "ours_torch", "rllib")
OURS = ("ours_tf", "ours_torch")
SIDE_TITLES = {"ours_tf": "ours (TF)", "ours_torch": "ours (PyTorch)", "rllib": "RLlib DQN (PyTorch)"}


@dataclasses.dataclass(frozen=True)
class Criterion:
    """When a run counts as solved, and how often it is evaluated.

    Args:
        min_return: the greedy mean return to reach.
        eval_episodes: episodes of the full evaluation.
        screen_episodes: episodes of the screening evaluation (the first of the full one's).
        eval_every: env steps between evaluations (each side trains in chunks of this many).
    """

    min_return: float = 475.0
    eval_episodes: int = 100
    screen_episodes: int = 10
    eval_every: int = 2500

    def __post_init__(self) -> None:
        for name in ("eval_episodes", "screen_episodes", "eval_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"Criterion: {name} must be a positive int; got {value!r}")
        if self.screen_episodes > self.eval_episodes:
            raise ValueError(f"Criterion: screen_episodes ({self.screen_episodes}) must not exceed eval_episodes "
                             f"({self.eval_episodes})")


@dataclasses.dataclass(frozen=True)
class Budget:
    """Where a run stops when unsolved: after ``env_steps`` env steps or ``seconds`` of training and evaluation.

    The bounds are checked after each chunk and its evaluation; the subprocess running a run is
    killed ``grace_seconds`` after ``seconds`` (set-up and the last chunk included).
    """

    env_steps: int = 150_000
    seconds: float = 600.0
    grace_seconds: float = 300.0

    def __post_init__(self) -> None:
        if isinstance(self.env_steps, bool) or not isinstance(self.env_steps, int) or self.env_steps <= 0:
            raise ValueError(f"Budget: env_steps must be a positive int; got {self.env_steps!r}")
        for name in ("seconds", "grace_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"Budget: {name} must be a positive number; got {value!r}")


def check_side(side: str) -> str:
    """``side`` if it is one of `SIDES`, else a ValueError naming them."""
    if side not in SIDES:
        raise ValueError(f"learning: side must be one of {', '.join(SIDES)}; got {side!r}")
    return side


def eval_seed(seed: int) -> int:
    """The seed of a run's first evaluation episode (the same on every side for one run seed)."""
    return 50_000 + 1_000 * int(seed)


# ---- evaluation ---------------------------------------------------------------------------------
def greedy_returns(act: Callable[[np.ndarray], Any], seeds: list[int], env_id: str = ENV_ID) -> np.ndarray:
    """The returns of one episode per seed, played in lockstep by the policy ``act``.

    Episode ``i`` runs in its own environment reset with ``seeds[i]`` and is played to its end
    (termination or time limit) exactly once; ``act`` gets the observations of the episodes still
    running, ``[n, *obs_shape]``, and returns one action per row.

    Raises:
        ValueError: when ``act`` returns other than one action per running episode.
    """
    import gymnasium as gym

    envs = [gym.make(env_id) for _ in seeds]
    try:
        obs = np.stack([env.reset(seed=int(s))[0] for env, s in zip(envs, seeds)])
        returns = np.zeros(len(seeds), np.float64)
        live = np.arange(len(seeds))
        while live.size:
            actions = np.asarray(act(obs[live])).reshape(-1)
            if actions.shape != (live.size,):
                raise ValueError(f"greedy_returns: the policy returned {actions.shape[0]} actions for {live.size} "
                                 f"observations")
            still = []
            for i, a in zip(live, actions):
                o, r, terminated, truncated, _ = envs[i].step(int(a))
                returns[i] += r
                obs[i] = o
                if not (terminated or truncated):
                    still.append(i)
            live = np.asarray(still, np.int64)
        return returns
    finally:
        for env in envs:
            env.close()


def evaluate(act: Callable[[np.ndarray], Any], criterion: Criterion, seed: int) -> dict[str, Any]:
    """Screening and (when the screen reaches ``min_return``) full greedy evaluation of ``act``.

    Returns:
        ``{"screen_mean", "full_mean" (None when not played), "seconds"}``; the full evaluation reuses
        the screening episodes (same seeds, deterministic policy) and plays the rest.
    """
    start, base = time.perf_counter(), eval_seed(seed)
    screen = greedy_returns(act, [base + i for i in range(criterion.screen_episodes)])
    full_mean = None
    if screen.mean() >= criterion.min_return:
        rest = greedy_returns(act, [base + i for i in range(criterion.screen_episodes, criterion.eval_episodes)])
        full_mean = float(np.concatenate([screen, rest]).mean())
    return {"screen_mean": float(screen.mean()), "full_mean": full_mean, "seconds": time.perf_counter() - start}
