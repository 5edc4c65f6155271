"""The module around the class: what the walk may know of it (R5)."""

from __future__ import annotations

import ast
import copy

from dspark_attn_plugin.warmup_shape.aliases import layer_aliases
from dspark_attn_plugin.warmup_shape.as_loaded import (
    CONSTANT_BUILTINS,
    NotAllowed,
    check_module,
    namespace,
)
from dspark_attn_plugin.warmup_shape.syntax import _stmt_binds
from dspark_attn_plugin.target import CLASS_NAME


def module_integrity(tree: ast.Module, cls: ast.ClassDef) -> str | None:
    """R5: why the class as loaded may not be the class as written (the
    allow-list of ``as_loaded``), or None."""
    try:
        check_module(tree, cls)
    except NotAllowed as exc:
        return str(exc)
    return None


def _constant_value(node, known: dict, inside: bool, shadowed: frozenset | set):
    """The value of a module constant's expression, or raise ValueError.
    Mutable containers are not constants (code may change them)."""
    if isinstance(node, ast.Name):
        if node.id in known:
            return known[node.id]
        raise ValueError(node.id)
    if isinstance(node, (ast.Set, ast.List)):  # mutable: constant only inside frozenset(...)
        if not inside:
            raise ValueError("mutable")
        return tuple(_constant_value(e, known, False, shadowed) for e in node.elts)
    if isinstance(node, ast.Tuple):
        return tuple(_constant_value(e, known, False, shadowed) for e in node.elts)
    if isinstance(node, ast.Dict):
        raise ValueError("mutable")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
        node.func.id in CONSTANT_BUILTINS and node.func.id not in shadowed and not node.keywords
        and len(node.args) <= 1
    ):
        inner = _constant_value(node.args[0], known, True, shadowed) if node.args else ()
        return {"frozenset": frozenset, "tuple": tuple}[node.func.id](inner)
    if isinstance(node, (ast.UnaryOp, ast.BinOp)):
        value = ast.literal_eval(ast.unparse(ast.Expression(_substitute(node, known))))
        if isinstance(value, (list, dict, set)):
            raise ValueError("mutable")
        return value
    value = ast.literal_eval(node)
    if isinstance(value, (list, dict, set)):
        raise ValueError("mutable")
    return value


def _substitute(node, known: dict):
    class Sub(ast.NodeTransformer):
        def visit_Name(self, n):
            if n.id not in known:
                raise ValueError(n.id)
            return ast.copy_location(ast.Constant(known[n.id]), n)
    return Sub().visit(copy.deepcopy(node))


def module_constants(tree: ast.Module) -> dict:
    """Module-level names bound once to an immutable constant expression."""
    counts: dict[str, int] = {}
    for stmt in tree.body:
        for name in _stmt_binds(stmt):
            counts[name] = counts.get(name, 0) + 1
    known: dict = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):  # `A = B = value` binds each target
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        else:
            continue
        if not all(isinstance(t, ast.Name) and counts.get(t.id) == 1 for t in targets):
            continue
        try:
            found = _constant_value(value, known, False, CONSTANT_BUILTINS & counts.keys())
        except (ValueError, TypeError, SyntaxError, RecursionError):
            continue
        known.update((t.id, found) for t in targets)
    return known


_CONTEXT_PACKAGES = ("torch", "contextlib")


def _context_imports(stmt) -> set[str]:
    """Names ``stmt`` binds to torch, contextlib or a name imported from
    them under its own name."""
    if isinstance(stmt, ast.Import):
        return {a.name.split(".")[0] for a in stmt.names
                if a.asname is None and a.name.split(".")[0] in _CONTEXT_PACKAGES}
    if isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and (
        (stmt.module or "").split(".")[0] in _CONTEXT_PACKAGES
    ):
        return {a.name for a in stmt.names if a.asname in (None, a.name) and a.name != "*"}
    return set()


class _Module:
    """What the walk may know of the module: the class's functions and
    plain attributes, module functions, module-level names, aliases."""

    def __init__(self, tree: ast.Module, cls: ast.ClassDef, methods: dict):
        ns = namespace(tree, cls)
        self.methods = {**ns.methods, **methods}
        self.owners = {**ns.owners, **{name: CLASS_NAME for name in methods}}
        self.class_attrs: dict[str, ast.stmt] = ns.attrs
        self.ambiguous: set[str] = ns.ambiguous - set(methods)
        self.constants: dict = module_constants(tree)
        # Without it, a nested def's annotations run when the def does.
        self.future_annotations = any(
            isinstance(n, ast.ImportFrom) and n.module == "__future__"
            and any(a.name == "annotations" for a in n.names) for n in tree.body)
        self.functions: dict[str, ast.FunctionDef] = {}
        self.module_names: set[str] = set()
        self.forward_context_names: set[str] = set()
        # Names bound once, by ``import torch`` / ``import contextlib`` or by
        # ``from torch... import no_grad`` under their own name: what a
        # ``with`` may trust not to swallow an exception.
        self.context_imports: set[str] = set()
        # What the walk resolved, for the runtime to check on the loaded
        # objects: ("member", name, owner class), ("function", name) and
        # ("constant", name, value).
        self.resolved: set = set()
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
            self.context_imports |= {
                name for name in _context_imports(stmt) if counts.get(name) == 1}
            # vLLM's own function only: one of that name from anywhere else
            # may return anything.
            if isinstance(stmt, ast.ImportFrom) and (stmt.level, stmt.module) == (
                0, "vllm.forward_context"
            ):
                for alias in stmt.names:
                    if alias.name == "get_forward_context" and counts.get(
                        alias.asname or alias.name
                    ) == 1:
                        self.forward_context_names.add(alias.asname or alias.name)
        # Module-level state: names bound to data that is not an immutable
        # constant, and the module's other classes. Any code of the module
        # may have put the buffer (or a value a test on it chose) into such
        # an object by a way no rule follows (another name, a default, a
        # class attribute, a callback): the walk reads it as derived.
        self.state_names: set[str] = {
            n for stmt in tree.body if isinstance(stmt, (ast.Assign, ast.AnnAssign))
            for n in _stmt_binds(stmt)} | {
            stmt.name for stmt in tree.body
            if isinstance(stmt, ast.ClassDef) and stmt.name != cls.name}
        self.state_names -= set(self.constants)
        # R1: attributes that may hold what depends on the buffer once the
        # module's other code has run (``aliases``), and module-level names.
        self.aliases, self.derived_globals = layer_aliases(tree, frozenset(self.state_names))
