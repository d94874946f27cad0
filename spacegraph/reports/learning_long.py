"""The learning regression suite: reference runs with stop criteria, and time- and frames-to-target.

A `ReferenceRun` is one ``spacegraph train`` command (a config, a backend, an executor) with `StopCriteria`: the
target (the mean return of the last 100 training episodes, as the published MinAtar curves and RLlib's release
tests count it), a frame budget and a wall-time budget. `run_reference` starts the command in a subprocess with
``--steps`` (the frame budget in env steps) and ``--max-seconds`` (the time budget), reads the run directory's
``metrics.jsonl`` as rows arrive (one per evaluation: frames, wall seconds, last-100 training return) and stops
the run with Ctrl-C (SIGINT: it checkpoints and ends) at the first row that reaches the target. It records
frames- and time-to-target, or "not reached" with where the run stood, and the curve; each run keeps its date,
commit and machine, so the seeds of a long run can be spread over sessions and sit in one result.

``python -m spacegraph.reports.learning_long --list`` names the runs; ``--run NAME --seed N --result PATH`` runs one
and adds it to the result file PATH; ``spacegraph report --from-json PATH --only learning_long`` draws it.
``spacegraph report --only learning_long`` runs them all (``--quick``: `quick_runs`, CartPole within a minute).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import yaml

from harness.measure.machine import REPO, cpu_model, git_revision

#: The games with a published DQN curve that is a target (Seaquest's is for MinAtar <= 1.0.10: reported only).
MINATAR_TARGETS = ("breakout", "space_invaders", "freeway")
MINATAR_REPORTED = ("asterix", "seaquest")
MINATAR_TITLES = {"breakout": "Breakout", "space_invaders": "SpaceInvaders", "freeway": "Freeway",
                  "asterix": "Asterix", "seaquest": "Seaquest"}
#: What a run's thread pools are limited to (as the other learning reports: one framework thread).
THREAD_ENV = {"OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
              "TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0"}


@dataclasses.dataclass(frozen=True)
class StopCriteria:
    """When a reference run stops: at the target, or out of frames or time, whichever comes first.

    Args:
        target_return: the mean return of the last 100 training episodes to reach.
        frames: the frame budget (emulator frames; a MinAtar step is one frame, an ALE v5 step four).
        seconds: the wall-time budget of the training (its evaluations included, process start-up excluded).
        min_episodes: the mean counts once this many training episodes have finished.
    """

    target_return: float
    frames: int
    seconds: float
    min_episodes: int = 100

    def __post_init__(self) -> None:
        if not isinstance(self.target_return, (int, float)) or isinstance(self.target_return, bool) \
                or not math.isfinite(self.target_return):
            raise ValueError(f"StopCriteria: target_return must be a finite number; got {self.target_return!r}")
        for name, kind in (("frames", int), ("seconds", (int, float)), ("min_episodes", int)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, kind) or value <= 0:
                raise ValueError(f"StopCriteria: {name} must be a positive number; got {value!r}")


@dataclasses.dataclass(frozen=True)
class ReferenceRun:
    """One reference run: ``spacegraph train CONFIG --backend BACKEND *args`` under `StopCriteria`.

    Args:
        name: the run's name (``--run NAME``).
        figure: the figure it is drawn on (and the published baselines' ``scenario`` key for it).
        config: a config name or file.
        backend: tf or torch.
        stop: the stop criteria.
        env_id: replaces the config's ``env.id`` (the other MinAtar games from the Breakout config).
        args: more ``spacegraph train`` flags (the executor and its workers).
        eval_every: env steps between evaluations, i.e. between the rows the stop criteria are checked at.
        eval_episodes: greedy episodes per evaluation (the target is on training episodes: kept small).
        target_source: where the target comes from.
    """

    name: str
    figure: str
    config: str
    backend: str
    stop: StopCriteria
    env_id: str | None = None
    args: tuple[str, ...] = ()
    eval_every: int = 50_000
    eval_episodes: int = 1
    target_source: str = ""


def published_target(points: Sequence[dict[str, Any]], frames: int) -> float:
    """The published return at ``frames``: linear between the points (``x`` in millions of frames).

    Raises:
        ValueError: when ``frames`` lies outside the published points (no extrapolation).
    """
    pts = sorted((float(p["x"]) * 1e6, float(p["y"])) for p in points)
    if not pts or not pts[0][0] <= frames <= pts[-1][0]:
        raise ValueError(f"published_target: {frames:,} frames lies outside the published points "
                         f"({', '.join(f'{x:,.0f}' for x, _ in pts) or 'none'})")
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 <= frames <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (frames - x0) / (x1 - x0)
    return pts[-1][1]


def reference_runs(published: dict[str, list[Any]] | None = None, frames: int = 5_000_000) -> list[ReferenceRun]:
    """The reference runs: DQN on the five MinAtar games on both backends, Ape-X (Ray, 2 workers) on them, and
    IMPALA on Pong (tf-dist, 2 actors: last-100 mean >= 18 within 10M frames and 90 minutes).

    Args:
        published: `spacegraph.report.baselines.load`'s result (default: the checkout's reports/baselines).
        frames: the MinAtar frame budget; the target is the published DQN curve at that frame count.

    Raises:
        ValueError: when a MinAtar game has no published curve, or ``frames`` lies outside it.
    """
    if published is None:
        from spacegraph.report import baselines

        published = baselines.load()
    runs = []
    for game in (*MINATAR_TARGETS, *MINATAR_REPORTED):
        figure = f"learning_long_minatar_{game}"
        entries = published.get(figure)
        if not entries:
            raise ValueError(f"reference_runs: no published curve for {figure} in reports/baselines")
        target = round(published_target(entries[0].points, frames), 2)
        stop = StopCriteria(target, frames, seconds=6 * 3600.0)
        source = f"{entries[0].label} at {frames / 1e6:g}M frames ({entries[0].where})"
        env_id = f"MinAtar/{MINATAR_TITLES[game]}-v0"
        for backend in ("torch", "tf"):
            runs.append(ReferenceRun(f"dqn_minatar_{game}_{backend}", figure, "dqn_minatar_breakout", backend, stop,
                                     env_id, eval_episodes=5, target_source=source))
        runs.append(ReferenceRun(f"apex_minatar_{game}", figure, "apex_minatar_breakout", "torch", stop, env_id,
                                 ("--executor", "ray", "--workers", "2", "--shards", "2"), eval_episodes=5,
                                 target_source=source))
    runs.append(ReferenceRun("impala_pong", "learning_long_pong", "impala_pong", "torch",
                             StopCriteria(18.0, 10_000_000, 90 * 60.0), None, ("--executor", "tf-dist", "--actors", "2"),
                             eval_every=250_000, target_source="issue 42: RLlib's APPO release test (Pong >= 18 "
                                                               "within 10M steps), here within 90 minutes too"))
    return runs


def quick_runs() -> list[ReferenceRun]:
    """The quick report's runs: DQN on CartPole with a tiny budget (tests and ``--quick``)."""
    stop = StopCriteria(target_return=40.0, frames=4000, seconds=60.0, min_episodes=10)
    return [ReferenceRun(f"dqn_cartpole_quick_{b}", "learning_long_cartpole", "dqn_cartpole", b, stop,
                         eval_every=1000, target_source="quick check: above a random policy's ~22")
            for b in ("torch", "tf")]


# ---- the stop criteria on the rows --------------------------------------------------------------------------
def read_rows(path: Path) -> list[dict[str, Any]]:
    """The complete rows of a ``metrics.jsonl`` written so far ([] before the first; a half-written last line
    is left for the next read)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    rows = []
    for line in text.splitlines(keepends=True):
        if line.endswith("\n") and line.strip():
            rows.append(json.loads(line))
    return rows


def point(row: dict[str, Any]) -> dict[str, Any]:
    """A curve point from a metrics row: frames, wall and training seconds, last-100 return, episodes."""
    ret = row.get("train_return_100")
    return {"frames": int(row["frames"]), "seconds": round(float(row["wall_s"]), 2),
            "train_seconds": round(float(row["train_s"]), 2), "episodes": int(row["episodes"]),
            "return_100": None if ret is None or not math.isfinite(float(ret)) else round(float(ret), 3)}


def reached(p: dict[str, Any], stop: StopCriteria) -> bool:
    """Whether a point meets the target (enough episodes finished, last-100 mean at or above the target)."""
    return p["episodes"] >= stop.min_episodes and p["return_100"] is not None and p["return_100"] >= stop.target_return


def outcome(points: list[dict[str, Any]], stop: StopCriteria) -> dict[str, Any]:
    """Frames- and time-to-target at the first point that reaches the target, else where the run stood.

    Returns:
        ``{"reached", "frames_to_target", "seconds_to_target", "train_seconds_to_target", "stop_reason"
        ("target", "frames", "seconds" or "stopped early": a run that ended before its budgets), "last",
        "best_return_100"}``.
    """
    best = max((p["return_100"] for p in points if p["return_100"] is not None), default=None)
    out: dict[str, Any] = {"reached": False, "frames_to_target": None, "seconds_to_target": None,
                           "train_seconds_to_target": None, "last": points[-1] if points else None,
                           "best_return_100": best}
    for p in points:
        if reached(p, stop):
            return {**out, "reached": True, "frames_to_target": p["frames"], "seconds_to_target": p["seconds"],
                    "train_seconds_to_target": p["train_seconds"], "stop_reason": "target"}
    last = points[-1] if points else None
    why = ("frames" if last and last["frames"] >= stop.frames else
           "seconds" if last and last["seconds"] >= stop.seconds else "stopped early")
    return {**out, "stop_reason": why}


# ---- running --------------------------------------------------------------------------------------------------
def train_command(run: ReferenceRun, seed: int, config: str, out: Path, steps: int) -> list[str]:
    """The ``spacegraph train`` command line of ``run``."""
    return [sys.executable, "-m", "spacegraph.cli", "train", config, "--backend", run.backend, "--seed", str(seed),
            "--steps", str(steps), "--max-seconds", str(run.stop.seconds), "--out", str(out), "--quiet",
            "--no-tensorboard", "--eval-every", str(run.eval_every), "--eval-episodes", str(run.eval_episodes),
            "--screen-episodes", str(run.eval_episodes), *run.args]


def run_config(run: ReferenceRun, folder: Path) -> tuple[str, Any]:
    """The config ``run`` trains (a copy with ``env.id`` replaced when it names one) and its env config."""
    from reference_agents.agents import resolve_config_path
    from reference_agents.agents.config import read_config_file

    path = resolve_config_path(run.config)
    data = read_config_file(path)
    if run.env_id is None:
        return path, data["env"]
    data["env"] = {**data["env"], "id": run.env_id}
    copy = folder / f"{Path(path).stem}_{run.env_id.replace('/', '_')}.yaml"
    copy.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(copy), data["env"]


def measured_on() -> dict[str, Any]:
    """Date, commit and machine of a run."""
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "commit": git_revision(), "machine": platform.node(), "processor": cpu_model(), "cpus": os.cpu_count(),
            "load_average": list(os.getloadavg())}


def run_reference(run: ReferenceRun, seed: int, folder: str | Path | None = None, poll_s: float = 2.0,
                  grace_s: float = 300.0, log: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """Trains ``run`` with ``seed`` in a subprocess until its stop criteria (see the module docstring).

    Args:
        run: the reference run.
        seed: the run's seed.
        folder: where the run directory goes (default: a temporary folder, removed after).
        poll_s: seconds between reads of ``metrics.jsonl``.
        grace_s: the subprocess is killed this long after the time budget (start-up and the last evaluation).
        log: called with a line at each new point (None: quiet).

    Returns:
        ``{"name", "figure", "seed", "config", "env_id", "backend", "args", "stop", "target_source", "points",
        "measured", "exit_status", **outcome(...)}``, plus ``"error"`` and ``"log_tail"`` when the command failed
        before its first point or was killed.
    """
    from reference_agents.environments import frames_per_step, make_env

    with tempfile.TemporaryDirectory(prefix="learning_long_") as tmp:
        base = Path(folder) if folder is not None else Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        config, env = run_config(run, base)
        probe = make_env(env["id"], atari=bool(env.get("atari", False)), **(env.get("kwargs") or {}))
        per_step = frames_per_step(probe)
        probe.close()
        out = base / f"{run.name}-seed{seed}"
        steps = max(1, math.ceil(run.stop.frames / per_step))
        cmd = train_command(run, seed, config, out, steps)
        record = {"name": run.name, "figure": run.figure, "seed": int(seed), "config": run.config,
                  "env_id": run.env_id or env["id"], "backend": run.backend, "args": list(run.args),
                  "stop": dataclasses.asdict(run.stop), "target_source": run.target_source,
                  "frames_per_step": per_step, "measured": measured_on()}
        points, error, status = [], None, None
        env_vars = {**os.environ, **THREAD_ENV,
                    "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        log_path = base / f"{run.name}-seed{seed}.log"
        with open(log_path, "w") as log_file:
            child = subprocess.Popen(cmd, cwd=REPO, env=env_vars, stdout=log_file, stderr=subprocess.STDOUT,
                                     start_new_session=True)
            deadline = time.monotonic() + run.stop.seconds + grace_s
            stopping = False
            while True:
                status = child.poll()
                rows = read_rows(out / "metrics.jsonl")
                for row in rows[len(points):]:
                    points.append(point(row))
                    if log is not None:
                        log(f"{run.name} seed {seed}: {points[-1]}")
                if status is not None:
                    break
                if not stopping and points and reached(points[-1], run.stop):
                    child.send_signal(signal.SIGINT)   # checkpoint and end (the Trainer's Ctrl-C)
                    stopping, deadline = True, min(deadline, time.monotonic() + grace_s)
                if time.monotonic() > deadline:
                    os.killpg(child.pid, signal.SIGKILL)
                    child.wait()
                    error = f"killed {grace_s:g} s after its time budget or its stop"
                    break
                time.sleep(poll_s)
        record.update(points=points, exit_status=status, **outcome(points, run.stop))
        if error is None and not points and status != 0:
            error = f"exited with status {status} before its first point"
        if error is not None:
            record.update(error=error, log_tail=log_path.read_text(errors="replace")[-3000:])
        return record


def measure(runs: Sequence[ReferenceRun], seeds: Sequence[int], log: Callable[[str], Any] | None = print,
            previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """Runs every run on every seed, one after another (seed 0 of each run, then seed 1, ...), after the runs of
    ``previous`` (a result of this function: runs measured in other sessions are kept as they are).

    Args:
        runs: the reference runs.
        seeds: their seeds.
        log: called with `run_line` after each run (None: quiet).
        previous: runs measured before, kept first.

    Returns:
        ``{"runs": [run_reference's records], "criteria": {name: stop criteria and target source}}``.
    """
    if not seeds:
        raise ValueError("measure: give at least one seed")
    result = {"runs": list((previous or {}).get("runs", [])), "criteria": dict((previous or {}).get("criteria", {}))}
    for seed in seeds:
        for run in runs:
            result["criteria"][run.name] = {**dataclasses.asdict(run.stop), "target_source": run.target_source}
            record = run_reference(run, seed)
            result["runs"].append(record)
            if log is not None:
                log(run_line(record))
    return result


def run_line(record: dict[str, Any]) -> str:
    """One line about a run: frames- and time-to-target, or where it stood."""
    head = f"{record['name']} seed {record['seed']}"
    if record.get("error"):
        return f"{head}: FAILED ({record['error']})"
    if record["reached"]:
        return (f"{head}: reached {record['stop']['target_return']:g} at {record['frames_to_target']:,} frames, "
                f"{record['seconds_to_target']:.0f} s")
    last = record["last"]
    where = "no point" if last is None else f"{last['return_100']} at {last['frames']:,} frames, {last['seconds']:.0f} s"
    return f"{head}: not reached ({record['stop_reason']}); stood at {where}"


def main(argv: list[str] | None = None) -> int:
    """``python -m spacegraph.reports.learning_long``: list the runs, or run some and add them to a result file."""
    parser = argparse.ArgumentParser(prog="python -m spacegraph.reports.learning_long",
                                     description="reference learning runs with stop criteria (docs/testing.md)")
    parser.add_argument("--list", action="store_true", help="list the runs and their stop criteria")
    parser.add_argument("--run", nargs="+", metavar="NAME", help="runs to run (--list names them)")
    parser.add_argument("--seed", nargs="+", type=int, default=[0], help="seeds, one after another (default 0)")
    parser.add_argument("--result", help="the result JSON the runs are added to (created when missing)")
    args = parser.parse_args(argv)
    known = {r.name: r for r in (*reference_runs(), *quick_runs())}
    if args.list or not args.run:
        for r in known.values():
            print(f"{r.name}: {r.config} ({r.env_id or 'its env'}, {r.backend}{', ' if r.args else ''}"
                  f"{' '.join(r.args)}): return {r.stop.target_return:g} within {r.stop.frames:,} frames and "
                  f"{r.stop.seconds / 60:g} min; target: {r.target_source}")
        return 0
    unknown = [n for n in args.run if n not in known]
    if unknown or not args.result:
        parser.error(f"unknown run(s) {', '.join(unknown)} (--list names them)" if unknown else "--result PATH is needed")
    path = Path(args.result)
    previous = json.loads(path.read_text()) if path.exists() else None
    result = measure([known[n] for n in args.run], args.seed, previous=previous)
    path.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
