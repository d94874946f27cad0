"""The PyTorch ops one DQN update runs, framework against hand-written (issue 18; torch.profiler).

    python reports/profiles/scripts/update_ops.py cartpole > reports/profiles/update_dqn_cartpole_torch_ops_after.txt

Builds both sides as `spacegraph.reports.update_overhead.setup_pair` does (checked to agree), warms
them up, then records 10 updates of each and prints, per update, the number of top-level ops (the
ones called from Python, each paying eager dispatch) and each op's count and CPU time, most time
first. Op counts are exact; the times move with the host's load.
"""

import collections
import sys

import torch

from spacegraph.reports.update_overhead import setup_pair

CALLS = 10


def top_level_ops(update) -> tuple[collections.Counter, collections.Counter]:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(CALLS):
            update()
    counts, times = collections.Counter(), collections.Counter()
    for event in prof.events():
        if event.cpu_parent is None:
            counts[event.name] += 1
            times[event.name] += event.cpu_time_total
    return counts, times


def main(network: str) -> None:
    framework, hand = setup_pair("torch", 32, network=network)
    for side, update in (("framework", framework), ("hand-written", hand)):
        for _ in range(50):
            update()
        counts, times = top_level_ops(update)
        print(f"{side}: {sum(counts.values()) / CALLS:.0f} top-level ops per update, "
              f"{sum(times.values()) / CALLS:.0f} us in them")
        for name in sorted(counts, key=lambda k: -times[k]):
            print(f"    {name:72s} {counts[name] / CALLS:5.1f} {times[name] / CALLS:8.1f} us")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "cartpole")
