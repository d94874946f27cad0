"""Environment stepping alone: frames per CPU-second of an ``env`` section's vector environment.

`measure_env_stepping` steps ``num_envs`` environments with random actions (the agent's part left out) and
counts emulator frames (steps x N x frames per step: 4 skipped frames per ``ALE/*-v5`` step). CPU time is
this process's, native threads included (``getrusage(RUSAGE_SELF)``).

Run as a module it prints an interleaved A/B of the vectorizers (python, ale, envpool; each where it
installs) on Pong, one after another per repeat, with the medians and the ratios to ``python``::

    python -m spacegraph.reports.env_stepping --steps 2000 --repeats 3
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from typing import Any, Mapping

import numpy as np

#: The ``env`` section the module's A/B measures (``vectorizer`` set per side).
PONG = {"id": "ALE/Pong-v5", "atari": True, "num_envs": 8}


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure_env_stepping(env: Mapping[str, Any], num_envs: int, steps: int, seed: int = 0) -> dict:
    """Steps ``num_envs`` environments of the ``env`` section ``steps`` times with uniformly random actions.

    Args:
        env: an agent config's ``env`` section as a mapping: ``id``, and optionally ``atari``, ``kwargs``,
            ``vectorizer`` (``python``, ``ale``, ``envpool``; default ``python``).
        num_envs: the environments stepped in lockstep (``env``'s own ``num_envs`` is not used).
        steps: lockstep steps measured (after one warm-up reset).
        seed: the reset seed and the actions' random seed.

    Returns:
        ``{"vectorizer", "num_envs", "steps", "frames", "cpu_s", "wall_s", "frames_per_cpu_s",
        "frames_per_s"}``; frames count every emulator frame (steps x N x frames per step).

    Raises:
        ValueError: for a bad ``num_envs``/``steps``, or the environment's own errors (naming the key).
    """
    from reference_agents.workers.native_envs import env_kwargs_of, make_vector_env

    for name, value in (("num_envs", num_envs), ("steps", steps)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
            raise ValueError(f"measure_env_stepping: {name} must be a positive int; got {value!r}")
    envs = make_vector_env(env["id"], int(num_envs), env_kwargs_of(env) or None)
    try:
        rng = np.random.default_rng(seed)
        n_actions = int(envs.action_space.n)
        actions = rng.integers(0, n_actions, size=(int(steps), int(num_envs)))
        envs.reset(seed=seed)
        cpu0, wall0 = _cpu_seconds(), time.perf_counter()
        for row in actions:
            envs.step(row)
        wall, cpu = time.perf_counter() - wall0, _cpu_seconds() - cpu0
        frames = int(round(int(steps) * int(num_envs) * envs.frames_per_step))
    finally:
        envs.close()
    return {"vectorizer": env.get("vectorizer", "python"), "num_envs": int(num_envs), "steps": int(steps),
            "frames": frames, "cpu_s": cpu, "wall_s": wall, "frames_per_cpu_s": frames / max(cpu, 1e-9),
            "frames_per_s": frames / max(wall, 1e-9)}


def available_vectorizers() -> list[str]:
    """The vectorizers whose library imports here (``python`` always)."""
    import importlib.util

    found = ["python"]
    if importlib.util.find_spec("ale_py.vector_env") is not None:
        found.append("ale")
    if importlib.util.find_spec("envpool") is not None:
        found.append("envpool")
    return found


def interleaved(vectorizers: list[str], num_envs: int, steps: int, repeats: int,
                env: Mapping[str, Any] = PONG) -> dict[str, list[dict]]:
    """``repeats`` rounds of one `measure_env_stepping` per vectorizer, in turn (A, B, C, A, B, C, ...)."""
    runs: dict[str, list[dict]] = {v: [] for v in vectorizers}
    for _ in range(repeats):
        for v in vectorizers:
            runs[v].append(measure_env_stepping(dict(env, vectorizer=v), num_envs, steps))
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spacegraph.reports.env_stepping",
                                     description="Interleaved A/B of Atari env stepping (Pong, random actions): "
                                                 "frames per CPU-second of each vectorizer, medians, ratios.")
    parser.add_argument("--steps", type=int, default=2000, help="lockstep steps per measurement (default 2000)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of the interleaved A/B (default 3)")
    parser.add_argument("--num-envs", type=int, default=PONG["num_envs"], help="environments (default 8)")
    parser.add_argument("--vectorizers", default=",".join(available_vectorizers()),
                        help="comma-separated, of python, ale, envpool (default: those installed here)")
    args = parser.parse_args(argv)
    from reference_agents.workers.native_envs import VECTORIZERS

    chosen = [v.strip() for v in args.vectorizers.split(",") if v.strip()]
    bad = [v for v in chosen if v not in VECTORIZERS]
    if bad or not chosen:
        parser.error(f"--vectorizers: expected a comma-separated list of {', '.join(VECTORIZERS)}; got "
                     f"{args.vectorizers!r}")
    for name in ("steps", "repeats", "num_envs"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be a positive int; got {getattr(args, name)}")
    runs = interleaved(chosen, args.num_envs, args.steps, args.repeats)
    base = statistics.median(r["frames_per_cpu_s"] for r in runs[chosen[0]])
    print(f"{PONG['id']}, {args.num_envs} envs, {args.steps} steps x {args.repeats} interleaved rounds; "
          f"frames per CPU-second (this process, threads included)")
    envpool = statistics.median(r["frames_per_cpu_s"] for r in runs["envpool"]) if "envpool" in runs else None
    for v, rs in runs.items():
        per_cpu = [r["frames_per_cpu_s"] for r in rs]
        med = statistics.median(per_cpu)
        of_envpool = f", x{med / envpool:.2f} of envpool" if envpool and v != "envpool" else ""
        print(f"  {v:8s} median {med:9,.0f}  runs {', '.join(f'{x:,.0f}' for x in per_cpu)}  "
              f"x{med / base:.2f} of {chosen[0]}{of_envpool}  (wall median "
              f"{statistics.median(r['frames_per_s'] for r in rs):,.0f} frames/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
