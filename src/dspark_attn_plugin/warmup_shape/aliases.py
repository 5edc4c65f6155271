"""R1's aliases: the attributes of the layer that may hold the buffer, or
something that depends on it, once the module's other code has run
(``__init__``, helpers, other methods), read from the whole module's text.

The walk of ``forward_mqa`` reads such an attribute as derived. The module
passed R5's allow-list, so a value reaches the layer only by a store on a
method's own instance (``self.x = v``, ``setattr(self, "x", v)``) or by a
call: of this module's code, of an ``nn.Module`` method that registers it
by name, of outside code handed the layer. What is followed, to a fixpoint,
with Python's scopes (a function's locals, its enclosing functions', the
module's):

- *Carriers*: names bound to a value that may be, hold or depend on the
  buffer (it names the buffer or a carrier, or calls code of this module
  that may return one); names whose object took a carrier in (``d[k] = v``,
  ``d.append(v)``); the parameters of this module's functions, methods,
  nested ``def``s and lambdas that a call or a default hands a carrier.
  *Code*: names bound to this module's code (a lambda, a function, a
  method, a class).
- *Control*: a store, a bind or a call depends on the buffer also when a
  test on a carrier chose it (``if``, ``while``, ``for``, ``match``,
  ``with``, ``assert``, a conditional expression, ``and``/``or``, a
  comprehension's ``for`` or ``if``), when it follows, in its function, a
  ``return``, ``raise``, ``break``, ``continue`` or ``assert`` that such a
  test chose, or when it is in a ``try`` or ``with`` whose body may depend
  on the buffer or runs this module's code (a handler or a context manager
  may swallow what it raises). A call of this module's code so chosen makes
  all of that code depend; so does a return of that code.
- *Aliases*: an attribute stored on a method's instance with a value that
  carries or holds code, or under such control (for ``self.a.b = v`` and
  ``self.a[k] = v``: ``a``); ``setattr`` and ``register_buffer``,
  ``register_parameter``, ``register_module``, ``add_module`` (on the
  layer) with a constant name: that name. ``*`` (every attribute the class
  does not define) when such a value or call goes to outside code that is
  also handed the layer itself, or to a callee the walk cannot name (a
  local bound to something other than a ``def`` or a lambda, the result of
  a call, a subscript). Methods of imported bases (``super().m``, ``self.m``
  that no class of the module defines) are vLLM's own code: the assumption
  stated in the package's docstring covers what they store.
"""

from __future__ import annotations

import ast

from dspark_attn_plugin.warmup_shape.verdict import BUFFER_ATTR

# nn.Module methods that store their argument on the module under a name.
REGISTERS = frozenset({"register_buffer", "register_parameter", "register_module", "add_module"})
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
# What ``expression`` acts on (everything else it only walks through).
_ACTS = frozenset({
    ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.NamedExpr, ast.Yield,
    ast.YieldFrom, ast.Call, ast.IfExp, ast.BoolOp, ast.ListComp, ast.SetComp, ast.DictComp,
    ast.GeneratorExp,
})
# A fixpoint that has not settled by then (it grows sets of names; each
# round adds one at least): every attribute may hold the buffer.
MAX_ROUNDS = 200


def layer_aliases(tree: ast.Module) -> set[str]:
    """The attribute names that may hold what depends on the buffer, with
    ``"*"`` for every attribute."""
    return _Flow(tree).run()


def _params(fn) -> list[ast.arg]:
    a = fn.args
    return [p for p in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if p]


class _Scopes:
    """Which function each node is in, and what each function binds."""

    def __init__(self, tree: ast.Module):
        self.enclosing: dict[int, object] = {}  # id(node) -> its function, or None
        self.bound: dict[int, set] = {}  # id(function) -> the names it binds
        self.defs: dict[tuple, list] = {}  # a scope's name -> the defs/lambdas bound to it
        self.other: set[tuple] = set()  # a scope's names bound to anything else too
        free: dict[int, set] = {}
        self._visit(tree, None, free)
        for fid, names in free.items():
            self.bound[fid] -= names

    def _visit(self, node, fn, free) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(node, _FUNCTIONS) and child is not getattr(node, "args", None) and (
                child in (node.body if isinstance(node.body, list) else [node.body])
            ):
                inner = node
            else:
                inner = fn
            self.enclosing[id(child)] = inner
            if isinstance(child, _FUNCTIONS):
                self.bound.setdefault(id(child), set()).update(p.arg for p in _params(child))
            scope = self.bound.setdefault(id(inner), set()) if inner is not None else None
            if scope is not None:
                if isinstance(child, ast.Name) and not isinstance(child.ctx, ast.Load):
                    scope.add(child.id)
                elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    scope.add(child.name)
                elif isinstance(child, ast.alias):
                    scope.add((child.asname or child.name).split(".")[0])
                elif isinstance(child, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and (
                    child.name
                ):
                    scope.add(child.name)
                elif isinstance(child, ast.MatchMapping) and child.rest:
                    scope.add(child.rest)
                elif isinstance(child, (ast.Nonlocal, ast.Global)):
                    free.setdefault(id(inner), set()).update(child.names)
            # What a name of this scope is bound to: defs and lambdas only?
            if isinstance(child, _DEFS):
                self.defs.setdefault((id(inner), child.name), []).append(child)
            elif isinstance(child, ast.Assign) and len(child.targets) == 1 and isinstance(
                child.targets[0], ast.Name
            ) and isinstance(child.value, ast.Lambda):
                self.defs.setdefault((id(inner), child.targets[0].id), []).append(child.value)
            elif isinstance(child, ast.Name) and not isinstance(child.ctx, ast.Load):
                if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda)
                        and node.targets == [child]):
                    self.other.add((id(inner), child.id))
            elif isinstance(child, (ast.alias, ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
                name = getattr(child, "asname", None) or getattr(child, "name", None)
                if name:
                    self.other.add((id(inner), name.split(".")[0]))
            self._visit(child, inner, free)

    def key(self, name: str, node) -> tuple:
        """(id of the function whose local ``name`` is, or None for the
        module's, ``name``) as seen from ``node``."""
        fn = self.enclosing.get(id(node))
        while fn is not None:
            if name in self.bound.get(id(fn), ()):
                return (id(fn), name)
            fn = self.enclosing.get(id(fn))
        return (None, name)

    def local_defs(self, key: tuple):
        """The defs and lambdas a local name is bound to, if only to them."""
        if key[0] is None or key in self.other:
            return None
        return self.defs.get(key)


class _Flow:
    def __init__(self, tree: ast.Module):
        self.tree = tree
        self.scopes = _Scopes(tree)
        self.functions: dict[str, list] = {}  # module functions, by name
        self.methods: dict[str, list] = {}  # methods of every module class, by name
        self.inits: dict[str, list] = {}  # a module class -> its __init__(s)
        self.layer_names: set[str] = set()  # first parameters of methods
        self.static: set[int] = set()  # id() of static methods
        for stmt in tree.body:
            if isinstance(stmt, _DEFS):
                self.functions.setdefault(stmt.name, []).append(stmt)
            elif isinstance(stmt, ast.ClassDef):
                for fn in stmt.body:
                    if not isinstance(fn, _DEFS):
                        continue
                    self.methods.setdefault(fn.name, []).append(fn)
                    if fn.name == "__init__":
                        self.inits.setdefault(stmt.name, []).append(fn)
                    if any(isinstance(d, ast.Name) and d.id == "staticmethod"
                           for d in fn.decorator_list):
                        self.static.add(id(fn))
                        continue
                    positional = [*fn.args.posonlyargs, *fn.args.args]
                    if positional:
                        self.layer_names.add(positional[0].arg)
        self.classes = {s.name for s in tree.body if isinstance(s, ast.ClassDef)}
        self.carriers: set[tuple] = set()
        self.code: set[tuple] = set()
        self.returning: set[int] = set()  # id() of functions that may return a carrier
        self.tainted: set[int] = set()  # id() of functions run under the buffer's control
        self.aliases: set[str] = set()
        self.changed = False
        self._walked: dict[int, list] = {}
        self._children: dict[int, list] = {}
        self._acts: dict[int, bool] = {}
        self._functions = [n for n in ast.walk(tree) if isinstance(n, _FUNCTIONS)]

    def children(self, e) -> list:
        found = self._children.get(id(e))
        if found is None:
            found = self._children[id(e)] = list(ast.iter_child_nodes(e))
        return found

    def acts(self, e) -> bool:
        """``e`` holds something ``expression`` looks at (kept)."""
        found = self._acts.get(id(e))
        if found is None:
            found = self._acts[id(e)] = any(type(n) in _ACTS for n in self.nodes(e))
        return found

    def nodes(self, e) -> list:
        """``ast.walk(e)``, kept: the fixpoint asks of the same nodes often."""
        found = self._walked.get(id(e))
        if found is None:
            found = self._walked[id(e)] = list(ast.walk(e))
        return found

    def _add(self, kind: set, item) -> None:
        if item not in kind:
            kind.add(item)
            self.changed = True

    def key(self, node: ast.Name) -> tuple:
        return self.scopes.key(node.id, node)

    # -- values -----------------------------------------------------------

    def carries(self, e) -> bool:
        """``e`` may be, hold or depend on the buffer."""
        if e is None:
            return False
        for n in self.nodes(e):
            if _names_the_buffer(n):
                return True
            if isinstance(n, ast.Name) and self.key(n) in self.carriers:
                return True
            if isinstance(n, ast.Attribute) and any(
                id(fn) in self.returning for fn in self.methods.get(n.attr, ())
            ):
                return True  # a method or property that may return it
            if isinstance(n, ast.Call):
                callees = self.callees(n.func)
                if callees is None:
                    if isinstance(n.func, ast.Name) and self.key(n.func) in self.code:
                        return True
                elif any(id(fn) in self.returning for fn, _ in callees):
                    return True
        return False

    def holds_code(self, e) -> bool:
        """``e`` may be code of this module (not only its result)."""
        if e is None:
            return False
        nodes = self.nodes(e)
        called = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
        for n in nodes:
            if id(n) in called:
                continue
            if isinstance(n, ast.Lambda):
                return True
            if isinstance(n, ast.Name):
                k = self.key(n)
                if k in self.code or (k[0] is None and (
                    n.id in self.functions or n.id in self.classes
                )):
                    return True
            if isinstance(n, ast.Attribute) and n.attr in self.methods:
                return True
        return False

    # -- the fixpoint -----------------------------------------------------

    def run(self) -> set[str]:
        for _ in range(MAX_ROUNDS):
            self.changed = False
            for node in self._functions:
                self.defaults(node)
                tainted = id(node) in self.tainted
                if isinstance(node, ast.Lambda):
                    self.expression(node.body, tainted, node)
                    if tainted or self.carries(node.body):
                        self._add(self.returning, id(node))
                else:
                    self.block(node.body, tainted, node)
            for stmt in self.tree.body:
                if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                    for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]):
                        self.bind(t, stmt.value, False)
            if not self.changed:
                return self.aliases
        return self.aliases | {"*"}

    def defaults(self, fn) -> None:
        a = fn.args
        positional = [*a.posonlyargs, *a.args]
        pairs = [*zip(positional[len(positional) - len(a.defaults):], a.defaults),
                 *((p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None)]
        for p, d in pairs:
            self.param(fn, p.arg, d, False)

    def block(self, body: list, tainted: bool, fn) -> bool:
        """Walk statements; True when the block may leave (``return``,
        ``raise``, ``break``, ``continue``, ``assert``) on a path the buffer
        chose: what follows it in the function is chosen too."""
        left = False
        for stmt in body:
            if self.statement(stmt, tainted or left, fn):
                left = True
        return left

    def statement(self, s: ast.stmt, tainted: bool, fn) -> bool:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for d in s.decorator_list:
                self.expression(d, tainted, fn)
            if isinstance(s, ast.ClassDef):
                self.block(s.body, tainted, fn)
            elif tainted:
                self._taint(s)
            return False
        if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            self.expression(s.value, tainted, fn)
            for t in (s.targets if isinstance(s, ast.Assign) else [s.target]):
                self.expression(t, tainted, fn)
                if s.value is None:
                    continue
                value = ast.Tuple([s.value, t], ast.Load()) if isinstance(
                    s, ast.AugAssign) else s.value
                self.bind(t, value, tainted)
            return False
        if isinstance(s, ast.Return):
            self.expression(s.value, tainted, fn)
            if fn is not None and (tainted or self.carries(s.value)):
                self._add(self.returning, id(fn))
            return tainted
        if isinstance(s, (ast.Raise, ast.Break, ast.Continue)):
            for child in ast.iter_child_nodes(s):
                self.expression(child, tainted, fn)
            return tainted
        if isinstance(s, ast.Assert):
            self.expression(s.test, tainted, fn)
            self.expression(s.msg, tainted, fn)
            return tainted or self.carries(s.test)
        if isinstance(s, (ast.If, ast.While)):
            self.expression(s.test, tainted, fn)
            inner = tainted or self.carries(s.test)
            left = self.block(s.body, inner, fn)
            return self.block(s.orelse, inner, fn) or left
        if isinstance(s, (ast.For, ast.AsyncFor)):
            self.expression(s.iter, tainted, fn)
            inner = tainted or self.carries(s.iter)
            self.bind(s.target, s.iter, inner)
            left = self.block(s.body, inner, fn)
            return self.block(s.orelse, inner, fn) or left
        if isinstance(s, (ast.With, ast.AsyncWith)):
            inner = tainted
            for item in s.items:
                self.expression(item.context_expr, tainted, fn)
                inner = inner or self.carries(item.context_expr)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, item.context_expr, tainted)
            inner = inner or self.may_raise(s.body)
            return self.block(s.body, inner, fn)
        if isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
            inner = tainted or self.may_raise(s.body)
            left = self.block(s.body, inner, fn)
            for h in s.handlers:
                self.expression(h.type, inner, fn)
                if h.name:
                    self.bind(ast.Name(h.name, ast.Store()), ast.Constant(None), inner,
                              at=h)
                left = self.block(h.body, inner, fn) or left
            left = self.block(s.orelse, inner, fn) or left
            return self.block(s.finalbody, inner, fn) or left
        if isinstance(s, ast.Match):
            self.expression(s.subject, tainted, fn)
            inner = tainted or self.carries(s.subject)
            left = False
            for case in s.cases:
                chosen = inner
                for n in ast.walk(case.pattern):
                    if isinstance(n, ast.expr):
                        chosen = chosen or self.carries(n)
                for n in ast.walk(case.pattern):
                    for name in (getattr(n, "name", None), getattr(n, "rest", None)):
                        if isinstance(name, str):
                            self.bind(ast.Name(name, ast.Store()), s.subject, inner, at=n)
                self.expression(case.guard, chosen, fn)
                chosen = chosen or self.carries(case.guard)
                left = self.block(case.body, chosen, fn) or left
            return left
        if isinstance(s, ast.Delete):
            for t in s.targets:
                self.expression(t, tainted, fn)
                self.bind(t, ast.Constant(None), tainted)
            return False
        for child in ast.iter_child_nodes(s):
            if isinstance(child, ast.expr):
                self.expression(child, tainted, fn)
        return False

    def may_raise(self, body: list) -> bool:
        """``body`` may raise for the buffer's sake: it touches a carrier or
        calls code that is not outside code."""
        for stmt in body:
            if self.carries(stmt):
                return True
            for n in self.nodes(stmt):
                if isinstance(n, ast.Call) and not self.outside_callee(n.func):
                    return True
        return False

    def _taint(self, fn) -> None:
        self._add(self.tainted, id(fn))

    # -- expressions ------------------------------------------------------

    def expression(self, e, tainted: bool, fn) -> None:
        """The calls, walruses and yields in ``e``, each with whether a test
        on the buffer chose it."""
        if e is None or not self.acts(e):
            return
        todo = [(e, tainted)]
        while todo:
            n, t = todo.pop()
            if type(n) not in _ACTS:
                todo += [(c, t) for c in self.children(n)]
                continue
            if isinstance(n, _FUNCTIONS):
                if t:
                    self._taint(n)
                continue  # walked as a function of its own
            if isinstance(n, ast.NamedExpr):
                self.bind(n.target, n.value, t)
            if isinstance(n, (ast.Yield, ast.YieldFrom)) and fn is not None and (
                t or self.carries(n.value)
            ):
                self._add(self.returning, id(fn))
            if isinstance(n, ast.Call):
                self.call(n, t)
            if isinstance(n, ast.IfExp):
                chosen = t or self.carries(n.test)
                todo += [(n.test, t), (n.body, chosen), (n.orelse, chosen)]
                continue
            if isinstance(n, ast.BoolOp):
                chosen = t
                for v in n.values:
                    todo.append((v, chosen))
                    chosen = chosen or self.carries(v)
                continue
            if isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                chosen = t
                for g in n.generators:
                    todo.append((g.iter, chosen))
                    chosen = chosen or self.carries(g.iter)
                    self.bind(g.target, g.iter, chosen)
                    for cond in g.ifs:
                        todo.append((cond, chosen))
                        chosen = chosen or self.carries(cond)
                parts = [n.key, n.value] if isinstance(n, ast.DictComp) else [n.elt]
                todo += [(p, chosen) for p in parts]
                continue
            todo += [(c, t) for c in self.children(n)]

    def bind(self, target, value, tainted: bool, at=None) -> None:
        """``target`` receives ``value``."""
        carries = tainted or self.carries(value)
        code = self.holds_code(value)
        if not (carries or code):
            return
        for t in _targets(target):
            if isinstance(t, (ast.Attribute, ast.Subscript)):
                root = _root(t)
                if root is not None and root.id in self.layer_names:
                    first = _first_attr(t)  # self.a = v, self.a.b = v, self.a[k] = v
                    if first is not None and first != BUFFER_ATTR:
                        self._add(self.aliases, first)
                elif root is not None:  # d[k] = v: d took it in
                    self._add(self.carriers, self.key(root))
            elif isinstance(t, ast.Name):
                k = self.scopes.key(t.id, at if at is not None else t)
                if carries:
                    self._add(self.carriers, k)
                if code:
                    self._add(self.code, k)

    def callees(self, f):
        """This module's functions a call of ``f`` runs, each with how many
        leading parameters are bound already; None when the walk cannot
        name them as this module's code."""
        if isinstance(f, ast.Lambda):
            return [(f, 0)]
        if isinstance(f, ast.Name):
            k = self.key(f)
            if k[0] is None:
                if f.id in self.functions:
                    return [(fn, 0) for fn in self.functions[f.id]]
                if f.id in self.classes:
                    return [(fn, 1) for fn in self.inits.get(f.id, [])]
                return None
            defs = self.scopes.local_defs(k)
            return [(fn, 0) for fn in defs] if defs else None
        if isinstance(f, ast.Attribute) and f.attr in self.methods and not _is_super(f.value):
            # self.m(...), Class.m(...), or x.m(...) with x perhaps an
            # instance of a module class: every method of that name.
            return [(fn, 0 if id(fn) in self.static else 1) for fn in self.methods[f.attr]]
        return None

    def outside_callee(self, f) -> bool:
        """``f`` is code outside this module: an imported or builtin name,
        an attribute of one, a method of another object (not named as one
        of this module's), an imported base's method."""
        if isinstance(f, ast.Name):
            return self.key(f)[0] is None and f.id not in self.functions and (
                f.id not in self.classes
            )
        if isinstance(f, ast.Attribute):
            return f.attr not in self.methods and (_is_super(f.value) or _root(f) is not None)
        return False

    def call(self, c: ast.Call, tainted: bool) -> None:
        args = [a.value if isinstance(a, ast.Starred) else a for a in c.args]
        values = [*args, *(k.value for k in c.keywords)]
        handed = tainted or any(self.carries(a) or self.holds_code(a) for a in values)
        if not handed:
            return
        f = c.func
        if isinstance(f, ast.Name) and f.id == "setattr" and self.outside_callee(f):
            if len(args) >= 3 and (tainted or self.carries(args[2]) or self.holds_code(args[2])):
                self.store_named(args[1])
            return
        callees = self.callees(f)
        root = _root(f) if isinstance(f, ast.Attribute) else None
        if callees is not None:
            for fn, offset in callees:
                if tainted:
                    self._taint(fn)
                self.hand(c, fn, offset, tainted)
            if root is not None and root.id not in self.layer_names:
                self._add(self.carriers, self.key(root))  # x.m(v): x may have taken it in
            return
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and (
            f.value.id in self.layer_names
        ):
            if f.attr in REGISTERS:  # nn.Module stores it under that name
                self.store_named(args[0] if args else None)
            return  # an imported base's method: vLLM's own code
        if isinstance(f, ast.Attribute) and _is_super(f.value):
            return  # an imported base's method: vLLM's own code
        if root is not None and root.id in self.layer_names:
            first = _first_attr(f.value)
            if first is not None and first != BUFFER_ATTR:
                self._add(self.aliases, first)  # self.cache.put(v): self.cache took it in
            return
        if self.outside_callee(f):
            if any(_names_layer(a, self.layer_names) for a in values):
                self._add(self.aliases, "*")  # outside code handed the layer and the value
            elif root is not None and self.key(root)[0] is not None:
                self._add(self.carriers, self.key(root))  # d.append(v): d took it in
            return
        self._add(self.aliases, "*")  # a callee the walk cannot name

    def store_named(self, name) -> None:
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            if name.value != BUFFER_ATTR:
                self._add(self.aliases, name.value)
        else:
            self._add(self.aliases, "*")

    def hand(self, c: ast.Call, fn, offset: int, tainted: bool) -> None:
        """The parameters of ``fn`` that ``c``'s arguments reach."""
        a = fn.args
        positional = [*a.posonlyargs, *a.args][offset:]
        named = {p.arg for p in [*a.args, *a.kwonlyargs]}
        every = [p.arg for p in _params(fn)]
        for i, arg in enumerate(c.args):
            if isinstance(arg, ast.Starred):
                names, arg = every, arg.value
            elif i < len(positional):
                names = [positional[i].arg]
            else:
                names = [a.vararg.arg] if a.vararg else []
            for name in names:
                self.param(fn, name, arg, tainted)
        for k in c.keywords:
            if k.arg is None:
                names = every
            else:
                names = [k.arg] if k.arg in named else ([a.kwarg.arg] if a.kwarg else [])
            for name in names:
                self.param(fn, name, k.value, tainted)

    def param(self, fn, name: str, value, tainted: bool) -> None:
        if tainted or self.carries(value):
            self._add(self.carriers, (id(fn), name))
        if self.holds_code(value):
            self._add(self.code, (id(fn), name))


def _names_the_buffer(n) -> bool:
    """``n`` itself names the buffer (as ``syntax.names_buffer`` asks of a tree)."""
    kind = type(n)
    return (
        (kind is ast.Attribute and n.attr == BUFFER_ATTR)
        or (kind is ast.Name and n.id == BUFFER_ATTR)
        or (kind is ast.Constant and n.value == BUFFER_ATTR)
    )


def _targets(t):
    """The stores of an assignment target (unpacking looked through)."""
    if isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            yield from _targets(e)
    elif isinstance(t, ast.Starred):
        yield from _targets(t.value)
    else:
        yield t


def _root(node) -> ast.Name | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node if isinstance(node, ast.Name) else None


def _first_attr(node) -> str | None:
    """For ``self.a.b[...]``: ``a``."""
    first = None
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        if isinstance(node, ast.Attribute):
            first = node.attr
        node = node.func if isinstance(node, ast.Call) else node.value
    return first


def _is_super(node) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
        node.func.id == "super"
    )


def _names_layer(e, layer_names) -> bool:
    """``e`` may be the layer itself (a bare first parameter, not one of its
    attributes)."""
    under_attr = {id(n.value) for n in ast.walk(e) if isinstance(n, ast.Attribute)}
    return any(isinstance(n, ast.Name) and n.id in layer_names and id(n) not in under_attr
               for n in ast.walk(e))


__all__ = ["REGISTERS", "layer_aliases"]
