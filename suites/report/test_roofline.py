"""The roofline scenario: the limit's arithmetic against a hand-computed example, the figure drawn from a recorded
result (ratios, tables, Sample Factory's published per-core figures beside ours), bad settings named, a failing child
kept as its part's error, and a quick real run of the parts (PyTorch, IMPALA, no agent run). No speed asserts."""

from __future__ import annotations

from pathlib import Path

import pytest

from spacegraph.report import baselines
from spacegraph.report.scenarios import roofline as scenario
from spacegraph.reports import roofline

REPO = Path(__file__).resolve().parents[2]


def parts(act_ms: float, learn_ms: float, records: int) -> dict:
    return {"act_batch": 4, "records_per_update": records,
            "act": {"4": {"cpu_s": act_ms / 1e3}, "16": {"cpu_s": act_ms / 2e3}}, "learn": {"cpu_s": learn_ms / 1e3}}


def recorded() -> dict:
    """A result as `roofline.measure` records it: two backends (TF faster at learning), three env paths (one
    crashed), both agents measured."""
    return {"date": "2026-11-29", "machine": "a 2-core machine", "commit": "abc1234", "cores": 2, "quick": False,
            "onednn_parent": None, "notes": [],
            "env": {"num_envs": 4, "frames_per_step": 4.0,
                    "paths": {"python": {"frames_per_cpu_s": 8000.0, "cpu_s_per_frame": 1 / 8000, "rounds": [8000.0]},
                              "ale": {"frames_per_cpu_s": 10000.0, "cpu_s_per_frame": 1e-4, "rounds": [1e4]},
                              "envpool": {"error": "signal 11: Segmentation fault"}}},
            "parts": {"torch": {"agents": {"impala": parts(0.4, 0.8, 320), "apex": parts(0.4, 1.2, 32)}},
                      "tf": {"agents": {"impala": parts(0.4, 0.4, 320), "apex": parts(0.4, 1.0, 32)}},
                      "tf-no-onednn": {"error": "timed out after 900 s"}},
            "measured": {"impala": {"frames_per_s": 3000.0, "seconds": 15.0, "cpu_utilisation": 0.99},
                         "apex": {"frames_per_s": 1000.0, "replay_ratio": 2.0, "seconds": 15.0}}}


def test_the_limit_against_a_hand_computed_example():
    # env 0.1 ms/frame; act 0.4 ms/state / 4 frames = 0.1; learn 0.8 ms/transition x 1 / 4 = 0.2: 0.4 ms/frame,
    # 2 cores -> 5,000 frames/s. Ape-X learning 1.5 records per step: 1.5 x 0.8 / 4 = 0.3 -> 0.5 ms -> 4,000.
    costs = roofline.frame_costs(1e-4, 4e-4, 8e-4, 4.0, 1.0)
    assert costs == pytest.approx({"env": 1e-4, "act": 1e-4, "learn": 2e-4, "total": 4e-4})
    assert roofline.limit(costs, 2) == pytest.approx(5000.0)
    assert roofline.limit(roofline.frame_costs(1e-4, 4e-4, 8e-4, 4.0, 1.5), 2) == pytest.approx(4000.0)
    with pytest.raises(ValueError, match="frames_per_step > 0"):
        roofline.frame_costs(1e-4, 4e-4, 8e-4, 0.0, 1.0)


def test_rooflines_take_the_cheapest_env_path_and_the_best_backend():
    result = recorded()
    rows = {(r["agent"], r["variant"]): r for r in roofline.rooflines(result)}
    # ale is the cheapest path that ran (0.1 ms/frame); the crashed envpool and the failed TF child give no row
    assert set(rows) == {("impala", "torch"), ("impala", "tf"), ("apex", "torch"), ("apex", "tf")}
    assert rows[("impala", "torch")]["env_path"] == "ale"
    assert rows[("impala", "torch")]["limit"] == pytest.approx(5000.0)
    assert rows[("impala", "tf")]["limit"] == pytest.approx(2 / (1e-4 + 1e-4 + 1e-4))      # learn 0.4/4 = 0.1 ms
    assert rows[("impala", "torch")]["at_batch"]["16"] == pytest.approx(2 / (1e-4 + 0.5e-4 + 2e-4))
    # Ape-X at its measured replay ratio 2: torch 0.1 + 0.1 + 2 x 1.2/4 = 0.8 ms; TF 0.1 + 0.1 + 0.5 = 0.7 ms
    assert rows[("apex", "torch")]["limit"] == pytest.approx(2500.0)
    got = roofline.fractions(result)
    assert got["impala"]["variant"] == "tf" and got["impala"]["fraction"] == pytest.approx(3000 / (2 / 3e-4))
    assert got["apex"]["fraction"] == pytest.approx(1000 / (2 / 7e-4))
    assert roofline.env_ratio(result) == {"path": "python", "ours": 8000.0, "native": 10000.0, "native_path": "ale",
                                          "ratio": pytest.approx(0.8)}
    result["measured"]["apex"] = {"error": "exit 1: no Ray"}
    assert [r["missing"] for r in roofline.rooflines(result) if r["agent"] == "apex"] == [
        "no replay ratio: no Ape-X run measured one"] * 2


def test_the_scenario_renders_from_a_recorded_result():
    (fig,) = scenario.figures(recorded())
    assert fig.name == "roofline" and fig.raw["cores"] == 2
    assert [(r.name, round(r.value, 3), r.target, r.met) for r in fig.ratios] == [
        ("IMPALA on Pong: measured / roofline", 0.45, ">= 0.6", False),
        ("Ape-X on Pong: measured / roofline", 0.35, ">= 0.5", False),
        ("Env stepping: ours (python) / ale frames per CPU-second", 0.8, ">= 0.9", False)]
    assert fig.headline.startswith("IMPALA on Pong 0.45 (target >= 0.6: missed)")
    parts_table, env_table, batch_table, runs = fig.tables
    assert parts_table.rows[0][:5] == ["IMPALA", "PyTorch", "ale", 4, 1.0]
    assert parts_table.rows[0][8] == pytest.approx(0.4) and parts_table.rows[0][9] == pytest.approx(5000.0)
    assert env_table.rows[2] == ["envpool", "(signal 11: Segmentation fault)", None, None, 0]
    assert ["-", "TF, oneDNN off", "(failed: timed out after 900 s)", None, None] in batch_table.rows
    assert runs.rows[-1][:3] == [scenario.RLLIB["label"], 347.0, 173.5]
    assert any("FAILED part child TF, oneDNN off" in n for n in fig.notes)
    per_core = {s.label: dict(zip(s.x, s.y)) for s in fig.series if s.panel == scenario.PER_CORE}
    assert per_core["measured (this machine)"] == {"IMPALA": 1500.0, "Ape-X": 500.0}
    assert per_core["roofline (best backend, this machine)"]["IMPALA"] == pytest.approx(1 / 3e-4)
    assert per_core["RLlib IMPALA (this machine, another run)"] == {"RLlib IMPALA": 173.5}


def test_sample_factory_is_published_beside_ours_per_core():
    published = baselines.load(REPO / "reports" / "baselines")["roofline"]
    assert [(b.label, b.points[0]["y"], b.panel) for b in published] == [
        ("Sample Factory APPO, 10 cores, per core", 4801.6, scenario.PER_CORE),
        ("Sample Factory APPO, 36 cores, per core", 3774.8, scenario.PER_CORE)]
    assert all("github.com/alex-petrenko/sample-factory" in b.source and "GPU" in b.hardware for b in published)


@pytest.mark.parametrize("kwargs, message", [({"variants": ["gpu"]}, "variants must be among"),
                                             ({"agents": ["dqn"]}, "agents among"),
                                             ({"env_paths": ["atari"]}, "env_paths among")])
def test_bad_settings_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        roofline.measure(**kwargs)


def test_a_failing_child_is_its_parts_error():
    got = roofline.run_child(["--part", "env", "--path", "no-such-path"], None, 120)
    assert got["error"].startswith("exit 2: ") and "invalid choice: 'no-such-path'" in got["error"]


def test_a_quick_real_run_of_the_parts():
    result = roofline.measure(quick=True, variants=["torch"], agents=["impala"], env_paths=["python"],
                              measured=False)
    from reference_agents.agents import load_config

    pong, _ = load_config("impala_pong")   # (its envs per actor and rollouts per update are config choices)
    n = pong.env.num_envs
    env = result["env"]
    assert env["num_envs"] == n and env["frames_per_step"] == 4.0
    assert env["paths"]["python"]["frames_per_cpu_s"] > 0 and len(env["paths"]["python"]["rounds"]) == 2
    impala = result["parts"]["torch"]["agents"]["impala"]
    assert impala["records_per_update"] == pong.rollout.length * n * pong.rollout.batch_size
    assert set(impala["act"]) == {"4", str(n), "16"}   # the quick batches and the actors' own
    (row,) = roofline.rooflines(result)
    assert row["env_path"] == "python" and row["limit"] > 0
    assert row["costs"]["total"] == pytest.approx(sum(row["costs"][k] for k in ("env", "act", "learn")))
    (fig,) = scenario.figures(result)
    assert fig.ratios == [] and fig.tables[0].rows[0][:4] == ["IMPALA", "PyTorch", "python", n]


def test_env_stepping_is_the_workers_configured_path_against_envpool():
    # the workers step the path their config names (env.vectorizer); EnvPool is the reference when it ran, else
    # the fastest other native path; the configured path alone gives no ratio
    result = recorded()
    result["env"]["configured"] = "ale"
    assert roofline.env_ratio(result) is None                  # envpool crashed: no other native path
    result["env"]["paths"]["envpool"] = {"frames_per_cpu_s": 12500.0, "cpu_s_per_frame": 1 / 12500, "rounds": [1]}
    got = roofline.env_ratio(result)
    assert (got["path"], got["native_path"]) == ("ale", "envpool") and got["ratio"] == pytest.approx(0.8)
    result["env"]["configured"] = "python"
    assert roofline.env_ratio(result)["ratio"] == pytest.approx(8000 / 12500)
