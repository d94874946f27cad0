"""IMPALA learning on Pong: ours against RLlib's IMPALA, each trained for the same wall time on this machine.

Two sides, each in its own subprocess, one after the other (never at once: they would share the cores):

* ``ours``: `ActorLearnerWorker` (learner on PyTorch) with ``actors`` actor processes on distributed TF
  (``executor="tf-dist"``, TF servers on 127.0.0.1) or Ray (``executor="ray"``), ``impala_pong.yaml``;
* ``rllib``: RLlib 2.60's IMPALA with ``num_env_runners=actors`` and our rollout length, envs per runner,
  train batch and learning rate (`impala_throughput.rllib_impala`), on Pong wrapped as RLlib's Atari
  examples do (84x84 gray, 4 frames skipped and stacked).

Every ``every`` seconds each side records (seconds from its start, env frames, mean return of the last
100 training episodes, episodes finished). Points are appended to a JSON-lines file as they come, so a side
that crashes or runs out of time keeps what it measured. A random policy's Pong return (about -20.7) is the
floor both start from. RLlib's side needs the peers extra (``.[peers]``). The figure is the ``impala_learning``
scenario of ``spacegraph report`` (`measure`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from spacegraph.reports.impala_throughput import (THREADS, executor_factory, cpu_busy, last_mean,
                                                  record_episode_return, rllib_impala)


class PointLog:
    """Appends a side's points to a JSON-lines file as they come (a crash keeps what was measured)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.points: list[dict[str, float]] = []
        path.write_text("")
        self._busy = cpu_busy()

    def add(self, seconds: float, frames: float, mean_return: float, episodes: int) -> None:
        busy, total = cpu_busy()
        point = {"seconds": round(seconds, 2), "frames": float(frames),
                 "mean_return_100": None if math.isnan(mean_return) else round(float(mean_return), 3),
                 "episodes": int(episodes),
                 "cpu_utilisation": round((busy - self._busy[0]) / max(total - self._busy[1], 1e-9), 3)}
        self._busy = (busy, total)
        self.points.append(point)
        with self.path.open("a") as fh:
            fh.write(json.dumps(point) + "\n")


def side_ours(seconds: float, actors: int, every: float, log: PointLog, executor: str) -> dict[str, Any]:
    start = time.perf_counter()
    from reference_agents.agents import build_agent
    from reference_agents.agents.impala.actor_learner import ActorLearnerWorker

    agent = build_agent("impala_pong", backend="torch")
    worker = ActorLearnerWorker(agent, executor_factory(executor, actors))
    per_batch = agent.config.rollout.length * agent.config.env.num_envs * agent.config.rollout.batch_size
    next_point = start + every
    try:
        while time.perf_counter() - start < seconds:
            worker.run(num_steps=per_batch)
            if time.perf_counter() >= next_point:
                next_point += every
                log.add(time.perf_counter() - start, worker.total_frames, worker.mean_return(100),
                        len(worker.episodes))
        return {"updates": worker.total_updates, "frames": worker.total_frames, "episodes": len(worker.episodes),
                "rollouts_per_actor": {str(k): v for k, v in sorted(worker.received.items())},
                "transport_faults": worker.transport_faults, "lost_rollouts": worker.lost_rollouts}
    finally:
        worker.close()


def side_rllib(seconds: float, actors: int, every: float, log: PointLog, executor: str) -> dict[str, Any]:
    """RLlib's IMPALA; the return at each point is the mean of the last 100 episodes its env runners finished,
    read from their ``on_episode_end`` callbacks (RLlib's own ``episode_return_mean`` on Pong averages a
    few episodes of the last iteration: it jumps between -21 and -19, and is NaN between)."""
    start = time.perf_counter()
    import functools

    import ray

    returns_file = log.path.with_suffix(".returns")
    returns_file.write_text("")
    try:
        algo, frames_per_step = rllib_impala("pong", actors, functools.partial(record_episode_return,
                                                                             str(returns_file)))
        next_point, steps = start + every, 0.0
        while time.perf_counter() - start < seconds:
            result = algo.train()
            steps = float(result.get("num_env_steps_sampled_lifetime",
                                     result.get("env_runners", {}).get("num_env_steps_sampled_lifetime", steps)))
            if time.perf_counter() >= next_point:
                next_point += every
                returns = [float(x) for x in returns_file.read_text().split()]
                log.add(time.perf_counter() - start, steps * frames_per_step,
                        last_mean(returns) if returns else math.nan, len(returns))
        algo.stop()
        returns = [float(x) for x in returns_file.read_text().split()]
        return {"frames": steps * frames_per_step, "episodes": len(returns), "returns": returns}
    finally:
        ray.shutdown()
        returns_file.unlink(missing_ok=True)


SIDES = {"ours": side_ours, "rllib": side_rllib}


def run_side(side: str, minutes: float, actors: int, every: float, executor: str, folder: str | Path
             ) -> dict[str, Any]:
    """One side in a fresh child process, bounded to its run time plus 10 minutes of start-up and shut-down;
    its summary and points (what reached the points file in ``folder`` when it failed, with the error)."""
    points_file = Path(folder) / f"impala_learning_{side}.jsonl"
    cmd = [sys.executable, "-m", "spacegraph.reports.impala_learning", "--child", side, "--minutes", str(minutes),
           "--actors", str(actors), "--every", str(every), "--executor", executor, "--out-dir", str(folder)]
    summary: dict[str, Any]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=minutes * 60 + 600,
                              env={**os.environ, **THREADS})
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
        if done.returncode != 0 or not lines:
            summary = {"error": (done.stderr.strip().splitlines() or ["no output"])[-1][:300]}
        else:
            summary = json.loads(lines[-1])
    except subprocess.TimeoutExpired:
        summary = {"error": f"timed out after {minutes * 60 + 600:.0f} s"}
    points = [json.loads(ln) for ln in points_file.read_text().splitlines() if ln.strip()] \
        if points_file.exists() else []
    return {**summary, "points": points}


def measure(minutes: float = 120.0, actors: int = 2, executor: str = "tf-dist", every: float = 15.0,
            sides: tuple[str, ...] = ("ours", "rllib"), log: Any = None) -> dict[str, Any]:
    """Each side for ``minutes`` of wall time (start-up included), one after the other, a point every ``every`` s.

    Raises:
        ValueError: naming the argument for a non-positive ``minutes``, ``actors`` or ``every``, an unknown
            executor or side.
    """
    if actors < 1 or minutes <= 0 or every <= 0:
        raise ValueError(f"impala_learning.measure: minutes, actors and every must be positive; got {minutes}, "
                         f"{actors}, {every}")
    if executor not in ("tf-dist", "ray") or any(side not in SIDES for side in sides):
        raise ValueError(f"impala_learning.measure: executor must be tf-dist or ray and sides among {sorted(SIDES)}; "
                         f"got {executor!r}, {list(sides)}")
    from harness.measure.host import describe, facts
    from harness.measure.machine import git_revision

    commit = git_revision()[:7]
    result: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "machine": describe(facts()), "commit": commit,
                              "minutes": minutes, "actors": actors, "executor": executor, "every_s": every,
                              "sides": {}, "notes": []}
    with tempfile.TemporaryDirectory(prefix="impala_learning_") as folder:
        for side in sides:
            result["sides"][side] = run_side(side, minutes, actors, every, executor, folder)
            result["sides"][side]["measured"] = {"date": time.strftime("%Y-%m-%d"), "commit": commit}
            if log:
                log(f"{side}: {len(result['sides'][side]['points'])} points")
    return result


def at(points: list[dict[str, Any]], seconds: float) -> dict[str, Any] | None:
    """The last point at or before ``seconds`` (None before the first)."""
    before = [p for p in points if p["seconds"] <= seconds]
    return before[-1] if before else None


def child_main(argv: list[str] | None = None) -> int:
    """One side in this process (the child of `run_side`): its points to ``--out-dir``, its summary as a JSON
    line; not a user command."""
    parser = argparse.ArgumentParser(description="one IMPALA learning side (the child process of run_side)")
    parser.add_argument("--child", choices=sorted(SIDES), required=True)
    parser.add_argument("--minutes", type=float, required=True)
    parser.add_argument("--actors", type=int, required=True)
    parser.add_argument("--executor", choices=("tf-dist", "ray"), required=True)
    parser.add_argument("--every", type=float, required=True)
    parser.add_argument("--out-dir", required=True)
    args = parser.parse_args(argv)
    log = PointLog(Path(args.out_dir) / f"impala_learning_{args.child}.jsonl")
    print(json.dumps(SIDES[args.child](args.minutes * 60, args.actors, args.every, log, args.executor)))
    return 0


if __name__ == "__main__":
    raise SystemExit(child_main())
