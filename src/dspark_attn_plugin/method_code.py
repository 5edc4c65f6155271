"""``forward_mqa`` compiled again from its source, the same way everywhere.

The runtime patch and ``status`` both build the method here, as a method of
a class named like vLLM's (so name mangling of ``self.__x`` and the
``__class__`` cell of ``super()`` are what the module's own compile gives),
beside the module's imports (which the compiler reads, never run),
and both accept the edit only when the unedited source, built the same way,
gives the bytecode of the function the module defines: the runtime compares
with the loaded function, ``status`` with the module file compiled whole.
Pure functions over ``ast`` and code objects: no vLLM, no torch.
"""

from __future__ import annotations

import ast
import copy
import types

from dspark_attn_plugin.target import CLASS_NAME, METHOD_NAME

FACTORY = "__dspark_attn_plugin_factory__"


def same_code(a: types.CodeType, b: types.CodeType) -> bool:
    """Same bytecode, names, variables and constants, nested code objects
    alike; line numbers and file names are not compared."""
    if (a.co_code, a.co_names, a.co_varnames, a.co_freevars, a.co_cellvars) != (
        b.co_code, b.co_names, b.co_varnames, b.co_freevars, b.co_cellvars,
    ) or len(a.co_consts) != len(b.co_consts):
        return False
    for x, y in zip(a.co_consts, b.co_consts):
        if isinstance(x, types.CodeType) and isinstance(y, types.CodeType):
            if not same_code(x, y):
                return False
        elif type(x) is not type(y) or x != y:
            return False
    return True


def _futures(tree: ast.Module) -> list[ast.stmt]:
    return [n for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "__future__"]


def _module_imports(tree: ast.Module) -> list[ast.stmt]:
    """The module scope's import statements (at any depth of its ``if``,
    ``try`` (its ``except`` arms too), ``with`` and ``match`` blocks, not
    inside functions or classes). The compiler of CPython 3.12+ reads them:
    a call on an imported module's attribute (``torch._check(...)``)
    compiles to a plain attribute load, other calls to a method call."""
    found = []
    todo = [n for n in tree.body if not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
    while todo:
        node = todo.pop(0)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo.extend(n for n in ast.iter_child_nodes(node)
                        if isinstance(n, (ast.stmt, ast.excepthandler, ast.match_case)))
    return found


def _code_named(code: types.CodeType, name: str) -> types.CodeType | None:
    found = [c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == name]
    return found[-1] if found else None


def module_method_code(source: str, filename: str) -> types.CodeType | None:
    """The code of ``CLASS_NAME.METHOD_NAME`` as the whole module source
    compiles (what Python runs when it imports that file)."""
    module = compile(source, filename, "exec", dont_inherit=True)
    cls = _code_named(module, CLASS_NAME)
    return _code_named(cls, METHOD_NAME) if cls is not None else None


def _in_class(function: ast.FunctionDef, tree: ast.Module, factory_arg: str | None) -> ast.Module:
    template = (
        f"def {FACTORY}({factory_arg}):\n"
        f"    class {CLASS_NAME}:\n        pass\n"
        f"    return {CLASS_NAME}.__dict__[{METHOD_NAME!r}]\n"
        if factory_arg
        else f"class {CLASS_NAME}:\n    pass\n"
    )
    module = ast.parse(template)
    cls = module.body[0].body[0] if factory_arg else module.body[0]
    cls.body = [copy.deepcopy(function)]
    imports = _module_imports(tree)
    if imports:  # seen by the compiler, never run
        never = ast.parse("if False:\n    pass\n").body[0]
        never.body = copy.deepcopy(imports)
        module.body.insert(0, never)
    module.body[:0] = copy.deepcopy(_futures(tree))
    ast.fix_missing_locations(module)
    return module


def plain_code(function: ast.FunctionDef, tree: ast.Module, filename: str) -> types.CodeType:
    """``function`` (unedited) compiled as a method of a class of that name."""
    code = compile(_in_class(function, tree, None), filename, "exec", dont_inherit=True)
    return _code_named(_code_named(code, CLASS_NAME), METHOD_NAME)


def edited_factory(edited: ast.FunctionDef, tree: ast.Module, filename: str,
                   note_name: str) -> types.CodeType:
    """Module code defining ``FACTORY(note)``, which returns the edited
    method, its note a closure cell (no global added to vLLM's module)."""
    return compile(_in_class(edited, tree, note_name), filename, "exec", dont_inherit=True)


def build_edited(factory_code: types.CodeType, globals_: dict, note, real_class: type,
                 stock: types.FunctionType) -> types.FunctionType:
    """Run the factory in the module's globals; the method's ``__class__``
    cell (``super()``) is pointed at the real class."""
    namespace: dict = {}
    exec(factory_code, globals_, namespace)
    function = namespace[FACTORY](note)
    for name, cell in zip(function.__code__.co_freevars, function.__closure__ or ()):
        if name == "__class__":
            cell.cell_contents = real_class
    function.__qualname__ = stock.__qualname__
    function.__dict__.update(stock.__dict__)
    return function
