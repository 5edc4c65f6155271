"""The verdict (R6): both walks of the #50615 run, over the module as loaded."""

from __future__ import annotations

import ast
import functools

from dspark_attn_plugin.target import (
    CLASS_NAME,
    METHOD_NAME,
)
from dspark_attn_plugin.warmup_shape.expressions import (
    ExpressionWalk,
)
from dspark_attn_plugin.warmup_shape.module import (
    _Module,
    module_integrity,
)
from dspark_attn_plugin.warmup_shape.state import (
    _Found,
    _Unreachable,
)
from dspark_attn_plugin.warmup_shape.statements import (
    StatementWalk,
)
from dspark_attn_plugin.warmup_shape.syntax import (
    class_methods,
    find_class,
    find_warmup_branch,
    names_buffer,
)
from dspark_attn_plugin.warmup_shape.values import (
    _LAYER,
    _OPAQUE,
)
from dspark_attn_plugin.warmup_shape.verdict import (
    BUFFER_ATTR,
    Classification,
    SWA_RATIOS,
    Verdict,
)


# --- entry points -------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def classify_source(source: str) -> Classification:
    """Classify the flashmla module source text ``source``."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        return Classification(Verdict.UNKNOWN, f"source does not parse: {exc}")
    cls = find_class(tree)
    if cls is None:
        if any(isinstance(n, ast.ClassDef) and n.name == CLASS_NAME for n in ast.walk(tree)):
            return Classification(Verdict.UNKNOWN, f"{CLASS_NAME} is not defined at module level")
        return Classification(Verdict.ABSENT, f"no class {CLASS_NAME}")
    problem = module_integrity(tree, cls)
    method = class_methods(cls).get(METHOD_NAME)
    if method is None:
        return Classification(Verdict.UNKNOWN, f"{CLASS_NAME} defines no {METHOD_NAME}")
    line = min([method.lineno] + [d.lineno for d in method.decorator_list])
    if problem:
        return Classification(Verdict.UNKNOWN, problem, line)
    return classify_method(method, class_methods(cls), tree=tree, cls=cls)


def classify_method(method, methods: dict, *, tree: ast.Module,
                    cls: ast.ClassDef) -> Classification:
    """Classify ``method`` (a ``forward_mqa`` definition, or its edit) as the
    #50615 run, following calls into ``methods`` (the class's own, ``method``
    among them), into the module ``tree``'s functions and into the attributes
    of ``cls`` (the class in ``tree``)."""
    line = min([method.lineno] + [d.lineno for d in method.decorator_list])
    if not isinstance(method, ast.FunctionDef) or method.decorator_list:
        return Classification(Verdict.UNKNOWN, f"{METHOD_NAME} is decorated or async", line)
    module = _Module(tree, cls, methods)
    certain: list[tuple[int, str]] = []
    doubts: list[tuple[int, str]] = []
    mentions = False
    for ratio in SWA_RATIOS:
        walk = _Walk(module, ratio)
        params = [*method.args.posonlyargs, *method.args.args]
        args = [_LAYER] + [_OPAQUE] * (len(params) - 1)
        kwargs = {p.arg: _OPAQUE for p in method.args.kwonlyargs}
        try:
            walk.call_function(method, args, kwargs, method, outer=None)
        except (_Found, _Unreachable):
            pass
        certain += [(n, w, ratio) for n, w in walk.certain]
        doubts += [(n, w, ratio) for n, w in walk.doubts]
        mentions = mentions or any(names_buffer(f) for f in walk.entered if f is not method)
    branch = find_warmup_branch(method)
    assumes = tuple(sorted(module.resolved | {("member", METHOD_NAME, CLASS_NAME)}))
    mentions = mentions or names_buffer(branch if branch is not None else method)
    if certain:
        crash_line, what, ratio = certain[0]
        return Classification(
            Verdict.AFFECTED,
            f"line {crash_line} {what} on SWA-only layers without {BUFFER_ATTR} "
            f"(compress_ratio {ratio})",
            line,
            crash_line=crash_line,
            assumes=assumes,
        )
    if doubts:
        where, what, ratio = doubts[0]
        return Classification(
            Verdict.UNKNOWN,
            f"line {where} {what} (compress_ratio {ratio}); cannot show that SWA-only "
            f"layers warm up without {BUFFER_ATTR}",
            line,
        )
    if mentions:
        return Classification(
            Verdict.FIXED, f"SWA-only layers warm up without touching {BUFFER_ATTR}", line,
            assumes=assumes,
        )
    return Classification(Verdict.NOT_AFFECTED, f"the warmup never uses {BUFFER_ATTR}", line,
                          assumes=assumes)


class _Walk(StatementWalk, ExpressionWalk):
    """One walk of the #50615 run (R1), at one ``compress_ratio``."""
