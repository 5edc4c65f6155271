"""R1's aliases: the attributes of the layer (and the module-level objects)
that may hold the buffer, or something that depends on it, once the
module's other code has run (``__init__``, helpers, other methods and
classes), read from the whole module's text.

The walk of ``forward_mqa`` reads such an attribute or name as derived. The
module passed R5's allow-list, so a value reaches the layer only by a store
on a method's own instance (``self.x = v``, ``setattr(self, "x", v)``), or
by changing an object the layer holds, or by a call. What is followed, to a
fixpoint, with Python's scopes (a function's locals, its enclosing
functions', the module's):

- *Carriers*: names bound to a value that may be, hold or depend on the
  buffer: it names the buffer, a carrier, an alias of the layer, one of
  nn.Module's registries (``_buffers``, ``buffers()``, ``state_dict()``,
  ...), code of this module that may return one, or code handed the layer
  itself; the names a module stores *as* the buffer (``self.<buffer> = b``:
  ``b`` is it); a constructor's ``*args``/``**kwargs``; the parameters of
  this module's functions, methods, nested ``def``s and lambdas that a call
  or a default hands a carrier. *Code*: names bound to this module's code.
- *Objects*: which attributes of the layer a name may be the object of
  (``d = self._d``, ``for x in (self._l,)``, ``x = self.prop``, what a
  method returns, a parameter handed one, ``a = self.x = v``), and which
  attributes may be one object (``self.b = self.a``); the same for the
  module's own data and what it imports by ``from ... import`` (``s =
  _CACHE``, a default ``store=_CACHE``, ``_BOTH = (_CACHE,)``, a class's
  ``items = _CACHE``): such a name is a carrier when any name or attribute
  its object may be takes a value in. An object *takes a
  value in* when it is stored into (``d[k] = v``, ``d.x = v``), when a
  method of it is called with one (``d.append(v)``, also through
  ``list.append(d, v)``, ``map(d.append, ...)``, ``out=d``, an in-place
  ``torch.Tensor`` method, a view made of it by a function), or when a test
  on the buffer chose any code that names it (an iterator advanced, a
  ``defaultdict`` read, a ``cached_property`` read: anything may change
  it). Every attribute it may be is then an alias.
- *Control*: a store, a bind or a call depends on the buffer also when a
  test on a carrier chose it (``if``, ``while``, ``for``, ``match``,
  ``with``, a conditional expression, ``and``/``or``, a comprehension's
  ``for`` or ``if``), when it follows, in its function, a ``return``,
  ``break`` or ``continue`` that such a test chose, or when it is in a
  ``try`` or ``with`` whose body may raise for the buffer's sake (it
  touches a carrier or runs this module's code that does; a handler or a
  context manager may swallow it). An exception that leaves the module's
  code is taken to end the run (vLLM does not catch it). A call of this
  module's code so chosen makes all of that code depend.
- *Aliases*: what the above reaches; ``register_buffer`` and the like (on
  the layer) with a constant name: that name. ``*`` (every attribute the
  class does not define, and the ratio) when such a value or call goes to
  outside code that is also handed the layer itself, or to a callee the
  walk cannot name, or code of this module is handed to outside code with
  it (a callback). Python's own code (a builtin, ``itertools``,
  ``collections``, ``math``: not a kernel package's) handed a value the
  buffer decides may change everything else it is handed by what that
  value decides (``zip([0] * (b is None), self._ids)`` advances
  ``self._ids``), but for what only reads (``len``, numbers' builtins,
  ``math``'s but its sums) or consumes one iterable whole (``list``,
  ``dict.fromkeys``); an iterator built over objects (``map``,
  ``itertools.chain``, ``islice``) is those objects, and so is a sequence
  repeated or joined (``[self._seen] * n``); a list the module only ever
  writes out (``self._names = ["q", "kv"]``) is iterated, not changed.
  A loop whose test or iterable the buffer decides, or that it leaves
  (``break``, ``return``) on a path the buffer chose, runs every round by
  the buffer's choice, its test and iteration with it; ``x in it`` with
  ``x`` derived advances ``it``; ``d[k]`` with ``k`` derived may change
  ``d`` (a ``defaultdict``); what keeps what it is handed (``append``,
  ``ExitStack.callback``, ``addHandler``) holds its objects. Code Python
  runs without a name: the layer's properties and special methods run by
  the buffer's choice where an expression on a chosen path, a
  ``hasattr``/``getattr`` whose name is derived, or a format of the layer
  with a derived value may run them; the methods of the module's other
  classes (``print(v, file=w)`` calls ``w.write``, ``E(v)`` an enum's
  ``_missing_``, ``E.A == 0`` its ``__eq__``) make ``*`` where a chosen
  path may run an object's special method, a truth test or an operator,
  or where a derived value meets what may hold an instance, or stdout is
  redirected to one; where the module has a generator, a ``__del__`` or
  ``weakref``, a store or ``del`` on a chosen path (it may drop an object
  whose ``finally`` runs) makes ``*``.
- *While the layer is built* (the module's top level, class bodies,
  constructors and what they call by name, the properties they read): an
  allow-list. Outside code handed a value the buffer decides, or called on
  a path it chose, is understood only as Python's builtins and
  ``itertools``/``collections``/``math`` (those that call a function they
  are handed, only with a builtin or a container's method), containers',
  strings' and tensors' own methods, torch's factories, views and
  deterministic in-place functions, and vLLM's and the kernel packages'
  code (not torch's or numpy's namespace); anything else (numpy's writes,
  torch's random numbers and switches, ``warnings``, files, logging,
  nn.Module's own methods such as ``self.to(dtype)``) makes ``*``; what
  outside code returns may keep (or be) what it is handed
  (``SimpleNamespace(l=self._l)``, ``np.asarray(t)``) but for what makes a
  new value (``len``, ``list``, ``torch.zeros``). An attribute of the
  layer stored (or registered) only on a path the buffer chose and not on
  every path of ``__init__`` that returns, or deleted on one, may be
  missing: ``DELETED`` + its name. Methods of imported bases in the
  forward paths (``super().m``, ``self.m`` that the module neither defines
  nor stores) are vLLM's own code; there, outside functions handed objects
  of the layer besides such a value (kernels writing their outputs) are
  assumed not to put it in them, but for the forms named above: the
  assumption stated in the package's docstring.
"""

from __future__ import annotations

import ast

from dspark_attn_plugin.target import CLASS_NAME
from dspark_attn_plugin.warmup_shape.verdict import BUFFER_ATTR

# nn.Module methods that store their argument on the module under a name.
REGISTERS = frozenset({"register_buffer", "register_parameter", "register_module", "add_module"})
# nn.Module's own registries and what reads them: through these, any
# registered value (the buffer too) can come back, and a store into one is a
# store of any attribute.
REGISTRY = frozenset({
    "_buffers", "_parameters", "_modules", "buffers", "named_buffers", "parameters",
    "named_parameters", "children", "named_children", "modules", "named_modules",
    "state_dict", "get_buffer", "get_parameter", "get_submodule", "get_extra_state",
})
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
# Types whose methods, called unbound (``list.append(x, v)``), change ``x``.
BUILTIN_TYPES = frozenset({"list", "dict", "set", "bytearray", "object", "deque", "OrderedDict",
                           "defaultdict", "Counter"})
# Builtins that only read what they are handed (never store into it).
READERS = frozenset({"getattr", "hasattr", "isinstance", "issubclass", "type", "id", "len",
                     "repr", "str", "print", "callable", "hash", "format"})
# Builtins and ``math`` functions that read numbers (``math``'s but those
# that iterate what they are handed).
NUMBER_READERS = frozenset({"int", "float", "bool", "complex", "round", "abs", "divmod", "pow",
                            "ord", "chr", "bin", "hex", "oct"})
ITERATING_MATH = frozenset({"prod", "fsum", "dist", "hypot", "sumprod"})
# Python's callables that consume (at most) one iterable to its end, or
# take one item, whatever else they are handed (a start, a default, a
# value to keep): the other arguments decide no count.
WHOLE_CONSUMERS = frozenset({"list", "tuple", "set", "frozenset", "dict", "sorted", "sum", "any",
                             "all", "min", "max", "next", "iter", "reversed", "enumerate",
                             "deque", "fromkeys", "OrderedDict", "defaultdict", "Counter"})
# Outside callables that return (an item of) what they are handed, not a
# new object: ``next(iter(x))``, ``cast(T, x)``.
PASS_THROUGH = frozenset({"next", "iter", "cast", "getattr", "reversed", "min", "max",
                          "nullcontext", "get", "pop", "setdefault", "values", "items",
                          "enumerate", "zip", "list", "tuple", "sorted", "filter",
                          # iterators over what they are handed: advancing one
                          # advances those (``m = map(next, [self._ids])``)
                          "map", "islice", "chain", "from_iterable", "cycle", "tee",
                          "starmap", "takewhile", "dropwhile", "filterfalse", "compress",
                          "accumulate", "zip_longest", "pairwise", "batched", "groupby",
                          "partial",
                          # what keeps what it is handed and hands it back or
                          # acts on it later: a view, a default factory
                          "memoryview", "defaultdict", "ChainMap", "new_child"})
# Methods of Python's containers that put their argument in; handed out
# bound (``map(x.append, items)``), they put it into ``x``.
MUTATORS = frozenset({"append", "appendleft", "extend", "extendleft", "add", "update", "insert",
                      "setdefault", "__setitem__", "put", "put_nowait", "push"})
# Packages of kernels (what a flashmla module may import, but Python's own):
# their functions are taken to change only what they are handed as outputs.
KERNEL_PACKAGES = frozenset({"torch", "vllm", "triton", "flashinfer", "deep_gemm", "numpy",
                             "einops"})
# Methods of Python's objects that keep what they are handed, to hand it
# back or run it later: containers' and ExitStack's, a logger's handlers.
KEEPERS = MUTATORS | frozenset({"callback", "push", "enter_context", "push_async_callback",
                                "addHandler", "add_done_callback", "register"})
# torch functions whose result may be a view of their first argument.
TORCH_VIEWS = frozenset({"narrow", "select", "as_strided", "view_as_real", "view_as_complex",
                         "unflatten", "flatten", "squeeze", "unsqueeze", "transpose", "permute",
                         "movedim", "split", "chunk", "unbind", "diagonal", "t", "reshape",
                         "detach", "swapaxes", "tensor_split", "index_select", "expand_copy",
                         "view", "view_as", "expand", "expand_as", "unfold", "swapdims",
                         "moveaxis", "hsplit", "vsplit", "dsplit", "split_with_sizes", "adjoint"})
# torch's classes whose methods, called unbound (``torch.Tensor.view(x, -1)``),
# act on their first argument as on a receiver.
TORCH_CLASSES = frozenset({"Tensor", "Parameter"})
# What outside code is understood to do when handed a value the buffer
# decides, or when run on a path the buffer chose (the allow-list; any other
# such call makes ``*``: it may set what the whole process reads, such as
# torch's switches and random state, warnings' filters or a file, run code
# it keeps, or change objects it was handed before). Builtins by name:
UNDERSTOOD_BUILTINS = (READERS - {"print"}) | NUMBER_READERS | WHOLE_CONSUMERS | frozenset({
    "zip", "range", "map", "filter", "slice", "bytes", "bytearray", "object"})
# Python's modules whose functions are understood (as their builtins are).
UNDERSTOOD_MODULES = frozenset({"itertools", "collections", "math"})
# Of those, the callables that call a function they are handed (the
# position of that function, or its keyword): understood only where it is
# a builtin above or a container's method (``map(str, v)``, ``map(x.append, v)``).
CALLERS = {"map": 0, "filter": 0, "starmap": 0, "takewhile": 0, "dropwhile": 0,
           "filterfalse": 0, "defaultdict": 0, "accumulate": 1, "sorted": "key", "min": "key",
           "max": "key", "groupby": "key", "iter": 0}
# torch's functions understood: they make a new tensor, or a view of their
# first argument (``TORCH_VIEWS``), and act on nothing else (no random state).
TORCH_FACTORIES = frozenset({"empty", "zeros", "ones", "full", "arange", "tensor", "empty_like",
                             "zeros_like", "ones_like", "full_like", "eye", "linspace"})
# Methods understood on any receiver: they act on the receiver (which then
# takes the value in) and nothing else: containers', strings', tensors'
# (the in-place ones that draw no random numbers).
UNDERSTOOD_METHODS = (MUTATORS - {"push"}) | frozenset({
    "get", "keys", "values", "items", "copy", "count", "index", "pop", "popleft", "remove",
    "clear", "sort", "reverse", "discard",
    "format", "join", "split", "rsplit", "strip", "lstrip", "rstrip", "startswith", "endswith",
    "lower", "upper", "replace", "encode", "decode", "partition", "rpartition",
    "fill_", "zero_", "zeros_", "ones_", "constant_", "copy_", "add_", "sub_", "mul_", "div_", "clamp_", "masked_fill_",
    "index_fill_", "index_copy_", "index_add_", "index_put_", "scatter_", "scatter_add_",
    "view", "view_as", "reshape", "sum", "mean", "size", "dim", "numel", "to", "clone",
    "contiguous", "item", "tolist", "float", "half", "bfloat16", "int", "long", "bool", "cpu",
    "cuda", "detach", "flatten", "unsqueeze", "squeeze", "transpose", "permute", "narrow",
    "select", "expand", "new_empty", "new_zeros", "new_ones", "new_full", "stride",
    "is_contiguous", "element_size"}) | TORCH_VIEWS
# What ``expression`` acts on (everything else it only walks through).
_ACTS = frozenset({
    ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.NamedExpr, ast.Yield,
    ast.YieldFrom, ast.Call, ast.IfExp, ast.BoolOp, ast.ListComp, ast.SetComp, ast.DictComp,
    ast.GeneratorExp,
})
# Python's callables that only iterate what they are handed (no function
# of the module's or of a type called on the items).
ITERATING = frozenset({"zip", "zip_longest", "chain", "from_iterable", "islice", "list", "tuple",
                       "set", "frozenset", "dict", "enumerate", "reversed", "sum", "any", "all",
                       "deque", "fromkeys", "OrderedDict", "Counter", "pairwise", "batched",
                       "cycle", "tee", "compress", "product", "len", "range"})
# Values written out as a container (or a constant): never an iterator.
_DISPLAYS = (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp,
             ast.Constant)
# Expressions that may run a special method or a property of what they act
# on (a name or a constant alone runs nothing).
_IMPLICIT_CALLERS = (ast.Call, ast.JoinedStr, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Subscript,
                     ast.Attribute, ast.BoolOp, ast.IfExp, ast.ListComp, ast.SetComp, ast.DictComp,
                     ast.GeneratorExp, ast.Starred)
# A fixpoint that has not settled by then (it grows sets of names; each
# round adds one at least): every attribute may hold the buffer.
MAX_ROUNDS = 200
# A module-level object among the objects a name or an attribute may be:
# ``GLOBAL + name`` (a space: never an attribute's name). When one of them
# takes a value in, that module-level name is a carrier.
GLOBAL = "<module> "
# An attribute of the layer the module may delete on a path the buffer
# chose (``del self.x``): ``DELETED + "x"``; ``DELETED + "*"``: any.
DELETED = "<deleted> "
# What the module imports, as one pool: an imported object (``from m import
# _CACHE``) and an attribute of an imported module (``m._CACHE``) may be one
# object, which the module's text cannot tell. One of them taking a value in
# makes every imported name a carrier.
IMPORTED = "<imports>"


def layer_aliases(tree: ast.Module, state: frozenset = frozenset()) -> tuple[set[str], set[str]]:
    """The attribute names that may hold what depends on the buffer, with
    ``"*"`` for every attribute; and the module-level names whose objects may
    (a list or a class that took it in). ``state``: the module-level names
    the walk reads as state (derived whatever happens); an attribute of the
    layer that is stored one of them is an alias."""
    flow = _Flow(tree)
    flow.state = set(state)
    aliases = {a for a in flow.run() if not a.startswith(GLOBAL)}
    if "*" in aliases:  # code the walk cannot name had it: any object it reaches may hold it
        return aliases, flow.kept | flow.imports
    return aliases, {name for scope, name in flow.carriers if scope is None}


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
        self.properties: set[str] = set()  # read as their getter's result, not code
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
                    decorators = {d.id if isinstance(d, ast.Name) else getattr(d, "attr", "")
                                  for d in fn.decorator_list}
                    if decorators & {"property", "cached_property"}:
                        self.properties.add(fn.name)
                    if any(isinstance(d, ast.Name) and d.id == "staticmethod"
                           for d in fn.decorator_list):
                        self.static.add(id(fn))
                        continue
                    positional = [*fn.args.posonlyargs, *fn.args.args]
                    if positional:
                        self.layer_names.add(positional[0].arg)
        self.classes = {s.name for s in tree.body if isinstance(s, ast.ClassDef)}
        # Module-level names bound to data (not imports, defs or classes):
        # an object there can take the buffer in, and the walk reads it.
        self.data_names = {t.id for stmt in tree.body if isinstance(stmt, (ast.Assign, ast.AnnAssign))
                           for target in (stmt.targets if isinstance(stmt, ast.Assign)
                                          else [stmt.target])
                           for t in _targets(target) if isinstance(t, ast.Name)}
        # Module-level objects this module may change through another name
        # (``store = _CACHE``, a parameter, a default, a container, an
        # attribute): its data, and what ``from ... import`` binds (a
        # module's object, or a module; ``import x`` binds a module).
        self.from_imported = {(a.asname or a.name) for stmt in tree.body
                              if isinstance(stmt, ast.ImportFrom) for a in stmt.names}
        self.kept = self.data_names | self.from_imported | self.classes
        # Names ``from ... import`` binds to an in-place function by its
        # own name (``from torch import fill_``, ``constant_ as fill``).
        self.in_place_imports = {(a.asname or a.name) for stmt in tree.body
                                 if isinstance(stmt, ast.ImportFrom) for a in stmt.names
                                 if a.name.endswith("_") and not a.name.endswith("__")}
        # ... and to a function that returns a view (``from torch import narrow``).
        self.view_imports = {(a.asname or a.name) for stmt in tree.body
                             if isinstance(stmt, ast.ImportFrom) for a in stmt.names
                             if a.name in TORCH_VIEWS}
        self.state: set[str] = set()  # see layer_aliases
        self.imports = {n for stmt in tree.body if isinstance(stmt, (ast.Import, ast.ImportFrom))
                        for n in _import_names(stmt)}
        # ... and names bound to the packages of kernels: their functions
        # change only their out=/in-place arguments (the package's stated
        # assumption); Python's own code (builtins, itertools, functools,
        # collections, math, ...) may do anything to what it is handed.
        self.kernel_names = {
            n for stmt in tree.body
            if isinstance(stmt, ast.Import) and all(a.name.split(".")[0] in KERNEL_PACKAGES
                                                    for a in stmt.names)
            or isinstance(stmt, ast.ImportFrom) and not stmt.level
            and (stmt.module or "").split(".")[0] in KERNEL_PACKAGES
            for n in _import_names(stmt)}
        self.math_names = {a.asname or a.name for stmt in tree.body if isinstance(stmt, ast.Import)
                           for a in stmt.names if a.name == "math"}
        self.numpy_names = {
            n for stmt in tree.body
            if isinstance(stmt, ast.Import) and any(a.name.split(".")[0] == "numpy" for a in stmt.names)
            or isinstance(stmt, ast.ImportFrom) and not stmt.level
            and (stmt.module or "").split(".")[0] == "numpy"
            for n in _import_names(stmt)}
        # Names bound to Python's understood modules (``import itertools as
        # it``) and to their functions (``from itertools import islice``).
        self.py_modules = {a.asname or a.name for stmt in tree.body if isinstance(stmt, ast.Import)
                           for a in stmt.names if a.name in UNDERSTOOD_MODULES}
        self.py_functions = {(a.asname or a.name): a.name for stmt in tree.body
                             if isinstance(stmt, ast.ImportFrom) and not stmt.level
                             and stmt.module in UNDERSTOOD_MODULES for a in stmt.names}
        self.torch_names = {  # import torch..., from torch... import x
            n for stmt in tree.body
            if isinstance(stmt, ast.Import) and all(a.name.split(".")[0] == "torch" for a in stmt.names)
            or isinstance(stmt, ast.ImportFrom) and not stmt.level
            and (stmt.module or "").split(".")[0] == "torch"
            for n in _import_names(stmt)}
        # Attributes this module stores on an instance (anything it calls
        # through ``self.x(...)`` is then not an imported base's method).
        self.stored: set[str] = set()
        self.stored_by_name = {str(n.args[1].value) for n in ast.walk(tree)
                               if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                               and n.func.id in ("setattr", "delattr") and len(n.args) > 1
                               and isinstance(n.args[1], ast.Constant)}
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load):
                self.stored.add(n.attr)
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and (
                n.func.id == "setattr") and len(n.args) > 1 and isinstance(
                    n.args[1], ast.Constant):
                self.stored.add(str(n.args[1].value))
        # Attributes of the layer only ever bound to displays (``self._names
        # = ["q", "kv"]``) or constants, never otherwise stored, deleted,
        # registered or set by name: containers, not iterators.
        bound: dict[str, bool] = {}
        for n in ast.walk(tree):
            if isinstance(n, (ast.Assign, ast.AnnAssign)):
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                    for x in _targets(t):
                        if isinstance(x, ast.Attribute):
                            bound[x.attr] = bound.get(x.attr, True) and x is t and isinstance(
                                n.value, _DISPLAYS)
            elif isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load):
                bound.setdefault(n.attr, False)  # del self.x, self.x += ..., for self.x in
            elif isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Constant) and (
                    isinstance(n.func, ast.Attribute) and n.func.attr in REGISTERS):
                bound[str(n.args[0].value)] = False
        for n in ast.walk(tree):
            if isinstance(n, (ast.AugAssign, ast.Delete, ast.For, ast.AsyncFor, ast.With,
                              ast.NamedExpr, ast.comprehension)):
                for t in ([n.target] if not isinstance(n, (ast.Delete, ast.With)) else
                          n.targets if isinstance(n, ast.Delete) else
                          [i.optional_vars for i in n.items if i.optional_vars is not None]):
                    for x in ast.walk(t):
                        if isinstance(x, ast.Attribute):
                            bound[x.attr] = False
        self.displays = {a for a, ok in bound.items() if ok} - self.stored_by_name
        self.carriers: set[tuple] = set()
        self.views: dict[tuple, set] = {}  # a name -> the layer's attributes it may be
        self.links: dict[str, set] = {}  # an attribute -> those that may be the same object
        self.code: set[tuple] = set()
        self.returning: set[int] = set()  # id() of functions that may return a carrier
        self.tainted: set[int] = set()  # id() of functions run under the buffer's control
        self.aliases: set[str] = set()
        self.changed = False
        self._walked: dict[int, list] = {}
        self._children: dict[int, list] = {}
        self._acts: dict[int, bool] = {}
        self._functions = [n for n in ast.walk(tree) if isinstance(n, _FUNCTIONS)]
        self.touching: set[int] = set()  # id() of functions that may raise for the buffer
        # id() of functions whose exceptions Python or outside code may catch
        # where no ``try`` shows it: ``hasattr`` and ``getattr(o, n, d)`` call
        # a property's getter or ``__getattr__`` and swallow AttributeError,
        # ``next(it, d)``, ``for`` and ``list()`` a ``__next__``'s
        # StopIteration, ``__del__``'s and a thread's are printed, not
        # raised. Understood not to: ``__init__`` and functions and methods
        # only ever called by name, undecorated (or static or class methods);
        # every other (a dunder, a decorated one, one handed on as a value)
        # is taken as caught, and so is what it calls.
        called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        handed = {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(tree)
                  if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load)
                  and id(n) not in called}
        self.generators = {id(f) for f in self._functions if isinstance(f, _DEFS) and any(
            isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(f))}
        # Code that may run when an object is dropped: a generator's
        # ``finally`` or ``with``, a ``__del__``, what ``weakref`` keeps. A
        # store on a path the buffer chose may drop one.
        self.finalizers = bool(self.generators) or "__del__" in self.methods or any(
            n == "weakref" for n in self.imports)
        self.swallowed: set[int] = {
            id(f) for f in self._functions if isinstance(f, _DEFS) and (
                f.name in handed
                or f.name.startswith("__") and f.name.endswith("__") and f.name != "__init__"
                or any(not (isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod"))
                       for d in f.decorator_list))}
        # Code of the module Python or outside code may run without the
        # module naming it. The layer's (and its bases') properties and
        # special methods: ``hasattr(self, name)``, ``str(self)``. The
        # methods (but ``__init__``) of the module's other classes that the
        # module names, wherever they are defined: ``print(v, file=w)`` calls
        # ``w.write``, a format ``w.__str__``, ``E(v)`` an enum's
        # ``_missing_``, a logging handler ``write``. Where the buffer chose
        # the path, or decides what such code is handed, it may run for the
        # buffer's sake.
        target = next((c for c in tree.body if isinstance(c, ast.ClassDef)
                       and c.name == CLASS_NAME), None)
        self.layer_class = target
        bases = {b.id for b in target.bases if isinstance(b, ast.Name)} if target else set()
        named = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
                 and isinstance(n.ctx, ast.Load)} | {
                     n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        self.implicit_here: list = []
        self.implicit_elsewhere: list = []
        for c in ast.walk(tree):
            if not isinstance(c, ast.ClassDef):
                continue
            layers = c is target or c in tree.body and c.name in bases
            for f in c.body:
                if not isinstance(f, _DEFS) or f.name == "__init__":
                    continue
                special = f.name.startswith("__") and f.name.endswith("__") or f.name in self.properties
                if layers and special:
                    self.implicit_here.append(f)
                elif not layers and c.name in named:
                    self.implicit_elsewhere.append(f)
        # What may hold an instance of such a class: names and attributes
        # bound to a value that makes or names one (``self._w = W()``,
        # ``h = StreamHandler(self._w)``), receivers that keep one
        # (``log.addHandler(h)``); and whether one may be the process's
        # stdout (``redirect_stdout(w)``: ``print`` writes to it).
        classes = [c for c in ast.walk(tree) if isinstance(c, ast.ClassDef)]
        makers = {c.name for c in classes if any(f in self.implicit_elsewhere for f in c.body)}
        for _ in range(len(classes)):  # class W2(W): pass makes a W too
            more = {c.name for c in classes if c.name not in makers
                    and any(isinstance(b, ast.Name) and b.id in makers for b in c.bases)}
            if not more:
                break
            makers |= more
        self.makers = makers
        self.holders: set[str] = set()  # names and attribute names, by their text
        self.stdout_held = False
        if makers:
            def holds(e) -> bool:
                return any(isinstance(n, ast.Name) and (n.id in makers or n.id in self.holders)
                           or isinstance(n, ast.Attribute) and n.attr in self.holders
                           for n in ast.walk(e))
            for _ in range(MAX_ROUNDS):
                before = (len(self.holders), self.stdout_held)
                for n in ast.walk(tree):
                    if isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and n.value is not None and holds(n.value):
                        for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                            for x in _targets(t):
                                while isinstance(x, ast.Subscript):
                                    x = x.value  # d[k] = W(): d holds it
                                if isinstance(x, ast.Name):
                                    self.holders.add(x.id)
                                elif isinstance(x, ast.Attribute):
                                    self.holders.add(x.attr)
                    elif isinstance(n, (ast.For, ast.comprehension, ast.withitem)):
                        source, target = (n.context_expr, n.optional_vars) if isinstance(n, ast.withitem) else (n.iter, n.target)
                        if target is not None and holds(source):
                            self.holders |= {x.id for x in ast.walk(target) if isinstance(x, ast.Name)}
                    elif isinstance(n, ast.Call) and any(holds(a) for a in [*n.args, *(k.value for k in n.keywords)]):
                        f = n.func
                        if isinstance(f, ast.Attribute):
                            root = _root(f.value)
                            if root is not None:
                                self.holders.add(root.id)  # x.addHandler(h), x.append(w)
                            if isinstance(f.value, ast.Attribute):
                                self.holders.add(f.value.attr)
                        if "redirect" in (f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")):
                            self.stdout_held = True
                    elif isinstance(n, ast.FunctionDef):
                        for d, a in zip(reversed(n.args.defaults), reversed(n.args.args)):
                            if holds(d):
                                self.holders.add(a.arg)
                if (len(self.holders), self.stdout_held) == before:
                    break
        self.building = self._building(tree)
        self.chosen_stores: set[str] = set()  # attributes stored on a path the buffer chose
        self.always_stored = self._always_stored(self.layer_class)
        self.returns: dict[int, set] = {}  # id() of a function -> the attributes it may return
        # What a constructor is handed positionally or by other names may be
        # the buffer (vLLM's model passes it to the layer's __init__).
        for inits in self.inits.values():
            for fn in inits:
                for p in (fn.args.vararg, fn.args.kwarg):
                    if p is not None:
                        self.carriers.add((id(fn), p.arg))

    def _building(self, tree: ast.Module) -> set[int]:
        """id() of the functions that may run while the module is imported
        and the layer is built: the constructors of the module's classes,
        what they and the module's top level call of this module's code (by
        name, to a fixpoint), the properties they read, and the functions
        defined inside those. The other methods (the forward paths) run with
        attention metadata, after the first warmup."""
        found: set[int] = set()
        todo = [fn for inits in self.inits.values() for fn in inits]

        def at_import(body) -> None:  # what runs when a module or class body runs
            for s in body:
                if isinstance(s, ast.ClassDef):
                    todo.extend([*s.bases, *s.keywords, *s.decorator_list])
                    at_import(s.body)
                elif isinstance(s, _DEFS):
                    todo.extend([*s.decorator_list, *s.args.defaults,
                                 *(d for d in s.args.kw_defaults if d is not None)])
                else:
                    todo.append(s)
        at_import(tree.body)
        seen: set[int] = set()
        while todo:
            node = todo.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, _FUNCTIONS):
                found.add(id(node))
            for n in ast.walk(node):
                if isinstance(n, _FUNCTIONS) and n is not node:
                    todo.append(n)
                elif isinstance(n, ast.Call):
                    todo += [fn for fn, _ in self.callees(n.func) or ()]
                elif isinstance(n, ast.Attribute) and n.attr in self.methods:
                    todo += self.methods[n.attr]  # a property read, a bound method kept
                elif isinstance(n, ast.Constant) and isinstance(n.value, str) and (
                        n.value in self.methods):
                    todo += self.methods[n.value]  # getattr(self, "m")()
        return found

    def children(self, e) -> list:
        found = self._children.get(id(e))
        if found is None:
            found = self._children[id(e)] = list(ast.iter_child_nodes(e))
        return found

    def acts(self, e) -> bool:
        """``e`` holds something ``expression`` looks at (kept)."""
        found = self._acts.get(id(e))
        if found is None:
            found = self._acts[id(e)] = any(type(n) in _ACTS or isinstance(n, ast.Compare) and any(
                isinstance(op, (ast.In, ast.NotIn)) for op in n.ops) or isinstance(n, ast.Subscript)
                for n in self.nodes(e))
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
            if kind is self.aliases:  # the attributes that may be the same object too
                for other in self.links.get(item, ()):
                    self._add(self.aliases, other)
                if item.startswith(GLOBAL):  # a module-level object took it in
                    self._add(self.carriers, (None, item[len(GLOBAL):]))
                elif item == IMPORTED:
                    for name in self.imports:
                        self._add(self.carriers, (None, name))
            elif kind is self.carriers and item[0] is None and item[1] in self.kept:
                self._add(self.aliases, GLOBAL + item[1])  # and what may be that object
                if item[1] in self.imports:
                    self._add(self.aliases, IMPORTED)

    def link(self, attr: str, others) -> None:
        """``self.attr`` and the attributes ``others`` may be one object
        (``*``: the layer itself, as ``self.layer = layer`` keeps it in
        another object: a change through it may be any of the layer's)."""
        for other in others:
            if other in (attr, BUFFER_ATTR) or attr == "*":
                continue
            if other not in self.links.setdefault(attr, set()):
                self.links[attr].add(other)
                self.links.setdefault(other, set()).add(attr)
                self.changed = True
                if attr in self.aliases or other in self.aliases:
                    self._add(self.aliases, attr)
                    self._add(self.aliases, other)

    def key(self, node: ast.Name) -> tuple:
        return self.scopes.key(node.id, node)

    # -- values -----------------------------------------------------------

    def carries(self, e, layer_as_holder: bool = True) -> bool:
        """``e`` may be, hold or depend on the buffer; without
        ``layer_as_holder``, the layer's name under an attribute
        (``self._ids``) is not taken for the layer that holds the buffer:
        only that attribute's own value counts."""
        if e is None:
            return False
        nodes = self.nodes(e)
        under = set() if layer_as_holder else {
            id(n.value) for n in nodes if isinstance(n, ast.Attribute) and self.is_layer(n.value)}
        for n in nodes:
            if id(n) in under:
                continue
            if _names_the_buffer(n):
                return True
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and (
                self.key(n) in self.carriers
            ):
                return True
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and (
                n.value.id in self.layer_names or n.value.id in self.classes
            ) and (n.attr in self.aliases or n.attr in REGISTRY or (
                "*" in self.aliases and n.attr not in self.methods
            )):
                return True  # the layer's attribute that may hold it
            if isinstance(n, ast.Call) and any(
                _names_layer(a, self.layer_names)
                for a in [*n.args, *(k.value for k in n.keywords)]
            ) and not self._attribute_read(n):
                return True  # code handed the layer may return what it holds
            if isinstance(n, ast.Attribute) and any(
                id(fn) in self.returning for fn in self.methods.get(n.attr, ())
            ):
                return True  # a method or property that may return it
            if isinstance(n, ast.Call):
                callees = self.callees(n.func)
                if callees is None:
                    if isinstance(n.func, ast.Name) and self.key(n.func) in self.code:
                        return True
                    f = n.func
                    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and (
                        f.value.id in self.layer_names and f.attr in self.stored
                    ):
                        return True  # code the module stored on the layer: what it returns
                elif any(id(fn) in self.returning for fn, _ in callees):
                    return True
        return False

    def _attribute_read(self, c: ast.Call) -> bool:
        """``getattr(self, "x")``/``hasattr`` with a constant name other
        than a registry: a read of ``self.x`` (``carries`` asks of ``x``)."""
        f = c.func
        if not (isinstance(f, ast.Name) and f.id in ("getattr", "hasattr")
                and self.outside_callee(f) and len(c.args) >= 2):
            return False
        name = c.args[1]
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            return False
        return name.value not in self.aliases and name.value not in REGISTRY and (
            "*" not in self.aliases or name.value in self.methods
        ) and not any(self.carries(a) for a in c.args[2:])

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
            if isinstance(n, ast.Attribute) and n.attr in self.methods and (
                n.attr not in self.properties
            ):
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
                    self.hands_back(node, node.body)  # lambda: self: the layer
                else:
                    self.block(node.body, tainted, node)
            for stmt in self.tree.body:
                if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                    for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]):
                        self.bind(t, stmt.value, False)
                        for n in _targets(t):  # `_ALSO = _CACHE`: one object, two names
                            if isinstance(n, ast.Name):
                                self.link(GLOBAL + n.id, self.refs(stmt.value))
                    for c in self.nodes(stmt.value):  # _KEEP = adopt(_STATE): imported code keeps it
                        if isinstance(c, ast.Call):
                            for a in [*c.args, *(k.value for k in c.keywords)]:
                                self.link(IMPORTED, {r for r in self.refs(a) if r.startswith(GLOBAL)})
                elif isinstance(stmt, ast.ClassDef):  # `items = _CACHE`: Cls.items is it
                    self.link(GLOBAL + stmt.name, {GLOBAL + b.id for b in stmt.bases
                                                   if isinstance(b, ast.Name) and b.id in self.classes})
                    for s in stmt.body:
                        if isinstance(s, (ast.Assign, ast.AnnAssign)) and s.value is not None:
                            for t in (s.targets if isinstance(s, ast.Assign) else [s.target]):
                                if isinstance(t, ast.Name):
                                    self.link(t.id, self.refs(s.value))
                                    self.link(GLOBAL + stmt.name, self.refs(s.value))
            if not self.changed:
                # An attribute stored only on a path the buffer chose may
                # be missing on the other: reading it may raise.
                return self.aliases | {DELETED + a for a in self.chosen_stores - self.always_stored}
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
        swallowed = fn is not None and id(fn) in self.swallowed
        generator = fn is not None and id(fn) in self.generators
        for stmt in body:
            # What raises for the buffer's sake here may be caught where no
            # ``try`` shows it: what follows it runs on a path it chose, in
            # this statement (the parts after it) and after it.
            raises = swallowed and not (tainted or left) and self.may_raise([stmt])
            if self.statement(stmt, tainted or left or raises, fn) or raises:
                left = True
            if generator and not left and any(isinstance(n, (ast.Yield, ast.YieldFrom))
                                              for n in ast.walk(stmt)):
                # A generator's code after a yield runs only if its consumer
                # asks for more (``any``, a ``break``, ``close``), which a
                # value the buffer chose may decide: what follows is chosen.
                left = True
            if swallowed:
                for n in self.nodes(stmt):
                    if isinstance(n, ast.Call) and not self.outside_callee(n.func):
                        for c, _ in self.callees(n.func) or ():
                            self._add(self.swallowed, id(c))  # its exception is ours
        return left

    def statement(self, s: ast.stmt, tainted: bool, fn) -> bool:
        if fn is not None and id(fn) not in self.touching and not isinstance(
            s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        ) and self.carries(s):
            self._add(self.touching, id(fn))  # it may raise for the buffer's sake
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for d in s.decorator_list:
                self.expression(d, tainted, fn)
            if not isinstance(s, ast.ClassDef):  # defaults run when the def does
                for d in [*s.args.defaults, *(k for k in s.args.kw_defaults if k is not None)]:
                    self.expression(d, tainted, fn)
            if isinstance(s, ast.ClassDef):
                self.block(s.body, tainted, fn)
                return False
            if tainted:
                self._taint(s)
            if fn is not None:
                self._add(self.code, self.scopes.key(s.name, s))
            return False
        if isinstance(s, ast.Assign) and len(s.targets) > 1:
            # a = self.x = v: the names are the object the attributes are.
            for t in s.targets:
                if isinstance(t, ast.Name):
                    for other in s.targets:
                        if other is not t and not isinstance(other, ast.Name):
                            self.bind(t, other, False)
        if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            if tainted and self.finalizers:
                self._add(self.aliases, "*")  # what it drops may run code (a generator's finally)
            self.expression(s.value, tainted, fn)
            for t in (s.targets if isinstance(s, ast.Assign) else [s.target]):
                self.expression(t, tainted, fn)
                if s.value is None:
                    continue
                value = ast.Tuple([s.value, t], ast.Load()) if isinstance(
                    s, ast.AugAssign) else s.value
                self.bind(t, value, tainted)
                if isinstance(s, ast.AugAssign) and isinstance(t, ast.Name) and (
                    tainted or self.carries(s.value) or self.holds_code(s.value)
                ):
                    self.took_in(t)  # l += [v] changes the object l is
            return False
        if isinstance(s, ast.Return):
            self.expression(s.value, tainted, fn)
            if fn is not None and s.value is not None:
                refs = self.refs(s.value)
                if not refs <= self.returns.get(id(fn), set()):
                    self.returns.setdefault(id(fn), set()).update(refs)
                    self.changed = True
            if fn is not None and (tainted or self.carries(s.value)):
                self._add(self.returning, id(fn))
            return tainted
        if isinstance(s, (ast.Break, ast.Continue)):
            return tainted
        if isinstance(s, (ast.Raise, ast.Assert)):
            # An exception leaves the function: what follows it there runs
            # only on calls where it was not raised. Where it is caught
            # (a ``try`` here or in a caller), that ``try`` is chosen; where
            # no ``try`` shows it may be caught, see ``swallowed``.
            for child in ast.iter_child_nodes(s):
                self.expression(child, tainted, fn)
            if isinstance(s, ast.Assert):
                self.truth(s.test, tainted)
            if tainted and fn is not None:
                self._add(self.touching, id(fn))
            return False
        if isinstance(s, ast.If):
            self.expression(s.test, tainted, fn)
            self.truth(s.test, tainted)
            inner = tainted or self.carries(s.test)
            left = self.block(s.body, inner, fn)
            return self.block(s.orelse, inner, fn) or left
        if isinstance(s, (ast.While, ast.For, ast.AsyncFor)):
            # A loop runs its test (or advances its iterator) and its body
            # as many times as the buffer decides where it decides the test
            # or the iterable, or leaves the loop (break, return) on a path
            # it chose: then every round is chosen, the test and the
            # iteration with it (``for x in self._ids: if b: break``).
            head = s.test if isinstance(s, ast.While) else s.iter
            self.expression(head, tainted, fn)
            self.truth(head, tainted)  # (iter() of the head: its __iter__)
            inner = tainted or self.carries(head)
            if not isinstance(s, ast.While):
                self.bind(s.target, s.iter, inner)
            left = self.block(s.body, inner, fn)
            if left and not inner:
                inner = True
                if not isinstance(s, ast.While):
                    self.bind(s.target, s.iter, True)
                self.block(s.body, True, fn)
            if inner and not tainted:
                self.touched_all(head, iterated=not isinstance(s, ast.While))
            return self.block(s.orelse, inner, fn) or left
        if isinstance(s, (ast.With, ast.AsyncWith)):
            chooser = False  # a manager whose exit the buffer may steer
            for item in s.items:
                self.expression(item.context_expr, tainted, fn)
                chooser = chooser or self.steered_manager(item.context_expr)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, item.context_expr, tainted)
            inner = tainted or chooser or self.may_raise(s.body)
            # Its exit may swallow what the body raises, for any reason:
            # where the buffer steers it, what follows runs on a path it chose.
            return self.block(s.body, inner, fn) or chooser
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
                if tainted:  # del self.x on a path the buffer chose: reading x may raise
                    for x in ast.walk(t):
                        if isinstance(x, ast.Attribute) and self.is_layer(x.value):
                            self.deleted(ast.Constant(x.attr))
            if tainted and self.finalizers:
                self._add(self.aliases, "*")  # what it drops may run code (a generator's finally)
            return False
        for child in ast.iter_child_nodes(s):
            if isinstance(child, ast.expr):
                self.expression(child, tainted, fn)
        return False

    def steered_manager(self, e) -> bool:
        """The context manager ``e`` may decide by the buffer whether its
        exit swallows an exception: it carries the buffer, calls this
        module's code that touches it, or this module defines an exit that
        does (an instance of a module class, whatever name holds it)."""
        if self.carries(e):
            return True
        for n in self.nodes(e):
            if isinstance(n, ast.Call) and not self.outside_callee(n.func):
                callees = self.callees(n.func)
                if callees is None or any(
                    id(c) in self.touching or id(c) in self.tainted for c, _ in callees
                ):
                    return True
        return any(id(f) in self.touching or id(f) in self.tainted
                   for name in ("__exit__", "__aexit__") for f in self.methods.get(name, ()))

    def may_raise(self, body: list) -> bool:
        """``body`` may raise for the buffer's sake: it touches a carrier,
        calls this module's code that does (or may have been chosen by it),
        or calls code the walk cannot name."""
        for stmt in body:
            if self.carries(stmt):
                return True
            for n in self.nodes(stmt):
                if not isinstance(n, ast.Call):
                    continue
                if self.outside_callee(n.func):
                    # outside code handed this module's code may run it (map, sorted's key)
                    if any(self.handed_code_may_raise(a)
                           for a in [*n.args, *(k.value for k in n.keywords)]):
                        return True
                    continue
                callees = self.callees(n.func)
                if callees is None or any(
                    id(c) in self.touching or id(c) in self.tainted for c, _ in callees
                ):
                    return True
        return False

    def handed_code_may_raise(self, e) -> bool:
        """``e``, handed to outside code that may call it, is or holds this
        module's code that may raise for the buffer's sake (or code the walk
        cannot name)."""
        for n in self.nodes(e):
            if isinstance(n, ast.Lambda) or (
                isinstance(n, (ast.Name, ast.Attribute)) and self.holds_code(n)
            ):
                callees = self.callees(n)
                if callees is None or any(
                    id(c) in self.touching or id(c) in self.tainted for c, _ in callees
                ):
                    return True
        return False

    def _taint(self, fn) -> None:
        self._add(self.tainted, id(fn))

    # -- expressions ------------------------------------------------------

    def expression(self, e, tainted: bool, fn) -> None:
        """The calls, walruses and yields in ``e``, each with whether a test
        on the buffer chose it."""
        if e is None:
            return
        if tainted:
            self.touched_all(e)
        if (self.implicit_here or self.implicit_elsewhere) and any(
                isinstance(n, _IMPLICIT_CALLERS) for n in self.nodes(e)):
            self.implicit(e, tainted)
        if not self.acts(e):
            return
        todo = [(e, tainted)]
        while todo:
            n, t = todo.pop()
            if type(n) not in _ACTS:
                if isinstance(n, ast.Compare) and not t and any(
                        isinstance(op, (ast.In, ast.NotIn)) for op in n.ops) and any(
                        self.carries(v, layer_as_holder=False) for v in [n.left, *n.comparators]):
                    # x in it advances the iterator until it finds x: as far
                    # as the buffer decides
                    for op, v in zip(n.ops, n.comparators):
                        if isinstance(op, (ast.In, ast.NotIn)):
                            self.touched_all(v, iterated=True)
                if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and not t and (
                        self.carries(n.slice, layer_as_holder=False)):
                    # d[k] with a key the buffer decides: a defaultdict
                    # inserts it, a __getitem__ may do anything
                    self.took_in(n.value)
                if isinstance(n, ast.Compare) and len(n.ops) > 1:
                    # a < b < c runs c only where a < b held: an ``and``
                    chosen = t
                    for v in [n.left, *n.comparators]:
                        todo.append((v, chosen))
                        if chosen and not t:
                            self.touched_all(v)
                        chosen = chosen or self.carries(v)
                    continue
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
            if isinstance(n, (ast.Yield, ast.YieldFrom)) and fn is not None and n.value is not None:
                self.hands_back(fn, n.value)  # next(gen) is what it yields
            if isinstance(n, ast.Call):
                self.call(n, t)
            if isinstance(n, ast.IfExp):
                chosen = t or self.carries(n.test)
                todo += [(n.test, t), (n.body, chosen), (n.orelse, chosen)]
                if chosen and not t:
                    self.touched_all(n.body)
                    self.touched_all(n.orelse)
                continue
            if isinstance(n, ast.BoolOp):
                chosen = t
                for v in n.values:
                    todo.append((v, chosen))
                    if chosen and not t:
                        self.touched_all(v)
                    chosen = chosen or self.carries(v)
                continue
            if isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                chosen = t
                for g in n.generators:
                    todo.append((g.iter, chosen))
                    if chosen and not t:
                        self.touched_all(g.iter)
                    chosen = chosen or self.carries(g.iter)
                    self.bind(g.target, g.iter, chosen)
                    for cond in g.ifs:
                        todo.append((cond, chosen))
                        if chosen and not t:
                            self.touched_all(cond)
                        chosen = chosen or self.carries(cond)
                parts = [n.key, n.value] if isinstance(n, ast.DictComp) else [n.elt]
                todo += [(p, chosen) for p in parts]
                if chosen and not t:
                    for p in parts:
                        self.touched_all(p)
                continue
            todo += [(c, t) for c in self.children(n)]

    def implicit(self, e, tainted: bool) -> None:
        """``e`` may call code Python calls without a name (a call, a
        format, an operator, a subscript, an attribute read) on a path the
        buffer chose, or with a value it decides."""
        derived = tainted or self.carries(e, layer_as_holder=False)
        if not derived:
            return
        nodes = self.nodes(e)
        if self.implicit_elsewhere and (tainted and any(self.may_run_elsewhere(n) for n in nodes)
                                        or self.may_hold_elsewhere(nodes)):
            # On a path the buffer chose, any object here may be an
            # instance of such a class (made, kept, handed back, a class
            # attribute: not followed); elsewhere, what may hold one.
            for f in self.implicit_elsewhere:
                self._taint(f)
            self._add(self.aliases, "*")  # the objects that code acts on are not followed
        under = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
        if tainted or any(  # hasattr(self, "a" if b is None else "b"): a property chosen
                isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                and n.func.id in ("hasattr", "getattr") and len(n.args) > 1
                and self.carries(n.args[1], layer_as_holder=False) for n in nodes) or any(
                self.is_layer(n) and id(n) not in under for n in nodes if isinstance(n, ast.Name)) and any(
                isinstance(n, (ast.JoinedStr, ast.Call, ast.BinOp)) for n in nodes):
            for f in self.implicit_here:
                self._taint(f)  # str(self), f"{self}" with a value the buffer decides

    def truth(self, test, tainted: bool) -> None:
        """``if test:`` runs ``test``'s ``__bool__`` (``for x in it:`` its
        ``__iter__``): where the buffer decides it, and it may be an object
        of another class of the module, that code runs by its choice."""
        if self.implicit_elsewhere and not _plain_truth(test) and (tainted or self.carries(
                test, layer_as_holder=False) and self.may_hold_elsewhere(self.nodes(test))):
            for f in self.implicit_elsewhere:
                self._taint(f)
            self._add(self.aliases, "*")

    def may_hold_elsewhere(self, nodes) -> bool:
        """What ``nodes`` name may be (or hold) an instance of such a class."""
        return self.stdout_held or any(
            isinstance(n, ast.Name) and (n.id in self.holders or n.id in self.makers)
            or isinstance(n, ast.Attribute) and n.attr in self.holders for n in nodes)

    def may_run_elsewhere(self, n) -> bool:
        """``n`` may run a special method of an object that is not the
        layer: not ``is``, not an attribute read off the layer."""
        if isinstance(n, ast.Compare):
            return not all(isinstance(op, (ast.Is, ast.IsNot)) for op in n.ops)
        if isinstance(n, ast.Attribute):
            return not self.is_layer(n.value)
        return isinstance(n, _IMPLICIT_CALLERS)

    def hands_back(self, fn, value) -> None:
        """``fn``'s call may give ``value``'s object back (a lambda's body,
        a generator's yield), as a ``return`` does."""
        refs = self.refs(value)
        if not refs <= self.returns.get(id(fn), set()):
            self.returns.setdefault(id(fn), set()).update(refs)
            self.changed = True

    def bind(self, target, value, tainted: bool, at=None) -> None:
        """``target`` receives ``value``."""
        for t in _targets(target):
            if isinstance(t, ast.Attribute) and t.attr == BUFFER_ATTR:
                self.is_the_buffer(value)
            if isinstance(t, ast.Name):
                refs = self.refs(value)
                if refs:
                    k = self.scopes.key(t.id, at if at is not None else t)
                    if not refs <= self.views.get(k, set()):
                        self.views.setdefault(k, set()).update(refs)
                        self.changed = True
        for t in _targets(target):
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and (
                t.value.id in self.layer_names
            ):
                if tainted:
                    self.chosen_stores.add(t.attr)
                # self.a = v: v's object is self.a now, and any attribute v is
                self.link(t.attr, self.refs(value))
                made = {id(_root(n.func)) for n in self.nodes(value) if isinstance(n, ast.Call)}
                if t.attr != BUFFER_ATTR and any(
                    isinstance(n, ast.Name) and n.id in self.state and self.key(n)[0] is None
                    and id(n) not in made  # Holder(): a new object, not the class's state
                    for n in self.nodes(value)
                ):
                    self._add(self.aliases, t.attr)  # self._r = (_CACHE,): module state
                for n, attr in self.objects(value):
                    if isinstance(n, ast.Name) and n.id not in self.layer_names and attr is None:
                        k = self.key(n)
                        if t.attr not in self.views.get(k, set()):
                            self.views.setdefault(k, set()).add(t.attr)
                            self.changed = True
        # (x[k] = v, del x[k]: a key or slice the buffer decides changes x
        # by it, whatever v is)
        carries = tainted or self.carries(value) or any(
            isinstance(n, ast.Subscript) and self.carries(n.slice)
            for t in _targets(target) for n in ast.walk(t))
        code = self.holds_code(value)
        if not (carries or code):
            return
        for t in _targets(target):
            if isinstance(t, (ast.Attribute, ast.Subscript)):
                root = _root(t)
                if root is not None and root.id in self.layer_names:
                    first = _first_attr(t)  # self.a = v, self.a.b = v, self.a[k] = v
                    if first in REGISTRY:
                        self._add(self.aliases, "*")  # self._buffers[k] = v: any attribute
                    elif first is not None and first != BUFFER_ATTR:
                        self._add(self.aliases, first)
                        for view in self.property_returns(first):
                            self._add(self.aliases, view)  # self.prop[k] = v: what prop returns
                elif root is not None:  # d[k] = v: d took it in
                    self.took_in(t.value)  # next(iter((d,)))[k] = v: d too
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
            # self.m(...), Class.m(...), type(self).m(self, ...), or x.m(...)
            # with x perhaps an instance of a module class: every method of
            # that name, bound (one parameter taken) or not.
            bound = isinstance(f.value, ast.Name) and f.value.id in self.layer_names
            return [(fn, offset) for fn in self.methods[f.attr]
                    for offset in ((0,) if id(fn) in self.static else (1,) if bound else (0, 1))]
        return None

    def outside_callee(self, f) -> bool:
        """``f`` is code outside this module: an imported or builtin name,
        an attribute of one, a method of another object (not named as one
        of this module's), an imported base's method."""
        if isinstance(f, ast.Name):  # not a name of module data (``_ADD = _CACHE.append``)
            return self.key(f)[0] is None and f.id not in self.functions and (
                f.id not in self.classes and f.id not in self.data_names
            )
        if isinstance(f, ast.Attribute):
            return f.attr not in self.methods and (_is_super(f.value) or _root(f) is not None or (
                isinstance(f.value, ast.Constant) and isinstance(f.value.value, (str, bytes))))
        return False  # (" ".join(...), "{}".format(...): a str's method)

    def call(self, c: ast.Call, tainted: bool) -> None:
        args = [a.value if isinstance(a, ast.Starred) else a for a in c.args]
        values = [*args, *(k.value for k in c.keywords)]
        f = c.func
        if isinstance(f, ast.Attribute) and f.attr in REGISTERS and len(args) >= 2 and (
            isinstance(args[0], ast.Constant)
            and args[0].value == BUFFER_ATTR
        ):
            self.is_the_buffer(args[1])
        if isinstance(f, ast.Name) and f.id == "setattr" and len(args) >= 3 and isinstance(
            args[1], ast.Constant
        ) and args[1].value == BUFFER_ATTR:
            self.is_the_buffer(args[2])
        receiver = isinstance(f, ast.Attribute) and self.carries(f.value, layer_as_holder=False)
        handed = tainted or receiver or any(self.carries(a) or self.holds_code(a) for a in values) or not (
            isinstance(f, ast.Name) and f.id in READERS and self.outside_callee(f)
        ) and any(isinstance(n, ast.Name) and n.id in self.layer_names and attr is None
                  for v in values for n, attr in self.objects(v))  # the layer itself handed on
        name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")
        if _sets_process_state(name) and self.outside_callee(f) and (
                tainted or any(self.carries(a, layer_as_holder=False) for a in values)):
            # torch.set_grad_enabled(b is not None), logger.setLevel(...):
            # process-wide state the warmup may read, set by the buffer
            self._add(self.aliases, "*")
        if isinstance(f, ast.Attribute) and f.attr in KEEPERS and f.attr not in self.methods:
            self.keeps(f.value, values)  # x.append(self._ids), stack.callback(next, self._ids)
        callees = self.callees(f)
        if isinstance(f, ast.Attribute) and _is_super(f.value) and f.attr in self.methods:
            callees = [(fn, 1) for fn in self.methods[f.attr]]  # a module mixin's, perhaps
        for fn, offset in callees or ():
            self.hand(c, fn, offset, tainted)  # what its parameters may be, always
        if not handed:
            return
        if isinstance(f, ast.Name) and f.id in ("setattr", "delattr") and self.outside_callee(f):
            if len(args) >= 2 and not _names_layer(args[0], self.layer_names):
                self.took_in(args[0])  # setattr(torch.backends.cudnn, "enabled", v)
            if f.id == "delattr" and len(args) >= 2 and tainted:
                self.deleted(args[1])  # delattr(self, "x") on a path the buffer chose
            if len(args) >= 3 and (tainted or self.carries(args[2]) or self.holds_code(args[2])):
                self.store_named(args[1])
            if len(args) >= 2 and tainted and f.id == "setattr":
                self.chose_store(args[1])
            return
        if callees is not None:
            for fn, _ in callees:
                if tainted:
                    self._taint(fn)
            if isinstance(f, ast.Attribute) and not (
                isinstance(f.value, ast.Name) and f.value.id in self.layer_names
            ):
                self.took_in(f.value)  # x.m(v), self.h.m(v): that object may have taken it in
            return
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and (
            f.value.id in self.layer_names
        ):
            if f.attr in REGISTERS:  # nn.Module stores it under that name
                self.store_named(args[0] if args else None)
                if tainted:
                    self.chose_store(args[0] if args else None)
                return
            if f.attr not in self.stored and f.attr not in REGISTRY and not any(
                self.holds_code(a) for a in values
            ):
                # An imported base's method (vLLM's, torch's nn.Module's):
                # handed a value the buffer decides, or run on a path it
                # chose, it may change anything of the layer
                # (``self.to(dtype)``, ``self.train(b is None)``).
                if self.builds(c) and (
                        tainted or any(self.carries(a, layer_as_holder=False) for a in values)):
                    self._add(self.aliases, "*")
                return
            self._add(self.aliases, "*")  # code this module stored, or a registry's
            return
        if isinstance(f, ast.Attribute) and _is_super(f.value):
            # An imported base's method. Its constructor is handed what
            # vLLM's model hands the layer's (the buffer too): the
            # assumption stated in the package's docstring.
            if f.attr != "__init__" and self.builds(c) and (
                    tainted or any(self.carries(a, layer_as_holder=False) for a in values)):
                self._add(self.aliases, "*")
            return
        carried = tainted or any(self.carries(a) for a in values)
        # Python's own code: a builtin, or a function of a module that is
        # not a kernel package (``zip``, ``itertools.islice``); not a
        # method of an object (a tensor's), not a kernel.
        root = _root(f)
        of_python = root is not None and self.key(root)[0] is None and (
            root.id not in self.kernel_names) and (
            root is f or root.id in self.imports and isinstance(f, ast.Attribute)
            and isinstance(f.value, (ast.Name, ast.Attribute)))
        if not self.outside_callee(f) or carried and any(self.holds_code(a) for a in values):
            # A callee the walk cannot name, or outside code handed this
            # module's code (a callback) with the value.
            self._add(self.aliases, "*")
            return
        if (carried or receiver) and self.builds(c) and not self.understood(c):
            self._add(self.aliases, "*")  # outside code beyond the allow-list
        # Outside code: the object it is a method of may take the value in
        # (``d.append(v)``, ``self.cache.put(v)``). What it does to the
        # objects it is handed is the assumption stated in the package's
        # docstring (kernels write into their output tensors).
        if not (isinstance(f, ast.Name) and f.id in READERS) and any(
            isinstance(n, ast.Name) and n.id in self.layer_names and attr is None
            for v in values for n, attr in self.objects(v)
        ):
            self._add(self.aliases, "*")  # handed the layer itself: it may store anything
        if isinstance(f, ast.Attribute):
            # x.append(v), x.fill_(v); on torch's namespace only a
            # container's method: torch.nn.init.zeros_(v) is torch's
            # function, which changes its argument, not torch.
            root = _root(f.value)
            of_torch = root is not None and self.key(root)[0] is None and root.id in self.torch_names
            in_place = f.attr.endswith("_") and not f.attr.endswith("__")
            mutating = f.attr in MUTATORS or not of_torch and in_place
            self.took_in(f.value, mutating)
            for n in self.nodes(f.value):  # torch.narrow(x, ...).fill_(v): x's view
                if isinstance(n, ast.Call):
                    for a in [*n.args, *(k.value for k in n.keywords)]:
                        self.took_in(a, f.attr in MUTATORS or in_place)
            if args and ((f.value.id in BUILTIN_TYPES if isinstance(f.value, ast.Name) else (
                isinstance(f.value, ast.Attribute) and f.value.attr == "Tensor"
            )) or in_place):
                # list.append(x, v), torch.Tensor.fill_(x, v), torch.fill_(x, v)
                self.took_in(args[0])
        elif isinstance(f, ast.Name) and args and f.id in self.in_place_imports and (
                self.key(f)[0] is None):
            self.took_in(args[0])  # fill_(x, v) after ``from torch import fill_``
        for k in c.keywords:
            if k.arg == "out":
                self.took_in(k.value)  # torch.add(a, b, out=x)
            if k.arg == "inplace" and args and not (isinstance(k.value, ast.Constant) and not k.value.value):
                self.took_in(args[0])  # F.threshold(x, t, v, inplace=True)
        for a in values:
            if isinstance(a, ast.Attribute) and a.attr in MUTATORS:
                self.took_in(a.value)  # map(x.append, [v]): x's bound method handed out
        if of_python and not self._only_reads(f, args) and (
                tainted or any(self.carries(a) for a in values)):
            # Python's code (not a kernel's) handed a value the buffer
            # decides may do to everything else it is handed what that
            # value decides: zip([0] * (b is None), self._ids) advances the
            # layer's iterator once where the buffer is missing.
            # Understood: what consumes one iterable whole (list(it),
            # dict.fromkeys(names, v)) changes only the iterable, and only
            # where that is what the buffer decides.
            name = f.id if isinstance(f, ast.Name) else f.attr
            whole = name in WHOLE_CONSUMERS
            # What only iterates what it is handed (zip, chain, list: no
            # function called on the items) changes no list the layer holds.
            iterating = name in ITERATING and all(
                (n.func.id if isinstance(n.func, ast.Name) else getattr(n.func, "attr", None))
                in ITERATING for a in values for n in self.nodes(a) if isinstance(n, ast.Call))
            for a in values:
                derived = self.carries(a, layer_as_holder=False)
                if derived or not whole and not self.only_displays(a):
                    self.took_in(a, displays_kept=iterating)

    def builds(self, node) -> bool:
        """``node`` runs while the module is imported or the layer is built."""
        fn = self.scopes.enclosing.get(id(node))
        return fn is None or id(fn) in self.building

    def understood(self, c: ast.Call) -> bool:
        """What the outside code ``c`` calls does is understood (the
        allow-list above): it acts on its receiver and on what it is handed
        (which the walk follows), and on nothing else."""
        f = c.func
        name = None
        if isinstance(f, ast.Name):
            if self.key(f)[0] is None and self.outside_callee(f):
                if f.id in self.py_functions:
                    name = self.py_functions[f.id]  # from itertools import islice
                elif f.id in UNDERSTOOD_BUILTINS and f.id not in self.imports:
                    name = f.id
        elif isinstance(f, ast.Attribute):
            root = _root(f)
            if root is not None and self.key(root)[0] is None and root.id in self.imports and (
                    _is_chain(f.value)):
                # A function of an imported module (or torch.Tensor's, unbound).
                if root.id in self.py_modules:
                    name = f.attr  # itertools.islice, collections.OrderedDict.fromkeys
                elif root.id in self.torch_names and (
                    isinstance(f.value, ast.Name) and (
                        f.attr in TORCH_FACTORIES or f.attr in TORCH_VIEWS)
                    or f.attr.endswith("_") and f.attr in UNDERSTOOD_METHODS
                    or isinstance(f.value, ast.Attribute) and isinstance(f.value.value, ast.Name)
                    and f.value.attr in TORCH_CLASSES and f.attr in UNDERSTOOD_METHODS
                ):
                    name = f.attr  # torch.zeros(n), torch.narrow(x, ...), torch.Tensor.fill_(x, v)
            elif f.attr in UNDERSTOOD_METHODS:
                name = f.attr  # a method of an object: x.append(v), t.fill_(v)
        if name is None and self.of_kernels(f):
            # vLLM's code or another package of kernels' (flashinfer,
            # triton, deep_gemm, einops), or a method of what it made
            # (``current_workspace_manager().get_simultaneous(...)``): taken
            # to write only the tensors it is handed as outputs, and not the
            # value in them (the assumption stated in the package's docstring).
            return True
        if name is None:
            return False
        # What calls a function it is handed: understood where that is a
        # builtin of the allow-list, a type, or a container's method.
        pos = CALLERS.get(name) if isinstance(f, ast.Name) or name not in UNDERSTOOD_METHODS else None
        handed = [k.value for k in c.keywords if k.arg in ("key", "func", "default_factory")]
        if isinstance(pos, int) and len(c.args) > pos and (name != "iter" or len(c.args) > 1):
            handed.append(c.args[pos])
        return all(self.known_function(a) for a in handed)

    def of_kernels(self, f) -> bool:
        """``f`` is code of a package of kernels other than torch and numpy
        that the module imports (``from vllm... import round_up``,
        ``flashinfer.f``), or a method of what such code returned."""
        root = _root(f)
        if root is None or self.key(root)[0] is not None or root.id not in self.kernel_names:
            return False
        return root.id not in self.torch_names and root.id not in self.numpy_names

    def known_function(self, a) -> bool:
        if isinstance(a, ast.Constant) and a.value is None:
            return True
        if isinstance(a, ast.Name):
            return self.key(a)[0] is None and self.outside_callee(a) and a.id not in self.imports and (
                a.id in UNDERSTOOD_BUILTINS or a.id in BUILTIN_TYPES)
        return isinstance(a, ast.Attribute) and a.attr in MUTATORS

    def deleted(self, name) -> None:
        """The layer's attribute ``name`` (a node: its name) may be deleted
        on a path the buffer chose: reading it may raise."""
        if isinstance(name, ast.Constant) and isinstance(name.value, str) and (
                name.value != "__dict__"):
            self._add(self.aliases, DELETED + name.value)
        else:
            self._add(self.aliases, DELETED + "*")

    def keeps(self, receiver, values) -> None:
        """``receiver`` keeps ``values`` (a container's item, a callback and
        its arguments): a change through it later may be a change of what
        they are."""
        refs = set().union(*(self.refs(v) for v in values)) if values else set()
        if not refs:
            return
        root = _root(receiver)
        if root is None:
            return
        if self.is_layer(root):
            first = _first_attr(receiver)
            if first is not None and first != BUFFER_ATTR:
                self.link(first, refs)
        else:
            k = self.key(root)
            if not refs <= self.views.get(k, set()):
                self.views.setdefault(k, set()).update(refs)
                self.changed = True

    def only_displays(self, e) -> bool:
        """``e`` is an attribute of the layer that the module only ever
        binds to a list, tuple, set or dict it writes out (or a constant):
        a container, which iterating does not change (an iterator would
        advance)."""
        return isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and (
            e.value.id in self.layer_names) and e.attr in self.displays

    def _only_reads(self, f, args) -> bool:
        """``f`` is Python's code that reads its arguments without
        iterating one: the readers, numbers' builtins and ``math``'s
        (but its sums and products over an iterable), ``min``/``max``
        of two or more."""
        if isinstance(f, ast.Name):
            return f.id in READERS or f.id in NUMBER_READERS or (
                f.id in ("min", "max") and len(args) >= 2)
        root = _root(f)
        return isinstance(f, ast.Attribute) and root is f.value and self.key(root)[0] is None and (
            root.id in self.math_names) and f.attr not in ITERATING_MATH

    def is_layer(self, n) -> bool:
        """``n`` is the layer: a method's first parameter, or a name bound to it."""
        return isinstance(n, ast.Name) and (
            n.id in self.layer_names or "*" in self.views.get(self.key(n), ())
        )

    def touched_all(self, e, iterated: bool = False) -> None:
        """Everything ``e`` names may have changed on a path the buffer
        chose; ``iterated``: ``e`` is iterated (a loop's head, ``x in e``),
        which changes no container the layer holds (``only_displays``) but
        through a method read off it (``self._names.pop()``)."""
        nodes = self.nodes(e)
        read_off = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
        if iterated:
            nodes = [n for n in nodes if id(n) in read_off or not self.only_displays(n)]
        # Imported objects handed to a call there (next(_CACHE), next(m.CNT)),
        # or whose method is called (m.D.pop(k), and PENDING.pop() where
        # ``from m import PENDING`` may bind an object as well as a module);
        # not torch's (torch.int32), nor a function of a module ``import``
        # binds (ops.f(x)).
        handed = {id(x) for n in nodes if isinstance(n, ast.Call)
                  for a in [*n.args, *(k.value for k in n.keywords)]
                  for x, attr in self.objects(a)
                  if isinstance(x, ast.Name) and x.id not in self.torch_names}
        handed |= {id(_root(n.func.value)) for n in nodes
                   if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                   and (isinstance(n.func.value, (ast.Attribute, ast.Subscript))
                        or isinstance(n.func.value, ast.Name) and n.func.value.id in self.from_imported)
                   and _root(n.func.value) is not None
                   and _root(n.func.value).id not in self.torch_names}
        for n in nodes:
            if isinstance(n, ast.Attribute) and self.is_layer(n.value):
                self.touched_attribute(n.attr)
            elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Call) and (
                    "*" in self.returned(n.value)):
                self.touched_attribute(n.attr)  # get()._ids, where get() may give the layer back
            elif isinstance(n, ast.Call) and self.returned(n) - {"*"}:
                for view in self.returned(n) - {"*"}:
                    self.touched_attribute(view)  # next(get()), where get() returns self._ids
                self.touched(n)
            elif id(n) in read_off and self.is_layer(n):
                continue  # layer.x: x is what is touched
            elif isinstance(n, ast.Name) and self.key(n)[0] is None and n.id in self.imports:
                if id(n) in handed:  # next(_CACHE): an imported object, advanced
                    self._add(self.aliases, IMPORTED)
            else:
                self.touched(n)

    def touched_attribute(self, attr: str) -> None:
        if attr in REGISTRY:
            self._add(self.aliases, "*")
        elif attr != BUFFER_ATTR and attr not in self.methods:
            self._add(self.aliases, attr)
        elif attr in self.properties:
            self._add(self.aliases, attr)  # a cached_property's value is fixed there
            for view in self.property_returns(attr):
                self._add(self.aliases, view)  # next(self.prop): the object it returns
            for fn in self.methods.get(attr, ()):
                self._taint(fn)  # read where the buffer chose: its getter runs by that choice

    def touched(self, n) -> None:
        """``n`` runs on a path the buffer chose: any object it names may
        have changed there (an iterator advanced, a defaultdict read, a
        view filled), whatever the operation."""
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and (
            n.value.id in self.layer_names
        ):
            self.touched_attribute(n.attr)
        elif isinstance(n, ast.Name) and n.id not in self.layer_names:
            k = self.key(n)
            if k[0] is None and n.id not in self.data_names and n.id not in self.classes:
                return
            self._add(self.carriers, k)
            for view in self.views.get(k, ()):
                self._add(self.aliases, view)

    def took_in(self, e, mutating: bool = True, displays_kept: bool = False) -> None:
        """The objects ``e`` may be (the layer, its attributes, a name's
        object) may have taken a value that depends on the buffer in;
        ``mutating``: by a store or a method that changes its receiver
        (``append``, an in-place ``x.fill_``), not any method of it;
        ``displays_kept``: ``e`` is only iterated, which changes no
        container (``only_displays``)."""
        for n, attr in self.objects(e):
            if displays_kept and attr in self.displays and isinstance(n, ast.Name) and (
                    n.id in self.layer_names):
                continue
            if isinstance(n, ast.Name) and n.id in self.layer_names:
                if attr is None or attr in REGISTRY:
                    self._add(self.aliases, "*")  # the layer itself, or its registries
                elif attr != BUFFER_ATTR:
                    self._add(self.aliases, attr)
                    for view in self.property_returns(attr):
                        self._add(self.aliases, view)  # self.prop.append(v): what prop returns
            elif isinstance(n, ast.Name):
                k = self.key(n)
                if k[0] is None and n.id in self.imports:
                    if mutating:  # m._CACHE.append(v), _CACHE[k] = v: not torch.ops.f(v)
                        self._add(self.aliases, IMPORTED)
                    continue
                if k[0] is None and n.id not in self.data_names and n.id not in self.classes:
                    continue  # a builtin: no object this module keeps
                self._add(self.carriers, k)
                for view in self.views.get(k, ()):
                    self._add(self.aliases, view)
                if k[0] is None and n.id in self.classes and attr is not None:
                    self._add(self.aliases, attr)  # Cls.items: self.items too
            elif isinstance(n, ast.Call):
                for view in self.returned(n):
                    self._add(self.aliases, view)

    def objects(self, e):
        """The nodes whose object ``e`` may be (or hold): names, with the
        attribute read right off them (``a`` of ``x.a.b[k]``), and calls of
        this module's code; not what operators, comparisons or formats
        make anew."""
        todo = [(e, None)]
        while todo:
            n, attr = todo.pop()
            if isinstance(n, ast.Name):
                yield n, attr
            elif isinstance(n, ast.Attribute):  # self.__class__.items: as self.items
                todo.append((n.value, attr if n.attr == "__class__" else n.attr))
            elif isinstance(n, ast.Subscript):
                todo.append((n.value, attr))
            elif isinstance(n, (ast.Starred, ast.NamedExpr, ast.Await, ast.Yield,
                                ast.YieldFrom)):
                if n.value is not None:
                    todo.append((n.value, None))
            elif isinstance(n, (ast.Tuple, ast.List, ast.Set)):
                todo += [(x, None) for x in n.elts]
            elif isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Mult, ast.Add)) and any(
                    isinstance(x, (ast.Tuple, ast.List)) for x in (n.left, n.right)):
                # [self._seen] * n, [a] + [b]: a sequence of the same objects
                todo += [(x, None) for x in (n.left, n.right)
                         if isinstance(x, (ast.Tuple, ast.List, ast.BinOp))]
            elif isinstance(n, ast.Dict):
                todo += [(x, None) for x in n.values]
            elif isinstance(n, ast.IfExp):
                todo += [(n.body, None), (n.orelse, None)]
            elif isinstance(n, ast.BoolOp):
                todo += [(x, None) for x in n.values]
            elif isinstance(n, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
                todo += [(n.elt, None)] + [(g.iter, None) for g in n.generators]
            elif isinstance(n, ast.DictComp):
                todo += [(n.value, None)] + [(g.iter, None) for g in n.generators]
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and (
                n.func.id == "type" and len(n.args) == 1 and not n.keywords
            ):
                todo.append((n.args[0], attr))  # type(self).items: as self.items
            elif isinstance(n, ast.Call):
                # What a call returns may be its receiver or an argument
                # (``next(iter(x))``, ``x.copy()``), or what this module's
                # code returns.
                yield n, None
                f = n.func
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and (
                    f.value.id in self.layer_names
                ):
                    if f.attr in REGISTRY:  # self.get_submodule(...), self.buffers()
                        todo.append((f.value, f.attr))
                    # else: this module's method (what it returns), or an
                    # imported base's (vLLM's own code)
                elif isinstance(f, ast.Attribute):
                    todo.append((f.value, None))
                if self.keeps_arguments(n):
                    # Outside code's result may keep what it is handed, or
                    # be it (``SimpleNamespace(l=self._l)``, ``np.asarray(t)``,
                    # ``namedtuple("Box", "l")(self._l)``), and so may an
                    # instance of a class of the module (a dataclass's).
                    todo += [(a, None) for a in n.args] + [(k.value, None) for k in n.keywords]
                elif isinstance(f, ast.Attribute) and n.args and (
                    f.attr in TORCH_VIEWS or isinstance(f.value, ast.Attribute)
                    and f.value.attr in TORCH_CLASSES
                ) and _root(f) is not None and _root(f).id in self.torch_names:
                    # torch.narrow(x, ...), torch.Tensor.view(x, -1): a view of x
                    todo.append((n.args[0], None))
                elif isinstance(f, ast.Name) and n.args and f.id in self.view_imports and (
                        self.key(f)[0] is None):
                    todo.append((n.args[0], None))  # narrow(x, ...) after ``from torch import narrow``

    def keeps_arguments(self, c: ast.Call) -> bool:
        """The call ``c`` may return (or keep) what it is handed: outside
        code run while the layer is built (``SimpleNamespace(l=self._l)``,
        ``np.asarray(t)``), but for outside code that makes a new value of
        what it reads (``len``, ``int``, ``torch.zeros_like``); this
        module's functions and methods (what they return is followed) and
        the layer's own methods do not. In the forward paths, what
        ``PASS_THROUGH`` names."""
        f = c.func
        if isinstance(f, ast.Name) and f.id in PASS_THROUGH or isinstance(
                f, ast.Attribute) and f.attr in PASS_THROUGH:
            return True
        if not self.builds(c):
            return isinstance(f, (ast.Call, ast.Subscript, ast.Lambda))
        if isinstance(f, ast.Attribute) and f.attr in UNDERSTOOD_METHODS:
            return False  # t.view_as(other), x.copy(): the receiver (followed apart), not other
        if isinstance(f, ast.Name) and self.key(f)[0] is None and f.id in self.classes:
            return True
        if self.callees(f) is not None:
            return False
        if isinstance(f, ast.Attribute) and (isinstance(f.value, ast.Name) and (
                f.value.id in self.layer_names) or _is_super(f.value)):
            return False
        if isinstance(f, ast.Name) and self.key(f)[0] is None and f.id not in self.imports and (
                f.id in READERS or f.id in NUMBER_READERS or f.id in WHOLE_CONSUMERS
                or f.id in ITERATING) and f.id != "getattr":
            return False  # (a new container of the items: list(x), dict(zip(names, v)))
        if isinstance(f, ast.Attribute) and f.attr == "fromkeys":
            return False
        root = _root(f)
        return not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and (
            root is not None and self.key(root)[0] is None and root.id in self.torch_names
            and f.attr in TORCH_FACTORIES))

    def property_returns(self, attr) -> set:
        if attr not in self.properties:
            return set()
        found = set()
        for fn in self.methods.get(attr, ()):
            found |= self.returns.get(id(fn), set())
        return found

    def returned(self, c: ast.Call) -> set:
        callees = self.callees(c.func)
        if not callees:
            return set()
        found = set()
        for fn, _ in callees:
            found |= self.returns.get(id(fn), set())
        return found

    def refs(self, value) -> set:
        """The layer's attributes ``value`` may be (or hold), ``*`` for any."""
        found = set()
        # torch.empty(...): a call's result, not the imported module itself
        receivers = {id(_root(n.func)) for n in self.nodes(value)
                     if isinstance(n, ast.Call)} if value is not None else set()
        for n, attr in self.objects(value):
            if isinstance(n, ast.Name) and n.id in self.layer_names:
                found.add("*" if attr is None or attr in REGISTRY else attr)
                found |= self.property_returns(attr)
            elif isinstance(n, ast.Name):
                k = self.key(n)
                found |= self.views.get(k, set())
                if attr is not None and attr not in REGISTRY and "*" in self.views.get(k, ()):
                    found.add(attr)  # layer._ids, where layer is the layer: its _ids
                if k[0] is None and n.id in self.kept:
                    found.add(GLOBAL + n.id)
                if k[0] is None and n.id in self.imports and id(n) not in receivers:
                    found.add(IMPORTED)  # m._CACHE: the pool's object
            elif isinstance(n, ast.Call):
                found |= self.returned(n)
        found.discard(BUFFER_ATTR)
        return found

    def is_the_buffer(self, value) -> None:
        """``value`` is stored as the buffer: the names in it are it."""
        for n in self.nodes(value):
            if isinstance(n, ast.Name) and n.id not in self.layer_names:
                self._add(self.carriers, self.key(n))

    def chose_store(self, name) -> None:
        """The layer's attribute ``name`` (a node) is stored on a path the buffer chose."""
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            self.chosen_stores.add(name.value)
        else:
            self.chosen_stores.add("*")

    def _always_stored(self, target) -> set[str]:
        """The attributes the layer's ``__init__`` stores on every path that
        returns (not through a loop, a ``try`` or a ``with``), with this
        module's methods it calls on the way by ``self.m()``; the names the
        class body binds. ``*`` is never among them."""
        if target is None:
            return set()
        found = {t.id for s in target.body if isinstance(s, (ast.Assign, ast.AnnAssign))
                 and s.value is not None
                 for x in (s.targets if isinstance(s, ast.Assign) else [s.target])
                 for t in _targets(x) if isinstance(t, ast.Name)}
        found |= {s.name for s in target.body if isinstance(s, (*_DEFS, ast.ClassDef))}
        inits = [f for f in target.body if isinstance(f, _DEFS) and f.name == "__init__"]
        if len(inits) != 1 or not _params(inits[0]):
            return found
        universe = object()

        def stores(body, me, depth) -> set | object:
            """What ``body`` stores on ``me`` on every path that goes on
            past it (``universe``: none does); from a statement that may
            return on, nothing more is counted."""
            out: set = set()
            for s in body:
                if any(isinstance(n, ast.Return) for n in _own_walk(s)):
                    return out
                if isinstance(s, ast.Raise):
                    return universe
                if any(isinstance(n, ast.Name) and n.id == me and not isinstance(n.ctx, ast.Load)
                       for n in _own_walk(s)):
                    return out  # me rebound: nothing more is counted
                gone = [n for n in _own_walk(s) if isinstance(n, ast.Delete) or isinstance(
                    n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "delattr"]
                if gone:  # del self.x, delattr(self, "x"): not stored any more; nothing more counted
                    for n in gone:
                        if isinstance(n, ast.Call):
                            if len(n.args) < 2 or not isinstance(n.args[1], ast.Constant):
                                return set()
                            out.discard(n.args[1].value)
                        for t in n.targets if isinstance(n, ast.Delete) else ():
                            for x in ast.walk(t):
                                if isinstance(x, ast.Attribute):
                                    out.discard(x.attr)
                    return out
                if isinstance(s, ast.AnnAssign) and s.value is None:
                    continue  # (an annotation alone stores nothing)
                if isinstance(s, (ast.Assign, ast.AnnAssign)):
                    for x in (s.targets if isinstance(s, ast.Assign) else [s.target]):
                        for t in _targets(x):
                            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and (
                                    t.value.id == me):
                                out.add(t.attr)
                elif isinstance(s, ast.If):
                    a, b = stores(s.body, me, depth), stores(s.orelse, me, depth)
                    if a is universe and b is universe:
                        return universe
                    out |= b if a is universe else a if b is universe else a & b
                elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
                    f = s.value.func
                    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and (
                            f.value.id == me) and depth < 3:
                        if f.attr in REGISTERS and s.value.args and isinstance(
                                s.value.args[0], ast.Constant):
                            out.add(str(s.value.args[0].value))
                        defs = [m for m in target.body if isinstance(m, _DEFS) and m.name == f.attr]
                        if len(defs) == 1 and _params(defs[0]) and not defs[0].decorator_list:
                            body_ = defs[0].body
                            if isinstance(body_[-1], ast.Return):
                                body_ = body_[:-1]
                            inner = stores(body_, _params(defs[0])[0].arg, depth + 1)
                            if inner is universe:
                                return universe
                            out |= inner
            return out

        got = stores(inits[0].body, _params(inits[0])[0].arg, 0)
        return found | (set() if got is universe else got)

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
        # what ``*xs``/``**kw`` may reach: not the parameters the call binds
        # already (``super().__init__(*args)`` never hands ``self``)
        bound = {p.arg for p in [*a.posonlyargs, *a.args][:offset]}
        every = [p.arg for p in _params(fn) if p.arg not in bound]
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
        refs = self.refs(value)
        if refs and not refs <= self.views.get((id(fn), name), set()):
            self.views.setdefault((id(fn), name), set()).update(refs)
            self.changed = True
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


def _import_names(stmt) -> list[str]:
    return [(a.asname or a.name).split(".")[0] for a in stmt.names if a.name != "*"]


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


def _plain_truth(test) -> bool:
    """Whether ``test`` is true runs no special method: a constant, an
    ``is`` comparison, ``not``/``and``/``or`` of those."""
    if isinstance(test, ast.Constant):
        return True
    if isinstance(test, ast.Compare):
        return all(isinstance(op, (ast.Is, ast.IsNot)) for op in test.ops)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _plain_truth(test.operand)
    if isinstance(test, ast.BoolOp):
        return all(_plain_truth(v) for v in test.values)
    return False


def _own_walk(node):
    """``ast.walk`` of ``node`` without the functions and classes defined in it."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        todo += [c for c in ast.iter_child_nodes(n)
                 if not isinstance(c, (*_FUNCTIONS, ast.ClassDef))]


def _is_chain(node) -> bool:
    """``node`` is a name or a chain of attributes of one (``torch.nn``)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _first_attr(node) -> str | None:
    """For ``self.a.b[...]``: ``a``."""
    first = None
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        if isinstance(node, ast.Attribute) and node.attr != "__class__":
            first = node.attr  # self.__class__.items: the class's items, self.items too
        node = node.func if isinstance(node, ast.Call) else node.value
    return first


def _is_super(node) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
        node.func.id == "super"
    )


def _sets_process_state(name: str) -> bool:
    """A function or method that sets what the whole process reads
    (torch's defaults and switches, a logger's level, the seed)."""
    return name != "set_" and (name.startswith(("set_", "use_", "enable", "disable", "manual_seed"))
                               or name.startswith("set") and name[3:4].isupper()
                               or name in ("seed", "basicConfig", "captureWarnings"))


def _names_layer(e, layer_names) -> bool:
    """``e`` may be the layer itself (a bare first parameter, not one of its
    attributes)."""
    under_attr = {id(n.value) for n in ast.walk(e) if isinstance(n, ast.Attribute)}
    return any(isinstance(n, ast.Name) and n.id in layer_names and id(n) not in under_attr
               for n in ast.walk(e))


__all__ = ["REGISTERS", "layer_aliases"]
