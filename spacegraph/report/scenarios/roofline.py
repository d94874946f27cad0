"""The roofline (issue 41): the best env frames/s this machine could reach for IMPALA and Ape-X on Pong with every core
busy on necessary work (env stepping, the policy's act call, the learner's update), each part measured alone, and
each agent's measured frames/s as a fraction of it, beside Sample Factory's published per-core figures and RLlib's
IMPALA measured here (`spacegraph.reports.roofline`).
"""

from __future__ import annotations

from typing import Any

from harness.measure.figures import Figure, Panel, Ratio, Series, Table
from spacegraph.report.registry import Context, Scenario, register
from spacegraph.reports.roofline import (AGENT_NAMES, TARGETS, VARIANT_NAMES, env_ratio, fractions, rooflines,
                                         steps as measure_steps)

PER_CORE = "Pong: env frames/s per core (learning on)"
ACT = "Act call: CPU ms per state against batch"
#: RLlib 2.60's IMPALA on Pong, measured on this project's 2-core machine (another run: a reference, never a ratio).
RLLIB = {"label": "RLlib IMPALA (this project's 2-core machine, 2 env runners, 120 min)", "frames_per_s": 347.0,
         "cores": 2, "source": "reports/history/2026-11-27_impala_pong_learning_120min"}
FORMULA = ("c = c_env + c_act / F + r * c_learn / F CPU-seconds per env frame; limit = cores / c env frames/s. c_env: "
           "the cheapest env path's CPU-s per frame; c_act: the act call's CPU-s per state at the actors' batch (their "
           "envs per actor, the act batch column); c_learn: the update call's CPU-s per transition (IMPALA, its "
           "config's rollouts) or replay record (Ape-X, its batches); F: frames per env step (4 on Pong); r: records "
           "learned per env step (IMPALA 1; Ape-X the measured run's replay ratio, which its free learner sets).")
METHOD = ("Each part alone in a fresh process with one framework thread (the env paths one child per path and round, "
          "interleaved; the act batches and the update in interleaved rounds within one child per backend), CPU time "
          "of the process; the agents are built from reference_agents/configs/impala_pong.yaml and apex_pong.yaml and "
          "called as their actors and learners call them (get_actions, Ape-X's get_actions_and_q_values, update). "
          "The limit leaves out transport, replay shards, weight publication and glue, so it is an upper bound. "
          "Measured: IMPALA on distributed TF with 2 actors (impala_pong.yaml as it is: its learner and actor "
          "backends), Ape-X on "
          "Ray with 2 workers and a free learner (as `--only apex` runs it); their fraction is of the highest limit "
          "over the backends.")


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else 1e3 * seconds


def _tables(result: dict[str, Any], rows: list[dict[str, Any]]) -> list[Table]:
    measured = result.get("measured") or {}
    cores = result["cores"]
    parts = []
    for r in rows:
        c = r.get("costs")
        rate = (measured.get(r["agent"]) or {}).get("frames_per_s")
        parts.append([AGENT_NAMES[r["agent"]], VARIANT_NAMES[r["variant"]], r["env_path"], r["act_batch"],
                      r["records_per_step"], *((_ms(c["env"]), _ms(c["act"]), _ms(c["learn"]), _ms(c["total"]),
                                                r["limit"], r["limit_per_core"], rate / r["limit"] if rate else None)
                                               if c else (f"({r['missing']})", None, None, None, None, None, None))])
    env = result.get("env") or {}
    python = (env.get("paths") or {}).get("python", {}).get("frames_per_cpu_s")
    env_rows = [[path, p.get("frames_per_cpu_s", f"({p.get('error')})"), _ms(p.get("cpu_s_per_frame")),
                 p["frames_per_cpu_s"] / python if python and "frames_per_cpu_s" in p else None,
                 len(p.get("rounds", []))] for path, p in (env.get("paths") or {}).items()]
    batch_rows = []
    for variant, got in (result.get("parts") or {}).items():
        if "error" in got:
            batch_rows.append(["-", VARIANT_NAMES[variant], f"(failed: {got['error']})", None, None])
            continue
        for agent, p in got["agents"].items():
            at = next((r.get("at_batch", {}) for r in rows if r["agent"] == agent and r["variant"] == variant), {})
            for b, a in sorted(p["act"].items(), key=lambda kv: int(kv[0])):
                batch_rows.append([AGENT_NAMES[agent], VARIANT_NAMES[variant], int(b), _ms(a["cpu_s"]), at.get(b)])
    runs = [[AGENT_NAMES[a], r.get("frames_per_s", f"({r.get('error', 'not run')})"),
             r["frames_per_s"] / cores if "frames_per_s" in r else None, r.get("replay_ratio"),
             f"{r['cpu_utilisation']:.0%}" if "cpu_utilisation" in r else "-", r.get("seconds")]
            for a, r in measured.items()]
    runs.append([RLLIB["label"], RLLIB["frames_per_s"], RLLIB["frames_per_s"] / RLLIB["cores"], None, "-",
                 f"(from {RLLIB['source']})"])
    return [Table("Necessary parts, CPU ms per env frame, and the limit (env frames/s)",
                  ["agent", "backend", "env path", "act batch", "records learned per env step", "env", "act", "learn",
                   "sum", "limit", "limit per core", "measured / limit"], parts),
            Table(f"Env stepping: frames per CPU-second ({env.get('num_envs', '?')} envs, random actions, one "
                  f"process; the workers' path: {env.get('configured', 'python')})",
                  ["env path", "frames/CPU-s (median)", "CPU ms per frame", "/ python", "rounds"], env_rows),
            Table("Act call at each batch: CPU ms per state, and the limit were the actors acting at that batch",
                  ["agent", "backend", "batch", "CPU ms per state", "limit (env frames/s)"], batch_rows),
            Table(f"Measured runs (learning on, Pong, {cores} cores)",
                  ["agent", "env frames/s", "per core", "replay ratio", "CPU", "seconds"], runs)]


def headline(ratios: list[Ratio], limits: dict[str, float] | None = None) -> str:
    """The headline ratios against their targets; without any, the limits (``{agent: frames/s}``)."""
    if not ratios:
        got = ", ".join(f"{AGENT_NAMES[a]} {v:,.0f}" for a, v in (limits or {}).items())
        return f"roofline (env frames/s): {got}; no measured run" if got else "no roofline: no part measured"
    return "; ".join(f"{r.name.split(':')[0]} {r.value:.2f} (target {r.target}: {'met' if r.met else 'missed'})"
                     for r in ratios)


def figures(result: dict[str, Any]) -> list[Figure]:
    """The per-core panel (measured, roofline, RLlib here, Sample Factory published), the act-batch panel, tables,
    the three ratios."""
    rows = rooflines(result)
    got = fractions(result, rows)
    cores = result["cores"]
    categories = [*AGENT_NAMES.values(), "RLlib IMPALA", "Sample Factory APPO"]
    panels = [Panel(title=PER_CORE, x_label="", y_label="env frames/s per core", categories=categories),
              Panel(title=ACT, x_label="batch (states per call)", y_label="CPU ms per state", x_log=True)]
    series = []
    best = {a: max((r for r in rows if r["agent"] == a and "limit" in r), key=lambda r: r["limit"], default=None)
            for a in AGENT_NAMES}
    series.append(Series("roofline (best backend, this machine)", [AGENT_NAMES[a] for a, r in best.items() if r],
                         [r["limit_per_core"] for r in best.values() if r], side="reference", panel=PER_CORE))
    measured = {a: r["frames_per_s"] / cores for a, r in (result.get("measured") or {}).items() if "frames_per_s" in r}
    if measured:
        series.append(Series("measured (this machine)", [AGENT_NAMES[a] for a in measured], list(measured.values()),
                             panel=PER_CORE))
    series.append(Series("RLlib IMPALA (this machine, another run)", ["RLlib IMPALA"],
                         [RLLIB["frames_per_s"] / RLLIB["cores"]], side="reference", panel=PER_CORE))
    for variant, parts in (result.get("parts") or {}).items():
        for agent, p in (parts.get("agents") or {}).items():
            pts = sorted((int(b), _ms(a["cpu_s"])) for b, a in p["act"].items())
            series.append(Series(f"{AGENT_NAMES[agent]}, {VARIANT_NAMES[variant]}", [b for b, _ in pts],
                                 [v for _, v in pts], panel=ACT))
    ratios = []
    for agent, f in got.items():
        ratios.append(Ratio(f"{AGENT_NAMES[agent]} on Pong: measured / roofline", f["fraction"],
                            ours=f"{f['measured']:,.0f} frames/s", peer=f"{f['limit']:,.0f} frames/s (limit, "
                                                                         f"{VARIANT_NAMES[f['variant']]})",
                            target=f">= {TARGETS[agent]:g}"))
    env = env_ratio(result)
    if env:
        ratios.append(Ratio(f"Env stepping: ours ({env['path']}) / {env['native_path']} frames per CPU-second",
                            env["ratio"],
                            ours=f"{env['ours']:,.0f}", peer=f"{env['native']:,.0f}", target=f">= {TARGETS['env']:g}"))
    onednn = result.get("onednn_parent")
    notes = [FORMULA, METHOD,
             f"TF_ENABLE_ONEDNN_OPTS of the report's process: {onednn if onednn is not None else 'unset (on)'}; the TF "
             "rows set it in their child (on: TensorFlow's default, as the learner and distributed-TF actors run; off: "
             "as Ray's actor processes run).",
             f"Measured {result.get('date')} at {result.get('commit')} on {result.get('machine')}"
             f"{' (quick budgets)' if result.get('quick') else ''}.", *result.get("notes", [])]
    failed = [f"{VARIANT_NAMES[v]}: {p['error']}" for v, p in (result.get("parts") or {}).items() if "error" in p]
    notes += [f"FAILED part child {f}" for f in failed]
    return [Figure(name="roofline", title="Roofline: IMPALA and Ape-X on Pong against this machine's limit",
                   figure_ref="issue 41", panels=panels, series=series, ratios=ratios, tables=_tables(result, rows),
                   notes=notes, raw=result,
                   headline=headline(ratios, {a: r["limit"] for a, r in best.items() if r}))]


def run(ctx: Context) -> list[Figure]:
    from spacegraph.reports.roofline import measure

    return figures(measure(quick=ctx.quick, log=ctx.progress.step))


def steps(ctx: Context) -> int:
    return measure_steps(ctx.quick)


SCENARIO = register(Scenario(name="roofline", title="Roofline", figure_ref="issue 41", run=run, steps=steps,
                             render=figures))
