"""Ape-X throughput on Ray (RLgraph Fig. 6 on one machine): env frames/s for 1, 2, 4 workers on CartPole and
Pong, learning off and on, beside RLlib's DQN at the same number of env runners and raw stepping of the same
environment vectors, with CPU utilisation; and a scaling model projecting 16-256 workers from the measured
per-worker, per-shard and learner costs.

Ours runs twice with learning on: with the learner free-running (the paper's Ape-X) and throttled to the
replay ratio of RLlib's DQN at the same workers (``apex_rr``: one update per ``n_step x envs x workers`` env
steps, as RLlib's default ``training_step`` makes), so that frames/s are compared at equal learning work too.

Every point runs in a fresh subprocess (``--one``), the sides of one point back to back (raw, ours, RLlib),
so that load from elsewhere on the machine falls on all of them alike. Run it with the peers environment
(RLlib installed: ``pip install -e '.[peers]'``; our side runs there too, from the same checkout)::

    nice -n 5 python -m spacegraph.reports.apex_throughput --seconds 15

which writes ``reports/apex_throughput.{md,json,png}``; ``--rewrite reports/apex_throughput.json`` rebuilds
the Markdown and the plot from the data.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from harness.measure.files import write_report
from harness.measure.machine import environment
from spacegraph.reports import read_result_json
from spacegraph.reports.apex_throughput_measure import CONFIGS, MATCHED_SIDE, SIDES, measure_point
from spacegraph.reports.apex_throughput_report import baselines, markdown, plot, ratios, scaling_model

REPO = Path(__file__).resolve().parents[2]
STEM = "apex_throughput"
THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}


def run_point(side: str, env: str, workers: int, learning: bool, seconds: float, timeout: float) -> dict[str, Any]:
    """`measure_point` in a fresh subprocess (this interpreter), killed after ``timeout`` seconds."""
    with tempfile.TemporaryDirectory(prefix="apex_throughput_") as tmp:
        out = Path(tmp) / "point.json"
        cmd = [sys.executable, "-m", "spacegraph.reports.apex_throughput", "--one", side, "--env", env,
               "--workers", str(workers), "--learning", str(int(learning)), "--seconds", str(seconds),
               "--point-out", str(out)]
        env_vars = dict(os.environ, **THREAD_ENV, PYTHONPATH=str(REPO))
        try:
            run = subprocess.run(cmd, cwd=REPO, env=env_vars, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"side": side, "env": env, "workers": workers, "learning": learning,
                    "skipped": f"did not finish within {timeout:.0f} s"}
        if run.returncode != 0 or not out.exists():
            tail = (run.stdout + run.stderr).strip().splitlines()[-6:]
            return {"side": side, "env": env, "workers": workers, "learning": learning,
                    "skipped": f"exit {run.returncode}: " + " | ".join(tail)}
        return json.loads(out.read_text())


def run_all(envs: Sequence[str], workers: Sequence[int], seconds: float, sides: Sequence[str] = SIDES,
            log: Any = sys.stderr) -> list[dict[str, Any]]:
    """Every point, the sides of each back to back; raw stepping once per (env, workers)."""
    points = []
    for env in envs:
        for n in workers:
            for learning in (False, True):
                for side in sides:
                    if (side == "raw" and learning) or (side == MATCHED_SIDE and not learning):
                        continue
                    start = time.perf_counter()
                    p = run_point(side, env, n, learning, seconds, timeout=seconds + 420)
                    points.append(p)
                    rate = p.get("frames_per_s")
                    log.write(f"{env:8s} {side:7s} workers {n} learning {'on ' if learning else 'off'} "
                              f"{f'{rate:10,.0f} frames/s' if rate else p.get('skipped', '')[:120]} "
                              f"({time.perf_counter() - start:.0f} s)\n")
                    log.flush()
    return points


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m spacegraph.reports.apex_throughput", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", default="cartpole,pong", help="comma-separated: cartpole, pong")
    parser.add_argument("--workers", default="1,2,4", help="comma-separated worker counts")
    parser.add_argument("--seconds", type=float, default=15.0, help="measured seconds per point (after warm-up)")
    parser.add_argument("--sides", default=",".join(SIDES), help=f"comma-separated: {', '.join(SIDES)}")
    parser.add_argument("--out", default=str(REPO / "reports"), help="folder of the report files")
    parser.add_argument("--rewrite", metavar="JSON", help="rebuild the Markdown and plot from a saved result")
    parser.add_argument("--one", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--env", choices=sorted(CONFIGS), help=argparse.SUPPRESS)
    parser.add_argument("--learning", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--point-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        point = measure_point(args.one, args.env, int(args.workers), bool(args.learning), args.seconds)
        Path(args.point_out).write_text(json.dumps(point, default=float))
        return 0
    if args.rewrite:
        result = read_result_json(args.rewrite, "--rewrite")
    else:
        envs = [e for e in args.envs.split(",") if e]
        workers = [int(w) for w in args.workers.split(",") if w]
        load, start = os.getloadavg(), time.perf_counter()
        points = run_all(envs, workers, args.seconds, [s for s in args.sides.split(",") if s])
        result = {"points": points, "seconds_per_point": args.seconds,
                  "environment": environment(load, time.perf_counter() - start),
                  "command": "nice -n 5 python -m spacegraph.reports.apex_throughput "
                             + " ".join(argv if argv is not None else sys.argv[1:])}
    result["ratios"] = ratios(result["points"])
    result["scaling"] = {env: scaling_model(result["points"], env) for env in ("pong", "cartpole")}
    result["baselines"] = baselines()
    paths = write_report(result, args.out, STEM, markdown, plot)
    print("\n".join(str(p) for p in paths.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
