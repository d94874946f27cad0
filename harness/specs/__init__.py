"""Spec files: the schema, loading and validation with located errors."""

from harness.specs.loader import LoadedSpec, SpecError, find_specs, import_object, load_spec
from harness.specs.schema import ComponentSpec, HypothesisSpec, MethodSpec, StatefulSpec, Statistics, Tolerance

__all__ = ["ComponentSpec", "MethodSpec", "HypothesisSpec", "StatefulSpec", "Statistics", "Tolerance",
           "LoadedSpec", "SpecError", "load_spec", "find_specs", "import_object"]
