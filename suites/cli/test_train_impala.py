"""`spacegraph train` with IMPALA configs: one process, the run files and --resume; flags that do not fit say so;
distributed TF and Ray from the command line (marked ``distributed``)."""

from __future__ import annotations

import json
import math
import os

import pytest
import yaml

from spacegraph.cli import main

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def write_config(folder, **changes) -> str:
    with open(os.path.join(ROOT, "reference_agents", "configs", "impala_cartpole.yaml")) as fh:
        cfg = yaml.safe_load(fh)
    cfg.update({"env": {"id": "CartPole-v1", "num_envs": 4}, "rollout": {"length": 10, "batch_size": 1},
                "evaluation": {"every": 400, "screen_episodes": 2, "episodes": 3, "target_return": 1e9}}, **changes)
    path = os.path.join(folder, "impala_tiny.yaml")
    with open(path, "w") as fh:
        yaml.safe_dump(cfg, fh)
    return path


def rows(run):
    with open(os.path.join(run, "metrics.jsonl")) as fh:
        return [json.loads(line) for line in fh]


def test_train_and_resume_an_impala_config_in_one_process(tmp_path, capsys):
    config, run = write_config(str(tmp_path)), str(tmp_path / "run")
    assert main(["train", config, "--steps", "800", "--out", run, "--quiet", "--backend", "torch"]) == 0
    out = capsys.readouterr().out
    assert "env steps     800 of 800" in out and "updates       20" in out
    assert [r["env_steps"] for r in rows(run)] == [400, 800]
    assert sorted(os.listdir(run)) == ["checkpoint", "episodes.csv", "learning_curve.png", "metrics.csv",
                                       "metrics.jsonl", "tensorboard"]
    assert main(["train", "--resume", run, "--steps", "1200", "--quiet"]) == 0
    assert [r["env_steps"] for r in rows(run)] == [400, 800, 1200]
    assert rows(run)[-1]["updates"] == 30
    for r in rows(run):   # one process: the policy acts with the learner's weights, no lag to count
        assert 0 < r["policy_entropy"] <= math.log(2) and r["grad_norm"] > 0 and r["policy_lag"] is None


@pytest.mark.parametrize("flags, message", [
    (["--shards", "2"], "--shards is for Ape-X"),
    (["--actors", "2"], "need --executor tf-dist or ray"),
    (["--executor", "tf-dist", "--workers", "2"], "takes --actors N"),
    (["--executor", "ray", "--actors", "2"], "takes --workers N"),
    (["--executor", "tf-dist", "--address", "auto"], "--address joins a Ray cluster"),
    (["--executor", "tf-dist", "--serve", "127.0.0.1:5000"], "--serve is for --executor seed over gRPC"),
    (["--executor", "seed", "--serve", "localhost"], "--serve: expected HOST:PORT with a port in 1-65535"),
    (["--executor", "seed", "--serve", "127.0.0.1:70000"], "got '127.0.0.1:70000'"),
    (["--executor", "seed", "--serve", "0.0.0.0:5000"], "--serve 0.0.0.0:5000: 0.0.0.0 is not a loopback address, "
                                                        "so anyone who can reach it could join the run; give a secret"),
    (["--executor", "seed", "--serve", "[::]:5000"], "[::] is not a loopback address"),
    (["--executor", "seed", "--token-file", "t"], "--token-file, --tls-cert and --tls-key are for --serve"),
    (["--executor", "seed", "--serve", "127.0.0.1:5000", "--tls-cert", "c.pem"], "--tls-cert and --tls-key go together"),
    (["--executor", "seed", "--serve", "10.0.0.1:5000", "--token-file", "missing"],
     "--token-file missing: cannot read the token: No such file or directory"),
])
def test_flags_that_do_not_fit_impala_are_refused(tmp_path, capsys, flags, message):
    bounded = ["--steps", "400", "--max-seconds", "5"]   # a flag wrongly let through ends soon, not never
    assert main(["train", write_config(str(tmp_path)), "--out", str(tmp_path / "r"), *bounded, *flags]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r").exists()   # refused before any work


def test_serve_checks_its_token_and_certificate_files_before_any_work(tmp_path, monkeypatch):
    from argparse import Namespace

    from spacegraph.serve import serve_options

    short, cert = tmp_path / "short", tmp_path / "cert.pem"
    short.write_text("tiny\n")
    cert.write_text("not a certificate\n")

    def options(**flags):
        return serve_options(Namespace(**{"serve": "0.0.0.0:5000", "token_file": None, "tls_cert": None,
                                          "tls_key": None, **flags}))

    with pytest.raises(ValueError, match=f"--token-file {short}: the token must have at least 16 characters; it has 4"):
        options(token_file=str(short))
    monkeypatch.setenv("SPACEGRAPH_TOKEN", "s" * 20)
    with pytest.raises(ValueError, match=f"--tls-key {cert}: expected a PEM file"):
        options(tls_cert=str(cert), tls_key=str(cert))
    assert options().token == b"s" * 20 and options(serve="127.0.0.1:5000").host == "127.0.0.1"


@pytest.mark.parametrize("args", [["dqn_cartpole", "--executor", "tf-dist"],
                                  ["apex_cartpole", "--executor", "local", "--publish-every", "5"],
                                  ["dqn_cartpole", "--serve", "127.0.0.1:5000"],
                                  ["dqn_cartpole", "--token-file", "t"]])
def test_impala_flags_on_a_dqn_or_apex_config_are_refused(tmp_path, capsys, args):
    assert main(["train", *args, "--out", str(tmp_path / "r")]) == 2
    assert "are for IMPALA configs" in capsys.readouterr().err


@pytest.mark.distributed
@pytest.mark.parametrize("executor, count, resume", [("tf-dist", "--actors", True), ("ray", "--workers", False),
                                                     ("seed", "--actors", False)])
def test_distributed_impala_from_the_command_line_and_resume(tmp_path, capsys, executor, count, resume):
    config, run = write_config(str(tmp_path)), str(tmp_path / "run")
    common = ["--quiet", "--executor", executor, count, "2"]
    assert main(["train", config, "--steps", "1600", "--out", run, "--backend", "torch", *common]) == 0
    out = capsys.readouterr().out
    assert "rollouts learned per actor" in out and "failures: none" in out
    assert rows(run)[-1]["env_steps"] >= 1600
    # the learning diagnostics: the policy's entropy (2 actions) and how many updates behind the actors acted
    assert all(0 < r["policy_entropy"] <= math.log(2) and r["policy_lag"] >= 0 for r in rows(run))
    if not resume:  # (the resume path is the executor's worker factory again: tf-dist covers it)
        return
    assert main(["train", "--resume", run, "--steps", "3200", *common]) == 0
    assert rows(run)[-1]["env_steps"] >= 3200


def test_the_distributed_summary_names_transport_faults_and_the_rollouts_they_lost():
    from types import SimpleNamespace

    from spacegraph.train.impala import distributed_summary

    executor = SimpleNamespace(num_actors=2, failures=[SimpleNamespace(message="actor 1 died; restarted")])
    worker = SimpleNamespace(executor=executor, received={1: 5, 0: 7}, transport_faults=[], lost_rollouts=0)
    clean = distributed_summary(worker, "tf-dist")
    assert clean == ["actors        2; rollouts learned per actor {0: 7, 1: 5}; failures: actor 1 died; restarted"]
    worker.transport_faults, worker.lost_rollouts = [{"step": "take"}, {"step": "publish"}], 4
    assert distributed_summary(worker, "tf-dist")[1:] == [
        "transport     2 step(s) whose outcome the transport lost (take, publish); rollouts lost in them: 4"]
