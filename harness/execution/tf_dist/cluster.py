"""`TFActorLearnerExecutor`: a learner task in this process and N actor processes, each with a TF server.

The cluster has one ``learner`` task and ``actor`` tasks, on free ports of 127.0.0.1 by default or at the
addresses of a cluster spec file (real machines: ``{"learner": ["host:port"], "actor": [...]}``, JSON).
``tf.distribute.Server`` (TF 2.21) listens on every interface (``[::]:PORT``) whatever host the spec names
(its ServerDef carries only the port) and authenticates nothing, so even the default cluster's ports are
reachable from the network while it runs; a spec naming another host than loopback prints a warning once
(`warn_exposed_cluster`), and `tf_server_ports` lists the ports of the servers this process runs.
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
import sys
import threading
import time
from collections import Counter
from typing import Any, Callable

from harness.execution.loopback import host_of, is_loopback
from harness.execution.processes import ActorFailureReport, ProcessActorsMixin, watch_parent  # noqa: F401 (re-exported)
from harness.execution.tf_dist.transport import TFRecordQueue, TFSession, TFWeightStore
from harness.execution.transport import QueueClosed, RecordSpec, Transport


#: The largest cluster spec file read (characters).
_MAX_SPEC_BYTES = 1 << 20


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
        ValueError: naming the file and what is wrong with it (unreadable, not UTF-8 JSON, another shape,
            a key or task at fault).
    """
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read(_MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"cluster spec {path}: cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"cluster spec {path}: not a JSON text file (not UTF-8: {exc.reason} at byte "
                         f"{exc.start})") from None
    if len(text) > _MAX_SPEC_BYTES:
        raise ValueError(f"cluster spec {path}: over {_MAX_SPEC_BYTES} characters; a cluster spec is a small JSON "
                         f"object")
    try:
        spec = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"cluster spec {path}: not valid JSON: {exc}") from None
    return check_cluster_spec(spec, f"cluster spec {path}")


def check_cluster_spec(spec: Any, where: str = "cluster spec") -> dict[str, list[str]]:
    """``spec`` when it is a cluster spec (one learner, one or more actors, distinct ``host:port`` strings).

    Raises:
        ValueError: starting with ``where``, naming the key or task at fault, what was expected and what came.
    """
    if not isinstance(spec, dict) or set(spec) != {"learner", "actor"}:
        got = sorted(spec) if isinstance(spec, dict) else f"a JSON {type(spec).__name__}"
        raise ValueError(f"{where}: expected an object with exactly the keys 'learner' and 'actor'; got {got}")
    for job, count in (("learner", 1), ("actor", None)):
        tasks = spec[job]
        wanted = f"a list of {count or 'one or more'} 'host:port' string(s)"
        if not isinstance(tasks, list) or not tasks or (count and len(tasks) != count):
            raise ValueError(f"{where}: {job}: expected {wanted}; got {tasks!r}"[:400])
        for index, task in enumerate(tasks):
            problem = _task_problem(task)
            if problem:
                raise ValueError(f"{where}: {job}[{index}]: expected 'host:port' ({problem}); got {task!r}"[:400])
    every = spec["learner"] + spec["actor"]
    twice = sorted({t for t in every if every.count(t) > 1})
    if twice:
        raise ValueError(f"{where}: every task needs an address of its own; {', '.join(twice)} is named twice")
    return {"learner": list(spec["learner"]), "actor": list(spec["actor"])}


def _task_problem(task: Any) -> str:
    """What is wrong with one task address ('' when nothing)."""
    if not isinstance(task, str):
        return f"a string, not a JSON {type(task).__name__}"
    host, sep, port = task.rpartition(":")
    if not sep or not host.strip("[]"):
        return "no host"
    if any(ch.isspace() for ch in task):
        return "no spaces"
    if not port.isdigit() or not 0 < int(port) < 65536:
        return "a port in 1-65535"
    return ""


def exposed_hosts(cluster: dict[str, list[str]]) -> list[str]:
    """The hosts of ``cluster`` that are not loopback addresses (names other than localhost count as not)."""
    hosts = [host_of(task) for tasks in cluster.values() for task in tasks]
    return sorted({h for h in hosts if not is_loopback(h)})


#: What `warn_exposed_cluster` prints (once per process).
EXPOSED_WARNING = (
    "spacegraph: warning: the cluster spec names {hosts}. TensorFlow's servers (--executor tf-dist) listen on "
    "every network interface of their machines, whatever host the spec names, and authenticate nothing: "
    "anyone who reaches a task's port can run any TensorFlow graph in it, reading and writing its files. "
    "Run the tasks only on a private network that nothing else can reach (see docs/security.md).")
_warned_exposed = False


def warn_exposed_cluster(cluster: dict[str, list[str]]) -> bool:
    """Prints `EXPOSED_WARNING` on stderr, once per process, when ``cluster`` names a non-loopback host.

    Returns:
        Whether the cluster names such a host (printed now or before).
    """
    global _warned_exposed
    hosts = exposed_hosts(cluster)
    if hosts and not _warned_exposed:
        _warned_exposed = True
        print(EXPOSED_WARNING.format(hosts=", ".join(hosts)), file=sys.stderr, flush=True)
    return bool(hosts)


#: Ports of the TF servers that executors of this process started or will start (a port per task, counted
#: per executor): TensorFlow binds them on every interface (``[::]:PORT``), see `tf_server_ports`.
_server_ports: Counter[int] = Counter()


def tf_server_ports() -> frozenset[int]:
    """The ports of the TF servers that live executors of this process run (learner and actor tasks).

    ``tf.distribute.Server`` (TF 2.21) always listens on every interface (``[::]:PORT``, dual-stack): its
    ServerDef has no bind address, only the port. These are the listeners the test suite's loopback check
    (``suites/listeners.py``) accepts, and docs/security.md names.
    """
    return frozenset(port for port, count in _server_ports.items() if count > 0)


def _task_ports(cluster: dict[str, list[str]]) -> list[int]:
    return [int(task.rpartition(":")[2]) for tasks in cluster.values() for task in tasks]


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
        cluster_spec: a cluster spec dict or file (default: 127.0.0.1, free ports). TensorFlow's servers listen
            on every interface whatever host it names, and authenticate nothing: a spec naming a host other
            than loopback prints `EXPOSED_WARNING` once (the tasks must sit on a private network).
        restarts: how often each actor may be restarted after a crash.
        env: environment variables for actor processes (thread counts and the like).
    """

    def __init__(self, num_actors: int, queues: dict[str, tuple[RecordSpec, int]], weights: RecordSpec,
                 cluster_spec: dict[str, list[str]] | str | None = None, restarts: int = 3,
                 env: dict[str, str] | None = None) -> None:
        if isinstance(cluster_spec, str):
            cluster_spec = read_cluster_spec(cluster_spec)
        elif cluster_spec is not None:
            cluster_spec = check_cluster_spec(cluster_spec)
        self.cluster = cluster_spec or local_cluster(num_actors)
        warn_exposed_cluster(self.cluster)
        self.num_actors = len(self.cluster["actor"])
        self.queue_specs, self.weight_spec, self.restarts = dict(queues), dict(weights), int(restarts)
        self.env = {"OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
                    "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})}
        self._ctx = multiprocessing.get_context("spawn")
        self._server = self._ctx.Process(target=_server_main, name="learner-server", daemon=True,
                                         args=(self.cluster, os.getpid(), self.env))
        self._ports = _task_ports(self.cluster)
        _server_ports.update(self._ports)  # (before any server listens: see `tf_server_ports`)
        self._closed = False
        try:
            self._server.start()
            self._session, self.queues, self.weights = _build_transport(
                f"grpc://{self.cluster['learner'][0]}", None, self.queue_specs, self.weight_spec, True)
            self._wait_for_server(60.0)
        except BaseException:
            self._stop_server()
            _server_ports.subtract(self._ports)
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
        try:
            self._close_and_stop(timeout)
            self._session.close()
            self._stop_server()
        finally:
            _server_ports.subtract(self._ports)  # (every server process of this executor has ended)

    def __enter__(self) -> "TFActorLearnerExecutor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()
