"""The roofline of IMPALA and Ape-X on Pong: the best env frames/s this machine could reach with every core busy on
necessary work, from the measured cost of each necessary part alone, and each agent's measured frames/s against it.

Necessary parts, each measured alone in a fresh process with one framework thread
(`spacegraph.reports.roofline_parts`): env stepping with the project's preprocessing (our Python path and the
native ones, ``env.vectorizer``), the policy's act call at the actors' batch (and larger batches, the batch being a
lever), and the learner's update call (forward, backward, optimizer step) at the agent's batch; on PyTorch and on
TensorFlow with oneDNN on and off (``TF_ENABLE_ONEDNN_OPTS``: distributed-TF actors and the learner run with
TensorFlow's default, on; Ray's actor processes with 0). CPU-seconds per env frame (a Pong step is 4 frames, F)::

    c = c_env + c_act / F + r * c_learn / F        limit = cores / c   (env frames/s)

``c_env``: CPU-s per frame of the cheapest env path; ``c_act``: CPU-s per state of the act call at the actors'
batch; ``c_learn``: CPU-s per transition (IMPALA) or replay record (Ape-X) of the update call; ``r``: records
learned per env step: 1 for IMPALA (every transition once), the measured run's replay ratio for Ape-X (its free
learner sets it). Everything else (transport, replay shards, weight publication, Python glue) is overhead the
limit leaves out, so it is an upper bound. The measured runs reuse the ``impala`` and ``apex`` scenarios' code:
IMPALA on distributed TF with 2 actors (`impala_throughput.run_side`), Ape-X on Ray with 2 workers and a free
learner (`apex_throughput.run_point`). The figure is the ``roofline`` scenario of ``spacegraph report``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from spacegraph.reports.roofline_parts import AGENT_CONFIGS, ENV_PATHS

REPO = Path(__file__).resolve().parents[2]
#: Backend variants of the agent parts: (backend, TF_ENABLE_ONEDNN_OPTS in the child; None leaves it unset).
VARIANTS = {"torch": ("torch", None), "tf": ("tf", "1"), "tf-no-onednn": ("tf", "0")}
VARIANT_NAMES = {"torch": "PyTorch", "tf": "TF, oneDNN on", "tf-no-onednn": "TF, oneDNN off"}
AGENT_NAMES = {"impala": "IMPALA", "apex": "Ape-X"}
#: Targets of issue 41: measured / roofline per agent, and our env path / the native one per CPU-second.
TARGETS = {"impala": 0.6, "apex": 0.5, "env": 0.9}
#: The measured runs: IMPALA actors (distributed TF), Ape-X workers (Ray), as the impala and apex scenarios run them.
IMPALA_ACTORS, APEX_WORKERS = 2, 2
#: (env steps per round, env rounds, act batches, seconds per contender, rounds, measured window in seconds)
BUDGETS = {"full": {"steps": 2000, "env_rounds": 4, "batches": (4, 8, 16, 32), "seconds": 5.0, "rounds": 5,
                    "window": 15.0},
           "quick": {"steps": 150, "env_rounds": 2, "batches": (4, 16), "seconds": 0.6, "rounds": 2, "window": 3.0}}
THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "3",
              "SPACEGRAPH_VALIDATE": "0"}


# ---- the arithmetic ------------------------------------------------------------------------------------------
def frame_costs(env_s_per_frame: float, act_s_per_state: float, learn_s_per_record: float, frames_per_step: float,
                records_per_step: float) -> dict[str, float]:
    """CPU-seconds per env frame of each necessary part and their sum (see the module docstring).

    Raises:
        ValueError: for a cost that is negative or a frames/records per step that is not positive.
    """
    if min(env_s_per_frame, act_s_per_state, learn_s_per_record) < 0 or frames_per_step <= 0 or records_per_step < 0:
        raise ValueError(f"roofline.frame_costs: costs must be >= 0 and frames_per_step > 0; got {env_s_per_frame}, "
                         f"{act_s_per_state}, {learn_s_per_record}, {frames_per_step}, {records_per_step}")
    act = act_s_per_state / frames_per_step
    learn = records_per_step * learn_s_per_record / frames_per_step
    return {"env": env_s_per_frame, "act": act, "learn": learn, "total": env_s_per_frame + act + learn}


def limit(costs: dict[str, float], cores: int) -> float:
    """The roofline: env frames/s with ``cores`` cores busy on the necessary parts only (``cores / total``)."""
    return cores / costs["total"]


def best_env(env: dict[str, Any], native: bool | None = None) -> tuple[str, float] | None:
    """``(path, CPU-s per frame)`` of the cheapest measured env path (``native``: only ours (False), only the
    native ones (True)); None when none was measured."""
    paths = [(p, r["cpu_s_per_frame"]) for p, r in (env.get("paths") or {}).items() if "cpu_s_per_frame" in r
             and (native is None or (p != "python") == native)]
    return min(paths, key=lambda pc: pc[1]) if paths else None


def records_per_step(agent: str, measured: dict[str, Any]) -> float | None:
    """Records the learner learns from per env step: IMPALA 1; Ape-X the measured run's replay ratio (None
    without one)."""
    if agent == "impala":
        return 1.0
    ratio = (measured.get("apex") or {}).get("replay_ratio")
    return float(ratio) if ratio else None


def rooflines(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (agent, backend variant) measured: the per-frame costs, the limit (total and per core), the
    limit acting at each measured batch, and the measured run's fraction of it."""
    env = best_env(result.get("env") or {})
    cores = int(result["cores"])
    fps = float((result.get("env") or {}).get("frames_per_step") or 4.0)
    measured = result.get("measured") or {}
    rows = []
    for variant, parts in (result.get("parts") or {}).items():
        for agent, p in (parts.get("agents") or {}).items():
            row: dict[str, Any] = {"agent": agent, "variant": variant, "env_path": env[0] if env else None,
                                   "act_batch": p["act_batch"], "records_per_step": records_per_step(agent, measured)}
            if env is None or row["records_per_step"] is None:
                row["missing"] = "no env path measured" if env is None else "no replay ratio: no Ape-X run measured one"
                rows.append(row)
                continue
            act = p["act"][str(p["act_batch"])]["cpu_s"]
            costs = frame_costs(env[1], act, p["learn"]["cpu_s"], fps, row["records_per_step"])
            row.update(costs=costs, limit=limit(costs, cores), limit_per_core=limit(costs, cores) / cores,
                       at_batch={b: limit(frame_costs(env[1], a["cpu_s"], p["learn"]["cpu_s"], fps,
                                                      row["records_per_step"]), cores) for b, a in p["act"].items()})
            rows.append(row)
    return rows


def fractions(result: dict[str, Any], rows: list[dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """Per agent with a measured rate and a limit: ``{"measured", "limit", "variant", "fraction"}`` against the
    highest limit over the backend variants (the machine's best)."""
    rows = rooflines(result) if rows is None else rows
    out = {}
    for agent in AGENT_NAMES:
        rate = ((result.get("measured") or {}).get(agent) or {}).get("frames_per_s")
        limits = [r for r in rows if r["agent"] == agent and "limit" in r]
        if rate and limits:
            best = max(limits, key=lambda r: r["limit"])
            out[agent] = {"measured": rate, "limit": best["limit"], "variant": best["variant"],
                          "fraction": rate / best["limit"]}
    return out


def env_ratio(result: dict[str, Any]) -> dict[str, Any] | None:
    """The workers' env path (``env.vectorizer`` of the agents' Pong config; ``python`` in results that predate
    it) in frames per CPU-second over EnvPool's (the issue's reference), or over the fastest other native path
    where EnvPool was not measured; None without both."""
    env = result.get("env") or {}
    paths = {p: r["cpu_s_per_frame"] for p, r in (env.get("paths") or {}).items() if "cpu_s_per_frame" in r}
    path = env.get("configured", "python")
    others = {p: c for p, c in paths.items() if p not in ("python", path)}
    if path not in paths or not others:
        return None
    native = "envpool" if "envpool" in others else min(others, key=others.__getitem__)
    return {"path": path, "ours": 1.0 / paths[path], "native": 1.0 / others[native], "native_path": native,
            "ratio": others[native] / paths[path]}


# ---- measuring ------------------------------------------------------------------------------------------------
def run_child(args: Sequence[str], onednn: str | None, timeout: float) -> dict[str, Any]:
    """`roofline_parts.main` in a fresh process (one thread, ``TF_ENABLE_ONEDNN_OPTS`` as given); its result or
    ``{"error": ...}``."""
    with tempfile.TemporaryDirectory(prefix="roofline_") as tmp:
        out = Path(tmp) / "part.json"
        env = {**os.environ, **THREAD_ENV,
               "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        env.pop("TF_ENABLE_ONEDNN_OPTS", None)
        if onednn is not None:
            env["TF_ENABLE_ONEDNN_OPTS"] = onednn
        cmd = [sys.executable, "-m", "spacegraph.reports.roofline_parts", *args, "--out", str(out)]
        try:
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:.0f} s"}
        if done.returncode != 0 or not out.exists():
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            why = f"signal {-done.returncode}" if done.returncode < 0 else f"exit {done.returncode}"
            return {"error": f"{why}: {tail[:300]}"}
        return json.loads(out.read_text())


def measure_env(paths: Sequence[str], steps: int, rounds: int) -> dict[str, Any]:
    """Each env path's frames per CPU-second: one fresh child per path and round, the paths interleaved
    (`harness.measure.timing.interleaved`); a path whose child fails is not run again and keeps its error.

    Returns:
        ``{"num_envs", "frames_per_step", "paths": {path: {"frames_per_cpu_s" (median), "cpu_s_per_frame",
        "rounds"} | {"error"}}}``.
    """
    from harness.measure.timing import interleaved

    from spacegraph.reports.roofline_parts import env_config

    out: dict[str, Any] = {"paths": {}, "configured": env_config()["vectorizer"]}
    rates: dict[str, list[float]] = {p: [] for p in paths}
    errors: dict[str, str] = {}
    for path in interleaved(list(paths), rounds):
        if path in errors:
            continue
        got = run_child(["--part", "env", "--path", path, "--steps", str(steps), "--rounds", "1"], None, 300)
        if "error" in got:
            errors[path] = got["error"]
            continue
        rates[path] += got["rounds"]
        out.update(num_envs=got["num_envs"], frames_per_step=got["frames_per_step"])
    for path in paths:
        if rates[path]:
            median = statistics.median(rates[path])
            out["paths"][path] = {"frames_per_cpu_s": median, "cpu_s_per_frame": 1.0 / median, "rounds": rates[path]}
        else:
            out["paths"][path] = {"error": errors.get(path, "not measured")}
    return out


def measure_agents(agents: Sequence[str], seconds: float) -> dict[str, Any]:
    """Each agent's frames/s on Pong, learning on, as the impala and apex scenarios measure it (fresh processes)."""
    out: dict[str, Any] = {}
    if "impala" in agents:
        from spacegraph.reports.impala_throughput import run_side

        # variant {}: the config as it is (its learner and actor backends), not the impala report's all-PyTorch side
        out["impala"] = dict(run_side("ours", "pong", IMPALA_ACTORS, seconds, 600, variant={}), actors=IMPALA_ACTORS)
    if "apex" in agents:
        from spacegraph.reports.apex_throughput import run_point

        point = run_point("apex", "pong", APEX_WORKERS, True, seconds, timeout=seconds + 420)
        if "skipped" in point:
            point["error"] = point.pop("skipped")
        out["apex"] = point
    return out


def measure(quick: bool = False, variants: Sequence[str] | None = None, agents: Sequence[str] = tuple(AGENT_CONFIGS),
            env_paths: Sequence[str] = ENV_PATHS, measured: bool = True,
            log: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """Every part in its own child process, then (``measured``) each agent's run; the result `rooflines` reads.

    Args:
        quick: small budgets (`BUDGETS`); the variants default to PyTorch and TF with oneDNN on.
        variants: of `VARIANTS` (default all three, quick: ``torch`` and ``tf``).
        agents: of ``impala``, ``apex``.
        env_paths: of `ENV_PATHS` (a path not installed here gives a row with its error).
        measured: also run the agents (learning on) for their measured frames/s.
        log: called with a line per child.

    Raises:
        ValueError: naming the argument for an unknown variant, agent or env path.
    """
    variants = list(variants if variants is not None else (("torch", "tf") if quick else VARIANTS))
    bad = ([v for v in variants if v not in VARIANTS] + [a for a in agents if a not in AGENT_CONFIGS]
           + [p for p in env_paths if p not in ENV_PATHS])
    if bad or not agents:
        raise ValueError(f"roofline.measure: variants must be among {list(VARIANTS)}, agents among "
                         f"{list(AGENT_CONFIGS)} (at least one), env_paths among {list(ENV_PATHS)}; got {bad}")
    from harness.measure.host import describe, facts
    from harness.measure.machine import git_revision

    say = log or (lambda line: None)
    budget = BUDGETS["quick" if quick else "full"]
    machine = facts()
    result: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "machine": describe(machine),
                              "commit": git_revision()[:7], "cores": machine["cores"], "quick": quick,
                              "budget": {k: list(v) if isinstance(v, tuple) else v for k, v in budget.items()},
                              "onednn_parent": os.environ.get("TF_ENABLE_ONEDNN_OPTS"), "load_before": os.getloadavg(),
                              "parts": {}, "measured": {}, "notes": []}
    result["env"] = measure_env(env_paths, budget["steps"], budget["env_rounds"])
    say(f"env: {_summary(result['env'])}")
    for variant in variants:
        backend, onednn = VARIANTS[variant]
        result["parts"][variant] = run_child(
            ["--part", "agents", "--backend", backend, "--agents", ",".join(agents),
             "--batches", ",".join(map(str, budget["batches"])), "--seconds", str(budget["seconds"]),
             "--rounds", str(budget["rounds"])], onednn, 900)
        got = result["parts"][variant]
        say(f"{variant}: {'error ' + got['error'] if 'error' in got else 'done'}")
    if measured:
        result["measured"] = measure_agents(agents, budget["window"])
        say("measured: " + ", ".join(f"{a} {r.get('frames_per_s', r.get('error'))}"
                                     for a, r in result["measured"].items()))
    result["load_after"] = os.getloadavg()
    return result


def _summary(env: dict[str, Any]) -> str:
    if "error" in env:
        return f"error {env['error']}"
    return ", ".join(f"{p} {r['frames_per_cpu_s']:,.0f} frames/CPU-s" if "frames_per_cpu_s" in r
                     else f"{p} ({r.get('error', '')[:60]})" for p, r in env.get("paths", {}).items())


def steps(quick: bool, variants: int | None = None, measured: bool = True) -> int:
    """Progress steps of `measure`: the env child, one child per variant, the measured runs."""
    return 1 + (variants or (2 if quick else len(VARIANTS))) + (1 if measured else 0)
