"""Ape-X on CartPole with the learner's update on 1 and on 2 replica processes: evaluation return against training
time and the time to a target return (the shape of the RLgraph paper's Fig. 8: Ape-X on 1 and 2 GPUs).

Each run is a fresh interpreter (`run_isolated`) training ``apex_cartpole`` with the in-process actor executor
(the workers and the learner in that process, one framework thread) and, for 2 replicas,
``execution.strategy: {type: sync-replicas, replicas: 2, mode: processes}`` (`with_replicas`: one replica process
besides the trainer's). The per-replica batch is fixed: the learner's ``update.batch_size`` is ``batch`` x replicas.
The trainer evaluates every ``eval_every`` env steps (a screen, then the full evaluation when the screen reaches
the target) and stops at the first full evaluation reaching ``target_return`` or after ``max_seconds`` of training.
Time to target is the trainer's ``train_s`` at that evaluation: seconds spent stepping and updating, evaluation
excluded. Runs are interleaved (seed s with 1 replica, then with 2, then seed s + 1 ...).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Sequence

#: The history columns a run keeps (`reference_agents.training.files.METRIC_COLUMNS`).
COLUMNS = ("env_steps", "wall_s", "train_s", "updates", "train_return_100", "screen_return", "eval_return", "solved")


def apex_config(replicas: int, seed: int, backend: str, batch: int) -> Any:
    """The ``apex_cartpole`` config with ``seed``, ``backend``, the learner's batch ``batch`` x ``replicas`` and,
    for ``replicas`` >= 2, its update on that many replica processes."""
    from reference_agents.agents.apex import load_apex_config
    from reference_agents.training.replicas import with_replicas

    config, _ = load_apex_config("apex_cartpole", {"backend": backend, "seed": seed})
    data = with_replicas(config.model_dump(by_alias=True), replicas, "processes")
    data["update"]["batch_size"] = batch * replicas
    return load_apex_config(data)[0]


def run_one(replicas: int, seed: int, backend: str = "torch", batch: int = 64, target_return: float = 200.0,
            max_seconds: float = 120.0, eval_every: int = 2000, eval_episodes: int = 10,
            screen_episodes: int = 5) -> dict[str, Any]:
    """One training run in this process (see the module docstring); its history rows and time to target."""
    from reference_agents.agents.apex import ApexDriver
    from reference_agents.training import set_framework_threads
    from reference_agents.training.apex import ApexTrainer, make_actor_executor

    set_framework_threads(backend, 1)
    executor = make_actor_executor("local")
    driver = ApexDriver(apex_config(replicas, seed, backend, batch), executor)
    trainer = ApexTrainer(driver, None, eval_every=eval_every, eval_episodes=eval_episodes,
                          screen_episodes=screen_episodes, target_return=target_return, max_seconds=max_seconds,
                          progress=False, tensorboard=False)
    try:
        done = trainer.train(10 ** 8)
    finally:
        trainer.close()
        executor.shutdown()
    history = [{k: row.get(k) for k in COLUMNS} for row in done.history]
    solved = next((row for row in history if row["solved"]), None)
    return {"replicas": replicas, "seed": seed, "backend": backend, "batch_size": batch * replicas,
            "time_to_target_s": solved["train_s"] if solved else None,
            "steps_to_target": solved["env_steps"] if solved else None,
            "stop_reason": done.stop_reason, "train_seconds": done.train_seconds, "total_steps": done.total_steps,
            "strategy": done.strategy, "history": history}


def run_isolated(timeout: float, **kwargs: Any) -> dict[str, Any]:
    """`run_one` in a fresh interpreter (``OMP_NUM_THREADS=1``).

    Raises:
        RuntimeError: with the child's output tail when it fails.
    """
    with tempfile.TemporaryDirectory(prefix="multi_device_apex_") as tmp:
        out = os.path.join(tmp, "run.json")
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        done = subprocess.run([sys.executable, "-m", "spacegraph.reports.multi_device_apex", json.dumps(kwargs), out],
                              capture_output=True, text=True, timeout=timeout, env=env)
        if done.returncode != 0 or not os.path.exists(out):
            raise RuntimeError(f"multi_device_apex child failed (status {done.returncode}): {done.stderr[-1500:]}")
        with open(out) as fh:
            return json.load(fh)


def measure(seeds: Sequence[int], replicas: Sequence[int] = (1, 2), backend: str = "torch", batch: int = 64,
            target_return: float = 200.0, max_seconds: float = 120.0, eval_every: int = 2000,
            eval_episodes: int = 10, screen_episodes: int = 5, progress: Any = None) -> dict[str, Any]:
    """Every seed with every replica count, interleaved; the settings and the load recorded.

    Raises:
        ValueError: naming the argument for no seeds, a replica count below 1 or a non-positive budget.
    """
    if not seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds):
        raise ValueError(f"multi_device_apex: seeds: expected non-negative ints; got {list(seeds)!r}")
    if not replicas or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in replicas):
        raise ValueError(f"multi_device_apex: replicas: expected positive ints; got {list(replicas)!r}")
    if max_seconds <= 0 or batch < 1:
        raise ValueError(f"multi_device_apex: max_seconds and batch must be positive; got {max_seconds!r}, {batch!r}")
    settings = {"backend": backend, "batch": batch, "target_return": target_return, "max_seconds": max_seconds,
                "eval_every": eval_every, "eval_episodes": eval_episodes, "screen_episodes": screen_episodes}
    load_start, runs = list(os.getloadavg()), []
    for seed in seeds:
        for n in replicas:
            if progress is not None:
                progress.step(f"Ape-X CartPole, seed {seed}, {n} replica{'s' if n > 1 else ''}")
            runs.append(run_isolated(timeout=max_seconds * 3 + 300, replicas=n, seed=seed, **settings))
    return {**settings, "seeds": list(seeds), "replicas": list(replicas), "runs": runs,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_average": load_start,
            "load_average_end": list(os.getloadavg())}


if __name__ == "__main__":
    kwargs = json.loads(sys.argv[1])
    with open(sys.argv[2], "w") as fh:
        json.dump(run_one(**kwargs), fh, indent=1)
