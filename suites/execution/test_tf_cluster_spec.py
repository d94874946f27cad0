"""Cluster spec files of ``--executor tf-dist`` (no server started): a damaged or foreign file is one clear
error naming the file and what is wrong; a spec naming a host other than loopback prints, once per process,
that TensorFlow's servers listen on every interface and authenticate nothing."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.execution.tf_dist import cluster as tfc

GOOD = {"learner": ["127.0.0.1:2222"], "actor": ["127.0.0.1:2223", "127.0.0.1:2224"]}


def write(tmp_path, content, name="cluster.json"):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def test_a_good_spec_is_read(tmp_path):
    assert tfc.read_cluster_spec(write(tmp_path, GOOD)) == GOOD


@pytest.mark.parametrize("content, says", [
    (b"", "not valid JSON"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "not a JSON text file (not UTF-8"),
    (b"PK\x03\x04\x14\x00\x00\x00\x08\x00", "not valid JSON"),             # a zip (an .npz handed over)
    ('{"learner": ["127.0.0.1:2222"], "actor": ["127.0.0.1:22', "not valid JSON"),   # truncated
    ("[1, 2]", "expected an object with exactly the keys 'learner' and 'actor'; got a JSON list"),
    ({"worker": ["a:1"], "ps": ["b:2"]}, "exactly the keys 'learner' and 'actor'; got ['ps', 'worker']"),
    ({"learner": "127.0.0.1:2222", "actor": ["127.0.0.1:2223"]}, "learner: expected a list of 1"),
    ({"learner": ["a:1", "b:2"], "actor": ["c:3"]}, "learner: expected a list of 1"),
    ({"learner": ["a:1"], "actor": []}, "actor: expected a list of one or more"),
    ({"learner": ["a:1"], "actor": [7]}, "actor[0]: expected 'host:port' (a string, not a JSON int)"),
    ({"learner": [":2222"], "actor": ["a:1"]}, "learner[0]: expected 'host:port' (no host)"),
    ({"learner": ["a:99999"], "actor": ["b:1"]}, "learner[0]: expected 'host:port' (a port in 1-65535)"),
    ({"learner": ["a:0"], "actor": ["b:1"]}, "(a port in 1-65535)"),
    ({"learner": ["a b:1"], "actor": ["b:1"]}, "(no spaces)"),
    ({"learner": ["a:1"], "actor": ["b:2", "a:1"]}, "a:1 is named twice"),
], ids=["empty", "png", "zip", "truncated", "list", "foreign keys", "learner not a list", "two learners",
        "no actors", "task not a string", "no host", "port too big", "port zero", "space", "duplicate"])
def test_a_damaged_or_foreign_spec_is_one_clear_error(tmp_path, content, says):
    path = write(tmp_path, content)
    with pytest.raises(ValueError) as info:
        tfc.read_cluster_spec(path)
    assert str(info.value).startswith(f"cluster spec {path}: ") and says in str(info.value)


def test_a_missing_file_or_a_folder_is_named(tmp_path):
    with pytest.raises(ValueError, match=rf"cluster spec {tmp_path}/nope.json: cannot be read: No such file"):
        tfc.read_cluster_spec(str(tmp_path / "nope.json"))
    with pytest.raises(ValueError, match=rf"cluster spec {tmp_path}: cannot be read: Is a directory"):
        tfc.read_cluster_spec(str(tmp_path))


@given(st.binary(max_size=200), st.integers(0, 200))
def test_any_bytes_or_any_cut_of_a_good_spec_is_read_or_refused_clearly(tmp_path_factory, blob, cut):
    folder = tmp_path_factory.mktemp("spec")
    for content in (blob, json.dumps(GOOD).encode()[:cut]):
        path = write(folder, content)
        try:
            assert tfc.read_cluster_spec(path) == GOOD   # (only the whole good spec reads)
        except ValueError as exc:
            assert str(exc).startswith(f"cluster spec {path}: ")


@pytest.fixture
def fresh_warning(monkeypatch):
    monkeypatch.setattr(tfc, "_warned_exposed", False)


@pytest.mark.parametrize("cluster", [
    GOOD,
    {"learner": ["localhost:2222"], "actor": ["[::1]:2223", "127.0.0.2:2224"]},
], ids=["127.0.0.1", "localhost, ::1, 127.0.0.2"])
def test_a_loopback_cluster_prints_nothing(fresh_warning, capsys, cluster):
    assert tfc.warn_exposed_cluster(cluster) is False
    assert capsys.readouterr().err == ""


def test_a_cluster_on_other_hosts_is_warned_about_once_per_process(fresh_warning, capsys):
    cluster = {"learner": ["10.0.0.5:2222"], "actor": ["127.0.0.1:2223", "node-7.lan:2224", "[fd00::2]:2225"]}
    assert tfc.warn_exposed_cluster(cluster) is True
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("spacegraph: warning: the cluster spec names 10.0.0.5, "
                                                   "fd00::2, node-7.lan.")
    assert "listen on every network interface" in err and "authenticate nothing" in err
    assert "private network" in err
    assert tfc.warn_exposed_cluster(cluster) is True and tfc.warn_exposed_cluster(dict(cluster)) is True
    assert capsys.readouterr().err == ""
