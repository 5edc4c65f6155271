"""Classify the warmup branch of ``DeepseekV4FlashMLAAttention.forward_mqa``.

A pure function over source text: it never imports vLLM, so the plugin can run
it on the loaded module and the ``status`` command on a file on disk.

The verdict follows what the warmup branch (``if attn_metadata is None:``) does
for SWA-only layers (``compress_ratio <= 1``), not which release it matches:

``affected``
    the branch, or a method of the class it calls, asserts or dereferences
    ``topk_indices_buffer`` where an SWA-only layer gets to it (vLLM #50298,
    the 0.26.1rc1.dev77 nightlies to 0.27.1);
``fixed``
    the branch uses ``topk_indices_buffer`` only where SWA-only layers never
    get (vLLM #50693: 0.28.0 and later, main's ``_reserve_prefill_workspace``);
``not-affected``
    the branch never uses ``topk_indices_buffer`` (0.26.0);
``absent``
    no ``DeepseekV4FlashMLAAttention`` class in the source;
``unknown``
    the class is there but ``forward_mqa`` or its warmup branch cannot be found.
"""

from __future__ import annotations

import ast
import enum
from dataclasses import dataclass

from dspark_attn_plugin.target import CLASS_NAME, METHOD_NAME

BUFFER_ATTR = "topk_indices_buffer"
RATIO_ATTR = "compress_ratio"

# How deep the analysis follows calls to other methods of the class.
_MAX_CALL_DEPTH = 6


class Verdict(str, enum.Enum):
    AFFECTED = "affected"
    FIXED = "fixed"
    NOT_AFFECTED = "not-affected"
    ABSENT = "absent"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value

    @property
    def safe(self) -> bool:
        """True when this code needs no fix to start an SWA-only drafter."""
        return self in (Verdict.FIXED, Verdict.NOT_AFFECTED, Verdict.ABSENT)


@dataclass(frozen=True)
class Classification:
    verdict: Verdict
    reason: str
    # First line of the ``forward_mqa`` definition (decorators included), for
    # checking that the loaded function is the one that was classified.
    method_line: int | None = None


def classify_source(source: str) -> Classification:
    """Classify the flashmla module source text ``source``."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        return Classification(Verdict.UNKNOWN, f"source does not parse: {exc}")

    cls = next(
        (
            node
            for node in tree.body
            if isinstance(node, ast.ClassDef) and node.name == CLASS_NAME
        ),
        None,
    )
    if cls is None:
        return Classification(Verdict.ABSENT, f"no class {CLASS_NAME}")

    methods = {
        node.name: node
        for node in cls.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    method = methods.get(METHOD_NAME)
    if method is None:
        return Classification(
            Verdict.UNKNOWN, f"{CLASS_NAME} defines no {METHOD_NAME}"
        )
    method_line = min(
        [method.lineno] + [d.lineno for d in method.decorator_list]
    )

    branch = find_warmup_branch(method)
    if branch is None:
        return Classification(
            Verdict.UNKNOWN,
            f"no warmup branch ('if attn_metadata is None:') in {METHOD_NAME}",
            method_line,
        )

    scan = _Scan(methods)
    scan.block(branch.body, _Reach(swa=True, checked=False), depth=0)
    where = f"warmup branch at line {branch.lineno}"
    if scan.unguarded is not None:
        return Classification(
            Verdict.AFFECTED,
            f"{where}: line {scan.unguarded} needs {BUFFER_ATTR} on SWA-only layers",
            method_line,
        )
    if scan.mentions:
        return Classification(
            Verdict.FIXED,
            f"{where}: SWA-only layers never reach {BUFFER_ATTR}",
            method_line,
        )
    return Classification(
        Verdict.NOT_AFFECTED, f"{where}: never uses {BUFFER_ATTR}", method_line
    )


def find_warmup_branch(method: ast.AST) -> ast.If | None:
    for node in ast.walk(method):
        if isinstance(node, ast.If) and _is_metadata_none_test(node.test):
            return node
    return None


def _is_metadata_none_test(test: ast.expr) -> bool:
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _names_metadata(test.operand)
    return (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Is)
        and _is_none(test.comparators[0])
        and _names_metadata(test.left)
    )


def _names_metadata(node: ast.expr) -> bool:
    name = (
        node.id
        if isinstance(node, ast.Name)
        else node.attr
        if isinstance(node, ast.Attribute)
        else ""
    )
    return name.endswith("attn_metadata")


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _is_buffer(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == BUFFER_ATTR


def _is_buffer_not_none(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Compare)
        and len(node.ops) == 1
        and isinstance(node.ops[0], ast.IsNot)
        and _is_buffer(node.left)
        and _is_none(node.comparators[0])
    )


@dataclass(frozen=True)
class _Reach:
    """What is known at a point of the code."""

    swa: bool  # an SWA-only layer can get here
    checked: bool  # topk_indices_buffer is known not to be None here


_SWA, _SPARSE = "swa", "sparse"


class _Scan:
    """Walks statements, tracking whether SWA-only layers reach each use."""

    def __init__(self, methods: dict[str, ast.AST]) -> None:
        self.methods = methods
        self.swa_names: set[str] = set()  # e.g. swa_only = compress_ratio <= 1
        self.sparse_names: set[str] = set()
        self.unguarded: int | None = None  # line of the first unguarded use
        self.mentions = False
        self._entered: set[str] = set()

    # -- conditions ---------------------------------------------------------
    def layer_kind(self, test: ast.expr) -> str | None:
        """``_SWA`` if ``test`` holds only for SWA-only layers, ``_SPARSE`` if
        only for sparse ones, else None."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self.layer_kind(test.operand)
            return {_SWA: _SPARSE, _SPARSE: _SWA}.get(inner) if inner else None
        if isinstance(test, ast.Name):
            if test.id in self.swa_names:
                return _SWA
            if test.id in self.sparse_names:
                return _SPARSE
            return None
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
            return None
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if not (isinstance(left, ast.Attribute) and left.attr == RATIO_ATTR):
            return None
        if not (isinstance(right, ast.Constant) and isinstance(right.value, int)):
            return None
        k = right.value
        # compress_ratio is at least 1; SWA-only means exactly 1.
        if isinstance(op, ast.Eq):
            return _SWA if k <= 1 else _SPARSE
        if (isinstance(op, ast.LtE) and k == 1) or (isinstance(op, ast.Lt) and k == 2):
            return _SWA
        if (
            (isinstance(op, ast.Gt) and k >= 1)
            or (isinstance(op, ast.GtE) and k >= 2)
            or (isinstance(op, ast.NotEq) and k == 1)
        ):
            return _SPARSE
        return None

    # -- statements ---------------------------------------------------------
    def block(self, stmts: list[ast.stmt], reach: _Reach, depth: int) -> _Reach:
        """Scan ``stmts``; return what holds after them (``swa`` False when
        SWA-only layers cannot get past them)."""
        for stmt in stmts:
            reach = self.stmt(stmt, reach, depth)
        return reach

    def stmt(self, stmt: ast.stmt, reach: _Reach, depth: int) -> _Reach:
        if isinstance(stmt, ast.If):
            return self.if_stmt(stmt, reach, depth)
        if isinstance(stmt, ast.Assert):
            if _is_buffer_not_none(stmt.test):
                self.use(stmt.test, reach, needs_buffer=True)
                return _Reach(reach.swa, True)
            self.expr(stmt.test, reach, depth)
            return reach
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            kind = self.layer_kind(stmt.value)
            if isinstance(target, ast.Name) and kind is not None:
                (self.swa_names if kind == _SWA else self.sparse_names).add(
                    target.id
                )
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.expr):
                self.expr(child, reach, depth)
            else:
                # Loops, ``with`` and ``try`` bodies: scanned, but a return
                # inside them is not taken to end the path.
                self.nested(child, reach, depth)
        if isinstance(stmt, (ast.Return, ast.Raise)):
            return _Reach(False, reach.checked)
        return reach

    def nested(self, node: ast.AST, reach: _Reach, depth: int) -> None:
        if isinstance(node, ast.stmt):
            self.stmt(node, reach, depth)
            return
        for child in ast.iter_child_nodes(node):  # handlers, with-items, ...
            if isinstance(child, ast.expr):
                self.expr(child, reach, depth)
            else:
                self.nested(child, reach, depth)

    def if_stmt(self, stmt: ast.If, reach: _Reach, depth: int) -> _Reach:
        self.expr(stmt.test, reach, depth)
        kind = self.layer_kind(stmt.test)
        checked_in_body = reach.checked or _is_buffer_not_none(stmt.test)
        body_in = _Reach(reach.swa and kind != _SPARSE, checked_in_body)
        else_in = _Reach(reach.swa and kind != _SWA, reach.checked)
        body_out = self.block(stmt.body, body_in, depth)
        else_out = self.block(stmt.orelse, else_in, depth)
        # Past the ``if``, SWA-only layers are there if either arm let them by.
        return _Reach(
            body_out.swa or else_out.swa, body_out.checked and else_out.checked
        )

    # -- expressions --------------------------------------------------------
    def expr(self, node: ast.expr, reach: _Reach, depth: int) -> None:
        if isinstance(node, ast.IfExp):
            kind = self.layer_kind(node.test)
            self.expr(node.test, reach, depth)
            self.expr(
                node.body,
                _Reach(
                    reach.swa and kind != _SPARSE,
                    reach.checked or _is_buffer_not_none(node.test),
                ),
                depth,
            )
            self.expr(node.orelse, _Reach(reach.swa and kind != _SWA, reach.checked), depth)
            return
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            # ``a and b``: b runs only where a held.
            for value in node.values:
                self.expr(value, reach, depth)
                kind = self.layer_kind(value)
                reach = _Reach(
                    reach.swa and kind != _SPARSE,
                    reach.checked or _is_buffer_not_none(value),
                )
            return
        if isinstance(node, (ast.Attribute, ast.Subscript)) and _is_buffer(
            node.value
        ):
            # ``buffer.shape`` or ``buffer[...]`` fails on None.
            self.use(node, reach, needs_buffer=True)
            self.expr(node.value.value, reach, depth)
            if isinstance(node, ast.Subscript):
                self.expr(node.slice, reach, depth)
            return
        if _is_buffer(node):
            self.use(node, reach, needs_buffer=False)
        if isinstance(node, ast.Call):
            self.call(node, reach, depth)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, reach, depth)

    def use(self, node: ast.AST, reach: _Reach, needs_buffer: bool) -> None:
        self.mentions = True
        if needs_buffer and reach.swa and not reach.checked and self.unguarded is None:
            self.unguarded = getattr(node, "lineno", 0)

    def call(self, node: ast.Call, reach: _Reach, depth: int) -> None:
        """Follow ``self.m(...)`` / ``cls.m(...)`` into the class's own ``m``."""
        func = node.func
        if not (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.attr in self.methods
            and depth < _MAX_CALL_DEPTH
        ):
            return
        key = f"{func.attr}:{reach.swa}:{reach.checked}"
        if key in self._entered:
            return
        self._entered.add(key)
        self.block(self.methods[func.attr].body, _Reach(reach.swa, False), depth + 1)
