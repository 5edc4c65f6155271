"""Run a callback right after a given module is imported (a post-import hook).

A finder placed first on ``sys.meta_path`` answers for one module name only:
it asks the other finders for the spec and wraps its loader so that the
callback runs once the module's code has executed. Every other import goes by
after one string comparison.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType


class PostImportHook:
    """``sys.meta_path`` finder calling ``callback(module)`` after ``fullname``
    is imported. The callback must not raise."""

    def __init__(self, fullname: str, callback: Callable[[ModuleType], None]):
        self.fullname = fullname
        self.callback = callback
        self._searching = False

    def install(self) -> None:
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def remove(self) -> None:
        while self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.fullname or self._searching:
            return None
        self._searching = True
        try:
            spec = None
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self._searching = False
        if spec is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _NotifyingLoader(spec.loader, self.callback)
        return spec

    def invalidate_caches(self) -> None:
        pass


class _NotifyingLoader:
    """Loader proxy: runs the real loader, then the callback."""

    def __init__(self, loader, callback: Callable[[ModuleType], None]):
        self._loader = loader
        self._callback = callback

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        # The module keeps the real loader, as if the hook had not been there.
        module.__loader__ = self._loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        self._callback(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)
