"""The spec-file schema (pydantic v2): one component per YAML file under ``specs/components/``."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from harness.spaces import parse

#: Space text, or nested mappings/lists of space texts (Dict/Tuple).
SpaceText = Union[str, dict[str, Any], list[Any]]


def _check_space(value: Any) -> Any:
    try:
        parse(value)
    except ValueError as exc:
        raise ValueError(f"bad space: {exc}") from None
    return value


#: A space given in a spec: validated by parsing it.
ValidSpace = Annotated[SpaceText, AfterValidator(_check_space)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Tolerance(_Strict):
    """How close two float outputs must be: ``|a - b| <= atol + rtol * |b|``."""

    rtol: float = Field(1e-5, ge=0)
    atol: float = Field(1e-6, ge=0)
    why: str = Field("", description="why a looser tolerance is needed, where it is looser than the default")


class Statistics(_Strict):
    """How stochastic outputs are compared: per-element means over repeated calls."""

    samples: int = Field(400, ge=10, description="calls per backend")
    confidence: float = Field(0.999, gt=0.5, lt=1.0, description="confidence of the two-sample z-test")


class MethodSpec(_Strict):
    """One API method to exercise."""

    output_space: ValidSpace | None = Field(None, description="expected output space (text, or nested)")
    oracle: str | None = Field(
        None, description="dotted path of fn(inputs: dict, weights: dict, config: dict) -> outputs in NumPy")
    tolerance: Tolerance | None = None
    stochastic: bool = Field(False, description="outputs are random: compared by statistics, not value by value")
    deterministic_inputs: dict[str, Any] | None = Field(
        None, description="fixed argument values that make a stochastic method deterministic (e.g. explore: false)")
    statistics: Statistics = Statistics()
    allow_nan: bool = False
    stateful: bool = Field(False, description="calling it changes state: skipped by the stateless checks")


class HypothesisSpec(_Strict):
    """Hypothesis settings, scaling the active profile's example count."""

    max_examples: int = Field(20, ge=1, description="examples under the 'dev' profile; ci/thorough scale it")
    batch_size: int | None = Field(None, ge=0, description="fixed batch size (default: drawn 1..4)")
    time_size: int | None = Field(None, ge=0, description="fixed time size (default: drawn 1..4)")


class StatefulSpec(_Strict):
    """A rule-based state machine check against a NumPy model of the component."""

    model: str = Field(description="dotted path of a class: model(config, weights) with the API methods in NumPy")
    methods: list[str] = Field(description="API methods used as rules")
    steps: int = Field(30, ge=1, description="max rule calls per run")


class ComponentSpec(_Strict):
    """A component spec file."""

    component: str = Field(description="dotted path of the Component class")
    description: str = ""
    config: dict[str, Any] = Field(default_factory=dict, description="constructor keyword arguments")
    input_spaces: dict[str, ValidSpace] = Field(description="space of every root API argument, by name")
    methods: dict[str, MethodSpec] = Field(description="API methods to exercise")
    backends: list[Literal["tf", "torch"]] = ["tf", "torch"]
    tolerance: Tolerance = Tolerance()
    hypothesis: HypothesisSpec = HypothesisSpec()
    stateful: StatefulSpec | None = None
    bad_spaces: list[dict[str, ValidSpace]] = Field(
        default_factory=list,
        description="input spaces a space check must reject: the build raises a SpaceMismatchError naming the "
                    "component")
    bad_configs: list[Annotated[dict[str, Any], Field(min_length=1)]] = Field(
        default_factory=list,
        description="constructor arguments, each entry merged over config, that the constructor must refuse with "
                    "a ValueError naming one of the entry's arguments")
    seed: int = 0

    @field_validator("methods", mode="before")
    @classmethod
    def _empty_methods(cls, value: Any) -> Any:
        # `methods: {sync: }` (nothing to declare) reads as None in YAML
        if isinstance(value, dict):
            return {k: ({} if v is None else v) for k, v in value.items()}
        return value

    @model_validator(mode="after")
    def _methods_known(self) -> "ComponentSpec":
        if not self.methods:
            raise ValueError("methods: give at least one API method to exercise")
        if not self.backends:
            raise ValueError("backends: give at least one backend")
        return self
