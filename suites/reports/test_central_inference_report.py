"""The central-inference scenario: its figure per run (threads, processes), ratios and the no-GPU note; a point's
child process that fails is an error, not a crash; bad settings are named. No speed asserts."""

from __future__ import annotations

import pytest

from spacegraph.report.scenarios import central_inference as scenario
from spacegraph.reports.central_inference import ab, child_main, measure_all, run_child


def run(transport="threads", device=None):
    points = {"mlp": {"actor-learner-2": {"frames_per_s": 1000.0, "updates_per_s": 3.0, "params": 4675},
                      "central-2": {"frames_per_s": 500.0, "updates_per_s": 1.5, "mean_batch_envs": 4.0},
                      "actor-learner-4": {"frames_per_s": 1000.0},
                      "central-4": {"error": "timed out after 400 s"}},
              "nature": {"actor-learner-2": {"frames_per_s": 100.0, "params": 1_700_000},
                         "central-2": {"frames_per_s": 130.0, "mean_batch_envs": 7.5},
                         "actor-learner-4": {"frames_per_s": 100.0}, "central-4": {"frames_per_s": 150.0}}}
    return {"date": "d", "machine": "m", "commit": "c", "transport": transport, "device": device, "seconds": 10.0,
            "actors": [2, 4], "device_label": "GPU: H200" if device else "CPU only", "points": points, "notes": []}


def test_a_figure_per_run_with_its_ratios_and_rows():
    threads, processes = scenario.figures({"runs": [run(), run("tf-dist")]})
    assert (threads.name, processes.name) == ("central_inference", "central_inference_processes")
    assert [r.name for r in threads.ratios] == ["mlp, 2 actors (threads): central / actor-learner",
                                                "nature, 2 actors (threads): central / actor-learner",
                                                "nature, 4 actors (threads): central / actor-learner"]
    assert [r.value for r in threads.ratios] == [0.5, 1.3, 1.5]
    rows = {(r[0], r[2]): r for r in threads.tables[0].rows}
    assert rows[("mlp", 4)][3:6] == [1000.0, "(timed out after 400 s)", None]
    assert rows[("nature", 2)][1] == 1_700_000 and rows[("nature", 2)][6] == 7.5
    assert threads.headline == ("central / actor-learner frames/s (CPU only): from 0.50x (mlp, 2 actors) to 1.50x "
                                "(nature, 4 actors)")
    assert threads.notes[0] == scenario.NO_GPU
    (gpu,) = scenario.figures(run(device="cuda:0"))
    assert scenario.NO_GPU not in gpu.notes and "(GPU: H200)" in gpu.title


def test_a_failing_child_is_an_error_of_its_point():
    point = run_child("no-such-mode", "mlp", 2, 0.1, timeout=60)
    assert point == {"error": "ValueError: central_inference.measure: mode must be one of ('actor-learner', "
                              "'central', 'central-locked') and network one of mlp, mlp+lstm, mlp-1m, resnet, resnet+lstm, nature, "
                              "nature+lstm; got 'no-such-mode', 'mlp'"}


@pytest.mark.parametrize("kwargs, message", [({"networks": ["transformer"]}, "networks must be among mlp"),
                                             ({"transport": "mpi"}, "transport one of threads, tf-dist, grpc")])
def test_bad_settings_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        measure_all(**kwargs)


@pytest.mark.parametrize("kwargs, message", [({"network": "transformer"}, "network must be one of mlp"),
                                             ({"transport": "mpi"}, "transport one of threads, tf-dist, grpc"),
                                             ({"rounds": 0}, "rounds at least 1; got 'mlp', 'threads', 0")])
def test_bad_ab_settings_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ab(**{"network": "mlp", "actors": 2, **kwargs})


@pytest.mark.parametrize("argv, message", [(["--ab", "mlp", "two"], "ACTORS must be a positive int; got 'two'"),
                                           (["--ab", "transformer", "2"], "network must be one of mlp")])
def test_bad_ab_arguments_are_one_usage_error(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        child_main(argv)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_the_ab_pairs_each_round_and_takes_the_median(monkeypatch):
    """Rounds run locked then overlapping; the ratio is paired within a round (a failed point: none that round)."""
    import spacegraph.reports.central_inference as module

    fps = iter([100.0, 150.0, 200.0, 220.0, 50.0, None])
    calls = []

    def fake_child(mode, network, actors, seconds, transport, device, timeout):
        calls.append(mode)
        value = next(fps)
        return {"frames_per_s": value} if value is not None else {"error": "timed out after 400 s"}

    monkeypatch.setattr(module, "run_child", fake_child)
    result = ab("nature", 4, rounds=3, seconds=1.0)
    assert calls == ["central-locked", "central"] * 3
    assert result["ratios"] == [1.5, 1.1] and result["median_ratio"] == pytest.approx(1.3)
    assert result["median_frames_per_s"] == {"central-locked": 100.0, "central": 185.0}
