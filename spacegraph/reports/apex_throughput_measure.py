"""Measuring distributed DQN throughput: Ape-X on Ray (ours), RLlib's DQN at the same number of env runners,
and raw stepping of the same environment vectors; one point per run, each run in a fresh subprocess.

A point is ``(side, env, workers, learning)``; `measure_point` starts what the side needs, warms up (past
the start of learning when it is on), then counts env frames for ``seconds`` of wall time and the CPU
time every process of the run took meanwhile (this process, the Ray session's processes and their
children), so CPU utilisation is ``cpu_seconds / (seconds * cores)``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

from spacegraph.reports.rllib import import_rllib_safely, rllib_missing

REPO = Path(__file__).resolve().parents[2]
CONFIGS = {"cartpole": REPO / "reference_agents" / "configs" / "apex_cartpole.yaml",
           "pong": REPO / "reference_agents" / "configs" / "apex_pong.yaml"}
SIDES = ("raw", "apex", "apex_rr", "rllib")
#: ``apex_rr``: ours with the learner throttled to RLlib's DQN replay ratio (learning on only; see `apex_config`).
MATCHED_SIDE = "apex_rr"
#: When learning is on, updates start after this many env steps (both sides), and the measurement starts after.
LEARNING_STARTS = {"cartpole": 1000, "pong": 2000}
#: Replay capacity in all (both sides): the memories are filled and wrap at the measured rates anyway.
CAPACITY = {"cartpole": 50_000, "pong": 100_000}
_CLK = os.sysconf("SC_CLK_TCK")


# ---- CPU accounting -------------------------------------------------------------------------------------
def _stat(pid: int) -> tuple[int, float] | None:
    """``(parent pid, CPU seconds)`` of a process from ``/proc/PID/stat``, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _CLK


def process_tree_cpu(roots: list[int], tree: bool = True) -> dict[int, float]:
    """CPU seconds of ``roots`` and (with ``tree``) all their descendants (``/proc``; Linux)."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None:
                parents[int(entry)], cpu[int(entry)] = st
    keep = set(r for r in roots if r in cpu)
    grew = tree
    while grew:
        new = {p for p, parent in parents.items() if parent in keep and p not in keep}
        keep |= new
        grew = bool(new)
    return {p: cpu[p] for p in keep}


class CpuMeter:
    """CPU seconds of a set of process trees between `start` and `stop` (processes that end in between keep
    what they had at `start`'s reading, a small undercount)."""

    def __init__(self, roots: Callable[[], list[int]], tree: bool = True) -> None:
        self.roots, self.tree = roots, tree
        self.before: dict[int, float] = {}

    def start(self) -> None:
        self.before = process_tree_cpu(self.roots(), self.tree)

    def stop(self) -> float:
        after = process_tree_cpu(self.roots(), self.tree)
        return sum(max(0.0, after[p] - self.before.get(p, 0.0)) for p in after)


def _ray_roots(session_dir: str) -> list[int]:
    from harness.execution.ray import ray_session_processes

    return [os.getpid()] + ray_session_processes(session_dir)


# ---- the sides ------------------------------------------------------------------------------------------
def rllib_steps_per_update(cfg: dict[str, Any], workers: int) -> int:
    """Env steps RLlib's DQN samples per learner update with its default ``training_intensity`` (None): each
    ``training_step`` samples one rollout fragment (``n_step`` steps when ``rollout_fragment_length`` is
    "auto") on every env of every runner, then makes one update of ``train_batch_size`` records."""
    return int(cfg["loss"]["n_step"]) * int(cfg["env"]["num_envs"]) * int(workers)


def apex_config(env: str, workers: int, learning: bool, matched: bool = False) -> dict[str, Any]:
    """The Ape-X config of a point: the ready config with ``workers``, up to 2 shards, the capacity and, with
    learning off, no update ever (workers still compute priorities; shards still insert).

    ``matched``: the learner throttled (``apex.throttle``) to one update per `rllib_steps_per_update` env
    steps, the replay ratio (records learned from per env step) of RLlib's DQN at these workers; otherwise
    free-running, as in the paper."""
    from reference_agents.agents.apex import load_apex_config

    cfg, _ = load_apex_config(CONFIGS[env], apex={"workers": workers, "shards": min(2, workers),
                                                  "throttle": bool(matched)})
    data = cfg.model_dump(by_alias=True)
    data["memory"]["capacity"] = CAPACITY[env]
    # The raw and RLlib sides step the env through gymnasium's Python wrappers (`env_factory`): ours too, so the
    # ratios compare the frameworks, not ale-py's native vector env (apex_pong.yaml's env.vectorizer) with them.
    data["env"]["vectorizer"] = "python"
    data["update"]["start_after"] = LEARNING_STARTS[env] if learning else 10 ** 12
    if matched:
        data["update"].update(every=rllib_steps_per_update(data, workers), repeats=1)
    return data


def measure_apex(env: str, workers: int, learning: bool, seconds: float, matched: bool = False) -> dict[str, Any]:
    """Ape-X on a local Ray instance: frames/s, updates/s and CPU over ``seconds`` after warming up
    (``matched``: the learner at RLlib's replay ratio, `apex_config`)."""
    from harness.execution.ray import RayActorExecutor
    from reference_agents.agents.apex import ApexDriver

    executor = RayActorExecutor(num_cpus=max(2, workers + 2), object_store_memory=400 * 1024 * 1024)
    driver = ApexDriver(apex_config(env, workers, learning, matched), executor)
    try:
        driver.start()
        warm = LEARNING_STARTS[env] + 20 * driver.config.apex.sample_steps * workers
        driver.run(num_steps=warm)
        if learning:   # learning has started: wait for the first updates
            while driver.total_updates < 10:
                driver.run(num_steps=driver.config.apex.sample_steps * workers)
        roles = {"workers": [executor.pid(w) for w in driver.workers],
                 "shards": [executor.pid(s) for s in driver.shards], "driver": [os.getpid()]}
        meter = CpuMeter(lambda: _ray_roots(executor.session_dir))
        role_meters = {role: CpuMeter(lambda pids=pids: pids, tree=False) for role, pids in roles.items()}
        sampled0 = driver.ledger()["sampled"]
        meter.start()
        for m in role_meters.values():
            m.start()
        steps0, updates0, start = driver.total_steps, driver.total_updates, time.perf_counter()
        driver.run(num_steps=10 ** 12, callback=lambda s: time.perf_counter() - start < seconds, callback_every=1)
        elapsed = time.perf_counter() - start
        cpu = meter.stop()
        role_cpu = {role: m.stop() for role, m in role_meters.items()}
        steps, updates = driver.total_steps - steps0, driver.total_updates - updates0
        ledger = driver.ledger()
        return {"steps": steps, "frames": steps * driver.frames_per_step, "seconds": elapsed,
                "updates": updates, "cpu_seconds": cpu, "frames_per_step": driver.frames_per_step,
                "replay_ratio": updates * driver.config.update.batch_size / steps if steps else None,
                "update_every": driver.config.update.every if matched else None,
                "envs_per_worker": driver.config.env.num_envs, "shards": driver.num_shards,
                "batch_size": driver.config.update.batch_size, "role_cpu_seconds": role_cpu,
                "sampled": ledger["sampled"] - sampled0, "ledger": {k: v for k, v in ledger.items() if k != "shards"}}
    finally:
        driver.close()
        executor.shutdown()


def measure_rllib(env: str, workers: int, learning: bool, seconds: float) -> dict[str, Any]:
    """RLlib's DQN (new API stack, PyTorch) with ``workers`` env runners of the same environments."""
    import_rllib_safely()
    from ray.rllib.algorithms.dqn import DQNConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.rllib.utils.metrics import (ALL_MODULES, ENV_RUNNER_RESULTS, LEARNER_RESULTS,
                                         NUM_ENV_STEPS_SAMPLED_LIFETIME, NUM_ENV_STEPS_TRAINED_LIFETIME)
    from ray.tune.registry import register_env

    from harness.execution.ray import init_local_ray, shutdown_local_ray
    from spacegraph.reports.sampling_contenders import RLLIB_CONV_FILTERS, ScaledImageEnv, env_factory

    cfg = apex_config(env, workers, learning)
    factory = env_factory(cfg)
    atari = bool(cfg["env"].get("atari"))
    name = f"spacegraph-apex-{env}"
    register_env(name, (lambda _c: ScaledImageEnv(factory())) if atari else (lambda _c: factory()))
    init_local_ray(num_cpus=max(2, workers + 2), include_dashboard=False, log_to_driver=False,
                   object_store_memory=400 * 1024 * 1024)
    session = _session_dir()
    try:
        model = (DefaultModelConfig(conv_filters=RLLIB_CONV_FILTERS, conv_activation="relu", head_fcnet_hiddens=[512])
                 if atari else DefaultModelConfig(fcnet_hiddens=[256], head_fcnet_hiddens=[256]))
        config = (DQNConfig().environment(name).framework("torch")
                  .env_runners(num_env_runners=workers, num_envs_per_env_runner=cfg["env"]["num_envs"])
                  .learners(num_learners=0)
                  .training(lr=cfg["optimizer"]["learning_rate"], train_batch_size_per_learner=cfg["update"]["batch_size"],
                            replay_buffer_config={"type": "PrioritizedEpisodeReplayBuffer",
                                                  "capacity": CAPACITY[env], "alpha": 0.6, "beta": 0.4},
                            n_step=cfg["loss"]["n_step"], double_q=True, dueling=True,
                            num_steps_sampled_before_learning_starts=cfg["update"]["start_after"])
                  .rl_module(model_config=model))
        algo = config.build_algo()
        from reference_agents.workers import frames_per_step

        probe = factory()
        fps = frames_per_step(probe)
        probe.close()

        def sampled(result: dict) -> int:
            return int(result[ENV_RUNNER_RESULTS][NUM_ENV_STEPS_SAMPLED_LIFETIME])

        def trained(result: dict) -> int | None:
            # records the learner trained on (n-step transitions: batch rows), over the run
            value = (result.get(LEARNER_RESULTS) or {}).get(ALL_MODULES, {}).get(NUM_ENV_STEPS_TRAINED_LIFETIME)
            return None if value is None else int(value)

        warm = LEARNING_STARTS[env] + 200 * workers
        total, result = 0, {}
        while total < warm:
            result = algo.train()
            total = sampled(result)
        meter = CpuMeter(lambda: _ray_roots(session))
        meter.start()
        steps0, trained0, start = total, trained(result), time.perf_counter()
        iterations = 0
        while time.perf_counter() - start < seconds:
            result = algo.train()
            total = sampled(result)
            iterations += 1
        elapsed = time.perf_counter() - start
        cpu = meter.stop()
        algo.stop()
        steps = total - steps0
        records = None if trained(result) is None else trained(result) - (trained0 or 0)
        batch = int(cfg["update"]["batch_size"])
        return {"steps": steps, "frames": steps * fps, "seconds": elapsed,
                "updates": None if records is None or not learning else records / batch,
                "replay_ratio": None if records is None or not steps else records / steps, "cpu_seconds": cpu,
                "frames_per_step": fps, "envs_per_worker": cfg["env"]["num_envs"], "iterations": iterations,
                "training_intensity": config.training_intensity, "rollout_fragment_length":
                    config.get_rollout_fragment_length()}
    finally:
        shutdown_local_ray()


def _raw_worker(env: str, num_envs: int, seconds: float, queue: Any) -> None:
    from spacegraph.reports.sampling_contenders import RawContender, env_factory

    contender = RawContender(env_factory(apex_config(env, 1, False)), num_envs)
    contender.chunk(50)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        steps += contender.chunk(100)[0]
    queue.put((steps, time.perf_counter() - start, contender.frames_per_step))
    contender.close()


def measure_raw(env: str, workers: int, learning: bool, seconds: float) -> dict[str, Any]:
    """``workers`` processes, each stepping one worker's environment vector with random actions."""
    import multiprocessing as mp

    num_envs = int(apex_config(env, 1, False)["env"]["num_envs"])
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_raw_worker, args=(env, num_envs, seconds, queue)) for _ in range(workers)]
    meter = CpuMeter(lambda: [os.getpid()])
    meter.start()
    for p in procs:
        p.start()
    out = [queue.get(timeout=seconds + 300) for _ in procs]
    cpu = meter.stop()
    for p in procs:
        p.join(30)
    steps = sum(o[0] for o in out)
    elapsed = max(o[1] for o in out)
    return {"steps": steps, "frames": steps * out[0][2], "seconds": elapsed, "updates": None,
            "cpu_seconds": cpu, "frames_per_step": out[0][2], "envs_per_worker": num_envs}


def _session_dir() -> str:
    from harness.execution.ray.executor import ray_session_dir as session

    return session()


MEASURES = {"apex": measure_apex, MATCHED_SIDE: lambda *a: measure_apex(*a, matched=True), "rllib": measure_rllib,
            "raw": measure_raw}


def measure_point(side: str, env: str, workers: int, learning: bool, seconds: float) -> dict[str, Any]:
    """One point; adds ``frames_per_s``, ``cpu_utilisation`` (of all cores) and what was measured.

    Raises:
        ValueError: for an unknown side or env.
    """
    if side not in MEASURES or env not in CONFIGS:
        raise ValueError(f"apex_throughput: side must be one of {SIDES} and env one of {sorted(CONFIGS)}; "
                         f"got {side!r}, {env!r}")
    if side == "rllib":
        missing = rllib_missing("ray.rllib.algorithms.dqn")
        if missing:
            return {"side": side, "env": env, "workers": workers, "learning": learning, "skipped": missing}
    out = MEASURES[side](env, workers, learning, seconds)
    out.update(side=side, env=env, workers=workers, learning=learning,
               frames_per_s=out["frames"] / out["seconds"], steps_per_s=out["steps"] / out["seconds"],
               cpu_utilisation=out["cpu_seconds"] / (out["seconds"] * (os.cpu_count() or 1)))
    if out.get("updates") is not None:
        out["updates_per_s"] = out["updates"] / out["seconds"]
    return out
