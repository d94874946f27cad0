"""Replay insert and sample rates: our prioritized replay (both backends, through ``execute`` with NumPy)
beside RLlib's `PrioritizedReplayBuffer`, on the same filled memory and batch, timed in interleaved
rounds (ours, RLlib, ours, RLlib ...) per operation. The contenders are `spacegraph.reports.replay_peers`'s.
"""

from __future__ import annotations

from typing import Any

from harness.measure.figures import Figure, Panel, Ratio, Series, Table
from harness.measure.timing import interleaved_rates
from spacegraph.report.registry import Context, Scenario, register

OPERATIONS = ("insert", "sample", "update", "step")
TITLES = {"tf": "ours, TF", "torch": "ours, PyTorch", "rllib": "RLlib PrioritizedReplayBuffer"}


def measure(capacity: int, batch: int, seconds: float, rounds: int, peers: bool = True,
            progress: Any = None) -> dict[str, Any]:
    """Per operation, calls per CPU-second of every contender in interleaved rounds, and ours / RLlib.

    Returns:
        ``{"config", "rllib_note", "rates": {op: {contender: {"cpu": [...], "wall": [...]}}}}``.
    """
    from spacegraph.reports import replay_peers as rp

    alpha, beta, eps = 0.6, 0.4, 1e-6
    note = None if peers else "peers not requested (--no-peers)"
    if note is None and rp.rllib_version() is None:
        note = "ray[rllib] is not installed (pip install -e '.[peers]'); RLlib is left out"
    calls: dict[str, dict[str, Any]] = {}
    for backend in ("tf", "torch"):
        if progress:
            progress.step(f"fill ours ({backend}), {capacity:,} records")
        calls[backend] = rp.ours_calls(rp.build_ours(backend, capacity, alpha, beta, eps), batch)["execute"]
    if note is None:
        if progress:
            progress.step(f"fill RLlib, {capacity:,} records")
        calls["rllib"] = rp.rllib_calls(rp.build_rllib(capacity, alpha), batch, beta)
    rates = {}
    for op in OPERATIONS:
        if progress:
            progress.step(f"{op}: interleaved rounds")
        rates[op] = interleaved_rates({name: c[op] for name, c in calls.items()}, seconds, rounds)
    return {"config": {"capacity": capacity, "batch": batch, "alpha": alpha, "beta": beta, "epsilon": eps,
                       "record": rp.RECORD, "seconds": seconds, "rounds": rounds, "path": "GraphExecutor.execute"},
            "rllib_note": note, "rates": rates}


def figures(result: dict[str, Any]) -> list[Figure]:
    """Calls/s per operation and contender (bars), the table, and ours / RLlib per operation (median of rounds)."""
    import statistics

    rates = result["rates"]
    contenders = list(next(iter(rates.values())))
    panel = Panel(title="calls per CPU-second (best round)", y_label="calls/CPU-s", y_log=True,
                  categories=list(OPERATIONS))
    series = [Series(TITLES[c], list(OPERATIONS), [max(rates[op][c]["cpu"]) for op in OPERATIONS],
                     side="peer" if c == "rllib" else "ours", panel=panel.title) for c in contenders]
    ratios, rows = [], []
    batch = result["config"]["batch"]
    for op in OPERATIONS:
        for c in contenders:
            rows.append([op, TITLES[c], max(rates[op][c]["cpu"]), max(rates[op][c]["cpu"]) * batch,
                         statistics.median(rates[op][c]["wall"])])
            if c != "rllib" and "rllib" in contenders:
                per_round = [o / p for o, p in zip(rates[op][c]["cpu"], rates[op]["rllib"]["cpu"])]
                ratios.append(Ratio(f"replay {op}: {TITLES[c]} / RLlib (speed)", statistics.median(per_round),
                                    ours=f"{max(rates[op][c]['cpu']):,.0f} calls/CPU-s",
                                    peer=f"{max(rates[op]['rllib']['cpu']):,.0f} calls/CPU-s", target="> 1.0"))
    cfg = result["config"]
    table = Table(title=f"Batch {batch}, memory of {cfg['capacity']:,} records ({cfg['record']}), "
                        f"{cfg['rounds']} interleaved rounds of {cfg['seconds']} s per contender per operation",
                  header=["operation", "contender", "calls/CPU-s (best)", "records/CPU-s (best)",
                          "calls/s wall (median)"], rows=rows)
    notes = ["step = insert + sample + update in a row (what one training iteration costs). Ours is called through "
             "GraphExecutor.execute (NumPy in and out, the user-facing path).",
             "Ratios are speed ratios (ours / RLlib calls per CPU-second, median of the per-round ratios): above 1 "
             "means ours is faster."]
    step = ", ".join(f"{TITLES[c]} {max(rates['step'][c]['cpu']):,.0f}" for c in contenders)
    return [Figure(name="replay", title="Replay insert and sample rates", figure_ref="replay (no paper figure)",
                   panels=[panel], series=series, ratios=ratios, tables=[table], notes=notes,
                   peer_missing=result["rllib_note"], raw=result,
                   headline=f"prioritized replay steps (insert + sample + update of {batch}) per CPU-second: {step}")]


def run(ctx: Context) -> list[Figure]:
    result = measure(capacity=10_000 if ctx.quick else 100_000, batch=64, seconds=0.6 if ctx.quick else 2.0,
                     rounds=3 if ctx.quick else 6, peers=ctx.peers, progress=ctx.progress)
    return figures(result)


SCENARIO = register(Scenario(name="replay", title="Replay rates", figure_ref="replay", run=run,
                             steps=lambda ctx: 3 + len(OPERATIONS),
                             render=figures))
