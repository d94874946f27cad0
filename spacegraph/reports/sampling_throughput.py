"""Single-worker sampling throughput (RLgraph Fig. 7a): env frames/s of our worker, raw stepping and RLlib.

For each number of environments N (1, 2, 4, 8 by default), in one run:

* ``raw_ale``: the bare ALE environment (``gymnasium.make(env id)``, RGB frames) stepped in a
  `VectorEnv` of N with uniformly random actions: the emulator's limit;
* ``raw_env``: the agent's own environment (for Pong: gray frames resized to 84x84 and
  stacked by 4 env-side, ``reference_agents.workers.make_env(..., atari=True)``) in a
  `VectorEnv` of N, random actions: the limit for anything that steps that vector;
* ``ours_<backend>``: `VectorEnvWorker` on that vector with the DQN agent of the config
  acting (``explore=True``, one batched ``get_actions`` per lockstep step) and observing
  every transition into its replay memory, never updating (Fig. 7a measures sampling);
* ``rllib``: RLlib's DQN (new API stack, PyTorch) sampling with one local
  ``SingleAgentEnvRunner`` and ``num_envs_per_env_runner=N`` on the same environment
  (observations scaled to float32 ``[0, 1]`` env-side, which RLlib's CNN needs and ours does
  in graph), a Nature CNN (``conv_filters`` 32x8/4, 64x4/2, 64x3/1, 'valid') and a dueling
  head, ``sample(num_timesteps=..., explore=True)``, no learner.

Frames count emulator frames: env steps times the environment's frame skip (4 for
``ALE/*-v5``), read from the environment (`reference_agents.workers.frames_per_step`).

Timing: per N, the contenders are timed in interleaved rounds, each round giving each
contender about ``seconds / rounds`` of whole chunks; a chunk is a number of lockstep
steps chosen after a warm-up so that it lasts about ``chunk_seconds`` (so a per-call
overhead is amortised alike for every contender). Rounds are timed on the process's CPU
time and on the wall clock; a rate is the best round's, and the ratios use CPU time
(frames per CPU-second), which other processes competing for the cores do not lower.

No Ray cluster is started: RLlib's env runner is built and called in this process.

Modules: `sampling_contenders` (configs, environments and the contenders),
`sampling_measure` (chunks, interleaved rounds, ratios); this one writes the report
(Markdown, plot, command line) and re-exports their names.
Importing this module sets ``OPENBLAS_NUM_THREADS=1`` unless it is set (NumPy's BLAS
threads slow the env-side frame resizing down by more than 10x on a loaded 2-core machine).

Run ``python -m spacegraph.reports.sampling_throughput [--seconds S]``; it writes
``reports/sampling_throughput.md``, ``.png`` and ``.json``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from harness.measure.machine import configure_threads, environment  # noqa: E402,F401
from harness.measure.tables import markdown_table  # noqa: E402
from spacegraph.reports.sampling_contenders import (  # noqa: E402,F401
    BACKENDS, CARTPOLE_CONFIG, CONFIG_DIR, NUM_ENVS, PONG_CONFIG, REPO, RLLIB_CONV_FILTERS, SAMPLING_CAPACITY,
    RawContender, RLlibContender, ScaledImageEnv, TimedAgent, WorkerContender, bare_factory, env_factory,
    load_config, rllib_available)
from spacegraph.reports.sampling_measure import calibrate_chunk, measure, time_contenders, versions  # noqa: E402,F401
from spacegraph.reports import read_result_json  # noqa: E402

REPORT_DIR = REPO / "reports"


# ---- the report -------------------------------------------------------------------------------------
CONTENDER_TITLES = {"raw_ale": "raw ALE", "raw_env": "raw env", "ours_tf": "ours (TF)", "ours_torch": "ours (PyTorch)",
                    "rllib": "RLlib DQN (PyTorch)"}


def _contenders(result: dict[str, Any]) -> list[str]:
    return [k for k in CONTENDER_TITLES if k in result["rows"][0]]


def table(result: dict[str, Any]) -> str:
    """Markdown: frames per CPU-second (best round; wall-clock best round in brackets) per contender and N,
    then the CPU-time ratios."""
    names = _contenders(result)
    ratio_keys = list(result["rows"][0]["ratios"])
    header = ["N envs", *(f"{CONTENDER_TITLES[n]} frames/CPU-s (frames/s)" for n in names), *ratio_keys]
    rows = [[row["num_envs"], *(f"{row[n]['frames_per_cpu_s']:.0f} ({row[n]['frames_per_s']:.0f})" for n in names),
             *("n/a" if row["ratios"][k] is None else f"**{row['ratios'][k]:.2f}**" for k in ratio_keys)]
            for row in result["rows"]]
    return markdown_table(header, rows)


def frames_table(result: dict[str, Any]) -> str:
    """Markdown: env steps and frames each contender took in all (frames = steps x frames per step)."""
    names = _contenders(result)
    rows = [[row["num_envs"], *(f"{row[n]['steps']} / {row[n]['frames']} ({row[n]['chunk_steps']})" for n in names)]
            for row in result["rows"]]
    return markdown_table(["N envs", *(f"{CONTENDER_TITLES[n]} steps / frames (chunk)" for n in names)], rows)


def breakdown_table(result: dict[str, Any]) -> str:
    """Markdown: where our worker's time went per backend and N (acting, observing, the rest)."""
    ours = [n for n in _contenders(result) if n.startswith("ours_")]
    rows = []
    for row in result["rows"]:
        cells = []
        for n in ours:
            b = row[n]["breakdown"]
            cells.append(f"{b['act_share']:.0%} / {b['observe_share']:.0%} / {b['other_share']:.0%}")
        rows.append([row["num_envs"], *cells])
    return markdown_table(["N envs", *(f"{CONTENDER_TITLES[n]} act / observe+insert / env+worker" for n in ours)],
                          rows)


def summary(result: dict[str, Any]) -> list[str]:
    """Sentences read off the numbers (CPU-time ratios; wall-clock ones in brackets)."""
    lines = []
    for key in result["rows"][0]["ratios"]:
        values = [(r["num_envs"], r["ratios"][key], r["wall_ratios"][key]) for r in result["rows"]
                  if r["ratios"][key] is not None]
        if values:
            lines.append(f"- {key}: " + ", ".join(f"N={n} {v:.2f} ({w:.2f})" for n, v, w in values) + ".")
    if result["rllib_note"]:
        lines.append(f"- RLlib not measured: {result['rllib_note']}.")
    return lines


def _repo_relative(path: str) -> str:
    """``path`` relative to the repository when it lies inside it (reports name files portably)."""
    try:
        return str(Path(path).resolve().relative_to(REPO))
    except (ValueError, OSError):
        return path


def markdown(result: dict[str, Any]) -> str:
    """The whole report: result tables, reading, method, environment, how to reproduce."""
    cfg, env, ver = result["config"], result["environment"], result["versions"]
    frames_per_step = result["rows"][0]["raw_env"]["frames_per_step"]
    parts = [
        "# Single-worker sampling throughput (RLgraph Fig. 7a)",
        "",
        f"Environment `{cfg['env']['id']}` ({frames_per_step:g} emulator frames per env step; frames/s count "
        f"emulator frames = env steps x {frames_per_step:g}), one worker in one process, N environments stepped "
        f"in lockstep, N = {', '.join(map(str, cfg['num_envs']))}. "
        f"Agent config `{_repo_relative(cfg['agent_config'])}` "
        f"(network {cfg['network']}, in-graph preprocessing {cfg['preprocessing']}).",
        "",
        "## Result",
        "",
        "Emulator frames per CPU-second of the measuring process (best round; the wall-clock frames/s of the "
        "best round in brackets), and the ratios of the CPU-time rates:",
        "",
        table(result),
        "",
        "![frames/s per number of environments](sampling_throughput.png)",
        "",
        "## Reading (generated from the numbers above)",
        "",
        "Ratios per N on CPU time (wall clock in brackets):",
        "",
        *summary(result),
        "",
        "## What each column runs",
        "",
        *(["- **raw ALE**: `gymnasium.make(id)` with its defaults (RGB frames), N in a "
           "`reference_agents.workers.VectorEnv`, uniformly random actions: the emulator's limit."]
          if "raw_ale" in result["rows"][0] else []),
        "- **raw env**: the agent's environment (`reference_agents.workers.make_env(id, atari=...)`: "
        "for Atari gray 84x84 frames stacked by 4 env-side) in the same `VectorEnv`, random actions: the "
        "limit for anything stepping this vector.",
        "- **ours**: `VectorEnvWorker(agent, env, num_envs=N, observe=True, update=False, explore=True)`: one "
        "batched `agent.get_actions(obs, explore=True)` per lockstep step (network, epsilon-greedy and "
        "in-graph preprocessing), every transition passed to `agent.observe` (n-step folding and "
        "staging), episode accounting; no updates. `DQNAgent.observe` stages transitions and the agent "
        "inserts them into replay when it flushes (its update schedule does this before updating); here "
        "each timed chunk ends with `agent.flush()`, one batched insert. The agent is the config's, with "
        f"the replay capacity set to {cfg['memory'].get('capacity')} (it wraps; an insert costs the same).",
        "- **RLlib**: Ray RLlib's `DQNConfig` (new API stack, PyTorch), `env_runners(num_env_runners=0, "
        "num_envs_per_env_runner=N)`, the same environment factory with observations scaled to float32 "
        "[0, 1] env-side (RLlib's CNN takes floats; ours divides in graph), "
        f"`conv_filters={RLLIB_CONV_FILTERS}`, `head_fcnet_hiddens=[512]`, dueling and double Q; a local "
        "`SingleAgentEnvRunner` timed through `sample(num_timesteps=chunk, explore=True)` (its default "
        "epsilon-greedy; episodes returned as NumPy), no learner and no Ray cluster. RLlib's dueling head "
        "has a 512-unit hidden layer in each of the value and advantage streams (ours shares one), "
        "about 17 % more multiply-adds per state. RLlib's `sample` returns the episodes; adding them to a "
        "replay buffer is the algorithm's next step and is not timed here, while ours includes the insert.",
        "",
        "Frames counted (env steps / frames in all, and the chunk in env steps):",
        "",
        frames_table(result),
        "",
        "Where our worker's time went (shares of the CPU time of the timed rounds: `agent.get_actions`, "
        "`agent.observe` with `agent.flush` (the replay insert), and the rest, which is stepping the "
        "environments and the worker's bookkeeping):",
        "",
        breakdown_table(result),
        "",
        f"Timing: per N, {cfg['rounds']} interleaved rounds of about {cfg['seconds'] / cfg['rounds']:.1f} s "
        f"per contender ({cfg['seconds']:g} s each in all) after {cfg['warmup_seconds']:g} s of untimed "
        f"warm-up, in whole chunks lasting about {cfg['chunk_seconds']:g} s; the order of the contenders "
        "alternates between rounds. Each round is timed on the process's CPU time (`time.process_time`) "
        "and on the wall clock; **the ratios use CPU time**, because this machine is shared and CPU time "
        "counts only the work this process did (everything runs in this one process; with one thread per "
        "framework, frames per CPU-second is what one dedicated core would sample). Threads: "
        + str(cfg["threads"]) + f"; OPENBLAS_NUM_THREADS={cfg['openblas_num_threads']}.",
        "",
    ]
    if result.get("rllib_model"):
        parts += ["RLlib's module as built:", "", "```", result["rllib_model"], "```", ""]
    parts += [
        "## Environment",
        "",
        f"- date: {env['date']}; git revision: `{env['git_revision']}`",
        f"- machine: {env['machine']} ({env['processor']}), no GPU",
        f"- Python {env['python']}, NumPy {env['numpy']}, TensorFlow {env['tensorflow']}, PyTorch {env['torch']}, "
        f"gymnasium {ver['gymnasium']}, ale-py {ver['ale_py']}, Ray/RLlib {ver['ray']}",
        f"- load average (1, 5, 15 min) before: {env['load_average_before']}, after: {env['load_average_after']} "
        f"(the machine is shared; a load above the core count means other processes competed); "
        f"the run took {env['measurement_seconds']} s",
        "- raw numbers: `reports/sampling_throughput.json`",
        "",
        "## Reproduce",
        "",
        "```",
        "cd /work/main",
        ".venv/bin/pip install -e '.[peers]'   # RLlib",
        f"PYTHONPATH=. .venv/bin/python -m spacegraph.reports.sampling_throughput --seconds {cfg['seconds']:g} "
        f"--rounds {cfg['rounds']}",
        "```",
        "",
        "The asv benchmarks: `asv_bench/benchmarks/sampling.py` (Pong and CartPole worker frames/s and "
        "ratios; the RLlib comparison is skipped where RLlib is not installed).",
        "",
    ]
    return "\n".join(parts)


def plot(result: dict[str, Any], path: str | Path) -> None:
    """A PNG: frames per CPU-second against N per contender (left) and ours / raw env, ours / RLlib (right).

    Raises:
        ImportError: when matplotlib is not installed.
    """
    from harness.measure.files import pyplot

    plt = pyplot("sampling_throughput.plot")
    ns = [r["num_envs"] for r in result["rows"]]
    fig, (ax_rate, ax_ratio) = plt.subplots(1, 2, figsize=(11, 4))
    for name in _contenders(result):
        ax_rate.plot(ns, [r[name]["frames_per_cpu_s"] for r in result["rows"]], "o-" if "ours" in name else "s--",
                     label=CONTENDER_TITLES[name])
    for key in result["rows"][0]["ratios"]:
        values = [r["ratios"][key] for r in result["rows"]]
        if all(v is not None for v in values):
            ax_ratio.plot(ns, values, "o-", label=key)
    for ax in (ax_rate, ax_ratio):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.set_xlabel("environments per worker (N)")
        ax.legend(fontsize=8)
    ax_rate.set_yscale("log")
    ax_rate.set_ylabel("emulator frames per CPU-second")
    ax_rate.set_title(f"{result['config']['env']['id']}: single-worker sampling")
    ax_ratio.axhline(1.0, color="grey", linewidth=0.8)
    ax_ratio.set_ylabel("ratio of frames per CPU-second")
    ax_ratio.set_title("ours / raw env and ours / RLlib")
    fig.suptitle(f"Sampling throughput, {result['environment']['date']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(result: dict[str, Any], out_dir: str | Path = REPORT_DIR, stem: str = "sampling_throughput"
          ) -> dict[str, Path]:
    """Writes ``<stem>.md``, ``<stem>.png`` and ``<stem>.json`` into ``out_dir``; returns their paths."""
    from harness.measure.files import write_report

    return write_report(result, out_dir, stem, markdown, plot)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line: measure, write the report files, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(PONG_CONFIG))
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--num-envs", default=",".join(map(str, NUM_ENVS)))
    parser.add_argument("--seconds", type=float, default=8.0, help="time per contender per N")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--no-rllib", action="store_true")
    parser.add_argument("--out-dir", default=str(REPORT_DIR))
    parser.add_argument("--from-json", help="rewrite the report from a result JSON instead of measuring")
    args = parser.parse_args(argv)
    if args.from_json:
        result = read_result_json(args.from_json, "--from-json")
    else:
        result = measure(args.config, tuple(args.backends.split(",")),
                         tuple(int(n) for n in args.num_envs.split(",")), seconds=args.seconds, rounds=args.rounds,
                         rllib=not args.no_rllib)
    paths = write(result, args.out_dir)
    print(table(result))
    print("\n".join(summary(result)))
    print(f"wrote {', '.join(str(p) for p in paths.values())}")
    return result


if __name__ == "__main__":
    main()
