"""The DQN learning report: Markdown (result tables, verdict, method, settings, environment) and the curves' PNG."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from harness.measure.tables import markdown_table
from spacegraph.reports.learning_criterion import REPO, SIDE_TITLES, Criterion
from spacegraph.reports.learning_ratios import METRIC_TITLES, TARGETS, fmt_ratio

REPORT_DIR = REPO / "reports"
STEM = "dqn_learning_vs_rllib"


def runs_table(result: dict[str, Any]) -> str:
    """Markdown: one row per run."""
    header = ["side", "seed", "solved at env steps", "training s", "training + eval s", "set-up s",
              "training ms per env step", "eval points", "load avg (1 min) start / mean / end", "stop"]
    rows: list[list[Any] | str] = []
    for run in result["runs"]:
        if "error" in run:
            rows.append(f"| {SIDE_TITLES[run['side']]} | {run['seed']} | failed: {run['error']} | | | | | | | |")
            continue
        loads = [p["load1"] for p in run["curve"]]
        load = f"{run['load_start'][0]:.1f} / {np.mean(loads) if loads else float('nan'):.1f} / {run['load_end'][0]:.1f}"
        if run["solved"]:
            steps, train, both = (f"**{run['solved_at']:,}**", f"{run['train_s_to_solve']:.1f}",
                                  f"{run['train_eval_s_to_solve']:.1f}")
        else:
            steps = f"not solved (> {run['env_steps']:,})"
            train, both = f"> {run['train_s']:.1f}", f"> {run['train_s'] + run['eval_s']:.1f}"
        per_step = f"{1e3 * run['train_s'] / run['env_steps']:.1f}" if run["env_steps"] else "n/a"
        rows.append([SIDE_TITLES[run["side"]], run["seed"], steps, train, both, f"{run['setup_s']:.1f}", per_step,
                     len(run["curve"]), load, run["stop_reason"]])
    return markdown_table(header, rows)


def ratio_table(result: dict[str, Any]) -> str:
    """Markdown: ours / RLlib per backend and metric, per seed and over all seeds, against the targets."""
    seeds = [str(s) for s in result["config"]["seeds"]]
    rows = []
    for side, metrics in result["comparison"].items():
        for metric, r in metrics.items():
            op, limit = TARGETS[metric]
            rows.append([f"{SIDE_TITLES[side]}, {METRIC_TITLES[metric]}", f"{op} {limit:g}",
                         *(fmt_ratio(r["per_seed"][s]) for s in seeds), f"**{fmt_ratio(r['all'])}**",
                         r["all"]["verdict"], *((f"**{fmt_ratio(r['median'])}**", r["median"]["verdict"])
                                                if "median" in r else ("-", "-"))])
    return markdown_table(["ours / RLlib", "target", *(f"seed {s}" for s in seeds), "all seeds", "verdict",
                           "median of seeds", "verdict"], rows)


def reading(result: dict[str, Any]) -> list[str]:
    """The verdict in sentences, generated from the numbers."""
    if not result["comparison"]:
        return [f"- RLlib was not measured ({result['rllib_note']}): no verdict against the targets."]
    lines = []
    for side, metrics in result["comparison"].items():
        steps, wall = metrics["env_steps"]["all"], metrics["train_s"]["all"]
        per_seed = {m: [r["verdict"] for r in metrics[m]["per_seed"].values()] for m in metrics}
        lines.append(f"- **{SIDE_TITLES[side]}**: fewer env steps than RLlib: **{steps['verdict']}** "
                     f"(ratio {fmt_ratio(steps)}; per seed {', '.join(per_seed['env_steps'])}); at most half "
                     f"RLlib's training wall time: **{wall['verdict']}** (ratio {fmt_ratio(wall)}; per seed "
                     f"{', '.join(per_seed['train_s'])}); with evaluation time counted: "
                     f"{metrics['train_eval_s']['all']['verdict']} ({fmt_ratio(metrics['train_eval_s']['all'])})"
                     + (f"; the ratio of the median training wall times over seeds: "
                        f"{fmt_ratio(metrics['train_s']['median'])} ({metrics['train_s']['median']['verdict']})"
                        if "median" in metrics["train_s"] else "") + ".")
    unsolved = [f"{SIDE_TITLES[r['side']]} seed {r['seed']}" for r in result["runs"]
                if "error" not in r and not r["solved"]]
    failed = [f"{SIDE_TITLES[r['side']]} seed {r['seed']} ({r['error']})" for r in result["runs"] if "error" in r]
    if unsolved:
        lines.append(f"- Not solved within the budget: {', '.join(unsolved)}; their values are lower bounds, "
                     "so ratios involving them are bounds (≤ / ≥).")
    if failed:
        lines.append(f"- Failed runs: {', '.join(failed)}.")
    spread = []
    for side in result["config"]["sides"]:
        solved = sorted(r["solved_at"] for r in result["runs"] if r["side"] == side and r.get("solved"))
        if len(solved) > 1:
            spread.append(f"{SIDE_TITLES[side]} {solved[0]:,}-{solved[-1]:,}")
    n = len(result["config"]["seeds"])
    lines.append(f"- {n} seed{'s' if n != 1 else ''} per side"
                 + (f"; env steps to solve ranged over seeds: {'; '.join(spread)}" if spread else "")
                 + ". Few seeds: the ratios indicate, they do not establish a statistically tested difference.")
    return lines


def settings_table(result: dict[str, Any]) -> str:
    """Markdown: our config beside the RLlib settings actually built (read from the RLlib run's config)."""
    ours = result["our_config"]
    rl = next((r["settings"] for r in result["runs"] if r.get("side") == "rllib" and "settings" in r), None)
    layers = ", ".join(f"{l['units']} {l.get('activation', 'linear')}" for l in ours["network"]["layers"])
    upd, loss, tgt, exp = ours["update"], ours["loss"], ours["target_sync"], ours["exploration"]
    our_col = {
        "network": f"4 → {layers} → dueling: linear V (1) and A (2) heads" if ours["network"].get("dueling")
        else f"4 → {layers} → linear Q (2)",
        "optimizer, lr": f"{ours['optimizer']['type']}, {ours['optimizer']['learning_rate']:g}, grad-norm clip "
                         f"{ours['optimizer'].get('clip_grad_norm')}",
        "replay": f"{ours['memory']['type']} (uniform), capacity {ours['memory']['capacity']:,}",
        "batch, updates": f"{upd['batch_size']} per update, {upd['repeats']} update every {upd['every']} env "
                          f"step(s) from {upd['start_after']:,} steps: {upd['batch_size'] * upd['repeats'] / upd['every']:g}"
                          " replayed transitions per env step",
        "n-step": str(loss["n_step"]),
        "double Q / dueling": f"{loss['double_q']} / {ours['network'].get('dueling', False)}",
        "loss": f"Huber (delta {loss['huber_delta']}), gamma {loss['gamma']}",
        "target network": f"soft update every {tgt['every']} update(s), tau {tgt['tau']}",
        "epsilon": f"{exp['type']} {exp['from']} → {exp['to']} over {exp['steps']:,} env steps",
    }
    rl_col: dict[str, str] = {}
    if rl is not None:
        nstep = rl["n_step"]
        frag = rl["rollout_fragment_length"]
        rl_col = {
            "network": f"4 → {rl['model']['fcnet_hiddens']} {rl['model']['fcnet_activation']} → dueling: V and A "
                       f"streams each with a {rl['model']['head_fcnet_hiddens']} relu hidden layer",
            "optimizer, lr": f"adam, {rl['lr']:g}, grad clip {rl['grad_clip']} ({rl['grad_clip_by']})",
            "replay": f"{rl['replay_buffer_config']['type']} (alpha {rl['replay_buffer_config'].get('alpha')}, beta "
                      f"{rl['replay_buffer_config'].get('beta')}), capacity {rl['replay_buffer_config']['capacity']:,}",
            "batch, updates": f"{rl['train_batch_size_per_learner']} per update, 1 update per {frag} sampled env "
                              f"steps from {rl['num_steps_sampled_before_learning_starts']:,} steps: "
                              f"{rl['train_batch_size_per_learner'] / frag:g} replayed transitions per env step",
            "n-step": (f"drawn per sampled transition: `rng.integers({nstep[0]}, {nstep[1]})`, i.e. "
                       f"{nstep[0]}-{nstep[1] - 1}" if isinstance(nstep, list) else str(nstep)),
            "double Q / dueling": f"{rl['double_q']} / {rl['dueling']}",
            "loss": f"{rl['td_error_loss_fn']}, gamma {rl['gamma']}",
            "target network": f"hard copy (tau {rl['tau']}) every {rl['target_network_update_freq']} sampled env "
                              "steps",
            "epsilon": "piecewise " + " → ".join(f"{e:g} at {t:,}" for t, e in rl["epsilon"]) + " env steps",
        }
    return markdown_table(["setting", f"ours (`{result['config']['agent_config']}`)", "RLlib (its tuned example)"],
                          ([key, value, rl_col.get(key, "n/a")] for key, value in our_col.items()))


def markdown(result: dict[str, Any]) -> str:
    """The whole report: result tables, verdict, curves, method, settings, environment, how to reproduce."""
    cfg, env, crit, budget = result["config"], result["environment"], result["config"]["criterion"], \
        result["config"]["budget"]
    rl = next((r["settings"] for r in result["runs"] if r.get("side") == "rllib" and "settings" in r), None)
    seeds = ",".join(map(str, cfg["seeds"]))
    parts = [
        "# DQN on CartPole-v1: ours vs RLlib, env steps and wall time to a greedy mean return of "
        f"{crit['min_return']:g}",
        "",
        "Target of issue 6 (a report, not a test): *fewer environment steps and at most half the wall time of "
        "RLlib's DQN reaching the same return on the same machine, measured side by side.*",
        "",
        "## Result",
        "",
        runs_table(result),
        "",
        "Ratios ours / RLlib (over all seeds: sum of ours / sum of RLlib's; median of seeds: median of ours / "
        "median of RLlib's). ≤ / ≥ mark bounds: an unsolved run "
        "counts with what it had spent when it stopped, which is less than solving would take.",
        "",
        ratio_table(result) if result["comparison"] else f"RLlib not measured: {result['rllib_note']}.",
        "",
        "## Verdict (generated from the numbers above)",
        "",
        *reading(result),
        "",
        f"![greedy evaluation mean against env steps and training wall time]({STEM}.png)",
        "",
        f"The curves show the mean of the {crit['screen_episodes']} screening episodes at every evaluation; "
        f"stars mark {crit['eval_episodes']}-episode means (played only when the screen reached "
        f"{crit['min_return']:g}).",
        "",
        "## Method",
        "",
        f"- **Criterion** (as the learning test `suites/agents/test_agent_specs.py`): every "
        f"{crit['eval_every']:,} training env steps the greedy policy plays {crit['screen_episodes']} episodes; "
        f"when their mean reaches {crit['min_return']:g} it plays {crit['eval_episodes']} (the first "
        f"{crit['screen_episodes']} reused); the run is solved at the first evaluation whose "
        f"{crit['eval_episodes']}-episode mean reaches {crit['min_return']:g}. Evaluation steps are not training "
        "steps. The evaluation is one function for every side (`greedy_returns`): episode i in its own "
        "`gymnasium.make('CartPole-v1')` reset with seed 50000 + 1000·seed + i, played once to its end, all "
        "in lockstep, so every side plays the same initial states. Ours acts with "
        "`agent.get_actions(obs, explore=False)`; RLlib with `algo.get_module().forward_inference({'obs': ...})"
        "['actions']` (the argmax of its Q-values; the env runner's module, whose weights RLlib syncs from the "
        "learner after every update).",
        "- **Env steps**: ours counts `VectorEnvWorker.total_steps`; RLlib its "
        "`env_runners/num_env_steps_sampled_lifetime`. Both train in chunks of exactly "
        f"{crit['eval_every']:,} env steps (RLlib: `min_sample_timesteps_per_iteration={crit['eval_every']}`, "
        "one `algo.train()` per chunk), so both are evaluated at the same env step counts.",
        "- **Wall time**: *training* is the time inside the training calls (`worker.run` / `algo.train()`) up "
        "to the solving evaluation; *with evaluation* adds the evaluations' time; *set-up* (building the agent, "
        "or starting Ray and building the algorithm) is listed apart and in neither.",
        f"- **Budget** per run: {budget['env_steps']:,} env steps or {budget['seconds']:g} s of training plus "
        f"evaluation, whichever first (checked after each chunk); each run is a fresh subprocess, killed "
        f"{budget['grace_seconds']:g} s after its budget.",
        f"- **Threads**: every side alike: the subprocess has {', '.join(f'{k}={v}' for k, v in cfg['thread_env'].items())}; "
        "`torch.set_num_threads(1)` and TensorFlow's intra/inter-op pools 1 (TensorFlow is imported before "
        "RLlib, which would otherwise switch TF's eager mode off). RLlib: `ray.init(address='local', "
        "num_cpus=2, include_dashboard=False)` on 127.0.0.1, `num_env_runners=0` (one local env runner, one "
        "env), `num_learners=0` (learner in the same process); started and shut down by each RLlib run.",
        f"- **Order**: seeds {seeds}; per seed the sides run one after the other "
        f"({', '.join(SIDE_TITLES[s] for s in cfg['sides'])}), so load from other processes on this shared "
        "machine falls on all sides alike; the 1-minute load average is in the table (start of the run, mean "
        "over its evaluations, end).",
        "",
        "## Settings",
        "",
        "Each side runs its own tuned CartPole configuration; RLlib's is the tuned example "
        "`rllib/tuned_examples/dqn/cartpole_dqn.py` (Ray 2.x) with RLlib's defaults for everything it does not "
        "set. The RLlib column is read off the built algorithm's config.",
        "",
        settings_table(result),
        "",
    ]
    if rl is not None:
        parts += ["RLlib's module as built:", "", "```", rl["module"], "```", ""]
    if result.get("notes"):
        parts += ["## Notes (written by hand after the run, not generated)", "",
                  *(f"- {note}" for note in result["notes"]), ""]
    parts += [
        "## Environment",
        "",
        f"- date: {env['date']}; git revision: `{env['git_revision']}`"
        + (f"; uncommitted at the start under reference_agents/ and harness/: {', '.join(f'`{d}`' for d in dirty)}"
           if (dirty := result.get("uncommitted_at_start")) else ""),
        f"- machine: {env['machine']} ({env['processor']}), no GPU; shared with other jobs",
        f"- Python {env['python']}, NumPy {env['numpy']}, TensorFlow {env['tensorflow']}, PyTorch {env['torch']}, "
        f"gymnasium {env['gymnasium']}, Ray/RLlib {env['ray']}",
        f"- load average (1, 5, 15 min) before: {env['load_average_before']}, after: {env['load_average_after']}; "
        f"the whole measurement took {env['measurement_seconds']:.0f} s",
        f"- raw numbers (every evaluation of every run): [`{STEM}.json`]({STEM}.json)",
        "",
        "## Reproduce",
        "",
        "```",
        "python3 -m venv ../venv-peers && ../venv-peers/bin/pip install -e '.[tf,torch,peers]'   # RLlib apart",
        f"PYTHONPATH=. ../venv-peers/bin/python -m spacegraph.reports.learning_peers --seeds {seeds} "
        f"--budget-steps {budget['env_steps']} --budget-seconds {budget['seconds']:g}" + criterion_flags(crit),
        "```",
        "",
    ]
    return "\n".join(parts)


def criterion_flags(crit: dict[str, Any]) -> str:
    """The command-line flags that rebuild a non-default criterion ('' for the default)."""
    default = dataclasses.asdict(Criterion())
    flags = {"min_return": "--min-return", "eval_episodes": "--eval-episodes", "screen_episodes": "--screen-episodes",
             "eval_every": "--eval-every"}
    return "".join(f" {flag} {crit[k]:g}" for k, flag in flags.items() if crit[k] != default[k])


def plot(result: dict[str, Any], path: str | Path) -> None:
    """A PNG: greedy screening mean against env steps (left) and against training wall seconds (right).

    Raises:
        ImportError: when matplotlib is not installed.
    """
    from harness.measure.files import pyplot

    plt = pyplot("learning_peers.plot")
    colors = {"ours_tf": "tab:orange", "ours_torch": "tab:red", "rllib": "tab:blue"}
    styles = ["-", "--", ":", "-."]
    seeds = result["config"]["seeds"]
    fig, (ax_steps, ax_time) = plt.subplots(1, 2, figsize=(12, 4.5))
    for run in result["runs"]:
        if "error" in run or not run["curve"]:
            continue
        steps = [p["env_steps"] for p in run["curve"]]
        secs = [p["train_s"] for p in run["curve"]]
        means = [p["screen_mean"] for p in run["curve"]]
        style = styles[seeds.index(run["seed"]) % len(styles)] if run["seed"] in seeds else "-"
        label = f"{SIDE_TITLES[run['side']]} seed {run['seed']}"
        for ax, xs in ((ax_steps, steps), (ax_time, secs)):
            ax.plot(xs, means, style, color=colors[run["side"]], label=label, linewidth=1.3, marker=".",
                    markersize=4)
            full = [(x, p["full_mean"]) for x, p in zip(xs, run["curve"]) if p["full_mean"] is not None]
            if full:
                ax.plot(*zip(*full), "*", color=colors[run["side"]], markersize=9)
    target = result["config"]["criterion"]["min_return"]
    for ax, xlabel in ((ax_steps, "training env steps"), (ax_time, "training wall seconds (no evaluation)")):
        ax.axhline(target, color="grey", linewidth=0.8, linestyle="--")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("greedy mean return")
        ax.legend(fontsize=7)
    ax_steps.set_title("against env steps")
    ax_time.set_title("against training wall time")
    fig.suptitle(f"DQN on {result['config']['env_id']}: ours vs RLlib, {result['environment']['date']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(result: dict[str, Any], out_dir: str | Path = REPORT_DIR, stem: str = STEM) -> dict[str, Path]:
    """Writes ``<stem>.md``, ``<stem>.png`` and ``<stem>.json`` into ``out_dir``; returns their paths."""
    from harness.measure.files import write_report

    return write_report(result, out_dir, stem, markdown, plot)
