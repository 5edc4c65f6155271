"""The module around the class: what the walk may know of it (R5)."""

from __future__ import annotations

import ast

from dspark_attn_plugin.warmup_shape.syntax import (
    _stmt_binds,
    names_buffer,
)
from dspark_attn_plugin.warmup_shape.verdict import (
    BUFFER_ATTR,
)
from dspark_attn_plugin.target import CLASS_NAME, METHOD_NAME


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
