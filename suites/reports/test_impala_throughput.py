"""The IMPALA throughput scenario: both sides' CartPole curves report the mean return of their last 100 episodes;
the figure's rates, ratios and curve points."""

import pytest

from spacegraph.report.scenarios import impala as scenario
from spacegraph.reports.impala_throughput import CURVE_POINTS, at, last_mean, measure, record_episode_return


class _Chunk:
    def __init__(self, value):
        self.value = value

    def get_return(self):
        return self.value


def test_rllib_returns_are_whole_episodes_and_the_curve_averages_the_last_100(tmp_path):
    path = tmp_path / "returns.txt"
    # an episode that RLlib cut into chunks counts once, with the return of all its chunks
    record_episode_return(str(path), episode=_Chunk(30.0), prev_episode_chunks=[_Chunk(10.0), _Chunk(5.0)])
    record_episode_return(str(path), episode=_Chunk(500.0))
    returns = [float(x) for x in path.read_text().split()]
    assert returns == [45.0, 500.0]
    assert last_mean(returns) == 272.5
    assert last_mean([]) is None
    assert last_mean([float(i) for i in range(1, 151)]) == sum(range(51, 151)) / 100  # the last 100 only


def _result(curves):
    rows = {"raw": {"frames_per_s": 50_000.0, "load_1min": 1.0},
            "ours-1": {"frames_per_s": 3000.0, "cpu_utilisation": 0.9}, "ours_ray-1": {"frames_per_s": 1500.0},
            "rllib-1": {"frames_per_s": 1000.0}, "ours-2": {"error": "timed out after 600 s"},
            "ours_ray-2": {"frames_per_s": 2500.0}, "rllib-2": {"frames_per_s": 1000.0}}
    return {"date": "d", "machine": "m", "commit": "c", "seconds": 15, "actors": [1, 2], "envs": {"cartpole": rows},
            "curves": curves}


def test_the_curve_table_reads_each_side_at_its_points():
    ours = [(10.0, 50.0, 1), (30.0, 300.0, 2), (95.0, 500.0, 3)]  # a point at 30 s is read at 30 s
    rllib = [(31.0, 200.0, 1), (61.0, 400.0, 2)]
    (fig,) = scenario.figures(_result({"curve_ours": {"curve": ours}, "curve_rllib": {"curve": rllib}}))
    assert [at(ours, t) for t in CURVE_POINTS] == [50.0, 300.0, 300.0, 300.0, 500.0, 500.0]
    curve = {row[0]: row[1:] for row in fig.tables[1].rows}
    assert curve["ours, distributed TF"] == [50.0, 300.0, 300.0, 300.0, 500.0, 500.0]
    assert curve["RLlib IMPALA"] == [None, None, 200.0, 400.0, 400.0, 400.0]
    returns = [r for r in fig.ratios if "return at" in r.name]
    assert [r.name.split(" at ")[1].split(":")[0] for r in returns] == ["60 s", "90 s", "120 s", "150 s"]
    assert returns[0].value == pytest.approx(300 / 200) and [r.met for r in returns] == [True, False, True, True]
    assert fig.headline.endswith("; CartPole return above RLlib's at 3 of 4 curve points")


def test_rates_ratios_and_a_failed_side():
    (fig,) = scenario.figures(_result({}))
    # a result measured before TF compute: the PyTorch sides alone, no TF / PyTorch column
    assert fig.tables[0].header[2:5] == ["ours, distributed TF frames/s", "ours, Ray frames/s",
                                         "RLlib IMPALA frames/s"]
    assert fig.tables[0].rows[1][:5] == ["cartpole", 2, "(timed out after 600 s)", 2500.0, 1000.0]
    assert fig.tables[0].header[5:] == ["CPU (the machine)", "1-min load (ours TF / Ray / RLlib / raw)"]
    by = {r.name: r for r in fig.ratios}
    assert by["IMPALA cartpole 1 actors: ours, distributed TF / RLlib"].value == 3.0
    assert by["IMPALA cartpole 1 actors: ours, Ray / RLlib"].met is False  # 1.5x < 2x
    assert "IMPALA cartpole 2 actors: ours, distributed TF / RLlib" not in by
    assert fig.headline == ("ours / RLlib IMPALA frames/s: lowest 1.50x (IMPALA cartpole 1 actors, ours, Ray; "
                            "target >= 2x: missed)")
    assert fig.peer_missing is None
    no_rllib = _result({})
    no_rllib["envs"]["cartpole"] = {k: v for k, v in no_rllib["envs"]["cartpole"].items() if "rllib" not in k}
    (fig,) = scenario.figures(no_rllib)
    assert fig.ratios == [] and fig.peer_missing is None and fig.headline.startswith("RLlib not measured")
    no_rllib["envs"]["cartpole"]["rllib-1"] = {"error": "ray.rllib cannot be imported"}
    assert scenario.figures(no_rllib)[0].peer_missing == "RLlib's IMPALA failed: ray.rllib cannot be imported"


def test_tf_compute_sits_beside_pytorch_on_each_executor():
    result = _result({})
    result["envs"]["cartpole"].update({"ours_tf-1": {"frames_per_s": 1500.0, "startup_s": 12.4},
                                       "ours_ray_tf-1": {"frames_per_s": 3000.0},
                                       "ours_tf-2": {"frames_per_s": 4000.0}, "ours_ray_tf-2": {"error": "boom"}})
    (fig,) = scenario.figures(result)
    header, rows = fig.tables[0].header, fig.tables[0].rows
    assert header[2:8] == ["ours, distributed TF frames/s", "ours, distributed TF, TF compute frames/s",
                           "ours, Ray frames/s", "ours, Ray, TF compute frames/s", "RLlib IMPALA frames/s",
                           "TF / PyTorch compute (tf-dist, Ray)"]
    assert rows[0][2:9] == [3000.0, 1500.0, 1500.0, 3000.0, 1000.0, "0.50x / 2.00x", "- / 12 / - / -"]
    assert rows[1][2:8] == ["(timed out after 600 s)", 4000.0, 2500.0, "(boom)", 1000.0, "- / -"]
    assert header[8] == "start-up s (ours TF / TF-dist TF compute / Ray / Ray TF compute)"
    by = {r.name: r.value for r in fig.ratios}
    assert by["IMPALA cartpole 1 actors: ours, distributed TF, TF compute / RLlib"] == 1.5
    assert by["IMPALA cartpole 1 actors: ours, Ray, TF compute / RLlib"] == 3.0
    assert by["IMPALA cartpole 2 actors: ours, distributed TF, TF compute / RLlib"] == 4.0
    assert "IMPALA cartpole 2 actors: ours, Ray, TF compute / RLlib" not in by
    labels = {s.label for s in fig.series}
    assert {"ours, distributed TF, TF compute", "ours, Ray, TF compute", "ours, distributed TF", "ours, Ray"} <= labels


def test_bad_sides_are_named():
    with pytest.raises(ValueError, match="sides among raw, ours, ours_ray, ours_tf, ours_ray_tf, rllib; "
                                         "got \\['seed'\\]"):
        measure(envs=["cartpole"], sides=["seed"])
