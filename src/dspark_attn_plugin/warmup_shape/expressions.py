"""The walk of expressions: names, attributes, operators, calls, builtins."""

from __future__ import annotations

import ast
import builtins

from dspark_attn_plugin.target import (
    CLASS_NAME,
)
from dspark_attn_plugin.warmup_shape.aliases import DELETED, REGISTRY
from dspark_attn_plugin.warmup_shape.as_loaded import private
from dspark_attn_plugin.warmup_shape.state import (
    MAYBE,
    _Scope,
    _is_local,
    _State,
    _Unreachable,
)
from dspark_attn_plugin.warmup_shape.syntax import (
    _own_nodes,
    _decorator_name,
    bound_once,
)
from dspark_attn_plugin.warmup_shape.values import (
    CLS,
    CONST,
    FUNC,
    FWD_CONTEXT,
    HELD_STILL,
    LAYER,
    MAYBE_UNBOUND,
    OPAQUE,
    UNBOUND,
    _BINOPS,
    _CLASS,
    _CMPOPS,
    _CONST_TYPES,
    _DERIVED,
    _LAYER,
    _NONE,
    _OPAQUE,
    _PURE_BUILTINS,
    _UNARY,
    _UNBOUND,
    _Val,
    _const,
    _join,
    _truth,
    iteration_error,
)
from dspark_attn_plugin.warmup_shape.verdict import (
    BUFFER_ATTR,
    RATIO_ATTR,
)


# Builtins that consume a generator handed to them before they return.
_CONSUMING_BUILTINS = frozenset({
    "list", "tuple", "set", "frozenset", "dict", "sorted", "sum", "any", "all", "min", "max",
})


def _no_constant_takes(a, b):
    """``a @ b``: no constant the walk knows supports it."""
    raise TypeError("unsupported operand")


_UNKNOWN_ITEM = object()
MAX_ITEMS = 16


def _distinct(data) -> list:
    """The distinct items of a known iterable constant, at most
    ``MAX_ITEMS`` of them (then one unknown item stands for the rest)."""
    found: list = []
    for item in data:
        if not any(type(item) is type(f) and item == f for f in found):
            if len(found) == MAX_ITEMS:
                return [*found, _UNKNOWN_ITEM]
            found.append(item)
    return found


class ExpressionWalk:
    # -- expressions ----------------------------------------------------------
    def expr(self, e: ast.expr, st: _State, scope: _Scope) -> _Val:
        method = getattr(self, "_" + type(e).__name__, None)
        if method is None:
            self.doubt(e, f"reaches an expression the walk does not model ({type(e).__name__})")
        return method(e, st, scope)

    def _Constant(self, e, st, scope):
        return _const(e.value) if isinstance(e.value, _CONST_TYPES) else _OPAQUE

    def _Name(self, e, st, scope):
        if self.steered(scope) and self.may_hold_an_object(e.id, st, scope):
            self.chosen_read(e, e.id)
        if private(e.id) and e.id not in scope.locals:
            self.doubt(e, f"reads the private name {e.id} (mangled inside a class)")
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
                if not bound_once(s.outer.function, e.id):
                    # A closure reads the cell when it runs, not when it
                    # was made: one binding, outside loops, or unknown.
                    self.doubt(e, f"reads {e.id} from an enclosing function that binds it "
                                  "more than once")
                value = s.closure.get(e.id, _UNBOUND)
                if value.kind in (UNBOUND, MAYBE_UNBOUND):
                    self.doubt(e, f"may read {e.id} before it is bound")
                return value
            s = s.outer
        if e.id == CLASS_NAME:
            return _CLASS
        if e.id in self.module.functions:
            self.module.resolved.add(("function", e.id))
            return _Val(FUNC, ("module", self.module.functions[e.id], None, None, None))
        if e.id in self.module.forward_context_names:
            return _Val(FUNC, ("forward-context", None, None, None, None))
        if e.id in self.module.constants:
            self.module.resolved.add(("constant", e.id, self.module.constants[e.id]))
            return _const(self.module.constants[e.id])
        if e.id in self.module.module_names:
            if e.id in self.module.derived_globals or e.id in self.module.state_names:
                return _DERIVED  # module-level state (R1): anything may have filled it
            return _OPAQUE
        if e.id in _PURE_BUILTINS or e.id in ("getattr", "hasattr", "isinstance", "type", "super"):
            return _Val(FUNC, ("builtin", e.id, None, None, None))
        return _OPAQUE

    def reads_objects(self, nodes, st, scope) -> bool:
        """Whether ``nodes`` (code not run, ``st`` where it would have)
        read an object a read can change: a name (``may_hold_an_object``)
        or an attribute of the layer or its class that is neither the
        buffer, the ratio, nor a method without decorators (a property's
        getter runs code)."""
        for node in nodes:
            for n in ast.walk(node):
                if not isinstance(getattr(n, "ctx", None), ast.Load):
                    continue
                if isinstance(n, ast.Name) and self.may_hold_an_object(n.id, st, scope):
                    return True
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
                    owner = self._owner_kind(n.value.id, st, scope)
                    if owner in (LAYER, CLS) and self._member_may_hold_an_object(n.attr, st):
                        return True
                    if owner == FWD_CONTEXT and n.attr != "attn_metadata":
                        return True  # the forward context's containers: every reader shares them
                elif isinstance(n, ast.Attribute) and not self._is_the_buffer(n.value, st, scope):
                    return True  # an attribute of what an expression gives: any object
        return False

    def _is_the_buffer(self, e, st, scope) -> bool:
        """``e`` is ``<the layer>.topk_indices_buffer``."""
        return (isinstance(e, ast.Attribute) and e.attr == BUFFER_ATTR
                and isinstance(e.value, ast.Name)
                and self._owner_kind(e.value.id, st, scope) == LAYER)

    def _owner_kind(self, name: str, st, scope) -> str | None:
        if name in scope.locals:
            value = st.env.get(name)
            return None if value is None else value.kind
        return CLS if name == CLASS_NAME else None

    def _member_may_hold_an_object(self, attr: str, st) -> bool:
        if "self." + attr in st.env:
            return st.env["self." + attr].kind not in HELD_STILL
        if attr in (BUFFER_ATTR, RATIO_ATTR):
            return False
        function = self.module.methods.get(attr)
        return function is None or bool(function.decorator_list)

    def may_hold_an_object(self, name: str, st, scope) -> bool:
        """Whether ``name``, read where ``st`` holds, may hold an object a
        read can change (running its own code: an iterator ``in`` or a
        loop advances, a defaultdict's missing key, a property): anything
        but a constant, the layer, its class, a function, the forward
        context or a builtin; a local not bound yet holds nothing (what
        binds it made it). Nothing is run: no finding."""
        kept = HELD_STILL + (UNBOUND,)
        if name in scope.locals:
            value = st.env.get(name)
            return value is not None and value.kind not in kept
        s = scope
        while s.closure is not None:
            if name in s.outer.locals:
                value = s.closure.get(name)
                return value is not None and value.kind not in kept
            s = s.outer
        if name == CLASS_NAME or name in self.module.functions or (
            name in self.module.forward_context_names or name in self.module.constants
        ):
            return False
        return name in self.module.module_names or not hasattr(builtins, name)

    def _Attribute(self, e, st, scope):
        base = self.expr(e.value, st, scope)
        steer = 1 if self.steered(scope) else 0
        if steer:
            self.chosen_member(e, base, e.attr, st)
        self.chosen += steer  # a property's getter run here is chosen code too
        try:
            return self.attribute(e, base, e.attr, st)
        finally:
            self.chosen -= steer

    def chosen_member(self, e, base: _Val, attr: str, st) -> None:
        """Chosen code reads ``base.attr`` (``.`` or ``getattr``): an
        attribute of the layer or its class that may hold an object, or
        any of the forward context's but ``attn_metadata`` (its
        containers are shared by every reader)."""
        if (base.kind in (LAYER, CLS) and self._member_may_hold_an_object(attr, st)
                or base.kind == FWD_CONTEXT and attr != "attn_metadata"):
            self.chosen_read(e, "." + attr)

    def chosen_read(self, e, what: str) -> None:
        """Code that runs for lack of the buffer (a decided test on a
        derived value chose it) reads an object a read can change (an
        iterator ``in`` or a loop advances, a defaultdict's missing key, a
        property): the change is the buffer's doing, and the walk follows
        neither what the read does nor which other names hold the object."""
        self.doubt(e, f"reads {what}, which may hold an object a read changes, on a path "
                      f"that the missing {BUFFER_ATTR} chose")

    def attribute(self, e, base: _Val, attr: str, st) -> _Val:
        if base.kind in (LAYER, CLS) and private(attr):
            # Python mangles it by the class whose body the code is in.
            self.doubt(e, f"reads the private name {attr} of the layer or its class")
        if base.kind == LAYER:
            return self.layer_attribute(e, attr, st)
        if base.kind == CLS:
            self.member(e, attr)
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
        if attr == BUFFER_ATTR:  # (the layer's own is read above)
            # A frame's locals, a registry, a hook's argument may hold the
            # layer: the walk cannot tell it from any other object there.
            self.doubt(e, f"reads {BUFFER_ATTR} of an object the walk cannot tell from the layer")
        if base.kind == OPAQUE:
            if base.derived:  # None, when it is None for lack of the buffer
                self.doubt(e, f"reads .{attr} of a value derived from {BUFFER_ATTR}")
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
        if self.deleted(attr):
            self.doubt(e, f"reads {attr}, which the module may delete by {BUFFER_ATTR}")
        if attr == BUFFER_ATTR:
            return _const(None, derived=True)
        if attr == RATIO_ATTR:
            if RATIO_ATTR in self.module.aliases or "*" in self.module.aliases:
                self.doubt(e, f"reads {RATIO_ATTR}, which the module may set by {BUFFER_ATTR}")
            return _const(self.ratio)
        self.member(e, attr)
        function = self.module.methods.get(attr)
        if function is not None:
            kind = self._method_kind(e, function)
            if isinstance(function, ast.AsyncFunctionDef):
                self.doubt(e, f"reaches {attr}, an async method")
            if kind == "cached_property" and attr in self.module.aliases:
                return _DERIVED  # its value was fixed when first read, perhaps by the buffer
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
        if attr in self.module.aliases or "*" in self.module.aliases or attr in REGISTRY:
            return _DERIVED  # REGISTRY: nn.Module's registries, which may hold the buffer
        if attr.startswith("__") and attr.endswith("__"):
            self.doubt(e, f"reads the layer's {attr}")
        return _OPAQUE

    def deleted(self, attr: str) -> bool:
        """The module may delete the layer's ``attr`` on a path the buffer chose."""
        return DELETED + attr in self.module.aliases or DELETED + "*" in self.module.aliases

    def member(self, e, attr: str) -> None:
        """A member of the class read by name: known only where this
        module's classes define it ahead of every imported base (M2); the
        runtime checks it on the loaded class."""
        if attr in self.module.ambiguous:
            self.doubt(e, f"reads {attr}, which an imported base of {CLASS_NAME} may define "
                          "ahead of this module's")
        if attr in self.module.owners:
            self.module.resolved.add(("member", attr, self.module.owners[attr]))

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
        if base.kind == OPAQUE and base.derived:  # None, when it is None for lack of the buffer
            self.doubt(e, f"subscripts a value derived from {BUFFER_ATTR}")
        if index.kind != CONST and index.derived:  # a key or index that may be missing
            self.doubt(e, f"looks up a key or index derived from {BUFFER_ATTR}")
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
        values = []
        for x in e.elts:
            values.append(self.expr(x.value if isinstance(x, ast.Starred) else x, st, scope))
            if isinstance(x, ast.Starred):
                if (error := iteration_error(values[-1])) is not None:
                    self.crash(x, st, "TypeError", error)
                if values[-1].kind != CONST:
                    self.escape(x, values[-1], "an unpacking")
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

    def _Set(self, e, st, scope):
        """A set display of constants is a new set each time: as a frozenset."""
        value = self._Tuple(e, st, scope)
        if value.kind == CONST:
            try:
                return _const(frozenset(value.data), value.derived)
            except TypeError as exc:
                self.crash(e, st, type(exc).__name__, "puts an unhashable constant in a set")
        return _Val(OPAQUE, derived=value.derived)

    def _Dict(self, e, st, scope):
        values = []
        for key, item in zip(e.keys, e.values):
            if key is not None:
                values.append(self.expr(key, st, scope))
            values.append(self.expr(item, st, scope))
            if key is None and values[-1].kind == CONST:  # ``**x``: no constant is a mapping
                self.crash(item, st, "TypeError", "unpacks a constant that is not a mapping")
            if key is None:
                self.escape(item, values[-1], "a ** unpacking")
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
                    self.format_spec(part, v, st, scope)
                if v.kind != CONST:
                    self.escape(part, v, "a format")
                derived = derived or v.derived
        return _Val(OPAQUE, derived=derived)

    def format_spec(self, part: ast.FormattedValue, v: _Val, st, scope) -> None:
        """``f"{v:spec}"``: ``format(v, spec)``, which raises for a spec the
        value does not take (``f"{None:d}"``)."""
        spec_parts = part.format_spec.values
        if all(isinstance(p, ast.Constant) for p in spec_parts):
            spec = "".join(str(p.value) for p in spec_parts)
        else:
            value = self.expr(part.format_spec, st, scope)
            if value.derived or (v.kind == CONST and v.derived):
                self.doubt(part, f"formats with a spec or a value derived from {BUFFER_ATTR}")
            return
        if v.kind == CONST:
            shown = v.data
            if part.conversion != -1:  # !s, !r, !a: a string is formatted
                shown = {115: str, 114: repr, 97: ascii}[part.conversion](shown)
            try:
                format(shown, spec)
            except Exception as exc:
                self.crash(part, st, type(exc).__name__, f"formats a constant with the spec {spec!r}")

    def _FormattedValue(self, e, st, scope):
        return self._JoinedStr(ast.JoinedStr(values=[e]), st, scope)

    def _NamedExpr(self, e, st, scope):
        value = self.expr(e.value, st, scope)
        self.store(e.target, value, st, scope)
        return value

    def _Lambda(self, e, st, scope):
        self.defaults(e, st, scope)
        return _Val(FUNC, ("local", e, None, scope, st.env))

    def defaults(self, function, st, scope) -> None:
        """Default arguments are evaluated when the ``def`` or ``lambda``
        runs: one that holds the buffer, the layer or code is carried into
        every later call, which the walk does not model."""
        for d in [*function.args.defaults, *(d for d in function.args.kw_defaults if d)]:
            v = self.expr(d, st, scope)
            if v.derived or v.kind not in (CONST, OPAQUE):
                self.doubt(d, f"binds a default argument to a {'value derived from ' + BUFFER_ATTR if v.derived else v.kind}")

    def annotations(self, function, st, scope) -> None:
        """A nested ``def``'s annotations run when it does (a module
        without ``from __future__ import annotations``, as vLLM's
        ``flashmla.py``): each is walked as an expression there; one that
        binds a name, yields or awaits is refused (the names the walk
        counts for the scope do not include it)."""
        a = function.args
        notes = [p.annotation for p in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
                 if p is not None and p.annotation is not None]
        for note in [*notes, *([function.returns] if function.returns is not None else [])]:
            if any(isinstance(n, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await))
                   for n in ast.walk(note)):
                self.doubt(note, "binds a name, yields or awaits in an annotation")
            self.expr(note, st, scope)

    def _IfExp(self, e, st, scope):
        test = self.expr(e.test, st, scope)
        value = _truth(test)
        if value is None and test.derived:
            self.doubt(e, f"chooses on an undecided value derived from {BUFFER_ATTR}")
        if value is not None:
            if test.derived:
                self.skip_changes([e.orelse if value else e.body], e, st, scope)
            self.chosen += test.derived
            try:
                result = self.expr(e.body if value else e.orelse, st, scope).mark(test.derived)
            finally:
                self.chosen -= test.derived
            if test.derived:
                self.skipped([e.orelse if value else e.body], st)
            return result
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
                    if v.derived:  # the rest did not run for lack of the buffer
                        self.skip_changes(e.values[len(results):], e, cur, scope)
                        self.skipped(e.values[len(results):], cur)
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
                result = _BINOPS.get(type(op), _no_constant_takes)(a.data, b.data)
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
        for i, (op, right_node) in enumerate(zip(e.ops, e.comparators)):
            right = self.expr(right_node, cur, scope)
            r = self.compare(e, left, op, right, cur)
            result = r if result is None else self._and(result, r)
            if _truth(r) is False:
                rest = e.comparators[i + 1:]
                if r.derived and rest:  # the later comparands did not run for lack of the buffer
                    self.skip_changes(rest, e, cur, scope)
                    self.skipped(rest, cur)
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
        if any(isinstance(n, ast.NamedExpr) for n in _own_nodes(e)):
            # PEP 572: the walrus binds the enclosing function's name, once
            # per iteration (a generator's, whenever it is consumed).
            self.doubt(e, "binds a name of the function with := inside a comprehension")
        # The first iterable is read in the enclosing scope; the loop targets
        # are the comprehension's own locals, unbound until their loop binds
        # them, and gone after it (the enclosing function's names of the same
        # spelling are untouched).
        for g in e.generators:
            for n in ast.walk(g.target):
                if isinstance(n, (ast.Attribute, ast.Subscript)):
                    self.doubt(n, "binds a comprehension's loop variable that is not a plain name")
        first = self.expr(e.generators[0].iter, st, scope)
        targets = {n.id for g in e.generators for n in ast.walk(g.target)
                   if isinstance(n, ast.Name)}
        inner = st.copy(MAYBE)
        inner.env.update(dict.fromkeys(targets, _UNBOUND))
        outer_locals = scope.locals
        scope.locals = outer_locals | targets
        try:
            return self._comprehension_body(e, first, inner, st, scope, parts)
        except _Unreachable:
            # A handler around took a crash of the loop's body; the loop may
            # also not have reached it: what follows is reached maybe.
            st.reach, st.total = MAYBE, False
            return _DERIVED
        finally:
            scope.locals = outer_locals

    def _comprehension_body(self, e, first, inner, st, scope, parts):
        derived = False
        steering = 0
        try:
            for i, gen in enumerate(e.generators):
                it = first if i == 0 else self.expr(gen.iter, inner, scope)
                if (error := iteration_error(it)) is not None:
                    self.crash(gen.iter, st if i == 0 else inner, "TypeError", error)
                if it.kind != CONST:
                    self.escape(gen.iter, it, "an iterator the walk cannot see")
                derived = derived or it.derived
                self._bind_comprehension_target(gen.target, it, inner, scope)
                for k, cond in enumerate(gen.ifs):
                    c = self.expr(cond, inner, scope)
                    if _truth(c) is None and c.derived:
                        self.doubt(cond, f"filters on a value derived from {BUFFER_ATTR}")
                    if _truth(c) is False and c.derived:  # the rest is left for lack of the buffer
                        rest = [*gen.ifs[k + 1:], *e.generators[i + 1:], *parts]
                        self.skip_changes(rest, cond, inner, scope)
                        self.skipped(rest, st)
                    if c.derived and not steering:
                        # The items kept, and what the rest runs, were
                        # chosen by a test on the buffer.
                        steering = 1
                        self.chosen += 1
                        derived = True
            for part in parts:
                v = self.expr(part, inner, scope)
                if v.kind in (LAYER, CLS, FUNC):
                    self.escape(part, v, "a container")
                derived = derived or v.derived
        finally:
            self.chosen -= steering
        for name, v in inner.env.items():  # what the buffer decided of outer names in here
            if v.derived and name in st.env and not st.env[name].derived:
                st.env[name] = st.env[name].mark(True)
        return _Val(OPAQUE, derived=derived)

    def _bind_comprehension_target(self, target, it, inner, scope):
        """Each item of a known iterable stored into ``target`` (a crash
        there is reached maybe: the loop may not run); the names get what
        the items give them joined, else any value."""
        names = [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
        items = _distinct(it.data) if it.kind == CONST and iteration_error(it) is None else None
        if items is None or not items:
            for name in names:
                inner.env[name] = _Val(OPAQUE, derived=it.derived)
            return
        bound = []
        for item in items:
            each = inner.copy()
            self.store(target, _Val(OPAQUE, derived=it.derived) if item is _UNKNOWN_ITEM
                       else _const(item, it.derived), each, scope)
            bound.append(each)
        for name in names:
            value = bound[0].env[name]
            for each in bound[1:]:
                value = _join(value, each.env[name])
            inner.env[name] = value

    def _ListComp(self, e, st, scope):
        return self._comprehension(e, st, scope, [e.elt])

    _SetComp = _ListComp

    def _GeneratorExp(self, e, st, scope):
        """Walked as if run at once; but all but its first iterable run when
        it is consumed: kept for later, what it reads of the function's
        locals (or an enclosing function's) may have changed by then."""
        if id(e) not in self.consumed_at_once:
            own = {n.id for g in e.generators for n in ast.walk(g.target)
                   if isinstance(n, ast.Name)}
            later = [e.elt, *(c for g in e.generators for c in g.ifs),
                     *(g.iter for g in e.generators[1:])]
            for n in (n for part in later for n in ast.walk(part)):
                if isinstance(n, ast.Name) and n.id not in own and _is_local(n.id, scope):
                    self.doubt(n, f"keeps a generator expression that reads {n.id} when it runs later")
        return self._comprehension(e, st, scope, [e.elt])

    def _DictComp(self, e, st, scope):
        return self._comprehension(e, st, scope, [e.key, e.value])

    def _Starred(self, e, st, scope):
        return self.expr(e.value, st, scope)

    # -- calls ----------------------------------------------------------------
    def _Call(self, e, st, scope):
        if isinstance(e.func, ast.Name) and e.func.id in _CONSUMING_BUILTINS and e.args and (
            isinstance(e.args[0], ast.GeneratorExp) and not _is_local(e.func.id, scope)
            and e.func.id not in self.module.module_names
        ):
            self.consumed_at_once.add(id(e.args[0]))  # ``sum(x for x in ...)``
        func = self.expr(e.func, st, scope)
        if isinstance(e.func, ast.Attribute) and func.kind == OPAQUE and (
            self.expr(e.func.value, st, scope).kind in (LAYER, CLS)
        ):
            self.doubt(e, f"calls {e.func.attr}, which {CLASS_NAME} does not define")
        args: list = []
        for a in e.args:
            if isinstance(a, ast.Starred):
                v = self.expr(a.value, st, scope)
                if (error := iteration_error(v)) is not None:
                    self.crash(a, st, "TypeError", error)
                if v.kind == CONST and isinstance(v.data, tuple):
                    args += [_const(x, v.derived) for x in v.data]
                else:
                    args.append(None)
                    self.escape(a, v, "a starred argument")
                    args.append(v)
            else:
                args.append(self.expr(a, st, scope))
        kwargs = {}
        for k in e.keywords:
            v = self.expr(k.value, st, scope)
            if k.arg is None and v.kind == CONST:  # no constant is a mapping
                self.crash(k, st, "TypeError", "unpacks a constant that is not a mapping")
            if k.arg is None:
                args.append(None)
                self.escape(k, v, "a ** argument")
            else:
                kwargs[k.arg] = v
        return self.call(e, func, args, kwargs, st, scope)

    def call(self, e, func: _Val, args: list, kwargs: dict, st, scope) -> _Val:
        values = [v for v in [*args, *kwargs.values()] if v is not None]
        if func.kind == FUNC:
            how, function, receiver, outer, closure = func.data
            if how == "builtin":
                if (function == "getattr" and self.steered(scope) and len(args) >= 2
                        and args[0] is not None and args[1] is not None
                        and args[1].kind == CONST and isinstance(args[1].data, str)):
                    self.chosen_member(e, args[0], args[1].data, st)
                return self.builtin(e, function, args, kwargs, st)
            if how == "forward-context":
                for v in values:
                    self.escape(e, v, "get_forward_context")
                return _Val(FWD_CONTEXT)
            if how == "bound":
                args = [receiver, *args]
            # Called where the missing buffer steers, the function runs for
            # lack of it too: what it does is chosen code.
            steer = 1 if self.steered(scope) else 0
            self.chosen += steer
            try:
                result = self.call_function(function, args, kwargs, e, outer, closure, st)
            finally:
                self.chosen -= steer
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
                    return _Val(OPAQUE, derived=attr in self.module.aliases
                                or "*" in self.module.aliases or self.deleted(attr))
                if obj.kind == CONST:
                    return _const(hasattr(obj.data, attr), obj.derived)
                self.escape(e, obj, "hasattr")
                return _Val(OPAQUE, derived=obj.derived)
            if len(args) == 3:
                if obj.kind == LAYER:
                    function = self.module.methods.get(attr)
                    if function is not None and self._method_kind(e, function) in (
                        "property", "cached_property"
                    ):
                        self.doubt(e, f"reads the property {attr} through getattr with a default "
                                      "(an AttributeError in it gives the default)")
                    value = self.layer_attribute(e, attr, st)
                    if "self." + attr in st.env or attr in (BUFFER_ATTR, RATIO_ATTR) or (
                        attr in self.module.methods or attr in self.module.class_attrs
                    ):
                        return value  # the attribute exists: never the default
                    return _join(value, args[2])
                self.escape(e, obj, "getattr with a default")
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
