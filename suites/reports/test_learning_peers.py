"""DQN learning vs RLlib (the ``learning`` scenario): the shared greedy evaluation, the train/evaluate loop, ratios
and verdicts, a tiny real run of ours, its figure, the subprocess time bound; a tiny RLlib run when RLlib is
installed."""

from __future__ import annotations

import importlib.util
import json

import gymnasium as gym
import numpy as np
import pytest

from harness.measure.figures import plot_figure
from spacegraph.report import rerender
from spacegraph.report.registry import SCENARIOS
from spacegraph.report.scenarios import learning as learning_scenario
from spacegraph.reports import learning_criterion, learning_ratios, learning_runs, learning_sides

TINY = learning_criterion.Criterion(eval_every=300, screen_episodes=2, eval_episodes=3)


def pole_controller(obs: np.ndarray) -> np.ndarray:
    """Pushes the cart under the falling pole: keeps CartPole up for all 500 steps."""
    return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)


def always_left(obs: np.ndarray) -> np.ndarray:
    return np.zeros(len(obs), np.int64)


def hand_played(policy, seed: int) -> float:
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        obs, r, terminated, truncated, _ = env.step(int(policy(obs[None])[0]))
        total, done = total + r, terminated or truncated
    env.close()
    return total


# ---- the shared evaluation ---------------------------------------------------------------------------
@pytest.mark.parametrize("policy", [always_left, lambda o: (o[:, 3] > 0.3).astype(np.int64)])
def test_greedy_returns_equal_episodes_played_one_by_one(policy):
    seeds = [3, 17, 50_000, 50_001, 91]
    got = learning_criterion.greedy_returns(policy, seeds)
    expected = [hand_played(policy, s) for s in seeds]
    assert got.tolist() == expected
    assert len(set(expected)) > 1  # episodes of different lengths: the lockstep masking is exercised


def test_greedy_returns_rejects_a_policy_with_the_wrong_number_of_actions():
    with pytest.raises(ValueError, match="returned 1 actions for 3 observations"):
        learning_criterion.greedy_returns(lambda o: np.zeros(1, np.int64), [0, 1, 2])


def test_evaluate_plays_the_full_evaluation_only_after_a_passing_screen():
    crit = learning_criterion.Criterion(screen_episodes=3, eval_episodes=12)
    good = learning_criterion.evaluate(pole_controller, crit, seed=1)
    assert good["screen_mean"] == good["full_mean"] == 500.0
    bad = learning_criterion.evaluate(always_left, crit, seed=1)
    seeds = [learning_criterion.eval_seed(1) + i for i in range(3)]
    assert bad["full_mean"] is None
    assert bad["screen_mean"] == pytest.approx(np.mean([hand_played(always_left, s) for s in seeds]))


# ---- the train/evaluate loop -----------------------------------------------------------------------------
class FakeRunner:
    """Counts chunks; acts like ``always_left`` until ``good_after`` chunks, then balances the pole."""

    def __init__(self, chunk: int, good_after: int) -> None:
        self.chunk, self.good_after, self.steps = chunk, good_after, 0

    def train_chunk(self) -> int:
        self.steps += self.chunk
        return self.steps

    def act(self, obs):
        return pole_controller(obs) if self.steps >= self.good_after * self.chunk else always_left(obs)


def test_train_until_solved_stops_at_the_first_passing_evaluation():
    run = learning_runs.train_until_solved(FakeRunner(100, good_after=3), 0, learning_criterion.Criterion(eval_every=100, screen_episodes=2,
                                                                                eval_episodes=4), learning_criterion.Budget(1000))
    assert run["solved"] and run["stop_reason"] == "solved" and run["solved_at"] == 300
    assert [p["env_steps"] for p in run["curve"]] == [100, 200, 300]
    assert [p["full_mean"] for p in run["curve"]] == [None, None, 500.0]
    assert run["train_s_to_solve"] == run["train_s"] and run["train_eval_s_to_solve"] == pytest.approx(
        run["train_s"] + run["eval_s"])


@pytest.mark.parametrize("budget,reason,points", [(learning_criterion.Budget(env_steps=250), "env_steps", 3),
                                                  (learning_criterion.Budget(seconds=1e-9), "seconds", 1)])
def test_train_until_solved_stops_at_the_budget(budget, reason, points):
    run = learning_runs.train_until_solved(FakeRunner(100, good_after=99), 0, learning_criterion.Criterion(eval_every=100, screen_episodes=2,
                                                                                 eval_episodes=2), budget)
    assert not run["solved"] and run["stop_reason"] == reason and len(run["curve"]) == points
    assert run["solved_at"] is None and run["train_s_to_solve"] is None


# ---- ratios and verdicts -----------------------------------------------------------------------------
def fake_run(side, seed, steps, train_s, solved=True, eval_s=1.0):
    run = {"side": side, "seed": seed, "solved": solved, "env_steps": steps, "train_s": train_s, "eval_s": eval_s,
           "solved_at": steps if solved else None, "train_s_to_solve": train_s if solved else None,
           "train_eval_s_to_solve": train_s + eval_s if solved else None}
    return run


@pytest.mark.parametrize("ours,rllib,kind,value,steps_verdict,time_verdict", [
    ((20_000, 50.0, True), (60_000, 200.0, True), "exact", 1 / 3, "met", "met"),
    ((60_000, 150.0, True), (60_000, 200.0, True), "exact", 1.0, "missed", "missed"),
    ((20_000, 50.0, True), (150_000, 900.0, False), "at_most", 2 / 15, "met", "met"),
    ((140_000, 600.0, True), (150_000, 900.0, False), "at_most", 14 / 15, "met", "undetermined"),
    ((150_000, 300.0, False), (100_000, 900.0, True), "at_least", 1.5, "missed", "undetermined"),
    ((150_000, 300.0, False), (150_000, 900.0, False), None, None, "undetermined", "undetermined"),
])
def test_ratios_bounds_and_verdicts(ours, rllib, kind, value, steps_verdict, time_verdict):
    result = {"config": {"seeds": [0], "sides": ["ours_torch", "rllib"]},
              "runs": [fake_run("ours_torch", 0, *ours), fake_run("rllib", 0, *rllib)]}
    cmp = learning_ratios.compare(result)["ours_torch"]
    steps = cmp["env_steps"]["all"]
    assert steps["kind"] == kind and steps["verdict"] == steps_verdict
    assert steps["value"] == (None if value is None else pytest.approx(value))
    assert cmp["train_s"]["all"]["verdict"] == time_verdict
    assert cmp["env_steps"]["per_seed"]["0"] == steps


def test_ratio_over_seeds_is_the_ratio_of_sums_and_a_failed_run_leaves_it_open():
    runs = [fake_run("ours_tf", 0, 10_000, 10.0), fake_run("rllib", 0, 40_000, 100.0),
            fake_run("ours_tf", 1, 30_000, 30.0), fake_run("rllib", 1, 60_000, 100.0)]
    result = {"config": {"seeds": [0, 1], "sides": ["ours_tf", "rllib"]}, "runs": runs}
    cmp = learning_ratios.compare(result)["ours_tf"]
    assert cmp["env_steps"]["all"]["value"] == pytest.approx(0.4)  # 40k / 100k, not the mean of 0.25 and 0.5
    assert cmp["env_steps"]["per_seed"]["0"]["value"] == pytest.approx(0.25)
    assert cmp["train_eval_s"]["all"]["value"] == pytest.approx(42 / 202)
    runs[3] = {"side": "rllib", "seed": 1, "error": "killed"}
    cmp = learning_ratios.compare(result)["ours_tf"]
    assert cmp["env_steps"]["all"] == {"value": None, "kind": None, "verdict": "undetermined"}
    assert cmp["env_steps"]["per_seed"]["0"]["verdict"] == "met"


def test_median_ratio_is_the_ratio_of_the_medians_and_keeps_bounds():
    # RLlib's one quick seed pulls its sum down, not its median: the two ratios differ on purpose
    ours = [(0, 50.0), (1, 60.0), (2, 55.0), (3, 52.0), (4, 100.0)]
    rllib = [(0, 240.0), (1, 160.0), (2, 15.0), (3, 190.0), (4, 200.0)]
    runs = [fake_run("ours_torch", seed, 30_000, t) for seed, t in ours] + \
        [fake_run("rllib", seed, 60_000, t) for seed, t in rllib]
    result = {"config": {"seeds": [0, 1, 2, 3, 4], "sides": ["ours_torch", "rllib"]}, "runs": runs}
    wall = learning_ratios.compare(result)["ours_torch"]["train_s"]
    assert wall["median"]["value"] == pytest.approx(55 / 190) and wall["median"]["verdict"] == "met"
    assert wall["all"]["value"] == pytest.approx(317 / 805)
    runs[5] = fake_run("rllib", 0, 150_000, 900.0, solved=False)  # an unsolved RLlib run: an upper bound
    wall = learning_ratios.compare(result)["ours_torch"]["train_s"]
    assert wall["median"]["kind"] == "at_most" and wall["median"]["value"] == pytest.approx(55 / 190)


# ---- argument checks ----------------------------------------------------------------------------------
@pytest.mark.parametrize("make,message", [
    (lambda: learning_criterion.Criterion(eval_every=0), "Criterion: eval_every must be a positive int; got 0"),
    (lambda: learning_criterion.Criterion(screen_episodes=20, eval_episodes=10), "screen_episodes \\(20\\) must not exceed"),
    (lambda: learning_criterion.Budget(env_steps=2.5), "Budget: env_steps must be a positive int; got 2.5"),
    (lambda: learning_criterion.Budget(seconds=-1), "Budget: seconds must be a positive number; got -1"),
    (lambda: learning_criterion.check_side("ours_jax"), "side must be one of ours_tf, ours_torch, rllib; got 'ours_jax'"),
    (lambda: learning_runs.measure(seeds=()), "measure: give at least one seed"),
])
def test_invalid_arguments_are_named(make, message):
    with pytest.raises(ValueError, match=message):
        make()


# ---- a tiny real run of ours and the report files ------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_ours():
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    return learning_runs.measure(seeds=(0,), sides=("ours_torch",), criterion=TINY, budget=learning_criterion.Budget(env_steps=600),
                      isolated=False, log=None)


def test_tiny_run_of_ours(tiny_ours):
    (run,) = tiny_ours["runs"]
    assert run["side"] == "ours_torch" and run["seed"] == 0
    assert not run["solved"] and run["stop_reason"] == "env_steps"
    assert [p["env_steps"] for p in run["curve"]] == [300, 600]
    assert all(p["screen_mean"] < 100 for p in run["curve"])  # 600 steps, mostly random actions: far from solved
    assert run["threads"]["torch"] == 1 and run["threads_after"]["torch"] == 1
    assert tiny_ours["comparison"] == {} and tiny_ours["rllib_note"] == "not requested"
    assert tiny_ours["our_config"]["env"]["id"] == "CartPole-v1"


def test_scenario_figure_of_a_run(tiny_ours, tmp_path):
    (fig,) = learning_scenario.figures(tiny_ours)
    assert fig.tables[0].rows[0][:4] == ["ours, PyTorch", 0, "not solved (env_steps)", 600]
    assert "RLlib was not measured (not requested): no verdict against the targets." in fig.notes
    assert fig.headline == "0 of 1 runs solved CartPole-v1 (RLlib not measured)"
    settings = dict((row[0], row[1:]) for row in fig.tables[1].rows)
    assert settings["n-step"] == ["3", "n/a"]  # ours from the config file; no RLlib run, no RLlib column
    report = rerender.from_result(json.loads(json.dumps(tiny_ours)), SCENARIOS["learning"], "learning.json")
    assert report.figures[0].tables == fig.tables
    if importlib.util.find_spec("matplotlib") is not None:
        assert plot_figure(fig, tmp_path / "learning.png")


def test_scenario_figure_with_rllib_runs(tiny_ours):
    """A synthetic RLlib run beside the real one of ours: ratios, verdict lines and the settings column."""
    ours = tiny_ours["runs"][0]
    rllib = {**fake_run("rllib", 0, 900, 30.0), "setup_s": 8.0, "stop_reason": "solved", "load_start": [1, 1, 1],
             "load_end": [2, 2, 2], "curve": [{"env_steps": 900, "train_s": 30.0, "eval_s": 1.0, "screen_mean": 500.0,
                                               "full_mean": 500.0, "load1": 1.5}],
             "settings": {"lr": 0.0005, "train_batch_size_per_learner": 32, "n_step": [2, 5], "double_q": True,
                          "dueling": True, "epsilon": [[0, 1.0], [10000, 0.02]], "target_network_update_freq": 500,
                          "tau": 1.0, "num_steps_sampled_before_learning_starts": 1000, "rollout_fragment_length": 5,
                          "gamma": 0.99, "grad_clip": 40.0, "grad_clip_by": "global_norm", "td_error_loss_fn": "huber",
                          "replay_buffer_config": {"type": "PrioritizedEpisodeReplayBuffer", "capacity": 50000,
                                                   "alpha": 0.6, "beta": 0.4},
                          "model": learning_sides.RLLIB_SETTINGS["model"], "module": "Module(...)"}}
    result = {**tiny_ours, "runs": [ours, rllib], "rllib_note": None,
              "config": {**tiny_ours["config"], "sides": ["ours_torch", "rllib"]}}
    result["comparison"] = learning_ratios.compare(result)
    assert result["comparison"]["ours_torch"]["env_steps"]["all"]["kind"] == "at_least"
    (fig,) = learning_scenario.figures(result)
    steps = next(r for r in fig.ratios if r.name == "DQN CartPole env steps: ours, PyTorch / RLlib")
    assert steps.note == "at least" and steps.value == pytest.approx(600 / 900) and steps.verdict == "undetermined"
    assert fig.headline.startswith("ours, PyTorch / RLlib: env steps ≥ 0.67, training wall time")
    settings = {row[0]: row[2] for row in fig.tables[1].rows}
    assert settings["n-step"] == "drawn per sampled transition: `rng.integers(2, 5)`, i.e. 2-4"
    assert settings["target network"] == "hard copy (tau 1.0) every 500 sampled env steps"
    assert "6.4 replayed transitions per env step" in settings["batch, updates"]
    assert any(n.startswith("Not solved within the budget: ours (PyTorch) seed 0") for n in fig.notes)
    (fig,) = learning_scenario.figures({**result, "notes": ["the load doubled halfway"]})
    assert fig.notes[-1] == "Note written by hand after the run: the load doubled halfway"


def test_isolated_run_is_killed_at_its_time_bound():
    run = learning_runs.run_isolated("ours_torch", 0, TINY, learning_criterion.Budget(seconds=0.5, grace_seconds=0.5))
    assert run["error"].startswith("killed after 1 s") and run["side"] == "ours_torch"


# ---- RLlib ----------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.distributed
def test_tiny_rllib_run_builds_what_the_report_says():
    learning_sides.limit_threads("rllib")  # TensorFlow before RLlib
    pytest.importorskip("ray.rllib")
    import ray

    run = learning_runs.run_one("rllib", 0, learning_criterion.Criterion(eval_every=250, screen_episodes=2, eval_episodes=3),
                     learning_criterion.Budget(env_steps=500))
    assert not ray.is_initialized()  # shut down again
    assert [p["env_steps"] for p in run["curve"]] == [250, 500] and run["stop_reason"] == "env_steps"
    s = run["settings"]  # read off the built algorithm's config: rllib/tuned_examples/dqn/cartpole_dqn.py's values
    assert (s["lr"], s["train_batch_size_per_learner"], s["n_step"], s["double_q"], s["dueling"]) == (
        0.0005, 32, [2, 5], True, True)
    assert s["epsilon"] == [[0, 1.0], [10000, 0.02]]
    assert {k: s["replay_buffer_config"][k] for k in ("type", "capacity", "alpha", "beta")} == {
        "type": "PrioritizedEpisodeReplayBuffer", "capacity": 50000, "alpha": 0.6, "beta": 0.4}
    assert "Linear(in_features=4, out_features=256" in s["module"] and "Tanh()" in s["module"]
    assert run["threads_after"]["torch"] == 1
