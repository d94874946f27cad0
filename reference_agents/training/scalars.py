"""TensorBoard scalars of a training run: event files in ``<run dir>/tensorboard/`` beside the metrics files.

The events are written with the ``tensorboard`` package's protocol buffers (``Event`` and ``Summary``, in
TFRecord framing with its masked CRC32C) and never through TensorFlow, so a PyTorch-only run imports no
TensorFlow. Without the package a run goes on without scalars and says so once. Watch a run with
``tensorboard --logdir RUN/tensorboard`` (or ``--logdir runs`` to compare runs).

The step of every scalar is the env step: a metrics row's ``env_steps``, a finished episode's ``end_step``.
Values are ``simple_value`` scalars (float32, what TensorBoard's scalar dashboard and ``EventAccumulator.Scalars``
read); a value that is None or not finite (no epsilon for IMPALA, no screen, no loss yet) is left out.

=====================  ==========================================================================
tag                    value
=====================  ==========================================================================
eval/return            ``eval_return``: the greedy evaluation's mean return
eval/screen_return     ``screen_return``: the screen's mean return
eval/episodes          ``eval_episodes``: greedy episodes played in the evaluation
eval/solved            ``solved``: 1 once the full evaluation's mean reached the target
train/return_100       ``train_return_100``: mean return of the last 100 training episodes
train/episodes         ``episodes``: training episodes finished
train/frames           ``frames``: emulator frames
train/updates          ``updates``: learner updates
loss/last              ``last_loss``: the last update's loss
explore/epsilon        ``epsilon``: the exploration rate (DQN)
speed/steps_per_s      ``steps_per_s``: env steps per second of the chunk (stepping and updating)
speed/frames_per_s     ``frames_per_s``: frames per second of the chunk
time/wall_s            ``wall_s``: wall-clock seconds of the run (resumes included)
time/train_s           ``train_s``: of those, seconds stepping and updating
time/eval_s            ``eval_s``: seconds of the evaluation
episode/return         every finished training episode's return (step: its end)
episode/length         its length in env steps
=====================  ==========================================================================

Distributed runs add, per evaluation, what their trainers know (`actor_learner_scalars`,
`central_inference_scalars`, `apex_scalars`): IMPALA's queue sizes (``queue/rollouts``, ``queue/episodes``, ...),
``actors/rollouts_learned``, ``actors/failures``, ``actors/lost_rollouts``, ``actors/transport_faults`` and with
central inference ``inference/calls``, ``inference/mean_batch``, ``inference/max_wait_s``; Ape-X's replay ledger
(``replay/produced``, ``replay/held``, ``replay/evicted``, ``replay/lost``, ``replay/in_flight``,
``replay/sampled``, ``replay/learned``), per shard ``shards/shard-J/held``, ``.../sampled``, ``.../in_flight``,
``.../deaths``, and ``failures/workers``, ``failures/shards``.

Run segments and resumes: each `Trainer.train` call writes a new event file, made at its first event and
named ``events.out.tfevents.<start step, 12 digits>.<unix time>.<host>.<pid>.spacegraph`` (so names sort in
segment order). Before a segment starting at env step S writes, the events after S in the directory's earlier
``*.spacegraph`` files are removed (those files are rewritten atomically, a torn last record dropped; one left
with no scalar is deleted): a run killed after its last checkpoint wrote points that its resume writes again.
So the step axis goes on without duplicate or overlapping points whatever reads the files (TensorBoard, whether
or not it purges a restarted run's orphaned points, or another event reader), as the metrics files are
rewritten to the checkpoint's rows.
"""

from __future__ import annotations

import math
import os
import socket
import stat
import struct
import time
from typing import Any, Callable, Iterable, TextIO

from harness.execution.serialization import atomic_file

TENSORBOARD_DIR = "tensorboard"
SUFFIX = ".spacegraph"
ROW_TAGS = {"eval_return": "eval/return", "screen_return": "eval/screen_return", "eval_episodes": "eval/episodes",
            "solved": "eval/solved", "train_return_100": "train/return_100", "episodes": "train/episodes",
            "frames": "train/frames", "updates": "train/updates", "last_loss": "loss/last",
            "epsilon": "explore/epsilon", "steps_per_s": "speed/steps_per_s", "frames_per_s": "speed/frames_per_s",
            "wall_s": "time/wall_s", "train_s": "time/train_s", "eval_s": "time/eval_s",
            "policy_entropy": "learner/policy_entropy", "grad_norm": "learner/grad_norm",
            "policy_lag": "learner/policy_lag"}
EPISODE_TAGS = ("episode/return", "episode/length")
_HEADER = struct.Struct("<Q")
_CRC = struct.Struct("<I")


def _protos() -> tuple[Any, Callable[[bytes], int]]:
    """``event_pb2`` and ``masked_crc32c`` of the ``tensorboard`` package (neither imports TensorFlow).

    Raises:
        ImportError: when the package is not installed.
    """
    from tensorboard.compat.proto import event_pb2
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    return event_pb2, masked_crc32c


def _record(data: bytes, crc: Callable[[bytes], int]) -> bytes:
    header = _HEADER.pack(len(data))
    return header + _CRC.pack(crc(header)) + data + _CRC.pack(crc(data))


def read_events(path: str | os.PathLike) -> tuple[list[Any], bool]:
    """The ``Event`` protos of an event file, and whether it was whole (False: it ends in a torn or damaged
    record, as a killed writer leaves it; the events before it are returned).

    Raises:
        ImportError: without the ``tensorboard`` package. OSError: when the file cannot be read.
    """
    event_pb2, crc = _protos()
    from google.protobuf.message import DecodeError  # (protobuf: a dependency of tensorboard)

    with open(path, "rb") as fh:
        data = fh.read()
    events, at = [], 0
    while at < len(data):
        end = at + _HEADER.size + _CRC.size
        if end > len(data) or _CRC.unpack_from(data, at + _HEADER.size)[0] != crc(data[at:at + _HEADER.size]):
            return events, False
        (length,) = _HEADER.unpack_from(data, at)
        if end + length + _CRC.size > len(data):
            return events, False
        body = data[end:end + length]
        if _CRC.unpack_from(data, end + length)[0] != crc(body):
            return events, False
        try:
            events.append(event_pb2.Event.FromString(body))
        except DecodeError:  # a record that is no Event
            return events, False
        at = end + length + _CRC.size
    return events, True


def trim_event_files(directory: str, last_step: int) -> None:
    """Removes the scalar events after ``last_step`` from this module's event files in ``directory``
    (``*.spacegraph``; other files are left alone), rewriting a file atomically only when it changes and deleting
    one left without scalars.

    Raises:
        ImportError: without the ``tensorboard`` package. OSError: when a file cannot be read or replaced.
    """
    _, crc = _protos()
    if not os.path.isdir(directory):
        return
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if "tfevents" not in name or not name.endswith(SUFFIX) or not os.path.isfile(path):
            continue
        events, whole = read_events(path)
        kept = [e for e in events if not e.HasField("summary") or e.step <= last_step]
        if whole and len(kept) == len(events):
            continue
        if not any(e.HasField("summary") for e in kept):
            os.remove(path)
            continue
        with atomic_file(path, "wb", permissions=stat.S_IMODE(os.stat(path).st_mode)) as fh:
            fh.write(b"".join(_record(e.SerializeToString(), crc) for e in kept))


class EventFile:
    """Appends scalar events to one new event file in ``directory`` (made, with the file, at the first event).

    Args:
        directory: the folder of the run's event files.
        start_step: the env step this segment starts at (in the file's name).
    """

    def __init__(self, directory: str, start_step: int) -> None:
        self.event_pb2, self._crc = _protos()
        self.directory, self.start_step = directory, int(start_step)
        self.path: str | None = None
        self._fh: Any = None

    def _open(self) -> None:
        os.makedirs(self.directory, exist_ok=True)
        stem = (f"events.out.tfevents.{self.start_step:012d}.{int(time.time())}.{socket.gethostname()}."
                f"{os.getpid()}")
        for n in range(1000):
            path = os.path.join(self.directory, stem + (f".{n}" if n else "") + SUFFIX)
            try:
                self._fh = open(path, "xb")
            except FileExistsError:
                continue
            self.path = path
            break
        else:
            raise FileExistsError(f"{self.directory}: no free name for an event file like {stem}{SUFFIX}")
        self._write([self.event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2")])

    def _write(self, events: Iterable[Any]) -> None:
        self._fh.write(b"".join(_record(e.SerializeToString(), self._crc) for e in events))
        self._fh.flush()

    def add(self, points: Iterable[tuple[int, dict[str, float]]]) -> None:
        """Writes one event per ``(step, {tag: value})`` (values that are None or not finite left out) and
        flushes."""
        Event, now = self.event_pb2.Event, time.time()
        events = []
        for step, values in points:
            event = Event(wall_time=now, step=int(step))
            for tag, value in values.items():
                if value is not None and math.isfinite(float(value)):
                    event.summary.value.add(tag=tag, simple_value=float(value))
            if event.summary.value:
                events.append(event)
        if events:
            if self._fh is None:
                self._open()
            self._write(events)

    def close(self) -> None:
        """Closes the file (if one was made)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class RunScalars:
    """What a `Trainer` writes to TensorBoard: its metric rows, finished episodes and (for a distributed run)
    ``worker_scalars(worker)`` per row, into ``<run dir>/tensorboard/``.

    `open` starts a segment (see the module's docstring for what it does to earlier segments' points); when
    the ``tensorboard`` package is missing, or the folder cannot be written, it says so once on ``stream`` and the
    run goes on without scalars.

    Args:
        enabled: False writes nothing.
        worker_scalars: ``fn(worker) -> {tag: value}`` added to every metric row's step (e.g. `apex_scalars`).
    """

    def __init__(self, enabled: bool = True,
                 worker_scalars: Callable[[Any], dict[str, float]] | None = None) -> None:
        self.enabled, self.worker_scalars = enabled, worker_scalars
        self.file: EventFile | None = None
        self._told = False

    def open(self, run_dir: str, step: int, stream: TextIO) -> None:
        """Starts a segment at env step ``step`` in ``run_dir/tensorboard`` (no-op when not enabled)."""
        self.close()
        if not self.enabled:
            return
        directory = os.path.join(run_dir, TENSORBOARD_DIR)
        try:
            trim_event_files(directory, step)
            os.makedirs(directory, exist_ok=True)  # (here, so that a file in the way is told now)
            self.file = EventFile(directory, step)
        except ImportError:
            self._tell(stream, f"tensorboard is not installed: no TensorBoard scalars in {directory} "
                               f"(pip install tensorboard); the metrics files are written as usual")
        except OSError as exc:
            self._tell(stream, f"no TensorBoard scalars in {directory}: {exc}; the metrics files are written as usual")

    def _tell(self, stream: TextIO, message: str) -> None:
        if not self._told:
            self._told = True
            stream.write(message + "\n")
            stream.flush()

    def add_row(self, row: dict[str, Any], worker: Any) -> None:
        """Writes a metric row's values (and ``worker_scalars(worker)``) at its ``env_steps``."""
        if self.file is not None:
            values = {tag: row.get(key) for key, tag in ROW_TAGS.items()}
            if self.worker_scalars is not None:
                values.update(self.worker_scalars(worker))
            self.file.add([(row["env_steps"], values)])

    def add_episodes(self, episodes: Iterable[Any]) -> None:
        """Writes finished `Episode`s' return and length at their ``end_step``."""
        if self.file is not None:
            self.file.add((e.end_step, dict(zip(EPISODE_TAGS, (e.episode_return, e.length)))) for e in episodes)

    def close(self) -> None:
        """Ends the segment (its file stays)."""
        if self.file is not None:
            self.file.close()
            self.file = None


def _queue_sizes(queues: dict[str, Any]) -> dict[str, float]:
    """``queue/NAME``: the records waiting in each queue (one that cannot answer now, say closed, is left out)."""
    sizes = {}
    for name, q in queues.items():
        try:
            sizes[f"queue/{name}"] = q.size()
        except Exception:  # a metric is not worth stopping a run for: the transports raise their own kinds
            continue
    return sizes


def actor_learner_scalars(worker: Any) -> dict[str, float]:
    """An IMPALA `ActorLearnerWorker`'s queue sizes, rollouts learned, actor failures and transport faults."""
    return {**_queue_sizes(worker.executor.queues), "actors/rollouts_learned": sum(worker.received.values()),
            "actors/failures": len(worker.executor.failures), "actors/lost_rollouts": worker.lost_rollouts,
            "actors/transport_faults": len(worker.transport_faults)}


def central_inference_scalars(worker: Any) -> dict[str, float]:
    """`actor_learner_scalars` of a `CentralInferenceWorker`, with its batched inference calls, their mean
    batch (actors per call), the longest a batch waited for more requests and the mean policy lag of the
    rollouts learned (updates between the learner's weights and the version that acted)."""
    return {**actor_learner_scalars(worker), "inference/calls": sum(worker.batch_sizes.values()),
            "inference/mean_batch": worker.mean_batch(),
            "inference/max_wait_s": worker.max_wait, "inference/policy_lag_mean": worker.policy_lag_mean()}


def apex_scalars(driver: Any) -> dict[str, float]:
    """An `ApexDriver`'s replay ledger (its shards' last answers: no extra call), per shard and in all, and its
    worker and shard failures."""
    ledger = driver.ledger(refresh=False)
    values = {f"replay/{k}": ledger[k] for k in ("produced", "held", "evicted", "lost", "in_flight", "sampled",
                                                 "learned")}
    for shard in ledger["shards"]:
        values.update({f"shards/{shard['name']}/{k}": shard[k] for k in ("held", "sampled", "in_flight", "deaths")})
    values.update({"failures/workers": len(driver.worker_failures), "failures/shards": len(driver.shard_failures)})
    return values
