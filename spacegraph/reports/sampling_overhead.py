"""Sampling overhead (issue 18): our worker against the loop it replaces, written by hand, in one run.

Three contenders step the same `VectorEnv` of N environments with the same DQN agent's Q-network,
timed in interleaved rounds on process CPU time (`sampling_measure.time_contenders`):

- ``direct``: `sampling_contenders.DirectLoopContender`: the Q-network as hand-written code on the
  agent's backend, epsilon-greedy in NumPy, ``VectorEnv.step``; nothing observed;
- ``worker_act``: `VectorEnvWorker` acting through the framework (``explore=True``), not observing:
  the same work as ``direct`` (the like-for-like ratio the target applies to);
- ``worker``: the same worker observing too (n-step folding and replay insert): the full sampling path,
  shown beside it;
- ``worker_hand``: the same worker (not observing) acting through `sampling_contenders.HandActingAgent`,
  the direct loop's hand-written act: what the worker's own stepping and bookkeeping cost, without the
  framework's act (the part of the gap the framework cannot close).

Ratios are each worker's frames per CPU-second over the direct loop's (medians over rounds).
"""

from __future__ import annotations

from typing import Any

#: The configs measured (the target for worker_act / direct, 0.85, is `overhead.TARGETS["sampling"]`).
CONFIGS = ("cartpole", "pong")


def measure(backend: str, config: str, num_envs: int, seconds: float = 1.5, rounds: int = 4) -> dict[str, Any]:
    """``{"worker_act_over_direct", "worker_over_direct", "direct_frames_per_cpu_s", ...}`` for one point.

    Args:
        backend: "tf" or "torch".
        config: "cartpole" (``dqn_cartpole.yaml``) or "pong" (``dqn_pong.yaml``).
        num_envs: environments in the vector, N.
        seconds: CPU-time budget per contender (split into ``rounds``).
        rounds: interleaved rounds.
    """
    from harness.measure.machine import configure_threads
    from reference_agents.agents import DQNAgent
    from spacegraph.reports import sampling_contenders as sc
    from spacegraph.reports.sampling_measure import time_contenders

    if config not in CONFIGS:
        raise ValueError(f"sampling_overhead: config must be one of {CONFIGS}; got {config!r}")
    configure_threads(1)
    cfg = sc.load_config(sc.PONG_CONFIG if config == "pong" else sc.CARTPOLE_CONFIG)
    factory = sc.env_factory(cfg)
    agent = DQNAgent(cfg, backend=backend, seed=0)
    direct = sc.DirectLoopContender(agent, factory, num_envs)
    contenders = {"direct": direct,
                  "worker_act": sc.WorkerContender(agent, factory, num_envs, observe=False, timed=False),
                  "worker": sc.WorkerContender(agent, factory, num_envs, observe=True, timed=False),
                  # the loop's own hand-written act (one copy of the network, one generator) inside the worker
                  "worker_hand": sc.WorkerContender(direct.actor, factory, num_envs, observe=False, timed=False)}
    try:
        timed = time_contenders(contenders, seconds=seconds, rounds=rounds, chunk_seconds=max(seconds / 20, 0.02),
                                warmup_seconds=max(seconds / 8, 0.05))
    finally:
        for contender in contenders.values():
            contender.close()
    rate = {name: timed[name]["frames_per_cpu_s_median"] for name in contenders}
    return {"backend": backend, "config": config, "num_envs": num_envs,
            "direct_frames_per_cpu_s": rate["direct"], "worker_act_frames_per_cpu_s": rate["worker_act"],
            "worker_frames_per_cpu_s": rate["worker"], "worker_act_over_direct": rate["worker_act"] / rate["direct"],
            "worker_over_direct": rate["worker"] / rate["direct"],
            "worker_hand_over_direct": rate["worker_hand"] / rate["direct"]}
