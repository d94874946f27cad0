"""Actor processes of an actor-learner executor: spawned, watched, reported and restarted when they crash,
and all ended by `ActorProcesses.stop` (shared by the distributed-TF and the gRPC executors)."""

from __future__ import annotations

import multiprocessing
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class ActorFailureReport:
    """An actor process that ended by itself: which, how, and whether it was restarted."""

    index: int
    incarnation: int
    exitcode: int | None
    restarted: bool
    message: str = field(default="")


def watch_parent(parent: int) -> None:
    """Runs in an actor process's thread: leaves at once when the learner (its parent) is gone."""
    while True:
        if os.getppid() != parent:
            os._exit(3)  # nothing to save on an actor
        time.sleep(0.5)


class ActorProcesses:
    """``count`` spawned processes running ``target(*args_of(index, incarnation))``.

    Spawned, not forked (TF and PyTorch state does not survive a fork), as daemons of this process.

    Args:
        count: how many actors.
        target: a module-level function (picklable by reference).
        args_of: ``fn(index, incarnation) -> args`` for the target.
        restarts: how often each actor may be restarted after ending with a non-zero exit code.
    """

    def __init__(self, count: int, target: Callable[..., Any], args_of: Callable[[int, int], tuple],
                 restarts: int) -> None:
        self._ctx = multiprocessing.get_context("spawn")
        self.count, self.target, self.args_of, self.restarts = int(count), target, args_of, int(restarts)
        self._procs: list[Any] = [None] * self.count
        self.incarnations = [0] * self.count
        self.restarts_used = [0] * self.count
        self.failures: list[ActorFailureReport] = []
        self.stopping = False

    def spawn(self, index: int) -> None:
        """Starts actor ``index`` (its current incarnation)."""
        proc = self._ctx.Process(target=self.target, name=f"actor-{index}", daemon=True,
                                 args=self.args_of(index, self.incarnations[index]))
        proc.start()
        self._procs[index] = proc

    def start_all(self) -> None:
        for index in range(self.count):
            self.spawn(index)

    def pids(self) -> list[int | None]:
        """The actor processes' ids (None for one not started)."""
        return [p.pid if p is not None else None for p in self._procs]

    def poll(self) -> list[ActorFailureReport]:
        """Actors that ended since the last poll: each reported and, within its ``restarts``, restarted.

        An actor that ends with exit code 0 (its body returned) is reported too, and not restarted.
        """
        reports = []
        for index, proc in enumerate(self._procs):
            if proc is None or proc.is_alive():
                continue
            code = proc.exitcode
            proc.join()
            restart = code != 0 and self.restarts_used[index] < self.restarts and not self.stopping
            report = ActorFailureReport(index, self.incarnations[index], code, restart,
                                        f"actor {index} (incarnation {self.incarnations[index]}, pid {proc.pid}) "
                                        f"exited with code {code}" + (
                                            f"; restarted ({self.restarts_used[index] + 1} of {self.restarts})"
                                            if restart else "; not restarted"))
            self._procs[index] = None
            if restart:
                self.restarts_used[index] += 1
                self.incarnations[index] += 1
                self.spawn(index)
            reports.append(report)
        self.failures.extend(reports)
        return reports

    def kill(self, index: int) -> None:
        """Kills actor ``index`` as a crash would (tests of fault handling); `poll` then restarts it."""
        proc = self._procs[index]
        if proc is not None and proc.is_alive():
            proc.kill()
            proc.join(10)

    def stop(self, timeout: float) -> None:
        """Waits up to ``timeout`` seconds for the actors to leave by themselves, then terminates and kills."""
        self.stopping = True
        deadline = time.monotonic() + timeout
        for proc in self._procs:
            if proc is not None:
                proc.join(max(0.0, deadline - time.monotonic()))
        for proc in self._procs:
            if proc is not None and proc.is_alive():
                proc.terminate()
                proc.join(3)
                if proc.is_alive():
                    proc.kill()
                    proc.join(3)


class ProcessActorsMixin:
    """The actor side of an executor whose actors are `ActorProcesses`: start, list, poll, kill, stop.

    The executor sets ``num_actors``, ``restarts``, ``queues`` and ``_actors = None`` in its constructor.
    """

    num_actors: int
    restarts: int
    queues: dict[str, Any]
    _actors: ActorProcesses | None

    def _start_processes(self, target: Callable[..., Any], args_of: Callable[[int, int], tuple]) -> None:
        self._actors = ActorProcesses(self.num_actors, target, args_of, self.restarts)
        self._actors.start_all()

    @property
    def failures(self) -> list[ActorFailureReport]:
        """Every actor failure reported so far."""
        return self._actors.failures if self._actors is not None else []

    def pids(self) -> list[int | None]:
        """The actor processes' ids (None for one not started)."""
        return self._actors.pids() if self._actors is not None else [None] * self.num_actors

    def poll(self) -> list[ActorFailureReport]:
        """Actors that ended since the last poll, reported and (after a crash, within ``restarts``) restarted."""
        return self._actors.poll() if self._actors is not None else []

    def kill(self, index: int) -> None:
        """Kills actor ``index`` as a crash would (tests of fault handling); `poll` then restarts it."""
        self._actors.kill(index)

    def _close_and_stop(self, timeout: float) -> None:
        """Closes the queues (an actor's next queue operation fails: it returns), then stops the processes."""
        for q in self.queues.values():
            q.close()
        if self._actors is not None:
            self._actors.stop(timeout)
