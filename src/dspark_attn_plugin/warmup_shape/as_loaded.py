"""The module as loaded (R5): the allow-list a flashmla module must pass
before the walk of ``forward_mqa`` can stand for what runs.

Python decides what runs when it imports the module, not only inside the
method: a statement after the class can rebind a helper, a base class can
change its subclasses, a class body can bind a name twice. So the whole
module is read first, and every statement must be one of these (anything
else is ``unknown``):

M1 *Module statements*: docstrings; imports of ``IMPORT_ROOTS`` packages
   (and relative ones), in a function too, and of the standard library
   only the modules ``STDLIB_MODULES`` names (not ``logging.config``);
   ``if TYPE_CHECKING:`` holding only imports;
   ``NAME = value`` and ``NAME: T = value`` where the value is *simple*
   (a constant expression, a module constant, an imported name or its
   attribute, another class of this module, or a call of an imported name
   with simple arguments, such as ``logger = init_logger(__name__)``),
   never to a special name but ``__all__``; a name bound to what such a
   call gave is not called at import in turn;
   ``def`` with imported decorators;
   ``class`` as in M2/M3. Every module-level name is bound once, none is
   a builtin's (``AssertionError``, ``property``, ``len``, ...), and none
   is special but ``__all__``, by any statement (a ``class __builtins__``
   becomes the builtins of every function defined after it).
M2 *The class and its bases*: no decorator, no keyword (metaclass); each
   base an imported name or a class of this module that passes the same
   test. Their members make up the class, in Python's method resolution
   order; a member that an imported base may define first is not known.
M3 *Class bodies*: docstrings, ``def`` (undecorated, or ``staticmethod``,
   ``classmethod``, ``property``, ``cached_property``), ``NAME = simple``,
   annotations; every name bound once (as Python stores it: a private
   ``__x`` of class ``K`` is ``_K__x``), and none a builtin's or one the
   module binds (a body looks its names up in itself first: a member named
   ``property`` or ``cached_property`` changes what the decorators after
   it mean); no member named as the buffer or the ratio; no special method
   but ``__init__``, ``__repr__``, ``__str__``. Other classes of the module
   pass M3 with imported decorators allowed.
M4 *Stores anywhere in the module*: an attribute is stored or deleted
   (``setattr``/``delattr`` with a constant name included) only on a
   method's own instance (``self.x = ...``), never into a name the class
   defines, nor a special name; no ``global`` statement.
M5 *No reflection*: the module never names ``eval``, ``exec``,
   ``compile``, ``globals``, ``locals``, ``vars``, ``__import__``,
   ``breakpoint``, ``update_wrapper``, ``wraps`` (they copy ``__code__``,
   ``__defaults__``, ``__dict__`` between objects),
   ``setattr``/``delattr``/``getattr`` with a computed name, nor a special
   attribute other than ``__name__``, ``__qualname__``, ``__class__``,
   ``__doc__``, ``__module__``, ``__init__`` (as an attribute or as the
   constant name ``getattr``/``hasattr``/``setattr``/``delattr`` are handed),
   nor a special name (``__builtins__``, ``__loader__``) but those and
   ``__file__``, ``__all__``, ``__debug__``. Nothing reaches a module of
   the standard library that M1 does not allow (``OUTSIDE_MODULES``) by
   any name: an attribute so named, whatever it is read off
   (``torch.sys``, ``m.builtins``), a name imported so (``from typing
   import sys``), a part of a dotted import. No attribute of a frame, a
   traceback, a generator, a coroutine or a code object (``f_locals``,
   ``f_back``, ``tb_frame``, ``gi_frame``, ``co_consts``): they reach a
   running function's locals, the layer among them. None of Python's ways
   to reach a frame, run a string as code, read an attribute a string
   names or find objects nobody handed over (``_reflection``: ``eval``,
   ``sys._getframe``, ``logging.currentframe``, ``operator.attrgetter``,
   ``importlib.import_module``, ``typing.ForwardRef``, ``gc.get_objects``,
   ...): by its name anywhere (``REFLECTION_NAMES``), and by what it is
   where the module can be read: every imported name and every attribute
   chain off one is looked up, without running code, in the standard
   library's allowed modules and in packages already imported (at run
   time, torch and vLLM), and may be neither one of those functions
   (``from torch.autograd.profiler_util import attrgetter``) nor a module
   outside the allow-list (``enum.bltns`` is ``builtins``,
   ``collections._sys`` is ``sys``). An imported module is read only
   through its attributes (``m = torch``, ``getattr(typing, n)`` are
   refused). No string a ``format`` would follow into attributes or
   items (``'{0.f_locals[self]}'``), and no ``format`` of a string built
   at run time (or reached by ``getattr``); no private name read off what
   a call or an item gave (``get_args(...)[0]._evaluate``); no private
   module of any package (``torch._utils``, ``torch._jit_internal``,
   ``vllm._custom_ops``), imported or reached; no class that makes
   modules (vLLM's ``LazyLoader`` imports what a string names).
M6 *Evaluated at definition*: default arguments, decorators, annotations
   (without ``from __future__ import annotations``), class keywords and
   bases call nothing but imported names. Annotations are held to it with
   ``from __future__ import annotations`` too, and a string in one is read
   as the expression it spells (M5 included): ``typing.get_type_hints``
   evaluates them whenever it is called.

The runtime then checks what this reading assumed against the loaded
objects (``loaded_code``).
"""

from __future__ import annotations

import ast
import builtins
import importlib
import re
import string
import sys
import types
from dataclasses import dataclass, field
from functools import lru_cache

from dspark_attn_plugin.target import CLASS_NAME
from dspark_attn_plugin.warmup_shape.verdict import BUFFER_ATTR, RATIO_ATTR

# Packages a flashmla module may import from (M1): what vLLM's own modules
# import. Anything else (``sys``, ``inspect``, ``gc``, ...) can reach frames
# or rebind the module: ``unknown``.
IMPORT_ROOTS = frozenset({
    "__future__", "typing", "typing_extensions", "torch", "vllm", "math", "enum",
    "dataclasses", "contextlib", "functools", "collections", "itertools", "logging",
    "abc", "numpy", "triton", "einops", "flashinfer", "deep_gemm",
})
# The standard library's modules that M1 does not allow: reaching one
# through an allowed package (``torch.sys``, ``from typing import sys``,
# ``dataclasses.inspect``, ``torch.builtins.exec``) is importing it. Any
# attribute so named is refused, whatever it is read off (``m = torch;
# m.sys``): the walk cannot tell a module from another object.
OUTSIDE_MODULES = (frozenset(sys.stdlib_module_names) | {"builtins"}) - IMPORT_ROOTS
# The standard library's modules of IMPORT_ROOTS, one by one: their
# submodules (``logging.config``, which imports any object a string
# names) are other modules.
STDLIB_MODULES = frozenset({"__future__", "typing", "math", "enum", "dataclasses", "contextlib",
                            "functools", "collections", "collections.abc", "itertools",
                            "logging", "abc"})
# The attributes of frames, tracebacks, generators, coroutines and code
# objects (``f_locals``, ``f_back``, ``tb_frame``, ``gi_frame``, ``co_consts``):
# they reach a running function's locals (the layer as ``self``), however
# the object was had (``logging.currentframe()``).
INTERNALS = re.compile(r"(f|tb|gi|cr|ag|co)_[a-z]")
# Python's ways to reach a running function's frame, run a string as
# code, read an attribute a string names, or find objects nobody handed
# over, by the names they are defined under (an allowed package that
# re-exports one keeps its name: ``from importlib import import_module``);
# under other names they are found by identity (``_reflection``).
REFLECTION_NAMES = frozenset({
    "eval", "exec", "globals", "locals", "vars", "__import__", "breakpoint",
    "import_module", "attrgetter", "methodcaller", "currentframe", "_getframe",
    "_current_frames", "getouterframes", "getinnerframes", "walk_stack", "walk_tb",
    "extract_stack", "get_type_hints", "ForwardRef", "get_objects", "get_referrers",
    "get_referents", "Formatter", "format_map", "resolve_obj_by_qualname",
    "evaluate_forward_ref", "_evaluate", "_eval_type", "resolve_name",
    "_import_dotted_name", "createResolutionCallbackFromFrame", "LazyLoader", "locate",
})
# Special names a module's code may read as names (``__builtins__``,
# ``__loader__``, ``__spec__``, ``__dict__`` are refused).
SPECIAL_NAMES_READ = frozenset({"__name__", "__doc__", "__file__", "__qualname__",
                                "__module__", "__class__", "__all__", "__debug__"})
REFLECTIVE = frozenset({"eval", "exec", "compile", "globals", "locals", "vars",
                        "__import__", "breakpoint"})
# functools' copiers of special attributes (``__code__``, ``__defaults__``,
# ``__dict__``): named anywhere, as a name or an attribute.
COPIERS = frozenset({"update_wrapper", "wraps"})
SPECIAL_ATTRS_READ = frozenset({"__name__", "__qualname__", "__class__", "__doc__",
                                "__module__", "__init__"})
SPECIAL_METHODS = frozenset({"__init__", "__repr__", "__str__"})
MEMBER_DECORATORS = frozenset({"staticmethod", "classmethod", "property", "cached_property"})
# The builtins' names: the module may not bind one (an ``except
# AssertionError`` or ``@property`` must mean Python's own).
BUILTIN_NAMES = frozenset(n for n in dir(builtins) if not n.startswith("__"))
# Builtins that make a constant of constants.
CONSTANT_BUILTINS = frozenset({"frozenset", "tuple"})


class NotAllowed(Exception):
    """The module holds something outside the allow-list."""


@dataclass
class Namespace:
    """The class's members as the walk may know them."""

    methods: dict = field(default_factory=dict)  # name -> FunctionDef
    attrs: dict = field(default_factory=dict)  # name -> class-body statement
    owners: dict = field(default_factory=dict)  # name -> name of the defining class
    # Defined by a class of this module that an imported base precedes in
    # the MRO: which one Python finds is not known here.
    ambiguous: set = field(default_factory=set)
    members: set = field(default_factory=set)  # every name any of them binds


def _line(node) -> str:
    return f"line {getattr(node, 'lineno', '?')}"


def _root(node) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


class _Reader:
    def __init__(self, tree: ast.Module):
        self.tree = tree
        self.imported: set[str] = set()
        self.made: set[str] = set()  # module names bound to what an import-time call gave
        self.constants: set[str] = set()
        self.classes: dict[str, ast.ClassDef] = {}
        self.bound = {n for stmt in tree.body for n in _module_bindings(stmt)}
        self.future_annotations = any(
            isinstance(n, ast.ImportFrom) and n.module == "__future__"
            and any(a.name == "annotations" for a in n.names)
            for n in tree.body
        )

    # -- values ---------------------------------------------------------------
    def imported_ref(self, node) -> bool:
        return _root(node) in self.imported and isinstance(node, (ast.Name, ast.Attribute))

    def constant(self, node) -> bool:
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, ast.Name):
            return node.id in self.constants
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return all(self.constant(e) for e in node.elts)
        if isinstance(node, ast.Dict):
            return all(k is not None and self.constant(k) for k in node.keys) and all(
                self.constant(v) for v in node.values)
        if isinstance(node, ast.UnaryOp):
            return self.constant(node.operand)
        if isinstance(node, ast.BinOp):
            return self.constant(node.left) and self.constant(node.right)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return (node.func.id in CONSTANT_BUILTINS and node.func.id not in self.bound
                    and not node.keywords and all(self.constant(a) for a in node.args))
        return False

    def simple(self, node) -> bool:
        """A constant expression, an imported name, or a call of one with
        simple arguments (M1)."""
        if self.constant(node) or self.imported_ref(node):
            return True
        if isinstance(node, ast.Name) and (
            node.id == "__name__" or (node.id in self.classes and node.id != CLASS_NAME)
        ):
            return True  # the module's name; another class of this module
        if isinstance(node, ast.Subscript):
            return self.simple(node.value) and self.simple(node.slice)
        if isinstance(node, (ast.Tuple, ast.List)):
            return all(self.simple(e) for e in node.elts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # int | None
            return self.simple(node.left) and self.simple(node.right)
        if isinstance(node, ast.Call):
            return self.imported_ref(node.func) and all(
                self.simple(a) for a in node.args) and all(
                k.arg is not None and self.simple(k.value) for k in node.keywords)
        return False

    def inert(self, node) -> bool:
        """Evaluating ``node`` at definition runs no code of this module
        (M6): no call but of imported names, no walrus, no yield."""
        for n in ast.walk(node):
            if isinstance(n, ast.Call) and not (
                self.imported_ref(n.func) or (isinstance(n.func, ast.Name)
                                              and n.func.id in MEMBER_DECORATORS)
            ):
                return False
            if isinstance(n, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)):
                return False
        return True

    def require(self, ok: bool, node, what: str) -> None:
        if not ok:
            raise NotAllowed(f"{_line(node)}: {what}")

    # -- definitions ----------------------------------------------------------
    def function(self, fn, *, decorators_ok) -> None:
        for d in fn.decorator_list:
            self.require(decorators_ok(d), d, f"{fn.name} has a decorator the walk cannot see")
        a = fn.args
        for d in [*a.defaults, *(d for d in a.kw_defaults if d is not None)]:
            self.require(self.inert(d), d, f"a default argument of {fn.name} runs code")
        if not self.future_annotations:
            notes = [p.annotation for p in [*a.posonlyargs, *a.args, *a.kwonlyargs,
                                            a.vararg, a.kwarg] if p is not None]
            for n in [*notes, fn.returns]:
                if n is not None:
                    self.require(self.inert(n), n, f"an annotation of {fn.name} runs code")

    def class_body(self, cls: ast.ClassDef, *, strict: bool) -> None:
        """M3 for ``cls``; ``strict`` for the target and its bases."""
        seen: set[str] = set()
        for stmt in cls.body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue
            if isinstance(stmt, ast.Pass):
                continue
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = stmt.name
                self.function(stmt, decorators_ok=(
                    (lambda d: _member_decorator(d, self)) if strict else self._decorator_ok))
                if strict:
                    self.require(len(stmt.decorator_list) <= 1, stmt,
                                 f"{cls.name}.{name} has more than one decorator")
            elif isinstance(stmt, ast.Assign):
                self.require(len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name),
                             stmt, f"{cls.name} assigns something other than one name")
                self.require(self.simple(stmt.value), stmt,
                             f"{cls.name}.{stmt.targets[0].id} is not a constant or an imported name")
                name = stmt.targets[0].id
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                self.require(self.future_annotations or self.inert(stmt.annotation), stmt,
                             f"the annotation of {cls.name}.{stmt.target.id} runs code")
                if stmt.value is None:
                    continue  # an annotation binds nothing
                self.require(self.simple(stmt.value), stmt,
                             f"{cls.name}.{stmt.target.id} is not a constant or an imported name")
                name = stmt.target.id
            else:
                raise NotAllowed(
                    f"{_line(stmt)}: {cls.name}'s body holds a {type(stmt).__name__} statement")
            # A class body looks its names up in itself first: a member
            # named ``property``, ``len`` or ``cached_property`` changes
            # what the decorators and values after it in the body mean.
            self.require(name not in BUILTIN_NAMES, stmt,
                         f"{cls.name} binds {name}, the name of a builtin")
            self.require(name not in self.bound, stmt,
                         f"{cls.name} binds {name}, a name the module binds")
            name = mangle(cls.name, name)  # what the class's dict holds
            self.require(name not in seen, stmt, f"{cls.name} binds {name} more than once")
            seen.add(name)
            if strict:
                self.require(name not in (BUFFER_ATTR, RATIO_ATTR), stmt,
                             f"{cls.name} defines {name} at class level (a descriptor?)")
                self.require(not _special(name) or name in SPECIAL_METHODS, stmt,
                             f"{cls.name} defines the special name {name}")

    def _decorator_ok(self, d) -> bool:
        if isinstance(d, ast.Name) and d.id in MEMBER_DECORATORS and d.id not in self.classes:
            return True
        target = d.func if isinstance(d, ast.Call) else d
        return self.imported_ref(target) and (not isinstance(d, ast.Call) or self.simple(d))

    def target_chain(self, cls: ast.ClassDef, seen: tuple = ()) -> None:
        """M2 for ``cls`` and every class of this module among its bases."""
        self.require(cls.name not in seen, cls, f"{cls.name} is its own base")
        self.require(not cls.decorator_list, cls, f"{cls.name} is decorated")
        self.require(not cls.keywords, cls, f"{cls.name} has class keywords (a metaclass)")
        self.class_body(cls, strict=True)
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id in self.classes:
                self.target_chain(self.classes[base.id], (*seen, cls.name))
            else:
                self.require(self.imported_ref(base), base,
                             f"a base of {cls.name} is neither imported nor a class of this module")


def _private_part(name: str) -> bool:
    return name.startswith("_") and not _special(name)


def _special(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def private(name: str) -> bool:
    """A name Python mangles inside a class body: ``__x``, not ``__x__``."""
    return name.startswith("__") and not name.endswith("__") and "." not in name


def mangle(class_name: str, name: str) -> str:
    """``name`` as written in class ``class_name``'s body, as Python stores it."""
    stripped = class_name.lstrip("_")
    return f"_{stripped}{name}" if private(name) and stripped else name


def unmangle(class_name: str, name: str) -> str:
    """The name a class member was written with (a code object's name)."""
    prefix = f"_{class_name.lstrip('_')}__"
    return name[len(prefix) - 2:] if name.startswith(prefix) and class_name.lstrip("_") else name


def _member_decorator(d, reader: _Reader) -> bool:
    if isinstance(d, ast.Name):
        return d.id in MEMBER_DECORATORS and (
            d.id in reader.imported if d.id == "cached_property" else d.id not in reader.bound)
    return (isinstance(d, ast.Attribute) and d.attr == "cached_property"
            and reader.imported_ref(d))


def _module_bindings(stmt) -> list[str]:
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in stmt.names if a.name != "*"]
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, ast.Assign):
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id] if stmt.value is not None else []
    if isinstance(stmt, ast.If):
        return [n for s in stmt.body for n in _module_bindings(s)]
    return []


def _type_checking(test) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def check_module(tree: ast.Module, cls: ast.ClassDef) -> None:
    """Raise NotAllowed, with the line and the reason, unless the module
    passes M1-M6 with ``cls`` as the target class."""
    r = _Reader(tree)
    bound: dict[str, int] = {}
    for stmt in tree.body:
        for name in _module_bindings(stmt):
            r.require(name not in bound, stmt,
                      f"the module binds {name} again (first at line {bound.get(name)})")
            r.require(name not in BUILTIN_NAMES, stmt,
                      f"the module binds {name}, the name of a builtin")
            r.require(not _special(name) or name == "__all__", stmt,  # class __builtins__: ...
                      f"the module binds the special name {name}")
            bound[name] = stmt.lineno
    for stmt in tree.body:  # M1, in order: a constant is known after its line
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            _check_import(stmt, r)  # (here first, in order; again with every import)
            r.require(not any(a.name == "*" for a in stmt.names), stmt, "a star import")
            r.imported |= set(_module_bindings(stmt))
        elif isinstance(stmt, ast.If) and _type_checking(stmt.test):
            r.require(not stmt.orelse and all(
                isinstance(s, (ast.Import, ast.ImportFrom)) for s in stmt.body
            ), stmt, "an `if TYPE_CHECKING:` block holds more than imports")
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            r.require(all(isinstance(t, ast.Name) for t in targets), stmt,
                      "a module-level assignment to something other than a name")
            if isinstance(stmt, ast.AnnAssign):
                r.require(r.future_annotations or r.inert(stmt.annotation), stmt,
                          f"the annotation of {stmt.target.id} runs code")
            if stmt.value is None:
                continue
            r.require(r.simple(stmt.value), stmt,
                      f"{', '.join(t.id for t in targets)} is assigned a value that is not a "
                      "constant or an imported name (an alias, or code that runs at import)")
            if r.constant(stmt.value):
                r.constants |= {t.id for t in targets}
            elif r.imported_ref(stmt.value):
                r.imported |= {t.id for t in targets}
            else:  # what a call (or an item) gave: not called at import in turn
                r.made |= {t.id for t in targets}
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            r.function(stmt, decorators_ok=r._decorator_ok)
        elif isinstance(stmt, ast.ClassDef):
            r.classes[stmt.name] = stmt
            if stmt.name != CLASS_NAME:
                for d in stmt.decorator_list:
                    r.require(r._decorator_ok(d), d, f"{stmt.name} has a decorator the walk cannot see")
                for e in [*stmt.bases, *(k.value for k in stmt.keywords)]:
                    r.require(r.inert(e), e, f"a base or keyword of {stmt.name} runs code")
                r.class_body(stmt, strict=False)
        else:
            raise NotAllowed(
                f"{_line(stmt)}: a module-level {type(stmt).__name__} statement (the allow-list: "
                "imports, constants, def, class, if TYPE_CHECKING)")
    r.target_chain(cls)
    members = namespace(tree, cls).members
    _check_everywhere(tree, r, members)


def _check_everywhere(tree: ast.Module, r: _Reader, members: set) -> None:
    """M4 and M5, over every node of the module."""
    shadowed = set(r.imported) | set(r.made) | set(r.constants) | set(r.classes)
    instance_names = _instance_names(tree, r)
    for note in _annotations(tree):
        # ``typing.get_type_hints`` evaluates annotations (strings and those
        # ``from __future__ import annotations`` keeps): code at any time.
        for code in _annotation_code(note):
            r.require(r.inert(code), note, "an annotation runs code")
            for node in ast.walk(code):
                _check_reach(node, r)
    _check_chains(tree, r)
    for node in ast.walk(tree):
        _check_reach(node, r)
        if isinstance(node, ast.Global):
            raise NotAllowed(f"{_line(node)}: declares global {', '.join(node.names)}")
        if isinstance(node, ast.Name) and node.id in REFLECTIVE and node.id not in shadowed:
            raise NotAllowed(f"{_line(node)}: uses {node.id}, which can reach the layer "
                             "or rebind the module")
        if isinstance(node, ast.Attribute) and _special(node.attr) and (
            node.attr not in SPECIAL_ATTRS_READ or not isinstance(node.ctx, ast.Load)
        ):
            raise NotAllowed(f"{_line(node)}: uses the special attribute {node.attr}")
        if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
            _check_store(node, node.value, node.attr, instance_names, members)
        # Only an import binds them (not builtins): imported under any name
        # (``from functools import wraps as w``), or named, they are refused.
        if (isinstance(node, ast.Name) and node.id in COPIERS
                and node.id not in r.constants and node.id not in r.classes
                or isinstance(node, ast.Attribute) and node.attr in COPIERS
                or isinstance(node, ast.alias) and node.name.split(".")[-1] in COPIERS):
            raise NotAllowed(f"{_line(node)}: uses "
                             f"{getattr(node, 'id', None) or getattr(node, 'attr', None) or node.name}, "
                             "which copies code and defaults between functions")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr") and node.func.id not in shadowed):
            name = node.args[1] if len(node.args) > 1 else None
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                r.require(not _special(name.value) or name.value in SPECIAL_ATTRS_READ, node,
                          f"{node.func.id} of the special attribute {name.value}")
                r.require(name.value not in COPIERS, node, f"{node.func.id} of {name.value}")
            else:
                r.require(node.func.id == "hasattr", node, "getattr with a computed name")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("setattr", "delattr") and node.func.id not in shadowed):
            name = node.args[1] if len(node.args) > 1 else None
            r.require(isinstance(name, ast.Constant) and isinstance(name.value, str), node,
                      f"{node.func.id} with a computed name")
            _check_store(node, node.args[0], name.value, instance_names, members)


def _check_import(node, r: _Reader) -> list[str]:
    """M1 for an import anywhere in the module: a package of the
    allow-list (of the standard library, only ``STDLIB_MODULES``), no
    private module. Returns the absolute module names it names."""
    modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
               else [node.module or ""] if not node.level else [])
    for name in modules:
        r.require(not any(_private_part(p) for p in name.split(".")), node,
                  f"imports the private module {name}")
        root = name.split(".")[0]
        r.require(root in IMPORT_ROOTS and (root not in sys.stdlib_module_names
                                            or name in STDLIB_MODULES), node,
                  f"the module imports {name}, which is not on the allow-list")
    return modules


def _check_reach(node, r: _Reader) -> None:
    """What a node may reach (M5): no standard-library module but the
    allowed ones, under any name; no frame's (traceback's, generator's,
    code object's) attributes; no special name but a few; none of
    Python's reflective functions by its name; no format string that
    reads attributes."""
    names: list[str] = []
    if isinstance(node, ast.Attribute):
        names = [node.attr]
        r.require(node.attr != "format" or isinstance(node.value, ast.Constant), node,
                  "formats a string the walk cannot read (format follows attributes)")
        r.require(not (node.attr.startswith("_") and not _special(node.attr))
                  or _root(node) is not None or not isinstance(node.ctx, ast.Load), node,
                  f"reads {node.attr}, a private name of what a call or an item gave")
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        modules = _check_import(node, r)  # M1, in a function too
        names = [part for name in modules for part in name.split(".")]
        if isinstance(node, ast.ImportFrom):
            names += [a.name for a in node.names]
    elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
          and node.func.id in ("getattr", "hasattr", "setattr", "delattr") and len(node.args) > 1
          and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
        names = [node.args[1].value]
        r.require(names[0] != "format" or isinstance(node.args[0], ast.Constant), node,
                  "formats a string the walk cannot read (format follows attributes)")
    elif isinstance(node, ast.Name):
        r.require(not _special(node.id) or node.id in SPECIAL_NAMES_READ, node,
                  f"uses the special name {node.id}")
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        _check_format(node, r)
    for name in names:
        r.require(name not in REFLECTION_NAMES, node,
                  f"names {name}, which reaches frames or runs strings as code")
        r.require(name not in OUTSIDE_MODULES, node,
                  f"reaches {name}, a module of the standard library not on the allow-list")
        r.require(not INTERNALS.match(name), node,
                  f"reads {name}, which reaches a running function's frame or code")


@lru_cache(maxsize=1)
def _reflection() -> dict:
    """id -> name of each of Python's reflective functions and classes
    (what ``REFLECTION_NAMES`` names), held here so they stay alive."""
    import gc
    import inspect
    import logging
    import operator
    import traceback
    import typing

    found = {}
    for owner, names in ((builtins, ("eval", "exec", "compile", "globals", "locals", "vars",
                                     "__import__", "breakpoint")),
                         (sys, ("_getframe", "_current_frames", "_current_exceptions", "exc_info",
                                "exception", "settrace", "setprofile")),
                         (inspect, ("currentframe", "stack", "trace", "getouterframes",
                                    "getinnerframes")),
                         (logging, ("currentframe",)),
                         (operator, ("attrgetter", "methodcaller")),
                         (importlib, ("import_module", "reload")),
                         (typing, ("ForwardRef", "get_type_hints")),
                         (gc, ("get_objects", "get_referrers", "get_referents")),
                         (traceback, ("walk_stack", "walk_tb", "extract_stack")),
                         (string, ("Formatter",))):
        for name in names:
            obj = getattr(owner, name, None)
            if obj is not None:
                found[id(obj)] = (f"{owner.__name__}.{name}", obj)
    return found


_MISSING = object()


def _module_object(name: str):
    """The module ``name`` if it can be read without running anything new:
    already imported, or one of ``STDLIB_MODULES``."""
    if name in sys.modules:
        return sys.modules[name]
    if name in STDLIB_MODULES:
        try:
            return importlib.import_module(name)
        except ImportError:
            return _MISSING
    return _MISSING


def _member(obj, attr: str):
    """``obj.attr`` as stored (no code runs): a module's global or
    submodule, a class's attribute; else ``_MISSING``."""
    if isinstance(obj, types.ModuleType):
        found = obj.__dict__.get(attr, _MISSING)
        if found is _MISSING:
            found = sys.modules.get(f"{obj.__name__}.{attr}", _MISSING)
        return found
    if isinstance(obj, type):
        for k in obj.__mro__:
            if attr in k.__dict__:
                return k.__dict__[attr]
    return _MISSING


def _judge_object(obj, spelled: str, node, r: "_Reader") -> None:
    """What an imported name or an attribute chain off one is, where the
    module can be read: no module outside the allow-list, none of
    Python's reflective functions."""
    if obj is _MISSING:
        return
    if isinstance(obj, (staticmethod, classmethod)):  # as stored in a class: what it gives
        obj = obj.__func__
    if isinstance(obj, types.ModuleType):
        name = obj.__name__ or ""
        root = name.split(".")[0]
        r.require(root in IMPORT_ROOTS and (root not in sys.stdlib_module_names
                                            or name in STDLIB_MODULES), node,
                  f"{spelled} is the module {name}, which is not on the allow-list")
        # A package's private modules are not its API (``torch._utils``
        # imports any object a string names).
        r.require(not any(_private_part(p) for p in name.split(".")), node,
                  f"{spelled} is the private module {name}")
    if isinstance(obj, type) and issubclass(obj, types.ModuleType):
        r.require(False, node, f"{spelled} makes modules (a lazy loader imports what a string names)")
    hit = _reflection().get(id(obj))
    r.require(hit is None or hit[1] is not obj, node,
              f"{spelled} is {hit[0] if hit else ''}, which reaches frames or runs strings as code")


def _imported_objects(tree: ast.Module, r: "_Reader") -> dict:
    """Each name the module's imports bind -> the object, where it can be
    read (``_module_object``); else ``_MISSING``."""
    found = {}
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                _judge_object(_module_object(a.name), a.name, stmt, r)
                if a.asname:
                    found[a.asname] = _module_object(a.name)
                else:
                    found[a.name.split(".")[0]] = _module_object(a.name.split(".")[0])
        elif isinstance(stmt, ast.ImportFrom) and not stmt.level and stmt.module:
            module = _module_object(stmt.module)
            for a in stmt.names:
                obj = _MISSING if module is _MISSING else _member(module, a.name)
                found[a.asname or a.name] = obj
                _judge_object(obj, f"{stmt.module}.{a.name}", stmt, r)
    return found


def _check_chains(tree: ast.Module, r: "_Reader") -> None:
    """Attribute chains off imported names, read as what they are; an
    imported module read as a value (``m = torch``, ``[collections][0]``,
    ``getattr(typing, name)``): its attributes are then read unseen."""
    objects = _imported_objects(tree, r)
    modules = {k for k, v in objects.items() if isinstance(v, types.ModuleType)}
    modules |= {(a.asname or a.name.split(".")[0]) for n in ast.walk(tree)
                if isinstance(n, ast.Import) for a in n.names}
    # (A local that shares an imported name is read as the import: a
    # parameter named ``enum`` elsewhere must not hide ``enum.bltns``.)
    roots: set = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            chain, base = [], node
            while isinstance(base, ast.Attribute):
                chain.append(base.attr)
                base = base.value
            if isinstance(base, ast.Name):
                roots.add(id(base))
            if not (isinstance(base, ast.Name) and base.id in objects):
                continue
            obj = objects[base.id]
            spelled = base.id
            for attr in reversed(chain):
                if obj is _MISSING:
                    break
                obj = _member(obj, attr)
                spelled += "." + attr
                _judge_object(obj, spelled, node, r)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in modules
                and id(node) not in roots):
            raise NotAllowed(f"{_line(node)}: reads the module {node.id} as a value")


def _check_format(node, r: "_Reader") -> None:
    """``str.format`` follows ``.attr`` and ``[key]`` in a field's name:
    a string that would read attributes is refused."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(node.value) if f]
    except ValueError:
        return  # ``format`` raises on it
    r.require(not any("." in f or "[" in f for f in fields), node,
              "a format string that reads attributes or items of what it is handed")


def _annotations(tree: ast.Module) -> list:
    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.arg) and n.annotation is not None:
            found.append(n.annotation)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.returns is not None:
            found.append(n.returns)
        elif isinstance(n, ast.AnnAssign):
            found.append(n.annotation)
    return found


def _annotation_code(note) -> list:
    """The annotation, and every string in it parsed as the code that
    ``typing`` evaluates (a string Python cannot compile as an expression
    raises when evaluated, before any code runs: skipped)."""
    found = [note]
    for n in ast.walk(note):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            try:
                parsed = ast.parse(n.value.strip(), mode="eval").body
            except (SyntaxError, ValueError):
                continue  # evaluated, it raises: no code runs
            found += _annotation_code(parsed)
    return found


def _check_store(node, base, attr: str, instance_names: dict, members: set) -> None:
    owner = instance_names.get(id(base)) if isinstance(base, ast.Name) else None
    own = owner is not None and owner[0] == base.id
    attr = mangle(owner[1], attr) if own else attr
    if not own:
        raise NotAllowed(f"{_line(node)}: stores .{attr} into something other than a "
                         "method's own instance (the class, an alias, another object)")
    if attr in members or _special(attr):
        raise NotAllowed(f"{_line(node)}: stores into .{attr}, which the class defines")


def _instance_names(tree: ast.Module, r: _Reader) -> dict:
    """For every Name node inside a plain method of a module class that
    names the method's first parameter: id(node) -> (that name, the class)."""
    found: dict = {}
    for cls in r.classes.values():
        for fn in cls.body:
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.decorator_list:
                continue
            params = [*fn.args.posonlyargs, *fn.args.args]
            if not params:
                continue
            first = params[0].arg
            for n in ast.walk(fn):
                if isinstance(n, ast.Name) and n.id == first:
                    found[id(n)] = (first, cls.name)
    return found


def namespace(tree: ast.Module, cls: ast.ClassDef) -> Namespace:
    """The members of ``cls`` that classes of this module define, resolved
    as Python's MRO resolves them (M2). Imported bases stand in as opaque
    classes: a member found only after one of them is ``ambiguous``."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    placeholders: dict[str, type] = {}
    built: dict[str, type] = {}

    def build(node: ast.ClassDef, depth=0) -> type:
        if node.name in built:
            return built[node.name]
        if depth > 32:
            raise NotAllowed(f"{_line(node)}: bases nest too deep")
        bases = []
        for b in node.bases:
            if isinstance(b, ast.Name) and b.id in classes and b.id != node.name:
                bases.append(build(classes[b.id], depth + 1))
            else:
                key = ast.unparse(b)
                bases.append(placeholders.setdefault(key, type(f"<{key}>", (), {})))
        try:
            made = type(node.name, tuple(bases), {"__node__": node})
        except TypeError as exc:
            raise NotAllowed(f"{_line(node)}: {node.name}'s bases cannot be ordered: {exc}")
        built[node.name] = made
        return made

    ns = Namespace()
    past_import = False
    for k in build(cls).__mro__:
        node = k.__dict__.get("__node__")
        if node is None:
            past_import = past_import or k is not object
            continue
        for stmt in node.body:
            names = []
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names = [stmt.name]
            elif isinstance(stmt, ast.Assign):
                names = [t.id for t in stmt.targets if isinstance(t, ast.Name)]
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None and isinstance(
                stmt.target, ast.Name
            ):
                names = [stmt.target.id]
            for name in [mangle(node.name, n) for n in names]:
                ns.members.add(name)
                if name in ns.owners or name in ns.ambiguous:
                    continue  # an earlier class in the MRO has it
                if past_import:
                    ns.ambiguous.add(name)
                    continue
                ns.owners[name] = node.name
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    ns.methods[name] = stmt
                else:
                    ns.attrs[name] = stmt
    return ns
