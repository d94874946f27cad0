"""The interleaved IMPALA A/B (`spacegraph.reports.impala_ab`): variants run in turn every round, ratios are
paired within a round, and a bad variants file is named with what is wrong."""

import json

import pytest

from spacegraph.reports import impala_ab
from spacegraph.reports.impala_throughput import merged


def test_variants_merge_into_config_sections():
    base = {"env": {"id": "ALE/Pong-v5", "num_envs": 4, "atari": True}, "rollout": {"length": 20, "batch_size": 4}}
    out = merged(base, {"env": {"num_envs": 8}, "rollout": {"batch_size": 2}, "backend": "tf"})
    assert out == {"env": {"id": "ALE/Pong-v5", "num_envs": 8, "atari": True},
                   "rollout": {"length": 20, "batch_size": 2}, "backend": "tf"}
    assert base["env"]["num_envs"] == 4   # the base is not changed


def test_rounds_interleave_and_ratios_pair_within_a_round(monkeypatch):
    calls = []
    # round 0 is slow for every variant (a loaded machine), round 1 fast: paired ratios stay 2.0
    rates = iter([100.0, 200.0, 1000.0, 2000.0])

    def fake_run_side(side, env, actors, seconds, timeout, variant):
        calls.append((side, env, actors, variant))
        return {"frames_per_s": next(rates)}

    monkeypatch.setattr(impala_ab, "run_side", fake_run_side)
    out = impala_ab.interleave({"a": {}, "b": {"backend": "tf", "actors": 1}}, rounds=2, seconds=1, actors=2,
                               log=lambda line: None)
    assert [c[3] for c in calls] == [{}, {"backend": "tf"}, {}, {"backend": "tf"}]   # a, b, a, b
    assert [c[2] for c in calls] == [2, 1, 2, 1] and {c[:2] for c in calls} == {("ours", "pong")}
    assert out["summary"]["b"]["paired_ratios"] == [2.0, 2.0] and out["summary"]["b"]["paired_ratio_median"] == 2.0
    assert out["summary"]["a"]["median_frames_per_s"] == 550.0


@pytest.mark.parametrize("content, message", [
    ("[1, 2]", "expected a JSON object of named variants"),
    ("{not json", "cannot be read as JSON"),
    ('{"a": {"backend": "tf", "num_envs": 8}}', r"variant 'a': unknown keys \['num_envs'\]"),
])
def test_a_bad_variants_file_is_named(tmp_path, capsys, content, message):
    path = tmp_path / "variants.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        impala_ab.load_variants(str(path))
    assert impala_ab.main(["--variants", str(path)]) == 2
    assert str(path) in capsys.readouterr().err


def test_default_variants_are_valid(tmp_path):
    path = tmp_path / "variants.json"
    path.write_text(json.dumps(impala_ab.DEFAULT_VARIANTS))
    assert impala_ab.load_variants(str(path)) == impala_ab.DEFAULT_VARIANTS


@pytest.mark.parametrize("variant, passed", [(None, None), ({}, "{}"), ({"backend": "tf"}, '{"backend": "tf"}')])
def test_the_child_gets_every_variant_the_empty_one_too(monkeypatch, variant, passed):
    import subprocess

    from spacegraph.reports import impala_throughput

    seen = []

    def fake_run(cmd, **kwargs):
        seen.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, stdout='{"frames_per_s": 1.0}\n', stderr="")

    monkeypatch.setattr(impala_throughput.subprocess, "run", fake_run)
    assert impala_throughput.run_side("ours", "pong", 2, 1.0, 10, variant) == {"frames_per_s": 1.0}
    cmd = seen[0]
    assert (cmd[cmd.index("--variant") + 1] if "--variant" in cmd else None) == passed
