"""The multi-device report's command line: PyTorch alone never imports TensorFlow; JSON + Markdown written."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from spacegraph.reports import multi_device


def test_torch_only_run_writes_json_and_markdown_without_tensorflow(tmp_path):
    cmd = [sys.executable, "-m", "spacegraph.reports.multi_device", "--backend", "torch", "--devices", "cpu",
           "--replicas", "1,2", "--loss", "dqn,impala", "--batch", "6", "--hidden", "8", "--seconds", "0.02",
           "--repeats", "1", "--out", str(tmp_path)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "multi_device.json").read_text())
    assert result["tensorflow_imported"] is False
    settings = [(r["loss"], r["setting"], tuple(r["devices"])) for r in result["rows"]]
    assert settings == [(loss, s, d) for loss in ("dqn", "impala")
                        for s, d in (("single", ("default",)), ("single on cpu", ("cpu",)), ("1 replicas", ("cpu",)),
                                     ("2 replicas", ("cpu", "cpu")))]
    assert all(r["updates_per_s"] > 0 and r["samples_per_s"] == pytest.approx(r["updates_per_s"] * r["samples_per_update"])
               for r in result["rows"])
    text = (tmp_path / "multi_device.md").read_text()
    assert "| torch | impala | 2 replicas | cpu, cpu |" in text and "cannot show a speed-up" in text


@pytest.mark.parametrize("argv,message", [(["--backend", "jax"], "--backend: expected"),
                                          (["--batch", "2", "--replicas", "1,4"], "--batch 2 must be at least")])
def test_bad_arguments_are_refused(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit):
        multi_device.main([*argv, "--out", str(tmp_path)])
    assert message in capsys.readouterr().err
