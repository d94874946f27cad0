"""Unit tests of the neural-network components that the spec harness cannot express."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
import yaml

from harness.execution.executor import GraphExecutor
from harness.graph.errors import SpaceMismatchError
from harness.testing.plugin import selected_backends
from reference_agents.components.nn import (LSTM, Conv2D, DuelingHead, MaxPool2D, NeuralNetwork, ResidualBlock,
                                           impala_resnet_layers, nature_dqn_layers)
from reference_agents.components.nn.network import preset_layers
from reference_agents.components.nn.conv2d import conv_output_size
from reference_agents.oracles import nn as oracles

SPECS = pathlib.Path(__file__).parents[2] / "specs" / "components"
BACKENDS = pytest.mark.parametrize("backend", selected_backends())


def _relative(weights: dict[str, np.ndarray], scope: str) -> dict[str, np.ndarray]:
    return {k[len(scope) + 1:]: v for k, v in weights.items()}


@BACKENDS
@pytest.mark.parametrize("strides", [1, 2, 3])
@pytest.mark.parametrize("kernel_size", [(2, 3), (3, 4), (1, 5)])
def test_same_padding_matches_tf_same_on_odd_and_even_sizes(backend, strides, kernel_size):
    # 5 rows and 6 columns: odd and even sizes, odd and even kernels, in one image.
    config = {"filters": 2, "kernel_size": kernel_size, "strides": strides, "padding": "same"}
    ex = GraphExecutor(Conv2D(**config, bias_initializer="normal(0.5)"), {"inputs": "float32[B,5,6,3]"}, backend)
    x = np.random.default_rng(strides).normal(size=(2, 5, 6, 3)).astype(np.float32)
    out = ex.execute("apply", x)
    assert out.shape == (2, -(-5 // strides), -(-6 // strides), 2)
    expected = oracles.conv2d_apply({"inputs": x}, _relative(ex.get_weights(), "conv2d"), config)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("size,kernel,stride,padding,expected", [
    (7, 4, 2, "same", (4, 1, 2)),    # odd total padding: the extra element after
    (8, 3, 2, "same", (4, 0, 1)),
    (5, 1, 3, "same", (2, 0, 0)),
    (6, 6, 1, "same", (6, 2, 3)),
    (84, 8, 4, "valid", (20, 0, 0)),
    (2, 3, 1, "valid", (0, 0, 0)),   # does not fit
])
def test_conv_output_size(size, kernel, stride, padding, expected):
    assert conv_output_size(size, kernel, stride, padding) == expected


@pytest.mark.parametrize("kwargs,message", [
    ({"filters": 0, "kernel_size": 3}, "filters must be a positive int; got 0"),
    ({"filters": True, "kernel_size": 3}, "filters must be a positive int; got True"),
    ({"filters": 2, "kernel_size": (3, 0)}, "kernel_size must be a positive int or a pair"),
    ({"filters": 2, "kernel_size": (1, 2, 3)}, "kernel_size must be a positive int or a pair"),
    ({"filters": 2, "kernel_size": 3, "strides": -1}, "strides must be a positive int or a pair of positive ints; got -1"),
    ({"filters": 2, "kernel_size": 3, "padding": "SAME"}, "padding must be one of ('valid', 'same'); got 'SAME'"),
    ({"filters": 2, "kernel_size": 3, "activation": "swish"}, "activation must be None or one of"),
    ({"filters": 2, "kernel_size": 3, "use_bias": 1}, "use_bias must be a bool; got 1"),
    ({"filters": 2, "kernel_size": 3, "kernel_initializer": "he"}, "kernel_initializer must be"),
])
def test_conv2d_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match="Conv2D: ") as info:
        Conv2D(**kwargs)
    assert message in str(info.value)


@pytest.mark.parametrize("layers,message", [
    ([], "layers must be a non-empty list"),
    ({"type": "dense"}, "layers must be a non-empty list"),
    ([{"type": "dense", "units": 2}, "flatten"], "layers[1] must be a dict with a 'type' key"),
    ([{"units": 2}], "layers[0]: key 'type' must be one of ['conv2d', 'dense', 'flatten', 'max_pool2d', 'residual_block']; got None"),
    ([{"type": "flatten"}, {"type": "lstm", "units": 2}], "layers[1]: key 'type' must be one of"),
    ([{"type": "dense", "units": 2, "filters": 3}], "layers[0] (dense): unknown key 'filters'"),
    ([{"type": "flatten"}, {"type": "conv2d", "filters": 3}], "layers[1] (conv2d): missing key 'kernel_size'"),
    ([{"type": "dense", "units": -1}], "layers[0] (dense): Dense: units must be a positive int; got -1"),
    ([{"type": "conv2d", "filters": 2, "kernel_size": 3, "padding": "full"}],
     "layers[0] (conv2d): Conv2D: padding must be one of"),
    ([{"type": "dense", "units": 2, "scope": "a"}, {"type": "dense", "units": 2, "scope": "a"}],
     "layers[1]: key 'scope' repeats 'a' of layers[0]"),
])
def test_network_config_errors_name_the_layer_and_key(layers, message):
    with pytest.raises(ValueError) as info:
        NeuralNetwork(layers)
    assert str(info.value).startswith("NeuralNetwork: ")
    assert message in str(info.value)


def test_nature_dqn_layers_match_the_spec_and_are_fresh():
    spec = yaml.safe_load((SPECS / "nn_network_nature_dqn.yaml").read_text())
    assert spec["config"]["layers"] == nature_dqn_layers()
    first = nature_dqn_layers()
    first[0]["filters"] = 1
    assert nature_dqn_layers()[0]["filters"] == 32


@BACKENDS
def test_nature_dqn_variables_and_shapes(backend):
    ex = GraphExecutor(NeuralNetwork(nature_dqn_layers()), {"inputs": "float32[B,84,84,4]"}, backend)
    shapes = {k: v.shape for k, v in ex.get_weights().items()}
    assert shapes == {
        "network/conv2d_0/kernel": (8, 8, 4, 32), "network/conv2d_0/bias": (32,),
        "network/conv2d_1/kernel": (4, 4, 32, 64), "network/conv2d_1/bias": (64,),
        "network/conv2d_2/kernel": (3, 3, 64, 64), "network/conv2d_2/bias": (64,),
        "network/dense_4/kernel": (7 * 7 * 64, 512), "network/dense_4/bias": (512,),
    }
    assert ex.apis["apply"].output_space.to_text() == "float32[B,512]"


def test_impala_resnet_layers_match_the_spec_and_are_fresh():
    spec = yaml.safe_load((SPECS / "nn_network_impala_resnet.yaml").read_text())
    assert spec["config"]["layers"] == impala_resnet_layers(channels=(4,), blocks=2, units=8)
    first = impala_resnet_layers()
    first[0]["filters"] = 1
    assert impala_resnet_layers()[0]["filters"] == 16
    assert [layer["type"] for layer in first].count("residual_block") == 6
    assert preset_layers("impala_resnet") == impala_resnet_layers()
    assert preset_layers("nature") == nature_dqn_layers()
    assert preset_layers(first) is first
    with pytest.raises(ValueError, match=r"layers must be a list of layer dicts or one of \['impala_resnet', "
                                         r"'nature'\]; got 'resnet'"):
        preset_layers("resnet")


@BACKENDS
def test_impala_resnet_has_about_a_million_parameters_on_atari_frames(backend):
    ex = GraphExecutor(NeuralNetwork(impala_resnet_layers()), {"inputs": "float32[B,84,84,4]"}, backend)
    weights = ex.get_weights()
    # 84 -> 42 -> 21 -> 11 rows and columns through the three stride-2 'same' poolings.
    assert weights["network/dense_13/kernel"].shape == (11 * 11 * 32, 256)
    assert weights["network/residual_block_2/conv_a/kernel"].shape == (3, 3, 16, 16)
    assert sum(int(np.prod(v.shape)) for v in weights.values()) == 1_089_232
    out = ex.execute("apply", np.random.default_rng(0).uniform(size=(2, 84, 84, 4)).astype(np.float32))
    assert out.shape == (2, 256) and (out >= 0).all()


@pytest.mark.parametrize("make, message", [
    (lambda: MaxPool2D(pool_size=0), "MaxPool2D: pool_size must be a positive int or a pair of positive ints; got 0"),
    (lambda: MaxPool2D(strides=(2, 2, 1)), "MaxPool2D: strides must be a positive int or a pair"),
    (lambda: MaxPool2D(padding="full"), "MaxPool2D: padding must be one of ('valid', 'same'); got 'full'"),
    (lambda: ResidualBlock(0), "ResidualBlock: filters must be a positive int; got 0"),
    (lambda: ResidualBlock(2, kernel_size=(3,)), "ResidualBlock: kernel_size must be a positive int or a pair"),
    (lambda: ResidualBlock(2, activation="linear"), "ResidualBlock: activation must be one of ('relu', "),
    (lambda: ResidualBlock(2, activation=None), "ResidualBlock: activation must be one of"),
    (lambda: ResidualBlock(2, kernel_initializer="bogus"), "ResidualBlock: kernel_initializer must be"),
    (lambda: ResidualBlock(2, bias_initializer="bogus"), "ResidualBlock: bias_initializer must be"),
    (lambda: NeuralNetwork([{"type": "residual_block"}]), "NeuralNetwork: layers[0] (residual_block): missing key "
                                                          "'filters'"),
    (lambda: NeuralNetwork([{"type": "max_pool2d", "size": 2}]), "NeuralNetwork: layers[0] (max_pool2d): unknown "
                                                                 "key 'size'"),
])
def test_pooling_and_residual_arguments_are_checked(make, message):
    with pytest.raises(ValueError) as info:
        make()
    assert message in str(info.value)


@BACKENDS
def test_residual_block_refuses_a_channel_count_other_than_its_filters(backend):
    with pytest.raises(SpaceMismatchError) as info:
        GraphExecutor(ResidualBlock(4, scope="block"), {"inputs": "float32[B,5,5,3]"}, backend)
    assert "block" in str(info.value) and "4 channels" in str(info.value) and "float32[B,5,5,3]" in str(info.value)


@BACKENDS
def test_dueling_q_values_average_to_the_state_value(backend):
    ex = GraphExecutor(DuelingHead(4), {"inputs": "float32[B,6]"}, backend)
    x = np.random.default_rng(0).normal(size=(5, 6)).astype(np.float32)
    q = ex.execute("apply", x)
    value, advantages = ex.execute("value_and_advantages", x)
    np.testing.assert_allclose(q.mean(axis=-1), value, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(q - q.mean(axis=-1, keepdims=True),
                               advantages - advantages.mean(axis=-1, keepdims=True), rtol=1e-5, atol=1e-5)


def test_dueling_head_rejects_bad_num_actions():
    with pytest.raises(ValueError, match=r"DuelingHead: num_actions must be a positive int; got 0"):
        DuelingHead(0)


@BACKENDS
def test_lstm_on_an_empty_sequence_returns_the_initial_state(backend):
    ex = GraphExecutor(LSTM(3), {"inputs": "float32[B,T,2]", "initial_state": "[B](float32[3], float32[3])"},
                       backend, api_methods=["apply"])
    h0, c0 = np.full((2, 3), 0.5, np.float32), np.full((2, 3), -0.25, np.float32)
    outputs, (h, c) = ex.execute("apply", np.zeros((2, 0, 2), np.float32), (h0, c0))
    assert outputs.shape == (2, 0, 3)
    np.testing.assert_array_equal(h, h0)
    np.testing.assert_array_equal(c, c0)


@BACKENDS
def test_lstm_long_sequence_matches_the_oracle(backend):
    ex = GraphExecutor(LSTM(4, bias_initializer="normal(0.5)"),
                       {"inputs": "float32[B,T,3]", "initial_state": "[B](float32[4], float32[4])"}, backend,
                       api_methods=["apply"])
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 20, 3)).astype(np.float32)
    state = tuple(rng.normal(size=(3, 4)).astype(np.float32) for _ in range(2))
    outputs, final = ex.execute("apply", x, state)
    expected, expected_final = oracles.lstm_apply({"inputs": x, "initial_state": state},
                                                  _relative(ex.get_weights(), "lstm"), {"units": 4})
    np.testing.assert_allclose(outputs, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(final[1], expected_final[1], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(final[0], outputs[:, -1])


@pytest.mark.parametrize("kwargs,message", [
    ({"units": 0}, "LSTM: units must be a positive int; got 0"),
    ({"units": 2, "bias_initializer": "forget"}, "LSTM: bias_initializer must be"),
])
def test_lstm_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError) as info:
        LSTM(**kwargs)
    assert message in str(info.value)


def test_conv2d_oracle_by_hand():
    # 'same' 2x2 on 3x3 pads one zero row below and one zero column right (TF's SAME): window sums.
    image = np.arange(1.0, 10.0).reshape(1, 3, 3, 1)
    weights = {"kernel": np.ones((2, 2, 1, 1)), "bias": np.array([0.5])}
    out = oracles.conv2d_apply({"inputs": image}, weights, {"padding": "same"})
    np.testing.assert_allclose(out[0, :, :, 0], np.array([[12, 16, 9], [24, 28, 15], [15, 17, 9]]) + 0.5)
    out = oracles.conv2d_apply({"inputs": image}, weights, {"strides": 2, "use_bias": False})
    np.testing.assert_allclose(out[0, :, :, 0], [[12]])


def test_lstm_oracle_by_hand():
    # z = 0: i = f = o = 1/2 and g = 0, so c = c0 / 2 and h = tanh(c) / 2.
    weights = {"kernel": np.zeros((2, 4)), "bias": np.zeros(4)}
    state = (np.zeros((1, 1)), np.full((1, 1), 2.0))
    outputs, (h, c) = oracles.lstm_apply({"inputs": np.zeros((1, 1, 1)), "initial_state": state}, weights,
                                         {"units": 1})
    np.testing.assert_allclose(c, [[1.0]])
    np.testing.assert_allclose(h, [[0.5 * np.tanh(1.0)]])
    np.testing.assert_allclose(outputs, [[[0.5 * np.tanh(1.0)]]])


def test_dueling_oracle_by_hand():
    weights = {"value/kernel": np.array([[1.0]]), "value/bias": np.array([1.0]),
               "advantage/kernel": np.array([[1.0, 2.0, 6.0]]), "advantage/bias": np.zeros(3)}
    # V = 2 and A = [1, 2, 6] (mean 3) for x = 1: Q = [0, 1, 5].
    np.testing.assert_allclose(oracles.dueling_q_values({"inputs": np.array([[1.0]])}, weights, {}), [[0, 1, 5]])
