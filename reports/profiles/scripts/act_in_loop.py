"""The act's cost beside environment steps, as the worker pays it (issue 18; reports/overhead_2026-11-28_intel.md).

    OMP_NUM_THREADS=1 python reports/profiles/scripts/act_in_loop.py [torch|tf] [cartpole|pong] [N]

Each contender acts once on the current observations and then steps the same `VectorEnv` of N
environments (a fixed action, so every contender steps alike); the environment step alone is timed too
and taken off. Contenders: the agent's ``get_actions`` (what `VectorEnvWorker` calls), the executor's
``execute("act", ...)``, the compiled chain of ``act`` called on tensors (no argument conversion, no
output copy; PyTorch only), ``get_actions`` of the same agent with ``act`` traced (``traced``; PyTorch only)
and the hand-written act of the direct loop (`sampling_contenders.HandActingAgent`).
Interleaved rounds of process CPU time (`harness.measure.timing.interleaved_rates`); the best round of
each is printed, in us per lockstep step,
beside the same acts timed in a tight loop on one observation. The agent is
`sampling_overhead.comparable_config`'s (the loop's constant epsilon).
"""

import sys

import numpy as np

from harness.measure.machine import configure_threads
from harness.measure.timing import interleaved_rates
from spacegraph.reports.sampling_overhead import make_contenders

ROUNDS, SECONDS = 9, 1.8   # per contender: 9 interleaved rounds of 0.2 s


def least_us(fns: dict) -> dict:
    """Each callable's µs per call in its fastest round (CPU time)."""
    rates = interleaved_rates(fns, SECONDS, ROUNDS)
    return {k: 1e6 / max(r["cpu"]) for k, r in rates.items()}


def main() -> None:
    backend = sys.argv[1] if len(sys.argv) > 1 else "torch"
    config = sys.argv[2] if len(sys.argv) > 2 else "cartpole"
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    configure_threads(1)
    contenders = make_contenders(backend, config, n)
    agent, hand = contenders["worker_act"].worker.agent, contenders["worker_hand"].worker.agent
    executor, envs = agent.executor, contenders["direct"].envs
    step = np.int64(0)
    actions = np.zeros(n, np.int64)
    acts = {"get_actions": lambda o: agent.get_actions(o),
            "execute": lambda o: executor.execute("act", o, step),
            "hand": lambda o: hand.get_actions(o)}
    if "worker_traced" in contenders:  # the same agent config with act traced (execution.trace: [act])
        traced = contenders["worker_traced"].worker.agent
        acts["traced"] = lambda o: traced.get_actions(o)
    if backend == "torch":
        import torch

        chain = executor.apis["act"].fn
        acts["chain"] = lambda o: chain(torch.from_numpy(o), torch.from_numpy(np.asarray(step)))
    state = {"obs": envs.reset(seed=0)}

    def beside_a_step(act):
        def one():
            act(state["obs"])
            state["obs"] = envs.step(actions)[5]
        return one

    in_loop = least_us({"env step": beside_a_step(lambda o: None),
                        **{k: beside_a_step(a) for k, a in acts.items()}})
    fixed = state["obs"]
    alone = least_us({k: (lambda a=a: a(fixed)) for k, a in acts.items()})
    env = in_loop.pop("env step")
    print(f"{backend} {config} N={n}: environment step {env:.1f} us")
    for k in acts:
        print(f"  {k:12s} beside a step {in_loop[k] - env:6.1f} us, alone {alone[k]:6.1f} us")
    for contender in contenders.values():
        contender.close()


if __name__ == "__main__":
    main()
