"""The learning regression suite: reference runs with stop criteria, and time- and frames-to-target.

A `ReferenceRun` (`spacegraph.reports.learning_long_runs`) is one ``spacegraph train`` command (a config, a backend,
an executor) with `StopCriteria`: the target (the mean return of the last 100 training episodes, as the published
MinAtar curves and RLlib's release tests count it), a frame budget and a wall-time budget. `run_reference`
starts the command in a subprocess with ``--steps`` (the frame budget in env steps) and ``--max-seconds`` (the
time budget), reads the run directory's ``metrics.jsonl`` as rows arrive (one per evaluation: frames, wall
seconds, last-100 training return) and stops the run with Ctrl-C (SIGINT: it checkpoints and ends) at the first
row that reaches the target. It records frames- and time-to-target, or "not reached" with where the run stood,
and the curve; each run keeps its date, commit and machine, so the seeds of a long run can be spread over
sessions and sit in one result.

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
from spacegraph.reports.learning_long_runs import (ReferenceRun, StopCriteria, quick_runs, reference_runs,
                                                   with_overrides)

#: What a run's thread pools are limited to (as the other learning reports: one framework thread per process),
#: and TensorFlow's oneDNN on (its default) whatever the shell says: with it off the TF learner's Pong update
#: costs 1.85x the CPU (reports/roofline).
THREAD_ENV = {"OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
              "TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "1"}


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
    """A curve point from a metrics row: frames, wall and training seconds, last-100 return, episodes, and the
    learning diagnostics (`LEARNER_COLUMNS`: means since the row before) the row holds."""
    from reference_agents.training.files import LEARNER_COLUMNS

    ret = row.get("train_return_100")
    out = {"frames": int(row["frames"]), "seconds": round(float(row["wall_s"]), 2),
           "train_seconds": round(float(row["train_s"]), 2), "episodes": int(row["episodes"]),
           "return_100": None if ret is None or not math.isfinite(float(ret)) else round(float(ret), 3)}
    out.update({k: round(float(row[k]), 4) for k in LEARNER_COLUMNS if row.get(k) is not None})
    return out


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


def set_key(data: dict[str, Any], key: str, value: Any) -> None:
    """Sets the dotted ``key`` (``loss.entropy_cost``) of a config dict to ``value``, making the last level.

    Raises:
        ValueError: naming the key when a level above the last is missing or not a mapping.
    """
    *parents, leaf = key.split(".")
    node = data
    for i, part in enumerate(parents):
        if not isinstance(node.get(part), dict):
            raise ValueError(f"config key {key}: {'.'.join(parents[:i + 1])} is not a section of the config "
                             f"(got {node.get(part)!r})")
        node = node[part]
    node[leaf] = value


def run_config(run: ReferenceRun, folder: Path) -> tuple[str, dict[str, Any]]:
    """The config ``run`` trains (a copy with ``env.id`` and the run's overrides set when it has them) and its
    values (the record keeps them: a commit marked ``+dirty`` does not say what was trained)."""
    from reference_agents.agents import resolve_config_path
    from reference_agents.agents.config import read_config_file

    path = resolve_config_path(run.config)
    data = read_config_file(path)
    if run.env_id is None and not run.overrides:
        return path, data
    if run.env_id is not None:
        data["env"] = {**data["env"], "id": run.env_id}
    for key, value in run.overrides:
        set_key(data, key, value)
    if run.overrides:
        from reference_agents.agents import load_config

        load_config(data)   # a ConfigError naming the key now, not a failed run later
    copy = folder / f"{Path(path).stem}_{(run.env_id or 'variant').replace('/', '_')}.yaml"
    copy.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(copy), data


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
        config, values = run_config(run, base)
        env = values["env"]
        probe = make_env(env["id"], atari=bool(env.get("atari", False)), **(env.get("kwargs") or {}))
        per_step = frames_per_step(probe)
        probe.close()
        out = base / f"{run.name}-seed{seed}"
        steps = max(1, math.ceil(run.stop.frames / per_step))
        cmd = train_command(run, seed, config, out, steps)
        record = {"name": run.name, "figure": run.figure, "seed": int(seed), "config": run.config,
                  "env_id": run.env_id or env["id"], "backend": run.backend, "args": list(run.args),
                  "stop": dataclasses.asdict(run.stop), "target_source": run.target_source,
                  "config_values": values, "overrides": dict(run.overrides), "frames_per_step": per_step,
                  "measured": measured_on()}
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


def add_record(result: dict[str, Any], run: ReferenceRun, record: dict[str, Any],
               path: str | Path | None = None) -> dict[str, Any]:
    """Adds ``record`` (a run of ``run``) and ``run``'s criteria to ``result``; with ``path``, writes the result
    there at once (through a temporary file: a crash later keeps every run finished before it)."""
    result.setdefault("runs", []).append(record)
    result.setdefault("criteria", {})[run.name] = {**dataclasses.asdict(run.stop), "target_source": run.target_source}
    if path is not None:
        _write(result, path)
    return result


def _write(result: dict[str, Any], path: str | Path) -> None:
    tmp = Path(f"{path}.tmp")
    tmp.write_text(json.dumps(result, indent=1))
    os.replace(tmp, path)


def peer_run(record_path: str | Path, side: str, figure: str, label: str, every_s: float = 60.0) -> dict[str, Any]:
    """A peer's learning run (RLlib's, say) to draw beside a figure's reference runs, read from a record of
    `spacegraph.reports.impala_learning` (``sides`` -> ``{side: {"points": [{"seconds", "frames",
    "mean_return_100", "episodes"}], "measured"}}``, with the record's ``date``/``commit``/``machine``), one point
    every ``every_s`` seconds of its wall time.

    Raises:
        ValueError: naming the file and what is missing when it is not such a record or has no ``side``.
    """
    record_path = Path(record_path)
    try:
        record = json.loads(record_path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{record_path}: cannot read it as a learning record ({type(exc).__name__}: {exc})") from None
    sides = record.get("sides") if isinstance(record, dict) else None
    if not isinstance(sides, dict) or side not in sides or not isinstance(sides[side].get("points"), list):
        raise ValueError(f"{record_path}: expected a learning record with sides.{side}.points (an "
                         f"impala_learning record); its sides: {sorted(sides) if isinstance(sides, dict) else None}")
    points, next_s = [], 0.0
    for p in sides[side]["points"]:
        if p.get("mean_return_100") is not None and float(p["seconds"]) >= next_s:
            points.append({"frames": int(p["frames"]), "seconds": round(float(p["seconds"]), 2),
                           "episodes": int(p["episodes"]), "return_100": round(float(p["mean_return_100"]), 3)})
            next_s = float(p["seconds"]) + every_s
    if not points:
        raise ValueError(f"{record_path}: sides.{side} has no point with a last-100 mean")
    measured = {"date": str(record.get("date", "")), "commit": str(record.get("commit", "")),
                "machine": str(record.get("machine", "")), **(sides[side].get("measured") or {})}
    return {"figure": figure, "label": label, "side": side, "source": str(record_path), "measured": measured,
            "points": points}


def add_peer(result: dict[str, Any], peer: dict[str, Any], path: str | Path | None = None) -> dict[str, Any]:
    """Adds a `peer_run` to ``result`` (replacing one with the same figure and label); with ``path``, writes it."""
    peers = [p for p in result.get("peers", []) if (p["figure"], p["label"]) != (peer["figure"], peer["label"])]
    result["peers"] = [*peers, peer]
    if path is not None:
        _write(result, path)
    return result


def add_note(result: dict[str, Any], figure: str, text: str, path: str | Path | None = None) -> dict[str, Any]:
    """Adds a note written by hand after a run to ``result``, drawn on ``figure`` only (a bare string in
    ``notes``, as older results hold, is drawn on every figure); with ``path``, writes it.

    Raises:
        ValueError: for an empty text, or a figure none of the result's runs is drawn on (the report draws a
            figure for its runs only, peers beside them), naming the figures there are.
    """
    drawn = sorted({r["figure"] for r in result.get("runs", [])})
    if figure not in drawn:
        raise ValueError(f"--add-note: no run of the result is drawn on figure {figure!r}; its figures: "
                         f"{', '.join(drawn) or 'none'}")
    if not text.strip():
        raise ValueError("--add-note: the note's text is empty")
    result.setdefault("notes", []).append({"figures": [figure], "text": text})
    if path is not None:
        _write(result, path)
    return result


def load_result(path: str | Path) -> dict[str, Any]:
    """The result saved at ``path`` ({} when there is none yet).

    Raises:
        ValueError: naming the file when it is not a result of this module (a JSON object with a runs list).
    """
    path = Path(path)
    if not path.exists():
        return {}
    try:
        result = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{path}: cannot read it as a learning_long result ({type(exc).__name__}: {exc})") from None
    if not isinstance(result, dict) or not isinstance(result.get("runs", []), list):
        raise ValueError(f"{path}: expected a learning_long result (a JSON object with a 'runs' list)")
    return result


def measure(runs: Sequence[ReferenceRun], seeds: Sequence[int], log: Callable[[str], Any] | None = print,
            result_path: str | Path | None = None) -> dict[str, Any]:
    """Runs every run on every seed, one after another (seed 0 of each run, then seed 1, ...).

    Args:
        runs: the reference runs.
        seeds: their seeds.
        log: called with `run_line` after each run (None: quiet).
        result_path: a result file: its runs (measured before, in other sessions) are kept first, and it is
            rewritten after every run (`add_record`).

    Returns:
        ``{"runs": [run_reference's records], "criteria": {name: stop criteria and target source}}``.
    """
    if not seeds:
        raise ValueError("measure: give at least one seed")
    result = load_result(result_path) if result_path is not None else {}
    result.setdefault("runs", [])
    result.setdefault("criteria", {})
    for seed in seeds:
        for run in runs:
            record = run_reference(run, seed)
            add_record(result, run, record, result_path)
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
    where = ("no point" if last is None
             else f"{last['return_100']} at {last['frames']:,} frames, {last['seconds']:.0f} s")
    return f"{head}: not reached ({record['stop_reason']}); stood at {where}"


def main(argv: list[str] | None = None) -> int:
    """``python -m spacegraph.reports.learning_long``: list the runs, or run some and add them to a result file."""
    parser = argparse.ArgumentParser(prog="python -m spacegraph.reports.learning_long",
                                     description="reference learning runs with stop criteria (docs/testing.md)")
    parser.add_argument("--list", action="store_true", help="list the runs and their stop criteria")
    parser.add_argument("--run", nargs="+", metavar="NAME", help="runs to run (--list names them)")
    parser.add_argument("--seed", nargs="+", type=int, default=[0], help="seeds, one after another (default 0)")
    parser.add_argument("--result", help="the result JSON the runs are added to (created when missing)")
    parser.add_argument("--minatar-frames", type=int, default=5_000_000, metavar="N",
                        help="the MinAtar frame budget, 1M to 5M (default 5M): the target is the published curve there")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="an A/B variant: set the config's dotted KEY to VALUE (YAML) for the runs, recorded as "
                             "NAME[KEY=VALUE] beside the reference run (repeatable)")
    parser.add_argument("--add-peer", nargs=4, metavar=("RECORD", "SIDE", "FIGURE", "LABEL"),
                        help="add a peer's run (SIDE of an impala_learning RECORD, e.g. rllib) to FIGURE's curves "
                             "in --result, as LABEL")
    parser.add_argument("--add-note", nargs=2, metavar=("FIGURE", "TEXT"),
                        help="add a note written by hand (what ran beside a run, why it was stopped) to FIGURE "
                             "(e.g. learning_long_pong) in --result")
    args = parser.parse_args(argv)
    edits = (("--add-note", args.add_note, lambda: add_note(load_result(args.result), *args.add_note,
                                                            path=args.result)),
             ("--add-peer", args.add_peer, lambda: add_peer(load_result(args.result), peer_run(*args.add_peer),
                                                            args.result)))
    for flag, given, edit in edits:          # an edit of the result file, not a run
        if given:
            if not args.result:
                parser.error(f"{flag} needs --result PATH")
            try:
                edit()
            except ValueError as exc:
                print(f"learning_long: {exc}", file=sys.stderr)
                return 2
            return 0
    try:
        known = {r.name: r for r in (*reference_runs(frames=args.minatar_frames), *quick_runs())}
    except ValueError as exc:
        parser.error(f"--minatar-frames {args.minatar_frames}: {exc}")
    if args.list or not args.run:
        for r in known.values():
            print(f"{r.name}: {r.config} ({r.env_id or 'its env'}, {r.backend}{', ' if r.args else ''}"
                  f"{' '.join(r.args)}): return {r.stop.target_return:g} within {r.stop.frames:,} frames and "
                  f"{r.stop.seconds / 60:g} min; target: {r.target_source}")
        return 0
    unknown = [n for n in args.run if n not in known]
    if unknown or not args.result:
        parser.error(f"unknown run(s) {', '.join(unknown)} (--list names them)" if unknown
                     else "--result PATH is needed")
    try:
        overrides = []
        for item in args.set:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise ValueError(f"--set {item}: expected KEY=VALUE (a dotted config key and a YAML value)")
            overrides.append((key, yaml.safe_load(value)))
        measure([with_overrides(known[n], overrides) for n in args.run], args.seed, result_path=args.result)
    except ValueError as exc:
        print(f"learning_long: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
