"""`RayActorLearnerExecutor`: the actor-learner executor interface on Ray (IMPALA's actors as Ray actors).

The same interface as `harness.execution.tf_dist.TFActorLearnerExecutor`, so `ActorLearnerWorker` and
the actor body run unchanged: ``queues`` (`RecordQueue`s) and ``weights`` (a `WeightStore`) that actors
reach, `start_actors(body, *args)`, `poll`, `kill`, `pids`, `shutdown`. The queues live in one threaded Ray
actor (the "transport host"); a publication of weights is one ``ray.put`` whose reference the host keeps,
and each actor fetches the arrays from the object store when the version moved. Actors are
`RayActorExecutor` actors (one process each) running the body in a long call; a crashed one is reported,
restarted by Ray and handed the body again with the next incarnation.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np
import ray
import ray.exceptions

from harness.execution.actors import ActorFailure
from harness.execution.ray.executor import RayActorExecutor
from harness.execution.transport import (
    InProcessRecordQueue, QueueClosed, RecordQueue, RecordSpec, WeightStore, Transport)


class _TransportHost:
    """The Ray actor holding the queues and the reference of the latest weights (methods run in threads)."""

    def __init__(self, queues: dict[str, tuple[RecordSpec, int]]) -> None:
        self.queues = {name: InProcessRecordQueue(spec, capacity) for name, (spec, capacity) in queues.items()}
        self.version, self.ref = 0, None

    def put(self, name: str, record: dict[str, Any], timeout: float | None) -> None:
        self.queues[name].put(record, timeout)

    def take(self, name: str, count: int, timeout: float | None) -> dict[str, Any]:
        return self.queues[name].take(count, timeout)

    def size(self, name: str) -> int:
        return self.queues[name].size()

    def close(self) -> None:
        for q in self.queues.values():
            q.close()

    def publish(self, wrapped_ref: list) -> int:
        self.ref = wrapped_ref[0]  # (in a list, so Ray passes the reference, not the arrays)
        self.version += 1
        return self.version

    def latest(self) -> tuple[int, list]:
        return self.version, [self.ref]


_Host = ray.remote(_TransportHost)


def _call(ref: Any) -> Any:
    """``ray.get`` with the errors a `RecordQueue` raises passed through as themselves."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, (QueueClosed, TimeoutError, ValueError)):
            raise cause from None
        raise
    except ray.exceptions.RayActorError as exc:
        raise QueueClosed(f"the transport host is gone: {exc}") from None


class RayRecordQueue(RecordQueue):
    """A client of one queue of the transport host."""

    def __init__(self, host: Any, name: str, spec: RecordSpec) -> None:
        self.host, self.name, self.spec = host, name, dict(spec)

    def put(self, record: dict[str, Any], timeout: float | None = None) -> None:
        _call(self.host.put.remote(self.name, record, timeout))

    def take(self, count: int, timeout: float | None = None) -> dict[str, Any]:
        return _call(self.host.take.remote(self.name, count, timeout))

    def size(self) -> int:
        return _call(self.host.size.remote(self.name))

    def close(self) -> None:
        _call(self.host.close.remote())


class RayWeightStore(WeightStore):
    """Weights published with one ``ray.put`` each; readers fetch them from the object store."""

    def __init__(self, host: Any) -> None:
        self.host = host

    def publish(self, weights: dict[str, Any]) -> int:
        return _call(self.host.publish.remote([ray.put(dict(weights))]))

    def read(self) -> tuple[int, dict[str, Any]]:
        version, wrapped = _call(self.host.latest.remote())
        # the object store hands out read-only views: copies, so that a reader may write to its arrays
        return version, ({} if wrapped[0] is None else {k: np.array(v) for k, v in ray.get(wrapped[0]).items()})

    def version(self) -> int:
        return _call(self.host.latest.remote())[0]


class _BodyRunner:
    """An actor process: runs the caller's body with clients of the transport host."""

    def __init__(self, index: int, host: Any, specs: dict[str, RecordSpec]) -> None:
        self.index, self.host, self.specs = index, host, specs

    def run(self, incarnation: int, body: Callable[..., Any], args: tuple) -> str:
        transport = Transport({n: RayRecordQueue(self.host, n, s) for n, s in self.specs.items()},
                               RayWeightStore(self.host))
        body(transport, self.index, incarnation, *args)
        return "returned"


class RayActorLearnerExecutor:
    """Actors as Ray actor processes, queues and weights in a Ray transport host.

    Args:
        num_actors: actor processes.
        queues: ``{name: (record spec, capacity)}``.
        weights: the spec of the published weights (the object store takes any arrays).
        address: a Ray cluster to join (``host:port`` or ``auto``; its token as `RayActorExecutor` says), or
            None for a local instance on 127.0.0.1 with token authentication (`init_local_ray`).
        restarts: how often each actor may be restarted after a crash.
        num_cpus: logical CPUs of a local instance.
    """

    def __init__(self, num_actors: int, queues: dict[str, tuple[RecordSpec, int]], weights: RecordSpec,
                 address: str | None = None, restarts: int = 3, num_cpus: int | None = None) -> None:
        self.num_actors, self.restarts = int(num_actors), int(restarts)
        self.cluster = None
        self._ex = RayActorExecutor(address=address, num_cpus=num_cpus)
        try:
            self._host = _Host.options(max_concurrency=4 * self.num_actors + 8, num_cpus=0).remote(dict(queues))
            self.queues = {name: RayRecordQueue(self._host, name, spec) for name, (spec, _) in queues.items()}
            self.weights = RayWeightStore(self._host)
            self.weights.version()  # the host is up
        except BaseException:
            self._ex.shutdown()
            raise
        self._specs = {name: spec for name, (spec, _) in queues.items()}
        self._handles: list[Any] = []
        self._runs: list[Any] = []
        self.incarnations = [0] * self.num_actors
        self.failures: list[Any] = []
        self._body: tuple[Callable[..., Any], tuple] | None = None
        self._closed = False

    def start_actors(self, body: Callable[..., Any], *args: Any) -> None:
        """Starts every actor running ``body(transport, index, incarnation, *args)`` (picklable by reference)."""
        self._body = (body, args)
        for index in range(self.num_actors):
            handle = self._ex.start(f"actor-{index}", _BodyRunner, index, self._host, self._specs,
                                    restarts=self.restarts)
            self._handles.append(handle)
            self._runs.append(handle.call("run", 0, body, args))

    def pids(self) -> list[int | None]:
        """The actor processes' ids."""
        return [self._ex.pid(h) for h in self._handles]

    def poll(self) -> list[Any]:
        """Actors whose run ended since the last poll: reported, and restarted after a crash."""
        reports = []
        for index, run in enumerate(self._runs):
            if run is None or not run.done():
                continue
            handle, incarnation = self._handles[index], self.incarnations[index]
            try:
                run.result(0)
                error, restart = None, False
            except ActorFailure as failure:
                error, restart = failure, not self._closed
            self._runs[index] = None
            if restart:
                try:
                    self._ex.restart(handle)
                    self.incarnations[index] += 1
                    self._runs[index] = handle.call("run", self.incarnations[index], *self._body)
                except ActorFailure as failure:
                    restart, error = False, failure
            reports.append(SimpleNamespace(
                index=index, incarnation=incarnation, exitcode=None if error is None else 1, restarted=restart,
                message=f"actor {index} (incarnation {incarnation}, Ray) "
                        + (f"failed: {error}" if error else "returned")
                        + (f"; restarted (incarnation {self.incarnations[index]})" if restart else "; not restarted")))
        self.failures.extend(reports)
        return reports

    def kill(self, index: int) -> None:
        """Kills actor ``index`` as a crash would; `poll` then restarts it."""
        self._ex.kill(self._handles[index])

    def shutdown(self, timeout: float = 10.0) -> None:
        """Closes the queues (actors return), waits up to ``timeout`` for them, then stops every Ray actor."""
        if self._closed:
            return
        self._closed = True
        try:
            _call(self._host.close.remote())
            deadline = time.monotonic() + timeout
            for run in self._runs:
                if run is not None:
                    try:
                        run.result(max(0.1, deadline - time.monotonic()))
                    except (ActorFailure, TimeoutError):
                        pass
        except (QueueClosed, ray.exceptions.RayError):
            pass
        finally:
            try:
                ray.kill(self._host, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
            self._ex.shutdown()

    def __enter__(self) -> "RayActorLearnerExecutor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()
