"""Pytest plugin (``-p harness.testing.mutation_hook``): loads one mutant of one module in place of the original.

``SPACEGRAPH_MUTANT`` holds ``{"module", "path", "index"}`` (set by
`harness.testing.mutation.run_mutant`). A meta-path finder placed first on
``sys.meta_path`` gives that module the mutated code; the file on disk is unchanged.
Without the variable the plugin does nothing.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import json
import os
import sys
from typing import Any


class _MutantLoader(importlib.abc.Loader):
    def __init__(self, code: str, path: str) -> None:
        self.code, self.path = code, path

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: Any) -> None:
        exec(compile(self.code, self.path, "exec"), module.__dict__)


class _MutantFinder(importlib.abc.MetaPathFinder):
    def __init__(self, module: str, path: str, code: str) -> None:
        self.module, self.path, self.code = module, path, code

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.module:
            return None
        return importlib.util.spec_from_file_location(fullname, self.path, loader=_MutantLoader(self.code, self.path))


def install(module: str, path: str, index: int) -> None:
    """Makes the next import of ``module`` load mutant ``index`` of ``path``."""
    from harness.testing.mutation import mutated_source

    with open(path) as f:
        code = mutated_source(f.read(), index)
    sys.modules.pop(module, None)
    sys.meta_path.insert(0, _MutantFinder(module, path, code))


_given = os.environ.get("SPACEGRAPH_MUTANT")
if _given:
    _m = json.loads(_given)
    install(_m["module"], _m["path"], int(_m["index"]))
