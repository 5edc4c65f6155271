"""Find and classify the ``forward_mqa`` that is actually loaded.

The verdict comes from the source of the loaded module, and only counts when
what the classifier assumed of that source holds of the loaded objects
(``check_assumptions``): every function the walk followed is, on the loaded
class or module, the code that source compiles to; every class member it
resolved resolves there too (through the MRO, ``inspect.getattr_static``);
the class's type is a plain one; nothing on the class intercepts the reads
of the buffer or the ratio. Anything else (a function replaced by other
code, a file edited after import, a module without source) is ``unknown``.
"""

from __future__ import annotations

import abc
import ast
import functools
import inspect
import os
import types

from dspark_attn_plugin import method_code
from dspark_attn_plugin.target import CLASS_NAME, METHOD_NAME
from dspark_attn_plugin.warmup_shape import (
    BUFFER_ATTR,
    RATIO_ATTR,
    Classification,
    Verdict,
    classify_source,
)
from dspark_attn_plugin.warmup_shape.as_loaded import mangle, unmangle

# Metaclasses that change nothing of how an instance's attributes are read.
PLAIN_METACLASSES = (type, abc.ABCMeta)


def _same_file(a: str | None, b: str | None) -> bool:
    return bool(a and b) and os.path.realpath(a) == os.path.realpath(b)


def classify_loaded(module: types.ModuleType) -> Classification:
    """Classify ``module.DeepseekV4FlashMLAAttention.forward_mqa`` as loaded."""
    cls = getattr(module, CLASS_NAME, None)
    if not isinstance(cls, type):
        return Classification(Verdict.ABSENT, f"{module.__name__} has no {CLASS_NAME}")
    func = cls.__dict__.get(METHOD_NAME)
    if not isinstance(func, types.FunctionType):
        return Classification(
            Verdict.UNKNOWN, f"{CLASS_NAME}.{METHOD_NAME} is not a plain function"
        )
    loader = getattr(module, "__loader__", None)
    get_source = getattr(loader, "get_source", None)
    try:
        source = get_source(module.__name__) if get_source else None
    except (ImportError, OSError, UnicodeDecodeError) as exc:
        return Classification(Verdict.UNKNOWN, f"cannot read the source of {module.__name__}: {exc}")
    if source is None:
        return Classification(Verdict.UNKNOWN, f"no source for {module.__name__}")
    code = func.__code__
    if not getattr(module, "__file__", None):
        return Classification(
            Verdict.UNKNOWN,
            f"{module.__name__} has no __file__: where {METHOD_NAME}'s code comes from "
            "cannot be checked",
        )
    if not _same_file(code.co_filename, getattr(module, "__file__", None)):
        return Classification(
            Verdict.UNKNOWN,
            f"{METHOD_NAME} was replaced by code from {code.co_filename}",
        )
    result = classify_source(source)
    if result.method_line is not None and result.method_line != code.co_firstlineno:
        return Classification(
            Verdict.UNKNOWN,
            f"loaded {METHOD_NAME} starts at line {code.co_firstlineno} but the "
            f"file's at line {result.method_line}: file changed since import?",
        )
    if result.verdict in (Verdict.AFFECTED, Verdict.FIXED, Verdict.NOT_AFFECTED):
        problem = check_assumptions(module, cls, source, code.co_filename, result.assumes)
        if problem:
            return Classification(
                Verdict.UNKNOWN,
                f"the loaded code is not what {module.__name__}'s source says: {problem}",
                result.method_line,
            )
    return result


@functools.lru_cache(maxsize=4)
def _compiled(source: str, filename: str) -> types.CodeType:
    return compile(source, filename, "exec", dont_inherit=True)


def _code_at(module_code: types.CodeType, *names: str) -> types.CodeType | None:
    code = module_code
    for name in names:
        found = [c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == name]
        if not found:
            return None
        code = found[-1]
    return code


def _member_code(module_code: types.CodeType, owner: str, name: str) -> types.CodeType | None:
    """The code of the ``def`` of class ``owner`` that the class stores
    under ``name`` (as stored, private names mangled). The def may spell it
    either way (``def __helper`` or ``def _Owner__helper``): its code is
    named as written."""
    cls = _code_at(module_code, owner)
    if cls is None:
        return None
    spellings = (name, unmangle(owner, name))
    found = [c for c in cls.co_consts if isinstance(c, types.CodeType) and c.co_name in spellings]
    return found[-1] if found else None


def _class_constant(source: str, owner: str, name: str):
    """The constant a class body of ``source`` binds ``name`` to, as
    ``(True, value)``; ``(False, None)`` where it binds no constant."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == owner:
            for stmt in node.body:
                target = (stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                          else getattr(stmt, "target", None))
                if isinstance(target, ast.Name) and mangle(owner, target.id) == name and isinstance(
                    getattr(stmt, "value", None), ast.Constant
                ):
                    return True, stmt.value.value
    return False, None


def _function_of(obj) -> types.FunctionType | None:
    """The function a class member runs: a plain function, or the one a
    ``staticmethod``, ``classmethod``, getter-only ``property`` or
    ``functools.cached_property`` holds."""
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    elif isinstance(obj, property):
        if obj.fset is not None or obj.fdel is not None:
            return None
        obj = obj.fget
    elif isinstance(obj, functools.cached_property):
        obj = obj.func
    return obj if isinstance(obj, types.FunctionType) else None


def check_assumptions(module: types.ModuleType, cls: type, source: str, filename: str,
                      assumes: tuple) -> str | None:
    """What the walk of ``source`` assumed that the loaded ``module`` and
    its class ``cls`` do not keep; None when every assumption holds."""
    if type(cls) not in PLAIN_METACLASSES:
        return f"{CLASS_NAME}'s metaclass is {type(cls).__name__}"
    if inspect.getattr_static(cls, "__getattribute__", None) is not object.__getattribute__:
        return f"{CLASS_NAME} defines its own __getattribute__"
    for attr in (BUFFER_ATTR, RATIO_ATTR):
        found = inspect.getattr_static(cls, attr, None)
        if found is not None and (hasattr(type(found), "__set__")
                                  or hasattr(type(found), "__delete__")):
            return f"{CLASS_NAME}.{attr} is a data descriptor ({type(found).__name__})"
    compiled = _compiled(source, filename)
    for entry in assumes:
        if entry[0] == "constant":
            _, name, value = entry
            loaded = module.__dict__.get(name)
            if type(loaded) is not type(value) or loaded != value:
                return f"the module constant {name} is {loaded!r}, not {value!r} as its source says"
            continue
        if entry[0] == "function":
            name = entry[1]
            loaded = module.__dict__.get(name)
            expected = _code_at(compiled, name)
            if not isinstance(loaded, types.FunctionType) or expected is None or not (
                method_code.same_code(loaded.__code__, expected)
            ):
                return f"the module function {name} is not the one its source defines"
            continue
        _, name, owner = entry
        holder = next((k for k in cls.__mro__ if name in k.__dict__), None)
        if holder is None or holder.__name__ != owner or holder.__module__ != module.__name__ or (
            module.__dict__.get(owner) is not holder
        ):
            where = "nowhere" if holder is None else f"{holder.__module__}.{holder.__qualname__}"
            return f"{CLASS_NAME}.{name} resolves to {where}, not to {owner} of this module"
        obj = inspect.getattr_static(cls, name)
        is_constant, value = _class_constant(source, owner, name)
        if is_constant:
            if type(obj) is not type(value) or obj != value:
                return f"{owner}.{name} is {obj!r}, not the constant {value!r} of its source"
            continue
        function = _function_of(obj)
        expected = _member_code(compiled, owner, name)
        if function is None or expected is None or not method_code.same_code(
            function.__code__, expected
        ):
            return f"{owner}.{name} is not the function its source defines"
    return None
