"""The act throughput scenario (Fig. 5b): one run over both backends, its figure, agreement checks."""

from __future__ import annotations

import importlib.util
import json
import time

import numpy as np
import pytest

from harness.measure.figures import figure_markdown, plot_figure
from harness.measure.machine import configure_threads
from harness.measure.timing import CLOCKS, interleaved_rates
from harness.testing.plugin import selected_backends
from spacegraph.report import rerender
from spacegraph.report.registry import SCENARIOS
from spacegraph.report.scenarios import act as act_scenario
from spacegraph.reports import act_diagnosis, act_measure, act_throughput

BACKENDS = tuple(b for b in selected_backends()
                 if importlib.util.find_spec({"tf": "tensorflow", "torch": "torch"}[b]) is not None)
BATCHES = (1, 4)
_REAL_HAND_WRITTEN = act_throughput.hand_written


@pytest.fixture(scope="module")
def result():
    if not BACKENDS:
        pytest.skip("no backend installed")
    return act_measure.measure(BACKENDS, BATCHES, seconds=0.04, rounds=2, threads=1)


def test_one_run_measures_every_backend_and_batch(result):
    rows = result["rows"]
    assert [(r["backend"], r["batch"]) for r in rows] == [(b, n) for b in BACKENDS for n in BATCHES]
    for row in rows:
        for clock in CLOCKS:
            rates = row[clock]
            assert rates["framework_calls_per_s"] > 0 and rates["hand_calls_per_s"] > 0
            assert rates["ratio"] == pytest.approx(rates["framework_calls_per_s"] / rates["hand_calls_per_s"])
            assert rates["ratio_min_of_rounds"] <= rates["ratio_median_of_rounds"] <= rates["ratio_max_of_rounds"]
        assert row["ratio"] == row["cpu"]["ratio_median_of_rounds"]
        # The hand-written actor computed the framework's Q-values before it was timed.
        assert row["max_abs_diff"] < 1e-4
    assert result["config"]["batch_sizes"] == list(BATCHES)
    assert result["environment"]["date"] and result["environment"]["git_revision"]


def test_scenario_figure_has_every_row_and_ratio(result):
    (fig,) = act_scenario.figures(result)
    table = fig.tables[0]
    assert [(r[0], r[1]) for r in table.rows] == [(act_scenario.TITLES[r["backend"]], r["batch"])
                                                  for r in result["rows"]]
    for cells, row in zip(table.rows, result["rows"]):
        assert cells[4] == row["ratio"] and cells[7] == row["wall"]["ratio_median_of_rounds"]
    assert [r.value for r in fig.ratios] == [r["ratio"] for r in result["rows"]]
    assert fig.raw is result and fig.headline.endswith(f"lowest {min(r['ratio'] for r in result['rows']):.3f}")
    text = figure_markdown(fig, "act.png")
    assert "![Act throughput against hand-written TF and PyTorch](act.png)" in text and fig.headline in text


def test_scenario_draws_a_committed_result_again(result, tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "act.json"
    path.write_text(json.dumps(result))
    report = rerender.rerender(path, SCENARIOS, ["act"])
    (fig,) = report.figures
    assert fig.tables == act_scenario.figures(result)[0].tables
    assert fig.meta["revision"] == result["environment"]["git_revision"] and fig.meta["rendered from"]
    assert plot_figure(fig, tmp_path / "act.png")
    assert (tmp_path / "act.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _offset_hand_written(backend, weights):
    """A hand-written actor whose first action's advantage bias is off by 0.01: caught before timing.

    (A constant offset on every advantage would cancel in the dueling combination.)
    """
    broken = dict(weights)
    key = next(k for k in weights if k.endswith("advantage/bias"))
    broken[key] = weights[key].copy()
    broken[key][0] += np.float32(0.01)
    return _REAL_HAND_WRITTEN(backend, broken)


def test_disagreeing_hand_written_actor_fails_the_run(monkeypatch):
    if not BACKENDS:
        pytest.skip("no backend installed")
    monkeypatch.setattr(act_throughput, "hand_written", _offset_hand_written)
    with pytest.raises(AssertionError):
        act_measure.measure(BACKENDS[:1], (1,), seconds=0.01, rounds=1, threads=1)


def test_ratios_below_target_are_missed_and_counted(result):
    rows = [dict(r) for r in result["rows"]]
    rows[0]["ratio"], rows[-1]["ratio"] = 0.5, 1.2
    (fig,) = act_scenario.figures({**result, "rows": rows})
    assert fig.ratios[0].met is False and fig.ratios[-1].met is True
    met = sum(r["ratio"] >= act_measure.TARGET_RATIO for r in rows)
    assert fig.headline.startswith(f"framework / hand-written act calls per CPU-second >= "
                                   f"{act_measure.TARGET_RATIO} in {met} of {len(rows)} ")


@pytest.mark.skipif("torch" not in BACKENDS, reason="torch not selected or installed")
def test_torch_layout_variants_agree_and_are_timed():
    diagnosis = act_diagnosis.diagnose_torch_layout((2,), seconds=0.02, rounds=1)
    (row,) = diagnosis["rows"]
    assert set(row) == {"batch", "framework", "ratios", *diagnosis["variants"]}
    assert set(row["ratios"]) == {"framework", *diagnosis["variants"]} and row["ratios"]["hand-written"] == 1.0
    assert all(row[name] > 0 for name in row["ratios"])
    (table,) = act_scenario.diagnosis_tables({**diagnosis, "op_counts": None})
    assert table.rows[0][0] == 2 and table.header == ["batch", "framework", *diagnosis["variants"]]


@pytest.mark.skipif("torch" not in BACKENDS, reason="torch not selected or installed")
def test_torch_layout_variant_without_bias_is_caught(monkeypatch):
    real = act_diagnosis.conv_layout_actor

    def no_bias(weights, fuse_bias, contiguous_kernel):
        zeroed = {k: (np.zeros_like(v) if "conv2d_0/bias" in k else v) for k, v in weights.items()}
        return real(zeroed, fuse_bias, contiguous_kernel)

    monkeypatch.setattr(act_diagnosis, "conv_layout_actor", no_bias)
    with pytest.raises(AssertionError, match="diagnosis variant"):
        act_diagnosis.diagnose_torch_layout((1,), seconds=0.01, rounds=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_op_counts_see_the_networks_layers(backend):
    counts = act_diagnosis.op_counts(backend)
    conv, matmul = {"torch": ("aten::conv2d", "aten::addmm"), "tf": ("Conv2D", "MatMul")}[backend]
    for side in ("framework", "hand"):
        by_op = counts[side]["by_op"]
        # Three convolutions, three dense layers (torso, value, advantage; addmm on PyTorch) on both sides.
        assert by_op[conv] == 3 and by_op[matmul] == 3, (side, by_op)
        # Top-level ops only (conv2d calls convolution in turn); no graph constants.
        assert not {"aten::convolution", "aten::mm", "Const", "Placeholder"} & set(by_op), by_op
        assert counts[side]["total"] == sum(by_op.values())
    table = act_scenario.diagnosis_tables({"variants": {}, "rows": [], "op_counts": {backend: counts}})[1]
    assert table.rows[0][:3] == [backend, counts["framework"]["total"], counts["hand"]["total"]]


@pytest.mark.parametrize("kwargs, match", [
    ({"backends": ("jax",)}, "backends must be among"),
    ({"batch_sizes": (0,)}, "batch_sizes must be positive ints"),
    ({"backends": ("tf",), "diagnose": True}, "diagnose=True needs 'torch'"),
])
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        act_measure.measure(**kwargs)


@pytest.mark.parametrize("fns, seconds, rounds, match", [
    ({}, 1.0, 1, "at least one contender"),
    ({"a": lambda: None}, 0.0, 1, "seconds must be positive"),
    ({"a": lambda: None}, 1.0, 0, "rounds must be an int >= 1"),
])
def test_interleaved_rates_rejects_bad_arguments(fns, seconds, rounds, match):
    with pytest.raises(ValueError, match=match):
        interleaved_rates(fns, seconds, rounds)


def test_interleaved_rates_alternates_order():
    calls = []
    rates = interleaved_rates({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
                                         seconds=0.002, rounds=2, warmup=0)
    assert all(len(rates[n][clock]) == 2 for n in "ab" for clock in CLOCKS)
    runs = [name for i, name in enumerate(calls) if i == 0 or calls[i - 1] != name]
    assert runs == ["a", "b", "a"]  # round 0: a then b; round 1: b then a


def test_cpu_clock_does_not_count_waiting():
    # Framework thread pools left spinning by earlier tests would count as this process's CPU time.
    configure_threads(1)
    time.sleep(0.3)
    rates = interleaved_rates({"sleeper": lambda: time.sleep(0.002)}, seconds=0.03, rounds=1, warmup=0)
    # Sleeping costs no CPU: far more calls per CPU-second than per wall-clock second.
    assert rates["sleeper"]["cpu"][0] > 3 * rates["sleeper"]["wall"][0]
