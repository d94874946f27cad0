"""IMPALA throughput: env frames/s learned from with 1, 2, 4 actors; ours on distributed TF and on Ray (PyTorch and
TensorFlow compute), RLlib's IMPALA.

Sides, each in its own subprocess, one after the other, for ``seconds`` of measurement after a warm-up:

* ``raw``: one process stepping the same vector of environments (``num_envs`` of the config) with random
  actions: what one actor could give if acting cost nothing;
* ``ours``: `ActorLearnerWorker` (learner, learning on, PyTorch backend) with a `TFActorLearnerExecutor`
  of ``n`` actor processes (TF servers on 127.0.0.1); frames of the rollouts the learner learned from;
* ``ours_ray``: the same with a `RayActorLearnerExecutor` (actors as Ray actors, a local Ray instance);
* ``ours_tf``, ``ours_ray_tf``: ``ours`` and ``ours_ray`` with TensorFlow compute (the learner and every
  actor on the TF backend; same settings otherwise);
* ``rllib``: RLlib 2.60's IMPALA (new API stack, PyTorch, local learner) with ``num_env_runners=n``,
  ``num_envs_per_env_runner`` and ``rollout_fragment_length`` as ours, in a Ray instance on 127.0.0.1;
  its ``num_env_steps_sampled_lifetime`` over the same window.

The machine's CPU utilisation (``/proc/stat``, all processes) is read over each window. On 2 cores,
more than 2 actor processes share the cores with the learner: the figures show what the frameworks
make of a fixed machine, not scaling. RLlib's sides need the peers extra (``.[peers]``). The figure is the
``impala`` scenario of ``spacegraph report`` (`measure`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

ENVS = {"cartpole": ("impala_cartpole", "CartPole-v1"), "pong": ("impala_pong", "ALE/Pong-v5")}
THREADS = {"OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
           "SPACEGRAPH_VALIDATE": "0"}


def cpu_busy() -> tuple[float, float]:
    """``(busy, total)`` jiffies of all CPUs since boot (``/proc/stat``)."""
    with open("/proc/stat") as fh:
        fields = [float(x) for x in fh.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def window(measure: Any, seconds: float) -> dict[str, float]:
    """Runs ``measure(seconds) -> frames`` and returns frames/s and the machine's CPU utilisation."""
    busy0, total0 = cpu_busy()
    start = time.perf_counter()
    frames = measure(seconds)
    elapsed = time.perf_counter() - start
    busy1, total1 = cpu_busy()
    return {"frames": frames, "seconds": elapsed, "frames_per_s": frames / elapsed,
            "cpu_utilisation": (busy1 - busy0) / max(total1 - total0, 1e-9), "load_1min": os.getloadavg()[0]}


def tree_cpu() -> dict[str, float]:
    """CPU seconds (user + system) so far of this process (``learner``) and of its child processes together
    (``others``: the actors, the learner task's TF server); empty without psutil (the ``test`` extra)."""
    try:
        import psutil
    except ImportError:
        return {}

    me = psutil.Process()
    out = {"learner": sum(me.cpu_times()[:2]), "others": 0.0}
    for child in me.children(recursive=True):
        try:
            out["others"] += sum(child.cpu_times()[:2])
        except psutil.Error:
            continue
    return out


# ---- sides (each runs in a child process) -----------------------------------------------------------------
def side_raw(env: str, actors: int, seconds: float) -> dict[str, Any]:
    from reference_agents.agents import load_config
    from reference_agents.workers import VectorEnv

    cfg, _ = load_config(ENVS[env][0])
    kwargs = dict(cfg.env.kwargs, **({"atari": True} if cfg.env.atari else {}))
    envs = VectorEnv(cfg.env.id, cfg.env.num_envs, kwargs or None)
    envs.reset(seed=0)
    space = envs.action_space

    def measure(limit: float) -> float:
        steps, end = 0, time.perf_counter() + limit
        while time.perf_counter() < end:
            envs.step([space.sample() for _ in range(cfg.env.num_envs)])
            steps += cfg.env.num_envs
        return steps * envs.frames_per_step

    measure(1.0)
    out = window(measure, seconds)
    envs.close()
    return out


def executor_factory(kind: str, actors: int) -> Any:
    """``(rollout spec, episode spec, weight spec) -> executor`` of ``actors`` actor processes."""
    from reference_agents.agents.impala.actor_learner import actor_learner_queues

    if kind == "ray":
        from harness.execution.ray.actor_learner import RayActorLearnerExecutor

        return lambda r, e, w: RayActorLearnerExecutor(actors, actor_learner_queues(r, e, actors), w,
                                                       num_cpus=max(2, actors + 1))
    from harness.execution.tf_dist import TFActorLearnerExecutor

    return lambda r, e, w: TFActorLearnerExecutor(actors, actor_learner_queues(r, e, actors), w, env=THREADS)


def merged(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes`` merged in, section by section (nested dicts merge, other values replace)."""
    out = dict(base)
    for key, value in changes.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def side_ours(env: str, actors: int, seconds: float, executor: str = "tf-dist",
              backend: str = "torch", variant: dict[str, Any] | None = None) -> dict[str, Any]:
    """Ours: the learner on ``backend`` (its actors too) with ``actors`` actor processes on ``executor``.

    With a ``variant`` (see `spacegraph.reports.impala_ab`) the config decides instead, as `spacegraph train`
    runs it, but for what the variant changes: config sections (``"config"``, merged into the env's config)
    and the learner's and actors' backends (``"backend"``, ``"actor_backend"``).
    """
    from reference_agents.agents import build_agent, load_config
    from reference_agents.agents.impala.actor_learner import ActorLearnerWorker

    if variant is None:
        learner, acting, changes = backend, backend, {}
    else:
        learner, acting, changes = variant.get("backend"), variant.get("actor_backend"), variant.get("config", {})
    config, _ = load_config(ENVS[env][0])
    agent = build_agent(merged(config.model_dump(by_alias=True), changes), backend=learner)
    start = time.perf_counter()
    worker = ActorLearnerWorker(agent, executor_factory(executor, actors), actor_backend=acting)
    try:
        per_batch = agent.config.rollout.length * agent.config.env.num_envs * agent.config.rollout.batch_size
        deadline = time.monotonic() + 120
        while len(worker.received) < actors and time.monotonic() < deadline:  # every actor up and delivering
            worker.run(num_steps=per_batch)
        startup = time.perf_counter() - start

        cpu: dict[str, float] = {}

        def measure(limit: float) -> float:
            first, end, before = worker.total_frames, time.perf_counter() + limit, tree_cpu()
            updates = worker.total_updates
            while time.perf_counter() < end:
                worker.run(num_steps=per_batch)
            after = tree_cpu()
            cpu.update({k: after[k] - before.get(k, 0.0) for k in after}, updates=worker.total_updates - updates)
            return worker.total_frames - first

        out = window(measure, seconds)
        out["window_updates"] = cpu.pop("updates")
        out["cpu_s"] = cpu   # CPU seconds over the window: the learner, the other processes
        out["updates"] = worker.total_updates
        out["startup_s"] = startup   # from starting the executor until every actor had delivered a rollout
        return out
    finally:
        worker.close()


def side_ours_ray(env: str, actors: int, seconds: float) -> dict[str, Any]:
    """`side_ours` with the actors as Ray actors (`RayActorLearnerExecutor`, a local Ray instance)."""
    return side_ours(env, actors, seconds, executor="ray")


def side_ours_tf(env: str, actors: int, seconds: float) -> dict[str, Any]:
    """`side_ours` with TensorFlow compute in the learner and the actors."""
    return side_ours(env, actors, seconds, backend="tf")


def side_ours_ray_tf(env: str, actors: int, seconds: float) -> dict[str, Any]:
    """`side_ours_ray` with TensorFlow compute in the learner and the actors."""
    return side_ours(env, actors, seconds, executor="ray", backend="tf")


def rllib_pong(env_config: dict) -> Any:
    """Pong as RLlib's Atari examples make it (84x84 gray, 4 frames skipped and 4 stacked); runs in RLlib's
    env-runner processes, so it registers the ALE environments itself."""
    import ale_py
    import gymnasium as gym
    from ray.rllib.env.wrappers.atari_wrappers import wrap_atari_for_new_api_stack

    gym.register_envs(ale_py)
    return wrap_atari_for_new_api_stack(gym.make("ALE/Pong-v5", frameskip=1), dim=84, frameskip=4, framestack=4)


def rllib_impala(env: str, actors: int, on_episode_end: Any = None) -> tuple[Any, int]:
    """RLlib 2.60's IMPALA for ``env`` (new API stack, PyTorch, local learner) with ``num_env_runners=actors``
    and the rollout length, envs per runner, train batch and learning rate of our config, in a Ray instance
    it starts with `init_local_ray` (127.0.0.1, token authentication; the caller calls ``shutdown_local_ray()``);
    ``(algo, env frames per env step)``.
    ``on_episode_end``: an RLlib callback run in the env runners at each episode's end (picklable)."""
    from spacegraph.reports.rllib import import_rllib_safely

    import_rllib_safely()
    from ray.rllib.algorithms.impala import IMPALAConfig

    from harness.execution.ray import init_local_ray
    from reference_agents.agents import load_config

    cfg, _ = load_config(ENVS[env][0])
    name, frames_per_step = cfg.env.id, 1
    if cfg.env.atari:
        from ray import tune

        tune.register_env("pong84", rllib_pong)
        name, frames_per_step = "pong84", 4
    init_local_ray(num_cpus=max(2, actors + 1), include_dashboard=False, object_store_memory=256 * 1024 ** 2,
                   log_to_driver=False)
    config = (IMPALAConfig().environment(name).framework("torch")
              .env_runners(num_env_runners=actors, num_envs_per_env_runner=cfg.env.num_envs,
                           rollout_fragment_length=cfg.rollout.length)
              .learners(num_learners=0)
              .reporting(min_time_s_per_iteration=1)  # (default 10 s: too coarse for these windows)
              .training(lr=cfg.optimizer.learning_rate, train_batch_size_per_learner=(
                  cfg.rollout.length * cfg.env.num_envs * cfg.rollout.batch_size)))
    if on_episode_end is not None:
        config = config.callbacks(on_episode_end=on_episode_end)
    return config.build_algo(), frames_per_step


def side_rllib(env: str, actors: int, seconds: float) -> dict[str, Any]:
    from harness.execution.ray import shutdown_local_ray

    try:
        algo, frames_per_step = rllib_impala(env, actors)

        seen = [0.0]

        def sampled() -> float:
            result = algo.train()  # the first results may not carry the counter yet
            seen[0] = float(result.get("num_env_steps_sampled_lifetime",
                                       result.get("env_runners", {}).get("num_env_steps_sampled_lifetime", seen[0])))
            return seen[0]

        start_steps, warm_end = sampled(), time.perf_counter() + 10
        while time.perf_counter() < warm_end or start_steps == 0:
            start_steps = sampled()

        def measure(limit: float) -> float:
            first, end, last = start_steps, time.perf_counter() + limit, start_steps
            while time.perf_counter() < end:
                last = sampled()
            return (last - first) * frames_per_step

        out = window(measure, seconds)
        algo.stop()
        return out
    finally:
        shutdown_local_ray()


CURVE_POINTS = (15, 30, 60, 90, 120, 150)


def side_curve_ours(env: str, actors: int, seconds: float) -> dict[str, Any]:
    """CartPole learning against wall time: the mean return of the last 100 training episodes, from the
    side's start (imports and start-up included) for ``seconds``."""
    start = time.perf_counter()
    from reference_agents.agents import build_agent
    from reference_agents.agents.impala.actor_learner import ActorLearnerWorker

    agent = build_agent(ENVS[env][0], backend="torch")
    worker = ActorLearnerWorker(agent, executor_factory("tf-dist", actors))
    curve, next_point = [], 0.0
    try:
        while time.perf_counter() - start < seconds:
            worker.run(num_steps=agent.config.rollout.length * agent.config.env.num_envs * 4)
            now = time.perf_counter() - start
            if worker.episodes and now >= next_point:   # a point per half second (RLlib's: one per iteration)
                curve.append((now, worker.mean_return(100), worker.total_steps))
                next_point = now + 0.5
    finally:
        worker.close()
    return {"curve": curve}


def record_episode_return(path: str, *, episode: Any, prev_episode_chunks: Any = None, **_: Any) -> None:
    """RLlib ``on_episode_end`` callback (runs in its env runners): appends the episode's whole return (its
    earlier chunks included) to ``path``, one line each."""
    total = float(episode.get_return()) + sum(float(c.get_return()) for c in prev_episode_chunks or ())
    with open(path, "a") as fh:
        fh.write(f"{total}\n")


def last_mean(returns: list[float], last: int = 100) -> float | None:
    """The mean of the last ``last`` returns (of all of them while fewer finished; None before the first)."""
    tail = returns[-last:]
    return sum(tail) / len(tail) if tail else None


def side_curve_rllib(env: str, actors: int, seconds: float) -> dict[str, Any]:
    """RLlib's IMPALA on CartPole (the settings of `side_rllib`): the mean return of the last 100 episodes its
    env runners finished, read from their ``on_episode_end`` callbacks after every training iteration,
    against wall time from the side's start: the quantity ours reports. (RLlib's own ``episode_return_mean``
    is not that window: here it jumped between about 150 and 500 from one iteration to the next.)"""
    start = time.perf_counter()
    import functools
    import tempfile

    from harness.execution.ray import shutdown_local_ray

    fd, returns_file = tempfile.mkstemp(prefix="rllib_returns_", suffix=".txt")
    os.close(fd)
    curve = []
    try:
        algo, _ = rllib_impala(env, actors, functools.partial(record_episode_return, returns_file))
        while time.perf_counter() - start < seconds:
            result = algo.train()
            with open(returns_file) as fh:
                mean = last_mean([float(x) for x in fh.read().split()])
            if mean is not None:
                curve.append((time.perf_counter() - start, mean,
                              float(result.get("num_env_steps_sampled_lifetime", 0))))
        algo.stop()
    finally:
        shutdown_local_ray()
        os.unlink(returns_file)
    return {"curve": curve}


def at(curve: list, t: float) -> float | None:
    """The curve's last value at or before ``t`` seconds (None before its first point)."""
    before = [r for s, r, _ in curve if s <= t]
    return before[-1] if before else None


#: The throughput sides of ours (PyTorch, then TensorFlow compute), in the order they run for each actor count.
OURS = ("ours", "ours_ray", "ours_tf", "ours_ray_tf")
THROUGHPUT_SIDES = ("raw", *OURS, "rllib")

SIDES = {"raw": side_raw, "ours": side_ours, "ours_ray": side_ours_ray, "ours_tf": side_ours_tf,
         "ours_ray_tf": side_ours_ray_tf, "rllib": side_rllib,
         "curve_ours": side_curve_ours,
         "curve_rllib": side_curve_rllib}


def run_side(side: str, env: str, actors: int, seconds: float, timeout: float,
             variant: dict[str, Any] | None = None) -> dict[str, Any]:
    """One side in a fresh child process; its result, or ``{"error": ...}``. ``variant``: for ``ours`` (see
    `side_ours`), with ``"env"``: environment variables of the child (and so of its actor processes)."""
    cmd = [sys.executable, "-m", "spacegraph.reports.impala_throughput", "--child", side, "--envs", env,
           "--actors", str(actors), "--seconds", str(seconds)]
    if variant is not None:   # ({} too: the config as it is)
        cmd += ["--variant", json.dumps(variant)]
    child_env = {**os.environ, **THREADS, **(variant or {}).get("env", {})}
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=child_env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1][:300]}
    return json.loads(lines[-1])


def measure(envs: list[str] | tuple[str, ...] = ("cartpole", "pong"), actors: list[int] | tuple[int, ...] = (1, 2, 4),
            seconds: float = 20.0, sides: list[str] | tuple[str, ...] = THROUGHPUT_SIDES,
            curve: bool = True, log: Any = None) -> dict[str, Any]:
    """Every side for every env and actor count, each in a fresh child (`run_side`), and the CartPole curves.

    Args:
        sides: of `THROUGHPUT_SIDES` (``raw``, ``ours``, ``ours_ray``, ``ours_tf``, ``ours_ray_tf``, ``rllib``).
        curve: also CartPole's return against wall time, ours and RLlib's, 2 actors, 150 s each.
        log: called with a line per side measured.

    Raises:
        ValueError: naming the argument for an unknown env or side.
    """
    bad = [e for e in envs if e not in ENVS] + [s for s in sides if s not in THROUGHPUT_SIDES]
    if bad:
        raise ValueError(f"impala_throughput.measure: envs must be among {sorted(ENVS)} and sides among "
                         f"{', '.join(THROUGHPUT_SIDES)}; got {bad}")
    from harness.measure.host import describe, facts
    from harness.measure.machine import git_revision

    say = log or (lambda line: None)
    commit, machine = git_revision()[:7], describe(facts())
    result: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "machine": machine, "commit": commit,
                              "seconds": seconds, "actors": list(actors), "envs": {}, "notes": []}
    for env in envs:
        rows = result["envs"].setdefault(env, {})
        if "raw" in sides:
            rows["raw"] = run_side("raw", env, 1, seconds, 300)
            say(f"{env} raw: {rows['raw'].get('frames_per_s', rows['raw'].get('error'))}")
        for n in actors:
            for side in (*OURS, "rllib"):
                if side in sides:
                    rows[f"{side}-{n}"] = r = run_side(side, env, n, seconds, 600)
                    say(f"{env} {side} {n} actors: {r.get('frames_per_s', r.get('error'))}")
    if curve:
        result["curve_actors"] = 2
        result["curve_measured"] = {"date": result["date"], "commit": commit, "machine": machine}
        result["curves"] = {side: run_side(side, "cartpole", 2, 150.0, 600)
                            for side in (("curve_ours", "curve_rllib") if "rllib" in sides else ("curve_ours",))}
        say("CartPole curves")
    return result


def child_main(argv: list[str] | None = None) -> None:
    """One side in this process (the child of `run_side`), its result as a JSON line; not a user command."""
    parser = argparse.ArgumentParser(description="one IMPALA throughput side (the child process of run_side)")
    parser.add_argument("--child", choices=sorted(SIDES), required=True)
    parser.add_argument("--envs", required=True)
    parser.add_argument("--actors", type=int, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--variant", type=json.loads, default=None, help="JSON: side_ours's variant")
    args = parser.parse_args(argv)
    extra = {"variant": args.variant} if args.variant is not None else {}
    print(json.dumps(SIDES[args.child](args.envs, args.actors, args.seconds, **extra)))


if __name__ == "__main__":
    child_main()
