"""Replay at Atari scale: our host frame replay (uncompressed and LZ4) beside RLlib's replay buffer, on Pong.

All in one process, on the same data: n-step records (3-step, gamma 0.99, as ``dqn_pong`` folds
them) of real ``ALE/Pong-v5`` frames (``reference_agents.environments.make_env(..., atari=True)``:
gray 84x84, 4 stacked, ``uint8[84,84,4]``) from several environments stepped in lockstep with
random actions; the rollout is recycled (taken again from its start) to fill every store to
``capacity``, in insert batches of ``insert_batch`` records in the worker's order.

Contenders (each prioritized, alpha 0.6, beta 0.4, as ``dqn_pong``): ours (`HostFrameReplay`, uncompressed
and LZ4) and RLlib's ``PrioritizedReplayBuffer`` (compressed as ``compress_observations=True`` does, and
not). Operations, timed in interleaved rounds: ``insert`` a batch of records and ``sample`` 32 transitions
as ``uint8[32,84,84,4]`` states and next states, as each store returns them and C-contiguous NHWC (ours: the
store's ``layout="nhwc"`` path). Bytes per transition: what the store accounts and the growth of resident
memory while filling.

Optional sections, each in fresh subprocesses (`frame_replay_process`): the peak resident memory
of a whole ``dqn_pong`` DQN process whose replay holds 1M transitions (``--full-process``), and
``build_agent("dqn_pong")`` times (``--build-runs``).

Modules: `frame_replay_contenders` (the Pong records, our stores and RLlib's), `frame_replay_measure`
(filling, interleaved rounds, bytes, the subprocess sections, ratios and verdicts); this one writes the
report (Markdown, plot, command line) and re-exports their names.

Run ``python -m spacegraph.reports.frame_replay_peers [--capacity N] [--full-process]``
(``--keep-subprocesses JSON``: measure the in-process part again, keeping that result's subprocess
sections; ``--redo-subprocesses JSON``: the other way round); it writes
``reports/frame_replay_vs_rllib.md``, ``.png`` and ``.json``. Without RLlib it measures ours only
and says so.
"""

from __future__ import annotations

import argparse
import functools
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from harness.measure.machine import REPO, environment  # noqa: E402,F401
from harness.measure.tables import markdown_table  # noqa: E402
from harness.measure.timing import interleaved_rates  # noqa: E402,F401
from spacegraph.reports import frame_replay_measure  # noqa: E402
from spacegraph.reports.frame_replay_contenders import (  # noqa: E402,F401
    ALPHA, BETA, ENV_ID, RLLIB_MODULES, SAMPLE_BATCH, TITLES, Ours, RecordStream, RLlibBuffer, available_bytes,
    make_contender, pong_rollout, rss_bytes, sample_contiguous)
from spacegraph.reports.frame_replay_measure import (  # noqa: E402,F401
    TARGETS, build_times, check_sample, fill, full_process, ratios, redo_in_process, redo_subprocesses, verdicts)
from spacegraph.reports.rllib import rllib_missing  # noqa: E402
from spacegraph.reports import read_result_json  # noqa: E402

REPORT_DIR = REPO / "reports"
STEM = "frame_replay_vs_rllib"


@functools.wraps(frame_replay_measure.measure)
def measure(*args: Any, **kwargs: Any) -> dict[str, Any]:
    # asks this module's `rllib_missing` whether RLlib imports, so replacing it here (as a test does) reaches it
    kwargs.setdefault("rllib_check", rllib_missing)
    return frame_replay_measure.measure(*args, **kwargs)


# ---- writing --------------------------------------------------------------------------------------------
def _gb(x: float | None) -> str:
    return "n/a" if x is None else f"{x / 1e9:.2f} GB"


def _rate(s: dict[str, float]) -> str:
    return f"{s['median']:,.0f} ({s['min']:,.0f}–{s['max']:,.0f})"


def rates_table(result: dict[str, Any]) -> str:
    rows = []
    for name, c in result["contenders"].items():
        rows.append([c["title"], f"{c['capacity']:,}", _rate(c["insert"]["per_cpu_s"]), _rate(c["insert"]["per_s"]),
                     _rate(c["sample"]["per_cpu_s"]), _rate(c["sample"]["per_s"]),
                     _rate(c["sample_contiguous"]["per_cpu_s"]), _rate(c["sample_contiguous"]["per_s"])])
    return markdown_table(["contender", "capacity", "insert records/CPU-s", "insert records/s (wall)",
                           "sample batches/CPU-s", "sample batches/s (wall)",
                           "sample + contiguous batches/CPU-s", "sample + contiguous batches/s (wall)"], rows)


def bytes_table(result: dict[str, Any]) -> str:
    rows = []
    for name, c in result["contenders"].items():
        rows.append([c["title"], f"{c['held']:,}", f"{c['accounted_bytes_per_transition']:,.0f}",
                     f"{c['rss_bytes_per_transition']:,.0f}", _gb(c["accounted_bytes_per_transition"] * 1e6),
                     _gb(c["rss_bytes_per_transition"] * 1e6),
                     f"{c['fill_records_per_cpu_s']:,.0f}"])
    return markdown_table(["contender", "held", "accounted B/transition", "RSS growth B/transition",
                           "1M accounted", "1M by RSS growth", "fill records/CPU-s"], rows)


def full_table(result: dict[str, Any]) -> str:
    rows = [[r["backend"], r["compression"] or "none", f"{r['valid']:,}", _gb(r["replay_bytes"]),
             _gb(r["peak_rss"]), _gb(r["replay_plus_margin"]), "met" if r["peak_met"] else "**missed**",
             _gb(r["peak_rss"] - r["replay_bytes"]), f"{r['build_s']:.1f}", f"{r['fill_s']:.0f} ({r['fill_cpu_s']:.0f})",
             f"{r['update_s'] / max(r['updates'], 1) * 1e3:.0f}"]
            for r in result.get("full_process", [])]
    return markdown_table(["backend", "compression", "transitions held", "replay bytes", "peak RSS",
                           "replay + 1.5 GB", "peak <= replay + 1.5 GB", "peak - replay", "build s",
                           "fill s wall (CPU)", "ms per update"], rows)


def build_table(result: dict[str, Any]) -> str:
    rows = [[b, _fmt_s(i["wall_s"]), _fmt_s(i["cpu_s"]), ", ".join(f"{x:.1f}" for x in i["load_average"])]
            for b, i in result.get("build", {}).items()]
    return markdown_table(["backend", "wall s, median (range)", "CPU s, median (range)", "1-min load per run"], rows)


def _fmt_s(s: dict[str, float]) -> str:
    return f"{s['median']:.2f} ({s['min']:.2f}–{s['max']:.2f})"


def verdict_table(result: dict[str, Any]) -> str:
    rows = []
    for v in result["verdicts"]:
        fig = v["figure"]
        text = "n/a" if fig is None else (_gb(fig) if fig > 1e6 else f"{fig:,.2f}" if fig < 100 else f"{fig:,.0f}")
        rows.append([v["target"], v["wanted"], text, v["status"] if v["status"] != "missed" else "**missed**",
                     v["note"]])
    return markdown_table(["target", "wanted", "measured", "status", "note"], rows)


def markdown(result: dict[str, Any]) -> str:
    cfg, env = result["config"], result["environment"]
    ver = result["versions"]
    parts = [
        "# Replay at Atari scale: frame replay vs RLlib's replay buffer (issue 13)",
        "",
        f"`{cfg['env']}` records (3-step, gamma 0.99) of {cfg['num_envs']} environments stepped in lockstep "
        f"{cfg['steps']} times with random actions ({cfg['records']:,} records, frames `uint8[84,84,4]` as "
        f"`make_env(..., atari=True)` gives them), recycled to fill every store to **{cfg['capacity']:,}** "
        f"transitions in inserts of {cfg['insert_batch']}; prioritized (alpha {cfg['alpha']}, beta {cfg['beta']}) "
        "everywhere. One process, interleaved rounds.",
        "",
        "## Targets",
        "",
        verdict_table(result),
        "",
        "## Insert and sample rates",
        "",
        f"Median over {cfg['rounds']} interleaved rounds (range in brackets), {cfg['seconds']:g} s per operation "
        "and contender in all. Per CPU-second of this process (what one dedicated core does; other processes "
        "on this shared machine do not lower it) and per wall-clock second. A sample is 32 prioritized "
        "transitions with states and next states as `uint8[32,84,84,4]` NumPy arrays holding every byte: "
        "**sample** takes them as each store returns them (RLlib: C-contiguous rows, decompressed; ours: "
        "`[32,84,84,4]` views of one gathered `[64,4,84,84]` array, i.e. frames channel-first in memory, the "
        "layout PyTorch's NCHW convolutions take without a copy); **sample + contiguous** has both "
        "C-contiguous NHWC, as a consumer that wants NHWC bytes (TensorFlow's tensor conversion) takes them: "
        "ours through the store's own NHWC path (`store.sample(32, layout=\"nhwc\")`, frames gathered "
        "channel by channel into a preallocated contiguous array, what a TensorFlow DQN agent asks for), "
        "RLlib's as returned (already contiguous).",
        "",
        rates_table(result),
        "",
        "Ours / RLlib (compressed observations) on the CPU-time medians (above 1: ours faster):",
        "",
        *[f"- {k}: {v:.2f}" for k, v in result["ratios"].items() if v is not None],
        *([f"- RLlib not measured: {result['rllib_note']}"] if result["rllib_note"] else []),
        *[f"- `{k}` not measured: {v}" for k, v in result["skipped"].items()],
        "",
        f"![rates and bytes]({STEM}.png)",
        "",
        "## Bytes per transition",
        "",
        "Accounted: ours `HostFrameReplay.nbytes()` (frames or LZ4 blobs with their 33-byte `bytes` headers and "
        "pointers, chains, transitions, segment trees); RLlib its own `stats()['est_size_bytes']` (the "
        "`SampleBatch.size_bytes()` of what it holds). RSS growth: the process's resident memory after the "
        "fill minus before it (after `gc.collect()`), per transition held: what the machine pays, Python "
        "objects included. The 1M columns multiply by 1M.",
        "",
        bytes_table(result),
        "",
    ]
    if result.get("full_process"):
        parts += [
            "## A whole Pong DQN process with a full replay",
            "",
            f"Each row a fresh process (`python -m spacegraph.reports.frame_replay_process peak`): "
            f"`build_agent('dqn_pong', backend=...)` (host frame replay, 1M capacity; `memory.compression` set), "
            f"the replay filled with {cfg['full_fill']:,} transitions recycled from the rollout above (batched "
            f"`HostFrameReplay.add` of 1,024), then {cfg['full_updates']} `agent.update()` calls (sample 32, "
            "learn, write priorities). Peak RSS is the child's `VmHWM` (`/proc/self/status`: the high-water mark "
            "of its own resident memory), not `ru_maxrss`, which Linux carries over from the parent that spawned "
            "the child (this report's process, holding several GB of stores) and so read the parent's size; "
            "replay bytes `HostFrameReplay.nbytes()`. The target: peak <= replay bytes + 1.5 GB.",
            "",
            full_table(result),
            "",
        ]
    if result.get("build"):
        parts += [
            "## `build_agent(\"dqn_pong\")`",
            "",
            f"{cfg['build_runs']} fresh processes per backend, interleaved; the backend and `reference_agents` "
            "are imported before the clock starts, so this is `build_agent` alone (config, env spaces, replay, "
            "graph, build). Wall clock and process CPU time; the 1-minute load average at each start (2 cores).",
            "",
            build_table(result),
            "",
        ]
    parts += [
        "## Method",
        "",
        "- **ours**: `reference_agents.components.memories.HostFrameReplay(capacity, (84, 84), 4, "
        "prioritized=True, alpha=0.6, beta=0.4, compression=None | 'lz4')`, the store `dqn_pong` uses "
        "(`memory: {type: frames, form: host}`). Insert: `store.add(records)`; sample: `store.sample(32)` "
        "(as returned: views of a channel-first gather) and `store.sample(32, layout='nhwc')` (contiguous: "
        "per-channel gather into C-contiguous NHWC; LZ4 decompresses each distinct frame once first).",
        "- **RLlib**: `ray.rllib.utils.replay_buffers.prioritized_replay_buffer.PrioritizedReplayBuffer("
        "capacity, storage_unit='timesteps', alpha=0.6)`. Insert: a `SampleBatch` with `obs`, `new_obs`, "
        "`actions`, `rewards`, `terminateds`, `truncateds`, compressed with `SampleBatch.compress(bulk=False)` "
        "(what `RolloutWorker` does under `AlgorithmConfig.env_runners(compress_observations=True)`: each "
        "observation LZ4-packed, base64 text), then `buffer.add`; sample: `buffer.sample(32, beta=0.4)`, "
        "whose `_encode_sample` concatenates the rows and calls `decompress_if_needed()`. The new API stack's "
        "`EpisodeReplayBuffer` family has no compression option, so the old stack's buffer is the one with it.",
        "- Timing: `harness.measure.timing.interleaved_rates` over all (contender, operation) pairs; inserts keep "
        "taking the next records of the rollout (the stores are full, so each insert overwrites the oldest).",
        "",
        "## Environment",
        "",
        f"- date: {env['date']}; git revision: `{env['git_revision']}`",
        f"- machine: {env['machine']} ({env['processor']})",
        f"- Python {env['python']}, NumPy {env['numpy']}, lz4 {ver.get('lz4')}, Ray/RLlib {ver.get('ray')}, "
        f"TensorFlow {env.get('tensorflow')}, PyTorch {env.get('torch')}",
        f"- load average (1, 5, 15 min) before: {env['load_average_before']}, after: "
        f"{env['load_average_after']} (the machine is shared); the run took {env['measurement_seconds']} s",
        *([f"- the subprocess sections ({', '.join(env['subprocess_sections']['redone'])}) were measured again on "
           f"{env['subprocess_sections']['date']} at `{env['subprocess_sections']['git_revision']}` (load "
           f"{env['subprocess_sections']['load_average_before']} before, "
           f"{env['subprocess_sections']['load_average_after']} after, "
           f"{env['subprocess_sections']['measurement_seconds']} s) with `--redo-subprocesses`"
           + ("; this run kept them as they were (`--keep-subprocesses`) and measured only the in-process "
              "part (rates, bytes)" if env["subprocess_sections"].get("kept") else "")]
          if env.get("subprocess_sections") else []),
        f"- raw numbers: `reports/{STEM}.json`",
        "",
        "## Reproduce",
        "",
        "```",
        "python3 -m venv ../venv-peers && ../venv-peers/bin/pip install -e '.[tf,torch,peers]'",
        f"../venv-peers/bin/python -m spacegraph.reports.frame_replay_peers --capacity "
        f"{cfg['capacity']} --seconds {cfg['seconds']:g} --rounds {cfg['rounds']}"
        + (" --full-process" if result.get("full_process") else "")
        + (f" --build-runs {cfg['build_runs']}" if cfg.get("build_runs") else ""),
        *(["# this run: the in-process part only, the subprocess sections kept from the previous result",
           f"../venv-peers/bin/python -m spacegraph.reports.frame_replay_peers "
           f"--keep-subprocesses reports/{STEM}.json"]
          if env.get("subprocess_sections", {}).get("kept") else []),
        "```",
        "",
    ]
    return "\n".join(parts)


def plot(result: dict[str, Any], path: str | Path) -> None:
    """Sample and insert rates per CPU-second (median, range as error bars) and bytes per transition at 1M."""
    from harness.measure.files import pyplot

    plt = pyplot("frame_replay_peers.plot")
    names = list(result["contenders"])
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for ax, op, label in ((axes[0], "sample", "batches of 32 per CPU-s"), (axes[1], "insert", "records per CPU-s")):
        # sample: as returned (the bar) with the contiguous variant's median as a marker
        med = [result["contenders"][n][op]["per_cpu_s"]["median"] for n in names]
        lo = [m - result["contenders"][n][op]["per_cpu_s"]["min"] for m, n in zip(med, names)]
        hi = [result["contenders"][n][op]["per_cpu_s"]["max"] - m for m, n in zip(med, names)]
        ax.bar(range(len(names)), med, yerr=[lo, hi], color=["C0" if n.startswith("ours") else "C1" for n in names])
        if op == "sample":
            ax.plot(range(len(names)), [result["contenders"][n]["sample_contiguous"]["per_cpu_s"]["median"]
                                        for n in names], "kv", label="+ contiguous NHWC")
            ax.legend(fontsize=8)
        ax.set_xticks(range(len(names)), names, rotation=20, fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel(label)
        ax.set_title(op)
    b = [result["contenders"][n]["rss_bytes_per_transition"] * 1e6 / 1e9 for n in names]
    a = [result["contenders"][n]["accounted_bytes_per_transition"] * 1e6 / 1e9 for n in names]
    x = np.arange(len(names))
    axes[2].bar(x - 0.2, a, 0.4, label="accounted")
    axes[2].bar(x + 0.2, b, 0.4, label="RSS growth")
    axes[2].axhline(TARGETS["bytes_1m"] / 1e9, color="grey", ls="--", lw=0.8)
    axes[2].axhline(TARGETS["bytes_1m_lz4"] / 1e9, color="grey", ls=":", lw=0.8)
    axes[2].set_xticks(x, names, rotation=20, fontsize=8)
    axes[2].set_ylabel("GB per 1M transitions")
    axes[2].set_yscale("log")
    axes[2].legend(fontsize=8)
    axes[2].set_title("bytes (targets 7.5 / 2 GB dashed)")
    fig.suptitle(f"Frame replay vs RLlib, Pong, capacity {result['config']['capacity']:,}, "
                 f"{result['environment']['date']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write(result: dict[str, Any], out_dir: str | Path = REPORT_DIR, stem: str = STEM) -> dict[str, Path]:
    from harness.measure.files import write_report

    return write_report(result, out_dir, stem, markdown, plot)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=100_000)
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--no-rllib", action="store_true")
    parser.add_argument("--rllib-uncompressed", type=int, default=20_000,
                        help="capacity of RLlib's buffer without compression (0: leave it out)")
    parser.add_argument("--full-process", action="store_true", help="peak RSS of dqn_pong processes with 1M replays")
    parser.add_argument("--full-fill", type=int, default=1_000_000)
    parser.add_argument("--backends", default="torch,tf")
    parser.add_argument("--build-runs", type=int, default=0)
    parser.add_argument("--out-dir", default=str(REPORT_DIR))
    parser.add_argument("--from-json", help="rewrite the report from a result JSON instead of measuring")
    parser.add_argument("--redo-subprocesses", metavar="JSON",
                        help="keep this result's in-process part and measure again only the sections asked for "
                             "(--full-process, --build-runs), on the same rollout (same envs, steps and seed)")
    parser.add_argument("--keep-subprocesses", metavar="JSON",
                        help="measure the in-process part (rates, bytes) again with this result's configuration "
                             "and keep its subprocess sections (full_process, build) as they are")
    args = parser.parse_args(argv)
    if args.from_json:
        result = read_result_json(args.from_json, "--from-json")
    elif args.keep_subprocesses:
        result = redo_in_process(read_result_json(args.keep_subprocesses, "--keep-subprocesses"), rllib=not args.no_rllib,
                                 rllib_uncompressed=args.rllib_uncompressed, rllib_check=rllib_missing)
    elif args.redo_subprocesses:
        result = redo_subprocesses(read_result_json(args.redo_subprocesses, "--redo-subprocesses"), args.full_process,
                                   args.full_fill, tuple(args.backends.split(",")), args.build_runs)
    else:
        result = measure(args.capacity, args.num_envs, args.steps, seconds=args.seconds, rounds=args.rounds,
                         rllib=not args.no_rllib, rllib_uncompressed=args.rllib_uncompressed,
                         full=args.full_process, full_fill=args.full_fill, backends=tuple(args.backends.split(",")),
                         build_runs=args.build_runs)
    paths = write(result, args.out_dir)
    print(verdict_table(result))
    print(rates_table(result))
    print(f"wrote {', '.join(str(p) for p in paths.values())}")
    return result


if __name__ == "__main__":
    main()
