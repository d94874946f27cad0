"""Who listens where: the listening TCP sockets of this process and its descendants, watched during a test.

`ListenerWatch` polls (a background thread, every `POLL_SECONDS`, and once more when stopped) the sockets in
state LISTEN (IPv4 and IPv6) of this process and every descendant (Ray's GCS server, raylet, agents and
workers; spawned actor processes; TF server processes) and keeps each one not bound to loopback
(``127.0.0.0/8``, ``::1``, ``::ffff:127.x``) that is not a documented exception: the ports of TensorFlow
servers this process's executors started (`harness.execution.tf_dist.cluster.tf_server_ports`), which
TensorFlow binds on every interface whatever the cluster spec says (docs/security.md).

``suites/conftest.py`` runs `watch_listeners` around every test marked ``distributed`` and fails the test on
what it found.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Iterator

import psutil
import pytest

from harness.execution.loopback import is_loopback

#: Seconds between two looks.
POLL_SECONDS = 0.15


@dataclass(frozen=True)
class Listener:
    """One listening socket: the process holding it and its address."""

    pid: int
    name: str
    cmdline: str
    ip: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.ip}]" if ":" in self.ip else self.ip
        return f"pid {self.pid} ({self.name}: {self.cmdline[:200]}) listens on {host}:{self.port}"


def _documented_ports() -> frozenset[int]:
    """The TF server ports this process's executors hold (nothing when the TF executor was never imported)."""
    cluster = sys.modules.get("harness.execution.tf_dist.cluster")
    return cluster.tf_server_ports() if cluster is not None else frozenset()


def listeners(root: psutil.Process | None = None) -> list[Listener]:
    """The listening TCP sockets (IPv4 and IPv6) of ``root`` (default: this process) and its descendants."""
    root = root or psutil.Process()
    try:
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        processes = [root]
    found = []
    for process in processes:
        try:
            sockets = process.net_connections(kind="tcp")
            if not any(s.status == psutil.CONN_LISTEN for s in sockets):
                continue
            name, cmdline = process.name(), " ".join(process.cmdline())
        except psutil.Error:  # gone meanwhile, or a zombie
            continue
        found.extend(Listener(process.pid, name, cmdline, s.laddr.ip, s.laddr.port)
                     for s in sockets if s.status == psutil.CONN_LISTEN)
    return found


def exposed(found: list[Listener], documented: frozenset[int] = frozenset()) -> list[Listener]:
    """The listeners of ``found`` bound to a non-loopback address whose port is not in ``documented``."""
    return [item for item in found if not is_loopback(item.ip) and item.port not in documented]


class ListenerWatch:
    """Polls `listeners` in a thread from `start` to `stop`; `stop` returns the exposed ones seen (each once)."""

    def __init__(self, interval: float = POLL_SECONDS) -> None:
        self.interval = float(interval)
        self.seen: dict[tuple[int, str, int], Listener] = {}
        self.everything: set[Listener] = set()  # every listener seen, exposed or not
        self.polls = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="listener-watch", daemon=True)
        self._root = psutil.Process()

    def start(self) -> "ListenerWatch":
        self._thread.start()
        return self

    def look(self) -> None:
        """One look: records every exposed listener not seen before."""
        found = listeners(self._root)
        self.everything.update(found)
        for item in exposed(found, _documented_ports()):
            self.seen.setdefault((item.pid, item.ip, item.port), item)
        self.polls += 1

    def _run(self) -> None:
        while True:
            self.look()
            if self._stop.wait(self.interval):
                return

    def stop(self) -> list[Listener]:
        """Stops the thread, looks once more, and returns what was exposed."""
        self._stop.set()
        self._thread.join()
        self.look()
        return list(self.seen.values())


def watch_listeners() -> Iterator[ListenerWatch]:
    """The body of the suite's listener fixture: yields a running `ListenerWatch`; afterwards fails the test
    (``pytest.fail``), naming each process, its command line, address and port, when anything was exposed."""
    watch = ListenerWatch().start()
    try:
        yield watch
    finally:
        found = watch.stop()
    if found:
        pytest.fail("listening on an address other than loopback (only documented TensorFlow servers may; see "
                    "docs/security.md):\n" + "\n".join(f"  {item}" for item in found), pytrace=False)
