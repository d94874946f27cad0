"""Single-worker sampling throughput (RLgraph Fig. 7a): env frames/s of our worker, raw stepping and RLlib.

For each number of environments N (1, 2, 4, 8 by default), in one run:

* ``raw_ale``: the bare ALE environment (``gymnasium.make(env id)``, RGB frames) stepped in a
  `VectorEnv` of N with uniformly random actions: the emulator's limit;
* ``raw_env``: the agent's own environment (for Pong: gray frames resized to 84x84 and
  stacked by 4 env-side, ``reference_agents.workers.make_env(..., atari=True)``) in a
  `VectorEnv` of N, random actions: the limit for anything that steps that vector;
* ``ours_<backend>``: `VectorEnvWorker` on that vector with the DQN agent of the config
  acting (``explore=True``, one batched ``get_actions`` per lockstep step) and observing
  every transition into its replay memory, never updating (Fig. 7a measures sampling);
* ``rllib``: RLlib's DQN (new API stack, PyTorch) sampling with one local
  ``SingleAgentEnvRunner`` and ``num_envs_per_env_runner=N`` on the same environment
  (observations scaled to float32 ``[0, 1]`` env-side, which RLlib's CNN needs and ours does
  in graph), a Nature CNN (``conv_filters`` 32x8/4, 64x4/2, 64x3/1, 'valid') and a dueling
  head, ``sample(num_timesteps=..., explore=True)``, no learner.

Frames count emulator frames: env steps times the environment's frame skip (4 for
``ALE/*-v5``), read from the environment (`reference_agents.workers.frames_per_step`).

Timing: per N, the contenders are timed in interleaved rounds, each round giving each
contender about ``seconds / rounds`` of whole chunks; a chunk is a number of lockstep
steps chosen after a warm-up so that it lasts about ``chunk_seconds`` (so a per-call
overhead is amortised alike for every contender). Rounds are timed on the process's CPU
time and on the wall clock; a rate is the best round's, and the ratios use CPU time
(frames per CPU-second), which other processes competing for the cores do not lower.

No Ray cluster is started: RLlib's env runner is built and called in this process.
Importing this module sets ``OPENBLAS_NUM_THREADS=1`` unless it is set (NumPy's BLAS
threads slow the env-side frame resizing down by more than 10x on a loaded 2-core machine).

Run ``python -m spacegraph.reports.sampling_throughput [--seconds S]``; it writes
``reports/sampling_throughput.md``, ``.png`` and ``.json``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

from spacegraph.reports.act_report import configure_threads, environment  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CONFIG_DIR = REPO / "reference_agents" / "configs"
PONG_CONFIG = CONFIG_DIR / "dqn_pong.yaml"
CARTPOLE_CONFIG = CONFIG_DIR / "dqn_cartpole.yaml"
REPORT_DIR = REPO / "reports"
NUM_ENVS = (1, 2, 4, 8)
BACKENDS = ("tf", "torch")
#: Replay capacity the agents are built with here: the memory is filled and wraps, and its
#: size does not change the cost of an insert, while a full-size Atari memory would take GBs.
SAMPLING_CAPACITY = 10_000
#: RLlib's Nature CNN: [filters, kernel, stride, padding].
RLLIB_CONV_FILTERS = [[32, 8, 4, "valid"], [64, 4, 2, "valid"], [64, 3, 1, "valid"]]


# ---- configs and environments -------------------------------------------------------------------
def load_config(config: str | os.PathLike | dict[str, Any], capacity: int | None = SAMPLING_CAPACITY
                ) -> dict[str, Any]:
    """The agent config as a checked dict, with the replay capacity set to ``capacity`` (None: as it is).

    Raises:
        ConfigError: (from ``reference_agents.agents``) naming the file and key path of a bad config.
    """
    from reference_agents.agents import load_agent_config

    cfg, _ = load_agent_config(config)
    data = cfg.model_dump(by_alias=True)
    if capacity is not None:
        data["memory"]["capacity"] = int(capacity)
    return data


def env_factory(config: dict[str, Any]) -> Callable[[], Any]:
    """A no-argument callable making the environment ``config["env"]`` names (Atari-wrapped when it says so)."""
    from reference_agents.workers import make_env

    env = config["env"]
    env_id, atari, kwargs = env["id"], bool(env.get("atari", False)), dict(env.get("kwargs") or {})

    def make() -> Any:
        return make_env(env_id, atari=atari, **kwargs)
    make.__name__ = f"{env_id}{' (atari)' if atari else ''}"
    return make


def bare_factory(config: dict[str, Any]) -> Callable[[], Any]:
    """A callable making the config's environment id with gymnasium's defaults (no Atari wrapping)."""
    from reference_agents.workers import make_env

    env_id = config["env"]["id"]

    def make() -> Any:
        return make_env(env_id)
    make.__name__ = env_id
    return make


# ---- contenders: each is an object with chunk(steps) -> (env steps, frames), close() -------------
class RawContender:
    """N environments of a factory stepped in lockstep with uniformly random actions."""

    def __init__(self, factory: Callable[[], Any], num_envs: int, seed: int = 0) -> None:
        from reference_agents.workers import VectorEnv

        self.envs = VectorEnv(factory, num_envs)
        self.num_envs = num_envs
        self.frames_per_step = self.envs.frames_per_step
        self.rng = np.random.default_rng(seed)
        self.num_actions = int(self.envs.action_space.n)
        self.envs.reset(seed=seed)

    def chunk(self, steps: int) -> tuple[int, int]:
        """Steps until at least ``steps`` env steps (summed over environments) are done."""
        done = 0
        while done < steps:
            self.envs.step(self.rng.integers(0, self.num_actions, self.num_envs))
            done += self.num_envs
        return done, int(round(done * self.frames_per_step))

    def close(self) -> None:
        self.envs.close()


class TimedAgent:
    """Delegates to an agent, adding up the CPU seconds spent in its acting and observing calls.

    Attributes:
        seconds: ``{"get_actions": s, "observe": s, "flush": s}`` (process CPU time) since the last `reset`.
    """

    TIMED = ("get_actions", "observe", "flush")

    def __init__(self, agent: Any) -> None:
        self._agent = agent
        self.seconds = dict.fromkeys(self.TIMED, 0.0)

    def reset(self) -> None:
        """Sets the accumulated seconds back to zero."""
        self.seconds = dict.fromkeys(self.TIMED, 0.0)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._agent, name)
        if name not in self.TIMED:
            return value

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return value(*args, **kwargs)
            finally:
                self.seconds[name] += time.process_time() - start
        return timed


class WorkerContender:
    """`VectorEnvWorker` with an agent acting (explore) and observing, never updating.

    `DQNAgent.observe` stages transitions (n-step folding); they reach the replay memory
    when the agent flushes them, which its update schedule does before updating. With no
    updates, each chunk ends with ``agent.flush()`` (one batched insert), so the replay
    insert is part of the measured work.

    The agent is wrapped in a `TimedAgent`, so `breakdown` can say which share of the
    time went to ``get_actions``, to ``observe`` plus ``flush`` and to the rest (stepping
    the environments, the worker's own bookkeeping).
    """

    def __init__(self, agent: Any, factory: Callable[[], Any], num_envs: int, seed: int = 0) -> None:
        from reference_agents.workers import VectorEnvWorker

        self.timed = TimedAgent(agent)
        self.worker = VectorEnvWorker(self.timed, factory, num_envs=num_envs, seed=seed, observe=True, update=False,
                                      explore=True)
        self.num_envs = num_envs
        self.frames_per_step = self.worker.frames_per_step

    def chunk(self, steps: int) -> tuple[int, int]:
        """``worker.run(num_steps=steps)`` then ``agent.flush()``; the worker's own step and frame counts."""
        stats = self.worker.run(num_steps=steps)
        if hasattr(self.timed, "flush"):
            self.timed.flush()
        return stats.steps, stats.frames

    def reset_breakdown(self) -> None:
        """Starts the act/observe time accounting over."""
        self.timed.reset()

    def breakdown(self, seconds: float) -> dict[str, float]:
        """Shares of ``seconds`` (the CPU time of the timed rounds since `reset_breakdown`) spent acting, observing
        (staging and inserting into replay) and elsewhere."""
        act = self.timed.seconds["get_actions"]
        observe = self.timed.seconds["observe"] + self.timed.seconds["flush"]
        return {"act_share": act / seconds, "observe_share": observe / seconds,
                "other_share": max(0.0, 1.0 - (act + observe) / seconds)}

    def close(self) -> None:
        self.worker.close()


class RLlibContender:
    """RLlib's DQN env runner (new API stack) sampling on N copies of the environment; no learner.

    Args:
        factory: makes one environment (observations uint8 images ``[H,W,C]``; scaled env-side
            to float32 ``[0, 1]`` for RLlib's CNN).
        num_envs: ``num_envs_per_env_runner``.
        seed: the env runner's seed.
        dueling: RLlib's ``dueling`` (a value and an advantage head, each with a 512 hidden layer).
    """

    _registered: set[str] = set()

    def __init__(self, factory: Callable[[], Any], num_envs: int, seed: int = 0, dueling: bool = True) -> None:
        from spacegraph.reports.replay_peers import import_rllib_safely

        import_rllib_safely()
        from ray.rllib.algorithms.dqn import DQNConfig
        from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
        from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
        from ray.tune.registry import register_env

        from reference_agents.workers import frames_per_step

        name = f"spacegraph-sampling-{factory.__name__}"
        register_env(name, lambda _cfg: ScaledImageEnv(factory()))
        config = (DQNConfig()
                  .environment(name)
                  .framework("torch")
                  .env_runners(num_env_runners=0, num_envs_per_env_runner=num_envs, explore=True)
                  .debugging(seed=seed)
                  .training(dueling=dueling, double_q=True)
                  .rl_module(model_config=DefaultModelConfig(conv_filters=RLLIB_CONV_FILTERS, conv_activation="relu",
                                                             head_fcnet_hiddens=[512])))
        self.runner = SingleAgentEnvRunner(config=config)
        self.num_envs = num_envs
        self.frames_per_step = frames_per_step(self.runner.env.unwrapped.envs[0])
        self.module_text = str(self.runner.module)

    def chunk(self, steps: int) -> tuple[int, int]:
        """``runner.sample(num_timesteps=steps, explore=True)``; env steps counted from the episodes returned."""
        episodes = self.runner.sample(num_timesteps=steps, explore=True)
        done = sum(len(e) for e in episodes)
        return done, int(round(done * self.frames_per_step))

    def close(self) -> None:
        self.runner.stop()


class ScaledImageEnv(gym.Env):
    """A gymnasium ``Env`` around an environment with uint8 image observations, scaling them to float32 ``[0, 1]``.

    RLlib's torch CNN takes float images, and gymnasium's vector envs take only
    ``gymnasium.Env`` subclasses; the wrapped environment stays reachable as ``.env``
    (so `frames_per_step` finds its frame skip).

    Raises:
        ValueError: when the wrapped environment's observations are not a uint8 ``Box``.
    """

    metadata: dict[str, Any] = {}

    def __init__(self, env: Any) -> None:
        space = env.observation_space
        if not (isinstance(space, gym.spaces.Box) and space.dtype == np.uint8):
            raise ValueError(f"ScaledImageEnv: expected uint8 image observations (a Box); got {space}")
        self.env = env
        self.observation_space = gym.spaces.Box(0.0, 1.0, space.shape, np.float32)
        self.action_space = env.action_space

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        return np.asarray(obs, np.float32) / np.float32(255.0), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return np.asarray(obs, np.float32) / np.float32(255.0), reward, terminated, truncated, info

    def close(self) -> None:
        self.env.close()


def rllib_available() -> str | None:
    """None when RLlib's DQN and env runner import, else why not (for skipping)."""
    from spacegraph.reports.replay_peers import import_rllib_safely

    import_rllib_safely()
    try:
        importlib.import_module("ray.rllib.algorithms.dqn")
        importlib.import_module("ray.rllib.env.single_agent_env_runner")
    except ImportError as exc:
        return f"ray[rllib] is not installed ({exc}); pip install -e '.[peers]'"
    return None


# ---- timing ---------------------------------------------------------------------------------------
def _run_for(contender: Any, chunk_steps: int, seconds: float) -> tuple[int, int, float, float]:
    """Whole chunks until ``seconds`` (wall clock) have passed: (env steps, frames, wall seconds, CPU seconds)."""
    steps = frames = 0
    wall0, cpu0 = time.perf_counter(), time.process_time()
    while True:
        s, f = contender.chunk(chunk_steps)
        steps, frames = steps + s, frames + f
        wall = time.perf_counter() - wall0
        if wall >= seconds:
            return steps, frames, wall, max(time.process_time() - cpu0, 1e-9)


def calibrate_chunk(contender: Any, chunk_seconds: float, warmup_seconds: float) -> int:
    """Env steps per chunk (a multiple of N) lasting about ``chunk_seconds``, after a warm-up of ``warmup_seconds``."""
    n = contender.num_envs
    steps, _, wall, _ = _run_for(contender, n, warmup_seconds)
    per_step = wall / max(steps, 1)
    lockstep = max(1, int(chunk_seconds / (per_step * n)))
    return lockstep * n


def time_contenders(contenders: dict[str, Any], seconds: float, rounds: int, chunk_seconds: float,
                    warmup_seconds: float) -> dict[str, dict[str, Any]]:
    """Interleaved rounds over ``contenders``: per contender its frames per CPU-second and per second, and totals.

    Each round is timed on the process's CPU time (``time.process_time``: the work done,
    insensitive to other processes competing for the cores) and on the wall clock.

    Returns:
        ``{name: {"frames_per_cpu_s" (best round), "frames_per_cpu_s_median", "frames_per_s" (wall clock,
        best round), "frames_per_s_median", "steps", "frames", "seconds", "cpu_seconds", "chunk_steps",
        "frames_per_step"}}``, plus ``"breakdown"`` (CPU-time shares) for contenders that account for
        their time (`WorkerContender`).
    """
    chunks = {name: calibrate_chunk(c, chunk_seconds, warmup_seconds) for name, c in contenders.items()}
    for contender in contenders.values():
        if hasattr(contender, "reset_breakdown"):
            contender.reset_breakdown()
    per_round: dict[str, dict[str, list[float]]] = {name: {"cpu": [], "wall": []} for name in contenders}
    totals = {name: [0, 0, 0.0, 0.0] for name in contenders}
    names = list(contenders)
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            steps, frames, wall, cpu = _run_for(contenders[name], chunks[name], seconds / rounds)
            per_round[name]["cpu"].append(frames / cpu)
            per_round[name]["wall"].append(frames / wall)
            for i, value in enumerate((steps, frames, wall, cpu)):
                totals[name][i] += value
    out = {name: {"frames_per_cpu_s": max(per_round[name]["cpu"]),
                  "frames_per_cpu_s_median": statistics.median(per_round[name]["cpu"]),
                  "frames_per_s": max(per_round[name]["wall"]),
                  "frames_per_s_median": statistics.median(per_round[name]["wall"]),
                  "steps": totals[name][0], "frames": totals[name][1], "seconds": totals[name][2],
                  "cpu_seconds": totals[name][3], "chunk_steps": chunks[name],
                  "frames_per_step": contenders[name].frames_per_step}
           for name in names}
    for name in names:
        if hasattr(contenders[name], "breakdown"):
            out[name]["breakdown"] = contenders[name].breakdown(totals[name][3])
    return out


# ---- the measurement --------------------------------------------------------------------------------
def measure(config: str | os.PathLike | dict[str, Any] = PONG_CONFIG, backends: tuple[str, ...] = BACKENDS,
            num_envs: tuple[int, ...] = NUM_ENVS, seconds: float = 8.0, rounds: int = 4,
            chunk_seconds: float = 0.25, warmup_seconds: float = 1.0, rllib: bool = True, raw_ale: bool = True,
            capacity: int | None = SAMPLING_CAPACITY, threads: int = 1, seed: int = 0) -> dict[str, Any]:
    """Frames/s of every contender for every N in one run (see the module docstring).

    Args:
        config: the agent config (file or dict); its ``env`` is the environment measured.
        backends: our backends ("tf", "torch").
        num_envs: the vector sizes N.
        seconds: time per contender per N, split into ``rounds`` interleaved rounds.
        rounds: interleaved rounds per N.
        chunk_seconds: about how long one timed chunk of steps lasts.
        warmup_seconds: untimed stepping per contender per N before timing (also calibrates the chunk).
        rllib: include RLlib (Atari configs only; skipped with a note when ``ray[rllib]`` is not installed).
        raw_ale: include the bare environment (``raw_ale``) besides the agent's (``raw_env``); only
            meaningful where the config wraps its environment (``atari: true``).
        capacity: replay capacity of our agents (None: the config's).
        threads: CPU threads per framework.
        seed: agents' and environments' seed.

    Returns:
        ``{"config", "environment", "versions", "rows": [{"num_envs", <contender>: {...}, "ratios": {...},
        "wall_ratios": {...}}], "rllib_note", "rllib_model"}``; ratios are ``ours_<backend>/raw_env`` and
        ``ours_<backend>/rllib`` (None without RLlib) of the best rounds' frames per CPU-second
        (``wall_ratios``: per wall-clock second); a contender's entry is `time_contenders`'.

    Raises:
        ValueError: for an unknown backend or a non-positive N.
    """
    from reference_agents.agents import DQNAgent

    for backend in backends:
        if backend not in BACKENDS:
            raise ValueError(f"sampling_throughput.measure: backends must be among {BACKENDS}; got {backend!r}")
    for n in num_envs:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"sampling_throughput.measure: num_envs must be positive ints; got {n!r}")
    cfg = load_config(config, capacity)
    threads_used = configure_threads(threads)
    load_before = os.getloadavg()
    started = time.perf_counter()
    make_agent_env = env_factory(cfg)
    atari = bool(cfg["env"].get("atari", False))
    if not rllib:
        rllib_note = "not requested"
    elif not atari:
        rllib_note = "RLlib is compared on Atari configs only (its Nature-CNN setup)"
    else:
        rllib_note = rllib_available()
    with_ale = raw_ale and atari
    agents = {b: DQNAgent(cfg, backend=b, seed=seed) for b in backends}
    rows, rllib_model = [], None
    for n in num_envs:
        contenders: dict[str, Any] = {}
        try:
            if with_ale:
                contenders["raw_ale"] = RawContender(bare_factory(cfg), n, seed)
            contenders["raw_env"] = RawContender(make_agent_env, n, seed)
            for backend, agent in agents.items():
                contenders[f"ours_{backend}"] = WorkerContender(agent, make_agent_env, n, seed)
            if rllib_note is None:
                contenders["rllib"] = RLlibContender(make_agent_env, n, seed, dueling=cfg["network"]["dueling"])
                rllib_model = contenders["rllib"].module_text
            row: dict[str, Any] = {"num_envs": n, **time_contenders(contenders, seconds, rounds, chunk_seconds,
                                                                     warmup_seconds)}
        finally:
            for c in contenders.values():
                c.close()
        for key, rate in (("ratios", "frames_per_cpu_s"), ("wall_ratios", "frames_per_s")):
            row[key] = {}
            for backend in backends:
                ours = row[f"ours_{backend}"][rate]
                row[key][f"ours_{backend}/raw_env"] = ours / row["raw_env"][rate]
                row[key][f"ours_{backend}/rllib"] = ours / row["rllib"][rate] if "rllib" in row else None
        rows.append(row)
    return {
        "config": {"agent_config": str(config) if not isinstance(config, dict) else "<dict>",
                   "env": cfg["env"], "network": cfg["network"], "preprocessing": cfg.get("preprocessing"),
                   "memory": cfg["memory"], "backends": list(backends), "num_envs": list(num_envs),
                   "seconds": seconds, "rounds": rounds, "chunk_seconds": chunk_seconds,
                   "warmup_seconds": warmup_seconds, "threads": threads_used, "seed": seed,
                   "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS")},
        "environment": environment(load_before, time.perf_counter() - started),
        "versions": versions(),
        "rows": rows, "rllib_note": rllib_note, "rllib_model": rllib_model,
    }


def versions() -> dict[str, str | None]:
    """gymnasium's, ale-py's and Ray's versions (None where not installed)."""
    out: dict[str, str | None] = {}
    for module in ("gymnasium", "ale_py", "ray"):
        try:
            out[module] = __import__(module).__version__
        except ImportError:
            out[module] = None
    return out


# ---- the report -------------------------------------------------------------------------------------
CONTENDER_TITLES = {"raw_ale": "raw ALE", "raw_env": "raw env", "ours_tf": "ours (TF)", "ours_torch": "ours (PyTorch)",
                    "rllib": "RLlib DQN (PyTorch)"}


def _contenders(result: dict[str, Any]) -> list[str]:
    return [k for k in CONTENDER_TITLES if k in result["rows"][0]]


def table(result: dict[str, Any]) -> str:
    """Markdown: frames per CPU-second (best round; wall-clock best round in brackets) per contender and N,
    then the CPU-time ratios."""
    names = _contenders(result)
    ratio_keys = list(result["rows"][0]["ratios"])
    lines = ["| N envs | " + " | ".join(f"{CONTENDER_TITLES[n]} frames/CPU-s (frames/s)" for n in names) + " | "
             + " | ".join(ratio_keys) + " |",
             "|---|" + "---|" * (len(names) + len(ratio_keys))]
    for row in result["rows"]:
        cells = [f"{row[n]['frames_per_cpu_s']:.0f} ({row[n]['frames_per_s']:.0f})" for n in names]
        ratios = ["n/a" if row["ratios"][k] is None else f"**{row['ratios'][k]:.2f}**" for k in ratio_keys]
        lines.append(f"| {row['num_envs']} | " + " | ".join(cells + ratios) + " |")
    return "\n".join(lines)


def frames_table(result: dict[str, Any]) -> str:
    """Markdown: env steps and frames each contender took in all (frames = steps x frames per step)."""
    names = _contenders(result)
    lines = ["| N envs | " + " | ".join(f"{CONTENDER_TITLES[n]} steps / frames (chunk)" for n in names) + " |",
             "|---|" + "---|" * len(names)]
    for row in result["rows"]:
        lines.append(f"| {row['num_envs']} | " + " | ".join(
            f"{row[n]['steps']} / {row[n]['frames']} ({row[n]['chunk_steps']})" for n in names) + " |")
    return "\n".join(lines)


def breakdown_table(result: dict[str, Any]) -> str:
    """Markdown: where our worker's time went per backend and N (acting, observing, the rest)."""
    ours = [n for n in _contenders(result) if n.startswith("ours_")]
    lines = ["| N envs | " + " | ".join(f"{CONTENDER_TITLES[n]} act / observe+insert / env+worker" for n in ours)
             + " |",
             "|---|" + "---|" * len(ours)]
    for row in result["rows"]:
        cells = []
        for n in ours:
            b = row[n]["breakdown"]
            cells.append(f"{b['act_share']:.0%} / {b['observe_share']:.0%} / {b['other_share']:.0%}")
        lines.append(f"| {row['num_envs']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(result: dict[str, Any]) -> list[str]:
    """Sentences read off the numbers (CPU-time ratios; wall-clock ones in brackets)."""
    lines = []
    for key in result["rows"][0]["ratios"]:
        values = [(r["num_envs"], r["ratios"][key], r["wall_ratios"][key]) for r in result["rows"]
                  if r["ratios"][key] is not None]
        if values:
            lines.append(f"- {key}: " + ", ".join(f"N={n} {v:.2f} ({w:.2f})" for n, v, w in values) + ".")
    if result["rllib_note"]:
        lines.append(f"- RLlib not measured: {result['rllib_note']}.")
    return lines


def _repo_relative(path: str) -> str:
    """``path`` relative to the repository when it lies inside it (reports name files portably)."""
    try:
        return str(Path(path).resolve().relative_to(REPO))
    except (ValueError, OSError):
        return path


def markdown(result: dict[str, Any]) -> str:
    """The whole report: result tables, reading, method, environment, how to reproduce."""
    cfg, env, ver = result["config"], result["environment"], result["versions"]
    frames_per_step = result["rows"][0]["raw_env"]["frames_per_step"]
    parts = [
        "# Single-worker sampling throughput (RLgraph Fig. 7a)",
        "",
        f"Environment `{cfg['env']['id']}` ({frames_per_step:g} emulator frames per env step; frames/s count "
        f"emulator frames = env steps x {frames_per_step:g}), one worker in one process, N environments stepped "
        f"in lockstep, N = {', '.join(map(str, cfg['num_envs']))}. "
        f"Agent config `{_repo_relative(cfg['agent_config'])}` "
        f"(network {cfg['network']}, in-graph preprocessing {cfg['preprocessing']}).",
        "",
        "## Result",
        "",
        "Emulator frames per CPU-second of the measuring process (best round; the wall-clock frames/s of the "
        "best round in brackets), and the ratios of the CPU-time rates:",
        "",
        table(result),
        "",
        "![frames/s per number of environments](sampling_throughput.png)",
        "",
        "## Reading (generated from the numbers above)",
        "",
        "Ratios per N on CPU time (wall clock in brackets):",
        "",
        *summary(result),
        "",
        "## What each column runs",
        "",
        *(["- **raw ALE**: `gymnasium.make(id)` with its defaults (RGB frames), N in a "
           "`reference_agents.workers.VectorEnv`, uniformly random actions: the emulator's limit."]
          if "raw_ale" in result["rows"][0] else []),
        "- **raw env**: the agent's environment (`reference_agents.workers.make_env(id, atari=...)`: "
        "for Atari gray 84x84 frames stacked by 4 env-side) in the same `VectorEnv`, random actions: the "
        "limit for anything stepping this vector.",
        "- **ours**: `VectorEnvWorker(agent, env, num_envs=N, observe=True, update=False, explore=True)`: one "
        "batched `agent.get_actions(obs, explore=True)` per lockstep step (network, epsilon-greedy and "
        "in-graph preprocessing), every transition passed to `agent.observe` (n-step folding and "
        "staging), episode accounting; no updates. `DQNAgent.observe` stages transitions and the agent "
        "inserts them into replay when it flushes (its update schedule does this before updating); here "
        "each timed chunk ends with `agent.flush()`, one batched insert. The agent is the config's, with "
        f"the replay capacity set to {cfg['memory'].get('capacity')} (it wraps; an insert costs the same).",
        "- **RLlib**: Ray RLlib's `DQNConfig` (new API stack, PyTorch), `env_runners(num_env_runners=0, "
        "num_envs_per_env_runner=N)`, the same environment factory with observations scaled to float32 "
        "[0, 1] env-side (RLlib's CNN takes floats; ours divides in graph), "
        f"`conv_filters={RLLIB_CONV_FILTERS}`, `head_fcnet_hiddens=[512]`, dueling and double Q; a local "
        "`SingleAgentEnvRunner` timed through `sample(num_timesteps=chunk, explore=True)` (its default "
        "epsilon-greedy; episodes returned as NumPy), no learner and no Ray cluster. RLlib's dueling head "
        "has a 512-unit hidden layer in each of the value and advantage streams (ours shares one), "
        "about 17 % more multiply-adds per state. RLlib's `sample` returns the episodes; adding them to a "
        "replay buffer is the algorithm's next step and is not timed here, while ours includes the insert.",
        "",
        "Frames counted (env steps / frames in all, and the chunk in env steps):",
        "",
        frames_table(result),
        "",
        "Where our worker's time went (shares of the CPU time of the timed rounds: `agent.get_actions`, "
        "`agent.observe` with `agent.flush` (the replay insert), and the rest, which is stepping the "
        "environments and the worker's bookkeeping):",
        "",
        breakdown_table(result),
        "",
        f"Timing: per N, {cfg['rounds']} interleaved rounds of about {cfg['seconds'] / cfg['rounds']:.1f} s "
        f"per contender ({cfg['seconds']:g} s each in all) after {cfg['warmup_seconds']:g} s of untimed "
        f"warm-up, in whole chunks lasting about {cfg['chunk_seconds']:g} s; the order of the contenders "
        "alternates between rounds. Each round is timed on the process's CPU time (`time.process_time`) "
        "and on the wall clock; **the ratios use CPU time**, because this machine is shared and CPU time "
        "counts only the work this process did (everything runs in this one process; with one thread per "
        "framework, frames per CPU-second is what one dedicated core would sample). Threads: "
        + str(cfg["threads"]) + f"; OPENBLAS_NUM_THREADS={cfg['openblas_num_threads']}.",
        "",
    ]
    if result.get("rllib_model"):
        parts += ["RLlib's module as built:", "", "```", result["rllib_model"], "```", ""]
    parts += [
        "## Environment",
        "",
        f"- date: {env['date']}; git revision: `{env['git_revision']}`",
        f"- machine: {env['machine']} ({env['processor']}), no GPU",
        f"- Python {env['python']}, NumPy {env['numpy']}, TensorFlow {env['tensorflow']}, PyTorch {env['torch']}, "
        f"gymnasium {ver['gymnasium']}, ale-py {ver['ale_py']}, Ray/RLlib {ver['ray']}",
        f"- load average (1, 5, 15 min) before: {env['load_average_before']}, after: {env['load_average_after']} "
        f"(the machine is shared; a load above the core count means other processes competed); "
        f"the run took {env['measurement_seconds']} s",
        "- raw numbers: `reports/sampling_throughput.json`",
        "",
        "## Reproduce",
        "",
        "```",
        "cd /work/main",
        ".venv/bin/pip install -e '.[peers]'   # RLlib",
        f"PYTHONPATH=. .venv/bin/python -m spacegraph.reports.sampling_throughput --seconds {cfg['seconds']:g} "
        f"--rounds {cfg['rounds']}",
        "```",
        "",
        "The asv benchmarks: `asv_bench/benchmarks/sampling.py` (Pong and CartPole worker frames/s and "
        "ratios; the RLlib comparison is skipped where RLlib is not installed).",
        "",
    ]
    return "\n".join(parts)


def plot(result: dict[str, Any], path: str | Path) -> None:
    """A PNG: frames per CPU-second against N per contender (left) and ours / raw env, ours / RLlib (right).

    Raises:
        ImportError: when matplotlib is not installed.
    """
    from harness.measure.files import pyplot

    plt = pyplot("sampling_throughput.plot")
    ns = [r["num_envs"] for r in result["rows"]]
    fig, (ax_rate, ax_ratio) = plt.subplots(1, 2, figsize=(11, 4))
    for name in _contenders(result):
        ax_rate.plot(ns, [r[name]["frames_per_cpu_s"] for r in result["rows"]], "o-" if "ours" in name else "s--",
                     label=CONTENDER_TITLES[name])
    for key in result["rows"][0]["ratios"]:
        values = [r["ratios"][key] for r in result["rows"]]
        if all(v is not None for v in values):
            ax_ratio.plot(ns, values, "o-", label=key)
    for ax in (ax_rate, ax_ratio):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.set_xlabel("environments per worker (N)")
        ax.legend(fontsize=8)
    ax_rate.set_yscale("log")
    ax_rate.set_ylabel("emulator frames per CPU-second")
    ax_rate.set_title(f"{result['config']['env']['id']}: single-worker sampling")
    ax_ratio.axhline(1.0, color="grey", linewidth=0.8)
    ax_ratio.set_ylabel("ratio of frames per CPU-second")
    ax_ratio.set_title("ours / raw env and ours / RLlib")
    fig.suptitle(f"Sampling throughput, {result['environment']['date']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(result: dict[str, Any], out_dir: str | Path = REPORT_DIR, stem: str = "sampling_throughput"
          ) -> dict[str, Path]:
    """Writes ``<stem>.md``, ``<stem>.png`` and ``<stem>.json`` into ``out_dir``; returns their paths."""
    from harness.measure.files import write_report

    return write_report(result, out_dir, stem, markdown, plot)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line: measure, write the report files, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(PONG_CONFIG))
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--num-envs", default=",".join(map(str, NUM_ENVS)))
    parser.add_argument("--seconds", type=float, default=8.0, help="time per contender per N")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--no-rllib", action="store_true")
    parser.add_argument("--out-dir", default=str(REPORT_DIR))
    parser.add_argument("--from-json", help="rewrite the report from a result JSON instead of measuring")
    args = parser.parse_args(argv)
    if args.from_json:
        result = json.loads(Path(args.from_json).read_text())
    else:
        result = measure(args.config, tuple(args.backends.split(",")),
                         tuple(int(n) for n in args.num_envs.split(",")), seconds=args.seconds, rounds=args.rounds,
                         rllib=not args.no_rllib)
    paths = write(result, args.out_dir)
    print(table(result))
    print("\n".join(summary(result)))
    print(f"wrote {', '.join(str(p) for p in paths.values())}")
    return result


if __name__ == "__main__":
    main()
