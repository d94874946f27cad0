"""harness.measure: timers and interleaved rounds, CPU-time accounting, machine facts, Markdown tables."""

from __future__ import annotations

import subprocess
import time

import pytest

from harness.measure import machine, tables, timing
from suites.doubles import FakeClock


# ---- timing --------------------------------------------------------------------------------------------
def test_round_rates_calls_in_batches_until_enough_calls_and_time():
    calls = []
    rates = timing.round_rates(lambda: calls.append(1), seconds=0.0, batch=7, min_calls=10)
    assert len(calls) == 14  # two batches: the first made only 7 of the 10 calls needed
    assert rates["wall"] > 0 and rates["cpu"] > 0


def test_round_rates_on_a_fake_clock(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(timing, "time", clock)

    def call():
        clock.advance(0.25)

    # 0.25 s per call on both clocks: the round ends after the call that reaches 1 s.
    assert timing.round_rates(call, seconds=1.0) == {"cpu": 4.0, "wall": 4.0}
    assert timing.round_rates(call, seconds=1.0, batch=3) == {"cpu": 4.0, "wall": 4.0}  # 6 calls, 1.5 s
    assert timing.run_for(lambda: (call(), (2, 5))[1], 1.0) == (8, 20, 1.0, 1.0)


def test_calls_per_s_warms_up_and_takes_the_median_of_rounds(monkeypatch):
    calls = []
    fake = iter([{"wall": 5.0, "cpu": 1.0}, {"wall": 1.0, "cpu": 1.0}, {"wall": 3.0, "cpu": 1.0}])
    monkeypatch.setattr(timing, "round_rates", lambda fn, seconds, batch: next(fake))
    assert timing.calls_per_s(lambda: calls.append(1), 0.1, rounds=3, warmup=4) == 3.0
    assert len(calls) == 4


def test_interleaved_reverses_the_order_every_other_round():
    assert list(timing.interleaved(["a", "b", "c"], 3)) == ["a", "b", "c", "c", "b", "a", "a", "b", "c"]
    assert list(timing.interleaved(["a"], 0)) == []


def test_run_for_adds_up_both_counts_for_at_least_the_time_given():
    chunks = []

    def chunk():
        chunks.append(1)
        time.sleep(0.005)
        return 3, 12

    a, b, wall, cpu = timing.run_for(chunk, 0.02)
    assert (a, b) == (3 * len(chunks), 12 * len(chunks)) and len(chunks) >= 2
    assert wall >= 0.02 and cpu > 0


def test_time_us_is_the_least_round_mean():
    us = timing.time_us(lambda: time.sleep(0.001), seconds=0.05, rounds=2)
    assert 1000 <= us < 50_000


def test_cpu_timed_calls_account_only_the_named_methods(monkeypatch):
    class Target:
        value = 7

        def work(self, n):
            return n * n

        def other(self):
            return "other"

    class Timed(timing.CpuTimedCalls):
        TIMED = ("work",)

    monkeypatch.setattr(timing, "time", FakeClock(tick=1.0))  # one CPU second per reading
    timed = Timed(Target())
    assert timed.value == 7 and timed.work(3) == 9 and timed.other() == "other"
    assert timed.work(4) == 16
    assert timed.seconds == {"work": 2.0}  # two timed calls, two clock readings each
    timed.reset()
    assert timed.seconds == {"work": 0.0}
    with pytest.raises(AttributeError):
        timed.missing


# ---- tables --------------------------------------------------------------------------------------------
def test_markdown_table_rule_and_rows():
    text = tables.markdown_table(["a", "b c"], [[1, "x"], "| verbatim | |", ("", 2.5)])
    assert text.splitlines() == ["| a | b c |", "|---|---|", "| 1 | x |", "| verbatim | |", "|  | 2.5 |"]
    assert tables.markdown_table(["only"], []) == "| only |\n|---|"


# ---- machine -------------------------------------------------------------------------------------------
def test_library_versions_name_missing_modules_none():
    got = machine.library_versions(("numpy", "spacegraph_no_such_module"))
    assert got["numpy"] and got["spacegraph_no_such_module"] is None
    assert list(got) == ["numpy", "spacegraph_no_such_module"]


def test_git_facts_outside_a_checkout(tmp_path):
    assert machine.git_revision(tmp_path) == "unknown"
    assert machine.uncommitted(("x",), tmp_path) is None


def test_git_facts_of_a_checkout(tmp_path):
    run = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    (tmp_path / "f.txt").write_text("one\n")
    run("add", "f.txt")
    run("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "one")
    rev = run("rev-parse", "HEAD").stdout.decode().strip()
    assert machine.git_revision(tmp_path) == rev and machine.uncommitted(("f.txt",), tmp_path) == []
    (tmp_path / "f.txt").write_text("two\n")
    assert machine.git_revision(tmp_path) == rev + "+dirty"
    assert machine.uncommitted(("f.txt",), tmp_path) == [" M f.txt"]


def test_environment_records_load_and_duration():
    env = machine.environment((1.234, 2.0, 3.0), 12.34)
    assert env["load_average_before"] == [1.23, 2.0, 3.0] and env["measurement_seconds"] == 12.3
    assert len(env["load_average_after"]) == 3 and env["processor"] == machine.cpu_model()
    assert {"date", "git_revision", "machine", "python", "numpy", "tensorflow", "torch"} <= set(env)


def test_configure_threads_rejects_non_positive_counts():
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="threads must be a positive int"):
            machine.configure_threads(bad)
