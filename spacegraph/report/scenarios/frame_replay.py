"""Replay at Atari scale (issue 13): our host frame replay (uncompressed and LZ4) beside RLlib's replay buffer
(compressed observations and not) on real Pong records, in one process, interleaved rounds; a whole
``dqn_pong`` process holding 1M transitions and ``build_agent`` times in fresh processes
(`spacegraph.reports.frame_replay_measure`).
"""

from __future__ import annotations

from typing import Any

from harness.measure.figures import Figure, Panel, Ratio, Series, Table
from spacegraph.report.registry import Context, Scenario, register

OPS = {"insert": "insert records", "sample": "sample 32 (as returned)", "sample_contiguous": "sample 32 + contiguous"}
METHOD = ("Ours: `HostFrameReplay(capacity, (84, 84), 4, prioritized=True, alpha=0.6, beta=0.4, compression=None | "
          "'lz4')`, the store `dqn_pong` uses; insert `store.add(records)`, sample `store.sample(32)` (views of a "
          "channel-first gather, what PyTorch's NCHW convolutions take) and `store.sample(32, layout='nhwc')` "
          "(C-contiguous NHWC, what TensorFlow takes). RLlib: `PrioritizedReplayBuffer(capacity, "
          "storage_unit='timesteps', alpha=0.6)` fed `SampleBatch`es compressed as `compress_observations=True` does "
          "(and not), sampled with `buffer.sample(32, beta=0.4)`. Rates are medians over interleaved rounds per "
          "CPU-second of this process (range in brackets). Bytes: accounted by each store, and the growth of resident "
          "memory while filling, per transition held.")


def _rng(s: dict[str, float]) -> str:
    return f"{s['median']:,.0f} ({s['min']:,.0f}-{s['max']:,.0f})"


def _gb(x: float | None) -> str:
    return "n/a" if x is None else f"{x / 1e9:.2f} GB"


def tables(result: dict[str, Any]) -> list[Table]:
    """Targets, rates, bytes per transition, and the whole-process and build sections when measured."""
    cfg, c = result["config"], result["contenders"]
    out = [Table(title="Targets (issue 13)", header=["target", "wanted", "measured", "status", "note"],
                 rows=[[v["target"], v["wanted"], None if v["figure"] is None else
                        (_gb(v["figure"]) if v["figure"] > 1e6 else v["figure"]), v["status"], v["note"]]
                       for v in result["verdicts"]]),
           Table(title=f"Median over {cfg['rounds']} interleaved rounds, {cfg['seconds']:g} s per operation and "
                       f"contender: per CPU-second (per wall-clock second)",
                 header=["contender", "capacity", *(f"{label}/CPU-s (/s)" for label in OPS.values())],
                 rows=[[x["title"], x["capacity"], *(f"{_rng(x[op]['per_cpu_s'])} ({_rng(x[op]['per_s'])})"
                                                     for op in OPS)] for x in c.values()]),
           Table(title="Bytes per transition", header=["contender", "held", "accounted B/transition",
                                                       "RSS growth B/transition", "1M accounted", "1M by RSS growth",
                                                       "fill records/CPU-s"],
                 rows=[[x["title"], x["held"], x["accounted_bytes_per_transition"], x["rss_bytes_per_transition"],
                        _gb(x["accounted_bytes_per_transition"] * 1e6), _gb(x["rss_bytes_per_transition"] * 1e6),
                        x["fill_records_per_cpu_s"]] for x in c.values()])]
    if result.get("full_process"):
        out.append(Table(
            title=f"A whole dqn_pong process (fresh, `build_agent` + {cfg['full_fill']:,} transitions + "
                  f"{cfg['full_updates']} updates); peak RSS is the child's VmHWM",
            header=["backend", "compression", "held", "replay bytes", "peak RSS", "replay + 1.5 GB", "peak met",
                    "build s", "fill s wall (CPU)", "ms per update"],
            rows=[[r["backend"], r["compression"] or "none", r["valid"], _gb(r["replay_bytes"]), _gb(r["peak_rss"]),
                   _gb(r["replay_plus_margin"]), "met" if r["peak_met"] else "missed", r["build_s"],
                   f"{r['fill_s']:.0f} ({r['fill_cpu_s']:.0f})", r["update_s"] / max(r["updates"], 1) * 1e3]
                  for r in result["full_process"]]))
    if result.get("build"):
        out.append(Table(title=f"build_agent('dqn_pong') in {cfg['build_runs']} fresh processes per backend",
                         header=["backend", "wall s median (range)", "CPU s median (range)", "1-min load per run"],
                         rows=[[b, f"{i['wall_s']['median']:.2f} ({i['wall_s']['min']:.2f}-{i['wall_s']['max']:.2f})",
                                f"{i['cpu_s']['median']:.2f} ({i['cpu_s']['min']:.2f}-{i['cpu_s']['max']:.2f})",
                                ", ".join(f"{x:.1f}" for x in i["load_average"])]
                               for b, i in result["build"].items()]))
    return out


def figures(result: dict[str, Any]) -> list[Figure]:
    """Sample rates and bytes per transition per contender (bars), the tables, ours / RLlib per operation."""
    c = result["contenders"]
    rates = Panel(title="sample batches of 32 per CPU-second", y_label="batches/CPU-s", y_log=True,
                  categories=["sample", "sample_contiguous"])
    size = Panel(title="bytes per transition", y_label="bytes", y_log=True, categories=["accounted", "RSS growth"])
    series = []
    for name, x in c.items():
        side = "peer" if name.startswith("rllib") else "ours"
        series += [Series(x["title"], rates.categories, [x[op]["per_cpu_s"]["median"] for op in rates.categories],
                          side=side, panel=rates.title),
                   Series(x["title"], size.categories, [x["accounted_bytes_per_transition"],
                                                        x["rss_bytes_per_transition"]], side=side, panel=size.title)]
    ratios = [Ratio(f"frame replay {key.split(' ')[1]}: {c[key.split('/')[0]]['title']} / "
                    f"{c[key.split('/')[1].split(' ')[0]]['title']} (speed)", value,
                    target="> 1" if "rllib_lz4" in key else None)
              for key, value in result["ratios"].items() if value is not None]
    measured = [v for v in result["verdicts"] if v["status"] != "not measured"]
    met = sum(v["status"] == "met" for v in measured)
    env = result["environment"]
    notes = [f"`{result['config']['env']}` records (3-step, gamma 0.99) of {result['config']['num_envs']} "
             f"environments stepped {result['config']['steps']} times with random actions "
             f"({result['config']['records']:,} records), recycled to fill every store to "
             f"{result['config']['capacity']:,} transitions.", METHOD,
             *([f"RLlib not measured: {result['rllib_note']}"] if result["rllib_note"] else []),
             *(f"`{k}` not measured: {v}" for k, v in result.get("skipped", {}).items())]
    if env.get("subprocess_sections"):
        s = env["subprocess_sections"]
        notes.append(f"The subprocess sections ({', '.join(s['redone'])}) were measured on {s['date']} at "
                     f"`{s['git_revision']}`" + (", the in-process part later (kept them as they were)"
                                                 if s.get("kept") else "") + ".")
    return [Figure(name="frame_replay", title="Replay at Atari scale: frame replay beside RLlib's replay buffer",
                   figure_ref="issue 13", panels=[rates, size], series=series, ratios=ratios, tables=tables(result),
                   notes=notes, peer_missing=result["rllib_note"], raw=result,
                   headline=f"{met} of {len(measured)} issue-13 targets met (1M Pong transitions within the memory "
                            "targets, sample rates, ratios to RLlib, build time, peak memory)")]


def run(ctx: Context) -> list[Figure]:
    from spacegraph.reports.frame_replay_measure import measure

    ctx.progress.step("Pong rollout, fills, interleaved rounds" + ("" if ctx.quick else ", 1M processes, builds"))
    quick = {"capacity": 2000, "num_envs": 2, "steps": 100, "seconds": 1.0, "rounds": 2, "rllib_uncompressed": 500}
    full = {"capacity": 100_000, "num_envs": 4, "steps": 1000, "seconds": 8.0, "rounds": 8, "full": True,
            "build_runs": 3}
    return figures(measure(rllib=ctx.peers, **(quick if ctx.quick else full)))


SCENARIO = register(Scenario(name="frame_replay", title="Frame replay at Atari scale", figure_ref="issue 13",
                             run=run, render=figures))
