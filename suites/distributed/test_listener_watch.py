"""The suite's listener watch (`suites.listeners`, run around every distributed test): a child process listening
on every interface fails the test, named with its pid, command line, address and port; loopback listeners and
documented TensorFlow server ports pass."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from suites import listeners as sl

pytestmark = pytest.mark.distributed

#: A child that listens on ``sys.argv[1]`` (any port) until its stdin closes; prints the port.
LISTEN = """import socket, sys
s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET)
s.bind((sys.argv[1], 0))
s.listen()
print(s.getsockname()[1], flush=True)
sys.stdin.read()
"""


def planted(tmp_path, host: str) -> tuple[subprocess.Popen, int]:
    script = tmp_path / "planted_listener.py"
    script.write_text(LISTEN)
    child = subprocess.Popen([sys.executable, str(script), host], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    return child, int(child.stdout.readline())


def end(child: subprocess.Popen, outer: sl.ListenerWatch, port: int) -> None:
    """Ends the planted child; the watch the test runs under must have seen it (it looks once more first),
    and forgets it (planted on purpose)."""
    outer.look()
    child.stdin.close()
    child.wait(30)
    keys = [key for key, item in outer.seen.items() if item.pid == child.pid and item.port == port]
    assert keys, f"the suite's watch missed pid {child.pid} on port {port}"
    for key in keys:
        del outer.seen[key]


@pytest.mark.parametrize("way", ["sock_diag", "psutil"])
@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_a_child_listening_on_every_interface_fails_the_test(loopback_listeners, tmp_path, monkeypatch, host, way):
    if way == "psutil":  # (where the kernel's sock_diag is not available)
        monkeypatch.setattr(sl, "_listening_sockets", lambda: None)
    watch = sl.watch_listeners()
    next(watch)
    child, port = planted(tmp_path, host)
    with socket.socket() as quiet:
        quiet.bind(("127.0.0.1", 0))
        quiet.listen()
        quiet_port = quiet.getsockname()[1]
        try:
            with pytest.raises(pytest.fail.Exception) as failed:
                next(watch)
        finally:
            end(child, loopback_listeners, port)
    text = str(failed.value)
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    assert f"pid {child.pid} (python" in text and "planted_listener.py" in text and f"listens on {shown}" in text
    assert f":{quiet_port}" not in text


def test_loopback_and_documented_tf_ports_pass(loopback_listeners, tmp_path, monkeypatch):
    child, port = planted(tmp_path, "0.0.0.0")
    loopback_listeners.look()  # (before its port is documented below)
    try:
        found = sl.listeners()
        assert any(item.pid == child.pid and item.port == port for item in found)
        assert [item.port for item in sl.exposed(found)] == [port]
        assert sl.exposed(found, frozenset({port})) == []
        from harness.execution.tf_dist import cluster

        monkeypatch.setattr(cluster, "_server_ports", cluster.Counter({port: 1}))
        watch = sl.ListenerWatch().start()
        assert watch.stop() == []
    finally:
        end(child, loopback_listeners, port)
