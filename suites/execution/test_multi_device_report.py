"""The multi-device scenario: a PyTorch-only run in a fresh interpreter never imports TensorFlow; its figure; bad
settings named."""

from __future__ import annotations

import pytest

from spacegraph.report.scenarios import multi_device as scenario
from spacegraph.reports import multi_device


@pytest.fixture(scope="module")
def torch_run():
    pytest.importorskip("torch")
    return multi_device.result_isolated(backends=["torch"], devices=["cpu"], replicas=[1, 2], batch=6, hidden=[8],
                                        seconds=0.02, repeats=1, timeout=120)


def test_torch_only_run_measures_every_setting_without_tensorflow(torch_run):
    assert torch_run["tensorflow_imported"] is False
    settings = [(r["loss"], r["setting"], tuple(r["devices"])) for r in torch_run["rows"]]
    assert settings == [(loss, s, d) for loss in ("dqn", "impala")
                        for s, d in (("single", ("default",)), ("single on cpu", ("cpu",)), ("1 replicas", ("cpu",)),
                                     ("2 replicas", ("cpu", "cpu")))]
    assert all(r["updates_per_s"] > 0
               and r["samples_per_s"] == pytest.approx(r["updates_per_s"] * r["samples_per_update"])
               for r in torch_run["rows"])


def test_figure_has_a_row_and_ratio_per_setting_and_says_there_is_no_gpu(torch_run):
    (fig,) = scenario.figures(torch_run)
    rows = {(r[0], r[1], r[2]): r for r in fig.tables[0].rows}
    two = rows[("torch", "impala", "2 replicas")]
    placed = rows[("torch", "impala", "single on cpu")]
    assert two[3] == "cpu, cpu" and two[-1] == pytest.approx(two[4] / placed[4]) and placed[-1] == 1.0
    assert [r.name for r in fig.ratios] == [f"torch {loss}: {n} replicas / single on the first device"
                                            for loss in ("dqn", "impala") for n in (1, 2)]
    assert fig.notes[0] == scenario.NO_GPU and any("cannot show a speed-up" in n for n in fig.notes)
    assert fig.headline.startswith("torch dqn: 2 replicas / single on the first device: ")
    assert fig.headline.endswith("(logical devices, no GPU)")
    gpu = {**torch_run, "machine": {**torch_run["machine"], "cuda": ["NVIDIA H200"]}}
    (fig,) = scenario.figures(gpu)
    assert scenario.NO_GPU not in fig.notes and fig.headline.endswith("(GPUs: NVIDIA H200)")


@pytest.mark.parametrize("kwargs, message", [
    ({"backends": ["jax"]}, "backends: expected some of tf, torch"),
    ({"backends": ["torch"], "losses": ["ppo"]}, "losses: expected some of dqn, impala"),
    ({"backends": ["torch"], "batch": 2, "replicas": [1, 4]}, "batch 2 must be at least the largest replica count 4"),
])
def test_bad_settings_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        multi_device.result(**kwargs)
    with pytest.raises(ValueError, match=message):  # from the child, as one line
        multi_device.result_isolated(timeout=60, **kwargs)
