"""Interleaved A/B of Ape-X throughput between two versions of the code: a git ref against the working tree.

Each round runs the baseline (``--old``, a git ref exported with ``git archive`` into a temporary folder) and
then the working tree once each, every run the ``apex`` side of `spacegraph.reports.apex_throughput` in a
fresh child process of its own tree (a local Ray instance; ``--seconds`` of measurement after the warm-up and
the first updates). A shared machine's load drifts between rounds more than within one, so the figure to
trust is the working tree's frames/s over the baseline's in the same round (paired), as a median over the
rounds::

    python -m spacegraph.reports.apex_ab --old 483895a --env pong --workers 2 --rounds 3 --seconds 20

prints one JSON line per run and then the summary (per-round ratios and their medians, for frames/s,
learner updates/s and CPU seconds per frame); ``--out FILE`` also writes the whole result as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

from spacegraph.reports.apex_throughput import REPO, THREAD_ENV
from spacegraph.reports.apex_throughput_measure import CONFIGS


def export_ref(ref: str, into: Path, repo: Path = REPO) -> Path:
    """The tree of git ref ``ref`` of the repository ``repo`` (default: the checkout this package runs from),
    exported (``git archive``) into the folder ``into``.

    Raises:
        ValueError: naming the ref when git cannot export it (also when ``repo`` is no git checkout, e.g. an
            installed package).
    """
    archive = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", ref], capture_output=True)
    if archive.returncode != 0:
        raise ValueError(f"apex_ab: --old {ref!r} is not a git ref of {repo}: "
                         f"{archive.stderr.decode(errors='replace').strip()}")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def run_tree(tree: Path, env: str, workers: int, learning: bool, seconds: float, timeout: float) -> dict[str, Any]:
    """One ``apex`` point measured by the code in ``tree`` (a child process with ``tree`` first on its path)."""
    with tempfile.TemporaryDirectory(prefix="apex_ab_") as tmp:
        out = Path(tmp) / "point.json"
        cmd = [sys.executable, "-m", "spacegraph.reports.apex_throughput", "--one", "apex", "--env", env,
               "--workers", str(workers), "--learning", str(int(learning)), "--seconds", str(seconds),
               "--point-out", str(out)]
        env_vars = dict(os.environ, **THREAD_ENV, PYTHONPATH=str(tree))
        try:
            run = subprocess.run(cmd, cwd=tree, env=env_vars, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"skipped": f"did not finish within {timeout:.0f} s"}
        if run.returncode != 0 or not out.exists():
            tail = (run.stdout + run.stderr).strip().splitlines()[-6:]
            return {"skipped": f"exit {run.returncode}: " + " | ".join(tail)}
        return json.loads(out.read_text())


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-round ratios new/old of frames/s, updates/s and CPU seconds per frame, and their medians."""
    rounds: dict[int, dict[str, dict]] = {}
    for run in runs:
        rounds.setdefault(run["round"], {})[run["side"]] = run["point"]
    out: dict[str, Any] = {"rounds": []}
    for r, sides in sorted(rounds.items()):
        old, new = sides.get("old", {}), sides.get("new", {})
        row: dict[str, Any] = {"round": r}
        for key in ("frames_per_s", "updates_per_s"):
            if old.get(key) and new.get(key) is not None:
                row[key] = new[key] / old[key]
        if old.get("frames") and new.get("frames") and old.get("cpu_seconds"):
            row["cpu_per_frame"] = (new["cpu_seconds"] / new["frames"]) / (old["cpu_seconds"] / old["frames"])
        out["rounds"].append(row)
    for key in ("frames_per_s", "updates_per_s", "cpu_per_frame"):
        values = [row[key] for row in out["rounds"] if key in row]
        out[f"median_{key}_ratio"] = statistics.median(values) if values else None
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module's docstring)."""
    parser = argparse.ArgumentParser(prog="python -m spacegraph.reports.apex_ab",
                                     description="Interleaved A/B of Ape-X throughput: a git ref (--old) against "
                                                 "the working tree, round after round; prints ratios new/old.")
    parser.add_argument("--old", required=True, help="git ref of the baseline (exported with git archive)")
    parser.add_argument("--env", choices=sorted(CONFIGS), default="pong", help="default: pong")
    parser.add_argument("--workers", type=int, default=2, help="Ape-X workers (default 2)")
    parser.add_argument("--learning", type=int, choices=(0, 1), default=1, help="1 (default): the learner learns")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of (old, new) (default 3)")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per run (default 20)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds before a run is killed (default 300)")
    parser.add_argument("--out", help="also write the runs and the summary to this JSON file")
    args = parser.parse_args(argv)
    for name in ("workers", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be a positive int; got {getattr(args, name)}")
    if args.seconds <= 0 or args.timeout <= 0:
        parser.error(f"--seconds and --timeout must be positive; got {args.seconds} and {args.timeout}")
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="apex_ab_old_") as tmp:
        try:
            old_tree = export_ref(args.old, Path(tmp))
        except ValueError as exc:
            parser.error(str(exc))
        for r in range(args.rounds):
            for side, tree in (("old", old_tree), ("new", REPO)):
                point = run_tree(tree, args.env, args.workers, bool(args.learning), args.seconds, args.timeout)
                runs.append({"round": r, "side": side, "point": point})
                print(json.dumps({"round": r, "side": side, **{k: point.get(k) for k in (
                    "frames_per_s", "updates_per_s", "cpu_seconds", "seconds", "skipped")}}, default=float), flush=True)
    result = {"old": args.old, "env": args.env, "workers": args.workers, "learning": bool(args.learning),
              "seconds": args.seconds, "runs": runs, "summary": summary(runs)}
    print(json.dumps(result["summary"], indent=1, default=float))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
