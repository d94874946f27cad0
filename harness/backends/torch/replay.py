"""Replayed API methods on PyTorch: a method's ops recorded on its first calls, then run as one flat function.

An eager call chain (`harness.graph.chain`) reaches each PyTorch op through a graph function and a method
of the op namespace (`TorchOps`), which look at their arguments on every call. On a small network acting
on a few observations that Python is a large part of a call: inside a 1-env CartPole worker the eager act
cost about 25 us a step more than its own 12 ops written in one function. On TF every method is a
``tf.function`` graph; `ReplayedApi` is the PyTorch counterpart that needs no compiler.

How it works: the first two calls of a method with given input shapes and dtypes run the chain eagerly
under a `torch.overrides.TorchFunctionMode` that notes every PyTorch function called, its arguments and its
result (`record`). If the two recordings are the same program, `Recording.compile` writes it out as Python
source, one line per op (``t3 = _f2(t1, _k0, dim=-1)``), and later calls with those shapes run that.

What a replay keeps and what it freezes (as ``tf.function`` does on TF):

- Variables are read live: the replay holds the variable tensors themselves, so in-place changes made
  elsewhere (optimizer steps, `set_weights`) are seen by the next call. A write the method makes is made
  again on every replay, as eagerly.
- Random draws name the executor's generator: a replayed method draws exactly what the eager one draws.
- Python values computed in a graph function are frozen: sizes read from tensors (one replay per input
  shapes), config constants, and anything a graph function reads from its component in Python. Graph
  functions must compute from their inputs, variables and config only, which they must on TF already.

A recording is refused, and the method runs its eager chain from then on (`ReplayedApi.refused` says why),
when a graph function reads a value out of a tensor (``.item()``, ``tolist``, a truth value, a data
pointer: anything but its shape, dtype or device), reads the shape of a tensor whose shape depends on
values (``nonzero``, a boolean mask), uses a tensor made outside the PyTorch functions a recording sees
(a different object on each call), or when the two recordings differ (state kept between calls went into
them). A refused recording is still the call itself: its outputs and draws are the call's. Work done outside
PyTorch's functions is not replayed: a graph function must not rely on Python side effects or on a
``torch.distributed`` collective (no method is replayed while ``torch.distributed`` is initialized; the
gradient methods that all-reduce are never replayed).
"""

from __future__ import annotations

import math
import threading
from typing import Any, Callable

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

#: Distinct input shapes replayed per method; calls with further shapes run the eager chain.
MAX_REPLAYS = 16

#: Tensor methods and attributes whose results depend only on a tensor's shape, dtype and device: frozen.
_METADATA = frozenset({
    "dim", "ndimension", "size", "numel", "nelement", "__len__", "is_floating_point", "is_complex", "is_signed",
    "element_size", "get_device", "shape", "ndim", "dtype", "device", "is_cpu", "is_cuda", "is_meta", "layout",
    "requires_grad", "is_sparse", "is_quantized", "is_nested", "itemsize",
})
#: PyTorch functions whose results' shapes depend on values: their shapes (and those of tensors computed
#: from them) must not be frozen.
_VALUE_SHAPED = frozenset({"nonzero", "argwhere", "masked_select", "unique", "unique_consecutive",
                           "nonzero_static", "bincount", "repeat_interleave"})

# literals written into the source as they are
_LITERALS = (bool, int, str, type(None))


def _name_of(func: Any) -> str:
    """The name a recorded function goes by: a property getter's is the property's."""
    if getattr(func, "__name__", "") == "__get__" and hasattr(func, "__self__"):
        return getattr(func.__self__, "__name__", "__get__")
    return getattr(func, "__name__", repr(func))


def _holdable(out: Any) -> bool:
    """Whether a call's result can be a replay's: a tensor, None, or a tuple or list of tensors."""
    if isinstance(out, (tuple, list)):
        return all(isinstance(v, torch.Tensor) for v in out)
    return out is None or isinstance(out, torch.Tensor)


def _tensors_in(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors_in(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors_in(v)]
    return []


_active = threading.local()   # .recorder: the recording in progress on this thread


def opaque(fn: Callable) -> Callable:
    """``fn`` (a host step: NumPy inside, tensors in and out) as one call of a recording, not the calls it
    makes: a replay calls ``fn`` itself, so it runs on the host as it does eagerly
    (`harness.graph.steps.host_step`), where the PyTorch calls inside it (reading its tensors' values) would
    refuse the recording."""
    def host_step(*args: Any) -> Any:
        recorder = getattr(_active, "recorder", None)
        return fn(*args) if recorder is None else recorder.opaque(fn, args)
    host_step.__wrapped__ = fn  # type: ignore[attr-defined]
    return host_step


class _Recorder(TorchFunctionMode):
    """Notes every PyTorch function called while it is active: ``(func, args, kwargs, result)``."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[Any, tuple, dict, Any]] = []
        self.refused: str | None = None
        self._value_shaped: dict[int, torch.Tensor] = {}   # by id, held so no id is reused while recording
        self._paused = False

    def __enter__(self) -> "_Recorder":
        super().__enter__()
        _active.recorder = self
        return self

    def __exit__(self, *exc: Any) -> None:
        _active.recorder = None
        super().__exit__(*exc)

    def opaque(self, fn: Callable, args: tuple) -> Any:
        """Runs ``fn`` unrecorded inside, noting it as one call (see `opaque`)."""
        self._paused = True
        try:
            out = fn(*args)
        finally:
            self._paused = False
        if self.refused is None:
            if out is not None and _holdable(out):
                self.calls.append((fn, args, {}, out))
            else:
                self.refused = f"host step {getattr(fn, '__name__', fn)} returns {type(out).__name__}"
        return out

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.refused is not None or self._paused:
            return out
        name = _name_of(func)
        ins = _tensors_in(args) + _tensors_in(kwargs)
        outs = _tensors_in(out)
        if not outs and out is not None and ins:   # a Python value read out of a tensor
            if name not in _METADATA:
                self.refused = f"a graph function reads a value out of a tensor ({name})"
            elif any(id(t) in self._value_shaped for t in ins):
                self.refused = f"a graph function reads the shape of a tensor whose shape depends on values ({name})"
            return out
        if not outs and out is not None:
            return out   # a value of constants only (a device, a dtype's limits): frozen
        if name in _VALUE_SHAPED or (name == "__getitem__" and any(t.dtype == torch.bool for t in ins[1:])) \
                or any(id(t) in self._value_shaped for t in ins):
            self._value_shaped.update((id(t), t) for t in outs)
        if not _holdable(out):
            self.refused = f"{name} returns {type(out).__name__}, which a replay cannot hold"
            return out
        self.calls.append((func, args, kwargs, out))
        return out


class Recording:
    """One recorded run of a chain, as a program: no tensor of the run is held but the constants (variables).

    ``steps``: one ``(func, args, kwargs, outputs)`` per call, the arguments with every tensor replaced by a
    reference, ``("in", i)`` (the i-th input), ``("t", k)`` (the k-th tensor a call returned) or ``("c", k)``
    (the k-th other tensor: a variable, held in ``constants``), containers by ``("tuple" | "list" | "dict",
    items)`` and other values by ``("v", value)``; ``outputs`` the references the call's results get (each
    result a new one, so a later read of a tensor an in-place op returned reads its result). ``outputs`` of
    the run the same way.
    """

    def __init__(self, calls: list, inputs: tuple, outputs: Any, refused: str | None) -> None:
        self.refused = refused
        self.arity = len(inputs)
        self.steps: tuple = ()
        self.outputs: Any = None
        self.constants: list[torch.Tensor] = []
        if refused is None:
            try:
                self._program(calls, inputs, outputs)
            except _Unreplayable as exc:
                self.refused = str(exc)

    def _program(self, calls: list, inputs: tuple, outputs: Any) -> None:
        refs: dict[int, tuple] = {id(t): ("in", i) for i, t in enumerate(inputs)}
        made = 0

        def ref(value: Any) -> Any:
            if isinstance(value, torch.Tensor):
                found = refs.get(id(value))
                if found is None:
                    found = refs[id(value)] = ("c", len(self.constants))
                    self.constants.append(value)
                return found
            if type(value) in (tuple, list):
                return (type(value).__name__, tuple(ref(v) for v in value))
            if type(value) is dict:
                if not all(type(k) in _LITERALS for k in value):
                    raise _Unreplayable(f"a dict argument with keys of types {sorted({type(k).__name__ for k in value})}")
                return ("dict", tuple((k, ref(v)) for k, v in value.items()))
            if _tensors_in(value):   # inside a tuple, list or dict of another type (a named tuple)
                raise _Unreplayable(f"tensors inside a {type(value).__name__} argument")
            return ("v", value)

        steps = []
        for func, args, kwargs, out in calls:
            step_args, step_kwargs = ref(args), ref(kwargs)
            names = []
            for t in ([out] if isinstance(out, torch.Tensor) else list(out) if out is not None else []):
                refs[id(t)] = ("t", made)
                names.append(made)
                made += 1
            kind = "one" if isinstance(out, torch.Tensor) else "none" if out is None else "many"
            steps.append((func, step_args, step_kwargs, kind, tuple(names)))
        self.steps = tuple(steps)
        self.outputs = ref(outputs)

    def same_as(self, other: "Recording") -> bool:
        """Whether ``other`` recorded the same program: the same functions on the same arguments, the same
        constant tensors (the same objects) and the same frozen Python values."""
        return (len(self.constants) == len(other.constants)
                and all(a is b for a, b in zip(self.constants, other.constants))
                and _same((self.steps, self.outputs), (other.steps, other.outputs)))

    def compile(self, name: str) -> tuple[Callable, str]:
        """The replay: a function of the inputs running the recorded calls in order, and its source."""
        env: dict[str, Any] = {}

        def expr(r: tuple) -> str:
            kind, value = r
            if kind == "in":
                return f"a{value}"
            if kind == "t":
                return f"t{value}"
            if kind == "tuple":
                return "(" + "".join(f"{expr(v)}, " for v in value) + ")"
            if kind == "list":
                return "[" + ", ".join(expr(v) for v in value) + "]"
            if kind == "dict":
                return "{" + ", ".join(f"{k!r}: {expr(v)}" for k, v in value) + "}"
            if kind == "v" and (type(value) in _LITERALS or (type(value) is float and math.isfinite(value))):
                return repr(value)
            const = f"_k{len(env)}"
            env[const] = self.constants[value] if kind == "c" else value
            return const

        lines = [f"def replay({', '.join(f'a{i}' for i in range(self.arity))}):  # {name}"]
        for i, (func, args, kwargs, kind, names) in enumerate(self.steps):
            env[f"_f{i}"] = func
            call = (f"_f{i}({''.join(f'{expr(a)}, ' for a in args[1])}"
                    f"{''.join(f'{k}={expr(v)}, ' for k, v in kwargs[1])})")
            target = ("" if kind == "none" else f"t{names[0]} = " if kind == "one"
                      else "".join(f"t{k}, " for k in names) + "= ")
            lines.append(f"    {target}{call}  # {_name_of(func)}")
        lines.append(f"    return {expr(self.outputs)}")
        source = "\n".join(lines) + "\n"
        exec(compile(source, f"<spacegraph replay {name}>", "exec"), env)  # noqa: S102 - our own generated code
        replay = env["replay"]
        replay.__name__ = replay.__qualname__ = name
        return replay, source


class _Unreplayable(Exception):
    """A run a replay cannot write out (the reason)."""


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b))
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # a value that compares in no plain way: only the same object is the same
        return False


def record(chain: Callable, args: tuple) -> tuple[Recording, Any]:
    """Runs ``chain`` on ``args`` eagerly, noting its PyTorch calls; ``(recording, outputs)``.

    The run is the call: its outputs, draws and writes are those of ``chain(*args)``.
    """
    recorder = _Recorder()
    with recorder:
        out = chain(*args)
    refused = recorder.refused
    if refused is None and torch.distributed.is_available() and torch.distributed.is_initialized():
        # A collective (all_reduce, broadcast) is no PyTorch function a recording sees: a replay would skip it.
        refused = "torch.distributed is initialized in this process, and its collectives are not recorded"
    return Recording(recorder.calls, args, out, refused), out


class ReplayedApi:
    """Runs an API method's chain as replays of its recorded ops, one per input shapes and dtypes.

    Args:
        name: the API method's name (the replay function's name).
        chain: the call chain recorded: positional tensor arguments, every step on the backend.
        fallback: the chain run where no replay is kept (the method's eager chain, which may run steps
            on the host).
    """

    def __init__(self, name: str, chain: Callable, fallback: Callable) -> None:
        self.name, self.chain, self.fallback = name, chain, fallback
        #: the replay of each input shapes and dtypes kept, keyed ``(shape0, dtype0, shape1, dtype1, ...)``
        self.replays: dict[tuple, Callable] = {}
        self.sources: dict[tuple, str] = {}
        #: why the method runs its eager chain (None while it may still be replayed)
        self.refused: str | None = None
        self._first: dict[tuple, Recording] = {}
        self._lock = threading.Lock()
        #: what to call: the chain's positional arguments written out, so a replayed call is one dictionary
        #: lookup and the replay (a generic ``*args`` call and a key comprehension cost about a microsecond)
        self.dispatch = self._dispatcher(chain.__code__.co_argcount)

    def _dispatcher(self, arity: int) -> Callable:
        params = ", ".join(f"a{i}" for i in range(arity))
        key = "(" + "".join(f"a{i}.shape, a{i}.dtype, " for i in range(arity)) + ")"
        source = (f"def dispatch({params}):\n"
                  f"    replay = get({key})\n"
                  f"    if replay is not None:\n"
                  f"        return replay({params})\n"
                  f"    return record({key}, ({''.join(f'a{i}, ' for i in range(arity))}))\n")
        env: dict[str, Any] = {"get": self.replays.get, "record": self._record}
        exec(compile(source, f"<spacegraph replay dispatch {self.name}>", "exec"), env)  # noqa: S102 - ours
        dispatch = env["dispatch"]
        dispatch.__name__ = dispatch.__qualname__ = self.name
        dispatch.replayed = self  # type: ignore[attr-defined]
        return dispatch

    def _record(self, key: tuple, args: tuple) -> Any:
        if self.refused is not None or len(self.replays) >= MAX_REPLAYS:
            return self.fallback(*args)
        with self._lock:
            replay = self.replays.get(key)
            if replay is not None:  # another thread compiled it while this one waited
                return replay(*args)
            if self.refused is not None:
                return self.fallback(*args)
            recording, out = record(self.chain, args)
            if recording.refused is not None:
                self.refused, self._first = recording.refused, {}
                return out
            first = self._first.pop(key, None)
            if first is None:
                if len(self._first) >= MAX_REPLAYS:   # shapes called once so far: the oldest goes
                    del self._first[next(iter(self._first))]
                self._first[key] = recording
            elif not first.same_as(recording):
                self.refused, self._first = ("two calls with the same input shapes recorded different programs: "
                                             "a value read out of a tensor or state kept between calls went into "
                                             "them"), {}
            else:
                self.replays[key], self.sources[key] = recording.compile(self.name)
            return out
