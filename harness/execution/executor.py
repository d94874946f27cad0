"""`GraphExecutor`: builds a root component on a backend and executes its API methods."""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Any, Callable, Sequence

import numpy as np
import optree

from harness.backends import get_backend
from harness.backends.base import TraceError
from harness.execution.strategies import DeviceStrategy
from harness.execution import serialization
from harness.execution.inputs import arg_converter, default_validate
from harness.graph.assembly import Assembly, assemble
from harness.graph.build import Builder, BuildProfile, BuiltApi, BuiltGraph
from harness.graph.chain import build_chain, host_steps_of, unused_args
from harness.graph.component import Component
from harness.graph.errors import BuildError, ExecutionError, SpacegraphError, UnknownApiError
from harness.graph.partial import attach
from harness.spaces import BoxSpace, ContainerSpace

_log = logging.getLogger(__name__)


#: The containers an API method's outputs can come in (optree's nodes among Python's own types).
_CONTAINERS = (tuple, list, dict, collections.deque)


class GraphExecutor:
    """Builds a root component for one backend and executes its API methods on NumPy values.

    Args:
        root: the root component.
        input_spaces: a space (or space text) for every argument of the root API
            methods, keyed by argument name.
        backend: ``"tf"`` or ``"torch"``.
        seed: seeds initial weights (identical across backends) and random ops.
        device_map: ``{component scope path: device}`` placing components' variables
            and ops; overrides the components' own ``device``.
        api_methods: build only these root API methods (default: all).
        strategy: a `DeviceStrategy` that may expand the graph before assembly.
        build: build at once (else call `build()`).
        compile: when each API method is compiled for the backend (``tf.function`` traced; PyTorch
            wraps it in a grad mode): ``"build"`` (default) compiles all of them in `build`;
            ``"first_call"`` compiles one the first time it is executed (or `api_function` asks for
            it), so methods never called cost nothing. Output spaces come from the build's eager
            sample runs either way; a compile error then surfaces at that first call, as the same
            `BuildError`. The compile time counts into the profile's ``op_creation`` when it happens.
        validate: check every input value against its space before it is fed (`InputValidationError`,
            the same text on both backends, naming root component, API method, argument/key path, the
            offending value and index and the space): dtype kind (no cast of integer or boolean values to
            float, of float or boolean to integer), shape, NaN, FloatBox bounds and IntBox ranges (discrete
            actions). ``None`` (default) takes the process default, `default_validate` (environment variable
            ``SPACEGRAPH_VALIDATE``: on in the test suites and the `spacegraph` command, off in benchmarks).
            Off, inputs are only cast (same dtype kind, or int/bool to float) and shape-checked.
        trace: API methods to run as a recorded graph per input shapes rather than step by step
            (`Backend.trace_api`). On PyTorch, a TorchScript trace per input shapes
            (`harness.backends.torch.tracing`): the same outputs and random draws as the eager chain, at a
            fraction of the per-call cost of a small network; for methods that record no gradients and take
            no container arguments, checked at build (inside the undone sample runs) to record the same graph
            for two inputs of the same shapes and to change no variable or argument in place (`BuildError`
            naming the method otherwise). On TF every method is a ``tf.function`` graph already, and this
            changes nothing.
        replay: run every other method that records no gradients and takes no container arguments as
            replays of the ops it records on its first two calls per input shapes (`Backend.replay_api`; on
            PyTorch `harness.backends.torch.replay.ReplayedApi`, on TF nothing changes): the same outputs and
            draws as the eager chain without its per-call Python. Python values a graph function computes are
            frozen per input shapes, as in a ``tf.function``; a method whose recordings read values out of
            tensors, or differ, runs its eager chain (`replayed` says which and why). False: every method
            runs its eager chain.
    """

    COMPILE_MODES = ("build", "first_call")

    def __init__(self, root: Component, input_spaces: dict[str, Any], backend: str = "tf", seed: int = 0,
                 device_map: dict[str, str] | None = None, api_methods: list[str] | None = None,
                 strategy: DeviceStrategy | None = None, build: bool = True, compile: str = "build",
                 validate: bool | None = None, trace: Sequence[str] = (), replay: bool = True) -> None:
        if not isinstance(root, Component):
            raise TypeError(f"GraphExecutor: root must be a Component; got {type(root).__name__}")
        if isinstance(trace, str) or not all(isinstance(m, str) for m in trace):
            raise TypeError(f"GraphExecutor: trace must be a list of API method names; got {trace!r}")
        self.trace = tuple(trace)
        if not isinstance(replay, bool):
            raise TypeError(f"GraphExecutor: replay must be a bool; got {replay!r}")
        self.replay = replay
        if compile not in self.COMPILE_MODES:
            raise ValueError(f"GraphExecutor: compile must be one of {self.COMPILE_MODES}; got {compile!r}")
        self.compile_mode = compile
        self.validate = default_validate() if validate is None else bool(validate)
        self._compile_lock = threading.Lock()
        self.strategy = strategy or DeviceStrategy()
        self.root = root
        self.input_spaces = dict(input_spaces)
        self.backend_name = backend
        self.seed = seed
        self.device_map = dict(device_map or {})
        self.api_methods = api_methods
        self.backend = get_backend(backend, seed)
        self.graph: BuiltGraph | None = None
        self._calls: dict[str, Callable] = {}
        if build:
            self.build()

    # ---- build -----------------------------------------------------------------------
    def build(self) -> BuildProfile:
        """Runs assembly and the build; returns the profile of where the time went.

        An exception from either phase is raised as it is, with the graph as far as it got on it
        (``exc.partial_build``, a `harness.graph.partial.PartialBuild`).
        """
        if self.graph is not None:
            raise RuntimeError(f"{self.root.global_scope}: the executor is built already")
        self.strategy.attach(self)
        root = self.strategy.expand(self.root)
        self._apply_device_map(root)
        profile = BuildProfile()
        start = time.perf_counter()
        root_specs = root.api_specs()
        fixed = {}
        for name in self.api_methods or list(root_specs):
            spec = root_specs.get(name)
            if spec is not None:
                fixed.update({a: d for a, d in spec.defaults.items() if a not in self.input_spaces})
        assembly = assemble(root, self.api_methods, fixed)
        profile.assembly = time.perf_counter() - start

        start = time.perf_counter()
        builder = Builder(assembly, self.backend)
        builder.profile = profile
        try:
            builder.assign_root_spaces(self.input_spaces)
            components = builder.run()
            # a traced method runs every step on the backend: a host step's Python scalars would be frozen
            traced = self._traced_chains(root, assembly, builder)  # before the sample runs are undone: it runs them
            builder.restore_initial_values()
            apis: dict[str, BuiltApi] = {}
            self._gradients: dict[str, bool] = {}
            self._replay_chains: dict[str, Callable] = {}
            on_host: set[int] = set()
            for name, trace in assembly.traces.items():
                chain, source = traced.get(name) or build_chain(
                    *self.strategy.schedule(trace, builder.step_fns, self.backend.name), builder.host_fns)
                hosted = host_steps_of(trace, None if name in traced else builder.host_fns)
                on_host |= hosted
                if self._replays(name, trace):
                    # a replay records a host step as one call (its NumPy inside would refuse the recording)
                    self._replay_chains[name] = build_chain(trace, builder.step_fns, {
                        i: self.backend.replay_host(builder.host_fns[i]) for i in hosted})[0] if hosted else chain
                arg_spaces = {a: r.space for a, r in trace.args.items()}
                out_space = optree.tree_map(lambda r: r.space, trace.outputs) if trace.outputs is not None else None
                self._gradients[name] = trace.records
                apis[name] = BuiltApi(name, arg_spaces, trace.constants, out_space, chain, None, source)
                if self.compile_mode == "build":
                    apis[name].fn = self._compile(root, apis[name], profile)
                else:
                    apis[name].fn = self._first_call(apis[name])
            profile.host_steps = len(on_host)
        except Exception as exc:  # the build as far as it got rides on the error (harness/graph/partial.py)
            attach(exc, builder.partial())
            raise
        profile.build_total = time.perf_counter() - start
        profile.variables = len(root.all_variables())
        self.root = root
        self._assembly = assembly
        self.graph = BuiltGraph(root, apis, components, profile)
        self._calls = {name: self._strategy_call(api) for name, api in apis.items()}
        return profile

    def _strategy_call(self, api: BuiltApi) -> Callable:
        """The call of ``api`` as the strategy runs it (`DeviceStrategy.wrap_call`; most return it as it is)."""
        return self.strategy.wrap_call(self, api.name, self._make_call(api))

    def _replays(self, name: str, trace: Any) -> bool:
        """Whether method ``name`` runs as replays (``replay``): not traced, recording no gradients, taking no
        container arguments, on a backend that replays."""
        return (self.replay and self.backend.replays and name not in self.trace and not trace.records
                and not any(isinstance(rec.space, ContainerSpace) for rec in trace.args.values()))

    def replayed(self, method: str) -> Any:
        """The replays of ``method`` (`harness.backends.torch.replay.ReplayedApi`: its ``replays``, ``sources``
        and ``refused``), compiling it if it is still pending; None for a method that does not replay."""
        if method not in self._built().apis:
            raise UnknownApiError(f"no built API method {method!r}; registered: {sorted(self._built().apis)}")
        fn = self._compiled(method)
        return getattr(getattr(fn, "__wrapped__", fn), "replayed", None)

    def _traced_chains(self, root: Component, assembly: Assembly, builder: Builder) -> dict[str, tuple[Callable, str]]:
        """The call chains (and sources) of the methods ``trace`` names, every step on the backend, each checked
        to run as a traced graph (`Backend.check_traceable`, which runs them).

        Raises:
            BuildError: naming the method when ``trace`` names one that is not built, records gradients, takes
                a container argument, or cannot be traced.
        """
        where = f"{type(root).__name__} {root.global_scope!r}: trace"
        chains = {}
        for name in self.trace:
            trace = assembly.traces.get(name)
            if trace is None:
                raise BuildError(f"{where}: no built API method {name!r}; built: {sorted(assembly.traces)}")
            if trace.records:
                raise BuildError(f"{where}: API method {name!r} records gradients; only methods that record none "
                                 f"(acting, evaluating) can run as a traced graph")
            for arg, rec in trace.args.items():
                if isinstance(rec.space, ContainerSpace):
                    raise BuildError(f"{where}: API method {name!r} takes a container argument {arg!r} "
                                     f"({rec.space!r}); a traced method takes tensors only")
            chain, source = build_chain(trace, builder.step_fns, None)
            try:
                self.backend.check_traceable(name, chain, {a: r.space for a, r in trace.args.items()},
                                             list(root.all_variables().values()), f"{type(root).__name__} "
                                             f"{root.global_scope!r}")
            except TraceError as exc:
                raise BuildError(str(exc)) from None
            except SpacegraphError:
                raise
            except Exception as exc:
                raise BuildError(f"{where}: API method {name!r} failed its trace check on backend "
                                 f"{self.backend_name!r}: {type(exc).__name__}: {exc}") from exc
            chains[name] = (chain, source)
        return chains

    def _compile(self, root: Component, api: BuiltApi, profile: BuildProfile) -> Callable:
        """The backend-compiled callable of ``api`` (its time added to ``profile.op_creation``)."""
        t0 = time.perf_counter()
        try:
            chain = api.chain
            if api.name in self.trace:
                chain = self.backend.trace_api(api.name, chain, api.arg_spaces, list(root.all_variables().values()),
                                               f"{type(root).__name__} {root.global_scope!r}")
            elif api.name in self._replay_chains:
                chain = self.backend.replay_api(api.name, self._replay_chains[api.name], chain)
            fn = self.backend.compile_api(api.name, chain, api.arg_spaces, self._gradients[api.name])
        except SpacegraphError:
            raise
        except Exception as exc:
            raise BuildError(
                f"{type(root).__name__} {root.global_scope!r}: API method {api.name!r} failed to compile on backend "
                f"{self.backend_name!r} (the eager sample runs passed): {type(exc).__name__}: {exc}"
            ) from exc
        profile.op_creation += time.perf_counter() - t0
        return fn

    def _first_call(self, api: BuiltApi) -> Callable:
        """A stand-in for ``api.fn`` that compiles it when first called (once, under a lock), puts the
        compiled callable in its place (``api.fn`` and the `execute` path) and calls it."""

        def compile_then_call(*feeds: Any) -> Any:
            return self._compiled(api.name)(*feeds)

        compile_then_call.pending = True  # type: ignore[attr-defined]
        return compile_then_call

    def _compiled(self, method: str) -> Callable:
        """The compiled callable of ``method``, compiling it now if it is still pending."""
        api = self._built().apis[method]
        if getattr(api.fn, "pending", False):
            with self._compile_lock:
                if getattr(api.fn, "pending", False):
                    api.fn = self._compile(self.graph.root, api, self.graph.profile)
                    self._calls[method] = self._strategy_call(api)
        return api.fn

    def _apply_device_map(self, root: Component) -> None:
        scopes = {c.global_scope: c for c in root.walk()}
        for path, device in self.device_map.items():
            if path not in scopes:
                raise ValueError(f"device_map: no component with scope path {path!r}; scopes are {sorted(scopes)}")
            self._check_device(device, f"device_map[{path!r}]")
            scopes[path].device = device
        for comp in root.walk():
            if comp.device is not None and comp.global_scope not in self.device_map:
                self._check_device(comp.device, f"component {type(comp).__name__} {comp.global_scope!r}")

    def _check_device(self, device: str, where: str) -> None:
        """ValueError naming ``where``, the device and the devices that exist, if ``device`` cannot be used."""
        try:
            self.backend.check_device(device)
        except ValueError as exc:
            strategy = f" (strategy {self.strategy.name!r})" if self.strategy.name != "local" else ""
            raise ValueError(f"{where}{strategy}: device {device!r} cannot be used: {exc}") from None

    def placement(self) -> dict[str, dict[str, Any]]:
        """Where each component of the built graph lives: ``{scope path: {"device": ..., "variables": [...]}}``.

        ``device`` is the component's effective device (its own, the nearest ancestor's, or None for
        the backend's default, the host); ``variables`` the devices its own variables are actually on,
        as the backend reports them (sorted, no repeats; empty for a component without variables).
        """
        out = {}
        for comp in self._built().root.walk():
            actual = sorted({str(getattr(v, "device", "")) for v in comp.variables.values()})
            out[comp.global_scope] = {"device": comp.effective_device(), "variables": actual}
        return out

    def _make_call(self, api: BuiltApi) -> Callable:
        where = f"{type(self.root).__name__} {self.root.global_scope!r}"
        converters = [arg_converter(where, api.name, a, s, self.backend.feed, self.validate)
                      for a, s in api.arg_spaces.items()]
        names = list(api.arg_spaces)
        fn, to_numpy, n = self.backend.execution_callable(api.fn), self.backend.to_numpy, len(names)

        def failed(args: tuple, exc: Exception) -> ExecutionError:  # a backend error on valid-looking inputs
            shapes = ", ".join(f"{a}: {np.shape(x) if not isinstance(x, (dict, tuple)) else type(x).__name__}"
                               for a, x in zip(names, args))
            return ExecutionError(
                f"{type(self.root).__name__} {self.root.global_scope!r}: API method {api.name!r} failed on "
                f"the {self.backend_name} backend for inputs ({shapes}): {type(exc).__name__}: "
                f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}")

        env: dict[str, Any] = {"n": n, "fn": fn, "to_numpy": to_numpy, "bind": self._bind, "method": api.name,
                               "names": names, "failed": failed, "BuildError": BuildError, "ndarray": np.ndarray,
                               "CONTAINERS": _CONTAINERS, "tree_map": optree.tree_map, "feed": self.backend.feed}
        unused = () if self.validate else unused_args(self._assembly.traces[api.name])
        lines, feeds = [], []
        for i, (arg, space) in enumerate(api.arg_spaces.items()):
            env[f"c{i}"] = converters[i]
            if arg in unused:
                # An argument no step reads is fed one value made once from its space, not converted on every
                # call: the value passed is not looked at (a constant exploration rate's act reads no time step;
                # its conversion and a fresh tensor were about 5 us of a PyTorch CartPole act). Validation
                # checks it.
                env[f"k{i}"] = converters[i](space.zeros())
                feeds.append(f"k{i}")
            elif not self.validate and isinstance(space, BoxSpace):
                # An array already of the space's dtype and shape is fed as it is, here, without calling the
                # converter (which casts, and raises naming the argument, for every other value).
                env[f"d{i}"], env[f"core{i}"], env[f"x{i}"] = np.dtype(space.dtype), tuple(space.shape), \
                    len(space.extra_ranks)
                lines += [f"    a = args[{i}]",
                          f"    if type(a) is ndarray and a.dtype == d{i} and a.ndim == x{i} + {len(space.shape)} "
                          f"and a.shape[x{i}:] == core{i}:",
                          f"        f{i} = feed(a)",
                          "    else:",
                          f"        f{i} = c{i}(a)"]
                feeds.append(f"f{i}")
            else:
                lines.append(f"    f{i} = c{i}(args[{i}])")
                feeds.append(f"f{i}")
        # One generated function per method (as the chain is): inside a CartPole worker every Python call on
        # the way from get_actions to the chain cost about a microsecond a step, so the converters are not
        # called through a comprehension and arrays that fit are fed inline.
        source = "\n".join([
            "def call(*args, **kwargs):",
            "    if kwargs or len(args) != n:",
            "        args = bind(method, names, args, kwargs)",
            *lines,
            "    try:",
            f"        out = fn({', '.join(feeds)})",
            "    except BuildError:  # a method compiled at its first call (compile='first_call') failed to compile",
            "        raise",
            "    except Exception as exc:",
            "        raise failed(args, exc) from exc",
            "    if out is None:",
            "        return None",
            "    if not isinstance(out, CONTAINERS):  # one tensor (acting, most methods): no tree walk",
            "        return to_numpy(out)",
            "    return tree_map(to_numpy, out)",
        ]) + "\n"
        exec(compile(source, f"<spacegraph call {api.name}>", "exec"), env)  # noqa: S102 - our own generated code
        return env["call"]

    @staticmethod
    def _bind(method: str, names: list[str], args: tuple, kwargs: dict) -> tuple:
        if len(args) > len(names):
            raise ExecutionError(f"{method} takes {len(names)} input(s) {names}; got {len(args)}")
        bound = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise ExecutionError(f"{method} has no input {k!r}; its inputs are {names}")
            bound[k] = v
        missing = [n for n in names if n not in bound]
        if missing:
            raise ExecutionError(f"{method} is missing input(s) {missing}")
        return tuple(bound[n] for n in names)

    # ---- execution ------------------------------------------------------------------------
    def _built(self) -> BuiltGraph:
        if self.graph is None:
            raise RuntimeError("the executor is not built yet; call build()")
        return self.graph

    def execute(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Runs one root API method on NumPy (or nested NumPy) inputs; returns NumPy outputs.

        Raises:
            UnknownApiError: listing the registered API methods.
            ExecutionError: when an input does not fit its space (naming method and argument).
        """
        try:
            call = self._calls[method]
        except KeyError:
            self._built()
            raise UnknownApiError(
                f"{type(self.root).__name__} has no built API method {method!r}; registered: {sorted(self._calls)}"
            ) from None
        return call(*args, **kwargs)

    def api_function(self, method: str) -> Callable:
        """The backend-level callable of one API method (backend tensors in and out), for benchmarks."""
        if method not in self._built().apis:
            raise UnknownApiError(f"no built API method {method!r}; registered: {sorted(self._built().apis)}")
        return self._compiled(method)

    @property
    def assembly(self) -> Assembly:
        """The assembly of the built graph: the traces of the root API methods, their calls and steps
        with the spaces the build gave them (read-only; raises RuntimeError before the build)."""
        self._built()
        return self._assembly

    @property
    def profile(self) -> BuildProfile:
        """The build's `BuildProfile`."""
        return self._built().profile

    @property
    def apis(self) -> dict[str, BuiltApi]:
        """The built root API methods with their input and output spaces."""
        return self._built().apis

    def api_table(self) -> str:
        """A readable table of the root API: method, inputs with spaces, output spaces."""
        rows = []
        for name, api in self.apis.items():
            ins = ", ".join(f"{a}: {s!r}" for a, s in api.arg_spaces.items()) or "-"
            rows.append(f"{name}({ins})\n    -> {api.output_space!r}")
        return "\n".join(rows)

    def close(self) -> None:
        """Ends what the strategy started (the replica processes of processes mode); idempotent, and done at
        interpreter exit anyway. The executor's methods that do not need them keep working."""
        self.strategy.shutdown()

    # ---- weights ------------------------------------------------------------------------------
    def variables(self) -> dict[str, Any]:
        """The backend variables keyed by scope path."""
        return self._built().root.all_variables()

    def get_weights(self) -> dict[str, np.ndarray]:
        """All variables as NumPy arrays keyed by scope path, in canonical layouts."""
        return {k: self.backend.variable_value(v) for k, v in self.variables().items()}

    def set_weights(self, weights: dict[str, Any], strict: bool = True) -> list[str]:
        """Loads NumPy weights keyed by scope path (e.g. from the other backend's `get_weights`).

        With ``strict`` (default) the keys must be exactly the graph's variables. Without it, keys the graph
        has no variable for are ignored, and variables without a key keep their values; both are logged
        (``logging`` warning of ``harness.execution.executor``).

        Returns:
            The ignored keys of ``weights`` (sorted; empty with ``strict``).

        Raises:
            ValueError: naming missing or unexpected keys (with ``strict``) and shape/dtype mismatches.
        """
        variables = self.variables()
        missing = sorted(set(variables) - set(weights))
        extra = sorted(set(weights) - set(variables))
        if strict and (missing or extra):
            raise ValueError(f"set_weights: keys differ from the graph's variables: missing {missing}, unexpected {extra}")
        if extra:
            _log.warning("set_weights(strict=False): ignored %d key(s) the graph has no variable for: %s",
                         len(extra), extra)
        if missing and not strict:
            _log.debug("set_weights(strict=False): %d variable(s) not in the weights keep their values: %s",
                         len(missing), missing)
        checked = {}
        for key, value in weights.items():
            if key not in variables:
                continue
            var = variables[key]
            current = self.backend.variable_value(var)
            arr = np.asarray(value)
            if arr.shape != current.shape:
                raise ValueError(f"set_weights: {key!r} has shape {arr.shape}, the variable has {current.shape}")
            if not np.can_cast(arr.dtype, current.dtype, "same_kind"):
                raise ValueError(f"set_weights: {key!r} has dtype {arr.dtype}, the variable has {current.dtype}")
            checked[key] = arr.astype(current.dtype)
        for key, arr in checked.items():
            self.backend.assign_variable(variables[key], arr)
        return extra

    def export_model(self, path: str) -> str:
        """Writes weights and metadata to ``path`` (an ``.npz``; written atomically)."""
        return serialization.export_model(self, path)

    def import_model(self, path: str) -> None:
        """Loads weights written by `export_model` (from either backend) after checking they fit."""
        serialization.import_model(self, path)
