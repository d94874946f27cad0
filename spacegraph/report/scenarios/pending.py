"""Figures whose measurement has not landed in this tree yet: IMPALA throughput (Fig. 9). Each says what is missing and
shows the published baselines alone (other hardware), so the report lists every figure of the issue.
"""

from __future__ import annotations

from harness.measure.figures import Figure, Panel
from spacegraph.report.registry import Context, Scenario, register

_PENDING = {
    "impala": ("IMPALA throughput", "RLgraph Fig. 9",
               [Panel(title="IMPALA-style throughput", x_label="workers", y_label="env frames/s", y_log=True)],
               "no IMPALA agent exists in this tree yet (only its v-trace and loss components)"),
}


def _runner(name: str):
    title, ref, panels, why = _PENDING[name]

    def run(ctx: Context) -> list[Figure]:
        ctx.progress.step("not measured yet")
        return [Figure(name=name, title=title, figure_ref=ref, panels=panels,
                       notes=[f"Not measured: {why}. The published figures below are shown alone; they are other "
                              "hardware and would never enter a ratio."])]
    return run


for _name, (_title, _ref, _panels, _why) in _PENDING.items():
    register(Scenario(name=_name, title=_title, figure_ref=_ref, run=_runner(_name)))
