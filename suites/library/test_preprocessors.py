"""Unit tests of the preprocessors that the spec harness cannot express."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from harness.graph.errors import ExecutionError
import yaml

from harness.execution.executor import GraphExecutor
from harness.graph.errors import SpacegraphError
from harness.testing.plugin import selected_backends
from reference_agents.components.preprocessors import (
    Clip, Divide, FrameStack, GrayScale, ImageCrop, ImageResize, Normalize, PreprocessorStack, atari_preprocessing,
)
from reference_agents.components.preprocessors.resize import bilinear_matrix, nearest_indices
from reference_agents.oracles import preprocessors as oracles

SPECS = pathlib.Path(__file__).parents[2] / "specs" / "components"
BACKENDS = pytest.mark.parametrize("backend", selected_backends())


# ---- the resize semantics are TensorFlow's and PyTorch's -----------------------------------------------

SIZES = [(210, 160, 84, 84), (5, 7, 3, 11), (8, 8, 16, 4), (1, 4, 3, 1)]


@pytest.mark.parametrize("h_in,w_in,h_out,w_out", SIZES)
def test_bilinear_oracle_matches_tf_image_resize_and_torch_interpolate(h_in, w_in, h_out, w_out):
    tf = pytest.importorskip("tensorflow")
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).uniform(0, 255, (2, h_in, w_in, 3)).astype(np.float32)
    ours = oracles.resize(x, w_out, h_out, "bilinear")
    by_tf = tf.image.resize(x, (h_out, w_out), method="bilinear", antialias=False).numpy()
    by_torch = torch.nn.functional.interpolate(torch.from_numpy(x).permute(0, 3, 1, 2), size=(h_out, w_out),
                                               mode="bilinear", align_corners=False).permute(0, 2, 3, 1).numpy()
    # the frameworks compute source positions and weights in float32 (ours: float64), ~1.7e-3 off at
    # 210 -> 84 on values up to 255 (7e-6 of the range); a wrong sampling rule is off by tens
    np.testing.assert_allclose(ours, by_tf, atol=5e-3, rtol=0)
    np.testing.assert_allclose(ours, by_torch, atol=5e-3, rtol=0)


@pytest.mark.parametrize("h_in,w_in,h_out,w_out", SIZES)
def test_nearest_oracle_is_torch_nearest_exact(h_in, w_in, h_out, w_out):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(1).integers(0, 255, (2, h_in, w_in, 3)).astype(np.float32)
    by_torch = torch.nn.functional.interpolate(torch.from_numpy(x).permute(0, 3, 1, 2), size=(h_out, w_out),
                                               mode="nearest-exact").permute(0, 2, 3, 1).numpy()
    np.testing.assert_array_equal(oracles.resize(x, w_out, h_out, "nearest"), by_torch)


@pytest.mark.parametrize("size_in,size_out", [(210, 84), (3, 8), (7, 7), (1, 5)])
def test_interpolation_rows_are_convex_and_identity_at_equal_size(size_in, size_out):
    m = bilinear_matrix(size_in, size_out)
    assert m.shape == (size_out, size_in) and (m >= 0).all()
    np.testing.assert_allclose(m.sum(axis=1), 1.0)
    if size_in == size_out:
        np.testing.assert_array_equal(m, np.eye(size_in))
        np.testing.assert_array_equal(nearest_indices(size_in, size_out), np.arange(size_in))


@BACKENDS
def test_bilinear_resize_agrees_exactly_across_backends_on_atari_frames(backend):
    x = np.random.default_rng(2).integers(0, 256, (3, 210, 160, 3), dtype=np.uint8)
    outs = {b: GraphExecutor(ImageResize(84, 84), {"inputs": "uint8[B,210,160,3]"}, b).execute("preprocess", x)
            for b in ("tf", "torch")}
    np.testing.assert_allclose(outs["tf"], outs["torch"], rtol=1e-6, atol=1e-4)
    np.testing.assert_allclose(outs[backend], oracles.resize(x, 84, 84), rtol=1e-5, atol=1e-4)


# ---- frame stacking --------------------------------------------------------------------------------------


@BACKENDS
def test_frame_stack_repeats_the_first_frame_keeps_newest_last_and_resets(backend):
    ex = GraphExecutor(FrameStack(num_frames=3, batch_size=2), {"inputs": "float32[B,1,1,1]"}, backend)
    frame = lambda v: np.full((2, 1, 1, 1), v, np.float32)  # noqa: E731
    np.testing.assert_array_equal(ex.execute("preprocess", frame(1))[0, 0, 0], [1, 1, 1])
    ex.execute("preprocess", frame(2))
    np.testing.assert_array_equal(ex.execute("preprocess", frame(3))[1, 0, 0], [1, 2, 3])
    np.testing.assert_array_equal(ex.execute("preprocess", frame(4))[1, 0, 0], [2, 3, 4])
    ex.execute("reset")
    weights = ex.get_weights()
    assert weights["frame_stack/fresh"].all() and not weights["frame_stack/frames"].any()
    np.testing.assert_array_equal(ex.execute("preprocess", frame(5))[0, 0, 0], [5, 5, 5])


@BACKENDS
def test_frame_stack_state_survives_set_weights(backend):
    ex = GraphExecutor(FrameStack(num_frames=2, batch_size=1), {"inputs": "uint8[B,2,2,1]"}, backend)
    ex.execute("preprocess", np.full((1, 2, 2, 1), 7, np.uint8))
    saved = ex.get_weights()
    ex.execute("reset")
    ex.set_weights(saved)
    out = ex.execute("preprocess", np.full((1, 2, 2, 1), 9, np.uint8))
    assert out.dtype == np.uint8 and out[0, 0, 0].tolist() == [7, 9]


@BACKENDS
def test_frame_stack_rejects_another_batch_size_at_run_time(backend):
    # The batch rank's size is not part of a space, so the build cannot check it; the backend refuses,
    # and the executor says which method failed on which inputs.
    ex = GraphExecutor(FrameStack(num_frames=2, batch_size=2), {"inputs": "float32[B,2,2,1]"}, backend)
    with pytest.raises(ExecutionError, match=r"API method 'preprocess' failed on the (tf|torch) backend for "
                                             r"inputs \(inputs: \(3, 2, 2, 1\)\)"):
        ex.execute("preprocess", np.zeros((3, 2, 2, 1), np.float32))


# ---- stacks ----------------------------------------------------------------------------------------------


def test_atari_preprocessing_is_the_config_its_spec_builds():
    spec = yaml.safe_load((SPECS / "preprocessor_stack_atari.yaml").read_text())
    assert spec["config"]["preprocessors"] == atari_preprocessing(2)


@BACKENDS
def test_stack_accepts_components_and_repeated_types(backend):
    stack = PreprocessorStack([Divide(2.0, scope="half"), {"type": "divide", "divisor": 4}, {"type": "divide",
                                                                                                "divisor": 5}])
    assert sorted(stack.sub_components) == ["1_divide", "2_divide", "half"]
    assert not stack.stateful
    ex = GraphExecutor(stack, {"inputs": "float32[B,3]"}, backend)
    np.testing.assert_allclose(ex.execute("preprocess", np.full((2, 3), 40.0, np.float32)), 1.0)
    assert ex.execute("reset") is None  # no stateful member: a no-op


@BACKENDS
def test_stack_reset_resets_its_frame_stack(backend):
    stack = PreprocessorStack([{"type": "divide", "divisor": 10}, {"type": "frame_stack", "num_frames": 2,
                                                                   "batch_size": 1}])
    assert stack.stateful
    ex = GraphExecutor(stack, {"inputs": "float32[B,1,1,1]"}, backend)
    ex.execute("preprocess", np.full((1, 1, 1, 1), 10.0, np.float32))
    ex.execute("reset")
    np.testing.assert_allclose(ex.execute("preprocess", np.full((1, 1, 1, 1), 20.0, np.float32))[0, 0, 0], [2, 2])


@BACKENDS
def test_bad_member_space_names_the_member(backend):
    stack = PreprocessorStack(atari_preprocessing(1))
    with pytest.raises(SpacegraphError, match="0_grayscale"):
        GraphExecutor(stack, {"inputs": "uint8[B,210,160,1]"}, backend)


# ---- constructor arguments -----------------------------------------------------------------------------

BAD_CALLS = [
    (lambda: GrayScale(weights=()), "weights"),
    (lambda: GrayScale(weights=(0.5, -0.1, 0.6)), "non-negative"),
    (lambda: GrayScale(weights="rgb"), "weights"),
    (lambda: GrayScale(keep_rank=1), "keep_rank"),
    (lambda: ImageResize(width=0), "width"),
    (lambda: ImageResize(height=8.5), "height"),
    (lambda: ImageResize(method="bicubic"), "method"),
    (lambda: ImageCrop(x=-1, y=0, width=2, height=2), "x"),
    (lambda: ImageCrop(x=0, y=0, width=0, height=2), "width"),
    (lambda: Normalize(low=1, high=1), "high must be > low"),
    (lambda: Normalize(low=float("nan"), high=1), "low"),
    (lambda: Divide(divisor=0), "divisor"),
    (lambda: Divide(divisor=True), "divisor"),
    (lambda: Clip(min=1, max=0), "max must be >= min"),
    (lambda: FrameStack(num_frames=0), "num_frames"),
    (lambda: FrameStack(batch_size=None), "batch_size"),
    (lambda: PreprocessorStack([]), "preprocessors"),
    (lambda: PreprocessorStack([{"type": "blur"}]), "unknown preprocessor type 'blur'"),
    (lambda: PreprocessorStack([{"type": "divide", "factor": 2}]), r"preprocessors\[0\]"),
    (lambda: PreprocessorStack([{"width": 2}]), "'type' key"),
    (lambda: atari_preprocessing(0), "batch_size"),
]


@pytest.mark.parametrize("call,message", BAD_CALLS)
def test_bad_constructor_arguments_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@BACKENDS
def test_clip_of_integers_needs_integer_bounds(backend):
    with pytest.raises(SpacegraphError, match="clip"):
        GraphExecutor(Clip(0.5, 3), {"inputs": "int64[B,2]"}, backend)
    ex = GraphExecutor(Clip(-300, 300), {"inputs": "uint8[B,2]"}, backend)  # bounds past the dtype clip nothing
    np.testing.assert_array_equal(ex.execute("preprocess", np.array([[0, 255]], np.uint8)), [[0, 255]])
