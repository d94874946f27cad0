"""TensorBoard scalars of `spacegraph train` and `Trainer`, read back with TensorBoard's own `EventAccumulator`:
tags and values equal the metrics rows and episodes at their env steps, ``--no-tensorboard`` writes none, a resume
continues the step axis without a duplicated point, a run without the package goes on and says so once, a
PyTorch run imports no TensorFlow, and Ape-X's replay ledger travels along."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from reference_agents.agents import build_agent
from reference_agents.training import METRIC_COLUMNS, Trainer
from reference_agents.training.scalars import EPISODE_TAGS, ROW_TAGS, read_events
from spacegraph.cli import main
from suites.cli.test_train import read_csv, read_jsonl, write_config

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def scalars(run) -> dict[str, list[tuple[int, float]]]:
    """Every scalar point of ``run/tensorboard`` as TensorBoard reads it: ``{tag: [(step, value), ...]}``, all
    points kept (no sampling) and none purged, so a duplicated or out-of-order point shows."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(os.path.join(run, "tensorboard"), size_guidance={"scalars": 0}, purge_orphaned_data=False)
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def f32(value) -> float:
    return float(np.float32(value))


def check_against_run_files(run) -> dict[str, list[tuple[int, float]]]:
    """Checks that the scalars of ``run`` are exactly its metrics rows and episodes (env steps, float32 values, no
    other point); returns them."""
    points = scalars(run)
    rows = read_jsonl(os.path.join(run, "metrics.jsonl"))
    for key, tag in ROW_TAGS.items():
        expected = [(r["env_steps"], f32(r[key])) for r in rows if r[key] is not None]
        assert points.get(tag, []) == expected, tag
    _, episodes = read_csv(os.path.join(run, "episodes.csv"))
    for column, tag in zip(("return", "length"), EPISODE_TAGS):
        assert points[tag] == [(int(e["end_step"]), f32(e[column])) for e in episodes], tag
    return points


def test_the_row_tags_cover_every_metric_column_but_the_step():
    assert sorted(ROW_TAGS) == sorted(set(METRIC_COLUMNS) - {"env_steps"})
    assert len(set(ROW_TAGS.values())) == len(ROW_TAGS)


def test_train_writes_the_metrics_rows_and_episodes_as_scalars_at_env_steps(tmp_path, capsys):
    run = str(tmp_path / "run")
    assert main(["train", write_config(tmp_path), "--steps", "500", "--out", run, "--quiet"]) == 0
    assert "files         metrics.csv metrics.jsonl episodes.csv learning_curve.png tensorboard checkpoint" in \
        capsys.readouterr().out
    points = check_against_run_files(run)
    assert sorted(points) == sorted(["eval/return", "eval/episodes", "train/return_100", "train/episodes",
                                     "train/frames", "train/updates", "loss/last", "explore/epsilon",
                                     "speed/steps_per_s", "speed/frames_per_s", "time/wall_s", "time/train_s",
                                     "time/eval_s", "learner/grad_norm", "episode/return",
                                     "episode/length"])  # no screen, no target; DQN: no entropy, no policy lag
    assert [step for step, _ in points["eval/return"]] == [200, 400, 500]
    assert points["explore/epsilon"][0] == (200, f32(1.0 - 0.9 * 200 / 400))
    assert len(os.listdir(os.path.join(run, "tensorboard"))) == 1


def test_no_tensorboard_writes_no_event_file(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", write_config(tmp_path), "--steps", "250", "--out", str(run), "--quiet",
                 "--no-tensorboard"]) == 0
    files = "files         metrics.csv metrics.jsonl episodes.csv learning_curve.png checkpoint"
    assert files in capsys.readouterr().out
    assert (run / "metrics.jsonl").exists() and not (run / "tensorboard").exists()
    trainer = Trainer(build_agent(write_config(tmp_path)), tmp_path / "api", progress=False, tensorboard=False)
    trainer.train(250)
    assert (tmp_path / "api" / "metrics.jsonl").exists() and not (tmp_path / "api" / "tensorboard").exists()
    with pytest.raises(ValueError, match="Trainer: tensorboard must be True or False"):
        Trainer(build_agent(write_config(tmp_path)), tmp_path / "bad", tensorboard="no")


def test_a_resume_continues_the_step_axis_without_a_duplicated_point(tmp_path):
    """A run killed after its checkpoint at 400 had written points to 800 (the metrics files too): the resume
    rewrites the metrics to the checkpoint's rows and the event files to its steps, then goes on to 1,000."""
    run, saved = str(tmp_path / "run"), str(tmp_path / "checkpoint-at-400")
    assert main(["train", write_config(tmp_path), "--steps", "400", "--out", run, "--quiet"]) == 0
    shutil.copytree(os.path.join(run, "checkpoint"), saved)
    assert main(["train", "--resume", run, "--steps", "800", "--quiet"]) == 0
    assert [s for s, _ in scalars(run)["eval/return"]] == [200, 400, 600, 800]
    shutil.rmtree(os.path.join(run, "checkpoint"))
    shutil.rmtree(os.path.join(run, "checkpoint.old"))
    shutil.copytree(saved, os.path.join(run, "checkpoint"))
    first, _ = sorted(os.listdir(os.path.join(run, "tensorboard")))  # 0-400, and 400-800 past the checkpoint
    with open(os.path.join(run, "tensorboard", first), "ab") as fh:  # killed in the middle of a record
        fh.write(b"\x10\x00\x00")
    assert main(["train", "--resume", run, "--steps", "1000", "--quiet"]) == 0
    points = check_against_run_files(run)  # (no point twice, none out of order: the lists would differ)
    assert [s for s, _ in points["eval/return"]] == [200, 400, 600, 800, 1000]
    for tag, series in points.items():
        steps = [s for s, _ in series]
        assert steps == sorted(set(steps)), tag
    files = sorted(os.listdir(os.path.join(run, "tensorboard")))  # the killed segment's file had no point <= 400
    assert len(files) == 2 and files[0] == first and files[1].startswith("events.out.tfevents.000000000400.")
    events, whole = read_events(os.path.join(run, "tensorboard", first))  # rewritten without its torn tail
    assert whole and max(e.step for e in events) == 400


def test_reading_an_event_file_stops_at_a_damaged_record(tmp_path):
    from tensorboard.compat.proto import event_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter

    from reference_agents.training.scalars import EventFile

    writer = EventFile(str(tmp_path), 0)
    writer.add([(1, {"a": 1.0}), (2, {"a": 2.0}), (3, {"a": None})])  # (no value: no event)
    writer.close()
    path = writer.path
    events, whole = read_events(path)
    assert whole and [(e.step, e.summary.value[0].simple_value) for e in events[1:]] == [(1, 1.0), (2, 2.0)]
    assert events[0].file_version == "brain.Event:2"
    data = bytearray(open(path, "rb").read())
    data[-6] ^= 0xFF  # a flipped bit in the last record's value
    (tmp_path / "flipped").write_bytes(bytes(data))
    events, whole = read_events(tmp_path / "flipped")
    assert not whole and [e.step for e in events] == [0, 1]
    with open(path, "ab") as fh:
        RecordWriter(fh).write(b"\xff\xff\xff")  # framing and checksums whole, but no Event in it
        RecordWriter(fh).write(event_pb2.Event(step=4).SerializeToString())
    events, whole = read_events(path)
    assert not whole and [e.step for e in events] == [0, 1, 2]


def test_without_tensorboard_the_run_goes_on_and_says_so_once(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_tensorboard(name, *args, **kwargs):
        if name.startswith("tensorboard"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tensorboard)
    messages = io.StringIO()
    trainer = Trainer(build_agent(write_config(tmp_path)), tmp_path / "run", stream=messages, progress=False)
    trainer.train(250)
    result = trainer.train(450)  # a second segment: still one message
    assert [r["env_steps"] for r in result.history] == [200, 250, 400, 450]
    assert (tmp_path / "run" / "metrics.jsonl").exists() and not (tmp_path / "run" / "tensorboard").exists()
    assert messages.getvalue().count("tensorboard is not installed: no TensorBoard scalars in") == 1
    assert "(pip install tensorboard); the metrics files are written as usual" in messages.getvalue()


def test_a_file_in_the_way_of_the_tensorboard_folder_is_told_once_and_the_run_goes_on(tmp_path):
    messages = io.StringIO()
    trainer = Trainer(build_agent(write_config(tmp_path)), tmp_path / "run", stream=messages, progress=False)
    (tmp_path / "run" / "tensorboard").write_text("mine")
    assert [r["env_steps"] for r in trainer.train(250).history] == [200, 250]
    assert (tmp_path / "run" / "tensorboard").read_text() == "mine"
    told = messages.getvalue()
    assert told.count("no TensorBoard scalars in") == 1 and "File exists" in told, told
    assert "the metrics files are written as usual" in told


def test_a_pytorch_run_writes_scalars_without_importing_tensorflow(tmp_path):
    code = ("import os, sys\n"
            "from reference_agents.agents import build_agent\n"
            "from reference_agents.training import Trainer\n"
            f"Trainer(build_agent({write_config(tmp_path)!r}), {str(tmp_path / 'run')!r}, progress=False).train(250)\n"
            "print('tensorflow' in sys.modules)\n"
            f"print(len(os.listdir({str(tmp_path / 'run' / 'tensorboard')!r})))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["False", "1"], done.stdout


def test_apex_runs_write_their_replay_ledger(tmp_path):
    import yaml

    from suites.agents.test_apex import small_config

    config = tmp_path / "apex_small.yaml"
    config.write_text(yaml.safe_dump(small_config()))
    run = str(tmp_path / "run")
    assert main(["train", str(config), "--executor", "local", "--workers", "2", "--shards", "2", "--steps", "300",
                 "--eval-every", "150", "--screen-episodes", "1", "--out", run, "--quiet"]) == 0
    points = check_against_run_files(run)
    with open(os.path.join(run, "checkpoint", "apex.json")) as fh:
        ledger = json.load(fh)["ledger"]   # written after the last evaluation, with nothing run between
    last_step = read_jsonl(os.path.join(run, "metrics.jsonl"))[-1]["env_steps"]
    for key in ("produced", "held", "evicted", "lost", "in_flight", "sampled", "learned"):
        assert points[f"replay/{key}"][-1] == (last_step, f32(ledger[key])), key
    for shard in ledger["shards"]:
        for key in ("held", "sampled", "in_flight", "deaths"):
            assert points[f"shards/{shard['name']}/{key}"][-1] == (last_step, f32(shard[key])), (shard["name"], key)
    assert points["failures/workers"][-1] == points["failures/shards"][-1] == (last_step, 0.0)
    assert ledger["produced"] > 0 and len(points["replay/produced"]) == len(points["eval/return"])


def impala_run(tmp_path, make_worker, worker_scalars):
    """An IMPALA run of 800 env steps (rollouts of 10 steps x 4 envs) on ``make_worker(agent)`` (actor threads);
    returns the worker and its scalars."""
    from suites.cli.test_train_impala import write_config as impala_config

    run = str(tmp_path / "run")
    agent = build_agent(impala_config(str(tmp_path)), backend="torch", seed=1)
    worker = make_worker(agent)
    try:
        Trainer(agent, run, worker=worker, worker_scalars=worker_scalars, progress=False).train(800)
    finally:
        worker.close()
    return worker, check_against_run_files(run)


def test_impala_actor_learner_runs_write_their_queue_sizes_and_rollout_counts(tmp_path):
    from harness.execution.transport import ThreadActorLearnerExecutor
    from reference_agents.agents.impala.actor_learner import ActorLearnerWorker
    from reference_agents.training.scalars import actor_learner_scalars

    worker, points = impala_run(tmp_path, lambda agent: ActorLearnerWorker(
        agent, lambda r, e, w: ThreadActorLearnerExecutor(2, {"rollouts": (r, 8), "episodes": (e, 10_000)}, w)),
        actor_learner_scalars)
    steps = [s for s, _ in points["eval/return"]]
    assert [s for s, _ in points["actors/rollouts_learned"]] == steps
    assert all(v * 10 * 4 == s for s, v in points["actors/rollouts_learned"])  # each rollout: 10 steps x 4 envs
    assert points["actors/rollouts_learned"][-1][1] == sum(worker.received.values())
    for tag in ("actors/failures", "actors/lost_rollouts", "actors/transport_faults"):
        assert points[tag] == [(s, 0.0) for s in steps], tag
    assert [s for s, _ in points["queue/rollouts"]] == [s for s, _ in points["queue/episodes"]] == steps
    assert all(0 <= v <= 8 for _, v in points["queue/rollouts"])  # the queue's capacity


def test_central_inference_runs_write_their_batched_calls(tmp_path):
    from harness.execution.transport import ThreadActorLearnerExecutor
    from reference_agents.agents.impala.central_inference import CentralInferenceWorker
    from reference_agents.training.scalars import central_inference_scalars

    worker, points = impala_run(tmp_path, lambda agent: CentralInferenceWorker(
        agent, lambda queues: ThreadActorLearnerExecutor(2, queues, {}), 2), central_inference_scalars)
    calls = [v for _, v in points["inference/calls"]]  # (the actors go on acting until the worker closes)
    assert 0 < calls[0] and calls == sorted(calls) and calls[-1] <= sum(worker.batch_sizes.values())
    assert all(1 <= v <= 2 for _, v in points["inference/mean_batch"])  # actors per call: 2 actors
    for (step, n), (_, mean), (_, learned) in zip(points["inference/calls"], points["inference/mean_batch"],
                                                  points["actors/rollouts_learned"]):
        assert n * mean >= 10 * learned - 0.5, step  # each rollout learned took 10 requests answered
    lags = [v for _, v in points["inference/policy_lag_mean"]]  # updates behind, over the rollouts learned
    assert lags and all(0 <= v <= worker.total_updates for v in lags)
    assert [s for s, _ in points["inference/policy_lag_mean"]] == [s for s, _ in points["inference/calls"]]
    waits = [v for _, v in points["inference/max_wait_s"]]
    assert waits == sorted(waits) and 0 <= waits[-1] <= f32(worker.max_wait)
    assert points["actors/rollouts_learned"][-1][1] == sum(worker.received.values()) > 0
    assert {f"queue/{name}" for name in worker.executor.queues} <= set(points)


@pytest.mark.distributed
@pytest.mark.parametrize("executor, own_tags", [("seed", {"inference/calls", "inference/mean_batch"}),
                                                ("tf-dist", {"queue/rollouts", "queue/episodes"})])
def test_distributed_impala_from_the_command_line_writes_its_actor_scalars(tmp_path, executor, own_tags):
    from suites.cli.test_train_impala import write_config as impala_config

    run = str(tmp_path / "run")
    assert main(["train", impala_config(str(tmp_path)), "--steps", "800", "--out", run, "--backend", "torch",
                 "--quiet", "--executor", executor, "--actors", "2"]) == 0
    points = check_against_run_files(run)
    steps = [s for s, _ in points["eval/return"]]
    assert own_tags <= set(points)
    assert [s for s, _ in points["actors/rollouts_learned"]] == steps
    assert all(v * 10 * 4 == s for s, v in points["actors/rollouts_learned"])  # each rollout: 10 steps x 4 envs
    assert points["actors/failures"] == [(s, 0.0) for s in steps]
