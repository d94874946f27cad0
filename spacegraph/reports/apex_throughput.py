"""Ape-X throughput on Ray (RLgraph Fig. 6 on one machine): env frames/s for 1, 2, 4 workers on CartPole and
Pong, learning off and on, beside RLlib's DQN at the same number of env runners and raw stepping of the same
environment vectors, with CPU utilisation; and a scaling model projecting 16-256 workers from the measured
per-worker, per-shard and learner costs.

Ours runs twice with learning on: with the learner free-running (the paper's Ape-X) and throttled to the
replay ratio of RLlib's DQN at the same workers (``apex_rr``: one update per ``n_step x envs x workers`` env
steps, as RLlib's default ``training_step`` makes), so that frames/s are compared at equal learning work too.

Every point runs in a fresh subprocess (`child_main`), the sides of one point back to back (raw, ours,
RLlib), so that load from elsewhere on the machine falls on all of them alike. RLlib's side needs the peers
extra (``pip install -e '.[peers]'``). The figure is the ``apex`` scenario of ``spacegraph report``.
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

from harness.measure.machine import environment
from spacegraph.reports.apex_throughput_measure import CONFIGS, MATCHED_SIDE, SIDES, measure_point

REPO = Path(__file__).resolve().parents[2]
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


def measure(envs: Sequence[str] = ("cartpole", "pong"), workers: Sequence[int] = (1, 2, 4), seconds: float = 15.0,
            sides: Sequence[str] = SIDES, log: Any = sys.stderr) -> dict[str, Any]:
    """Every point (`run_all`), with the ratios and the scaling model of the result.

    Raises:
        ValueError: naming the argument for an unknown env or side, or no worker count.
    """
    bad = [e for e in envs if e not in CONFIGS] + [s for s in sides if s not in SIDES]
    if bad or not envs or not workers or not sides:
        raise ValueError(f"apex_throughput.measure: envs must be among {sorted(CONFIGS)}, sides among {SIDES}, "
                         f"workers not empty; got {list(envs)}, {list(sides)}, {list(workers)}")
    load, start = os.getloadavg(), time.perf_counter()
    points = run_all(envs, workers, seconds, sides, log)
    return analysed({"points": points, "seconds_per_point": seconds,
                     "environment": environment(load, time.perf_counter() - start)})


def analysed(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` with its ``ratios`` and ``scaling`` (per env) computed from its points."""
    return {**result, "ratios": ratios(result["points"]),
            "scaling": {env: scaling_model(result["points"], env) for env in ("pong", "cartpole")}}


def child_main(argv: Sequence[str] | None = None) -> int:
    """One point in this process (the child of `run_point`), written to ``--point-out``; not a user command."""
    parser = argparse.ArgumentParser(description="one Ape-X throughput point (the child process of run_point)")
    parser.add_argument("--one", choices=SIDES, required=True)
    parser.add_argument("--env", choices=sorted(CONFIGS), required=True)
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--learning", type=int, default=0)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--point-out", required=True)
    args = parser.parse_args(argv)
    point = measure_point(args.one, args.env, args.workers, bool(args.learning), args.seconds)
    Path(args.point_out).write_text(json.dumps(point, default=float))
    return 0


# ---- analysis: ratios to RLlib and raw stepping, the target's verdicts, the scaling model -----------------------
PROJECTED_WORKERS = (16, 32, 64, 128, 256)
#: The paper's setting for Fig. 6: 4 replay memories, 4 envs per worker, one CPU per worker.
MODEL_SHARDS = 4
TARGET_VS_RLLIB = 3.0


def _find(points: list[dict], side: str, env: str, workers: int, learning: bool) -> dict | None:
    return next((p for p in points if p["side"] == side and p["env"] == env and p["workers"] == workers
                 and bool(p["learning"]) == learning and "skipped" not in p), None)


OURS = ("apex", "apex_rr")
SIDE_NAMES = {"raw": "raw stepping", "apex": "ours (Ape-X on Ray)",
              "apex_rr": "ours, learner at RLlib's replay ratio", "rllib": "RLlib DQN"}


def ratios(points: list[dict]) -> list[dict[str, Any]]:
    """Ours / RLlib and ours / raw frames/s at each (side of ours, env, workers, learning)."""
    rows = []
    for p in points:
        if p["side"] not in OURS or "skipped" in p:
            continue
        rllib = _find(points, "rllib", p["env"], p["workers"], p["learning"])
        raw = _find(points, "raw", p["env"], p["workers"], False)
        rows.append({"side": p["side"], "env": p["env"], "workers": p["workers"], "learning": p["learning"],
                     "vs_rllib": p["frames_per_s"] / rllib["frames_per_s"] if rllib else None,
                     "of_raw": p["frames_per_s"] / raw["frames_per_s"] if raw else None})
    return rows


def verdicts(rows: list[dict[str, Any]], env: str) -> list[str]:
    """The target's verdict on ``env`` for each side of ours that has learning-on ratios."""
    out = []
    for side in OURS:
        on = [r["vs_rllib"] for r in rows if r["env"] == env and r.get("side", "apex") == side and r["learning"]
              and r["vs_rllib"] is not None]
        if on:
            verdict = "met" if min(on) >= TARGET_VS_RLLIB else "not met"
            out.append(f"Target (at least {TARGET_VS_RLLIB:g}x RLlib's frames/s at equal workers with learning on), "
                       f"{SIDE_NAMES[side]}: {verdict} on {env} (lowest ratio {min(on):.2f}x).")
    return out


def scaling_model(points: list[dict], env: str = "pong") -> dict[str, Any] | None:
    """Projected frames/s for `PROJECTED_WORKERS` from the costs measured at the most workers on ``env``.

    Costs (CPU-seconds): ``c_w`` per env step in a worker, ``c_add`` per transition a shard adds (learning
    off), ``c_sample`` per record a shard hands the learner, ``c_route`` per env step on the driver
    (learning off), ``c_update`` per learner update on the driver. With W workers on a core each, M shards
    on a core each and the driver on one core running a learner at its measured rate U::

        steps/s = min(W / c_w, (M - U B c_sample) / c_add, (1 - U c_update) / c_route)
    """
    measured = [p for p in points if p["side"] == "apex" and p["env"] == env and "skipped" not in p
                and "role_cpu_seconds" in p]
    if not measured:
        return None
    n = max(p["workers"] for p in measured)
    off, on = _find(measured, "apex", env, n, False), _find(measured, "apex", env, n, True)
    if off is None or on is None or not on.get("updates"):
        return None
    c_w = off["role_cpu_seconds"]["workers"] / off["steps"]
    c_add = off["role_cpu_seconds"]["shards"] / off["steps"]
    c_sample = max(0.0, on["role_cpu_seconds"]["shards"] - c_add * on["steps"]) / max(on.get("sampled", 0), 1)
    c_route = off["role_cpu_seconds"]["driver"] / off["steps"]
    c_update = max(0.0, on["role_cpu_seconds"]["driver"] - c_route * on["steps"]) / on["updates"]
    u, b, fps = on["updates_per_s"], on["batch_size"], on["frames_per_step"]
    rows = []
    for w in PROJECTED_WORKERS:
        limits = {"workers": w / c_w, "shards": max(MODEL_SHARDS - u * b * c_sample, 0.0) / c_add,
                  "driver": max(1.0 - u * c_update, 0.0) / c_route}
        bound = min(limits, key=limits.get)
        rows.append({"workers": w, "frames_per_s": fps * limits[bound], "bound": bound,
                     **{f"{k}_limit": fps * v for k, v in limits.items()}})
    return {"env": env, "from_workers": n, "costs_ms": {"worker_per_step": 1e3 * c_w, "shard_per_add": 1e3 * c_add,
                                                        "shard_per_sampled_record": 1e3 * c_sample,
                                                        "driver_per_step": 1e3 * c_route,
                                                        "driver_per_update": 1e3 * c_update},
            "updates_per_s": u, "batch_size": b, "shards": MODEL_SHARDS, "rows": rows}


if __name__ == "__main__":
    raise SystemExit(child_main())
