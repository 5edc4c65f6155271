"""Find and classify the ``forward_mqa`` that is actually loaded.

The verdict comes from the source of the loaded module, and only counts when
the loaded function is the one that source defines: same file, same first
line. Anything else (a function replaced by other code, a file edited after
import, a module without source) is ``unknown``.
"""

from __future__ import annotations

import os
import types

from dspark_attn_plugin.target import CLASS_NAME, METHOD_NAME
from dspark_attn_plugin.warmup_shape import Classification, Verdict, classify_source


def _same_file(a: str | None, b: str | None) -> bool:
    return bool(a and b) and os.path.realpath(a) == os.path.realpath(b)


def classify_loaded(module: types.ModuleType) -> Classification:
    """Classify ``module.DeepseekV4FlashMLAAttention.forward_mqa`` as loaded."""
    cls = getattr(module, CLASS_NAME, None)
    if not isinstance(cls, type):
        return Classification(Verdict.ABSENT, f"{module.__name__} has no {CLASS_NAME}")
    func = cls.__dict__.get(METHOD_NAME)
    if not isinstance(func, types.FunctionType):
        return Classification(
            Verdict.UNKNOWN, f"{CLASS_NAME}.{METHOD_NAME} is not a plain function"
        )
    loader = getattr(module, "__loader__", None)
    get_source = getattr(loader, "get_source", None)
    source = get_source(module.__name__) if get_source else None
    if source is None:
        return Classification(Verdict.UNKNOWN, f"no source for {module.__name__}")
    code = func.__code__
    if not _same_file(code.co_filename, getattr(module, "__file__", None)):
        return Classification(
            Verdict.UNKNOWN,
            f"{METHOD_NAME} was replaced by code from {code.co_filename}",
        )
    result = classify_source(source)
    if result.method_line is not None and result.method_line != code.co_firstlineno:
        return Classification(
            Verdict.UNKNOWN,
            f"loaded {METHOD_NAME} starts at line {code.co_firstlineno} but the "
            f"file's at line {result.method_line}: file changed since import?",
        )
    return result
