"""Classify the warmup branch of ``DeepseekV4FlashMLAAttention.forward_mqa``.

A pure function over source text: it never imports vLLM, so the plugin can run
it on the loaded module and the ``status`` command on a file on disk.

The classifier walks ``forward_mqa`` as the one run that vLLM #50615 is about
would execute it: the warmup dummy run (``attn_metadata is None``) of an
SWA-only layer (``compress_ratio <= 1``, that is 0 or 1) whose
``topk_indices_buffer`` is ``None``. Tests it can decide under those facts
(``compress_ratio <= 1``, ``topk_indices_buffer is not None``, names bound
to such a test on the way, ``and``/``or``/``not`` of them) take one arm; any
other test takes both. Calls to the class's own methods are followed. The verdict
fails closed:

``affected``
    a path of that run asserts ``topk_indices_buffer is not None`` or
    dereferences the buffer (vLLM #50298: the 0.26.1rc1.dev77 nightlies to
    0.27.1);
``fixed``
    the branch mentions ``topk_indices_buffer``, and every mention is one the
    classifier can show that run never reaches or only tests against ``None``
    (vLLM #50693: 0.28.0 and later, main's ``_reserve_prefill_workspace``);
``not-affected``
    the branch never mentions ``topk_indices_buffer`` (0.26.0), and the layer
    never leaves code the classifier can see;
``absent``
    no ``DeepseekV4FlashMLAAttention`` class in the source;
``unknown``
    anything it cannot show safe: the buffer aliased, truth-tested, passed to
    a function or named by a string; the layer passed to code outside the
    class (a module helper, ``super()``, a method the class does not define);
    calls nested deeper than it follows; or no ``forward_mqa`` or no
    top-level warmup branch (``if attn_metadata is None:``) to read.
"""

from __future__ import annotations

import ast
import enum
from dataclasses import dataclass, field

from dspark_attn_plugin.target import CLASS_NAME, METHOD_NAME

BUFFER_ATTR = "topk_indices_buffer"
RATIO_ATTR = "compress_ratio"

# The compress_ratio values an SWA-only layer can have.
SWA_RATIOS = (0, 1)
# How deep the walk follows calls to other methods of the class.
MAX_CALL_DEPTH = 6
# Builtins that may be given the layer: they cannot reach its attributes by
# a name the walk does not see (getattr/hasattr only with a constant name).
_LAYER_SAFE_CALLS = {"isinstance", "type", "id"}
_LAYER_SAFE_LOOKUPS = {"getattr", "hasattr"}


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
    # ``affected``: the line of the first statement that fails on the run.
    crash_line: int | None = None


def classify_source(source: str) -> Classification:
    """Classify the flashmla module source text ``source``."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        return Classification(Verdict.UNKNOWN, f"source does not parse: {exc}")
    cls = find_class(tree)
    if cls is None:
        return Classification(Verdict.ABSENT, f"no class {CLASS_NAME}")
    methods = class_methods(cls)
    method = methods.get(METHOD_NAME)
    if method is None:
        return Classification(Verdict.UNKNOWN, f"{CLASS_NAME} defines no {METHOD_NAME}")
    return classify_method(method, methods)


def find_class(tree: ast.Module) -> ast.ClassDef | None:
    return next(
        (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == CLASS_NAME),
        None,
    )


def class_methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {
        node.name: node
        for node in cls.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def classify_method(method, methods: dict) -> Classification:
    """Classify ``method`` (a ``forward_mqa`` definition), following calls
    into ``methods``, the class's own."""
    method_line = min([method.lineno] + [d.lineno for d in method.decorator_list])
    branch = find_warmup_branch(method)
    if branch is None:
        return Classification(
            Verdict.UNKNOWN,
            f"no warmup branch ('if attn_metadata is None:') in {METHOD_NAME}",
            method_line,
        )
    if branch not in method.body:
        return Classification(
            Verdict.UNKNOWN,
            f"the warmup branch at line {branch.lineno} is nested in other code",
            method_line,
        )
    walk = _Walk(methods)
    frame = walk.enter(method, receiver_is_layer=True, args={})
    reach = True
    for stmt in method.body:
        if not reach:
            break  # the warmup run has returned: the rest is the steady path
        if stmt is branch:
            walk.expr(stmt.test, reach, frame)
            reach = walk.block(stmt.body, reach, frame)
        else:
            reach = walk.stmt(stmt, reach, frame)
    where = f"warmup branch at line {branch.lineno}"
    if walk.crash is not None:
        return Classification(
            Verdict.AFFECTED,
            f"{where}: line {walk.crash} needs {BUFFER_ATTR} on SWA-only layers",
            method_line,
            crash_line=walk.crash,
        )
    if walk.unresolved is not None:
        line, what = walk.unresolved
        return Classification(
            Verdict.UNKNOWN,
            f"{where}: line {line} {what}; cannot show that SWA-only layers "
            f"never need {BUFFER_ATTR}",
            method_line,
        )
    if walk.mentions:
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


def is_buffer(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == BUFFER_ATTR


def buffer_none_test(node: ast.AST) -> bool | None:
    """For ``X.topk_indices_buffer is not None`` (or ``is None``): whether it
    holds when the buffer is None. None for anything else."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1):
        return None
    left, op, right = node.left, node.ops[0], node.comparators[0]
    if _is_none(left):
        left, right = right, left
    if not (is_buffer(left) and _is_none(right)):
        return None
    if isinstance(op, ast.IsNot):
        return False
    if isinstance(op, ast.Is):
        return True
    return None


_COMPARE = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
}


def _bound_names(node: ast.AST) -> set[str]:
    """Names that ``node`` binds anywhere inside it."""
    names: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            names.update(n.names)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
    return names


@dataclass
class _Frame:
    """What is known at one point of one function being walked: which names
    hold the layer or its class, and which hold a truth value known for the
    run. Updated statement by statement; copied at branches."""

    layers: set[str] = field(default_factory=set)
    known: dict[str, bool] = field(default_factory=dict)
    cls_names: set[str] = field(default_factory=set)

    def copy(self) -> "_Frame":
        return _Frame(set(self.layers), dict(self.known), set(self.cls_names))

    def forget(self, names) -> None:
        for name in names:
            self.layers.discard(name)
            self.known.pop(name, None)
            self.cls_names.discard(name)

    def become(self, other: "_Frame") -> None:
        self.layers, self.known, self.cls_names = other.layers, other.known, other.cls_names

    def merge(self, a: "_Frame", b: "_Frame") -> None:
        """What holds after two arms that both go on."""
        self.layers = a.layers & b.layers
        self.cls_names = a.cls_names & b.cls_names
        self.known = {k: v for k, v in a.known.items() if b.known.get(k) == v}


class _Walk:
    """Walks code as the warmup run of an SWA-only layer without a buffer."""

    def __init__(self, methods: dict) -> None:
        self.methods = methods
        self.crash: int | None = None  # line of the first statement that fails
        self.unresolved: tuple[int, str] | None = None
        self.mentions = False
        self._entered: set = set()
        self._depth = 0

    # -- findings -----------------------------------------------------------
    def _crash(self, node: ast.AST, reach: bool) -> None:
        self.mentions = True
        if reach and self.crash is None:
            self.crash = getattr(node, "lineno", 0)

    def _unresolved(self, node: ast.AST, reach: bool, what: str) -> None:
        if reach and self.unresolved is None:
            self.unresolved = (getattr(node, "lineno", 0), what)

    # -- frames -------------------------------------------------------------
    def enter(self, function, receiver_is_layer: bool, args: dict) -> _Frame:
        """A frame for ``function``; ``args`` maps parameter names to what
        the caller passed: ``"layer"``, ``"class"``, or a known bool."""
        params = [*function.args.posonlyargs, *function.args.args]
        decorators = {_decorator_name(d) for d in function.decorator_list}
        frame = _Frame()
        if params and "staticmethod" not in decorators:
            first = params[0].arg
            if "classmethod" in decorators:
                frame.cls_names.add(first)
            elif receiver_is_layer:
                frame.layers.add(first)
        for name, value in args.items():
            if value == "layer":
                frame.layers.add(name)
            elif value == "class":
                frame.cls_names.add(name)
            elif isinstance(value, bool):
                frame.known[name] = value
        return frame

    # -- truth values -------------------------------------------------------
    def value(self, node: ast.expr, frame: _Frame) -> bool | None:
        """The test's value on the run, or None where it cannot be known."""
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Name):
            return frame.known.get(node.id)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self.value(node.operand, frame)
            return None if inner is None else not inner
        if isinstance(node, ast.BoolOp):
            values = [self.value(v, frame) for v in node.values]
            if isinstance(node.op, ast.And):
                if False in values:
                    return False
                return True if all(v is True for v in values) else None
            if True in values:
                return True
            return False if all(v is False for v in values) else None
        none_test = buffer_none_test(node)
        if none_test is not None:
            return none_test
        return self._ratio_test(node, frame)

    def _ratio_test(self, node: ast.expr, frame: _Frame) -> bool | None:
        if not (isinstance(node, ast.Compare) and len(node.ops) == 1):
            return None
        left, op, right = node.left, node.ops[0], node.comparators[0]
        compare = _COMPARE.get(type(op))
        if compare is None:
            return None
        if self._is_ratio(right, frame):  # ``1 >= self.compress_ratio``
            left, right = right, left
            compare = (lambda c: lambda a, b: c(b, a))(compare)
        if not (self._is_ratio(left, frame) and isinstance(right, ast.Constant)):
            return None
        k = right.value
        if not isinstance(k, int) or isinstance(k, bool):
            return None
        results = {compare(r, k) for r in SWA_RATIOS}
        return results.pop() if len(results) == 1 else None

    @staticmethod
    def _is_ratio(node: ast.expr, frame: _Frame) -> bool:
        return (
            isinstance(node, ast.Attribute)
            and node.attr == RATIO_ATTR
            and isinstance(node.value, ast.Name)
            and node.value.id in frame.layers
        )

    # -- statements ---------------------------------------------------------
    def block(self, stmts: list[ast.stmt], reach: bool, frame: _Frame) -> bool:
        """Walk ``stmts``; return whether the run can get past them."""
        for stmt in stmts:
            reach = self.stmt(stmt, reach, frame)
        return reach

    def stmt(self, stmt: ast.stmt, reach: bool, frame: _Frame) -> bool:
        if isinstance(stmt, ast.If):
            self.expr(stmt.test, reach, frame)
            value = self.value(stmt.test, frame)
            a, b = frame.copy(), frame.copy()
            body = self.block(stmt.body, reach and value is not False, a)
            orelse = self.block(stmt.orelse, reach and value is not True, b)
            if body and orelse:
                frame.merge(a, b)
            else:
                frame.become(a if body or not orelse else b)
            return body or orelse
        if isinstance(stmt, ast.Assert):
            self.expr(stmt.test, reach, frame)
            if stmt.msg is not None:
                self.expr(stmt.msg, reach, frame)
            value = self.value(stmt.test, frame)
            if value is False and _mentions_buffer(stmt.test):
                self._crash(stmt, reach)
            return reach and value is not False
        if isinstance(stmt, ast.Assign):
            self._assign(stmt, reach, frame)
            return reach
        if isinstance(stmt, (ast.Return, ast.Raise)):
            for child in ast.iter_child_nodes(stmt):
                self.expr(child, reach, frame)
            return False
        if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
            for child in ast.iter_child_nodes(stmt):
                self._any(child, reach, frame)
            frame.forget(_bound_names(stmt))
            return reach
        # Loops, with, try, match, nested definitions (walked as if they ran
        # here) and the rest: every part walked with the reach the statement
        # starts with, and the run taken to go on past it (a return inside
        # them is not taken to end the path). Names bound anywhere inside are
        # unknown there and after.
        bound = _bound_names(stmt)
        frame.forget(bound)
        for child in ast.iter_child_nodes(stmt):
            self._any(child, reach, frame)
        frame.forget(bound)
        return reach

    def _any(self, node: ast.AST, reach: bool, frame: _Frame) -> None:
        if isinstance(node, ast.stmt):
            self.stmt(node, reach, frame)
        elif isinstance(node, ast.expr):
            self.expr(node, reach, frame)
        else:  # handlers, with-items, match cases, arguments
            for child in ast.iter_child_nodes(node):
                self._any(child, reach, frame)

    def _assign(self, stmt: ast.Assign, reach: bool, frame: _Frame) -> None:
        value = stmt.value
        target = stmt.targets[0] if len(stmt.targets) == 1 else None
        name = target.id if isinstance(target, ast.Name) else None
        if name and isinstance(value, ast.Name) and value.id in frame.layers:
            frame.forget([name])
            frame.layers.add(name)  # ``layer = self``
            return
        self.expr(value, reach, frame)
        known = self.value(value, frame)
        for t in stmt.targets:
            if not isinstance(t, ast.Name):
                self.expr(t, reach, frame)
        frame.forget(_bound_names(stmt))
        if name and known is not None:
            frame.known[name] = known

    # -- expressions --------------------------------------------------------
    def expr(self, node: ast.expr, reach: bool, frame: _Frame) -> None:
        if isinstance(node, ast.IfExp):
            self.expr(node.test, reach, frame)
            value = self.value(node.test, frame)
            self.expr(node.body, reach and value is not False, frame)
            self.expr(node.orelse, reach and value is not True, frame)
            return
        if isinstance(node, ast.BoolOp):
            for part in node.values:
                self.expr(part, reach, frame)
                value = self.value(part, frame)
                stop = False if isinstance(node.op, ast.And) else True
                reach = reach and value is not stop
            return
        if buffer_none_test(node) is not None:
            self.mentions = True  # a test against None: safe on the run
            return
        if isinstance(node, (ast.Attribute, ast.Subscript)) and is_buffer(node.value):
            self._crash(node, reach)  # ``buffer.shape`` / ``buffer[...]`` of None
            self._base(node.value, reach, frame)
            if isinstance(node, ast.Subscript):
                self.expr(node.slice, reach, frame)
            return
        if is_buffer(node):
            self.mentions = True
            self._unresolved(node, reach, f"uses {BUFFER_ATTR} other than by testing it against None")
            self._base(node, reach, frame)
            return
        if isinstance(node, ast.Constant) and node.value == BUFFER_ATTR:
            self.mentions = True
            self._unresolved(node, reach, f"names {BUFFER_ATTR!r} in a string")
            return
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in frame.layers:
                self._layer_attribute(node, reach, frame)
                return
        if isinstance(node, ast.Call):
            self._call(node, reach, frame)
            return
        if isinstance(node, ast.NamedExpr):
            self.expr(node.value, reach, frame)
            frame.forget([node.target.id])
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id in frame.layers:
                self._unresolved(node, reach, "hands the layer to code the classifier cannot follow")
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, reach, frame)
            else:
                self._any(child, reach, frame)

    def _base(self, buffer: ast.Attribute, reach: bool, frame: _Frame) -> None:
        """What the buffer is read from: the layer itself is no escape."""
        base = buffer.value
        if not (isinstance(base, ast.Name) and base.id in frame.layers):
            self.expr(base, reach, frame)

    def _layer_attribute(self, node: ast.Attribute, reach: bool, frame: _Frame) -> None:
        """``self.x``: a property of the class runs code."""
        method = self.methods.get(node.attr)
        if method is not None and _is_property(method):
            self._follow(node, method, {}, True, reach)

    def _call(self, node: ast.Call, reach: bool, frame: _Frame) -> None:
        func = node.func
        method, receiver_is_layer = self._own_method(func, frame)
        if method is not None:
            args = self._bind(method, node, frame, receiver_is_layer)
            self._follow(node, method, args, receiver_is_layer, reach)
            skip_layer_args = True
        else:
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and (
                func.value.id in frame.layers or func.value.id in frame.cls_names
            ):
                self._unresolved(
                    node, reach, f"calls {func.attr}, which {CLASS_NAME} does not define"
                )
            if isinstance(func, ast.Call) and isinstance(func.func, ast.Name) and (
                func.func.id == "super"
            ) or (isinstance(func, ast.Attribute) and _is_super_call(func.value)):
                self._unresolved(node, reach, "calls into a base class")
            skip_layer_args = _layer_safe_builtin(node)
            if not isinstance(func, ast.Attribute) or not (
                isinstance(func.value, ast.Name) and func.value.id in frame.layers
            ):
                self.expr(func, reach, frame)
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            if isinstance(arg, ast.Starred):
                arg = arg.value
            if skip_layer_args and isinstance(arg, ast.Name) and arg.id in frame.layers:
                continue
            self.expr(arg, reach, frame)

    def _own_method(self, func: ast.expr, frame: _Frame):
        """The class's own method that ``func`` names, if it is one, and
        whether its receiver is the layer."""
        if not isinstance(func, ast.Attribute) or func.attr not in self.methods:
            return None, False
        base = func.value
        if isinstance(base, ast.Name):
            if base.id in frame.layers:
                return self.methods[func.attr], True
            if base.id in frame.cls_names or base.id == CLASS_NAME:
                return self.methods[func.attr], False
        if (  # ``type(self).m``
            isinstance(base, ast.Call)
            and isinstance(base.func, ast.Name)
            and base.func.id == "type"
            and len(base.args) == 1
            and isinstance(base.args[0], ast.Name)
            and base.args[0].id in frame.layers
        ):
            return self.methods[func.attr], False
        return None, False

    def _bind(self, method, node: ast.Call, frame: _Frame, receiver_is_layer: bool) -> dict:
        """Parameter name -> ``"layer"`` / ``"class"`` / known bool."""
        params = [a.arg for a in [*method.args.posonlyargs, *method.args.args]]
        decorators = {_decorator_name(d) for d in method.decorator_list}
        if "staticmethod" not in decorators and params:
            params = params[1:]  # bound to the receiver or the class
        kwonly = {a.arg for a in method.args.kwonlyargs}

        def describe(arg: ast.expr):
            if isinstance(arg, ast.Name) and arg.id in frame.layers:
                return "layer"
            if isinstance(arg, ast.Name) and arg.id in frame.cls_names:
                return "class"
            return self.value(arg, frame)

        bound: dict = {}
        for name, arg in zip(params, node.args):
            if isinstance(arg, ast.Starred):
                break
            bound[name] = describe(arg)
        for keyword in node.keywords:
            if keyword.arg and (keyword.arg in params or keyword.arg in kwonly):
                bound[keyword.arg] = describe(keyword.value)
        return {k: v for k, v in bound.items() if v is not None}

    def _follow(self, node, method, args: dict, receiver_is_layer: bool, reach: bool) -> None:
        if not reach:
            return  # only reachable calls matter
        key = (method.name, receiver_is_layer, tuple(sorted(args.items())))
        if key in self._entered:
            return
        if self._depth >= MAX_CALL_DEPTH:
            self._unresolved(node, reach, f"nests calls deeper than {MAX_CALL_DEPTH}")
            return
        self._entered.add(key)
        self._depth += 1
        try:
            frame = self.enter(method, receiver_is_layer, args)
            self.block(method.body, True, frame)
        finally:
            self._depth -= 1


def _decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return _decorator_name(node.func)
    return ""


def _is_property(method) -> bool:
    names = {_decorator_name(d) for d in method.decorator_list}
    return bool(names & {"property", "cached_property", "getter"})


def _is_super_call(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "super"
    )


def _layer_safe_builtin(node: ast.Call) -> bool:
    """``isinstance(self, X)``, ``getattr(self, "name")`` and the like."""
    func = node.func
    if not isinstance(func, ast.Name):
        return False
    if func.id in _LAYER_SAFE_CALLS:
        return True
    if func.id in _LAYER_SAFE_LOOKUPS and len(node.args) >= 2:
        name = node.args[1]
        return isinstance(name, ast.Constant) and isinstance(name.value, str) and (
            name.value != BUFFER_ATTR
        )
    return False


def _mentions_buffer(node: ast.AST) -> bool:
    return any(
        is_buffer(n) or (isinstance(n, ast.Constant) and n.value == BUFFER_ATTR)
        for n in ast.walk(node)
    )
