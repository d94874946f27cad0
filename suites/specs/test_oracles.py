"""The NumPy oracles and models of `reference_agents.oracles.common` on tiny hand-computed examples."""

from __future__ import annotations

import numpy as np
import pytest

from reference_agents.oracles import common as oracles

# x @ kernel = [0, -1, 2] for x = [1, 1]; each activation's value at those points by hand.
X = np.array([[1.0, 1.0]], np.float32)
KERNEL = np.array([[0.0, -1.0, 1.0], [0.0, 0.0, 1.0]], np.float32)
AT_0_M1_2 = {
    None: [0.0, -1.0, 2.0],
    "linear": [0.0, -1.0, 2.0],
    "relu": [0.0, 0.0, 2.0],
    "tanh": [0.0, -0.7615941559557649, 0.9640275800758169],
    "sigmoid": [0.5, 0.2689414213699951, 0.8807970779778823],
    "elu": [0.0, -0.6321205588285577, 2.0],                    # e^-1 - 1
    "softplus": [0.6931471805599453, 0.31326168751822286, 2.1269280110429727],  # log(1 + e^x)
}


@pytest.mark.parametrize("activation", list(AT_0_M1_2), ids=str)
def test_dense_activations(activation: str | None) -> None:
    weights = {"kernel": KERNEL, "bias": np.zeros(3, np.float32)}
    out = oracles.dense_apply({"inputs": X}, weights, {"units": 3, "activation": activation})
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [AT_0_M1_2[activation]], rtol=1e-6)


def test_dense_bias_and_use_bias() -> None:
    weights = {"kernel": np.array([[1.0, 0.0, -1.0], [0.5, 1.0, 2.0]]), "bias": np.array([0.0, -3.0, 1.0])}
    x = np.array([[1.0, 2.0]])
    # [1 + 1, 0 + 2, -1 + 4] + [0, -3, 1] = [2, -1, 4]
    np.testing.assert_allclose(oracles.dense_apply({"inputs": x}, weights, {"activation": "relu"}), [[2, 0, 4]])
    np.testing.assert_allclose(oracles.dense_apply({"inputs": x}, weights, {"use_bias": False}), [[2, 2, 3]])


def test_dense_keeps_time_ranks_and_dtype() -> None:
    x = np.arange(12, dtype=np.float64).reshape(2, 3, 2)  # [B,T,2] or [T,B,2]: any leading ranks
    weights = {"kernel": np.array([[1.0], [-1.0]]), "bias": np.array([10.0])}
    out = oracles.dense_apply({"inputs": x}, weights, {})
    assert out.shape == (2, 3, 1) and out.dtype == np.float64
    np.testing.assert_array_equal(out, np.full((2, 3, 1), 9.0))  # x0 - x1 = -1 everywhere


def test_dense_prefix_selects_a_sub_layer() -> None:
    weights = {"a/kernel": np.eye(2), "a/bias": np.zeros(2), "b/kernel": 2 * np.eye(2), "b/bias": np.ones(2)}
    x = np.array([[1.0, -1.0]])
    np.testing.assert_array_equal(oracles.dense(x, weights, {}, prefix="b/"), [[3.0, -1.0]])


def test_container_split_dict_and_tuple() -> None:
    value = {"obs": np.zeros((2, 3)), "nested": {"mask": np.ones((2, 2), bool)}, "extra": np.arange(2)}
    out = oracles.container_split({"inputs": value}, {}, {"keys": ["obs", "nested"]})
    assert isinstance(out, tuple) and len(out) == 2
    assert out[0] is value["obs"] and out[1] is value["nested"]
    items = (np.float32(1.5), np.int64(4), (np.bool_(True),))
    assert oracles.container_split({"inputs": items}, {}, {"keys": [2, 0]}) == (items[2], items[0])
    assert oracles.container_split({"inputs": {"b": 7}}, {}, {"keys": ["b"]}) == (7,)


def test_container_merge_keys_and_tuple_size() -> None:
    a, b = np.array([1, 2]), np.array([[0.5], [1.5]])
    merged = oracles.container_merge({"values": (a, b)}, {}, {"keys": ["action", "value"]})
    assert list(merged) == ["action", "value"] and merged["action"] is a and merged["value"] is b
    assert oracles.container_merge({"values": [a, b]}, {}, {"tuple_size": 2}) == (a, b)


def test_fold_batch_major_and_time_major() -> None:
    x = np.arange(6).reshape(2, 3, 1)  # [B=2, T=3, 1]: row b*T + t
    np.testing.assert_array_equal(oracles.fold_time_rank({"inputs": x}, {}, {}), [[0], [1], [2], [3], [4], [5]])
    tm = np.array([[[0], [10]], [[1], [11]], [[2], [12]]])  # [T=3, B=2, 1]: row t*B + b
    np.testing.assert_array_equal(oracles.fold_time_rank({"inputs": tm}, {}, {})[:, 0], [0, 10, 1, 11, 2, 12])


def test_fold_nested_keeps_structure() -> None:
    value = {"a": np.zeros((2, 3, 4)), "b": (np.ones((2, 3), bool), np.arange(6).reshape(2, 3))}
    out = oracles.fold_time_rank({"inputs": value}, {}, {})
    assert out["a"].shape == (6, 4) and out["b"][0].shape == (6,) and out["b"][0].dtype == bool
    np.testing.assert_array_equal(out["b"][1], np.arange(6))


def test_unfold_takes_sizes_from_like() -> None:
    x = np.arange(6).reshape(6, 1)
    out = oracles.unfold_time_rank({"inputs": x, "like": np.zeros((2, 3, 5))}, {}, {})
    np.testing.assert_array_equal(out[:, :, 0], [[0, 1, 2], [3, 4, 5]])
    like = {"a": np.zeros((3, 2, 1)), "b": np.zeros((3, 2), bool)}  # time-major [T=3, B=2]
    out = oracles.unfold_time_rank({"inputs": {"v": np.arange(6)}, "like": like}, {}, {})
    np.testing.assert_array_equal(out["v"], [[0, 1], [2, 3], [4, 5]])


def test_fold_then_unfold_is_identity() -> None:
    x = np.random.default_rng(0).normal(size=(3, 4, 2))
    folded = oracles.fold_time_rank({"inputs": x}, {}, {})
    np.testing.assert_array_equal(oracles.unfold_time_rank({"inputs": folded, "like": x}, {}, {}), x)
    assert oracles.identity({"inputs": x}, {}, {}) is x


def test_time_distributed_dense_uses_the_dense_sub_layer() -> None:
    weights = {"dense/kernel": np.array([[2.0]]), "dense/bias": np.array([-1.0])}
    x = np.array([[[0.0], [1.0]], [[2.0], [-3.0]]])
    out = oracles.time_distributed_dense({"inputs": x}, weights, {"activation": "relu"})
    np.testing.assert_array_equal(out[..., 0], [[0.0, 1.0], [3.0, 0.0]])


def pair_weights() -> dict[str, np.ndarray]:
    return {"source/kernel": np.array([[1.0, 2.0]]), "source/bias": np.array([0.0, 1.0]),
            "target/kernel": np.array([[-1.0, 0.0]]), "target/bias": np.array([4.0, 0.0])}


def test_synced_pair_oracles() -> None:
    x = np.array([[2.0]])
    np.testing.assert_array_equal(oracles.synced_pair_source({"inputs": x}, pair_weights(), {}), [[2.0, 5.0]])
    np.testing.assert_array_equal(oracles.synced_pair_target({"inputs": x}, pair_weights(), {}), [[2.0, 0.0]])


def test_synced_pair_model_hard_sync() -> None:
    given = pair_weights()
    model = oracles.SyncedPairModel({"units": 2}, given)
    x = np.array([[2.0]])
    np.testing.assert_array_equal(model.target(inputs=x), [[2.0, 0.0]])
    assert model.sync() is None
    np.testing.assert_array_equal(model.target(inputs=x), [[2.0, 5.0]])
    np.testing.assert_array_equal(given["target/kernel"], [[-1.0, 0.0]])  # the caller's weights are not touched
    model.weights()["source/kernel"][0, 0] = 100.0
    np.testing.assert_array_equal(model.weights()["target/kernel"], [[1.0, 2.0]])  # a copy, not a view


def test_synced_pair_model_soft_sync() -> None:
    model = oracles.SyncedPairModel({"units": 2, "tau": 0.25}, pair_weights())
    model.sync()
    # 0.25 * source + 0.75 * target
    np.testing.assert_allclose(model.weights()["target/kernel"], [[-0.5, 0.5]])
    np.testing.assert_allclose(model.weights()["target/bias"], [3.0, 0.25])
    model.sync()
    np.testing.assert_allclose(model.weights()["target/kernel"], [[0.25 * 1 + 0.75 * -0.5, 0.25 * 2 + 0.75 * 0.5]])
    np.testing.assert_array_equal(model.source(inputs=np.array([[1.0]])), [[1.0, 3.0]])
