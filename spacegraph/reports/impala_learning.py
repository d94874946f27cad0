"""IMPALA learning on Pong: ours against RLlib's IMPALA, each trained for the same wall time on this machine.

Two sides, each in its own subprocess, one after the other (never at once: they would share the cores):

* ``ours``: `ActorLearnerWorker` (learner on PyTorch) with ``--actors`` actor processes on distributed TF
  (``--executor tf-dist``, TF servers on 127.0.0.1) or Ray (``--executor ray``), ``impala_pong.yaml``;
* ``rllib``: RLlib 2.60's IMPALA with ``num_env_runners=--actors`` and our rollout length, envs per runner,
  train batch and learning rate (`impala_throughput.rllib_impala`), on Pong wrapped as RLlib's Atari
  examples do (84x84 gray, 4 frames skipped and stacked).

Every ``--every`` seconds each side records (seconds from its start, env frames, mean return of the last
100 training episodes, episodes finished). Points are appended to ``<out>/impala_learning_<side>.jsonl`` as
they come, so a side that crashes or runs out of time keeps what it measured. A random policy's Pong return
(about -20.7) is the floor both start from. Run under an interpreter with RLlib (``.[peers]``)::

    python -m spacegraph.reports.impala_learning [--minutes 120] [--actors 2] [--executor tf-dist]

It writes ``reports/impala_pong_learning.md``, ``.json`` and ``.png``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from spacegraph.reports import read_result_json
from spacegraph.reports.impala_throughput import (THREADS, executor_factory, cpu_busy, last_mean,
                                                  record_episode_return, rllib_impala)

REPORT_DIR = Path(__file__).resolve().parents[2] / "reports"
NAME = "impala_pong_learning"
#: Times (minutes) the Markdown table reads the curves at; those past the run's length are left out.
TABLE_MINUTES = (1, 2, 5, 10, 15, 20, 30, 40, 60, 90, 120)


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


def run_side(side: str, args: argparse.Namespace) -> dict[str, Any]:
    """One side in a fresh child process, bounded to its run time plus 10 minutes of start-up and shut-down;
    its summary and points (what reached the points file when it failed, with the error)."""
    out = Path(args.out_dir)
    points_file = out / f"impala_learning_{side}.jsonl"
    cmd = [sys.executable, "-m", "spacegraph.reports.impala_learning", "--child", side,
           "--minutes", str(args.minutes), "--actors", str(args.actors), "--every", str(args.every),
           "--executor", args.executor, "--out-dir", str(out)]
    summary: dict[str, Any]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.minutes * 60 + 600,
                              env={**os.environ, **THREADS})
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
        if done.returncode != 0 or not lines:
            summary = {"error": (done.stderr.strip().splitlines() or ["no output"])[-1][:300]}
        else:
            summary = json.loads(lines[-1])
    except subprocess.TimeoutExpired:
        summary = {"error": f"timed out after {args.minutes * 60 + 600:.0f} s"}
    points = [json.loads(ln) for ln in points_file.read_text().splitlines() if ln.strip()] \
        if points_file.exists() else []
    return {**summary, "points": points}


def at(points: list[dict[str, Any]], seconds: float) -> dict[str, Any] | None:
    """The last point at or before ``seconds`` (None before the first)."""
    before = [p for p in points if p["seconds"] <= seconds]
    return before[-1] if before else None


def _fmt_return(point: dict[str, Any] | None) -> str:
    if point is None or point["mean_return_100"] is None:
        return "-"
    return f"{point['mean_return_100']:.1f} ({point['frames'] / 1e6:.2f}M)"


def markdown(result: dict[str, Any]) -> str:
    sides = result["sides"]
    minutes = [m for m in TABLE_MINUTES if m <= result["minutes"]] or [result["minutes"]]
    lines = [f"# IMPALA on Pong: ours ({result['executor']}) against RLlib's IMPALA, {result['minutes']:g} "
             "minutes each", "",
             f"Measured {result['date']} on {result['machine']} (commit {result['commit']}). One learner and "
             f"{result['actors']} actors each, the two runs one after the other for the same wall time, start-up "
             "included. Return: the mean of the last 100 training episodes (for RLlib, the returns its env "
             "runners report at each episode's end, through an `on_episode_end` callback: its own "
             "`episode_return_mean` averages only the last iteration's few Pong episodes); env frames count "
             "the 4 skipped frames of each step. A random policy scores about "
             "-20.7 (Mnih et al. 2015).", "",
             "| minutes | " + " | ".join(str(m) for m in minutes) + " |",
             "|---|" + "---|" * len(minutes)]
    for name, side in (("ours: return (frames)", "ours"), ("RLlib: return (frames)", "rllib")):
        data = sides.get(side, {})
        if not data.get("points"):
            lines.append(f"| {name} | ({data.get('error', 'not run')}) |")
            continue
        # a side whose points end more than a point's interval before a time had stopped by then (it failed)
        end = data["points"][-1]["seconds"] + result.get("every_s", 0.0)
        lines.append(f"| {name} | " + " | ".join("stopped" if m * 60 > end else _fmt_return(at(data["points"], m * 60))
                                               for m in minutes) + " |")
    lines += ["", "| side | env frames | frames/s | episodes | best return (100 ep.) | machine CPU | measured | "
                  "error |",
              "|---|---|---|---|---|---|---|---|"]
    for side in ("ours", "rllib"):
        data = sides.get(side, {})
        points = data.get("points", [])
        measured = data.get("measured", {"date": result["date"], "commit": result["commit"]})
        when = f"{measured['date']}, {measured['commit']}"
        if not points:
            lines.append(f"| {side} | - | - | - | - | - | {when} | {data.get('error', 'not run')} |")
            continue
        last = points[-1]
        best = max((p["mean_return_100"] for p in points if p["mean_return_100"] is not None), default=None)
        cpu = sum(p["cpu_utilisation"] for p in points) / len(points)
        lines.append(f"| {side} | {last['frames']:,.0f} | {last['frames'] / max(last['seconds'], 1e-9):,.0f} | "
                     f"{last['episodes']:,} | {'-' if best is None else f'{best:.1f}'} | {cpu:.0%} | {when} | "
                     f"{data.get('error', '')} |")
    lines += ["", "![return against frames and wall time](impala_pong_learning.png)", "",
              "Published, other hardware: the RLgraph paper's Fig. 9 compares IMPALA *throughput* with "
              "DeepMind's implementation on DM Lab (`seekavoid_arena_01`), a V100 learner and 4 workers per "
              "8-vCPU instance; its text gives RLgraph about 10-15% more mean throughput than DeepMind's for "
              "fewer workers (`reports/baselines/rlgraph_paper.yaml`). It has no Pong learning curve. The "
              "IMPALA paper's abstract states 250,000 frames/s on up to thousands of machines "
              "(`reports/baselines/impala_paper.yaml`). Neither is comparable with a 2-core run.",
              *(["", "Notes:", ""] + [f"- {n}" for n in result.get("notes", [])] if result.get("notes") else []),
              "", "Reproduce: `python -m spacegraph.reports.impala_learning --minutes "
              f"{result['minutes']:g} --actors {result['actors']} --executor {result['executor']}` under an "
              "interpreter with `.[peers]` installed."]
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path) -> bool:
    """Return against env frames and against wall time, both sides (False when matplotlib is missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for side, label in (("ours", f"ours ({result['executor']})"), ("rllib", "RLlib IMPALA")):
        points = [p for p in result["sides"].get(side, {}).get("points", []) if p["mean_return_100"] is not None]
        if not points:
            continue
        returns = [p["mean_return_100"] for p in points]
        axes[0].plot([p["frames"] / 1e6 for p in points], returns, label=label)
        axes[1].plot([p["seconds"] / 60 for p in points], returns, label=label)
    for ax, xlabel in zip(axes, ("env frames (millions)", "wall time (minutes)")):
        ax.axhline(-20.7, color="grey", linestyle=":", label="random policy")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("mean return, last 100 episodes")
        ax.legend()
    fig.suptitle(f"IMPALA on Pong, {result['actors']} actors, {result['date']} ({result['machine']})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=120.0, help="wall time of each side (start-up included)")
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--executor", choices=("tf-dist", "ray"), default="tf-dist")
    parser.add_argument("--every", type=float, default=15.0, help="seconds between the points of a curve")
    parser.add_argument("--sides", default="ours,rllib")
    parser.add_argument("--out-dir", default=str(REPORT_DIR))
    parser.add_argument("--note", action="append", default=[], help="a note for the report (repeatable)")
    parser.add_argument("--rewrite", metavar="JSON", help="only rewrite the Markdown and PNG from a result JSON")
    parser.add_argument("--update", action="store_true",
                        help="keep the sides of the report in --out-dir that this run does not measure")
    parser.add_argument("--child", choices=sorted(SIDES), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    out = Path(args.out_dir)
    if args.actors < 1 or args.minutes <= 0 or args.every <= 0:
        parser.error("--actors, --minutes and --every must be positive")
    if args.child:
        log = PointLog(out / f"impala_learning_{args.child}.jsonl")
        print(json.dumps(SIDES[args.child](args.minutes * 60, args.actors, args.every, log, args.executor)))
        return None
    if args.rewrite:
        result = read_result_json(args.rewrite, "--rewrite")
        result["notes"] = [*result.get("notes", []), *args.note]
    else:
        from harness.measure.host import describe, facts

        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=REPORT_DIR.parent).stdout.strip()
        result = {"date": time.strftime("%Y-%m-%d"), "machine": describe(facts()), "commit": commit,
                  "minutes": args.minutes, "actors": args.actors, "executor": args.executor, "every_s": args.every,
                  "sides": {}, "notes": list(args.note)}
        previous = out / f"{NAME}.json"
        if args.update and previous.exists():   # the sides this run measures replace those of the last one
            kept = read_result_json(str(previous), "--update")
            settings = ("minutes", "actors", "executor")
            if any(kept.get(k) != result[k] for k in settings):
                was, now = {k: kept.get(k) for k in settings}, {k: result[k] for k in settings}
                parser.error(f"--update: {previous} was measured with {was}, this run with {now}")
            kept["notes"] = [*kept.get("notes", []), *args.note]
            result = kept
        for side in args.sides.split(","):
            result["sides"][side] = run_side(side, args)
            result["sides"][side]["measured"] = {"date": time.strftime("%Y-%m-%d"), "commit": commit}
            print(side, {k: v for k, v in result["sides"][side].items() if k != "points"},
                  f"{len(result['sides'][side]['points'])} points", flush=True)
            (out / f"impala_learning_{side}.jsonl").unlink(missing_ok=True)   # now in the JSON
    (out / f"{NAME}.json").write_text(json.dumps(result, indent=1))
    (out / f"{NAME}.md").write_text(markdown(result))
    plot(result, out / f"{NAME}.png")
    print(markdown(result))
    return result


if __name__ == "__main__":
    main()
