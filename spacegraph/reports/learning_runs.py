"""DQN learning against RLlib: running the sides, each run in a fresh subprocess, interleaved over seeds.

Each run is a fresh subprocess (one side, one seed) with one framework thread
(``OMP_NUM_THREADS=1``, ``torch.set_num_threads(1)``, TensorFlow's pools 1), bounded by an
env-step and a wall-time budget; runs are interleaved (seed 0 of every side, then seed 1, ...)
so that load from other processes on a shared machine hits all sides alike, and the 1-minute
load average is recorded at every evaluation.

``python -m spacegraph.reports.learning_runs --one SIDE --seed N --result PATH ...`` is one run's child
process (`child_main`); the figure is the ``learning`` scenario of ``spacegraph report``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from harness.measure.machine import environment, uncommitted
from spacegraph.reports.learning_criterion import (
    AGENT_CONFIG, ENV_ID, REPO, SIDES, Budget, Criterion, check_side, evaluate)
from spacegraph.reports.learning_ratios import compare
from spacegraph.reports.learning_sides import (
    RLLIB_SETTINGS, THREAD_ENV, OursSide, RLlibSide, limit_threads, rllib_missing)


def run_one(side: str, seed: int, criterion: Criterion = Criterion(), budget: Budget = Budget()) -> dict[str, Any]:
    """Builds one side from scratch (one framework thread) and runs `train_until_solved` on it.

    Args:
        side: one of `SIDES`.
        seed: the run's seed (agent / RLlib seed; evaluation episodes from `eval_seed`).
        criterion: when the run is solved.
        budget: when an unsolved run stops.

    Returns:
        `train_until_solved`'s result with ``"side"``, ``"seed"``, ``"setup_s"``, ``"load_start"``,
        ``"load_end"``, ``"threads"`` (thread pools set before building), ``"threads_after"`` (torch's
        after training) and, for RLlib, ``"settings"`` (`RLlibSide.describe`).

    Raises:
        ValueError: for an unknown side.
        ImportError: for ``rllib`` without ``ray[rllib]``.
    """
    check_side(side)
    threads = limit_threads(side)
    load_start = os.getloadavg()
    t0 = time.perf_counter()
    runner: Any = (RLlibSide(seed, criterion.eval_every) if side == "rllib"
                   else OursSide(side.split("_", 1)[1], seed, criterion.eval_every))
    setup_s = time.perf_counter() - t0
    try:
        settings = {"settings": runner.describe()} if side == "rllib" else {}
        run = train_until_solved(runner, seed, criterion, budget)
    finally:
        runner.close()
    import torch

    return {"side": side, "seed": int(seed), **run, "setup_s": setup_s, "load_start": list(load_start),
            "load_end": list(os.getloadavg()), "threads": threads, "threads_after": {"torch": torch.get_num_threads()},
            **settings}


def train_until_solved(runner: Any, seed: int, criterion: Criterion, budget: Budget) -> dict[str, Any]:
    """Alternates ``runner.train_chunk()`` and `evaluate` of ``runner.act`` until solved or out of budget.

    Args:
        runner: has ``train_chunk() -> env steps in all`` and ``act(obs) -> greedy actions``.
        seed: the run's seed (evaluation episodes from `eval_seed`).
        criterion: when the run is solved.
        budget: when an unsolved run stops (after the chunk and evaluation that cross it).

    Returns:
        ``{"solved", "solved_at", "train_s_to_solve", "train_eval_s_to_solve", "stop_reason" ("solved" |
        "env_steps" | "seconds"), "env_steps", "train_s", "eval_s",
        "curve": [{"env_steps", "train_s", "eval_s", "screen_mean", "full_mean", "load1"}]}``;
        the ``*_to_solve`` entries are None when unsolved.
    """
    out: dict[str, Any] = {"solved": False, "solved_at": None, "train_s_to_solve": None,
                           "train_eval_s_to_solve": None, "stop_reason": None, "env_steps": 0, "train_s": 0.0,
                           "eval_s": 0.0, "curve": []}
    while True:
        t = time.perf_counter()
        out["env_steps"] = int(runner.train_chunk())
        out["train_s"] += time.perf_counter() - t
        ev = evaluate(runner.act, criterion, seed)
        out["eval_s"] += ev["seconds"]
        out["curve"].append({"env_steps": out["env_steps"], "train_s": out["train_s"], "eval_s": out["eval_s"],
                             "screen_mean": ev["screen_mean"], "full_mean": ev["full_mean"],
                             "load1": os.getloadavg()[0]})
        if ev["full_mean"] is not None and ev["full_mean"] >= criterion.min_return:
            out.update(solved=True, solved_at=out["env_steps"], train_s_to_solve=out["train_s"],
                       train_eval_s_to_solve=out["train_s"] + out["eval_s"], stop_reason="solved")
            return out
        if out["env_steps"] >= budget.env_steps:
            out["stop_reason"] = "env_steps"
            return out
        if out["train_s"] + out["eval_s"] >= budget.seconds:
            out["stop_reason"] = "seconds"
            return out


def run_isolated(side: str, seed: int, criterion: Criterion, budget: Budget) -> dict[str, Any]:
    """`run_one` in a fresh subprocess with `THREAD_ENV`, killed ``budget.grace_seconds`` after its budget.

    The child gets SIGTERM first (it shuts its Ray instance down on the way out), SIGKILL 30 s later.

    Returns:
        `run_one`'s result, or ``{"side", "seed", "error": why, "log_tail"}`` when the child failed.
    """
    check_side(side)
    env = {**os.environ, **THREAD_ENV, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                                                   os.environ.get("PYTHONPATH")]))}
    with tempfile.TemporaryDirectory(prefix="learning_run_") as tmp:
        result_path, log_path = Path(tmp) / "result.json", Path(tmp) / "log.txt"
        cmd = [sys.executable, "-m", "spacegraph.reports.learning_runs", "--one", side, "--seed", str(seed),
               "--result", str(result_path), "--budget-steps", str(budget.env_steps),
               "--budget-seconds", str(budget.seconds), "--eval-every", str(criterion.eval_every),
               "--eval-episodes", str(criterion.eval_episodes), "--screen-episodes", str(criterion.screen_episodes),
               "--min-return", str(criterion.min_return)]
        timeout = budget.seconds + budget.grace_seconds
        with open(log_path, "w") as log:
            child = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
            try:
                rc = child.wait(timeout=timeout)
                error = None if rc == 0 else f"exited with status {rc}"
            except subprocess.TimeoutExpired:
                child.send_signal(signal.SIGTERM)
                try:
                    child.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(child.pid, signal.SIGKILL)
                    child.wait()
                error = f"killed after {timeout:.0f} s (budget {budget.seconds:g} s + {budget.grace_seconds:g} s)"
        if error is None and result_path.exists():
            return json.loads(result_path.read_text())
        tail = log_path.read_text(errors="replace")[-3000:]
        return {"side": side, "seed": int(seed), "error": error or "wrote no result", "log_tail": tail}


def measure(seeds: tuple[int, ...] = (0, 1), sides: tuple[str, ...] = SIDES, criterion: Criterion = Criterion(),
            budget: Budget = Budget(), isolated: bool = True, log: Callable[[str], Any] | None = print
            ) -> dict[str, Any]:
    """Runs every side on every seed, interleaved (seed 0 of each side, then seed 1, ...).

    Args:
        seeds: run seeds.
        sides: which of `SIDES` (``rllib`` is dropped with a note when RLlib is not installed).
        criterion: when a run is solved.
        budget: when an unsolved run stops.
        isolated: each run in its own subprocess (`run_isolated`); else in this process (`run_one`).
        log: called with a line after each run (None: quiet).

    Returns:
        ``{"config", "runs", "rllib_note", "our_config", "environment", "comparison"}`` (see `compare`).
    """
    for side in sides:
        check_side(side)
    if not seeds:
        raise ValueError("measure: give at least one seed")
    sides = tuple(sides)
    rllib_note = rllib_missing() if "rllib" in sides else "not requested"
    if rllib_note is not None and "rllib" in sides:
        sides = tuple(s for s in sides if s != "rllib")
    import yaml

    our_config, dirty = yaml.safe_load(AGENT_CONFIG.read_text()), uncommitted(("reference_agents", "harness"), REPO)
    load_before, start = os.getloadavg(), time.perf_counter()
    runs = []
    for seed in seeds:
        for side in sides:
            run = (run_isolated if isolated else run_one)(side, seed, criterion, budget)
            runs.append(run)
            if log is not None:
                log(run_line(run))
    result = {"config": {"env_id": ENV_ID, "seeds": list(seeds), "sides": list(sides),
                         "criterion": dataclasses.asdict(criterion), "budget": dataclasses.asdict(budget),
                         "isolated": isolated, "thread_env": THREAD_ENV, "agent_config": str(AGENT_CONFIG.relative_to(REPO)),
                         "rllib_settings": json.loads(json.dumps(RLLIB_SETTINGS))},
              "our_config": our_config, "uncommitted_at_start": dirty, "runs": runs, "rllib_note": rllib_note,
              "environment": environment(load_before, time.perf_counter() - start)}
    result["environment"]["gymnasium"] = __import__("gymnasium").__version__
    result["environment"]["ray"] = None if rllib_note else __import__("ray").__version__
    result["comparison"] = compare(result)
    return result


def run_line(run: dict[str, Any]) -> str:
    """One line about a run, for progress output."""
    if "error" in run:
        return f"{run['side']} seed {run['seed']}: FAILED ({run['error']})"
    what = (f"solved at {run['solved_at']} env steps, {run['train_s_to_solve']:.0f} s training"
            if run["solved"] else f"not solved ({run['stop_reason']}) after {run['env_steps']} env steps, "
                                  f"{run['train_s']:.0f} s training")
    return f"{run['side']} seed {run['seed']}: {what}; load {run['load_start'][0]:.1f}"


def child_main(argv: list[str] | None = None) -> None:
    """One run in this process (`run_one`), its result written to ``--result``; SIGTERM unwinds (Ray shuts down).

    The child process of `run_isolated`; not a user command.
    """
    parser = argparse.ArgumentParser(description="one DQN learning run (the child process of run_isolated)")
    parser.add_argument("--one", choices=SIDES, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--result", required=True)
    parser.add_argument("--budget-steps", type=int, default=Budget.env_steps)
    parser.add_argument("--budget-seconds", type=float, default=Budget.seconds)
    parser.add_argument("--eval-every", type=int, default=Criterion.eval_every)
    parser.add_argument("--eval-episodes", type=int, default=Criterion.eval_episodes)
    parser.add_argument("--screen-episodes", type=int, default=Criterion.screen_episodes)
    parser.add_argument("--min-return", type=float, default=Criterion.min_return)
    args = parser.parse_args(argv)

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"learning run: signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    criterion = Criterion(args.min_return, args.eval_episodes, args.screen_episodes, args.eval_every)
    run = run_one(args.one, args.seed, criterion, Budget(args.budget_steps, args.budget_seconds))
    Path(args.result).write_text(json.dumps(run))


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    child_main()
