"""Classify ``DeepseekV4FlashMLAAttention.forward_mqa`` for the #50615 run.

A pure function over source text: it never imports vLLM, so the plugin runs
it on the loaded module and ``status`` on a file on disk.

The rules, all of them
----------------------
R1 *The run.* ``forward_mqa`` is interpreted from its first statement as the
   warmup dummy run of vLLM #50615: ``get_forward_context().attn_metadata``
   is None, ``self.compress_ratio`` is 0 (one walk) or 1 (a second walk), and
   ``self.topk_indices_buffer`` is None. Values are known constants, the
   layer, its class, functions of this module (the class's methods and
   properties, module functions, nested defs, lambdas, all followed when
   called), or *opaque* (anything else: imports, other attributes, results
   of outside code). Every value carries a mark, *derived*: the buffer is
   derived, so is whatever is computed from a derived value, whatever code
   chosen by a decided test on a derived value stores or returns (and the
   rest of the function, when the arm not taken could have left it), and
   any attribute that this module ever stores a buffer-naming value into.
R2 *Tests.* An ``if``, ``while``, ``assert``, conditional expression,
   ``and``/``or``, ``match`` case or comprehension filter whose value is
   known takes its one arm. Otherwise it takes every arm, and what is under
   it is reached only *maybe*.
R3 *Crashes.* A reached ``raise``; an ``assert`` whose test is false; an
   attribute, subscript, call or arithmetic on None (or any known value
   that raises); a local read before it is bound. Reached on every path and
   certain: the verdict is ``affected``. Reached maybe: ``unknown``. An
   enclosing ``try`` whose handler names the exception's class (or a base of
   it, or catches all) takes the crash instead.
R4 *Cannot see.* ``unknown`` when the run reaches: an undecided test on a
   derived value; a derived value, the layer or its class handed to code
   outside this module (a call, an operator or a format on an opaque
   value; this module's functions handed out are walked as if called
   there); outside code called on a path a derived test chose; a method
   the class does not define, ``super()``, a decorated function, a class
   attribute that is not a plain constant, a store into the buffer or the
   ratio; a statement or expression kind not listed here (``await``,
   ``global``, ``async``, nested classes, ...); a call deeper than
   ``MAX_CALL_DEPTH`` or recursive; a loop whose state does not settle.
R5 *The class as loaded.* ``unknown`` when ``forward_mqa`` is decorated,
   async or bound twice in the class; when the class is decorated, has a
   metaclass, is defined twice or its name is bound again; when the module
   stores into or deletes from the class after defining it.
R6 *Verdict.* ``affected`` if R3 is certain on either walk; else
   ``unknown`` if R3-maybe or R4 happened; else ``fixed`` if the warmup
   branch (``if attn_metadata is None:``; all of ``forward_mqa`` if it has
   none) or a function the run called names the buffer; else
   ``not-affected``. ``absent``: no such class.

Assumed, not proven: code outside the module that is handed none of the
above does not raise for lack of the buffer (it may raise for other reasons:
``affected`` can then be wrong, never ``fixed``); attributes of the layer
other than the buffer and the R1 aliases are not derived from it. A context
manager other than ``torch.no_grad``-like ones may swallow an exception, so
the code after its ``with`` is walked as maybe reached.

Checked by execution: ``tests/test_generated_variants.py`` and ``make
fuzz`` run thousands of generated variants of the real warmup branch on
synthetic layers against these verdicts.
"""

from __future__ import annotations

import ast
import enum
import functools
import operator
from dataclasses import dataclass

from dspark_attn_plugin.target import CLASS_NAME, METHOD_NAME

BUFFER_ATTR = "topk_indices_buffer"
RATIO_ATTR = "compress_ratio"

# The compress_ratio values an SWA-only layer can have: one walk each.
SWA_RATIOS = (0, 1)
# How deep the walk follows calls into this module's functions.
MAX_CALL_DEPTH = 8
# How many passes a loop body gets before its state must have settled.
MAX_LOOP_PASSES = 6


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


def find_class(tree: ast.Module) -> ast.ClassDef | None:
    found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == CLASS_NAME]
    return found[-1] if found else None


def class_methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The class body's ``def``s, by name (the last one wins, as in Python)."""
    return {
        node.name: node
        for node in cls.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def module_integrity(tree: ast.Module, cls: ast.ClassDef) -> str | None:
    """R5: why the class as loaded may not be the class as written, or None."""
    if cls.decorator_list:
        return f"{CLASS_NAME} is decorated"
    if cls.keywords:
        return f"{CLASS_NAME} has class keywords (a metaclass)"
    bindings = [n for n in cls.body if METHOD_NAME in _stmt_binds(n)]
    if len(bindings) != 1:
        return f"{METHOD_NAME} is bound {len(bindings)} times in the class"
    definitions = 0
    for node in ast.walk(tree):
        kind = type(node)
        if kind is ast.ClassDef and node.name == CLASS_NAME:
            definitions += 1
            if definitions > 1:
                return f"{CLASS_NAME} is defined more than once"
        elif kind is ast.Name:
            if node.id == CLASS_NAME and type(node.ctx) is not ast.Load:
                return f"the module binds {CLASS_NAME} again (line {node.lineno})"
        elif kind is ast.Attribute:
            if (
                type(node.ctx) is not ast.Load
                and type(node.value) is ast.Name
                and node.value.id == CLASS_NAME
            ):
                return f"the module changes {CLASS_NAME}.{node.attr} (line {node.lineno})"
        elif kind in (ast.FunctionDef, ast.AsyncFunctionDef):
            if node.name == CLASS_NAME:
                return f"the module binds {CLASS_NAME} again (line {node.lineno})"
        elif kind is ast.alias:
            if (node.asname or node.name) == CLASS_NAME:
                return f"the module imports a name {CLASS_NAME}"
        elif kind is ast.Call:
            func = node.func
            if (
                type(func) is ast.Name
                and func.id in ("setattr", "delattr")
                and node.args
                and type(node.args[0]) is ast.Name
                and node.args[0].id == CLASS_NAME
            ):
                return f"the module changes {CLASS_NAME} with {func.id} (line {node.lineno})"
    return None


def classify_method(method, methods: dict, *, tree: ast.Module | None = None,
                    cls: ast.ClassDef | None = None) -> Classification:
    """Classify ``method`` (a ``forward_mqa`` definition) as the #50615 run,
    following calls into ``methods`` (the class's own) and, given ``tree``
    and ``cls``, into module functions and class attributes."""
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
    mentions = mentions or names_buffer(branch if branch is not None else method)
    if certain:
        crash_line, what, ratio = certain[0]
        return Classification(
            Verdict.AFFECTED,
            f"line {crash_line} {what} on SWA-only layers without {BUFFER_ATTR} "
            f"(compress_ratio {ratio})",
            line,
            crash_line=crash_line,
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
            Verdict.FIXED, f"SWA-only layers warm up without touching {BUFFER_ATTR}", line
        )
    return Classification(Verdict.NOT_AFFECTED, f"the warmup never uses {BUFFER_ATTR}", line)


def find_warmup_branch(method: ast.AST) -> ast.If | None:
    """The ``if attn_metadata is None:`` statement directly in ``method``."""
    for node in getattr(method, "body", []):
        if isinstance(node, ast.If) and _is_metadata_none_test(node.test):
            return node
    return None


def _is_metadata_none_test(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Is)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
        and isinstance(test.left, ast.Name)
        and test.left.id.endswith("attn_metadata")
    )


def is_buffer(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == BUFFER_ATTR


def buffer_none_test(node: ast.AST) -> bool | None:
    """For ``X.topk_indices_buffer is not None`` (or ``is None``): whether it
    holds when the buffer is None. None for anything else."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1):
        return None
    left, op, right = node.left, node.ops[0], node.comparators[0]
    if isinstance(left, ast.Constant) and left.value is None:
        left, right = right, left
    if not (is_buffer(left) and isinstance(right, ast.Constant) and right.value is None):
        return None
    return {ast.IsNot: False, ast.Is: True}.get(type(op))


def names_buffer(node: ast.AST) -> bool:
    """The buffer's name appears in ``node`` (attribute, name or string)."""
    for n in ast.walk(node):
        kind = type(n)
        if (
            (kind is ast.Attribute and n.attr == BUFFER_ATTR)
            or (kind is ast.Name and n.id == BUFFER_ATTR)
            or (kind is ast.Constant and n.value == BUFFER_ATTR)
        ):
            return True
    return False


# --- values -------------------------------------------------------------------

# Kinds of abstract value.
CONST, LAYER, CLS, FUNC, OPAQUE, UNBOUND, MAYBE_UNBOUND, FWD_CONTEXT = (
    "const", "layer", "class", "function", "opaque", "unbound", "maybe-unbound", "context"
)


@dataclass(frozen=True)
class _Val:
    kind: str
    data: object = None
    derived: bool = False

    def mark(self, derived: bool) -> "_Val":
        return self if not derived or self.derived else _Val(self.kind, self.data, True)


_LAYER = _Val(LAYER)
_CLASS = _Val(CLS)
_NONE = _Val(CONST, None)
_OPAQUE = _Val(OPAQUE)
_DERIVED = _Val(OPAQUE, derived=True)
_UNBOUND = _Val(UNBOUND)


def _const(value, derived=False) -> _Val:
    return _Val(CONST, value, derived)


def _join(a: _Val, b: _Val) -> _Val:
    if a == b:
        return a
    derived = a.derived or b.derived
    if UNBOUND in (a.kind, b.kind) or MAYBE_UNBOUND in (a.kind, b.kind):
        return _Val(MAYBE_UNBOUND, derived=derived)
    if a.kind == CONST and b.kind == CONST and type(a.data) is type(b.data) and a.data == b.data:
        return _const(a.data, derived)
    if a.kind in (CONST, OPAQUE) and b.kind in (CONST, OPAQUE):
        return _Val(OPAQUE, derived=derived)
    # The layer, its class or a function joined with something else: handing
    # it on may hand the layer on.
    return _DERIVED


def _truth(v: _Val) -> bool | None:
    if v.kind == CONST:
        return bool(v.data)
    if v.kind in (LAYER, CLS, FUNC, FWD_CONTEXT):
        return True
    return None


_CONST_TYPES = (type(None), bool, int, float, str, bytes, tuple, frozenset, slice)

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
    ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.BitAnd: operator.and_,
}
_CMPOPS = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_,
    ast.IsNot: operator.is_not, ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_UNARY = {ast.Not: operator.not_, ast.USub: operator.neg, ast.UAdd: operator.pos,
          ast.Invert: operator.invert}
# Builtins computed on constants.
_PURE_BUILTINS = {"bool": bool, "int": int, "len": len, "min": min, "max": max,
                  "abs": abs, "round": round, "str": str, "float": float, "tuple": tuple}
# Exception classes a handler may name, with their bases.
_EXC_BASES = {
    "AssertionError": "Exception", "AttributeError": "Exception", "TypeError": "Exception",
    "ValueError": "Exception", "RuntimeError": "Exception", "NameError": "Exception",
    "UnboundLocalError": "NameError", "ZeroDivisionError": "ArithmeticError",
    "ArithmeticError": "Exception", "OverflowError": "ArithmeticError",
    "IndexError": "LookupError", "KeyError": "LookupError", "LookupError": "Exception",
    "NotImplementedError": "RuntimeError", "Exception": "BaseException",
}
# Context managers that never swallow an exception.
_PLAIN_CONTEXTS = {"no_grad", "inference_mode", "enable_grad", "set_grad_enabled",
                   "nullcontext", "record_function", "autocast"}


def _is_a(exc: str, handler: str) -> bool:
    while exc:
        if exc == handler:
            return True
        exc = _EXC_BASES.get(exc, "BaseException" if exc != "BaseException" else "")
    return False


# --- the module -----------------------------------------------------------------


def _stmt_binds(stmt: ast.stmt) -> set[str]:
    """Names a statement of a class or module body binds at that level."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    return _local_names([stmt])


def _local_names(body) -> set[str]:
    """Names bound in ``body``'s own scope (not in nested functions)."""
    names: set[str] = set()

    def visit(node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            for d in [*node.decorator_list, *getattr(node, "bases", [])]:
                visit(d)
            return
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
        for child in ast.iter_child_nodes(node):
            if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                if isinstance(child, ast.comprehension):
                    for part in [child.iter, *child.ifs]:
                        visit(part)  # walrus targets leak out; loop targets do not
                    continue
            visit(child)

    for stmt in body:
        visit(stmt)
    return names


class _Module:
    """What the walk may know of the module: the class's functions and
    plain attributes, module functions, module-level names, aliases."""

    def __init__(self, tree, cls, methods):
        self.methods = methods
        self.class_attrs: dict[str, ast.stmt] = {}
        self.functions: dict[str, ast.FunctionDef] = {}
        self.module_names: set[str] = set()
        self.forward_context_names: set[str] = set()
        self.aliases: set[str] = set()
        if cls is not None:
            for stmt in cls.body:
                if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    for name in _stmt_binds(stmt):
                        self.class_attrs[name] = stmt
        if tree is None:
            return
        counts: dict[str, int] = {}
        for stmt in tree.body:
            for name in _stmt_binds(stmt):
                counts[name] = counts.get(name, 0) + 1
            self.module_names |= _stmt_binds(stmt)
        if "get_forward_context" not in counts:
            self.forward_context_names.add("get_forward_context")
        for stmt in tree.body:
            if isinstance(stmt, ast.FunctionDef) and counts.get(stmt.name) == 1:
                self.functions[stmt.name] = stmt
            if isinstance(stmt, ast.ImportFrom) and (stmt.module or "").endswith("forward_context"):
                for alias in stmt.names:
                    if alias.name == "get_forward_context" and counts.get(
                        alias.asname or alias.name
                    ) == 1:
                        self.forward_context_names.add(alias.asname or alias.name)
        # R1: attributes that ever receive a value naming the buffer.
        for node in ast.walk(tree):
            if type(node) in (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr):
                value = getattr(node, "value", None)
                if value is None or not names_buffer(value):
                    continue
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for t in ast.walk(target):
                        if isinstance(t, ast.Attribute) and t.attr != BUFFER_ATTR:
                            self.aliases.add(t.attr)
            elif type(node) is ast.Call and type(node.func) is ast.Name and (
                node.func.id == "setattr" and len(node.args) >= 3 and names_buffer(node.args[2])
            ):
                name = node.args[1]
                if isinstance(name, ast.Constant) and isinstance(name.value, str):
                    self.aliases.add(name.value)
                else:
                    self.aliases.add("*")


# --- the walk ---------------------------------------------------------------------

SURE, MAYBE = 2, 1


class _Found(Exception):
    """Ends a walk early: nothing after an ``unknown`` can change it."""


@dataclass
class _State:
    env: dict  # local name -> _Val
    reach: int
    total: bool = True  # every path that entered the block is still here

    def copy(self, reach: int | None = None) -> "_State":
        return _State(dict(self.env), self.reach if reach is None else reach, True)


def _join_states(states: list, locals_: set) -> _State | None:
    states = [s for s in states if s is not None]
    if not states:
        return None
    env = {}
    for name in set().union(*(s.env for s in states)):
        missing = _OPAQUE if name.startswith("self.") else _UNBOUND
        values = [s.env.get(name, missing) for s in states]
        value = values[0]
        for v in values[1:]:
            value = _join(value, v)
        env[name] = value
    return _State(env, max(s.reach for s in states), all(s.total for s in states))


class _Scope:
    """One function being walked."""

    def __init__(self, function, outer: "_Scope | None", closure: dict | None):
        self.function = function
        args = function.args
        self.params = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
        if args.vararg:
            self.params.append(args.vararg.arg)
        if args.kwarg:
            self.params.append(args.kwarg.arg)
        body = function.body if isinstance(function.body, list) else [function.body]
        self.locals = _local_names(body) | set(self.params)
        self.outer = outer
        self.closure = closure  # the enclosing scope's env, read at call time
        self.returns: list[tuple[_Val, int]] = []
        self.steered = False  # the rest of this function runs for lack of the buffer
        self.breaks: list[list] = []
        self.continues: list[list] = []


class _Walk:
    def __init__(self, module: _Module, ratio: int):
        self.module = module
        self.ratio = ratio
        self.certain: list[tuple[int, str]] = []
        self.doubts: list[tuple[int, str]] = []
        self.entered: list = []  # functions the run called
        self.chosen = 0  # > 0 inside code a derived decided test chose
        self.handlers: list[list] = []  # active try handlers, innermost last
        self.stack: list = []

    # -- findings -------------------------------------------------------------
    def doubt(self, node, what: str) -> None:
        self.doubts.append((getattr(node, "lineno", 0), what))
        raise _Found

    def crash(self, node, st: _State, exc: str, what: str) -> None:
        """R3: ``exc`` raised at ``node``; a try may take it."""
        for level in reversed(self.handlers):
            sure_catch = None
            for names, caught in level:
                if names is None or any(_is_a(exc, n) for n in names):
                    sure_catch = caught
                    break
            if sure_catch is not None:
                raise _Unreachable  # the handler takes it: this path ends here
        if st.reach == SURE and not self.doubts:
            self.certain.append((getattr(node, "lineno", 0), what))
            raise _Found
        self.doubt(node, f"may fail: {what}")

    def escape(self, node, v: _Val, where: str) -> None:
        """R4: ``v`` handed to code the walk cannot see."""
        if v.derived:
            self.doubt(node, f"hands a value derived from {BUFFER_ATTR} to {where}")
        if v.kind == FUNC and v.data[0] in ("local", "module", "bound", "plain"):
            self.called_later(node, v)
            return
        if v.kind in (LAYER, CLS, FUNC, FWD_CONTEXT):
            self.doubt(node, f"hands the layer's {v.kind} to {where}")
        if v.kind in (UNBOUND, MAYBE_UNBOUND):
            self.doubt(node, "may read a local before it is bound")

    def called_later(self, node, v: _Val) -> None:
        """One of this module's functions handed to outside code: walked as
        if called there, with arguments the walk cannot see."""
        how, function, receiver, outer, closure = v.data
        a = function.args
        n = len([*a.posonlyargs, *a.args]) - (1 if how == "bound" else 0)
        args = ([receiver] if how == "bound" else []) + [_OPAQUE] * max(n, 0)
        kwargs = {p.arg: _OPAQUE for p in a.kwonlyargs}
        try:
            self.call_function(function, args, kwargs, node, outer, closure,
                               _State({}, MAYBE))
        except _Unreachable:
            pass

    # -- functions ------------------------------------------------------------
    def call_function(self, function, args: list, kwargs: dict, node, outer,
                      closure: dict | None = None, st: _State | None = None) -> _Val | None:
        """Walk ``function`` called with these values; its return value, or
        None where no path returns."""
        if any(f is function for f in self.stack):
            self.doubt(node, f"calls {getattr(function, 'name', 'a lambda')} recursively")
        if len(self.stack) >= MAX_CALL_DEPTH:
            self.doubt(node, f"nests calls deeper than {MAX_CALL_DEPTH}")
        if getattr(function, "decorator_list", []) and not any(
            function is m for m in self.module.methods.values()
        ):
            self.doubt(node, "calls a decorated function")
        scope = _Scope(function, outer, closure)
        env = self._bind(function, args, kwargs, node, st)
        self.stack.append(function)
        self.entered.append(function)
        try:
            state = _State(env, st.reach if st is not None else SURE)
            if isinstance(function, ast.Lambda):
                return self.expr(function.body, state, scope)
            for stmt in function.body:
                if isinstance(stmt, (ast.Global, ast.Nonlocal)):
                    self.doubt(stmt, "declares global or nonlocal names")
            end = self.block(function.body, state, scope)
        finally:
            self.stack.pop()
        values = [v for v, _ in scope.returns]
        if end is not None:
            values.append(_NONE)
        if not values:
            return None
        result = values[0]
        for v in values[1:]:
            result = _join(result, v)
        return result

    def _bind(self, function, args: list, kwargs: dict, node, st) -> dict:
        a = function.args
        positional = [p.arg for p in [*a.posonlyargs, *a.args]]
        env: dict = {}
        if any(v is None for v in args):  # a starred argument
            extra = _DERIVED if any(v is not None and v.derived for v in args) else _OPAQUE
            for name in self._all_params(function):
                env[name] = extra
            return env
        for name, value in zip(positional, args):
            env[name] = value
        rest = args[len(positional):]
        if rest:
            if not a.vararg:
                self.crash(node, st or _State({}, SURE), "TypeError", "calls with too many arguments")
            env[a.vararg.arg] = _Val(OPAQUE, derived=any(v.derived or v.kind != CONST for v in rest))
        elif a.vararg:
            env[a.vararg.arg] = _const(())
        extra_kw = {}
        kwonly = [p.arg for p in a.kwonlyargs]
        for key, value in kwargs.items():
            if key in positional[len(args):] or key in kwonly:
                env[key] = value
            elif a.kwarg:
                extra_kw[key] = value
            else:
                self.crash(node, st or _State({}, SURE), "TypeError", f"passes an unknown keyword {key}")
        if a.kwarg:
            env[a.kwarg.arg] = _Val(OPAQUE, derived=any(
                v.derived or v.kind != CONST for v in extra_kw.values()))
        defaults = dict(zip(positional[len(positional) - len(a.defaults):], a.defaults))
        defaults.update({p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
        for name in [*positional, *kwonly]:
            if name not in env:
                if name not in defaults:
                    self.crash(node, st or _State({}, SURE), "TypeError", f"leaves {name} without a value")
                d = defaults[name]
                env[name] = _const(d.value) if isinstance(d, ast.Constant) else _OPAQUE
        return env

    @staticmethod
    def _all_params(function) -> list[str]:
        a = function.args
        names = [p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
        return names + [p.arg for p in (a.vararg, a.kwarg) if p]

    # -- statements -----------------------------------------------------------
    def block(self, stmts, st: _State | None, scope: _Scope) -> _State | None:
        for stmt in stmts:
            if st is None:
                return None
            try:
                st = self.stmt(stmt, st, scope)
            except _Unreachable:
                return None
        return st

    def stmt(self, s: ast.stmt, st: _State, scope: _Scope) -> _State | None:
        if isinstance(s, ast.Expr):
            self.expr(s.value, st, scope)
            return st
        if isinstance(s, ast.Pass):
            return st
        if isinstance(s, ast.Assign):
            value = self.expr(s.value, st, scope)
            for target in s.targets:
                self.store(target, value, st, scope)
            return st
        if isinstance(s, ast.AnnAssign):
            if s.value is not None:
                self.store(s.target, self.expr(s.value, st, scope), st, scope)
            return st
        if isinstance(s, ast.AugAssign):
            target = s.target
            load = ast.copy_location(
                type(target)(**{**{f: getattr(target, f) for f in target._fields}, "ctx": ast.Load()}),
                target,
            )
            current = self.expr(load, st, scope)
            value = self.binop(s, current, s.op, self.expr(s.value, st, scope), st)
            self.store(target, value, st, scope)
            return st
        if isinstance(s, ast.Assert):
            return self.test_then(s, s.test, st, scope, assertion=s)
        if isinstance(s, ast.If):
            test = self.expr(s.test, st, scope)
            return self.branch(s, test, [s.body, s.orelse], st, scope)
        if isinstance(s, ast.Return):
            value = self.expr(s.value, st, scope) if s.value is not None else _NONE
            scope.returns.append((value.mark(self.steered(scope)), st.reach))
            return None
        if isinstance(s, ast.Raise):
            exc = None
            if s.exc is not None:
                target = s.exc.func if isinstance(s.exc, ast.Call) else s.exc
                if (
                    isinstance(target, ast.Name)
                    and target.id in _EXC_BASES
                    and target.id not in self.module.module_names
                ):
                    exc = target.id  # a builtin exception: only its arguments run
                    for arg in getattr(s.exc, "args", []):
                        self.expr(arg, st, scope)
                else:
                    self.expr(s.exc, st, scope)
            if s.cause is not None:
                self.expr(s.cause, st, scope)
            self.crash(s, st, exc or "?", "raises")
            return None
        if isinstance(s, (ast.Break, ast.Continue)):
            if not scope.breaks:
                self.doubt(s, "breaks outside a loop")
            (scope.breaks if isinstance(s, ast.Break) else scope.continues)[-1].append(st)
            return None
        if isinstance(s, (ast.For, ast.While)):
            return self.loop(s, st, scope)
        if isinstance(s, ast.Try):
            return self.try_(s, st, scope)
        if isinstance(s, ast.With):
            return self.with_(s, st, scope)
        if isinstance(s, ast.Match):
            return self.match(s, st, scope)
        if isinstance(s, ast.FunctionDef):
            if s.decorator_list:
                self.doubt(s, "defines a decorated function")
            for d in [*s.args.defaults, *(d for d in s.args.kw_defaults if d)]:
                self.expr(d, st, scope)
            st.env[s.name] = _Val(FUNC, ("local", s, None, scope, st.env))
            return st
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            for alias in s.names:
                st.env[(alias.asname or alias.name).split(".")[0]] = _OPAQUE
            return st
        if isinstance(s, ast.Delete):
            for target in s.targets:
                if not isinstance(target, ast.Name):
                    self.doubt(s, "deletes an attribute or item")
                self.expr(ast.copy_location(ast.Name(target.id, ast.Load()), target), st, scope)
                st.env[target.id] = _UNBOUND
            return st
        self.doubt(s, f"reaches a statement the walk does not model ({type(s).__name__})")
        return None

    def test_then(self, node, test_node, st, scope, assertion=None):
        """An ``assert``: pass, fail, or (undecided) both."""
        test = self.expr(test_node, st, scope)
        value = _truth(test)
        if value is None and test.derived:
            self.doubt(node, f"asserts an undecided test derived from {BUFFER_ATTR}")
        if value is True:
            if test.derived:
                scope.steered = True  # with a buffer the run would stop here
            return st
        if assertion.msg is not None:
            self.expr(assertion.msg, st.copy(st.reach if value is False else MAYBE), scope)
        if value is False:
            self.crash(node, st, "AssertionError", "fails an assertion")
            return None
        return st  # an opaque test not derived from the buffer: assumed to hold

    def branch(self, node, test: _Val, arms, st, scope):
        """An ``if``: arms[0] when true, arms[1] when false."""
        value = _truth(test)
        if value is None and test.derived:
            self.doubt(node, f"tests an undecided value derived from {BUFFER_ATTR}")
        if value is not None:
            taken, skipped = (arms[0], arms[1]) if value else (arms[1], arms[0])
            if not test.derived:
                return self.block(taken, st, scope)
            if _can_leave(skipped):
                scope.steered = True  # what follows runs for lack of the buffer
            self.chosen += 1
            try:
                return self.block(taken, st, scope)
            finally:
                self.chosen -= 1
        ends = [self.block(arm, st.copy(MAYBE), scope) for arm in arms]
        return self.merge(st, ends, scope)

    def steered(self, scope) -> bool:
        """R1: this code runs because the buffer is missing (a decided test
        on a derived value chose it): what it stores or returns is derived,
        and outside code it calls is handed the buffer's absence."""
        return self.chosen > 0 or scope.steered

    def merge(self, st: _State, ends: list, scope) -> _State | None:
        """After arms that each start where ``st`` is, at least one taken."""
        joined = _join_states(ends, scope.locals)
        if joined is None:
            return None
        all_go_on = all(e is not None and e.total for e in ends)
        joined.reach = st.reach if all_go_on else MAYBE
        joined.total = st.total and all_go_on
        return joined

    def loop(self, s, st: _State, scope: _Scope) -> _State | None:
        """``for``/``while``: the body walked as maybe reached, again and
        again until the state at its head settles."""
        if isinstance(s, ast.For):
            it = self.expr(s.iter, st, scope)
            if it.kind == CONST and it.data is None:
                self.crash(s, st, "TypeError", "iterates over None")
            if it.kind != CONST:
                self.escape(s.iter, it, "an iterator the walk cannot see")
        head = st.copy(MAYBE)
        normal: list = []  # states that leave by the loop's own test
        breaks: list = []
        total = True
        for _ in range(MAX_LOOP_PASSES):
            body_st = head.copy()
            if isinstance(s, ast.While):
                test = self.expr(s.test, body_st, scope)
                value = _truth(test)
                if value is None and test.derived:
                    self.doubt(s, f"loops on an undecided test derived from {BUFFER_ATTR}")
                if test.derived:
                    scope.steered = True
                if value is not True:
                    normal.append(head)
                if value is False:
                    break
            else:
                normal.append(head)
                it = self.expr(s.iter, body_st, scope)
                element = _Val(OPAQUE, derived=it.derived)
                if it.kind == CONST and isinstance(it.data, (tuple, str, frozenset)) and it.data:
                    element = None
                    for item in it.data:
                        v = _const(item, it.derived)
                        element = v if element is None else _join(element, v)
                self.store(s.target, element, body_st, scope)
            scope.breaks.append([])
            scope.continues.append([])
            try:
                end = self.block(s.body, body_st, scope)
            finally:
                level_breaks, continues = scope.breaks.pop(), scope.continues.pop()
            breaks += level_breaks
            if end is None or not end.total:
                total = False
            new_head = _join_states([head, end, *continues], scope.locals)
            new_head.reach, new_head.total = MAYBE, True
            if new_head.env == head.env:
                break
            head = new_head
        else:
            self.doubt(s, "loops without settling")
        after = _join_states(normal, scope.locals)
        if after is not None and s.orelse:
            after = self.block(s.orelse, after, scope)
        out = _join_states([after, *breaks], scope.locals)
        if out is None:
            return None
        sure = total and not breaks and after is not None and isinstance(s, ast.For)
        out.reach = st.reach if sure else MAYBE
        out.total = st.total and sure
        return out

    def _maybe_entry(self, st: _State, body) -> _State:
        """The state where an exception out of ``body`` may leave it: any
        name the body binds holds any value."""
        entry = st.copy(MAYBE)
        for name in _local_names(body):
            entry.env[name] = _join(st.env.get(name, _UNBOUND), _DERIVED)
        for stmt in body:
            for n in ast.walk(stmt):
                if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
                    entry.env["self." + n.attr] = _DERIVED
        return entry

    def try_(self, s: ast.Try, st: _State, scope: _Scope) -> _State | None:
        level = [(self._handler_names(h, st, scope), []) for h in s.handlers]
        self.handlers.append(level)
        try:
            end = self.block(s.body, st.copy(), scope)
        finally:
            self.handlers.pop()
        if end is not None and s.orelse:
            end = self.block(s.orelse, end, scope)
        ends = [end]
        for handler in s.handlers:
            h = self._maybe_entry(st, s.body)
            if handler.name:
                h.env[handler.name] = _OPAQUE
            ends.append(self.block(handler.body, h, scope))
        out = _join_states(ends, scope.locals)
        if out is not None:
            sure = all(e is not None and e.total for e in ends)
            out.reach = st.reach if sure else MAYBE
            out.total = st.total and sure
        if s.finalbody:
            fin_st = out if out is not None else self._maybe_entry(st, s.body)
            fin = self.block(s.finalbody, fin_st, scope)
            return fin if out is not None else None
        return out

    def _handler_names(self, handler, st, scope):
        if handler.type is None:
            return None
        types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        names = []
        for t in types:
            self.expr(t, st, scope)
            if isinstance(t, ast.Name) and t.id in _EXC_BASES | {"BaseException": ""}:
                if t.id == "BaseException":
                    return None
                names.append(t.id)
        return names

    def with_(self, s: ast.With, st: _State, scope: _Scope) -> _State | None:
        plain = True
        for item in s.items:
            cm = self.expr(item.context_expr, st, scope)
            self.escape(item.context_expr, cm, "a context manager")
            call = item.context_expr
            name = call.func if isinstance(call, ast.Call) else call
            name = name.attr if isinstance(name, ast.Attribute) else getattr(name, "id", "")
            plain = plain and name in _PLAIN_CONTEXTS
            if item.optional_vars is not None:
                self.store(item.optional_vars, _OPAQUE, st, scope)
        end = self.block(s.body, st.copy() if not plain else st, scope)
        if plain:
            return end
        # Crashes in the body count as crashes; but a context manager may
        # swallow an exception of outside code and go on after the block.
        out = _join_states([end, self._maybe_entry(st, s.body)], scope.locals)
        out.reach = MAYBE
        out.total = False
        return out

    def match(self, s: ast.Match, st: _State, scope: _Scope) -> _State | None:
        subject = self.expr(s.subject, st, scope)
        ends = []
        cur = st
        for case in s.cases:
            if cur is None:
                continue
            outcome = self._pattern(case.pattern, subject, cur, scope)
            if outcome is not None and subject.derived:
                scope.steered = True
            if outcome is False:
                continue
            if outcome is None and subject.derived:
                self.doubt(case.pattern, f"matches an undecided value derived from {BUFFER_ATTR}")
            arm = cur if outcome is True else cur.copy(MAYBE)
            guard = True
            if case.guard is not None:
                g = self.expr(case.guard, arm, scope)
                guard = _truth(g)
                if guard is None and g.derived:
                    self.doubt(case.guard, f"guards on a value derived from {BUFFER_ATTR}")
            if guard is False:
                continue
            if outcome is True and guard is True:
                ends.append(self.block(case.body, arm, scope))
                cur = None
            else:
                ends.append(self.block(case.body, arm.copy(MAYBE) if arm is cur else arm, scope))
                cur = cur.copy(MAYBE) if cur is not None else None
        if cur is not None:
            ends.append(cur)
        return self.merge(st, ends, scope)

    def _pattern(self, p, subject: _Val, st, scope) -> bool | None:
        """Whether pattern ``p`` matches; binds captured names."""
        if isinstance(p, ast.MatchAs):
            if p.pattern is None:
                if p.name:
                    st.env[p.name] = subject
                return True
            result = self._pattern(p.pattern, subject, st, scope)
            if p.name:
                st.env[p.name] = subject
            return result
        if isinstance(p, ast.MatchOr):
            results = [self._pattern(q, subject, st, scope) for q in p.patterns]
            if True in results:
                return True
            return False if all(r is False for r in results) else None
        if subject.kind == CONST and isinstance(p, ast.MatchValue):
            value = self.expr(p.value, st, scope)
            if value.kind == CONST:
                return subject.data == value.data
        if subject.kind == CONST and isinstance(p, ast.MatchSingleton):
            return subject.data is p.value
        self.escape(p, subject, "a match pattern")
        for n in ast.walk(p):
            if isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
                st.env[n.name] = _Val(OPAQUE, derived=subject.derived)
        return None

    # -- stores ---------------------------------------------------------------
    def store(self, target, value: _Val, st: _State, scope: _Scope) -> None:
        value = value.mark(self.steered(scope))
        if isinstance(target, ast.Name):
            st.env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if value.kind == CONST and isinstance(value.data, tuple) and len(value.data) == len(
                target.elts
            ) and not any(isinstance(e, ast.Starred) for e in target.elts):
                for t, v in zip(target.elts, value.data):
                    self.store(t, _const(v, value.derived), st, scope)
                return
            if value.kind == CONST:
                self.crash(target, st, "TypeError", "unpacks a value that does not unpack")
            self.escape(target, value, "an unpacking")
            for t in target.elts:
                self.store(t.value if isinstance(t, ast.Starred) else t,
                           _Val(OPAQUE, derived=value.derived), st, scope)
        elif isinstance(target, ast.Attribute):
            base = self.expr(target.value, st, scope)
            if base.kind == LAYER:
                attr = target.attr
                if attr in self.module.methods or attr in self.module.class_attrs or attr in (
                    BUFFER_ATTR, RATIO_ATTR
                ):
                    self.doubt(target, f"assigns the layer's {attr}")
                if value.derived or value.kind not in (CONST, OPAQUE):
                    self.doubt(target, f"stores {value.kind} value in the layer's {attr}")
                st.env["self." + attr] = value
            elif base.kind == CONST:
                self.crash(target, st, "AttributeError", "sets an attribute of a constant")
            else:
                self.escape(target, base, "an attribute store")
                self.escape(target, value, "an attribute of outside code")
        elif isinstance(target, ast.Subscript):
            base = self.expr(target.value, st, scope)
            index = self.expr(target.slice, st, scope)
            if base.kind == CONST:
                self.crash(target, st, "TypeError", "assigns into a constant")
            for v in (base, index, value):
                self.escape(target, v, "an item store")
        elif isinstance(target, ast.Starred):
            self.store(target.value, _Val(OPAQUE, derived=value.derived), st, scope)
        else:
            self.doubt(target, "assigns to a target the walk does not model")

    # -- expressions ----------------------------------------------------------
    def expr(self, e: ast.expr, st: _State, scope: _Scope) -> _Val:
        method = getattr(self, "_" + type(e).__name__, None)
        if method is None:
            self.doubt(e, f"reaches an expression the walk does not model ({type(e).__name__})")
        return method(e, st, scope)

    def _Constant(self, e, st, scope):
        return _const(e.value) if isinstance(e.value, _CONST_TYPES) else _OPAQUE

    def _Name(self, e, st, scope):
        if e.id in scope.locals:
            value = st.env.get(e.id, _UNBOUND)
            if value.kind == UNBOUND:
                self.crash(e, st, "UnboundLocalError", f"reads {e.id} before it is bound")
            if value.kind == MAYBE_UNBOUND:
                self.doubt(e, f"may read {e.id} before it is bound")
            return value
        s = scope
        while s.closure is not None:
            if e.id in s.outer.locals:
                value = s.closure.get(e.id, _UNBOUND)
                if value.kind in (UNBOUND, MAYBE_UNBOUND):
                    self.doubt(e, f"may read {e.id} before it is bound")
                return value
            s = s.outer
        if e.id == CLASS_NAME:
            return _CLASS
        if e.id in self.module.functions:
            return _Val(FUNC, ("module", self.module.functions[e.id], None, None, None))
        if e.id in self.module.forward_context_names:
            return _Val(FUNC, ("forward-context", None, None, None, None))
        if e.id in self.module.module_names:
            return _OPAQUE
        if e.id in _PURE_BUILTINS or e.id in ("getattr", "hasattr", "isinstance", "type", "super"):
            return _Val(FUNC, ("builtin", e.id, None, None, None))
        return _OPAQUE

    def _Attribute(self, e, st, scope):
        base = self.expr(e.value, st, scope)
        return self.attribute(e, base, e.attr, st)

    def attribute(self, e, base: _Val, attr: str, st) -> _Val:
        if base.kind == LAYER:
            return self.layer_attribute(e, attr, st)
        if base.kind == CLS:
            function = self.module.methods.get(attr)
            if function is not None:
                kind = self._method_kind(e, function)
                if kind == "classmethod":
                    return _Val(FUNC, ("bound", function, _CLASS, None, None))
                return _Val(FUNC, ("plain", function, None, None, None))
            if attr in self.module.class_attrs:
                return self.class_attribute(e, attr)
            return _OPAQUE
        if base.kind == FWD_CONTEXT:
            return _NONE if attr == "attn_metadata" else _OPAQUE
        if base.kind == CONST:
            if base.data is None:
                self.crash(e, st, "AttributeError", f"reads .{attr} of None")
            try:
                value = getattr(base.data, attr)
            except AttributeError:
                self.crash(e, st, "AttributeError", f"reads .{attr} of a constant")
            if isinstance(value, _CONST_TYPES):
                return _const(value, base.derived)
            return _Val(OPAQUE, derived=base.derived)
        if base.kind == OPAQUE:
            return base
        if base.kind == FUNC:
            self.doubt(e, "reads an attribute of a function")
        self.doubt(e, "reads an attribute of a value that may be unbound")

    def _method_kind(self, e, function) -> str:
        names = {_decorator_name(d) for d in function.decorator_list}
        if not function.decorator_list:
            return "plain"
        if len(function.decorator_list) == 1 and names <= {"staticmethod", "classmethod",
                                                           "property", "cached_property"}:
            return names.pop()
        self.doubt(e, f"reaches {function.name}, decorated with code the walk cannot see")

    def layer_attribute(self, e, attr: str, st) -> _Val:
        if "self." + attr in st.env:
            return st.env["self." + attr]
        if attr == BUFFER_ATTR:
            return _const(None, derived=True)
        if attr == RATIO_ATTR:
            return _const(self.ratio)
        function = self.module.methods.get(attr)
        if function is not None:
            kind = self._method_kind(e, function)
            if isinstance(function, ast.AsyncFunctionDef):
                self.doubt(e, f"reaches {attr}, an async method")
            if kind in ("property", "cached_property"):
                result = self.call_function(function, [_LAYER], {}, e, None, st=st)
                if result is None:
                    raise _Unreachable  # the getter never returns
                return result
            if kind == "staticmethod":
                return _Val(FUNC, ("plain", function, None, None, None))
            if kind == "classmethod":
                return _Val(FUNC, ("bound", function, _CLASS, None, None))
            return _Val(FUNC, ("bound", function, _LAYER, None, None))
        if attr in self.module.class_attrs:
            return self.class_attribute(e, attr)
        if attr in self.module.aliases or "*" in self.module.aliases:
            return _DERIVED
        if attr.startswith("__") and attr.endswith("__"):
            self.doubt(e, f"reads the layer's {attr}")
        return _OPAQUE

    def class_attribute(self, e, attr: str) -> _Val:
        stmt = self.module.class_attrs[attr]
        value = getattr(stmt, "value", None)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and isinstance(value, ast.Constant):
            return _const(value.value) if isinstance(value.value, _CONST_TYPES) else _OPAQUE
        self.doubt(e, f"reads {attr}, a class attribute the walk cannot see into")

    def _Subscript(self, e, st, scope):
        base = self.expr(e.value, st, scope)
        index = self.expr(e.slice, st, scope)
        if base.kind == CONST:
            if base.data is None:
                self.crash(e, st, "TypeError", "subscripts None")
            if index.kind == CONST:
                try:
                    return _const(base.data[index.data], base.derived or index.derived)
                except Exception as exc:
                    self.crash(e, st, type(exc).__name__, "subscripts a constant out of range")
        if base.kind in (LAYER, CLS, FUNC):
            self.doubt(e, "subscripts the layer, its class or a function")
        for v in (base, index):
            if v.kind != CONST:
                self.escape(e, index if v is base else base, "an item lookup")
        return _Val(OPAQUE, derived=base.derived or index.derived)

    def _Slice(self, e, st, scope):
        vals = [self.expr(p, st, scope) if p is not None else _NONE
                for p in (e.lower, e.upper, e.step)]
        derived = any(v.derived for v in vals)
        if all(v.kind == CONST for v in vals):
            return _const(slice(*(v.data for v in vals)), derived)
        for v in vals:
            if v.kind != OPAQUE:
                self.escape(e, v, "a slice")
        return _Val(OPAQUE, derived=derived)

    def _Tuple(self, e, st, scope):
        values = [self.expr(x.value if isinstance(x, ast.Starred) else x, st, scope) for x in e.elts]
        derived = any(v.derived for v in values)
        if not any(isinstance(x, ast.Starred) for x in e.elts) and all(
            v.kind == CONST for v in values
        ):
            return _const(tuple(v.data for v in values), derived)
        for v in values:
            if v.kind in (LAYER, CLS, FUNC, MAYBE_UNBOUND):
                self.escape(e, v, "a container")
        return _Val(OPAQUE, derived=derived)

    def _List(self, e, st, scope):
        return _Val(OPAQUE, derived=self._Tuple(e, st, scope).derived)

    _Set = _List

    def _Dict(self, e, st, scope):
        values = [self.expr(x, st, scope) for x in [*filter(None, e.keys), *e.values]]
        for v in values:
            if v.kind in (LAYER, CLS, FUNC, MAYBE_UNBOUND):
                self.escape(e, v, "a container")
        return _Val(OPAQUE, derived=any(v.derived for v in values))

    def _JoinedStr(self, e, st, scope):
        derived = False
        for part in e.values:
            if isinstance(part, ast.FormattedValue):
                v = self.expr(part.value, st, scope)
                if part.format_spec is not None:
                    self.expr(part.format_spec, st, scope)
                if v.kind != CONST:
                    self.escape(part, v, "a format")
                derived = derived or v.derived
        return _Val(OPAQUE, derived=derived)

    def _FormattedValue(self, e, st, scope):
        return self._JoinedStr(ast.JoinedStr(values=[e]), st, scope)

    def _NamedExpr(self, e, st, scope):
        value = self.expr(e.value, st, scope)
        self.store(e.target, value, st, scope)
        return value

    def _Lambda(self, e, st, scope):
        for d in [*e.args.defaults, *(d for d in e.args.kw_defaults if d)]:
            self.expr(d, st, scope)
        return _Val(FUNC, ("local", e, None, scope, st.env))

    def _IfExp(self, e, st, scope):
        test = self.expr(e.test, st, scope)
        value = _truth(test)
        if value is None and test.derived:
            self.doubt(e, f"chooses on an undecided value derived from {BUFFER_ATTR}")
        if value is not None:
            self.chosen += test.derived
            try:
                return self.expr(e.body if value else e.orelse, st, scope).mark(test.derived)
            finally:
                self.chosen -= test.derived
        results = []
        for arm in (e.body, e.orelse):
            arm_st = st.copy(MAYBE)
            try:
                results.append((self.expr(arm, arm_st, scope), arm_st))
            except _Unreachable:
                pass
        if not results:
            raise _Unreachable
        for name in set().union(*(a.env for _, a in results)):  # walrus in an arm
            values = [a.env.get(name, _UNBOUND) for _, a in results]
            st.env[name] = values[0] if len(values) == 1 else _join(values[0], values[1])
        value = results[0][0]
        for v, _ in results[1:]:
            value = _join(value, v)
        return value

    def _BoolOp(self, e, st, scope):
        is_and = isinstance(e.op, ast.And)
        cur = st
        results = []
        steering = 0
        try:
            for part in e.values:
                try:
                    v = self.expr(part, cur, scope)
                except _Unreachable:
                    if cur is st:
                        raise
                    break
                results.append(v)
                truth = _truth(v)
                if truth is None and v.derived:
                    self.doubt(part, f"tests an undecided value derived from {BUFFER_ATTR}")
                if truth is (not is_and):  # short-circuit: this value is the result
                    break
                if truth is None:
                    cur = cur.copy(MAYBE)
                elif v.derived and not steering:
                    steering = 1  # the next operands run because of the buffer
                    self.chosen += 1
        finally:
            self.chosen -= steering
        if len(results) == 1 or all(_truth(v) is not None for v in results):
            return results[-1].mark(any(v.derived for v in results))
        value = results[0]
        for v in results[1:]:
            value = _join(value, v)
        if cur is not st:
            for name, v in cur.env.items():
                st.env[name] = _join(st.env.get(name, _UNBOUND), v)
        return value

    def _UnaryOp(self, e, st, scope):
        v = self.expr(e.operand, st, scope)
        if isinstance(e.op, ast.Not):
            truth = _truth(v)
            if truth is not None:
                return _const(not truth, v.derived)
            return _Val(OPAQUE, derived=v.derived)
        if v.kind == CONST:
            try:
                return _const(_UNARY[type(e.op)](v.data), v.derived)
            except Exception as exc:
                self.crash(e, st, type(exc).__name__, "applies an operator a constant does not support")
        self.escape(e, v, "an operator")
        return _Val(OPAQUE, derived=v.derived)

    def _BinOp(self, e, st, scope):
        return self.binop(e, self.expr(e.left, st, scope), e.op, self.expr(e.right, st, scope), st)

    def binop(self, e, a: _Val, op, b: _Val, st) -> _Val:
        if a.kind == CONST and b.kind == CONST:
            try:
                result = _BINOPS[type(op)](a.data, b.data)
            except Exception as exc:
                self.crash(e, st, type(exc).__name__, "applies an operator to None or a constant that does not support it")
            return _const(result, a.derived or b.derived) if isinstance(result, _CONST_TYPES) else _Val(OPAQUE, derived=a.derived or b.derived)
        for v in (a, b):
            if v.kind != OPAQUE or v.derived:
                self.escape(e, v, "an operator")
        return _Val(OPAQUE, derived=a.derived or b.derived)

    def _Compare(self, e, st, scope):
        left = self.expr(e.left, st, scope)
        result = None
        cur = st
        for op, right_node in zip(e.ops, e.comparators):
            right = self.expr(right_node, cur, scope)
            r = self.compare(e, left, op, right, cur)
            result = r if result is None else self._and(result, r)
            if _truth(r) is False:
                break
            left = right
        return result

    def _and(self, a: _Val, b: _Val) -> _Val:
        ta = _truth(a)
        derived = a.derived or b.derived
        if ta is False:
            return a
        if ta is True:
            return b.mark(derived)
        return _Val(OPAQUE, derived=derived)

    def compare(self, e, a: _Val, op, b: _Val, st) -> _Val:
        derived = a.derived or b.derived
        identity = isinstance(op, (ast.Is, ast.IsNot))
        if a.kind == CONST and b.kind == CONST:
            try:
                return _const(bool(_CMPOPS[type(op)](a.data, b.data)), derived)
            except Exception as exc:
                self.crash(e, st, type(exc).__name__, "compares values that do not compare")
        if identity:
            objects = (LAYER, CLS, FUNC, FWD_CONTEXT)
            if (a.kind in objects and b.kind == CONST) or (b.kind in objects and a.kind == CONST):
                return _const(isinstance(op, ast.IsNot), derived)
            if a.kind == LAYER and b.kind == LAYER:
                return _const(isinstance(op, ast.Is), derived)
            for v in (a, b):
                if v.kind in (UNBOUND, MAYBE_UNBOUND):
                    self.escape(e, v, "a comparison")
            return _Val(OPAQUE, derived=derived)
        for v in (a, b):
            if v.kind != OPAQUE or v.derived:
                if not (v.kind == CONST and not v.derived):
                    self.escape(e, v, "a comparison")
        return _Val(OPAQUE, derived=derived)

    def _comprehension(self, e, st, scope, parts):
        inner = st.copy(MAYBE)
        derived = False
        for i, gen in enumerate(e.generators):
            it = self.expr(gen.iter, st if i == 0 else inner, scope)
            if it.kind == CONST and it.data is None:
                self.crash(gen.iter, st, "TypeError", "iterates over None")
            if it.kind != CONST:
                self.escape(gen.iter, it, "an iterator the walk cannot see")
            derived = derived or it.derived
            self._bind_comprehension_target(gen.target, it, inner, scope)
            for cond in gen.ifs:
                c = self.expr(cond, inner, scope)
                if _truth(c) is None and c.derived:
                    self.doubt(cond, f"filters on a value derived from {BUFFER_ATTR}")
        for part in parts:
            v = self.expr(part, inner, scope)
            if v.kind in (LAYER, CLS, FUNC):
                self.escape(part, v, "a container")
            derived = derived or v.derived
        return _Val(OPAQUE, derived=derived)

    def _bind_comprehension_target(self, target, it, inner, scope):
        for n in ast.walk(target):
            if isinstance(n, ast.Name):
                inner.env[n.id] = _Val(OPAQUE, derived=it.derived)
                scope.locals.add(n.id)

    def _ListComp(self, e, st, scope):
        return self._comprehension(e, st, scope, [e.elt])

    _SetComp = _GeneratorExp = _ListComp

    def _DictComp(self, e, st, scope):
        return self._comprehension(e, st, scope, [e.key, e.value])

    def _Starred(self, e, st, scope):
        return self.expr(e.value, st, scope)

    # -- calls ----------------------------------------------------------------
    def _Call(self, e, st, scope):
        func = self.expr(e.func, st, scope)
        if isinstance(e.func, ast.Attribute) and func.kind == OPAQUE and (
            self.expr(e.func.value, st, scope).kind in (LAYER, CLS)
        ):
            self.doubt(e, f"calls {e.func.attr}, which {CLASS_NAME} does not define")
        args: list = []
        for a in e.args:
            if isinstance(a, ast.Starred):
                v = self.expr(a.value, st, scope)
                if v.kind == CONST and isinstance(v.data, tuple):
                    args += [_const(x, v.derived) for x in v.data]
                else:
                    args.append(None)
                    self.escape(a, v, "a starred argument") if v.kind != OPAQUE else None
                    args.append(v)
            else:
                args.append(self.expr(a, st, scope))
        kwargs = {}
        for k in e.keywords:
            v = self.expr(k.value, st, scope)
            if k.arg is None:
                args.append(None)
                self.escape(k, v, "a ** argument") if v.kind != OPAQUE else None
            else:
                kwargs[k.arg] = v
        return self.call(e, func, args, kwargs, st, scope)

    def call(self, e, func: _Val, args: list, kwargs: dict, st, scope) -> _Val:
        values = [v for v in [*args, *kwargs.values()] if v is not None]
        if func.kind == FUNC:
            how, function, receiver, outer, closure = func.data
            if how == "builtin":
                return self.builtin(e, function, args, kwargs, st)
            if how == "forward-context":
                for v in values:
                    self.escape(e, v, "get_forward_context")
                return _Val(FWD_CONTEXT)
            if how == "bound":
                args = [receiver, *args]
            result = self.call_function(function, args, kwargs, e, outer, closure, st)
            if result is None:
                # No path returns: what follows is not reached from here.
                raise _Unreachable
            return result
        if func.kind == CONST:
            self.crash(e, st, "TypeError", "calls None" if func.data is None else "calls a constant")
        if func.kind in (LAYER, CLS):
            self.doubt(e, f"calls the layer's {func.kind}")
        if func.kind in (UNBOUND, MAYBE_UNBOUND):
            self.doubt(e, "calls a value that may be unbound")
        if func.derived:
            self.doubt(e, f"calls a value derived from {BUFFER_ATTR}")
        if self.steered(scope):
            self.doubt(e, f"calls outside code on a path that the missing {BUFFER_ATTR} chose")
        for v in values:
            self.escape(e, v, "a function outside this module")
        return _OPAQUE

    def builtin(self, e, name: str, args: list, kwargs: dict, st) -> _Val:
        if any(v is None for v in args):
            self.doubt(e, f"calls {name} with starred arguments")
        if name == "super":
            self.doubt(e, "calls into a base class (super())")
        if name in ("getattr", "hasattr") and len(args) >= 2 and args[1].kind == CONST and (
            isinstance(args[1].data, str)
        ) and not kwargs:
            obj, attr = args[0], args[1].data
            if name == "hasattr":
                if obj.kind == LAYER:
                    if attr in (BUFFER_ATTR, RATIO_ATTR) or "self." + attr in st.env:
                        return _const(True, attr == BUFFER_ATTR)
                    if attr in self.module.methods or attr in self.module.class_attrs:
                        self.escape(e, obj, "hasattr")
                    return _Val(OPAQUE, derived=attr in self.module.aliases)
                if obj.kind == CONST:
                    return _const(hasattr(obj.data, attr), obj.derived)
                self.escape(e, obj, "hasattr")
                return _Val(OPAQUE, derived=obj.derived)
            if len(args) == 3:
                self.escape(e, obj, "getattr with a default") if obj.kind != LAYER else None
                if obj.kind == LAYER and (
                    "self." + attr in st.env or attr in (BUFFER_ATTR, RATIO_ATTR)
                ):
                    return self.layer_attribute(e, attr, st)
                self.escape(e, args[2], "getattr with a default")
                return _Val(OPAQUE, derived=obj.derived or args[2].derived)
            return self.attribute(e, obj, attr, st)
        if name == "type" and len(args) == 1 and args[0].kind == LAYER and not kwargs:
            return _CLASS
        if name == "isinstance" and len(args) == 2 and not kwargs:
            obj, kind = args
            self.escape(e, kind, "isinstance")
            if obj.kind == LAYER:
                return _OPAQUE
            self.escape(e, obj, "isinstance")
            return _Val(OPAQUE, derived=obj.derived)
        if name in _PURE_BUILTINS and all(v is not None and v.kind == CONST for v in args) and (
            all(v.kind == CONST for v in kwargs.values())
        ):
            try:
                result = _PURE_BUILTINS[name](*[v.data for v in args],
                                              **{k: v.data for k, v in kwargs.items()})
            except Exception as exc:
                self.crash(e, st, type(exc).__name__, f"calls {name} on a value it rejects")
            derived = any(v.derived for v in [*args, *kwargs.values()])
            if isinstance(result, _CONST_TYPES):
                return _const(result, derived)
            return _Val(OPAQUE, derived=derived)
        for v in [*args, *kwargs.values()]:
            self.escape(e, v, f"the builtin {name}")
        return _OPAQUE


class _Unreachable(Exception):
    pass


def _can_leave(stmts) -> bool:
    """``stmts`` may end the function or loop early, or raise."""
    for stmt in stmts:
        for n in ast.walk(stmt):
            if isinstance(n, (ast.Return, ast.Raise, ast.Break, ast.Continue, ast.Assert, ast.Call)):
                return True
    return False


def _decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return "(call)"
    return ""
