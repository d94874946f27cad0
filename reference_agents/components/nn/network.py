"""`NeuralNetwork`: a stack of layers built from a list-of-layers config, and the Nature DQN config."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from harness.graph import Component, api
from reference_agents.components.common import Dense
from reference_agents.components.nn.conv2d import Conv2D
from reference_agents.components.nn.flatten import Flatten
from reference_agents.components.nn.pooling import MaxPool2D
from reference_agents.components.nn.residual import ResidualBlock

#: The layer classes a config may name, by their ``type``.
LAYER_TYPES: dict[str, type[Component]] = {"dense": Dense, "conv2d": Conv2D, "flatten": Flatten,
                                           "max_pool2d": MaxPool2D, "residual_block": ResidualBlock}


def nature_dqn_layers() -> list[dict[str, Any]]:
    """The layers of the Nature DQN network (Mnih et al., 2015) as a `NeuralNetwork` config.

    Three relu convolutions (32 8x8 stride 4, 64 4x4 stride 2, 64 3x3 stride 1,
    'valid'), a flatten and a 512-unit relu dense layer: on ``[B,84,84,4]``
    frames the convolutions give ``[B,7,7,64]`` and the network ``[B,512]``. The
    Q-value layer (or a `DuelingHead`) goes on top. A fresh list each call.
    """
    return [
        {"type": "conv2d", "filters": 32, "kernel_size": 8, "strides": 4, "activation": "relu"},
        {"type": "conv2d", "filters": 64, "kernel_size": 4, "strides": 2, "activation": "relu"},
        {"type": "conv2d", "filters": 64, "kernel_size": 3, "strides": 1, "activation": "relu"},
        {"type": "flatten"},
        {"type": "dense", "units": 512, "activation": "relu"},
    ]


def impala_resnet_layers(channels: tuple[int, ...] = (16, 32, 32), blocks: int = 2,
                         units: int = 256) -> list[dict[str, Any]]:
    """The layers of IMPALA's deep ResNet (Espeholt et al., 2018, Fig. 3) as a `NeuralNetwork` config.

    One section per entry of ``channels``: a linear 3x3 'same' convolution to that many
    channels, a 3x3 max pooling of stride 2 ('same'), then ``blocks`` `ResidualBlock` s;
    after the sections a flatten and a relu dense layer of ``units``. On ``[B,84,84,4]``
    frames the sections give ``[B,11,11,32]`` and the defaults hold 1,089,232 parameters
    (991,488 of them in the dense layer), "a ResNet of about 1M parameters". One departure
    from the paper's figure: no relu between the last block and the flatten (the dense
    layer's own relu follows). A fresh list each call.
    """
    layers: list[dict[str, Any]] = []
    for c in channels:
        layers.append({"type": "conv2d", "filters": int(c), "kernel_size": 3, "padding": "same"})
        layers.append({"type": "max_pool2d", "pool_size": 3, "strides": 2, "padding": "same"})
        layers.extend({"type": "residual_block", "filters": int(c)} for _ in range(blocks))
    return [*layers, {"type": "flatten"}, {"type": "dense", "units": int(units), "activation": "relu"}]


#: The layer stacks a config may name instead of listing layers (``layers: nature``).
PRESETS = {"nature": nature_dqn_layers, "impala_resnet": impala_resnet_layers}


def preset_layers(layers: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``layers`` itself, or the stack its preset name (a key of `PRESETS`) stands for."""
    if isinstance(layers, str):
        if layers not in PRESETS:
            raise ValueError(f"NeuralNetwork: layers must be a list of layer dicts or one of {sorted(PRESETS)}; "
                             f"got {layers!r}")
        return PRESETS[layers]()
    return layers


def _layer_class(where: str, path: str) -> type[Component]:
    """The class a layer's ``type`` names by its dotted path (``package.module.Class``), checked to be a
    `Component` with an ``apply`` API method; ValueError naming ``where`` and the key otherwise."""
    module_name, _, attr = path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # noqa: BLE001 - any import failure of the user's module is reported
        raise ValueError(f"{where}: key 'type': cannot import module {module_name!r} of {path!r} "
                         f"({type(error).__name__}: {error})") from None
    cls = getattr(module, attr, None)
    if cls is None:
        raise ValueError(f"{where}: key 'type': module {module_name!r} has no {attr!r} (from {path!r})")
    if not (isinstance(cls, type) and issubclass(cls, Component)):
        raise ValueError(f"{where}: key 'type': {path!r} must be a Component subclass; got "
                         f"{cls!r} ({type(cls).__name__})")
    if "apply" not in cls.api_specs():
        raise ValueError(f"{where}: key 'type': {path!r} has no 'apply' API method (a layer is applied as "
                         f"layer.apply(inputs)); its API methods: {sorted(cls.api_specs())}")
    return cls


def _layer(index: int, config: Any) -> Component:
    """The layer ``config`` describes; ValueError naming ``layers[index]`` and the key at fault."""
    where = f"NeuralNetwork: layers[{index}]"
    if not isinstance(config, dict):
        raise ValueError(f"{where} must be a dict with a 'type' key; got {config!r}")
    kind = config.get("type")
    if kind in LAYER_TYPES:
        cls = LAYER_TYPES[kind]
    elif isinstance(kind, str) and "." in kind.strip("."):
        cls = _layer_class(where, kind)
    else:
        raise ValueError(f"{where}: key 'type' must be one of {sorted(LAYER_TYPES)}; got {kind!r} (or the class "
                         f"path of a Component with an apply API method, e.g. my_package.MyLayer)")
    params = dict(inspect.signature(cls.__init__).parameters)
    params.pop("self")
    kwargs = {k: v for k, v in config.items() if k != "type"}
    unknown = sorted(set(kwargs) - set(params))
    if unknown:
        raise ValueError(f"{where} ({kind}): unknown key {unknown[0]!r}; {kind} takes {sorted(params)}")
    missing = [n for n, p in params.items() if p.default is inspect.Parameter.empty and n not in kwargs]
    if missing:
        raise ValueError(f"{where} ({kind}): missing key {missing[0]!r}")
    kwargs.setdefault("scope", f"{kind if kind in LAYER_TYPES else cls.__name__.lower()}_{index}")
    try:
        return cls(**kwargs)
    except ValueError as error:
        raise ValueError(f"{where} ({kind}): {error}") from None


class NeuralNetwork(Component):
    """A stack of layers applied in order, built from a list-of-layers config.

    Each layer is a dict with a ``type`` (``dense`` for
    `reference_agents.components.common.Dense`, ``conv2d`` for `Conv2D`,
    ``flatten`` for `Flatten`, ``max_pool2d`` for `MaxPool2D`, ``residual_block``
    for `ResidualBlock`, or the dotted path of any `Component` class with an ``apply``
    API method, e.g. ``my_components.SoftClip``) and that class's constructor arguments, e.g.
    ``{type: conv2d, filters: 32, kernel_size: 8, strides: 4, activation: relu}``.
    Layer ``i`` is named ``{type}_{i}`` (a class path: ``{classname lowercased}_{i}``)
    unless its dict gives a ``scope``, so the
    variables read ``conv2d_0/kernel``, ``dense_4/bias``, ... (relative to the
    network). `nature_dqn_layers` gives the Nature DQN stack, `impala_resnet_layers`
    IMPALA's deep ResNet.

    API: ``apply(inputs)`` runs the layers in order; the spaces it accepts and
    returns are those of the first and last layer (e.g. ``float32[B,84,84,4]`` to
    ``float32[B,512]`` for the Nature stack).

    Args:
        layers: the layer configs, at least one.
        scope: the component's name.

    Raises:
        ValueError: for an empty or non-list ``layers``, and naming ``layers[i]``
            and the key for an unknown ``type``, an unknown or missing key, an
            invalid value or a repeated scope.
    """

    def __init__(self, layers: list[dict[str, Any]], scope: str = "network") -> None:
        if not isinstance(layers, (list, tuple)) or not layers:
            raise ValueError(f"NeuralNetwork: layers must be a non-empty list of layer dicts; got {layers!r}")
        built = [_layer(i, config) for i, config in enumerate(layers)]
        scopes: dict[str, int] = {}
        for i, layer in enumerate(built):
            if layer.scope in scopes:
                raise ValueError(f"NeuralNetwork: layers[{i}]: key 'scope' repeats {layer.scope!r} "
                                 f"of layers[{scopes[layer.scope]}]")
            scopes[layer.scope] = i
        super().__init__(*built, scope=scope)
        self.layer_configs = [dict(config) for config in layers]
        self.layers = built

    @api
    def apply(self, inputs: Any) -> Any:
        """``inputs`` through every layer in order."""
        out = inputs
        for layer in self.layers:
            out = layer.apply(out)
        return out
