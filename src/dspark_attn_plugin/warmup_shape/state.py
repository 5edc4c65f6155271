"""The walk's state: local values, how surely a statement is reached, scopes."""

from __future__ import annotations

from dataclasses import dataclass

from dspark_attn_plugin.warmup_shape.syntax import (
    _local_names,
)
from dspark_attn_plugin.warmup_shape.values import (
    _OPAQUE,
    _UNBOUND,
    _Val,
    _join,
)

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


def _is_local(name: str, scope: "_Scope") -> bool:
    """``name`` is a local of the function being walked or of one enclosing it."""
    s = scope
    while s is not None:
        if name in s.locals:
            return True
        s = s.outer
    return False


class _Unreachable(Exception):
    pass
