"""DQN learning against RLlib on CartPole-v1: env steps and wall seconds to a greedy mean return of 475.

The target of issue 6 (a report, not a test): our DQN takes fewer environment steps
and at most half the wall time of RLlib's DQN to reach the same return on the same
machine, measured side by side.

Sides:

* ``ours_tf`` / ``ours_torch``: ``build_agent("dqn_cartpole", backend, seed)`` trained by
  ``VectorEnvWorker.for_agent(agent)`` in chunks of ``eval_every`` env steps;
* ``rllib``: RLlib's DQN (new API stack, PyTorch) with the settings of its tuned example
  ``rllib/tuned_examples/dqn/cartpole_dqn.py`` (`RLLIB_SETTINGS`), one local env runner
  (``num_env_runners=0``) and a local learner, in a Ray instance this module starts on
  127.0.0.1 and shuts down; ``algo.train()`` iterations of ``eval_every`` sampled env steps.

Every ``eval_every`` env steps (evaluation steps are not training steps) the greedy policy
plays the same evaluation episodes on every side (`greedy_returns`: episode ``i`` reset with
seed ``eval_seed + i``): 10 screening episodes, and when their mean reaches ``min_return``
all 100; the run is solved when the 100-episode mean reaches ``min_return`` (the criterion
of the learning test in ``suites/agents/test_agent_specs.py``). Ours acts with
``agent.get_actions(obs, explore=False)``, RLlib with its RLModule's ``forward_inference``.

Each run is a fresh subprocess (one side, one seed) with one framework thread
(``OMP_NUM_THREADS=1``, ``torch.set_num_threads(1)``, TensorFlow's pools 1), bounded by an
env-step and a wall-time budget; runs are interleaved (seed 0 of every side, then seed 1, ...)
so that load from other processes on a shared machine hits all sides alike, and the 1-minute
load average is recorded at every evaluation.

Run ``python -m spacegraph.reports.learning_peers [--seeds 0,1] [--budget-steps N] [--budget-seconds S]``;
it writes ``reports/dqn_learning_vs_rllib.md``, ``.png`` and ``.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
REPORT_DIR = REPO / "reports"
STEM = "dqn_learning_vs_rllib"
AGENT_CONFIG = REPO / "reference_agents" / "configs" / "dqn_cartpole.yaml"
ENV_ID = "CartPole-v1"
SIDES = ("ours_tf", "ours_torch", "rllib")
OURS = ("ours_tf", "ours_torch")
SIDE_TITLES = {"ours_tf": "ours (TF)", "ours_torch": "ours (PyTorch)", "rllib": "RLlib DQN (PyTorch)"}
#: Environment variables every run's subprocess gets: one thread per framework and BLAS.
THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}
#: RLlib's tuned CartPole DQN (rllib/tuned_examples/dqn/cartpole_dqn.py, Ray 2.x), as keyword
#: arguments of ``DQNConfig.training`` and of ``DefaultModelConfig``; everything else is RLlib's default.
RLLIB_SETTINGS: dict[str, Any] = {
    "training": {"lr": 0.0005, "train_batch_size_per_learner": 32,
                 "replay_buffer_config": {"type": "PrioritizedEpisodeReplayBuffer", "capacity": 50000,
                                          "alpha": 0.6, "beta": 0.4},
                 "n_step": (2, 5), "double_q": True, "dueling": True, "epsilon": [(0, 1.0), (10000, 0.02)]},
    "model": {"fcnet_hiddens": [256], "fcnet_activation": "tanh", "fcnet_bias_initializer": "zeros_",
              "head_fcnet_bias_initializer": "zeros_", "head_fcnet_hiddens": [256]},
}
#: The issue's targets: ours / RLlib env steps below 1, ours / RLlib wall time at most 0.5.
TARGETS = {"env_steps": ("<", 1.0), "train_s": ("<=", 0.5), "train_eval_s": ("<=", 0.5)}
METRIC_TITLES = {"env_steps": "env steps", "train_s": "training wall s (no evaluation)",
                 "train_eval_s": "wall s with evaluation"}


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
        raise ValueError(f"learning_peers: side must be one of {', '.join(SIDES)}; got {side!r}")
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


# ---- the sides ----------------------------------------------------------------------------------
class OursSide:
    """Our DQN agent from ``config`` on ``backend``, trained by its `VectorEnvWorker`.

    Args:
        backend: ``"tf"`` or ``"torch"``.
        seed: the agent's (and its environments') seed.
        chunk: env steps per `train_chunk`.
        config: the agent config file.
    """

    def __init__(self, backend: str, seed: int, chunk: int, config: str | Path = AGENT_CONFIG) -> None:
        from reference_agents.agents import build_agent
        from reference_agents.workers import VectorEnvWorker

        self.agent = build_agent(str(config), backend=backend, seed=seed)
        self.worker = VectorEnvWorker.for_agent(self.agent)
        self.chunk = chunk

    def train_chunk(self) -> int:
        """Trains ``chunk`` more env steps; returns the env steps trained in all."""
        self.worker.run(num_steps=self.chunk)
        return int(self.worker.total_steps)

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Greedy actions."""
        return self.agent.get_actions(obs.astype(np.float32), explore=False)

    def close(self) -> None:
        self.worker.close()


class RLlibSide:
    """RLlib's DQN with `RLLIB_SETTINGS` on CartPole-v1, in a local Ray instance it starts and shuts down.

    ``min_sample_timesteps_per_iteration`` is set to ``chunk`` so that one ``algo.train()``
    samples ``chunk`` env steps (RLlib's default is 1000; it only sets how often results
    are reported, not how the algorithm learns).

    Args:
        seed: ``DQNConfig.debugging(seed=...)``.
        chunk: env steps per `train_chunk`.

    Raises:
        ImportError: when ``ray[rllib]`` is not installed.
    """

    def __init__(self, seed: int, chunk: int) -> None:
        from spacegraph.reports.replay_peers import import_rllib_safely

        import_rllib_safely()
        import ray
        from ray.rllib.algorithms.dqn import DQNConfig
        from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

        self._ray = ray
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        ray.init(address="local", num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
                 log_to_driver=False)
        try:
            config = (DQNConfig()
                      .environment(ENV_ID)
                      .framework("torch")
                      .env_runners(num_env_runners=0, num_envs_per_env_runner=1)
                      .learners(num_learners=0)
                      .reporting(min_sample_timesteps_per_iteration=chunk)
                      .debugging(seed=seed)
                      .training(**RLLIB_SETTINGS["training"])
                      .rl_module(model_config=DefaultModelConfig(**RLLIB_SETTINGS["model"])))
            self.algo = config.build_algo()
        except BaseException:
            ray.shutdown()
            raise
        self.chunk = chunk
        self.module = self.algo.get_module()

    def train_chunk(self) -> int:
        """One ``algo.train()``; returns RLlib's sampled env steps in all."""
        from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

        result = self.algo.train()
        return int(result[ENV_RUNNER_RESULTS][NUM_ENV_STEPS_SAMPLED_LIFETIME])

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Greedy actions of the env runner's RLModule (weights synced after every update)."""
        import torch

        with torch.no_grad():
            out = self.module.forward_inference({"obs": torch.as_tensor(obs, dtype=torch.float32)})
        return out["actions"].numpy()

    def describe(self) -> dict[str, Any]:
        """The settings the built algorithm runs with, read off its config, and its module as printed."""
        c = self.algo.config
        return {
            "lr": c.lr, "train_batch_size_per_learner": c.train_batch_size_per_learner,
            "replay_buffer_config": dict(c.replay_buffer_config), "n_step": list(c.n_step)
            if isinstance(c.n_step, (tuple, list)) else c.n_step,
            "double_q": c.double_q, "dueling": c.dueling, "epsilon": [list(p) for p in c.epsilon],
            "target_network_update_freq": c.target_network_update_freq, "tau": c.tau,
            "num_steps_sampled_before_learning_starts": c.num_steps_sampled_before_learning_starts,
            "rollout_fragment_length": c.get_rollout_fragment_length(), "training_intensity": c.training_intensity,
            "gamma": c.gamma, "grad_clip": c.grad_clip, "grad_clip_by": c.grad_clip_by,
            "td_error_loss_fn": c.td_error_loss_fn, "adam_epsilon": c.adam_epsilon,
            "model": dict(RLLIB_SETTINGS["model"]), "module": str(self.module),
        }

    def close(self) -> None:
        try:
            self.algo.stop()
        finally:
            self._ray.shutdown()


def limit_threads(side: str) -> dict[str, int | None]:
    """One thread for every framework the side uses (TensorFlow is imported before RLlib, see `RLlibSide`)."""
    for key, value in THREAD_ENV.items():
        os.environ.setdefault(key, value)
    if side in ("ours_tf", "rllib"):
        import tensorflow  # noqa: F401
    import torch

    from spacegraph.reports.act_report import configure_threads

    threads = configure_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # only allowed before torch's first parallel work
        pass
    return threads


def run_one(side: str, seed: int, criterion: Criterion = Criterion(), budget: Budget = Budget()) -> dict[str, Any]:
    """Builds one side from scratch (one framework thread) and runs `train_until_solved` on it.

    Args:
        side: one of `SIDES`.
        seed: the run's seed (agent / RLlib seed; evaluation episodes from `eval_seed`).
        criterion: when the run is solved.
        budget: when an unsolved run stops.

    Returns:
        `train_until_solved`'s result with ``"side"``, ``"seed"``, ``"setup_s"``, ``"load_start"``,
        ``"load_end"``, ``"threads"`` (thread pools set before building), ``"threads_after"`` (torch's
        after training) and, for RLlib, ``"settings"`` (`RLlibSide.describe`).

    Raises:
        ValueError: for an unknown side.
        ImportError: for ``rllib`` without ``ray[rllib]``.
    """
    check_side(side)
    threads = limit_threads(side)
    load_start = os.getloadavg()
    t0 = time.perf_counter()
    runner: Any = (RLlibSide(seed, criterion.eval_every) if side == "rllib"
                   else OursSide(side.split("_", 1)[1], seed, criterion.eval_every))
    setup_s = time.perf_counter() - t0
    try:
        settings = {"settings": runner.describe()} if side == "rllib" else {}
        run = train_until_solved(runner, seed, criterion, budget)
    finally:
        runner.close()
    import torch

    return {"side": side, "seed": int(seed), **run, "setup_s": setup_s, "load_start": list(load_start),
            "load_end": list(os.getloadavg()), "threads": threads, "threads_after": {"torch": torch.get_num_threads()},
            **settings}


def train_until_solved(runner: Any, seed: int, criterion: Criterion, budget: Budget) -> dict[str, Any]:
    """Alternates ``runner.train_chunk()`` and `evaluate` of ``runner.act`` until solved or out of budget.

    Args:
        runner: has ``train_chunk() -> env steps in all`` and ``act(obs) -> greedy actions``.
        seed: the run's seed (evaluation episodes from `eval_seed`).
        criterion: when the run is solved.
        budget: when an unsolved run stops (after the chunk and evaluation that cross it).

    Returns:
        ``{"solved", "solved_at", "train_s_to_solve", "train_eval_s_to_solve", "stop_reason" ("solved" |
        "env_steps" | "seconds"), "env_steps", "train_s", "eval_s",
        "curve": [{"env_steps", "train_s", "eval_s", "screen_mean", "full_mean", "load1"}]}``;
        the ``*_to_solve`` entries are None when unsolved.
    """
    out: dict[str, Any] = {"solved": False, "solved_at": None, "train_s_to_solve": None,
                           "train_eval_s_to_solve": None, "stop_reason": None, "env_steps": 0, "train_s": 0.0,
                           "eval_s": 0.0, "curve": []}
    while True:
        t = time.perf_counter()
        out["env_steps"] = int(runner.train_chunk())
        out["train_s"] += time.perf_counter() - t
        ev = evaluate(runner.act, criterion, seed)
        out["eval_s"] += ev["seconds"]
        out["curve"].append({"env_steps": out["env_steps"], "train_s": out["train_s"], "eval_s": out["eval_s"],
                             "screen_mean": ev["screen_mean"], "full_mean": ev["full_mean"],
                             "load1": os.getloadavg()[0]})
        if ev["full_mean"] is not None and ev["full_mean"] >= criterion.min_return:
            out.update(solved=True, solved_at=out["env_steps"], train_s_to_solve=out["train_s"],
                       train_eval_s_to_solve=out["train_s"] + out["eval_s"], stop_reason="solved")
            return out
        if out["env_steps"] >= budget.env_steps:
            out["stop_reason"] = "env_steps"
            return out
        if out["train_s"] + out["eval_s"] >= budget.seconds:
            out["stop_reason"] = "seconds"
            return out


def run_isolated(side: str, seed: int, criterion: Criterion, budget: Budget) -> dict[str, Any]:
    """`run_one` in a fresh subprocess with `THREAD_ENV`, killed ``budget.grace_seconds`` after its budget.

    The child gets SIGTERM first (it shuts its Ray instance down on the way out), SIGKILL 30 s later.

    Returns:
        `run_one`'s result, or ``{"side", "seed", "error": why, "log_tail"}`` when the child failed.
    """
    check_side(side)
    env = {**os.environ, **THREAD_ENV, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                                                   os.environ.get("PYTHONPATH")]))}
    with tempfile.TemporaryDirectory(prefix="learning_peers_") as tmp:
        result_path, log_path = Path(tmp) / "result.json", Path(tmp) / "log.txt"
        cmd = [sys.executable, "-m", "spacegraph.reports.learning_peers", "--one", side, "--seed", str(seed),
               "--result", str(result_path), "--budget-steps", str(budget.env_steps),
               "--budget-seconds", str(budget.seconds), "--eval-every", str(criterion.eval_every),
               "--eval-episodes", str(criterion.eval_episodes), "--screen-episodes", str(criterion.screen_episodes),
               "--min-return", str(criterion.min_return)]
        timeout = budget.seconds + budget.grace_seconds
        with open(log_path, "w") as log:
            child = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
            try:
                rc = child.wait(timeout=timeout)
                error = None if rc == 0 else f"exited with status {rc}"
            except subprocess.TimeoutExpired:
                child.send_signal(signal.SIGTERM)
                try:
                    child.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(child.pid, signal.SIGKILL)
                    child.wait()
                error = f"killed after {timeout:.0f} s (budget {budget.seconds:g} s + {budget.grace_seconds:g} s)"
        if error is None and result_path.exists():
            return json.loads(result_path.read_text())
        tail = log_path.read_text(errors="replace")[-3000:]
        return {"side": side, "seed": int(seed), "error": error or "wrote no result", "log_tail": tail}


def rllib_missing() -> str | None:
    """None when RLlib's DQN imports, else why not."""
    from spacegraph.reports.replay_peers import import_rllib_safely

    import_rllib_safely()
    try:
        import ray.rllib.algorithms.dqn  # noqa: F401
    except ImportError as exc:
        return f"ray[rllib] is not installed ({exc}); pip install -e '.[peers]'"
    return None


def measure(seeds: tuple[int, ...] = (0, 1), sides: tuple[str, ...] = SIDES, criterion: Criterion = Criterion(),
            budget: Budget = Budget(), isolated: bool = True, log: Callable[[str], Any] | None = print
            ) -> dict[str, Any]:
    """Runs every side on every seed, interleaved (seed 0 of each side, then seed 1, ...).

    Args:
        seeds: run seeds.
        sides: which of `SIDES` (``rllib`` is dropped with a note when RLlib is not installed).
        criterion: when a run is solved.
        budget: when an unsolved run stops.
        isolated: each run in its own subprocess (`run_isolated`); else in this process (`run_one`).
        log: called with a line after each run (None: quiet).

    Returns:
        ``{"config", "runs", "rllib_note", "our_config", "environment", "comparison"}`` (see `compare`).
    """
    from spacegraph.reports.act_report import environment

    for side in sides:
        check_side(side)
    if not seeds:
        raise ValueError("measure: give at least one seed")
    sides = tuple(sides)
    rllib_note = rllib_missing() if "rllib" in sides else "not requested"
    if rllib_note is not None and "rllib" in sides:
        sides = tuple(s for s in sides if s != "rllib")
    import yaml

    our_config, dirty = yaml.safe_load(AGENT_CONFIG.read_text()), uncommitted(("reference_agents", "harness"))
    load_before, start = os.getloadavg(), time.perf_counter()
    runs = []
    for seed in seeds:
        for side in sides:
            run = (run_isolated if isolated else run_one)(side, seed, criterion, budget)
            runs.append(run)
            if log is not None:
                log(run_line(run))
    result = {"config": {"env_id": ENV_ID, "seeds": list(seeds), "sides": list(sides),
                         "criterion": dataclasses.asdict(criterion), "budget": dataclasses.asdict(budget),
                         "isolated": isolated, "thread_env": THREAD_ENV, "agent_config": str(AGENT_CONFIG.relative_to(REPO)),
                         "rllib_settings": json.loads(json.dumps(RLLIB_SETTINGS))},
              "our_config": our_config, "uncommitted_at_start": dirty, "runs": runs, "rllib_note": rllib_note,
              "environment": environment(load_before, time.perf_counter() - start)}
    result["environment"]["gymnasium"] = __import__("gymnasium").__version__
    result["environment"]["ray"] = None if rllib_note else __import__("ray").__version__
    result["comparison"] = compare(result)
    return result


def uncommitted(paths: tuple[str, ...]) -> list[str] | None:
    """``git status --porcelain`` lines under ``paths`` (the code a measurement ran may differ from the
    recorded revision there); None when git is unavailable."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--", *paths], cwd=REPO, capture_output=True,
                             text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [line for line in out.splitlines() if line.strip()]


def run_line(run: dict[str, Any]) -> str:
    """One line about a run, for progress output."""
    if "error" in run:
        return f"{run['side']} seed {run['seed']}: FAILED ({run['error']})"
    what = (f"solved at {run['solved_at']} env steps, {run['train_s_to_solve']:.0f} s training"
            if run["solved"] else f"not solved ({run['stop_reason']}) after {run['env_steps']} env steps, "
                                  f"{run['train_s']:.0f} s training")
    return f"{run['side']} seed {run['seed']}: {what}; load {run['load_start'][0]:.1f}"


# ---- ratios against the targets ----------------------------------------------------------------------
def run_value(run: dict[str, Any], metric: str) -> tuple[float, bool] | None:
    """``(value, exact)``: a solved run's value at solving, or an unsolved run's value when it stopped
    (a lower bound of what solving would take); None for a failed run."""
    if "error" in run:
        return None
    if run["solved"]:
        return float({"env_steps": run["solved_at"], "train_s": run["train_s_to_solve"],
                      "train_eval_s": run["train_eval_s_to_solve"]}[metric]), True
    return float({"env_steps": run["env_steps"], "train_s": run["train_s"],
                  "train_eval_s": run["train_s"] + run["eval_s"]}[metric]), False


def ratio(ours: list[tuple[float, bool] | None], rllib: list[tuple[float, bool] | None]) -> dict[str, Any]:
    """Ours / RLlib as the ratio of the sums over runs, with what is known about it.

    An unsolved run's value is a lower bound of its true cost, so an unsolved RLlib run
    makes the ratio an upper bound (``"at_most"``), an unsolved run of ours a lower bound
    (``"at_least"``); both together (or a failed run) leave it undetermined (value None).

    Returns:
        ``{"value": float | None, "kind": "exact" | "at_most" | "at_least" | None}``.
    """
    if not ours or not rllib or any(v is None for v in ours + rllib):
        return {"value": None, "kind": None}
    ours_exact, rllib_exact = all(e for _, e in ours), all(e for _, e in rllib)
    if not ours_exact and not rllib_exact:
        return {"value": None, "kind": None}
    kind = "exact" if ours_exact and rllib_exact else ("at_most" if ours_exact else "at_least")
    return {"value": sum(v for v, _ in ours) / sum(v for v, _ in rllib), "kind": kind}


def verdict(r: dict[str, Any], metric: str) -> str:
    """``"met"``, ``"missed"`` or ``"undetermined"``: a ratio against the metric's target in `TARGETS`."""
    op, limit = TARGETS[metric]
    value, kind = r["value"], r["kind"]
    if value is None:
        return "undetermined"
    meets = value < limit if op == "<" else value <= limit
    if kind == "exact":
        return "met" if meets else "missed"
    if kind == "at_most":  # the true ratio is at most value
        return "met" if meets else "undetermined"
    return "missed" if not meets else "undetermined"  # at_least: the true ratio is at least value


def compare(result: dict[str, Any]) -> dict[str, Any]:
    """Ours / RLlib per backend and metric: per seed and over all seeds, each with its verdict.

    Returns:
        ``{side: {metric: {"per_seed": {seed: ratio}, "all": ratio}}}`` for our sides, where each
        ratio is `ratio`'s dict plus ``"verdict"``; empty without RLlib runs.
    """
    runs = [r for r in result["runs"]]
    by = {(r["side"], r["seed"]): r for r in runs}
    seeds = result["config"]["seeds"]
    if "rllib" not in result["config"]["sides"]:
        return {}
    out: dict[str, Any] = {}
    for side in (s for s in OURS if s in result["config"]["sides"]):
        out[side] = {}
        for metric in TARGETS:
            per_seed = {}
            for seed in seeds:
                r = ratio([run_value(by[(side, seed)], metric)], [run_value(by[("rllib", seed)], metric)])
                per_seed[str(seed)] = {**r, "verdict": verdict(r, metric)}
            r = ratio([run_value(by[(side, s)], metric) for s in seeds],
                      [run_value(by[("rllib", s)], metric) for s in seeds])
            out[side][metric] = {"per_seed": per_seed, "all": {**r, "verdict": verdict(r, metric)}}
    return out


# ---- the report -----------------------------------------------------------------------------------
def fmt_ratio(r: dict[str, Any]) -> str:
    """A ratio as text: ``0.42``, ``≤ 0.42``, ``≥ 1.30`` or ``n/a``."""
    if r["value"] is None:
        return "n/a"
    return {"exact": "", "at_most": "≤ ", "at_least": "≥ "}[r["kind"]] + f"{r['value']:.2f}"


def runs_table(result: dict[str, Any]) -> str:
    """Markdown: one row per run."""
    lines = ["| side | seed | solved at env steps | training s | training + eval s | set-up s | training ms per "
             "env step | eval points | load avg (1 min) start / mean / end | stop |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for run in result["runs"]:
        if "error" in run:
            lines.append(f"| {SIDE_TITLES[run['side']]} | {run['seed']} | failed: {run['error']} | | | | | | | |")
            continue
        loads = [p["load1"] for p in run["curve"]]
        load = f"{run['load_start'][0]:.1f} / {np.mean(loads) if loads else float('nan'):.1f} / {run['load_end'][0]:.1f}"
        if run["solved"]:
            steps, train, both = (f"**{run['solved_at']:,}**", f"{run['train_s_to_solve']:.1f}",
                                  f"{run['train_eval_s_to_solve']:.1f}")
        else:
            steps = f"not solved (> {run['env_steps']:,})"
            train, both = f"> {run['train_s']:.1f}", f"> {run['train_s'] + run['eval_s']:.1f}"
        per_step = f"{1e3 * run['train_s'] / run['env_steps']:.1f}" if run["env_steps"] else "n/a"
        lines.append(f"| {SIDE_TITLES[run['side']]} | {run['seed']} | {steps} | {train} | {both} | "
                     f"{run['setup_s']:.1f} | {per_step} | {len(run['curve'])} | {load} | {run['stop_reason']} |")
    return "\n".join(lines)


def ratio_table(result: dict[str, Any]) -> str:
    """Markdown: ours / RLlib per backend and metric, per seed and over all seeds, against the targets."""
    seeds = [str(s) for s in result["config"]["seeds"]]
    lines = ["| ours / RLlib | target | " + " | ".join(f"seed {s}" for s in seeds) + " | all seeds | verdict |",
             "|---|---|" + "---|" * len(seeds) + "---|---|"]
    for side, metrics in result["comparison"].items():
        for metric, r in metrics.items():
            op, limit = TARGETS[metric]
            lines.append(f"| {SIDE_TITLES[side]}, {METRIC_TITLES[metric]} | {op} {limit:g} | "
                         + " | ".join(fmt_ratio(r["per_seed"][s]) for s in seeds)
                         + f" | **{fmt_ratio(r['all'])}** | {r['all']['verdict']} |")
    return "\n".join(lines)


def reading(result: dict[str, Any]) -> list[str]:
    """The verdict in sentences, generated from the numbers."""
    if not result["comparison"]:
        return [f"- RLlib was not measured ({result['rllib_note']}): no verdict against the targets."]
    lines = []
    for side, metrics in result["comparison"].items():
        steps, wall = metrics["env_steps"]["all"], metrics["train_s"]["all"]
        per_seed = {m: [r["verdict"] for r in metrics[m]["per_seed"].values()] for m in metrics}
        lines.append(f"- **{SIDE_TITLES[side]}**: fewer env steps than RLlib: **{steps['verdict']}** "
                     f"(ratio {fmt_ratio(steps)}; per seed {', '.join(per_seed['env_steps'])}); at most half "
                     f"RLlib's training wall time: **{wall['verdict']}** (ratio {fmt_ratio(wall)}; per seed "
                     f"{', '.join(per_seed['train_s'])}); with evaluation time counted: "
                     f"{metrics['train_eval_s']['all']['verdict']} ({fmt_ratio(metrics['train_eval_s']['all'])}).")
    unsolved = [f"{SIDE_TITLES[r['side']]} seed {r['seed']}" for r in result["runs"]
                if "error" not in r and not r["solved"]]
    failed = [f"{SIDE_TITLES[r['side']]} seed {r['seed']} ({r['error']})" for r in result["runs"] if "error" in r]
    if unsolved:
        lines.append(f"- Not solved within the budget: {', '.join(unsolved)}; their values are lower bounds, "
                     "so ratios involving them are bounds (≤ / ≥).")
    if failed:
        lines.append(f"- Failed runs: {', '.join(failed)}.")
    spread = []
    for side in result["config"]["sides"]:
        solved = sorted(r["solved_at"] for r in result["runs"] if r["side"] == side and r.get("solved"))
        if len(solved) > 1:
            spread.append(f"{SIDE_TITLES[side]} {solved[0]:,}-{solved[-1]:,}")
    n = len(result["config"]["seeds"])
    lines.append(f"- {n} seed{'s' if n != 1 else ''} per side"
                 + (f"; env steps to solve ranged over seeds: {'; '.join(spread)}" if spread else "")
                 + ". Few seeds: the ratios indicate, they do not establish a statistically tested difference.")
    return lines


def settings_table(result: dict[str, Any]) -> str:
    """Markdown: our config beside the RLlib settings actually built (read from the RLlib run's config)."""
    ours = result["our_config"]
    rl = next((r["settings"] for r in result["runs"] if r.get("side") == "rllib" and "settings" in r), None)
    layers = ", ".join(f"{l['units']} {l.get('activation', 'linear')}" for l in ours["network"]["layers"])
    upd, loss, tgt, exp = ours["update"], ours["loss"], ours["target_sync"], ours["exploration"]
    our_col = {
        "network": f"4 → {layers} → dueling: linear V (1) and A (2) heads" if ours["network"].get("dueling")
        else f"4 → {layers} → linear Q (2)",
        "optimizer, lr": f"{ours['optimizer']['type']}, {ours['optimizer']['learning_rate']:g}, grad-norm clip "
                         f"{ours['optimizer'].get('clip_grad_norm')}",
        "replay": f"{ours['memory']['type']} (uniform), capacity {ours['memory']['capacity']:,}",
        "batch, updates": f"{upd['batch_size']} per update, {upd['repeats']} update every {upd['every']} env "
                          f"step(s) from {upd['start_after']:,} steps: {upd['batch_size'] * upd['repeats'] / upd['every']:g}"
                          " replayed transitions per env step",
        "n-step": str(loss["n_step"]),
        "double Q / dueling": f"{loss['double_q']} / {ours['network'].get('dueling', False)}",
        "loss": f"Huber (delta {loss['huber_delta']}), gamma {loss['gamma']}",
        "target network": f"soft update every {tgt['every']} update(s), tau {tgt['tau']}",
        "epsilon": f"{exp['type']} {exp['from']} → {exp['to']} over {exp['steps']:,} env steps",
    }
    rl_col: dict[str, str] = {}
    if rl is not None:
        nstep = rl["n_step"]
        frag = rl["rollout_fragment_length"]
        rl_col = {
            "network": f"4 → {rl['model']['fcnet_hiddens']} {rl['model']['fcnet_activation']} → dueling: V and A "
                       f"streams each with a {rl['model']['head_fcnet_hiddens']} relu hidden layer",
            "optimizer, lr": f"adam, {rl['lr']:g}, grad clip {rl['grad_clip']} ({rl['grad_clip_by']})",
            "replay": f"{rl['replay_buffer_config']['type']} (alpha {rl['replay_buffer_config'].get('alpha')}, beta "
                      f"{rl['replay_buffer_config'].get('beta')}), capacity {rl['replay_buffer_config']['capacity']:,}",
            "batch, updates": f"{rl['train_batch_size_per_learner']} per update, 1 update per {frag} sampled env "
                              f"steps from {rl['num_steps_sampled_before_learning_starts']:,} steps: "
                              f"{rl['train_batch_size_per_learner'] / frag:g} replayed transitions per env step",
            "n-step": (f"drawn per sampled transition: `rng.integers({nstep[0]}, {nstep[1]})`, i.e. "
                       f"{nstep[0]}-{nstep[1] - 1}" if isinstance(nstep, list) else str(nstep)),
            "double Q / dueling": f"{rl['double_q']} / {rl['dueling']}",
            "loss": f"{rl['td_error_loss_fn']}, gamma {rl['gamma']}",
            "target network": f"hard copy (tau {rl['tau']}) every {rl['target_network_update_freq']} sampled env "
                              "steps",
            "epsilon": "piecewise " + " → ".join(f"{e:g} at {t:,}" for t, e in rl["epsilon"]) + " env steps",
        }
    lines = ["| setting | ours (`" + result["config"]["agent_config"] + "`) | RLlib (its tuned example) |",
             "|---|---|---|"]
    for key, value in our_col.items():
        lines.append(f"| {key} | {value} | {rl_col.get(key, 'n/a')} |")
    return "\n".join(lines)


def markdown(result: dict[str, Any]) -> str:
    """The whole report: result tables, verdict, curves, method, settings, environment, how to reproduce."""
    cfg, env, crit, budget = result["config"], result["environment"], result["config"]["criterion"], \
        result["config"]["budget"]
    rl = next((r["settings"] for r in result["runs"] if r.get("side") == "rllib" and "settings" in r), None)
    seeds = ",".join(map(str, cfg["seeds"]))
    parts = [
        "# DQN on CartPole-v1: ours vs RLlib, env steps and wall time to a greedy mean return of "
        f"{crit['min_return']:g}",
        "",
        "Target of issue 6 (a report, not a test): *fewer environment steps and at most half the wall time of "
        "RLlib's DQN reaching the same return on the same machine, measured side by side.*",
        "",
        "## Result",
        "",
        runs_table(result),
        "",
        "Ratios ours / RLlib (over all seeds: sum of ours / sum of RLlib's). ≤ / ≥ mark bounds: an unsolved run "
        "counts with what it had spent when it stopped, which is less than solving would take.",
        "",
        ratio_table(result) if result["comparison"] else f"RLlib not measured: {result['rllib_note']}.",
        "",
        "## Verdict (generated from the numbers above)",
        "",
        *reading(result),
        "",
        f"![greedy evaluation mean against env steps and training wall time]({STEM}.png)",
        "",
        f"The curves show the mean of the {crit['screen_episodes']} screening episodes at every evaluation; "
        f"stars mark {crit['eval_episodes']}-episode means (played only when the screen reached "
        f"{crit['min_return']:g}).",
        "",
        "## Method",
        "",
        f"- **Criterion** (as the learning test `suites/agents/test_agent_specs.py`): every "
        f"{crit['eval_every']:,} training env steps the greedy policy plays {crit['screen_episodes']} episodes; "
        f"when their mean reaches {crit['min_return']:g} it plays {crit['eval_episodes']} (the first "
        f"{crit['screen_episodes']} reused); the run is solved at the first evaluation whose "
        f"{crit['eval_episodes']}-episode mean reaches {crit['min_return']:g}. Evaluation steps are not training "
        "steps. The evaluation is one function for every side (`greedy_returns`): episode i in its own "
        "`gymnasium.make('CartPole-v1')` reset with seed 50000 + 1000·seed + i, played once to its end, all "
        "in lockstep, so every side plays the same initial states. Ours acts with "
        "`agent.get_actions(obs, explore=False)`; RLlib with `algo.get_module().forward_inference({'obs': ...})"
        "['actions']` (the argmax of its Q-values; the env runner's module, whose weights RLlib syncs from the "
        "learner after every update).",
        "- **Env steps**: ours counts `VectorEnvWorker.total_steps`; RLlib its "
        "`env_runners/num_env_steps_sampled_lifetime`. Both train in chunks of exactly "
        f"{crit['eval_every']:,} env steps (RLlib: `min_sample_timesteps_per_iteration={crit['eval_every']}`, "
        "one `algo.train()` per chunk), so both are evaluated at the same env step counts.",
        "- **Wall time**: *training* is the time inside the training calls (`worker.run` / `algo.train()`) up "
        "to the solving evaluation; *with evaluation* adds the evaluations' time; *set-up* (building the agent, "
        "or starting Ray and building the algorithm) is listed apart and in neither.",
        f"- **Budget** per run: {budget['env_steps']:,} env steps or {budget['seconds']:g} s of training plus "
        f"evaluation, whichever first (checked after each chunk); each run is a fresh subprocess, killed "
        f"{budget['grace_seconds']:g} s after its budget.",
        f"- **Threads**: every side alike: the subprocess has {', '.join(f'{k}={v}' for k, v in cfg['thread_env'].items())}; "
        "`torch.set_num_threads(1)` and TensorFlow's intra/inter-op pools 1 (TensorFlow is imported before "
        "RLlib, which would otherwise switch TF's eager mode off). RLlib: `ray.init(address='local', "
        "num_cpus=2, include_dashboard=False)` on 127.0.0.1, `num_env_runners=0` (one local env runner, one "
        "env), `num_learners=0` (learner in the same process); started and shut down by each RLlib run.",
        f"- **Order**: seeds {seeds}; per seed the sides run one after the other "
        f"({', '.join(SIDE_TITLES[s] for s in cfg['sides'])}), so load from other processes on this shared "
        "machine falls on all sides alike; the 1-minute load average is in the table (start of the run, mean "
        "over its evaluations, end).",
        "",
        "## Settings",
        "",
        "Each side runs its own tuned CartPole configuration; RLlib's is the tuned example "
        "`rllib/tuned_examples/dqn/cartpole_dqn.py` (Ray 2.x) with RLlib's defaults for everything it does not "
        "set. The RLlib column is read off the built algorithm's config.",
        "",
        settings_table(result),
        "",
    ]
    if rl is not None:
        parts += ["RLlib's module as built:", "", "```", rl["module"], "```", ""]
    if result.get("notes"):
        parts += ["## Notes (written by hand after the run, not generated)", "",
                  *(f"- {note}" for note in result["notes"]), ""]
    parts += [
        "## Environment",
        "",
        f"- date: {env['date']}; git revision: `{env['git_revision']}`"
        + (f"; uncommitted at the start under reference_agents/ and harness/: {', '.join(f'`{d}`' for d in dirty)}"
           if (dirty := result.get("uncommitted_at_start")) else ""),
        f"- machine: {env['machine']} ({env['processor']}), no GPU; shared with other jobs",
        f"- Python {env['python']}, NumPy {env['numpy']}, TensorFlow {env['tensorflow']}, PyTorch {env['torch']}, "
        f"gymnasium {env['gymnasium']}, Ray/RLlib {env['ray']}",
        f"- load average (1, 5, 15 min) before: {env['load_average_before']}, after: {env['load_average_after']}; "
        f"the whole measurement took {env['measurement_seconds']:.0f} s",
        f"- raw numbers (every evaluation of every run): [`{STEM}.json`]({STEM}.json)",
        "",
        "## Reproduce",
        "",
        "```",
        "cd /work/main",
        ".venv/bin/pip install -e '.[tf,torch,peers]'   # both backends and RLlib",
        f"PYTHONPATH=. .venv/bin/python -m spacegraph.reports.learning_peers --seeds {seeds} "
        f"--budget-steps {budget['env_steps']} --budget-seconds {budget['seconds']:g}" + criterion_flags(crit),
        "```",
        "",
    ]
    return "\n".join(parts)


def criterion_flags(crit: dict[str, Any]) -> str:
    """The command-line flags that rebuild a non-default criterion ('' for the default)."""
    default = dataclasses.asdict(Criterion())
    flags = {"min_return": "--min-return", "eval_episodes": "--eval-episodes", "screen_episodes": "--screen-episodes",
             "eval_every": "--eval-every"}
    return "".join(f" {flag} {crit[k]:g}" for k, flag in flags.items() if crit[k] != default[k])


def plot(result: dict[str, Any], path: str | Path) -> None:
    """A PNG: greedy screening mean against env steps (left) and against training wall seconds (right).

    Raises:
        ImportError: when matplotlib is not installed.
    """
    from harness.measure.files import pyplot

    plt = pyplot("learning_peers.plot")
    colors = {"ours_tf": "tab:orange", "ours_torch": "tab:red", "rllib": "tab:blue"}
    styles = ["-", "--", ":", "-."]
    seeds = result["config"]["seeds"]
    fig, (ax_steps, ax_time) = plt.subplots(1, 2, figsize=(12, 4.5))
    for run in result["runs"]:
        if "error" in run or not run["curve"]:
            continue
        steps = [p["env_steps"] for p in run["curve"]]
        secs = [p["train_s"] for p in run["curve"]]
        means = [p["screen_mean"] for p in run["curve"]]
        style = styles[seeds.index(run["seed"]) % len(styles)] if run["seed"] in seeds else "-"
        label = f"{SIDE_TITLES[run['side']]} seed {run['seed']}"
        for ax, xs in ((ax_steps, steps), (ax_time, secs)):
            ax.plot(xs, means, style, color=colors[run["side"]], label=label, linewidth=1.3, marker=".",
                    markersize=4)
            full = [(x, p["full_mean"]) for x, p in zip(xs, run["curve"]) if p["full_mean"] is not None]
            if full:
                ax.plot(*zip(*full), "*", color=colors[run["side"]], markersize=9)
    target = result["config"]["criterion"]["min_return"]
    for ax, xlabel in ((ax_steps, "training env steps"), (ax_time, "training wall seconds (no evaluation)")):
        ax.axhline(target, color="grey", linewidth=0.8, linestyle="--")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("greedy mean return")
        ax.legend(fontsize=7)
    ax_steps.set_title("against env steps")
    ax_time.set_title("against training wall time")
    fig.suptitle(f"DQN on {result['config']['env_id']}: ours vs RLlib, {result['environment']['date']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(result: dict[str, Any], out_dir: str | Path = REPORT_DIR, stem: str = STEM) -> dict[str, Path]:
    """Writes ``<stem>.md``, ``<stem>.png`` and ``<stem>.json`` into ``out_dir``; returns their paths."""
    from harness.measure.files import write_report

    return write_report(result, out_dir, stem, markdown, plot)


def _child(args: argparse.Namespace) -> None:
    """``--one``: one run in this process, its result written to ``--result``; SIGTERM unwinds (Ray shuts down)."""
    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"learning_peers: signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    criterion = Criterion(args.min_return, args.eval_episodes, args.screen_episodes, args.eval_every)
    run = run_one(args.one, args.seed, criterion, Budget(args.budget_steps, args.budget_seconds))
    Path(args.result).write_text(json.dumps(run))


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    """Command line: measure every side on every seed and write the report (or one run with ``--one``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1", help="comma-separated run seeds")
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--budget-steps", type=int, default=Budget.env_steps)
    parser.add_argument("--budget-seconds", type=float, default=Budget.seconds)
    parser.add_argument("--eval-every", type=int, default=Criterion.eval_every)
    parser.add_argument("--eval-episodes", type=int, default=Criterion.eval_episodes)
    parser.add_argument("--screen-episodes", type=int, default=Criterion.screen_episodes)
    parser.add_argument("--min-return", type=float, default=Criterion.min_return)
    parser.add_argument("--out-dir", default=str(REPORT_DIR))
    parser.add_argument("--rewrite", metavar="JSON", help="only rewrite the .md and .png from a result JSON")
    parser.add_argument("--note", action="append", default=[],
                        help="a hand-written note for the report's Notes section (repeatable; kept in the JSON)")
    parser.add_argument("--one", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        _child(args)
        return None
    if args.rewrite:
        result = json.loads(Path(args.rewrite).read_text())
        result["comparison"] = compare(result)
    else:
        criterion = Criterion(args.min_return, args.eval_episodes, args.screen_episodes, args.eval_every)
        result = measure(tuple(int(s) for s in args.seeds.split(",")), tuple(args.sides.split(",")), criterion,
                         Budget(args.budget_steps, args.budget_seconds))
    result["notes"] = [*result.get("notes", []), *args.note]
    paths = write(result, args.out_dir)
    if result["comparison"]:
        print(ratio_table(result))
    print("\n".join(reading(result)))
    print(f"wrote {', '.join(str(p) for p in paths.values())}")
    return result


if __name__ == "__main__":
    main()
