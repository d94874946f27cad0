"""Single-worker sampling throughput (Fig. 7a): short bounded runs, frame counting, report structure, RLlib skip."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import time
from pathlib import Path

import pytest

from harness.measure.figures import plot_figure
from harness.measure.machine import configure_threads
from harness.testing.plugin import selected_backends
from spacegraph.report.scenarios import sampling as sampling_scenario
from spacegraph.reports import sampling_contenders, sampling_measure

BACKENDS = tuple(b for b in selected_backends()
                 if importlib.util.find_spec({"tf": "tensorflow", "torch": "torch"}[b]) is not None)
#: The Pong agent of reference_agents/configs/dqn_pong.yaml (Nature CNN, dueling, env-side Atari
#: frames, /255 in graph), with a replay small enough for a test.
PONG = sampling_contenders.PONG_CONFIG
SHORT = {"seconds": 0.16, "rounds": 2, "chunk_seconds": 0.04, "warmup_seconds": 0.06}


def _ours_backend() -> str:
    if not BACKENDS:
        pytest.skip("no backend installed")
    return "torch" if "torch" in BACKENDS else BACKENDS[0]


@pytest.fixture(scope="module")
def cartpole():
    if not BACKENDS:
        pytest.skip("no backend installed")
    return sampling_measure.measure(sampling_contenders.CARTPOLE_CONFIG, BACKENDS, (1, 2), capacity=1000, **SHORT)


@pytest.fixture(scope="module")
def pong():
    """One short Pong run: raw ALE, raw env, ours on one backend, RLlib when installed."""
    return sampling_measure.measure(PONG, (_ours_backend(),), (2,), capacity=200, **SHORT)


def test_cartpole_run_structure(cartpole):
    rows = cartpole["rows"]
    assert [r["num_envs"] for r in rows] == [1, 2]
    names = ["raw_env", *(f"ours_{b}" for b in BACKENDS)]
    for row in rows:
        assert set(row) == {"num_envs", "ratios", "wall_ratios", *names}
        for name in names:
            c = row[name]
            assert c["frames_per_s"] >= c["frames_per_s_median"] > 0
            assert c["frames_per_cpu_s"] >= c["frames_per_cpu_s_median"] > 0
            assert c["cpu_seconds"] > 0 and c["seconds"] > 0
            assert c["frames_per_step"] == 1 and c["frames"] == c["steps"] > 0
            assert c["chunk_steps"] % row["num_envs"] == 0
        for b in BACKENDS:
            assert row["ratios"][f"ours_{b}/raw_env"] == pytest.approx(
                row[f"ours_{b}"]["frames_per_cpu_s"] / row["raw_env"]["frames_per_cpu_s"])
            assert row["wall_ratios"][f"ours_{b}/raw_env"] == pytest.approx(
                row[f"ours_{b}"]["frames_per_s"] / row["raw_env"]["frames_per_s"])
            assert row["ratios"][f"ours_{b}/rllib"] is None
            shares = row[f"ours_{b}"]["breakdown"]
            assert shares["act_share"] > 0 and shares["observe_share"] > 0
            assert shares["act_share"] + shares["observe_share"] + shares["other_share"] == pytest.approx(1.0)
    assert "Atari configs only" in cartpole["rllib_note"]


def test_pong_frames_are_counted_with_frameskip(pong):
    (row,) = pong["rows"]
    names = [n for n in sampling_scenario.TITLES if n in row]
    assert {"raw_ale", "raw_env", f"ours_{_ours_backend()}"} <= set(names)
    for name in names:
        c = row[name]
        assert c["frames_per_step"] == 4, name
        assert c["frames"] == 4 * c["steps"] > 0, name


def test_pong_scenario_figure(pong, tmp_path):
    (fig,) = sampling_scenario.figures(pong)
    row = pong["rows"][0]
    names = [n for n in sampling_scenario.TITLES if n in row]
    table = fig.tables[0]
    assert table.header == ["N", *(sampling_scenario.TITLES[n] for n in names)]
    assert table.rows == [[2, *(f"{row[n]['frames_per_cpu_s']:,.0f} / {row[n]['frames_per_s']:,.0f}"
                                for n in names)]]
    assert fig.tables[1].rows == [[2, *(f"{row[n]['steps']} / {row[n]['frames']} ({row[n]['chunk_steps']})"
                                        for n in names)]]
    assert "ALE/Pong-v5, N=2: " in fig.headline and fig.raw is pong
    if importlib.util.find_spec("matplotlib") is not None:
        assert plot_figure(fig, tmp_path / "sampling.png")
        assert (tmp_path / "sampling.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_pong_rllib_column_when_installed(pong):
    pytest.importorskip("ray.rllib")
    import ray

    (row,) = pong["rows"]
    assert pong["rllib_note"] is None and "rllib" in row
    assert row["rllib"]["frames"] == 4 * row["rllib"]["steps"] > 0
    b = _ours_backend()
    assert row["ratios"][f"ours_{b}/rllib"] == pytest.approx(row[f"ours_{b}"]["frames_per_cpu_s"]
                                                              / row["rllib"]["frames_per_cpu_s"])
    assert "Conv2d(4, 32, kernel_size=(8, 8), stride=(4, 4))" in pong["rllib_model"]
    assert not ray.is_initialized(), "the RLlib env runner must not start a Ray cluster"


def test_worker_contender_inserts_what_it_observed_into_replay():
    from reference_agents.agents import DQNAgent

    cfg = sampling_contenders.load_config(sampling_contenders.CARTPOLE_CONFIG, capacity=1000)
    cfg["loss"]["n_step"] = 1  # every env step then makes one record at once
    agent = DQNAgent(cfg, backend=_ours_backend(), seed=0)
    contender = sampling_contenders.WorkerContender(agent, sampling_contenders.env_factory(cfg), 2)
    try:
        assert contender.chunk(8) == (8, 8)
        assert contender.chunk(6) == (6, 6)
    finally:
        contender.close()
    assert agent.memory_size() == 14
    shares = contender.breakdown(1.0)
    assert shares["observe_share"] > 0 and contender.timed.seconds["flush"] > 0


@pytest.mark.parametrize("frameskip", [1, 3])
def test_raw_frames_follow_the_env_frameskip(frameskip):
    cfg = sampling_contenders.load_config(PONG)
    cfg["env"]["kwargs"] = {"frameskip": frameskip}
    contender = sampling_contenders.RawContender(sampling_contenders.env_factory(cfg), 2)
    try:
        assert contender.chunk(6) == (6, 6 * frameskip)
    finally:
        contender.close()


def test_rllib_reported_missing_when_import_fails(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray.rllib.algorithms.dqn", None)
    reason = sampling_contenders.rllib_available()
    assert reason is not None and "ray[rllib] is not installed" in reason


def test_run_without_rllib_skips_its_column_cleanly(monkeypatch):
    monkeypatch.setattr(sampling_contenders, "rllib_available", lambda: "ray[rllib] is not installed (test)")
    result = sampling_measure.measure(PONG, (_ours_backend(),), (1,), capacity=100, raw_ale=False,
                        **{**SHORT, "seconds": 0.1, "rounds": 1})
    (row,) = result["rows"]
    assert "rllib" not in row and "raw_ale" not in row
    assert all(v is None for k, v in row["ratios"].items() if k.endswith("/rllib"))
    (fig,) = sampling_scenario.figures(result)
    assert fig.peer_missing == "ray[rllib] is not installed (test)"
    assert not any("RLlib" in r.name for r in fig.ratios) and "RLlib" not in fig.headline


def test_asv_rllib_benchmark_skips_without_rllib(monkeypatch):
    # the checkout's benchmark file (the package's REPO is where the installed package lives, e.g. site-packages), imported
    # as asv imports it: ``benchmarks.sampling`` (its ``from .common import ...`` needs the package)
    bench_root = str(Path(__file__).resolve().parents[2] / "asv_bench")
    if bench_root not in sys.path:
        sys.path.insert(0, bench_root)
    module = importlib.import_module("benchmarks.sampling")
    monkeypatch.setattr(sampling_contenders, "rllib_available", lambda: "ray[rllib] is not installed (test)")
    with pytest.raises(NotImplementedError, match="not installed"):
        module.PongSamplingVsRLlib().setup("torch", 1)


@pytest.mark.parametrize("kwargs, match", [
    ({"backends": ("jax",)}, "backends must be among"),
    ({"num_envs": (0,)}, "num_envs must be positive ints"),
])
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        sampling_measure.measure(sampling_contenders.CARTPOLE_CONFIG, **kwargs)


def test_scaled_image_env_rejects_non_images():
    from reference_agents.workers import make_env

    env = make_env("CartPole-v1")
    try:
        with pytest.raises(ValueError, match="ScaledImageEnv: expected uint8 image observations"):
            sampling_contenders.ScaledImageEnv(env)
    finally:
        env.close()


def test_cpu_clock_does_not_count_waiting():
    class Sleeper:
        num_envs, frames_per_step = 1, 1

        def chunk(self, steps):
            time.sleep(0.004)
            return steps, steps

    # Framework thread pools left spinning by earlier tests would count as this process's CPU time.
    configure_threads(1)
    time.sleep(0.3)
    timed = sampling_measure.time_contenders({"sleeper": Sleeper()}, seconds=0.06, rounds=2, chunk_seconds=0.004,
                               warmup_seconds=0.01)["sleeper"]
    # Sleeping costs no CPU: far more frames per CPU-second than per wall-clock second.
    assert timed["frames_per_cpu_s"] > 3 * timed["frames_per_s"]
