"""Execution: flat call chains, seeds, weights, export/import, devices, copies and F-op parity."""

from __future__ import annotations

import os

import numpy as np
import pytest

from harness.execution.executor import GraphExecutor
from harness.graph import Component, ExecutionError, UnknownApiError, api, graph_fn
from harness.spaces import BoolBox, Dict, FloatBox, IntBox

B3 = FloatBox(3, batch_rank=True)
X = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)


class Dense(Component):
    def __init__(self, units, scope="dense", **kwargs):
        super().__init__(scope=scope, **kwargs)
        self.units = units

    def create_variables(self, input_spaces):
        shape = (input_spaces["x"].shape[-1], self.units)
        self.kernel = self.get_variable("kernel", shape, initializer="glorot_uniform")
        self.bias = self.get_variable("bias", (self.units,), initializer="normal(0.1)")

    @api
    def apply(self, x):
        return self._graph_fn_apply(x)

    @graph_fn
    def _graph_fn_apply(self, F, x):
        return F.tanh(F.matmul(x, self.kernel) + self.bias)


class Torso(Component):
    def __init__(self, scope="torso"):
        super().__init__(Dense(4, "d1"), Dense(3, "d2"), scope=scope)

    @api
    def apply(self, x):
        return self.sub_components["d2"].apply(self.sub_components["d1"].apply(x))


class Net(Component):
    """Three levels: net -> torso -> d1/d2, net -> head; plus a graph function of its own."""

    def __init__(self):
        super().__init__(Torso(), Dense(2, "head"), scope="net")

    @api
    def apply(self, x):
        return self.sub_components["head"].apply(self.sub_components["torso"].apply(x))

    @api
    def apply_and_argmax(self, x):
        out = self.apply(x)
        return {"out": out, "argmax": self._graph_fn_argmax(out)}

    @graph_fn
    def _graph_fn_argmax(self, F, out):
        return F.argmax(out, -1)


def build(backend, seed=3, root=None, **kwargs):
    return GraphExecutor(root or Net(), {"x": B3}, backend=backend, seed=seed, **kwargs)


def test_deep_graph_executes_like_numpy(backend):
    ex = build(backend)
    w = ex.get_weights()
    h = X
    for scope in ("net/torso/d1", "net/torso/d2", "net/head"):
        h = np.tanh(h @ w[f"{scope}/kernel"] + w[f"{scope}/bias"])
    np.testing.assert_allclose(ex.execute("apply", X), h, rtol=1e-5, atol=1e-6)
    out = ex.execute("apply_and_argmax", x=X)
    np.testing.assert_array_equal(out["argmax"], h.argmax(-1))


def test_call_chain_is_flat(backend):
    api_fn = build(backend).apis["apply_and_argmax"]
    lines = api_fn.source.splitlines()
    assert lines[0] == "def apply_and_argmax(x):"
    assert [ln.split("# ")[1] for ln in lines[1:-1]] == [
        "net/torso/d1._graph_fn_apply", "net/torso/d2._graph_fn_apply", "net/head._graph_fn_apply",
        "net._graph_fn_argmax",
    ]
    assert lines[-1] == "    return {'out': r3, 'argmax': r4}"
    assert ".apply(" not in api_fn.source and "sub_components" not in api_fn.source


def test_tf_api_functions_have_signatures_with_open_batch_dims(backends):
    if "tf" not in backends:
        pytest.skip("tf not selected")
    import tensorflow as tf

    ex = GraphExecutor(Net(), {"x": FloatBox(3, batch_rank=True, time_rank=True)}, backend="tf")
    fn = ex.api_function("apply")
    assert isinstance(fn, tf.types.experimental.PolymorphicFunction)
    assert fn.input_signature == (tf.TensorSpec((None, None, 3), tf.float32),)
    with pytest.raises(UnknownApiError, match=r"registered: \['apply', 'apply_and_argmax'\]"):
        ex.api_function("nope")


def test_same_seed_same_weights_and_outputs(backend):
    first, second = build(backend, seed=5), build(backend, seed=5)
    w1, w2 = first.get_weights(), second.get_weights()
    assert w1.keys() == w2.keys() and all(np.array_equal(w1[k], w2[k]) for k in w1)
    np.testing.assert_array_equal(first.execute("apply", X), second.execute("apply", X))
    w3 = build(backend, seed=6).get_weights()
    assert all(not np.array_equal(w1[k], w3[k]) for k in w1)


def test_initial_weights_are_identical_across_backends(both_backends):
    tf_w, torch_w = (build(b, seed=11).get_weights() for b in both_backends)
    assert tf_w.keys() == torch_w.keys() and all(np.array_equal(tf_w[k], torch_w[k]) for k in tf_w)


class Noise(Component):
    def __init__(self):
        super().__init__(scope="noise")

    @api
    def apply(self, x):
        return self._graph_fn_noise(x)

    @graph_fn
    def _graph_fn_noise(self, F, x):
        return x + F.random_uniform((F.dim(x, 0), 3)) + F.random_normal((F.dim(x, 0), 3))

    @api
    def more_noise(self, x):
        return self._graph_fn_noise(self._graph_fn_noise(x))


def test_random_ops_are_reproducible_per_seed(backend):
    runs = [GraphExecutor(Noise(), {"x": B3}, backend=backend, seed=s) for s in (1, 1, 2)]
    outs = [[ex.execute("apply", X) for _ in range(2)] for ex in runs]
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])
    assert not np.array_equal(outs[0][0], outs[0][1])
    assert not np.array_equal(outs[0][0], outs[2][0])


def test_random_draws_do_not_depend_on_the_builds_sample_runs(backend):
    # Building more_noise runs more graph functions on samples; the build re-seeds afterwards.
    small = GraphExecutor(Noise(), {"x": B3}, backend=backend, seed=4, api_methods=["apply"])
    large = GraphExecutor(Noise(), {"x": B3}, backend=backend, seed=4)
    np.testing.assert_array_equal(small.execute("apply", X), large.execute("apply", X))


def test_weights_round_trip_and_errors(backend):
    ex = build(backend)
    w = ex.get_weights()
    assert sorted(w) == sorted(f"net/{s}/{v}" for s in ("torso/d1", "torso/d2", "head") for v in ("kernel", "bias"))
    changed = {k: v + 1.0 for k, v in w.items()}
    ex.set_weights(changed)
    assert all(np.array_equal(ex.get_weights()[k], changed[k]) for k in w)
    missing = {k: v for k, v in w.items() if k != "net/head/kernel"}
    with pytest.raises(ValueError, match=r"missing \['net/head/kernel'\]"):
        ex.set_weights(missing)
    with pytest.raises(ValueError, match=r"unexpected \['net/extra'\]"):
        ex.set_weights({**w, "net/extra": np.zeros(1)})
    with pytest.raises(ValueError, match=r"'net/head/bias' has shape \(3,\), the variable has \(2,\)"):
        ex.set_weights({**w, "net/head/bias": np.zeros(3)})
    assert all(np.array_equal(ex.get_weights()[k], changed[k]) for k in w)  # failed loads change nothing


def test_export_import_round_trip(backend, tmp_path):
    ex = build(backend, seed=1)
    ex.set_weights({k: v * 1.5 for k, v in ex.get_weights().items()})
    path = ex.export_model(str(tmp_path / "model"))
    assert path.endswith("model.npz") and os.path.exists(path)
    other = build(backend, seed=2)
    other.import_model(path)
    assert all(np.array_equal(ex.get_weights()[k], v) for k, v in other.get_weights().items())
    np.testing.assert_array_equal(other.execute("apply", X), ex.execute("apply", X))


@pytest.mark.parametrize("direction", ["tf->torch", "torch->tf"])
def test_export_import_across_backends(both_backends, direction, tmp_path):
    src_name, dst_name = direction.split("->")
    src, dst = build(src_name, seed=1), build(dst_name, seed=2)
    src.set_weights({k: v + 0.25 for k, v in src.get_weights().items()})
    dst.import_model(src.export_model(str(tmp_path / "m.npz")))
    assert all(np.array_equal(src.get_weights()[k], v) for k, v in dst.get_weights().items())
    # Weights are bit-identical; the frameworks' matmul kernels may round differently.
    np.testing.assert_allclose(dst.execute("apply", X), src.execute("apply", X), rtol=1e-5, atol=1e-6)


def test_import_rejects_other_root_classes(backend, tmp_path):
    path = GraphExecutor(Dense(2), {"x": B3}, backend=backend).export_model(str(tmp_path / "dense"))
    ex = build(backend)
    with pytest.raises(ValueError, match=rf"{path}.* holds a model of .*Dense, this executor's root is .*Net"):
        ex.import_model(path)


def test_import_rejects_plain_npz(backend, tmp_path):
    path = str(tmp_path / "plain.npz")
    np.savez(path, a=np.zeros(3))
    with pytest.raises(ValueError, match=rf"{path} is not a spacegraph model"):
        build(backend).import_model(path)


@pytest.mark.parametrize("content", ["text", "npy", "truncated"])
def test_import_rejects_files_that_are_not_npz_archives(backend, tmp_path, content):
    ex = build(backend)
    path = str(tmp_path / "not_a_model.npz")
    if content == "text":
        with open(path, "w") as fh:
            fh.write("hello")
    elif content == "npy":
        with open(path, "wb") as fh:
            np.save(fh, np.zeros(3))
    else:
        whole = open(ex.export_model(path), "rb").read()
        with open(path, "wb") as fh:
            fh.write(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=path):
        ex.import_model(path)


def test_failed_export_keeps_the_old_file(backend, tmp_path, monkeypatch):
    ex = build(backend)
    path = ex.export_model(str(tmp_path / "model.npz"))
    before = open(path, "rb").read()

    def broken_savez(fh, **arrays):
        fh.write(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", broken_savez)
    with pytest.raises(OSError, match="disk full"):
        ex.export_model(path)
    assert open(path, "rb").read() == before
    assert os.listdir(tmp_path) == ["model.npz"]


def test_device_map_places_variables(backend):
    ex = build(backend, device_map={"net/torso/d1": "/cpu:0"})
    kernel = ex.root.sub_component("torso/d1").variables["kernel"]
    if backend == "tf":
        assert kernel.device.endswith("CPU:0")
    else:
        assert kernel.device.type == "cpu"
    assert ex.execute("apply", X).shape == (5, 2)


def test_unknown_devices_and_scopes_are_refused(backend):
    with pytest.raises(ValueError, match=r"'/gpu:77' does not exist"):
        build(backend, device_map={"net/head": "/gpu:77"})
    with pytest.raises(ValueError, match=r"'/gpu:78' does not exist"):
        build(backend, root=Dense(2, device="/gpu:78"))
    with pytest.raises(ValueError, match=r"no component with scope path 'net/nope'"):
        build(backend, device_map={"net/nope": "/cpu:0"})


def test_copy_gives_an_independent_component(backend):
    original = Dense(2, "online")
    target = original.copy(scope="target")
    assert target.scope == "target" and target.parent is None and target is not original

    class Pair(Component):
        def __init__(self):
            super().__init__(original, target, scope="pair")

        @api
        def apply(self, x):
            return self.sub_components["online"].apply(x), self.sub_components["target"].apply(x)

    ex = build(backend, root=Pair())
    w = ex.get_weights()
    assert not np.array_equal(w["pair/online/kernel"], w["pair/target/kernel"])
    ex.set_weights({**w, "pair/target/kernel": np.zeros((3, 2), np.float32)})
    assert np.array_equal(ex.get_weights()["pair/online/kernel"], w["pair/online/kernel"])
    online, tgt = ex.execute("apply", X)
    np.testing.assert_allclose(tgt, np.tanh(np.broadcast_to(w["pair/target/bias"], (5, 2))), rtol=1e-6)
    assert not np.allclose(online, tgt)
    with pytest.raises(RuntimeError, match=r"copy\(\) is only possible before the build"):
        original.copy(scope="again")


# ---- execution errors ------------------------------------------------------------------------------


class Mixed(Component):
    def __init__(self):
        super().__init__(scope="mixed")

    @api
    def apply(self, obs, n):
        return self._graph_fn_apply(obs, n)

    @graph_fn
    def _graph_fn_apply(self, F, obs, n):
        return obs["a"] * F.expand_dims(F.cast(n, "float32"), -1)


MIXED_SPACES = {"obs": Dict(a=FloatBox(2, batch_rank=True), b=BoolBox(batch_rank=True)),
                "n": IntBox(4, batch_rank=True)}
OBS = {"a": np.ones((2, 2), np.float32), "b": np.array([True, False])}


def test_execute_errors_name_method_and_argument(backend):
    ex = GraphExecutor(Mixed(), MIXED_SPACES, backend=backend)
    np.testing.assert_array_equal(ex.execute("apply", OBS, np.array([1, 2])), [[1.0, 1.0], [2.0, 2.0]])
    with pytest.raises(UnknownApiError, match=r"Mixed has no built API method 'nope'; registered: \['apply'\]"):
        ex.execute("nope")
    with pytest.raises(ExecutionError, match=r"apply\(n\): dtype float64 cannot be cast to int64"):
        ex.execute("apply", OBS, np.array([1.0, 2.0]))
    with pytest.raises(ExecutionError, match=r"apply\(obs/a\): shape \(2, 3\) does not fit space float32\[B,2\]"):
        ex.execute("apply", {**OBS, "a": np.ones((2, 3), np.float32)}, np.array([1, 2]))
    with pytest.raises(ExecutionError, match=r"apply\(obs\): .*missing \['b'\]"):
        ex.execute("apply", {"a": OBS["a"]}, np.array([1, 2]))
    with pytest.raises(ExecutionError, match=r"apply is missing input\(s\) \['n'\]"):
        ex.execute("apply", OBS)
    with pytest.raises(ExecutionError, match=r"apply has no input 'm'"):
        ex.execute("apply", OBS, m=np.array([1, 2]))


def test_compile_on_first_call_gives_the_eager_build_results(backend):
    import threading

    lazy, eager = build(backend, compile="first_call"), build(backend)
    assert all(getattr(a.fn, "pending", False) for a in lazy.apis.values())     # nothing compiled at build
    assert not any(getattr(a.fn, "pending", False) for a in eager.apis.values())
    assert lazy.api_table() == eager.api_table()

    results, errors = [], []

    def call():
        try:
            results.append(lazy.execute("apply", X))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(4)]          # the first calls race for the compile
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    expected = eager.execute("apply", X)
    for out in results:
        np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)
    assert not getattr(lazy.apis["apply"].fn, "pending", False)                    # compiled once, in place
    assert getattr(lazy.apis["apply_and_argmax"].fn, "pending", False)             # the other is still pending
    fn = lazy.api_function("apply_and_argmax")                                     # asking for it compiles it
    assert not getattr(fn, "pending", False) and not getattr(lazy.apis["apply_and_argmax"].fn, "pending", False)


def test_unknown_compile_mode_is_refused():
    with pytest.raises(ValueError, match="compile must be one of"):
        GraphExecutor(Net(), {"x": B3}, backend="torch", compile="never")
