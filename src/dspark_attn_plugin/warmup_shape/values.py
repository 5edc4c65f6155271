"""Abstract values of the walk, and the operations it computes on constants."""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass

# Kinds of abstract value.
CONST, LAYER, CLS, FUNC, OPAQUE, UNBOUND, MAYBE_UNBOUND, FWD_CONTEXT = (
    "const", "layer", "class", "function", "opaque", "unbound", "maybe-unbound", "context"
)
# Kinds whose values no read of the name can change: a constant, the layer,
# its class, a function, the forward context (the attributes of the layer,
# its class and the forward context are judged one by one). Anything else
# may be an object that a read runs code of (an iterator, a defaultdict, a
# property).
HELD_STILL = (CONST, LAYER, CLS, FUNC, FWD_CONTEXT)


def _key(data) -> tuple:
    """``data`` as a value to compare: Python's ``==`` with the types kept all
    the way down, for ``1 == True`` (and ``0.0 == -0.0``) yet ``1 is True``
    is false: constants that compare equal but differ that way are two
    values, not one."""
    if isinstance(data, tuple):
        return (tuple, tuple(_key(d) for d in data))
    if isinstance(data, frozenset):
        return (frozenset, frozenset(_key(d) for d in data))
    if isinstance(data, slice):
        return (slice, _key(data.start), _key(data.stop), _key(data.step))
    if isinstance(data, float):
        return (float, repr(data))
    return (type(data), data)


@dataclass(frozen=True, eq=False)
class _Val:
    kind: str
    data: object = None
    derived: bool = False

    def mark(self, derived: bool) -> "_Val":
        return self if not derived or self.derived else _Val(self.kind, self.data, True)

    def _compared(self) -> tuple:
        return (self.kind, _key(self.data), self.derived)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Val) and self._compared() == other._compared()

    def __hash__(self) -> int:
        return hash(self._compared())


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
    if a.kind == CONST and b.kind == CONST and _key(a.data) == _key(b.data):
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


def iteration_error(v: _Val) -> str | None:
    """Why iterating ``v`` raises TypeError, when it is a constant that does
    not iterate (None, a number, a slice); None when it iterates or the walk
    does not know."""
    if v.kind != CONST or isinstance(v.data, (str, bytes, tuple, frozenset)):
        return None
    return "iterates over None" if v.data is None else (
        f"iterates over a constant of type {type(v.data).__name__}")

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
