"""A failed assembly or build carries the graph as far as it got (``exc.partial_build``, harness/graph/partial.py):
the right failing component for each kind of failure, the exception itself unchanged, no frame inspection."""

from __future__ import annotations

import pytest

from harness.backends import get_backend
from harness.execution.executor import GraphExecutor
from harness.graph import AssemblyError, BuildError, Component, PartialBuild, SpaceMismatchError, api, graph_fn
from harness.graph.assembly import assemble
from harness.graph.build import Builder
from harness.graph.visualize import GraphModel

X = "float32[B,3]"


class Leaf(Component):
    """A dense layer without bias; ``fail`` plants an error in its build or graph function."""

    def __init__(self, units: int, scope: str, fail: str | None = None) -> None:
        super().__init__(scope=scope)
        self.units, self.fail = units, fail

    def check_input_spaces(self, input_spaces):
        if self.fail == "spaces" and input_spaces["x"].shape[-1] != 7:
            raise self.space_mismatch("x", "float32[B,7]", input_spaces["x"], "the planted check wants 7 features")

    def create_variables(self, input_spaces):
        if self.fail == "variables":
            raise ValueError("planted failure in create_variables")
        self.get_variable("kernel", (input_spaces["x"].shape[-1], self.units), initializer="ones")

    @api
    def apply(self, x):
        return self._graph_fn_apply(x)

    @graph_fn
    def _graph_fn_apply(self, F, x):
        if self.fail == "graph_fn":
            raise ZeroDivisionError("planted failure in the graph function")
        return F.matmul(x, self.variables["kernel"])


class Root(Component):
    """root -> first -> second (``fail`` planted in second), and root -> head."""

    def __init__(self, fail: str | None = None) -> None:
        super().__init__(Leaf(4, "first"), Leaf(2, "second", fail=fail), Leaf(3, "head"), scope="root")

    @api
    def forward(self, x):
        return self.sub_components["second"].apply(self.sub_components["first"].apply(x))

    @api
    def features(self, x):
        return self.sub_components["head"].apply(x)


class Loop(Component):
    """``a`` takes its own output: never input-complete; ``b`` builds."""

    def __init__(self) -> None:
        super().__init__(Leaf(2, "a"), Leaf(2, "b"), scope="loop")

    @api
    def run(self, x):
        return self.sub_components["a"].apply(self.sub_components["a"].apply(self.sub_components["b"].apply(x)))


class Sloppy(Component):
    """Calls a sub-component's graph function directly: an assembly error."""

    def __init__(self) -> None:
        super().__init__(Leaf(2, "inner"), Leaf(2, "fine"), scope="sloppy")

    @api
    def apply(self, x):
        y = self.sub_components["fine"].apply(x)
        return self.sub_components["inner"]._graph_fn_apply(y)


class Typo(Component):
    """An API method body with a plain Python error (a missing sub-component)."""

    def __init__(self) -> None:
        super().__init__(Leaf(2, "inner"), scope="typo")

    @api
    def apply(self, x):
        return self.sub_components["inner"].apply(self.sub_components["iner"].apply(x))


def partial_problems(exc: BaseException, failed: str | None, stuck: tuple[str, ...] = (),
                     phase: str = "build") -> list[str]:
    """What the exception's ``partial_build`` gets wrong: missing, another failing component, other stuck ones."""
    partial = getattr(exc, "partial_build", None)
    if not isinstance(partial, PartialBuild):
        return [f"{type(exc).__name__} carries no partial_build"]
    problems = []
    got = partial.failed.global_scope if partial.failed is not None else None
    if got != failed:
        problems.append(f"the failing component is {got}, not {failed}")
    got_stuck = tuple(c.global_scope for c in partial.stuck)
    if got_stuck != stuck:
        problems.append(f"the stuck components are {got_stuck}, not {stuck}")
    if partial.phase != phase:
        problems.append(f"the phase is {partial.phase}, not {phase}")
    return problems


def test_a_failing_create_variables(backend):
    with pytest.raises(BuildError) as info:
        GraphExecutor(Root(fail="variables"), {"x": X}, backend=backend)
    exc = info.value
    assert type(exc) is BuildError and isinstance(exc.__cause__, ValueError)  # as before: wrapped, chained
    assert str(exc).startswith("Leaf 'root/second' failed to create its variables for input spaces")
    assert partial_problems(exc, "root/second") == []
    partial = exc.partial_build
    assert partial.task == "check_input_spaces/create_variables"
    assert partial.root.global_scope == "root" and set(partial.assembly.traces) == {"forward", "features"}
    assert "root/first" in partial.spaces and repr(partial.spaces["root/first"]["x"]) == X
    assert repr(partial.spaces["root/second"]["x"]) == "float32[B,4]"  # it got its spaces, then failed
    assert not hasattr(exc.__cause__, "partial_build")  # the user's error is left alone; its wrapper carries it


def test_a_failing_check_input_spaces(backend):
    with pytest.raises(SpaceMismatchError) as info:
        GraphExecutor(Root(fail="spaces"), {"x": X}, backend=backend)
    assert "space mismatch at root/second.apply(x): expected float32[B,7]" in str(info.value)
    assert partial_problems(info.value, "root/second") == []
    assert GraphModel.from_exception(info.value).components["root/second"].status == "failed"


def test_a_failing_graph_function_in_the_sample_runs(backend):
    with pytest.raises(BuildError) as info:
        GraphExecutor(Root(fail="graph_fn"), {"x": X}, backend=backend)
    assert "planted failure in the graph function" in str(info.value)
    assert partial_problems(info.value, "root/second") == []
    partial = info.value.partial_build
    assert partial.task == "graph function root.forward -> root/second.apply -> root/second._graph_fn_apply"
    assert partial.root.sub_component("second").variables  # built; its graph function is what failed
    model = GraphModel.from_exception(info.value)
    assert {p: c.status for p, c in model.components.items()} == {
        "root": "built", "root/first": "built", "root/second": "failed", "root/head": "built"}


def test_a_stuck_build_names_the_components_without_spaces(backend):
    with pytest.raises(BuildError, match="cannot go on") as info:
        GraphExecutor(Loop(), {"x": "float32[B,2]"}, backend=backend)
    assert partial_problems(info.value, None, stuck=("loop/a",)) == []
    model = GraphModel.from_exception(info.value)
    assert model.components["loop/a"].status == "failed" and model.components["loop/b"].status == "built"
    assert model.failed is None


def test_an_assembly_error_names_the_component_whose_graph_function_was_called(backend):
    with pytest.raises(AssemblyError, match="components talk to each other only through API methods") as info:
        GraphExecutor(Sloppy(), {"x": X}, backend=backend)
    assert partial_problems(info.value, "sloppy/inner", phase="assembly") == []
    partial = info.value.partial_build
    assert partial.task == "graph function sloppy/inner._graph_fn_apply"
    trace = partial.assembly.traces["apply"]  # what was recorded before the error
    assert [(c.component.global_scope, c.method) for c in trace.calls] == [("sloppy", "apply"),
                                                                          ("sloppy/fine", "apply")]
    assert [s.component.global_scope for s in trace.steps] == ["sloppy/fine"]
    assert partial.spaces == {}


def test_a_plain_python_error_in_an_api_method_keeps_its_type_and_gets_the_attribute():
    with pytest.raises(KeyError) as info:
        assemble(Typo())
    assert type(info.value) is KeyError and info.value.args == ("iner",)
    assert partial_problems(info.value, "typo", phase="assembly") == []
    assert info.value.partial_build.task == "API method typo.apply"


def test_an_error_after_the_components_were_built_marks_the_root(backend, monkeypatch):
    executor = GraphExecutor(Root(), {"x": X}, backend=backend, build=False)

    def refuse(*args, **kwargs):
        raise RuntimeError("planted compile failure")

    monkeypatch.setattr(executor.backend, "compile_api", refuse)
    with pytest.raises(BuildError, match="failed to compile") as info:
        executor.build()
    assert partial_problems(info.value, "root") == []
    assert info.value.partial_build.task is None


def test_a_builder_used_directly_attaches_it_too(backend):
    builder = Builder(assemble(Root(fail="variables")), get_backend(backend, 0))
    builder.assign_root_spaces({"x": X})
    with pytest.raises(BuildError) as info:
        builder.run()
    assert partial_problems(info.value, "root/second") == []
    assert builder.current is not None and builder.current.global_scope == "root/second"


def test_a_root_space_error_carries_the_unbuilt_graph(backend):
    with pytest.raises(BuildError, match="no input space for root API argument") as info:
        GraphExecutor(Root(), {}, backend=backend)
    assert partial_problems(info.value, None, stuck=("root", "root/first", "root/second", "root/head")) == []


@pytest.mark.parametrize("wrong", ["another component", "no attribute", "another phase"])
def test_the_check_fails_on_a_wrong_failing_component(backend, wrong):
    with pytest.raises(BuildError) as info:
        GraphExecutor(Root(fail="variables"), {"x": X}, backend=backend)
    if wrong == "another component":
        assert partial_problems(info.value, "root/first") == ["the failing component is root/second, not root/first"]
    elif wrong == "another phase":
        assert partial_problems(info.value, "root/second", phase="assembly") == ["the phase is build, not assembly"]
    else:
        del info.value.partial_build
        assert partial_problems(info.value, "root/second") == ["BuildError carries no partial_build"]
        # the drawing reads the attribute only: with it gone, the traceback's frames give nothing
        assert GraphModel.from_exception(info.value) is None


def test_the_drawing_finds_it_through_a_wrapping_error(backend):
    with pytest.raises(BuildError) as info:
        GraphExecutor(Root(fail="variables"), {"x": X}, backend=backend)
    try:
        raise RuntimeError("the agent config could not be built") from info.value
    except RuntimeError as wrapper:
        model = GraphModel.from_exception(wrapper)
    assert model.failed == "root/second" and model.error.startswith("BuildError: Leaf 'root/second'")


def test_a_successful_build_has_a_read_only_assembly_and_no_partial_build(backend):
    executor = GraphExecutor(Root(), {"x": X}, backend=backend, build=False)
    with pytest.raises(RuntimeError, match="not built yet"):
        _ = executor.assembly
    executor.build()
    assert set(executor.assembly.traces) == {"forward", "features"}
    assert executor.assembly.traces["forward"].args["x"].space is not None
    with pytest.raises(AttributeError):
        executor.assembly = None
    assert executor.execute("forward", [[1.0, 2.0, 3.0]]).shape == (1, 2)
