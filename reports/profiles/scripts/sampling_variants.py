"""Where a PyTorch CartPole worker step goes beyond the hand-written loop's, inside the loop (issue 18).

    OMP_NUM_THREADS=1 python reports/profiles/scripts/sampling_variants.py [N] [ROUNDS]

The hand-written loop (`sampling_contenders.DirectLoopContender`) and the worker (`VectorEnvWorker`, not
observing), each acting three ways: the loop's hand-written act (`HandActingAgent`), the agent's
``get_actions`` with ``act`` traced (`sampling_overhead.traced_config`) and step by step (`sampling_overhead.eager_config`: replays off, as every act was before they became the default).
So the loop with the framework's act shows what the act costs beside environment steps, and the worker
with the hand-written act what the worker's own bookkeeping costs; neither shows alone what it costs in
the loop (alone, the traced ``get_actions`` took 51 us against 55 us for the hand-written act, yet beside
the steps it took longer). Interleaved rounds of process CPU time over N environments; printed: us per
lockstep step (median over rounds) and the median of the per-round ratios to the loop with its own act
(`sampling_measure.time_contenders`, `sampling_overhead.paired_ratio`, as the overhead report takes them).

What it showed on the AMD host (1 env, 7 rounds; `reports/overhead_2026-11-28_amd_cuts.md` has the
rounds after it): with ``numpy().copy()`` of each output the traced worker stood at 0.83-0.85 of the loop,
with ``tolist`` (`TorchBackend.to_numpy` now, for up to 16 elements) at 0.90-0.91, though alone the two
differ by about 1 us; the worker's per-step check of the actions was about 3 us of a step (1 us alone).

A fourth act, ``flat`` (`FlatTorchAct`), runs the eager act's own PyTorch ops (three ``addmm``, ``relu``, the
dueling combination, ``argmax``, the coins' ``bernoulli_``, ``randint`` and ``where``) written in one function,
with the agent's weights and no framework around them. In the loop it ran as fast as the hand-written act
(which does the exploration in NumPy) or faster, while the eager act cost about 25 us a step more: the gap was
the Python between ``get_actions`` and the ops, not the ops (commit ``3cd365c`` cut part of it). Those runs were
before ``920ac43``, when the coins were a ``rand`` and a comparison with a Python float (``F.random_bernoulli``
took about 7 us a step off the flat act in the loop, and about 5 us off the eager act in the worker).
"""

import sys

from harness.measure.machine import configure_threads


class FlatTorchAct:
    """The eager PyTorch act's ops, written in one function: the agent's dueling MLP on its own weights, then
    epsilon-greedy with PyTorch draws (``epsilon`` fixed, a generator seeded with ``seed``)."""

    def __init__(self, agent, epsilon: float, seed: int = 0) -> None:
        import numpy as np
        import torch

        weights = {k: torch.from_numpy(np.array(v)) for k, v in agent.executor.get_weights().items()
                   if "/q_network/" in f"/{k}"}

        def weight(path: str):
            return next(v for k, v in weights.items() if k.endswith(path))
        self.k0, self.b0 = weight("dense_0/kernel"), weight("dense_0/bias")
        self.vk, self.vb = weight("value/kernel"), weight("value/bias")
        self.ak, self.ab = weight("advantage/kernel"), weight("advantage/bias")
        self.num_actions, self.epsilon = int(agent.num_actions), float(epsilon)
        self.gen = torch.Generator()
        self.gen.manual_seed(seed)
        self.state_space, self.action_space, self.config = agent.state_space, agent.action_space, agent.config
        probe = agent.state_space.with_batch_rank().sample(size=64, rng=0)
        np.testing.assert_array_equal(self.get_actions(probe, explore=False), agent.get_actions(probe, explore=False))

    def get_actions(self, states, explore: bool = True):
        import numpy as np
        import torch

        with torch.inference_mode():
            h = torch.relu(torch.addmm(self.b0, torch.from_numpy(states), self.k0))
            a = torch.addmm(self.ab, h, self.ak)
            greedy = torch.argmax(torch.addmm(self.vb, h, self.vk) + a - a.mean(-1, keepdim=True), dim=-1)
            if not explore:
                return np.array(greedy.tolist(), np.int64)
            n = greedy.shape[0]
            explore = torch.empty((n,), dtype=torch.bool).bernoulli_(self.epsilon, generator=self.gen)
            drawn = torch.randint(0, self.num_actions, (n,), generator=self.gen)
            actions = torch.where(explore, drawn, greedy)
        return np.array(actions.tolist(), np.int64)


def main(num_envs: int = 1, rounds: int = 7, seconds: float = 10.0) -> dict[str, float]:
    """``{contender: median per-round ratio to the loop}``, printed with us per step."""
    from reference_agents.agents import DQNAgent
    from spacegraph.reports import sampling_contenders as sc
    from spacegraph.reports import sampling_overhead as so

    configure_threads(1)
    traced = DQNAgent(so.traced_config("cartpole"), backend="torch", seed=0)
    eager = DQNAgent(so.eager_config("cartpole"), backend="torch", seed=0)  # step by step: replays off
    factory = sc.env_factory(so.comparable_config("cartpole"))
    direct = sc.DirectLoopContender(traced, factory, num_envs)

    def loop_acting_with(agent):
        loop = sc.DirectLoopContender(traced, factory, num_envs)
        loop.actor = agent   # anything with get_actions(states)
        return loop

    contenders = {"loop": direct, "loop, traced act": loop_acting_with(traced),
                  "loop, eager act": loop_acting_with(eager),
                  "loop, flat": loop_acting_with(FlatTorchAct(eager, sc.HAND_EPSILON)),
                  "worker, hand-written act": sc.WorkerContender(direct.actor, factory, num_envs, observe=False,
                                                                 timed=False),
                  "worker, traced act": sc.WorkerContender(traced, factory, num_envs, observe=False, timed=False),
                  "worker, eager act": sc.WorkerContender(eager, factory, num_envs, observe=False, timed=False)}
    return time_against_loop(contenders, num_envs, seconds, rounds)  # the warm-up records the traced act's graph


def time_against_loop(contenders: dict, num_envs: int, seconds: float, rounds: int) -> dict[str, float]:
    """Times ``contenders`` (one named "loop") in interleaved rounds of ``seconds`` CPU time each in all,
    closes them, prints us per lockstep step and the median per-round ratio to the loop; returns the ratios."""
    from spacegraph.reports import sampling_overhead as so
    from spacegraph.reports.sampling_measure import time_contenders

    try:
        timed = time_contenders(contenders, seconds=seconds, rounds=rounds, chunk_seconds=0.05, warmup_seconds=0.3)
    finally:
        for contender in contenders.values():
            contender.close()
    loop_rounds = timed["loop"]["frames_per_cpu_s_rounds"]
    width = max(map(len, timed)) + 2
    ratios = {}
    for name, t in timed.items():
        ratios[name] = so.paired_ratio(t["frames_per_cpu_s_rounds"], loop_rounds)
        per_step = 1e6 * num_envs * t["frames_per_step"] / t["frames_per_cpu_s_median"]
        print(f"{name:{width}s} {per_step:7.1f} us/step  ratio {ratios[name]:.3f}")
    return ratios


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
