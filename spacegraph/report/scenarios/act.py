"""Act throughput (RLgraph Fig. 5b): the dueling Nature-DQN actor through the framework against hand-written
TF and PyTorch actors with the same weights, at batch 1-64 (`spacegraph.reports.act_measure`); the full run
also times the PyTorch `Conv2D` layout variants and counts the ops per call (`spacegraph.reports.act_diagnosis`).

The peer is the hand-written actor on the same backend; the two are timed in interleaved rounds
and the ratio is the median of the per-round CPU-time ratios (act_measure's headline).
"""

from __future__ import annotations

from typing import Any

from harness.measure.figures import Figure, Panel, Ratio, Series, Table
from spacegraph.report.registry import Context, Scenario, register
from spacegraph.reports.act_measure import TARGET_RATIO

TITLES = {"tf": "TF", "torch": "PyTorch"}
BATCHES = (1, 4, 16, 64)


def figures(result: dict[str, Any]) -> list[Figure]:
    """Calls/s against batch size per backend (ours solid, hand-written dashed) and framework / hand per batch."""
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
    met = sum(r.met is True for r in ratios)
    return [Figure(name="act", title="Act throughput against hand-written TF and PyTorch",
                   figure_ref="RLgraph Fig. 5b", panels=[rates, ratio_panel], series=series, ratios=ratios,
                   tables=[table, *diagnosis_tables(result.get("diagnosis"))], notes=notes, raw=result,
                   headline=f"framework / hand-written act calls per CPU-second >= {TARGET_RATIO} in {met} of "
                            f"{len(ratios)} (backend, batch) settings; lowest {min(r.value for r in ratios):.3f}")]


def diagnosis_tables(diagnosis: dict[str, Any] | None) -> list[Table]:
    """The PyTorch layout variants (calls/CPU-s and ratio to the hand-written actor) and the ops per call."""
    if not diagnosis:
        return []
    names = ["framework", *diagnosis["variants"]]
    out = [Table(title="PyTorch: where the framework's act time goes (calls/CPU-s, ratio to hand-written); "
                       + "; ".join(f"{k}: {v}" for k, v in diagnosis["variants"].items()),
                 header=["batch", *names],
                 rows=[[row["batch"], *(f"{row[n]:.1f} ({row['ratios'][n]:.3f})" for n in names)]
                       for row in diagnosis["rows"]])]
    counts = diagnosis.get("op_counts") or {}
    if counts:
        rows = []
        for backend, c in counts.items():
            fw, hand = c["framework"], c["hand"]
            extra = {op: n - hand["by_op"].get(op, 0) for op, n in fw["by_op"].items()
                     if n > hand["by_op"].get(op, 0)}
            rows.append([backend, fw["total"], hand["total"], ", ".join(f"{op} {n}" for op, n in fw["by_op"].items()),
                         ", ".join(f"{op} +{n}" for op, n in extra.items()) or "none"])
        out.append(Table(title="Ops per act call", header=["backend", "framework ops", "hand-written ops",
                                                           "framework ops by type", "extra ops in the framework"],
                         rows=rows))
    return out


def run(ctx: Context) -> list[Figure]:
    from spacegraph.reports.act_measure import measure

    results = []
    for backend in ("tf", "torch"):
        ctx.progress.step(f"{backend}: batch {', '.join(map(str, BATCHES))}")
        results.append(measure(backends=(backend,), batch_sizes=BATCHES, seconds=0.8 if ctx.quick else 3.0,
                               rounds=4 if ctx.quick else 10, diagnose=backend == "torch" and not ctx.quick))
    merged = dict(results[0])
    merged["config"] = {**results[0]["config"], "backends": ["tf", "torch"]}
    merged["rows"] = [row for r in results for row in r["rows"]]
    merged["environment"] = results[-1]["environment"]
    merged["diagnosis"] = results[-1].get("diagnosis")
    return figures(merged)


SCENARIO = register(Scenario(name="act", title="Act throughput", figure_ref="RLgraph Fig. 5b", run=run,
                             steps=lambda ctx: 2,
                             render=figures))
