"""The act throughput report (Fig. 5b): one run over both backends, report structure, agreement checks."""

from __future__ import annotations

import importlib.util
import time

import numpy as np
import pytest

from spacegraph.reports import act_diagnosis, act_report, act_throughput
from harness.testing.plugin import selected_backends

BACKENDS = tuple(b for b in selected_backends()
                 if importlib.util.find_spec({"tf": "tensorflow", "torch": "torch"}[b]) is not None)
BATCHES = (1, 4)
_REAL_HAND_WRITTEN = act_throughput.hand_written


@pytest.fixture(scope="module")
def result():
    if not BACKENDS:
        pytest.skip("no backend installed")
    return act_report.measure(BACKENDS, BATCHES, seconds=0.04, rounds=2, threads=1)


def test_one_run_measures_every_backend_and_batch(result):
    rows = result["rows"]
    assert [(r["backend"], r["batch"]) for r in rows] == [(b, n) for b in BACKENDS for n in BATCHES]
    for row in rows:
        for clock in act_report.CLOCKS:
            rates = row[clock]
            assert rates["framework_calls_per_s"] > 0 and rates["hand_calls_per_s"] > 0
            assert rates["ratio"] == pytest.approx(rates["framework_calls_per_s"] / rates["hand_calls_per_s"])
            assert rates["ratio_min_of_rounds"] <= rates["ratio_median_of_rounds"] <= rates["ratio_max_of_rounds"]
        assert row["ratio"] == row["cpu"]["ratio_median_of_rounds"]
        # The hand-written actor computed the framework's Q-values before it was timed.
        assert row["max_abs_diff"] < 1e-4
    assert result["config"]["batch_sizes"] == list(BATCHES)
    assert result["environment"]["date"] and result["environment"]["git_revision"]


def test_markdown_has_table_method_machine_and_date(result):
    text = act_report.markdown(result)
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| backend | batch |"))
    body = lines[header + 2: header + 2 + len(result["rows"])]
    for line, row in zip(body, result["rows"]):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[0] == row["backend"] and cells[1] == str(row["batch"])
        assert float(cells[4].split("**")[1]) == pytest.approx(row["ratio"], abs=5e-4)
        assert float(cells[6]) == pytest.approx(row["cpu"]["ratio"], abs=5e-4)
        assert float(cells[7]) == pytest.approx(row["wall"]["ratio_median_of_rounds"], abs=5e-4)
    for section in ("## Result", "## How it was measured", "## Environment", "## Reproduce"):
        assert section in text
    assert result["environment"]["date"] in text and result["environment"]["machine"] in text
    assert "act_throughput.png" in text


def test_png_is_written(result, tmp_path):
    pytest.importorskip("matplotlib")
    paths = act_report.write(result, tmp_path)
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert paths["md"].read_text() == act_report.markdown(result)
    assert '"rows"' in paths["json"].read_text()
    # The report can be rebuilt from its JSON alone.
    act_report.main(["--from-json", str(paths["json"]), "--out-dir", str(tmp_path / "again")])
    assert (tmp_path / "again" / "act_throughput.md").read_text() == paths["md"].read_text()


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
        act_report.measure(BACKENDS[:1], (1,), seconds=0.01, rounds=1, threads=1)


def test_summary_flags_settings_below_target(result):
    rows = [dict(r) for r in result["rows"]]
    rows[0]["ratio"], rows[-1]["ratio"] = 0.5, 1.2
    text = act_report.table({**result, "rows": rows})
    body = [line for line in text.splitlines()[2:]]
    assert "(below target)" in body[0] and "(below target)" not in body[-1]
    first = act_report.summary({**result, "rows": rows})[0]
    assert first.startswith(f"- {sum(r['ratio'] >= act_report.TARGET_RATIO for r in rows)} of {len(rows)}")


@pytest.mark.skipif("torch" not in BACKENDS, reason="torch not selected or installed")
def test_torch_layout_variants_agree_and_are_timed():
    diagnosis = act_report.diagnose_torch_layout((2,), seconds=0.02, rounds=1)
    (row,) = diagnosis["rows"]
    assert set(row) == {"batch", "framework", "ratios", *diagnosis["variants"]}
    assert set(row["ratios"]) == {"framework", *diagnosis["variants"]} and row["ratios"]["hand-written"] == 1.0
    assert all(row[name] > 0 for name in row["ratios"])
    text = act_report.diagnosis_table(diagnosis)
    assert text.splitlines()[2].startswith("| 2 | ")


@pytest.mark.skipif("torch" not in BACKENDS, reason="torch not selected or installed")
def test_torch_layout_variant_without_bias_is_caught(monkeypatch):
    real = act_diagnosis.conv_layout_actor

    def no_bias(weights, fuse_bias, contiguous_kernel):
        zeroed = {k: (np.zeros_like(v) if "conv2d_0/bias" in k else v) for k, v in weights.items()}
        return real(zeroed, fuse_bias, contiguous_kernel)

    monkeypatch.setattr(act_diagnosis, "conv_layout_actor", no_bias)
    with pytest.raises(AssertionError, match="diagnosis variant"):
        act_report.diagnose_torch_layout((1,), seconds=0.01, rounds=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_op_counts_see_the_networks_layers(backend):
    counts = act_report.op_counts(backend)
    conv, matmul = {"torch": ("aten::conv2d", "aten::addmm"), "tf": ("Conv2D", "MatMul")}[backend]
    for side in ("framework", "hand"):
        by_op = counts[side]["by_op"]
        # Three convolutions, three dense layers (torso, value, advantage; addmm on PyTorch) on both sides.
        assert by_op[conv] == 3 and by_op[matmul] == 3, (side, by_op)
        # Top-level ops only (conv2d calls convolution in turn); no graph constants.
        assert not {"aten::convolution", "aten::mm", "Const", "Placeholder"} & set(by_op), by_op
        assert counts[side]["total"] == sum(by_op.values())
    table = act_report.op_count_table({backend: counts})
    assert table.splitlines()[2].startswith(f"| {backend} | {counts['framework']['total']} | ")


@pytest.mark.parametrize("kwargs, match", [
    ({"backends": ("jax",)}, "backends must be among"),
    ({"batch_sizes": (0,)}, "batch_sizes must be positive ints"),
    ({"backends": ("tf",), "diagnose": True}, "diagnose=True needs 'torch'"),
])
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        act_report.measure(**kwargs)


@pytest.mark.parametrize("fns, seconds, rounds, match", [
    ({}, 1.0, 1, "at least one contender"),
    ({"a": lambda: None}, 0.0, 1, "seconds must be positive"),
    ({"a": lambda: None}, 1.0, 0, "rounds must be an int >= 1"),
])
def test_interleaved_rates_rejects_bad_arguments(fns, seconds, rounds, match):
    with pytest.raises(ValueError, match=match):
        act_report.interleaved_rates(fns, seconds, rounds)


def test_interleaved_rates_alternates_order():
    calls = []
    rates = act_report.interleaved_rates({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
                                         seconds=0.002, rounds=2, warmup=0)
    assert all(len(rates[n][clock]) == 2 for n in "ab" for clock in act_report.CLOCKS)
    runs = [name for i, name in enumerate(calls) if i == 0 or calls[i - 1] != name]
    assert runs == ["a", "b", "a"]  # round 0: a then b; round 1: b then a


def test_cpu_clock_does_not_count_waiting():
    # Framework thread pools left spinning by earlier tests would count as this process's CPU time.
    act_report.configure_threads(1)
    time.sleep(0.3)
    rates = act_report.interleaved_rates({"sleeper": lambda: time.sleep(0.002)}, seconds=0.03, rounds=1, warmup=0)
    # Sleeping costs no CPU: far more calls per CPU-second than per wall-clock second.
    assert rates["sleeper"]["cpu"][0] > 3 * rates["sleeper"]["wall"][0]
