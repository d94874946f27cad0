"""`TFActorLearnerExecutor`: a learner task in this process and N actor processes, each with a TF server.

The cluster has one ``learner`` task and ``actor`` tasks, on free ports of 127.0.0.1 by default or at the
addresses of a cluster spec file (real machines: ``{"learner": ["host:port"], "actor": [...]}``, JSON).
The learner task's server holds the transport (`TFRecordQueue`s, `TFWeightStore`); it runs in a child
process of the learner, because a ``tf.distribute.Server`` cannot be stopped inside a process and its port
must be free after `shutdown`; the learning code here reaches it through a session on its ``grpc://``
target. Each actor process starts its own server, builds clients of the same transport and runs the
caller's body::

    with TFActorLearnerExecutor(num_actors=2, queues={"rollouts": (spec, 16)}, weights=weight_spec) as ex:
        ex.weights.publish(agent.get_weights())
        ex.start_actors(my_module.actor_body, config)   # body(transport, actor_index, incarnation, config)
        batch = ex.queues["rollouts"].take(4, timeout=30)
        for failure in ex.poll():                       # crashed actors: reported, restarted
            ...

Actor processes are spawned (not forked: TF and PyTorch state does not survive a fork), watch this
process and exit when it is gone, and are terminated then killed by `shutdown` (also on errors, through
the context manager), so no process outlives the executor and the ports are free again.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import threading
import time
from typing import Any, Callable

from harness.execution.processes import ActorFailureReport, ProcessActorsMixin, watch_parent  # noqa: F401 (re-exported)
from harness.execution.tf_dist.transport import TFRecordQueue, TFSession, TFWeightStore
from harness.execution.transport import QueueClosed, RecordSpec, Transport


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def local_cluster(num_actors: int, host: str = "127.0.0.1") -> dict[str, list[str]]:
    """A cluster spec of one learner and ``num_actors`` actors on free ports of ``host``."""
    return {"learner": [f"{host}:{free_port(host)}"], "actor": [f"{host}:{free_port(host)}" for _ in range(num_actors)]}


def read_cluster_spec(path: str) -> dict[str, list[str]]:
    """A cluster spec file (JSON ``{"learner": ["host:port"], "actor": ["host:port", ...]}``), checked.

    Raises:
        ValueError: naming the file and the key at fault.
    """
    try:
        with open(path) as fh:
            spec = json.load(fh)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable JSON cluster spec: {exc}") from None
    if not isinstance(spec, dict) or set(spec) != {"learner", "actor"}:
        raise ValueError(f"{path}: a cluster spec has exactly the keys 'learner' and 'actor'; got "
                         f"{sorted(spec) if isinstance(spec, dict) else type(spec).__name__}")
    for job, count in (("learner", 1), ("actor", None)):
        tasks = spec[job]
        if not isinstance(tasks, list) or not tasks or (count and len(tasks) != count) or not all(
                isinstance(t, str) and t.rpartition(":")[2].isdigit() for t in tasks):
            raise ValueError(f"{path}: {job}: expected a list of {count or 'one or more'} 'host:port' strings; "
                             f"got {tasks!r}")
    return spec


def _start_server(cluster: dict[str, list[str]], job: str, index: int) -> Any:
    from harness.backends.tf_import import import_tensorflow

    tf = import_tensorflow()

    return tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name=job, task_index=index, start=True)


def _server_main(cluster: dict[str, list[str]], parent: int, env: dict[str, str]) -> None:
    """The learner task's server process: serves until the learner (its parent) is gone or kills it."""
    os.environ.update(env)
    _start_server(cluster, "learner", 0)
    watch_parent(parent)


def _build_transport(target: str, own: str | None, queues: dict[str, tuple[RecordSpec, int]],
                     weights: RecordSpec, create: bool) -> tuple[TFSession, dict[str, TFRecordQueue], TFWeightStore]:
    session = TFSession(target, own)
    built = {name: TFRecordQueue(session, name, spec, capacity) for name, (spec, capacity) in queues.items()}
    store = TFWeightStore(session, weights, create=create)
    session.open()
    return session, built, store


def _actor_main(cluster: dict[str, list[str]], index: int, incarnation: int, parent: int,
                queues: dict[str, tuple[RecordSpec, int]], weights: RecordSpec, env: dict[str, str],
                body: Callable[..., Any], args: tuple) -> None:
    os.environ.update(env)
    threading.Thread(target=watch_parent, args=(parent,), daemon=True).start()
    server = _start_server(cluster, "actor", index)
    session, built, store = _build_transport(server.target, f"/job:actor/task:{index}", queues, weights, False)
    try:
        body(Transport(built, store), index, incarnation, *args)
    finally:
        session.close()


class TFActorLearnerExecutor(ProcessActorsMixin):
    """Runs the learner's side of an actor-learner job here and the actors as TF-server processes.

    Args:
        num_actors: actor processes (the cluster spec's actor count when one is given).
        queues: ``{name: (record spec, capacity)}`` of the queues on the learner task.
        weights: the spec of the published weights.
        cluster_spec: a cluster spec dict or file (default: 127.0.0.1, free ports).
        restarts: how often each actor may be restarted after a crash.
        env: environment variables for actor processes (thread counts and the like).
    """

    def __init__(self, num_actors: int, queues: dict[str, tuple[RecordSpec, int]], weights: RecordSpec,
                 cluster_spec: dict[str, list[str]] | str | None = None, restarts: int = 3,
                 env: dict[str, str] | None = None) -> None:
        if isinstance(cluster_spec, str):
            cluster_spec = read_cluster_spec(cluster_spec)
        self.cluster = cluster_spec or local_cluster(num_actors)
        self.num_actors = len(self.cluster["actor"])
        self.queue_specs, self.weight_spec, self.restarts = dict(queues), dict(weights), int(restarts)
        self.env = {"OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
                    "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})}
        self._ctx = multiprocessing.get_context("spawn")
        self._server = self._ctx.Process(target=_server_main, name="learner-server", daemon=True,
                                         args=(self.cluster, os.getpid(), self.env))
        self._server.start()
        self._closed = False
        try:
            self._session, self.queues, self.weights = _build_transport(
                f"grpc://{self.cluster['learner'][0]}", None, self.queue_specs, self.weight_spec, True)
            self._wait_for_server(60.0)
        except BaseException:
            self._stop_server()
            raise
        self._actors = None

    def _wait_for_server(self, timeout: float) -> None:
        """Initialises the weight store once the learner task's server answers (it starts in a moment)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.weights.initialize_within(5.0)
                return
            except (TimeoutError, QueueClosed):
                if not self._server.is_alive():
                    raise RuntimeError(f"the learner task's server process exited with code {self._server.exitcode} "
                                       f"(port {self.cluster['learner'][0]} taken?)") from None
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the learner task's server at {self.cluster['learner'][0]} did not answer "
                                       f"within {timeout:.0f} s") from None
                time.sleep(0.2)

    def _stop_server(self) -> None:
        if self._server.is_alive():
            self._server.terminate()
            self._server.join(5)
            if self._server.is_alive():
                self._server.kill()
                self._server.join(5)

    def start_actors(self, body: Callable[..., Any], *args: Any) -> None:
        """Starts every actor process running ``body(transport, index, incarnation, *args)`` (picklable by
        reference: a module-level function)."""
        self._start_processes(_actor_main, lambda index, incarnation: (
            self.cluster, index, incarnation, os.getpid(), self.queue_specs, self.weight_spec, self.env, body, args))

    def shutdown(self, timeout: float = 10.0) -> None:
        """Closes the queues (actors' next put fails: they stop), then terminates and kills what is left."""
        if self._closed:
            return
        self._closed = True
        self._close_and_stop(timeout)
        self._session.close()
        self._stop_server()

    def __enter__(self) -> "TFActorLearnerExecutor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()
