"""The edit the plugin makes to ``forward_mqa``: vLLM #50693's own change.

A pure function over source text, shared by the runtime patch and the
``status`` command, so that what ``status`` promises is what the runtime
builds. Upstream's fix made the warmup branch's one assertion
``assert self.topk_indices_buffer is not None`` hold only for layers that are
not SWA-only, and used ``top_k = 0`` for SWA-only ones. On affected code the
plugin makes exactly that assertion conditional::

    if self.compress_ratio <= 1:
        <rescue note>(self)
    else:
        assert self.topk_indices_buffer is not None

and changes nothing else: the reservation, the zeroing and every other
statement stay the build's own, whatever a fork made of them. The edit is
accepted only if the classifier reads the edited method as ``fixed``
(SWA-only layers then never need the buffer); anything else is refused with
the reason, and the plugin leaves the code alone.
"""

from __future__ import annotations

import ast
import copy
import functools
from dataclasses import dataclass

from dspark_attn_plugin.target import METHOD_NAME
from dspark_attn_plugin.warmup_shape import (
    BUFFER_ATTR,
    RATIO_ATTR,
    Classification,
    Verdict,
    buffer_none_test,
    class_methods,
    classify_method,
    classify_source,
    find_class,
    find_warmup_branch,
)

# The closure variable through which the edited method reaches the note.
NOTE_NAME = "__dspark_attn_plugin_rescued__"


@dataclass(frozen=True)
class EditPlan:
    """What the plugin would do to one flashmla source."""

    classification: Classification  # of the source as it is
    tree: ast.Module | None = None  # the whole source, parsed
    function: ast.FunctionDef | None = None  # forward_mqa as it is
    edited: ast.FunctionDef | None = None  # forward_mqa with the edit
    refusal: str | None = None  # why there is no edit (affected code only)

    @property
    def applies(self) -> bool:
        return self.edited is not None


@functools.lru_cache(maxsize=8)
def plan_edit(source: str) -> EditPlan:
    """The edit for ``source``; ``edited`` is None unless it is affected code
    that the edit makes ``fixed``."""
    classification = classify_source(source)
    if classification.verdict is not Verdict.AFFECTED:
        return EditPlan(classification)

    def refuse(why: str) -> EditPlan:
        return EditPlan(classification, refusal=why)

    tree = ast.parse(source)
    cls = find_class(tree)
    methods = class_methods(cls)
    function = methods[METHOD_NAME]
    if not isinstance(function, ast.FunctionDef) or function.decorator_list:
        return refuse(f"{METHOD_NAME} is decorated or not a plain function")
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    if NOTE_NAME in names:
        return refuse(f"the source already uses the name {NOTE_NAME}")
    params = [*function.args.posonlyargs, *function.args.args]
    if not params:
        return refuse(f"{METHOD_NAME} takes no self")
    layer = params[0].arg

    edited = copy.deepcopy(function)
    branch = find_warmup_branch(edited)
    if branch is None:
        return refuse(f"{METHOD_NAME} has no `if attn_metadata is None:` branch of that shape")
    line = classification.crash_line
    index = next(
        (
            i
            for i, stmt in enumerate(branch.body)
            if stmt.lineno == line and _asserts_buffer(stmt, layer)
        ),
        None,
    )
    if index is None:
        return refuse(
            f"line {line} is not `assert {layer}.{BUFFER_ATTR} is not None` "
            "directly in the warmup branch"
        )
    assertion = branch.body[index]
    branch.body[index] = _conditional(assertion, layer, note=False)

    check = classify_method(edited, {**methods, METHOD_NAME: edited}, tree=tree, cls=cls)
    if check.verdict is not Verdict.FIXED:
        return refuse(
            f"with the assertion at line {line} made conditional, the warmup "
            f"branch is still {check.verdict} ({check.reason})"
        )
    branch.body[index] = _conditional(assertion, layer, note=True)
    return EditPlan(classification, tree, function, edited)


def _asserts_buffer(stmt: ast.stmt, layer: str) -> bool:
    """``assert <layer>.topk_indices_buffer is not None[, msg]``."""
    if not isinstance(stmt, ast.Assert) or buffer_none_test(stmt.test) is not False:
        return False
    test = stmt.test
    buffer = test.left if isinstance(test.left, ast.Attribute) else test.comparators[0]
    return isinstance(buffer.value, ast.Name) and buffer.value.id == layer


def _conditional(assertion: ast.Assert, layer: str, note: bool) -> ast.If:
    """``if layer.compress_ratio <= 1: note(layer) else: <assertion>``."""
    swa_arm = f"{NOTE_NAME}({layer})" if note else "pass"
    node = ast.parse(
        f"if {layer}.{RATIO_ATTR} <= 1:\n    {swa_arm}\nelse:\n    pass\n"
    ).body[0]
    node.orelse = [assertion]
    for child in ast.walk(node):
        if child is not assertion and not _inside(child, assertion):
            ast.copy_location(child, assertion)  # tracebacks name vLLM's line
    return node


def _inside(node: ast.AST, root: ast.AST) -> bool:
    return any(node is n for n in ast.walk(root))

