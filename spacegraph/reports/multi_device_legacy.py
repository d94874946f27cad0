"""The multi-device figure of results measured before processes mode (no ``format`` key): synchronous replicas as
towers on logical devices (TF logical CPUs, PyTorch replicas on ``cpu``) or on one GPU, against the plain graph.
`spacegraph.report.scenarios.multi_device` draws such a committed run with `figures`; new runs have a figure of
their own there.
"""

from __future__ import annotations

from typing import Any

from harness.measure.figures import Figure, Panel, Ratio, Series, Table

NO_GPU = ("No GPU on this machine: the replicas are logical devices sharing the same cores, so the figures show "
          "the strategy's overhead, not a speed-up; run `spacegraph report --only multi_device` on a machine with "
          "GPUs for that.")


def figures(result: dict[str, Any]) -> list[Figure]:
    """Samples/s per setting (bars, one panel per backend and loss), the table, and each setting's rate over the
    plain graph placed on the first device."""
    rows = result["rows"]
    groups = list(dict.fromkeys((r["backend"], r["loss"]) for r in rows))
    placed = {(r["backend"], r["loss"]): r["updates_per_s"] for r in rows if r["setting"].startswith("single on")}
    panels, series, ratios, cells = [], [], [], []
    for backend, loss in groups:
        own = [r for r in rows if (r["backend"], r["loss"]) == (backend, loss)]
        panel = Panel(title=f"{backend} {loss}: samples/s", y_label="samples/s",
                      categories=[r["setting"] for r in own])
        panels.append(panel)
        series.append(Series("ours", [r["setting"] for r in own], [r["samples_per_s"] for r in own],
                             panel=panel.title))
        for r in own:
            vs = r["updates_per_s"] / placed[(backend, loss)]
            cells.append([backend, loss, r["setting"], ", ".join(r["devices"]), r["updates_per_s"],
                          r["samples_per_s"], f"{min(r['rounds']):.0f}-{max(r['rounds']):.0f}", vs])
            if r["replicas"]:
                ratios.append(Ratio(f"{backend} {loss}: {r['setting']} / single on the first device", vs,
                                    ours=f"{r['updates_per_s']:,.1f} updates/s",
                                    peer=f"{placed[(backend, loss)]:,.1f} updates/s"))
    table = Table(title=f"Batch {result['batch']} (DQN: records; IMPALA: rollouts of 5 steps), MLP {result['hidden']}; "
                        f"median of {result['repeats']} interleaved runs of at least {result['seconds']} s",
                  header=["backend", "loss", "setting", "devices", "updates/s", "samples/s", "rounds (updates/s)",
                          "vs single on the first device"], rows=cells)
    gpus = result["machine"].get("cuda") or []
    notes = ["`single` is the graph without a strategy on the default device; `single on D` the same graph placed "
             "on the first device (what replicas compare with); `N replicas` the graph SyncReplicas expanded "
             "(N = 1 is the strategy's own overhead: sharding, the gradient tower, the weighted step).",
             result["note"], f"TensorFlow imported by this run: {result.get('tensorflow_imported')}."]
    if not gpus and not any(d.startswith(("cuda", "/gpu", "gpu")) for ds in result["devices"].values() for d in ds):
        notes.insert(0, NO_GPU)
    most = max((r for r in ratios), key=lambda r: int(r.name.split(": ")[1].split()[0]), default=None)
    headline = (f"{most.name}: {most.value:.2f} ({'GPUs: ' + ', '.join(gpus) if gpus else 'logical devices, no GPU'})"
                if most else "no replica rows")
    return [Figure(name="multi_device", title="Synchronous replicas: update throughput at 1, 2, 4 replicas",
                   figure_ref="RLgraph Fig. 8", panels=panels, series=series, ratios=ratios, tables=[table],
                   notes=notes, raw=result, headline=headline)]
