"""Who listens where: the listening TCP sockets of this process and its descendants, watched during a test.

`ListenerWatch` polls (a background thread, every `POLL_SECONDS`, and once more when stopped) the TCP sockets in
state LISTEN (IPv4 and IPv6) of this process and every descendant (Ray's GCS server, raylet, agents and
workers; spawned actor processes; TF server processes) and keeps each one not bound to loopback
(``127.0.0.0/8``, ``::1``, ``::ffff:127.x``) that is not a documented exception: the ports of TensorFlow
servers this process's executors run (`harness.execution.tf_dist.cluster.tf_server_ports`), which TensorFlow
binds on every interface whatever the cluster spec says (docs/security.md).

A look must be cheap (it runs several times a second beside the tests on 2 cores): on Linux it asks the
kernel for the listening sockets only (``sock_diag`` over netlink, about 0.1 ms; reading ``/proc/net/tcp*``
costs about 7 ms, and psutil's per-process ``net_connections`` reads them once per process), and finds the
process holding a socket (psutil's process tree, the ``/proc/PID/fd`` links) only for sockets that matter
and were not placed before. Elsewhere it falls back to psutil's ``net_connections`` of every process.

``suites/conftest.py`` runs `watch_listeners` around every test marked ``distributed`` and fails the test on
what it found.
"""

from __future__ import annotations

import os
import socket
import struct
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


def _tree(root: psutil.Process) -> list[psutil.Process]:
    try:
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return [root]


def listeners(root: psutil.Process | None = None) -> list[Listener]:
    """The listening TCP sockets (IPv4 and IPv6) of ``root`` (default: this process) and its descendants, by
    psutil's ``net_connections`` of each process (the portable way; `ListenerWatch` has a cheaper one)."""
    found = []
    for process in _tree(root or psutil.Process()):
        try:
            sockets = [s for s in process.net_connections(kind="tcp") if s.status == psutil.CONN_LISTEN]
            if sockets:
                found.extend(Listener(process.pid, process.name(), " ".join(process.cmdline()), s.laddr.ip,
                                      s.laddr.port) for s in sockets)
        except psutil.Error:  # gone meanwhile, or a zombie
            continue
    return found


def exposed(found: list[Listener], documented: frozenset[int] = frozenset()) -> list[Listener]:
    """The listeners of ``found`` bound to a non-loopback address whose port is not in ``documented``."""
    return [item for item in found if not is_loopback(item.ip) and item.port not in documented]


# sock_diag (linux/inet_diag.h): a dump request for TCP sockets in state LISTEN, answered with inet_diag_msg
# records (family, state, timer, retrans; the socket id: sport, dport (big-endian), src, dst (16 bytes each),
# interface, cookie; expires, rqueue, wqueue, uid, inode).
_NETLINK_SOCK_DIAG, _SOCK_DIAG_BY_FAMILY, _NLMSG_ERROR, _NLMSG_DONE = 4, 20, 2, 3
_NLM_F_REQUEST, _NLM_F_DUMP, _TCP_LISTEN = 0x1, 0x300, 10
_HEADER = struct.Struct("=IHHII")
_INODE_AT, _SRC_AT = 68, 8


def _listening_sockets() -> list[tuple[str, int, int]] | None:
    """``(ip, port, inode)`` of every listening TCP socket of this network namespace, from the kernel's
    ``sock_diag``; None where that is not available (not Linux, or netlink refused)."""
    if not hasattr(socket, "AF_NETLINK"):
        return None
    found = []
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_SOCK_DIAG) as sock:
            for family in (socket.AF_INET, socket.AF_INET6):
                body = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 1 << _TCP_LISTEN) + bytes(48)
                sock.send(_HEADER.pack(_HEADER.size + len(body), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST | _NLM_F_DUMP,
                                       1, 0) + body)
                found.extend(_read_dump(sock))
    except OSError:
        return None
    return found


def _read_dump(sock: socket.socket) -> Iterator[tuple[str, int, int]]:
    while True:
        data, offset = sock.recv(1 << 16), 0
        while offset + _HEADER.size <= len(data):
            length, kind = _HEADER.unpack_from(data, offset)[:2]
            if kind == _NLMSG_DONE:
                return
            if kind == _NLMSG_ERROR:
                raise OSError("sock_diag refused the request")
            message = data[offset + _HEADER.size: offset + length]
            family = message[0]
            size = 4 if family == socket.AF_INET else 16
            ip = socket.inet_ntop(family, message[_SRC_AT:_SRC_AT + size])
            port = struct.unpack_from(">H", message, 4)[0]
            yield ip, port, struct.unpack_from("=I", message, _INODE_AT)[0]
            offset += (length + 3) & ~3


def _socket_inodes(pid: int) -> set[int]:
    """The inodes of the sockets process ``pid`` holds (``/proc/PID/fd``); raises OSError when unreadable."""
    inodes = set()
    folder = f"/proc/{pid}/fd"
    for fd in os.listdir(folder):
        try:
            link = os.readlink(os.path.join(folder, fd))
        except OSError:  # closed meanwhile
            continue
        if link.startswith("socket:["):
            inodes.add(int(link[8:-1]))
    return inodes


class ListenerWatch:
    """Polls the listening sockets of this process tree in a thread from `start` to `stop`; `stop` returns the
    exposed ones seen (each once).

    Attributes:
        seen: ``{(pid, ip, port): Listener}`` of the exposed listeners seen so far.
        everything: every listener of the tree seen; loopback ones only while ``record_all`` is set (finding
            their processes costs a little more).
    """

    def __init__(self, interval: float = POLL_SECONDS, record_all: bool = False) -> None:
        self.interval = float(interval)
        self.record_all = record_all
        self.seen: dict[tuple[int, str, int], Listener] = {}
        self.everything: set[Listener] = set()
        self.polls = 0
        self._owned: dict[int, Listener] = {}   # socket inode -> the listener of the tree holding it
        self._foreign: set[int] = set()         # socket inodes held outside the tree
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="listener-watch", daemon=True)
        self._root = psutil.Process()

    def start(self) -> "ListenerWatch":
        self._thread.start()
        return self

    def look(self) -> None:
        """One look: records every exposed listener not seen before."""
        documented = _documented_ports()
        table = _listening_sockets()
        if table is None:
            found = listeners(self._root)
        else:
            wanted = {inode: (ip, port) for ip, port, inode in table
                      if inode not in self._owned and inode not in self._foreign
                      and (self.record_all or (not is_loopback(ip) and port not in documented))}
            if wanted:
                self._place(wanted)
            found = [self._owned[inode] for _, _, inode in table if inode in self._owned]
        self.everything.update(found)
        for item in exposed(found, documented):
            self.seen.setdefault((item.pid, item.ip, item.port), item)
        self.polls += 1

    def _place(self, wanted: dict[int, tuple[str, int]]) -> None:
        """Finds which process of the tree holds each socket of ``wanted``; the others are foreign (a socket
        outside the tree never enters it: its descendants start after this process), unless a process of the
        tree could not be read (then they are looked for again next time)."""
        complete = True
        for process in _tree(self._root):
            try:
                mine = _socket_inodes(process.pid) & set(wanted)
                if mine:
                    name, cmdline = process.name(), " ".join(process.cmdline())
                    for inode in mine:
                        ip, port = wanted.pop(inode)
                        self._owned[inode] = Listener(process.pid, name, cmdline, ip, port)
            except (OSError, psutil.Error):
                complete = False
        if complete:
            self._foreign.update(wanted)

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
