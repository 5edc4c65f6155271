"""Questions about source text alone: where the class, the method and the
warmup branch are, which names a body binds, whether code names the buffer."""

from __future__ import annotations

import ast

from dspark_attn_plugin.target import CLASS_NAME
from dspark_attn_plugin.warmup_shape.verdict import BUFFER_ATTR


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


def _own_nodes(function):
    """The nodes of ``function``'s own scope (not of nested functions,
    lambdas or classes; their defaults and decorators are its own); for an
    expression, its nodes outside nested functions and lambdas."""
    body = getattr(function, "body", function)
    todo = list(body) if isinstance(body, list) else [body]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            a = getattr(node, "args", None)
            todo += [*getattr(node, "decorator_list", []), *getattr(node, "bases", []),
                     *(a.defaults if a else []), *(d for d in (a.kw_defaults if a else []) if d)]
            continue
        todo.extend(ast.iter_child_nodes(node))


def is_generator(function) -> bool:
    """``function`` has a ``yield`` of its own: calling it returns a generator."""
    return any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in _own_nodes(function))


def bound_once(function, name: str) -> bool:
    """``function`` binds ``name`` in one place, not inside a loop or a
    comprehension (so a closure reads the value it had when it was made, or
    an unbound cell)."""
    a = function.args
    params = [p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if p]
    count = params.count(name)
    body = function.body if isinstance(function.body, list) else [function.body]
    for stmt in body:
        count += _bindings_in(stmt, name, in_loop=False)
    return count == 1


def _bindings_in(node, name: str, in_loop: bool) -> int:
    """Binding sites of ``name`` in ``node`` (own scope); a site inside a
    loop counts twice."""
    weight = 2 if in_loop else 1
    count = 0
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        count += weight if node.name == name else 0
        a = getattr(node, "args", None)
        for d in [*node.decorator_list, *getattr(node, "bases", []),
                  *(a.defaults if a else []), *(d for d in (a.kw_defaults if a else []) if d)]:
            count += _bindings_in(d, name, in_loop)
        return count
    if isinstance(node, ast.Lambda):
        return sum(_bindings_in(d, name, in_loop)
                   for d in [*node.args.defaults, *(d for d in node.args.kw_defaults if d)])
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load) and node.id == name:
        count += weight
    elif isinstance(node, ast.alias) and (node.asname or node.name).split(".")[0] == name:
        count += weight
    elif isinstance(node, ast.ExceptHandler) and node.name == name:
        count += weight
    elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name == name:
        count += weight
    elif isinstance(node, ast.MatchMapping) and node.rest == name:
        count += weight
    loop = in_loop or isinstance(node, (ast.For, ast.AsyncFor, ast.While, ast.comprehension))
    for child in ast.iter_child_nodes(node):
        count += _bindings_in(child, name, loop)
    return count


def _object_key(e):
    """(the name an expression's object is reached from, the first
    attribute read off it or None): ``self._d['k']`` -> ("self", "_d")."""
    attr = None
    while isinstance(e, (ast.Attribute, ast.Subscript, ast.Call)):
        if isinstance(e, ast.Attribute):
            attr = e.attr
        e = e.func if isinstance(e, ast.Call) else e.value
    return (e.id, attr) if isinstance(e, ast.Name) else None


# Builtins that change no object of their own accord (what they are handed
# is counted apart).
_CHANGE_NOTHING = frozenset({
    "len", "int", "float", "bool", "str", "abs", "round", "min", "max", "tuple",
    "isinstance", "range",
})


def _changed_objects(stmts) -> set:
    """The objects ``stmts`` may change: stored into, deleted from,
    augmented, a method of called, or handed to a call. ``("*", None)``
    stands for objects it cannot name: a store through an expression that
    is not a name (a walrus, a call's result), a call of a function (a
    closure, this module's functions) that may change what it reaches, a
    decorator or an import."""
    found = set()

    def add(e) -> None:
        key = _object_key(e)
        found.add(key if key is not None else ("*", None))

    for stmt in stmts:
        for n in ast.walk(stmt):
            targets = []
            if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            elif isinstance(n, ast.Delete):
                targets = n.targets
            for t in targets:
                for x in ast.walk(t):
                    if isinstance(x, (ast.Attribute, ast.Subscript)) or (
                            isinstance(n, ast.AugAssign) and x is t and isinstance(x, ast.Name)):
                        add(x)
            if isinstance(n, (ast.Import, ast.ImportFrom)) or getattr(n, "decorator_list", None):
                found.add(("*", None))  # a module's code, a decorator: calls with no call node
            if isinstance(n, ast.Call):
                if isinstance(n.func, ast.Attribute):
                    add(n.func.value)
                elif not (isinstance(n.func, ast.Name) and n.func.id in _CHANGE_NOTHING):
                    found.add(("*", None))
                for a in [*n.args, *(k.value for k in n.keywords)]:
                    a = a.value if isinstance(a, ast.Starred) else a
                    if isinstance(a, (ast.Name, ast.Attribute, ast.Subscript)):
                        add(a)
    return found
