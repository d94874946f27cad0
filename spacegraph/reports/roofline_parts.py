"""The roofline's necessary parts, each measured alone in a fresh process with one framework thread.

Run by `spacegraph.reports.roofline` as a child process (``python -m spacegraph.reports.roofline_parts``), one
child per part group so that no framework, thread pool or allocator of another part is in the process:

* ``env``: stepping the agent's environments (Pong, the project's 84x84x4 preprocessing, random actions) on one
  env path (``env.vectorizer``: our Python path or a native one) through
  `spacegraph.reports.env_stepping.measure_env_stepping`; frames per CPU-second (a Pong step counts its 4
  skipped frames). The parent runs the paths' children in interleaved rounds, so that a path that crashes
  (a native library's segmentation fault) loses its own rows only;
* ``agents``: for each agent (IMPALA and Ape-X on Pong), built from its own config on one backend, the act call
  the actors make (IMPALA ``get_actions``, Ape-X ``get_actions_and_q_values``) at the agent's batch (its envs per
  actor) and at larger batches, and
  the learner's update call (``agent.update``: forward, backward and optimizer step) at the agent's batch,
  in interleaved rounds (`harness.measure.timing.interleaved_rates`); CPU-seconds per state acted on and per
  transition (IMPALA) or replay record (Ape-X) learned from.

CPU time is the process's (``time.process_time``: every thread of it, TensorFlow's pools included).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

#: The agents of the roofline: their Pong configs (``reference_agents/configs``).
AGENT_CONFIGS = {"impala": "impala_pong", "apex": "apex_pong"}
#: Env paths (``env.vectorizer``): ours first, then the native ones where installed.
ENV_PATHS = ("python", "ale", "envpool")


def _config_path(name: str) -> str:
    import reference_agents

    return os.path.join(os.path.dirname(reference_agents.__file__), "configs", f"{name}.yaml")


def env_config(agent: str = "impala") -> dict[str, Any]:
    """The ``env`` section of an agent's Pong config (a dict)."""
    from reference_agents.agents import load_config

    cfg, _ = load_config(_config_path(AGENT_CONFIGS[agent]))
    return cfg.env.model_dump()


def env_costs(path: str, steps: int, rounds: int, seed: int = 0) -> dict[str, Any]:
    """Frames per CPU-second of one env path (``env.vectorizer``) of the agents' Pong env section in each of
    ``rounds`` rounds of ``steps`` lockstep steps (`spacegraph.reports.env_stepping.measure_env_stepping`).

    Returns:
        ``{"num_envs", "frames_per_step" (emulator frames per env step), "path", "rounds": [frames/CPU-s, ...]}``.
    """
    from spacegraph.reports.env_stepping import measure_env_stepping

    env = env_config()
    num_envs = int(env["num_envs"])
    out: dict[str, Any] = {"num_envs": num_envs, "path": path, "rounds": []}
    for r in range(rounds):
        got = measure_env_stepping({**env, "vectorizer": path}, num_envs, steps, seed + r)
        out["rounds"].append(float(got["frames_per_cpu_s"]))
        out["frames_per_step"] = got["frames"] / (got["steps"] * got["num_envs"])
    return out


def impala_update_batch(agent: Any, seed: int = 0) -> tuple[list[dict[str, Any]], int]:
    """``(rollouts, transitions)``: one learner batch of the agent's rollouts (``rollout.batch_size`` of
    ``rollout.length`` steps on its ``env.num_envs`` envs), made by its own act and observe calls on random
    frames."""
    rng = np.random.default_rng(seed)
    cfg = agent.config
    n, k = int(cfg.env.num_envs), int(cfg.rollout.batch_size)
    shape = (n, *agent.state_space.shape)
    while len(agent.outbox) < k:
        states = rng.integers(0, 256, shape, dtype=np.uint8)
        actions = agent.get_actions(states)
        agent.observe(states, actions, np.zeros(n, np.float32), np.zeros(n, bool),
                      rng.integers(0, 256, shape, dtype=np.uint8))
    rollouts = [agent.outbox.popleft() for _ in range(k)]
    return rollouts, int(cfg.rollout.length) * n * k


def build(agent: str, backend: str) -> tuple[Any, Callable[[Any], Any], Callable[[], Any], int, int]:
    """``(agent object, act call, learn call, records per learn call, the actors' act batch)`` of ``agent`` on
    ``backend``: the calls its actors and its learner make (Ape-X workers act with ``get_actions_and_q_values``,
    whose Q-values give the priorities)."""
    if agent == "impala":
        from reference_agents.agents import build_agent

        impala = build_agent(_config_path(AGENT_CONFIGS["impala"]), backend=backend)
        rollouts, records = impala_update_batch(impala)
        return (impala, impala.get_actions, lambda: impala.update(rollouts), records,
                int(impala.config.env.num_envs))
    from reference_agents.agents.apex.agent import ApexAgent
    from spacegraph.reports.update_overhead import make_batch

    apex = ApexAgent(_config_path(AGENT_CONFIGS["apex"]), backend=backend)
    size = int(apex.config.update.batch_size)
    records, weights = make_batch(size, network="nature")
    batch = dict(records, importance_weights=weights)
    return apex, apex.get_actions_and_q_values, lambda: apex.update(batch), size, int(apex.config.env.num_envs)


def agent_costs(agent: str, backend: str, batches: Sequence[int], seconds: float, rounds: int) -> dict[str, Any]:
    """CPU-seconds per state of the act call at each batch and per record of the update call, medians over
    ``rounds`` interleaved rounds (``seconds`` per contender in all)."""
    from harness.measure.timing import interleaved_rates

    obj, act, learn, records, act_batch = build(agent, backend)
    rng = np.random.default_rng(1)
    sizes = sorted({act_batch, *batches})
    states = {b: rng.integers(0, 256, (b, *obj.state_space.shape), dtype=np.uint8) for b in sizes}
    fns = {f"act-{b}": (lambda s=states[b]: act(s)) for b in sizes}
    fns["learn"] = learn
    rates = interleaved_rates(fns, seconds, rounds, warmup=2)

    def per_item(name: str, items: int) -> dict[str, float]:
        cpu = [1.0 / (r * items) for r in rates[name]["cpu"]]
        wall = [1.0 / (r * items) for r in rates[name]["wall"]]
        return {"cpu_s": statistics.median(cpu), "wall_s": statistics.median(wall), "rounds_cpu_s": cpu}

    return {"agent": agent, "backend": backend, "act_batch": act_batch, "records_per_update": records,
            "act": {str(b): per_item(f"act-{b}", b) for b in sizes}, "learn": per_item("learn", records)}


def main(argv: Sequence[str] | None = None) -> int:
    """One part group in this process (the child of `spacegraph.reports.roofline.run_child`), written as JSON to
    ``--out``; not a user command."""
    parser = argparse.ArgumentParser(description="one roofline part group (a child process of the roofline report)")
    parser.add_argument("--part", choices=("env", "agents"), required=True)
    parser.add_argument("--backend", choices=("torch", "tf"), default="torch")
    parser.add_argument("--agents", default="impala,apex")
    parser.add_argument("--path", choices=ENV_PATHS, default="python")
    parser.add_argument("--batches", default="4,8,16,32")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    from harness.measure.machine import configure_threads

    start = time.perf_counter()
    if args.part == "env":   # no framework in the process: nothing to configure
        out, threads = env_costs(args.path, args.steps, args.rounds), None
    else:
        threads = configure_threads(1)
        batches = [int(b) for b in args.batches.split(",") if b]
        out = {"agents": {a: agent_costs(a, args.backend, batches, args.seconds, args.rounds)
                          for a in args.agents.split(",") if a}}
    out.update(threads=threads, seconds=time.perf_counter() - start,
               onednn=os.environ.get("TF_ENABLE_ONEDNN_OPTS"))
    Path(args.out).write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
