"""The walk of statements: findings (R3, R4), calls into this module's
functions, control flow, stores."""

from __future__ import annotations

import ast

from dspark_attn_plugin.warmup_shape.as_loaded import private
from dspark_attn_plugin.warmup_shape.module import (
    _Module,
)
from dspark_attn_plugin.warmup_shape.state import (
    MAYBE,
    SURE,
    _Found,
    _Scope,
    _State,
    _Unreachable,
    _is_local,
    _join_states,
)
from dspark_attn_plugin.warmup_shape.syntax import (
    _can_leave,
    _changed_objects,
    _local_names,
    is_generator,
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
    _DERIVED,
    _EXC_BASES,
    _NONE,
    _OPAQUE,
    _PLAIN_CONTEXTS,
    _UNBOUND,
    _Val,
    _const,
    _is_a,
    _join,
    _truth,
    iteration_error,
)
from dspark_attn_plugin.warmup_shape.verdict import (
    BUFFER_ATTR,
    MAX_CALL_DEPTH,
    MAX_LOOP_PASSES,
    MAX_UNROLL,
    RATIO_ATTR,
)


MAY_SWALLOW = "a context manager that may swallow an exception"
ANY_CLASS = "?"  # an exception class the walk does not know


def _nested_blocks(stmt) -> list:
    """The statements nested in ``stmt`` that run after its header (a
    loop's, an ``if``'s, a ``with``'s, a ``try``'s, a ``match``'s blocks;
    not a definition's body, which it does not run)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return []
    nested = [*getattr(stmt, "body", []), *getattr(stmt, "orelse", []), *getattr(stmt, "finalbody", [])]
    for h in getattr(stmt, "handlers", []):
        nested += h.body
    for c in getattr(stmt, "cases", []):
        nested += c.body
    return nested


def _finally_discards(stmts, in_loop: bool = False) -> bool:
    """``stmts`` (a finally block) may end by ``return``, or by ``break`` /
    ``continue`` of the loop around the ``try``: the exception is dropped."""
    for n in stmts:
        if isinstance(n, ast.Return) or (isinstance(n, (ast.Break, ast.Continue)) and not in_loop):
            return True
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        loop = isinstance(n, (ast.For, ast.AsyncFor, ast.While))
        blocks = [(getattr(n, "body", []), in_loop or loop), (getattr(n, "orelse", []), in_loop),
                  (getattr(n, "finalbody", []), in_loop)]
        blocks += [(h.body, in_loop) for h in getattr(n, "handlers", [])]
        blocks += [(c.body, in_loop) for c in getattr(n, "cases", [])]
        if any(isinstance(b, list) and _finally_discards(b, inner) for b, inner in blocks):
            return True
    return False


class StatementWalk:
    def __init__(self, module: _Module, ratio: int):
        self.module = module
        self.ratio = ratio
        self.certain: list[tuple[int, str]] = []
        self.doubts: list[tuple[int, str]] = []
        self.entered: list = []  # functions the run called
        self.chosen = 0  # > 0 inside code a derived decided test chose
        # Active try handlers, innermost last; MAY_SWALLOW for a with whose
        # context manager may take an exception.
        self.handlers: list = []
        self.consumed_at_once: set = set()  # generator expressions a builtin consumes
        self.stack: list = []
        # Turns the buffer's absence took so far: decided tests on derived
        # values that skipped code, and crashes a handler took.
        self.turns = 0
        self.caught_at: list[int] = []  # the handler level each caught crash went to
        self.cut = 0  # handlers that took such a crash and left (return, break, ...)

    # -- findings -------------------------------------------------------------
    def doubt(self, node, what: str) -> None:
        self.doubts.append((getattr(node, "lineno", 0), what))
        raise _Found

    def crash(self, node, st: _State, exc: str, what: str) -> None:
        """R3: ``exc`` raised at ``node``; a try may take it."""
        for level in reversed(self.handlers):
            if level is MAY_SWALLOW:
                self.doubt(node, f"may fail: {what}, unless a context manager takes it")
            sure_catch = None
            for names, caught in level:
                if names is None or any(n != ANY_CLASS and _is_a(exc, n) for n in names):
                    sure_catch = caught
                    break
                if exc == ANY_CLASS or ANY_CLASS in names:
                    # A class the walk does not know, raised or named: the
                    # handler may take it or not.
                    self.doubt(node, f"may fail: {what}, unless a handler takes it")
            if sure_catch is not None:
                self.turns += 1
                self.caught_at.append(next(k for k, h in enumerate(self.handlers) if h is level))
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
        # It runs later, outside the try and with blocks around this point.
        handlers, self.handlers = self.handlers, []
        try:
            self.call_function(function, args, kwargs, node, outer, closure,
                               _State({}, MAYBE))
        except _Unreachable:
            pass
        finally:
            self.handlers = handlers

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
        if is_generator(function):
            self.doubt(node, f"calls {getattr(function, 'name', 'a lambda')}, a generator "
                             "function (it returns a generator and runs its body later)")
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
        if any(v is None for v in args):  # a * or ** argument
            self.doubt(node, "calls a function of this module with * or ** arguments "
                             "the walk cannot match to its parameters")
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
                env[name] = self._default(defaults[name])
        return env

    def _default(self, d) -> _Val:
        """A default argument's value, evaluated once when its ``def`` ran:
        a mutable literal or a call's result is an object every call shares
        (``def f(v, _seen=[])``), which an earlier call may have filled; a
        module-level name that may hold the buffer, or module-level state
        (R1), is read as derived, as the walk reads the name itself."""
        if isinstance(d, ast.Constant):
            return _const(d.value)
        for n in ast.walk(d):
            if isinstance(n, (ast.List, ast.Dict, ast.Set, ast.Call, ast.ListComp, ast.DictComp,
                              ast.SetComp, ast.GeneratorExp)) or (
                isinstance(n, ast.Name) and (n.id in self.module.derived_globals
                                             or n.id in self.module.state_names)
            ):
                return _DERIVED
        return _OPAQUE

    # -- statements -----------------------------------------------------------
    def block(self, stmts, st: _State | None, scope: _Scope) -> _State | None:
        for i, stmt in enumerate(stmts):
            if st is None:
                return None
            before, turns, caught, cut = st, self.turns, len(self.caught_at), self.cut
            depth, jumps = len(self.handlers), self._jumps(scope)
            marks = [len(scope.breaks[-1]), len(scope.continues[-1])] if scope.breaks else None
            try:
                st = self.stmt(stmt, st, scope)
            except _Unreachable:
                st = None
            # A failure here that a handler around this block took (the
            # walk may still go on by other paths, as an inner handler's):
            # on its path the rest of this block, and what of the statement
            # did not run, are skipped.
            escaped = any(k < depth for k in self.caught_at[caught:])
            if escaped and _nested_blocks(stmt):
                self.skip_changes(_nested_blocks(stmt), stmt, before, scope)
            jump = isinstance(stmt, ast.Return)  # a return whose value failed
            left = escaped or self.cut != cut or st is None and self.turns != turns
            if left and (i + 1 < len(stmts) or jump):
                # Every path left here, after a turn the buffer's absence
                # took: with the buffer the rest may run. Nothing reads what
                # it would change only where the warmup itself returned (no
                # handler or loop of it took a path out of here).
                entry_returned = (len(self.stack) == 1 and self._jumps(scope) == jumps
                                  and not escaped and self.cut == cut)
                if not entry_returned:
                    rest = stmts[i + 1:]
                    if rest:
                        self.skip_changes(rest, stmt, before, scope)
                    if jump or _can_leave(rest):
                        # With the buffer the rest (or the return a failure
                        # cut short) may leave: what runs next runs for
                        # lack of it.
                        scope.steered = True
                    if marks is not None:  # a break or continue left it: the names
                        # the rest binds hold, there, what the buffer's absence left
                        for at, taken in zip(marks, (scope.breaks[-1], scope.continues[-1])):
                            for path in taken[at:]:
                                self.skipped(rest, path)
        return st

    @staticmethod
    def _jumps(scope: _Scope) -> int:
        """The ``break``/``continue`` paths the innermost loop took so far."""
        return len(scope.breaks[-1]) + len(scope.continues[-1]) if scope.breaks else 0

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
            self.crash(s, st, exc or ANY_CLASS, "raises")
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
            self.defaults(s, st, scope)
            if not self.module.future_annotations:
                self.annotations(s, st, scope)
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
            # With the buffer, the skipped arm may change objects the warmup
            # reads (through any name: the walk does not follow which names
            # are one object): unknown.
            self.skip_changes(skipped, node, st, scope)
            if _can_leave(skipped):
                scope.steered = True  # what follows runs for lack of the buffer
            self.chosen += 1
            try:
                end = self.block(taken, st, scope)
            finally:
                self.chosen -= 1
            self.skipped(skipped, end)
            return end
        ends = [self.block(arm, st.copy(MAYBE), scope) for arm in arms]
        return self.merge(st, ends, scope)

    def skip_changes(self, nodes, at, st: _State, scope: _Scope) -> None:
        """``nodes`` did not run for lack of the buffer (``st``: the state
        where they would have): with it they may change objects the
        warmup reads, through any name: by a store, a call, or a read of
        an object that runs its code (``None in it`` advances an iterator
        another name, an attribute or a container also holds)."""
        self.turns += 1
        if _changed_objects(nodes) or self.reads_objects(nodes, st, scope):
            self.doubt(at, f"skips, for lack of {BUFFER_ATTR}, code that changes objects "
                           "the warmup may read")

    def skipped(self, nodes, st: _State | None) -> None:
        """``nodes`` (statements or expressions) did not run, or ran a
        number of times, by a decided test on a derived value: with the
        buffer they may bind these names, and reading an object may change
        it (an iterator advanced by ``in``, a defaultdict's missing key), so
        what the names they bind or read hold here (but constants, the
        layer, its class and functions) is what the buffer's absence left
        in them. (The layer's attributes such code reads are the
        ``aliases`` reading's: it takes the code as chosen.)"""
        if st is None:
            return
        for name in _local_names(nodes) & set(st.env):
            st.env[name] = st.env[name].mark(True)
        for node in nodes:
            for n in ast.walk(node):
                if isinstance(n, ast.Name) and n.id in st.env and st.env[n.id].kind not in HELD_STILL:
                    st.env[n.id] = st.env[n.id].mark(True)

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
            if (error := iteration_error(it)) is not None:
                self.crash(s, st, "TypeError", error)
            if it.kind != CONST:
                self.escape(s.iter, it, "an iterator the walk cannot see")
            if it.kind == CONST and isinstance(it.data, (tuple, str)) and (
                len(it.data) <= MAX_UNROLL
            ):
                return self.unrolled(s, it, st, scope)
        head = st.copy(MAYBE)
        turns = self.turns
        steered_by_test = False
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
                    steered_by_test = True
                    if value is False and head is not None and _ == 0:
                        self.skip_changes(s.body, s, head, scope)
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
            end, level_breaks, continues = self._body(s, body_st, scope)
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
        # (A pass of the body that every path left skips the else too,
        # while the walk's head, an iterator that may be empty, runs it.)
        else_skipped = self._else_skipped(s, st, True, turns, scope)
        if after is not None and s.orelse:
            after = self.block(s.orelse, after, scope)
        out = _join_states([after, *breaks], scope.locals)
        if out is None:
            return None
        if else_skipped:
            self.skipped(s.orelse, out)
        # Sure: a ``for`` whose every pass went on, with no ``break``, and
        # an ``else`` (if any) that every path went through.
        sure = (total and not breaks and after is not None and after.total
                and isinstance(s, ast.For))
        out.reach = st.reach if sure else MAYBE
        out.total = st.total and sure
        if steered_by_test:  # the buffer decides how often the body runs
            self.skipped(s.body, out)
        return out

    def _else_skipped(self, s, st: _State, some_path_skips: bool, turns: int, scope: _Scope) -> bool:
        """A loop's ``else`` that some path left the loop without (a
        ``break``, a ``return``, a caught failure) after a turn the
        buffer's absence took in the loop: with the buffer it may run
        where it did not, so it is code the buffer skips."""
        if not (s.orelse and some_path_skips and self.turns != turns):
            return False
        self.skip_changes(s.orelse, s, st, scope)
        if _can_leave(s.orelse):
            scope.steered = True
        return True

    def _body(self, s, body_st: _State, scope: _Scope):
        """One pass of a loop's body: where it ends, and the states that
        ``break`` and ``continue`` left it in."""
        scope.breaks.append([])
        scope.continues.append([])
        try:
            end = self.block(s.body, body_st, scope)
        finally:
            level_breaks, continues = scope.breaks.pop(), scope.continues.pop()
        return end, level_breaks, continues

    def unrolled(self, s: ast.For, it: _Val, st: _State, scope: _Scope) -> _State | None:
        """A ``for`` over a short constant: the body once per item, in
        order, each with its item; ``break`` leaves, ``else`` runs when no
        ``break`` did."""
        cur: _State | None = st
        breaks: list = []
        turns = self.turns
        for item in it.data:
            if cur is None:
                break
            body_st = cur.copy()
            body_st.total = cur.total
            self.store(s.target, _const(item, it.derived), body_st, scope)
            end, level_breaks, continues = self._body(s, body_st, scope)
            breaks += level_breaks
            goes_on = [e for e in [end, *continues] if e is not None]
            nxt = _join_states(goes_on, scope.locals)
            if nxt is not None and (level_breaks or len(goes_on) != 1 or not goes_on[0].total):
                nxt.reach, nxt.total = MAYBE, False  # some paths left, or several go on
            cur = nxt
        after = cur
        else_skipped = self._else_skipped(s, st, cur is None or bool(breaks), turns, scope)
        if after is not None and s.orelse:
            after = self.block(s.orelse, after, scope)
        exits = [e for e in [after, *breaks] if e is not None]
        out = _join_states(exits, scope.locals)
        if out is None:
            return None
        if else_skipped:
            self.skipped(s.orelse, out)
        sure = len(exits) == 1 and exits[0].total and exits[0].reach == st.reach
        out.reach = st.reach if sure else MAYBE
        out.total = st.total and sure
        if it.derived:  # the buffer decides the items, so how often the body runs
            self.skip_changes(s.body, s, st, scope)
            self.skipped(s.body, out)
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
        # A ``return``, ``break`` or ``continue`` of the finally block drops
        # whatever the body, the else or a handler raised.
        discards = _finally_discards(s.finalbody)
        if discards:
            self.handlers.append([(None, [])])
        try:
            ends, else_skipped = self._try_arms(s, st, scope)
        finally:
            if discards:
                self.handlers.pop()
        out = _join_states(ends, scope.locals)
        if out is not None:
            sure = all(e is not None and e.total for e in ends)
            out.reach = st.reach if sure else MAYBE
            out.total = st.total and sure
            if else_skipped:  # what it binds is what the buffer's absence left
                self.skipped(s.orelse, out)
        if s.finalbody:
            fin_st = out if out is not None else self._maybe_entry(st, s.body)
            fin = self.block(s.finalbody, fin_st, scope)
            return fin if out is not None else None
        return out

    def _try_arms(self, s: ast.Try, st: _State, scope: _Scope) -> tuple[list, bool]:
        """The states at the ends of the body (and else) and of each handler,
        and whether the else is code the buffer's absence skipped."""
        level = [(self._handler_names(h, st, scope), []) for h in s.handlers]
        depth, caught = len(self.handlers), len(self.caught_at)
        self.handlers.append(level)
        turns = self.turns
        try:
            end = self.block(s.body, st.copy(), scope)
        finally:
            self.handlers.pop()
        # A failure these handlers take for sure (a turn: it may be for lack
        # of the buffer) chose them, as a decided test chooses an arm: what
        # they bind or return is derived. (Where the rest of the body could
        # have left, ``block`` made what follows run for lack of the buffer.)
        took = depth in self.caught_at[caught:]
        # The else, when the body left after a turn the buffer took, or
        # when such a failure came here (other paths the walk goes on by,
        # as an inner handler's, may still run it).
        else_skipped = bool(s.orelse) and (took or end is None and self.turns != turns)
        if else_skipped:
            self.skip_changes(s.orelse, s, st, scope)
            if _can_leave(s.orelse):
                scope.steered = True
        if end is not None and s.orelse:
            end = self.block(s.orelse, end, scope)
        ends = [end]
        self.chosen += took
        try:
            for handler in s.handlers:
                h = self._maybe_entry(st, s.body)
                if handler.name:
                    h.env[handler.name] = _OPAQUE
                end = self.block(handler.body, h, scope)
                if end is not None and handler.name:
                    end.env[handler.name] = _UNBOUND  # Python deletes it on leaving
                ends.append(end)
                if took and end is None:  # the failure's path left here
                    self.cut += 1
        finally:
            self.chosen -= took
        return ends, else_skipped

    def _handler_names(self, handler, st, scope):
        if handler.type is None:
            return None
        types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        names = []
        for t in types:
            self.expr(t, st.copy(MAYBE), scope)  # only when an exception reaches it
            if isinstance(t, ast.Name) and t.id in _EXC_BASES | {"BaseException": ""} and (
                not _is_local(t.id, scope) and t.id not in self.module.module_names
            ):  # the builtin class, not a name this code (or an enclosing function) binds
                if t.id == "BaseException":
                    return None
                names.append(t.id)
            else:
                names.append(ANY_CLASS)  # a class the walk does not know: it may be any
        return names

    def _plain_context(self, expr, scope) -> bool:
        """``torch.no_grad()`` and the like, by a name that is torch's or
        contextlib's (not a local, not another import under that name)."""
        node = expr.func if isinstance(expr, ast.Call) else expr
        if not isinstance(node, (ast.Name, ast.Attribute)):
            return False
        name = node.attr if isinstance(node, ast.Attribute) else node.id
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        return name in _PLAIN_CONTEXTS and isinstance(root, ast.Name) and (
            not _is_local(root.id, scope)
            and (root.id not in self.module.module_names or root.id in self.module.context_imports)
        )

    def with_(self, s: ast.With, st: _State, scope: _Scope) -> _State | None:
        # A context manager may swallow an exception (contextlib.suppress):
        # from its ``__enter__`` on (the items after it, the body) a crash is
        # reached only maybe, and the code after the block may start from
        # anywhere in it.
        swallowing, st_body = 0, st
        try:
            for item in s.items:
                cm = self.expr(item.context_expr, st_body if swallowing else st, scope)
                self.escape(item.context_expr, cm, "a context manager")
                if not swallowing and not self._plain_context(item.context_expr, scope):
                    swallowing = 1
                    self.handlers.append(MAY_SWALLOW)
                    st_body = st.copy()
                target_st = st_body if swallowing else st
                if item.optional_vars is not None:
                    self.store(item.optional_vars, _OPAQUE, target_st, scope)
            if not swallowing:
                return self.block(s.body, st, scope)
            end = self.block(s.body, st_body, scope)
        finally:
            if swallowing:
                self.handlers.pop()
        out = _join_states([end, self._maybe_entry(st, s.body)], scope.locals)
        out.reach = MAYBE
        out.total = False
        return out

    def match(self, s: ast.Match, st: _State, scope: _Scope) -> _State | None:
        subject = self.expr(s.subject, st, scope)
        # A subject derived from the buffer decides which case runs (each
        # pattern decided, or the walk doubts): what the cases run, guards
        # included, runs for lack of the buffer, as an if's taken arm does.
        chosen = 1 if subject.derived else 0
        self.chosen += chosen
        try:
            ends, not_run = self.cases(s, subject, st, scope)
        finally:
            self.chosen -= chosen
        out = self.merge(st, ends, scope)
        if subject.derived:
            self.skip_changes(not_run, s, st, scope)
            if _can_leave(s.cases):
                # With the buffer another case may run and leave, so what
                # follows may run for lack of it.
                scope.steered = True
            self.skipped(s.cases, out)
        return out

    def cases(self, s: ast.Match, subject: _Val, st: _State, scope: _Scope):
        """The cases in order: the end of each that runs (and the state
        when none matches), and the cases that do not run."""
        ends, not_run = [], []
        cur = st
        for case in s.cases:
            if cur is None:
                not_run.append(case)
                continue
            outcome = self._pattern(case.pattern, subject, cur, scope)
            if outcome is False:
                not_run.append(case)
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
                not_run.append(case)
                continue
            if outcome is True and guard is True:
                ends.append(self.block(case.body, arm, scope))
                cur = None
            else:
                ends.append(self.block(case.body, arm.copy(MAYBE) if arm is cur else arm, scope))
                cur = cur.copy(MAYBE) if cur is not None else None
        if cur is not None:
            ends.append(cur)
        return ends, not_run

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
    def unpack_constant(self, target, value: _Val, st: _State, scope: _Scope) -> None:
        """``a, b = <constant>`` and ``a, *b = <constant>``: the items bound,
        or the TypeError / ValueError Python raises."""
        if (error := iteration_error(value)) is not None:
            self.crash(target, st, "TypeError", error.replace("iterates over", "unpacks"))
        if isinstance(value.data, frozenset):  # items in no order the walk knows
            items = [_Val(OPAQUE, derived=value.derived)] * len(value.data)
        else:
            items = [_const(v, value.derived) for v in value.data]
        stars = [i for i, t in enumerate(target.elts) if isinstance(t, ast.Starred)]
        fixed = len(target.elts) - len(stars)
        if len(items) < fixed or (not stars and len(items) > fixed):
            self.crash(target, st, "ValueError",
                       f"unpacks {len(items)} values into {fixed} names")
        if stars:  # the starred name takes a new list of the middle items
            at, after = stars[0], len(target.elts) - stars[0] - 1
            items = [*items[:at], _Val(OPAQUE, derived=value.derived),
                     *items[len(items) - after:]]
        for t, v in zip(target.elts, items):
            self.store(t.value if isinstance(t, ast.Starred) else t, v, st, scope)

    def store(self, target, value: _Val, st: _State, scope: _Scope) -> None:
        value = value.mark(self.steered(scope))
        if isinstance(target, ast.Name):
            st.env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if value.kind == CONST:
                self.unpack_constant(target, value, st, scope)
                return
            self.escape(target, value, "an unpacking")
            for t in target.elts:
                self.store(t.value if isinstance(t, ast.Starred) else t,
                           _Val(OPAQUE, derived=value.derived), st, scope)
        elif isinstance(target, ast.Attribute):
            base = self.expr(target.value, st, scope)
            if base.kind == LAYER:
                attr = target.attr
                if private(attr):
                    self.doubt(target, f"stores the private name {attr} of the layer")
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
