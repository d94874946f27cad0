"""Act throughput (RLgraph Fig. 5b): the dueling Nature-DQN actor through the framework against hand-written
TF and PyTorch actors with the same weights, at batch 1-64 (`spacegraph.reports.act_measure`).

The peer is the hand-written actor on the same backend; the two are timed in interleaved rounds
and the ratio is the median of the per-round CPU-time ratios (act_measure's headline).
"""

from __future__ import annotations

from typing import Any

from harness.measure.figures import Figure, Panel, Ratio, Series, Table
from spacegraph.report.registry import Context, Scenario, register

TITLES = {"tf": "TF", "torch": "PyTorch"}
BATCHES = (1, 4, 16, 64)


def figures(result: dict[str, Any]) -> list[Figure]:
    """Calls/s against batch size per backend (ours solid, hand-written dashed) and framework / hand per batch."""
    from spacegraph.reports.act_measure import TARGET_RATIO

    rates = Panel(title="act calls/s (CPU time)", x_label="batch size", y_label="calls per CPU-second", x_log=True,
                  y_log=True)
    ratio_panel = Panel(title="framework / hand-written", x_label="batch size", y_label="ratio", x_log=True)
    series, ratios, rows = [], [], []
    for backend in result["config"]["backends"]:
        rs = [r for r in result["rows"] if r["backend"] == backend]
        xs = [r["batch"] for r in rs]
        series += [Series(f"ours, {TITLES[backend]}", xs, [r["cpu"]["framework_calls_per_s"] for r in rs],
                          panel=rates.title),
                   Series(f"hand-written {TITLES[backend]}", xs, [r["cpu"]["hand_calls_per_s"] for r in rs],
                          side="peer", panel=rates.title),
                   Series(f"{TITLES[backend]}", xs, [r["ratio"] for r in rs], panel=ratio_panel.title)]
        for r in rs:
            ratios.append(Ratio(f"act {TITLES[backend]} batch {r['batch']}: framework / hand-written", r["ratio"],
                                ours=f"{r['cpu']['framework_calls_per_s']:,.0f}/s",
                                peer=f"{r['cpu']['hand_calls_per_s']:,.0f}/s", target=f">= {TARGET_RATIO}"))
            rows.append([TITLES[backend], r["batch"], r["cpu"]["framework_calls_per_s"], r["cpu"]["hand_calls_per_s"],
                         r["ratio"], r["cpu"]["ratio_min_of_rounds"], r["cpu"]["ratio_max_of_rounds"],
                         r["wall"]["ratio_median_of_rounds"], r["max_abs_diff"]])
    cfg = result["config"]
    table = Table(title=f"{cfg['rounds']} interleaved rounds, {cfg['seconds']} s per contender per batch size",
                  header=["backend", "batch", "framework calls/CPU-s", "hand calls/CPU-s", "ratio (median of rounds)",
                          "min", "max", "wall-clock ratio", "max |diff|"], rows=rows)
    notes = [f"States float32[B,84,84,4] (Pong-shaped), {cfg['state_space']}; the uint8 -> float conversion is left "
             "out on both sides. Each hand-written actor is checked to agree with the framework before timing.",
             "Rates are on the process's CPU time (other processes on a shared machine do not lower them); the "
             "wall-clock ratio is given beside.", f"Thread pools: {cfg['threads']}."]
    return [Figure(name="act", title="Act throughput against hand-written TF and PyTorch",
                   figure_ref="RLgraph Fig. 5b", panels=[rates, ratio_panel], series=series, ratios=ratios,
                   tables=[table], notes=notes, raw=result)]


def run(ctx: Context) -> list[Figure]:
    from spacegraph.reports.act_measure import measure

    results = []
    for backend in ("tf", "torch"):
        ctx.progress.step(f"{backend}: batch {', '.join(map(str, BATCHES))}")
        results.append(measure(backends=(backend,), batch_sizes=BATCHES, seconds=0.8 if ctx.quick else 3.0,
                               rounds=4 if ctx.quick else 10))
    merged = dict(results[0])
    merged["config"] = {**results[0]["config"], "backends": ["tf", "torch"]}
    merged["rows"] = [row for r in results for row in r["rows"]]
    merged["environment"] = [r["environment"] for r in results]
    return figures(merged)


SCENARIO = register(Scenario(name="act", title="Act throughput", figure_ref="RLgraph Fig. 5b", run=run,
                             steps=lambda ctx: 2))
