"""Sampling overhead (issue 18): our worker against the loop it replaces, written by hand, in one run.

Three contenders step the same `VectorEnv` of N environments with the same DQN agent's Q-network and
the same exploration rate (`comparable_config`), timed in interleaved rounds on process CPU time
(`sampling_measure.time_contenders`):

- ``direct``: `sampling_contenders.DirectLoopContender`: the Q-network as hand-written code on the
  agent's backend, epsilon-greedy in NumPy, ``VectorEnv.step``; nothing observed;
- ``worker_act``: `VectorEnvWorker` acting through the framework (``explore=True``), not observing:
  the same work as ``direct`` (the like-for-like ratio the target applies to);
- ``worker``: the same worker observing too (n-step folding and replay insert): the full sampling path,
  shown beside it;
- ``worker_hand``: the same worker (not observing) acting through `sampling_contenders.HandActingAgent`,
  the direct loop's hand-written act: what the worker's own stepping and bookkeeping cost, without the
  framework's act (the part of the gap the framework cannot close);
- ``worker_traced`` (PyTorch only): ``worker_act`` with the agent's ``act`` traced (`traced_config`: the
  config's ``execution.trace: [act]``, a TorchScript graph per input shapes instead of step-by-step eager
  dispatch). On TF every API method is a ``tf.function`` graph already, so there is nothing to add;
- ``worker_eager`` (PyTorch only): ``worker_act`` with replays off (`eager_config`: ``execution.replay:
  false``): the act dispatched step by step through the graph functions and the op namespace on every call,
  where ``worker_act`` replays its recorded PyTorch calls (`harness.backends.torch.replay`, the default).

Ratios are each worker's frames per CPU-second over the direct loop's, taken per round and then the median over
rounds (`paired_ratio`), as the act and update rows of the overhead report are: a round's two figures are taken
one right after the other, so a change in the machine's speed between rounds moves both. (Before 2026-11-28
evening the ratio was that of the two medians over rounds, which such changes moved.)
"""

from __future__ import annotations

import statistics
from typing import Any

#: The configs measured (the target for worker_act / direct, 0.85, is `overhead.TARGETS["sampling"]`).
CONFIGS = ("cartpole", "pong")


def comparable_config(config: str) -> dict[str, Any]:
    """The agent config of ``config`` ("cartpole" or "pong") exploring as the hand-written loop does.

    Its epsilon schedule is replaced by the loop's constant epsilon (`sampling_contenders.HAND_EPSILON`).
    With the config's own schedule (linear from 1.0 on CartPole) the framework's side explored at another
    rate than the loop, and at a drifting one: the observing worker advances the agent's time step, so its
    epsilon fell from 1.0 to 0.02 within the first rounds. Episodes end sooner or later with the exploration
    rate (on CartPole ~23 steps at epsilon 1.0, ~10.5 at 0.1 with the untrained network), and every episode
    end costs an environment reset and the worker's episode bookkeeping: both sides must end episodes alike.
    The agent's explore step takes the constant epsilon as a constant (`EpsilonGreedy.explore`), as the loop's
    NumPy comparison does. No API method is traced (``execution.trace``
    emptied, though ``dqn_cartpole.yaml`` traces ``act``): on PyTorch its act runs as replays of its recorded
    calls (``execution.replay``, the default since 2026-11-29; step by step before); `traced_config` is the
    same with ``act`` traced, `eager_config` with replays off.

    Raises:
        ValueError: for another config.
    """
    from spacegraph.reports import sampling_contenders as sc

    if config not in CONFIGS:
        raise ValueError(f"sampling_overhead: config must be one of {CONFIGS}; got {config!r}")
    cfg = sc.load_config(sc.PONG_CONFIG if config == "pong" else sc.CARTPOLE_CONFIG)
    cfg["exploration"] = {"type": "constant", "value": sc.HAND_EPSILON}
    cfg["execution"] = {**cfg["execution"], "trace": []}  # `traced_config` traces act
    return cfg


def eager_config(config: str) -> dict[str, Any]:
    """`comparable_config` with replays off (``execution.replay: false``): every call step by step."""
    cfg = comparable_config(config)
    cfg["execution"] = {**cfg["execution"], "replay": False}
    return cfg


def traced_config(config: str) -> dict[str, Any]:
    """`comparable_config` with the agent's ``act`` traced (``execution.trace: [act]``)."""
    cfg = comparable_config(config)
    cfg["execution"] = {**cfg["execution"], "trace": ["act"]}
    return cfg


def make_contenders(backend: str, config: str, num_envs: int) -> dict[str, Any]:
    """The contenders of `measure` (see the module docstring) over one agent built from `comparable_config`
    (seed 0; on PyTorch two more, from `traced_config` and `eager_config`), each with its own `VectorEnv` of ``num_envs``
    environments."""
    from reference_agents.agents import DQNAgent
    from spacegraph.reports import sampling_contenders as sc

    cfg = comparable_config(config)
    factory = sc.env_factory(cfg)
    agent = DQNAgent(cfg, backend=backend, seed=0)
    direct = sc.DirectLoopContender(agent, factory, num_envs)
    contenders = {"direct": direct,
                  "worker_act": sc.WorkerContender(agent, factory, num_envs, observe=False, timed=False),
                  "worker": sc.WorkerContender(agent, factory, num_envs, observe=True, timed=False),
                  # the loop's own hand-written act (one copy of the network, one generator) inside the worker
                  "worker_hand": sc.WorkerContender(direct.actor, factory, num_envs, observe=False, timed=False)}
    if backend == "torch":
        traced = DQNAgent(traced_config(config), backend=backend, seed=0)
        contenders["worker_traced"] = sc.WorkerContender(traced, factory, num_envs, observe=False, timed=False)
        eager = DQNAgent(eager_config(config), backend=backend, seed=0)
        contenders["worker_eager"] = sc.WorkerContender(eager, factory, num_envs, observe=False, timed=False)
    return contenders


def measure(backend: str, config: str, num_envs: int, seconds: float = 1.5, rounds: int = 4) -> dict[str, Any]:
    """``{"worker_act_over_direct", "worker_over_direct", "direct_frames_per_cpu_s", ...}`` for one point
    (``worker_traced_over_direct`` and ``worker_eager_over_direct`` None on TF).

    Args:
        backend: "tf" or "torch".
        config: "cartpole" (``dqn_cartpole.yaml``) or "pong" (``dqn_pong.yaml``).
        num_envs: environments in the vector, N.
        seconds: CPU-time budget per contender (split into ``rounds``).
        rounds: interleaved rounds.
    """
    from harness.measure.machine import configure_threads
    from spacegraph.reports.sampling_measure import time_contenders

    configure_threads(1)
    contenders = make_contenders(backend, config, num_envs)
    try:
        timed = time_contenders(contenders, seconds=seconds, rounds=rounds, chunk_seconds=max(seconds / 20, 0.02),
                                warmup_seconds=max(seconds / 8, 0.05))
    finally:
        for contender in contenders.values():
            contender.close()
    rate = {name: timed[name]["frames_per_cpu_s_median"] for name in contenders}
    rounds_of = {name: timed[name]["frames_per_cpu_s_rounds"] for name in contenders}

    def over_direct(name: str) -> float | None:
        return paired_ratio(rounds_of[name], rounds_of["direct"]) if name in rounds_of else None

    return {"backend": backend, "config": config, "num_envs": num_envs,
            "direct_frames_per_cpu_s": rate["direct"], "worker_act_frames_per_cpu_s": rate["worker_act"],
            "worker_frames_per_cpu_s": rate["worker"], "worker_act_over_direct": over_direct("worker_act"),
            "worker_over_direct": over_direct("worker"), "worker_hand_over_direct": over_direct("worker_hand"),
            "worker_traced_over_direct": over_direct("worker_traced"),
            "worker_eager_over_direct": over_direct("worker_eager")}


def paired_ratio(rates: list[float], baseline: list[float]) -> float:
    """The median over rounds of ``rates[r] / baseline[r]`` (two contenders' rates, round by round).

    Raises:
        ValueError: when the two do not have the same, non-zero number of rounds.
    """
    if not rates or len(rates) != len(baseline):
        raise ValueError(f"paired_ratio: needs the same number of rounds on both sides; got {len(rates)} and "
                         f"{len(baseline)}")
    return statistics.median(r / b for r, b in zip(rates, baseline))
