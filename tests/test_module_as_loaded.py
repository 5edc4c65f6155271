"""The module as loaded: what a fork's module does around ``forward_mqa``
(warmup_shape/as_loaded.py, M1-M6), and the runtime's check of the walk's
assumptions on the loaded objects (loaded_code.check_assumptions).

Sources are vLLM 0.27.1's own ``flashmla.py`` (affected) and the same with
vLLM #50693 applied (fixed), each with a harmless helper ``_prepare`` that
the warmup calls; a shape then changes what runs around it."""

from __future__ import annotations

import importlib.util
import itertools
import logging
import sys

import pytest

from dspark_attn_plugin import instrumentation, loaded_code, patch
from dspark_attn_plugin.warmup_shape import Verdict, classify_source

import flashmla_variants as variants

LOGGER = "vllm.dspark_attn_plugin"
STRICT = "def _strict(self, *args):\n    return self.topk_indices_buffer.shape[-1]\n\n\n"
ANCHOR = "class DeepseekV4FlashMLAAttention("
_n = itertools.count()


def build(stock: str, *, fixed=True, top="", body="", after="", warmup=(), bases="",
          swa_test=None, helper="    def _prepare(self):\n        return None\n\n") -> str:
    text = variants.upstream_fix(stock) if fixed else stock
    lines = ["self._prepare()", *warmup]
    text = variants._replace_once(
        text, "        if attn_metadata is None:\n",
        "        if attn_metadata is None:\n" + "".join(" " * 12 + l + "\n" for l in lines))
    if swa_test:
        text = variants._replace_once(text, " " * 12 + "swa_only = self.compress_ratio <= 1\n",
                                      " " * 12 + f"swa_only = {swa_test}\n")
    text = variants._replace_once(text, "    def forward_mqa(\n", helper + body + "    def forward_mqa(\n")
    if bases:
        text = variants._replace_once(text, ANCHOR, ANCHOR + bases)
    text = variants._replace_once(text, ANCHOR, top + ANCHOR)
    return text + ("\n\n" + after if after else "")


@pytest.fixture
def stock(flashmla):
    return flashmla.__loader__.get_source(flashmla.__name__)


def test_the_controls_read_as_their_base(stock):
    assert classify_source(build(stock)).verdict is Verdict.FIXED
    assert classify_source(build(stock, fixed=False)).verdict is Verdict.AFFECTED


# Each: a module whose SWA-only warmup, as Python runs it, may fail for lack
# of the buffer (or whose class is not what the walk reads): never safe, and
# the reason names the rule that refuses it (what the WARNING and `status`
# tell the operator).
def _chain(prefix: str, n: int) -> str:
    """``n`` classes of the module, each the base of the one before."""
    return f"class {prefix}{n - 1}:\n    pass\n\n\n" + "".join(
        f"class {prefix}{i}({prefix}{i + 1}):\n    pass\n\n\n" for i in reversed(range(n - 1)))


NOT_SAFE = {
    # M1: module statements
    "alias-of-the-class": (dict(
        top=STRICT, after="_Alias = DeepseekV4FlashMLAAttention\n"),
        "_Alias is assigned a value that is not a constant"),
    "module-level-call-that-sets-a-class-attribute": (dict(
        top=STRICT, after="def _install():\n    DeepseekV4FlashMLAAttention._prepare = _strict\n\n\n_install()\n"),
        "a module-level Expr statement"),
    "setattr-after-the-class": (dict(
        top=STRICT, after="setattr(DeepseekV4FlashMLAAttention, '_prepare', _strict)\n"),
        "a module-level Expr statement"),
    "import-outside-the-allow-list": (dict(top="import sys\n\n\n"), "imports sys"),
    "a-star-import-of-an-allowed-package": (dict(top="from torch.nn.functional import *\n\n\n"),
                                            "a star import"),
    # PEP 562's module __getattr__, bound second in a chained assignment:
    # the reason names it
    "module-getattr-bound-second-in-a-chain": (dict(
        top="def _lookup(name):\n    raise AttributeError(name)\n\n\n_g = __getattr__ = _lookup\n\n\n"),
        "binds the special name __getattr__"),
    "mixin-defined-again-after-the-class": (dict(
        top="class _Mixin:\n    def _ready(self):\n        return self.topk_indices_buffer.shape[-1]\n\n\n",
        bases="_Mixin, ", warmup=("self._ready()",),
        after="class _Mixin:\n    def _ready(self):\n        return 0\n"),
        "binds _Mixin again"),
    "module-function-bound-again": (dict(
        top="def _probe(layer):\n    return 0\n\n\n", warmup=("_probe(self)",),
        after="def _probe(layer):\n    return layer.topk_indices_buffer.shape[-1]\n"),
        "binds _probe again"),
    "builtin-exception-shadowed": (dict(
        top="class AssertionError(Exception):\n    pass\n\n\n",
        warmup=("try:", "    assert self.topk_indices_buffer is not None", "except AssertionError:",
                "    pass")), "binds AssertionError, the name of a builtin"),
    "builtin-decorator-shadowed": (dict(
        top="def property(fget):\n    return fget\n\n\n"), "binds property, the name of a builtin"),
    "private-name-mangled-to-another-function": (dict(
        top=("def __top_k(layer):\n    return 0\n\n\n"
             "def _DeepseekV4FlashMLAAttention__top_k(layer):\n"
             "    return layer.topk_indices_buffer.shape[-1]\n\n\n"),
        warmup=("x = __top_k(self)",)), "reads the private name __top_k"),
    "private-member-of-a-mixin": (dict(
        top=("class _Mixin:\n    def _go(self):\n        return self.__impl()\n\n"
             "    def __impl(self):\n        return self.topk_indices_buffer.shape[-1]\n\n\n"),
        bases="_Mixin, ", warmup=("x = self._go()",),
        body="    def __impl(self):\n        return 0\n\n"), "reads the private name __impl"),
    "type-checking-block-with-a-class": (dict(
        top="if TYPE_CHECKING:\n    class Other:\n        pass\n\n\n"), "holds more than imports"),
    # M2: the class and its bases
    "class-decorated": (dict(top="def _keep(cls):\n    return cls\n\n\n@_keep\n"), "is decorated"),
    "base-made-by-a-call": (dict(top="from vllm.utils import make_base\n\n\n", bases="make_base(), "),
                            "neither imported nor a class of this module"),
    "mixin-init-subclass": (dict(
        top=STRICT + "class _Mixin:\n    def __init_subclass__(cls, **kw):\n        cls._prepare = _strict\n\n\n",
        bases="_Mixin, "), "special name __init_subclass__"),
    "update-wrapper-imported-by-name": (dict(
        top="from functools import update_wrapper\n\n\n",
        body="    def _swap(self):\n        update_wrapper(_a, _b, assigned=('__code__',), updated=())\n\n"),
        "uses update_wrapper, which copies code"),
    "wraps-imported-under-another-name": (dict(
        top="from functools import wraps as _w\n\n\n"), "uses wraps, which copies code"),
    "update-wrapper-through-getattr": (dict(
        top="import functools\n\n\n",
        body="    def _swap(self, f):\n        getattr(f.tools, 'update_wrapper')(_a, _b)\n\n"),
        "getattr of update_wrapper"),
    "mixin-after-an-imported-base": (dict(
        top="class _Mixin:\n    def _ready(self):\n        return 0\n\n\n", warmup=("self._ready()",)),
        "an imported base of DeepseekV4FlashMLAAttention may define"),
    # M3: class bodies
    "class-body-binds-a-helper-twice": (dict(body="    _prepare = None\n"), "binds _prepare more than once"),
    "class-body-binds-a-function": (dict(top=STRICT, body="    _other = _strict\n"),
                                    "_other is not a constant or an imported name"),
    "class-level-buffer-descriptor": (dict(body="    topk_indices_buffer = None\n"),
                                      "defines topk_indices_buffer at class level"),
    "class-defines-getattr": (dict(body="    def __getattr__(self, name):\n        return None\n\n"),
                              "special name __getattr__"),
    # M4: stores anywhere
    "method-stores-into-the-class": (dict(
        top=STRICT, body="    def _setup(self):\n        type(self)._prepare = _strict\n\n"),
        "into something other than a method's own instance"),
    "method-shadows-a-method": (dict(
        body="    def _setup(self):\n        self._prepare = self._o_proj\n\n"),
        "stores into ._prepare, which the class defines"),
    "global-statement": (dict(body="    def _other(self):\n        global _x\n        _x = 1\n\n"),
                         "declares global _x"),
    "setattr-with-a-computed-name": (dict(
        body="    def _setup(self, name, value):\n        setattr(self, name, value)\n\n"),
        "setattr with a computed name"),
    # M5: reflection
    "vars-of-the-layer": (dict(warmup=("x = vars(self)['topk_indices_buffer'].shape",)), "uses vars"),
    "eval-of-a-string": (dict(warmup=("eval('self.topk_indices_buffer.shape')",)), "uses eval"),
    "dict-of-the-layer": (dict(warmup=("x = self.__dict__['topk_indices_buffer'].shape",)),
                          "special attribute __dict__"),
    # M6: evaluated at definition
    "default-runs-module-code": (dict(
        top="def _make():\n    return 0\n\n\ndef _helper(x=_make()):\n    return x\n\n\n"),
        "a default argument of _helper runs code"),
    # Python's semantics inside the run
    "default-argument-carries-the-buffer": (dict(
        warmup=("_f = lambda b=self.topk_indices_buffer: b.shape", "_f()")),
        "binds a default argument to a value derived from topk_indices_buffer"),
    "closure-reads-its-cell-late": (dict(
        warmup=("cell = 0", "def _g():", "    return cell.shape", "cell = self.topk_indices_buffer", "_g()")),
        "reads cell from an enclosing function that binds it more than once"),
    "walrus-in-a-comprehension": (dict(
        warmup=("x = [(swa_only := False) for _ in (0,)]",)),
        "with := inside a comprehension"),
    "module-rebinds-its-name": (dict(after="__name__ = 'elsewhere'\n"),
                                "binds the special name __name__"),
    "generator-function-called": (dict(
        top="def _gen(layer):\n    yield layer.topk_indices_buffer.shape\n\n\n",
        warmup=("x = list(_gen(self))",)), "a generator function"),
    # Survivors of the mutation tool over as_loaded.py (2026-12-05).
    "union-with-module-code": (dict(
        top="def _make():\n    return None\n\n\n_T = torch.Tensor | _make()\n\n\n"),
        "_T is assigned a value that is not a constant"),
    "import-outside-the-allow-list-after-a-string-statement": (dict(
        top='"""A fork\'s note."""\n\nimport sys\n\n\n'), "imports sys"),
    "setattr-with-unpacked-arguments": (dict(
        body="    def _setup(self, pair):\n        setattr(*pair)\n\n"),
        "setattr with a computed name"),
    "two-decorators-on-a-member": (dict(
        body="    @classmethod\n    @property\n    def _kind(cls):\n        return 0\n\n"),
        "has more than one decorator"),
    "member-under-an-attribute-decorator": (dict(
        top="import functools\n\n\n", body="    @functools.cache\n    def _ready(self):\n        return 0\n\n"),
        "_ready has a decorator the walk cannot see"),
    "bases-forty-deep": (dict(top=_chain("_N", 40), bases="_N0, "), "bases nest too deep"),
    "setattr-without-arguments": (dict(body="    def _setup(self):\n        setattr()\n\n"),
                                  "setattr with a computed name"),
    # A method's return value stored by other code: the buffer itself, or a
    # value a test on the buffer chose (R1, through the method's return).
    "method-returns-the-buffer-into-an-attribute": (dict(
        body="    def _get(self):\n        return self.topk_indices_buffer\n\n"
             "    def _setup(self):\n        self._alias = self._get()\n\n",
        warmup=("x = self._alias.shape",)),
        "reads .shape of a value derived from topk_indices_buffer"),
    "method-returns-a-buffer-test-into-an-attribute": (dict(
        body="    def _get(self):\n        return 0 if self.topk_indices_buffer is None else 1\n\n"
             "    def _setup(self):\n        self._flag = self._get()\n\n",
        warmup=("assert self._flag == 1",)),
        "hands a value derived from topk_indices_buffer to a comparison"),
    # What other code stores as the buffer with setattr is the buffer.
    "setattr-stores-a-parameter-as-the-buffer": (dict(
        body="    def _setup(self, buf):\n        setattr(self, 'topk_indices_buffer', buf)\n"
             "        self._b = buf\n\n",
        warmup=("x = self._b.shape",)),
        "reads .shape of a value derived from topk_indices_buffer"),
    "subscript-of-module-code": (dict(
        top="def _make():\n    return (0,)\n\n\n_T = _make()[0]\n\n\n"),
        "_T is assigned a value that is not a constant"),
    "module-function-under-a-module-decorator": (dict(
        top="def _deco(f):\n    return f\n\n\n@_deco\ndef _helper(layer):\n    return 0\n\n\n"),
        "_helper has a decorator the walk cannot see"),
    "module-level-lambda": (dict(
        top="_F = lambda layer: layer.topk_indices_buffer.shape\n\n\n", warmup=("_F(self)",)),
        "_F is assigned a value that is not a constant"),
    # A lambda called where it is written: its first parameter is the first
    # argument (here the buffer, appended to a list the warmup reads).
    "lambda-called-at-once-stores-its-first-argument": (dict(
        body="    def _setup(self):\n        self._store = []\n"
             "        (lambda a, b: self._store.append(a))(self.topk_indices_buffer, 0)\n\n",
        warmup=("x = self._store[0].shape",)),
        "subscripts a value derived from topk_indices_buffer"),
    # Held-out mutations of as_loaded.py and aliases.py that passed every
    # test (benchmarks/results/mutation-score/heldout-2026-12-05e-as_loaded-aliases.json).
    "walrus-in-a-default-rebinds-a-module-name": (dict(
        after="def _helper(x=(round_up := lambda a, b: a // 0)):\n    return x\n"),
        "a default argument of _helper runs code"),
    "the-buffer-stored-into-a-dict-reached-through-next": (dict(
        body="    def _setup(self):\n        self._h = {}\n        h = next(iter([self._h]))\n"
             "        h['k'] = self.topk_indices_buffer\n\n",
        warmup=("x = self._h['k'].shape",)),
        "subscripts a value derived from topk_indices_buffer"),
    "the-buffer-stored-by-a-list-target": (dict(
        body="    def _setup(self):\n        [self._topk, self._x] = self.topk_indices_buffer, 0\n\n",
        warmup=("x = self._topk.shape",)),
        "reads .shape of a value derived from topk_indices_buffer"),
    "the-buffer-bound-by-a-walrus-then-stored": (dict(
        body="    def _setup(self):\n        _ = (y := self.topk_indices_buffer)\n        self._topk = y\n\n",
        warmup=("x = self._topk.shape",)),
        "reads .shape of a value derived from topk_indices_buffer"),
    "the-buffer-read-by-getattr-then-stored": (dict(
        body="    def _setup(self):\n        self._topk = getattr(self, 'topk_indices_buffer')\n\n",
        warmup=("x = self._topk.shape",)),
        "reads .shape of a value derived from topk_indices_buffer"),
    # Annotated, a module constant is bound as any other: bound again after
    # the class (to no ratio), it is what the warmup reads.
    "annotated-constant-bound-again": (dict(
        top="_SWA: tuple = (0, 1)\n\n\n", after="_SWA: tuple = ()\n",
        swa_test="self.compress_ratio in _SWA"), "the module binds _SWA again"),
    # A chained assignment in the class body rebinds a method unseen.
    "chained-assignment-in-the-class-body": (dict(body="    _unused = _prepare = None\n\n"),
                                             "assigns something other than one name"),
    # A module function run at import makes the value: not a constant,
    # whatever it returns.
    "module-constant-made-by-a-module-function": (dict(
        top="def _make(*ratios):\n    return ratios\n\n\n_SWA = _make(0, 1)\n\n\n",
        swa_test="self.compress_ratio in _SWA"), "is assigned a value that is not a constant"),
    # Statements of the class body that bind names the walk does not follow.
    "loop-in-the-class-body": (dict(body="    for _r in (0, 1):\n        pass\n\n"),
                               "body holds a For statement"),
    "augmented-assignment-in-the-class-body": (dict(body="    _n = 0\n    _n += 1\n\n"),
                                               "body holds a AugAssign statement"),
    # Bases Python cannot order: the module does not import at all.
    "bases-that-cannot-be-ordered": (dict(
        top="class _A:\n    pass\n\n\nclass _B(_A):\n    pass\n\n\n", bases="_A, _B, "),
        "bases cannot be ordered"),
    # Thirty-two classes of the module deep is the most the walk orders.
    # A module-level `if` other than TYPE_CHECKING runs its imports at import.
    "imports-under-another-module-level-test": (dict(
        top="_DEBUG = False\n\nif _DEBUG:\n    import einops\n\n\n"), "a module-level If statement"),
    # Reflection: a computed getattr may reach any special attribute
    # (``__globals__``, ``__defaults__``), a constant one names it, and
    # functools' copiers write ``__code__`` and ``__defaults__``.
    "getattr-with-a-computed-name": (dict(
        body="    def _read(self, name):\n        return getattr(self, name)\n\n"),
        "getattr with a computed name"),
    "getattr-of-a-special-attribute": (dict(
        body="    def _setup(self):\n        getattr(_probe, '__globals__')['_LIMIT'] = 0\n\n",
        top="_LIMIT = 1\n\n\ndef _probe():\n    return 1\n\n\n"),
        "getattr of the special attribute __globals__"),
    "update-wrapper-copying-code": (dict(
        top="import functools\n\n\ndef _g():\n    return 1\n\n\n",
        body="    def _setup(self):\n        functools.update_wrapper(_g, self._prepare, "
             "assigned=('__code__',), updated=())\n\n"),
        "uses update_wrapper"),
    "setattr-with-one-argument": (dict(body="    def _unused(self):\n        setattr(self)\n\n"),
                                  "setattr with a computed name"),
    "imports-under-a-module-level-test-named-before-type-checking": (dict(
        top="DEBUG = False\n\nif DEBUG:\n    import einops\n\n\n"), "a module-level If statement"),
    "imports-under-an-attribute-test-sorting-before-type-checking": (dict(
        top="import typing\n\nif typing.A_FLAG:\n    import einops\n\n\n"), "a module-level If statement"),
    "imports-under-an-attribute-test-sorting-after-type-checking": (dict(
        top="if torch.version:\n    import einops\n\n\n"), "a module-level If statement"),
    "another-class-sorting-before-it-with-a-base-that-runs-module-code": (dict(
        top="def _mk():\n    return object\n\n\nclass Aux(_mk()):\n    pass\n\n\n"),
        "a base or keyword of Aux runs code"),
    "dict-unpacking-in-a-module-constant": (dict(top="_A = {0: 1}\n_B = {**_A}\n\n\n"),
                                            "is assigned a value that is not a constant"),
    "module-function-as-a-dict-key": (dict(top="def _key():\n    return 0\n\n\n_B = {_key(): 1}\n\n\n"),
                                      "is assigned a value that is not a constant"),
    "getattr-with-one-argument": (dict(body="    def _unused(self):\n        getattr(self)\n\n"),
                                  "getattr with a computed name"),
    # Values and decorators that run code at import: a builtin other than
    # tuple/frozenset (an iterator is state), module code inside a union, a
    # keyword argument or a decorator's arguments, a builtin as a decorator.
    "a-module-iterator-made-by-a-builtin": (dict(top="_IT = iter((0, 1))\n\n\n"),
                                            "_IT is assigned a value that is not a constant"),
    "a-union-with-a-module-function-call": (dict(
        top="def _kind():\n    return int\n\n\n_T = torch.Tensor | _kind()\n\n\n"),
        "_T is assigned a value that is not a constant"),
    "an-imported-call-with-a-keyword-running-module-code": (dict(
        top="from torch import device\n\n\ndef _mk():\n    return 'cpu'\n\n\n_CPU = device(type=_mk())\n\n\n"),
        "_CPU is assigned a value that is not a constant"),
    "a-builtin-decorator-on-a-member": (dict(body="    @print\n    def _unused(self):\n        return None\n\n"),
                                        "_unused has a decorator the walk cannot see"),
    "a-decorator-call-running-module-code-on-another-class": (dict(
        top="from functools import lru_cache\n\n\ndef _size():\n    return 1\n\n\n"
            "class _Cache:\n    @lru_cache(maxsize=_size())\n    def _f(self):\n        return 0\n\n\n"),
        "_f has a decorator the walk cannot see"),
    "bases-thirty-three-deep": (dict(top=_chain("_M", 33), bases="_M0, "), "bases nest too deep"),
    "import-outside-the-allow-list-after-a-bare-annotation": (dict(top="_WIDTH: int\nimport sys\n\n\n"),
                                                              "imports sys"),
    # M3 reads every statement of the body, those after a `pass` too.
    "buffer-at-class-level-after-a-pass": (dict(body="    pass\n    topk_indices_buffer = None\n\n"),
                                           "defines topk_indices_buffer at class level"),
    "buffer-at-class-level-after-an-annotation": (dict(
        body="    window_size: int\n    topk_indices_buffer = None\n\n"),
        "defines topk_indices_buffer at class level"),
    # A decorator on a member runs at class creation (and may leave a
    # descriptor that acts on the class), called by the warmup or not.
    "unseen-decorator-on-a-member-the-warmup-does-not-call": (dict(
        body="    @torch.compiler.disable\n    def _unused(self):\n        return None\n\n"),
        "_unused has a decorator the walk cannot see"),
    # (2026-12-07 evening, a held-out review) A class body looks names up
    # in itself first: a member named like a builtin or a module name
    # changes what the body's decorators after it mean.
    "a-member-named-property": (dict(body="    def property(fn):\n        return fn\n\n"),
                                "binds property, the name of a builtin"),
    "a-member-named-like-an-imported-decorator": (dict(
        top="from functools import cached_property\n\n\n",
        body="    cached_property = torch.no_grad()\n\n"),
        "binds cached_property, a name the module binds"),
    "another-class-binds-a-builtin-name": (dict(
        top="class _Mix:\n    staticmethod: object = torch.no_grad()\n\n\n"),
        "binds staticmethod, the name of a builtin"),
    # Special module names, by any binding: a class or a function named
    # __builtins__ becomes every later function's builtins.
    "a-class-named-builtins": (dict(top="class __builtins__:\n    pass\n\n\n"),
                               "binds the special name __builtins__"),
    "a-function-named-getattr": (dict(top="def __getattr__(name):\n    return 0\n\n\n"),
                                 "binds the special name __getattr__"),
    "an-import-as-builtins": (dict(top="import torch as __builtins__\n\n\n"),
                              "binds the special name __builtins__"),
    "the-builtins-read-by-name": (dict(warmup=("x = __builtins__",)),
                                  "uses the special name __builtins__"),
    # The standard library's modules reached through an allowed package
    # are imported all the same; frames' attributes reach the layer.
    "sys-as-an-attribute-of-torch": (dict(warmup=("x = torch.sys.maxsize",)),
                                     "torch.sys is the module sys, which is not on the allow-list"),
    "sys-imported-from-typing": (dict(top="from typing import sys as _s\n\n\n"),
                                 "typing.sys is the module sys, which is not on the allow-list"),
    # (by its name, where the package is not loaded to be read)
    "sys-imported-from-a-package-not-loaded": (dict(top="from flashinfer import sys as _s\n\n\n"),
                                               "reaches sys, a module of the standard library"),
    "builtins-through-a-local-alias": (dict(warmup=("_m = q", "x = _m.builtins")),
                                       "reaches builtins, a module of the standard library"),
    "torch-read-as-a-value": (dict(warmup=("_m = torch",)), "reads the module torch as a value"),
    "inspect-in-a-dotted-import": (dict(top="import vllm.inspect as _vi\n\n\n"),
                                   "reaches inspect, a module of the standard library"),
    "frame-locals-of-logging-currentframe": (dict(
        top="import logging\n\n\n", warmup=("x = logging.currentframe()",)),
        "logging.currentframe is logging.currentframe, which reaches frames"),
    "frame-locals-of-anything": (dict(warmup=("x = q.f_locals",)),
                                 "reads f_locals, which reaches a running function's frame"),
    "frame-back-by-getattr": (dict(warmup=("x = getattr(q, 'f_back', None)",)),
                              "reads f_back, which reaches a running function's frame"),
    # Python's reflection under another name (found by what it is), by
    # its own name re-exported, or by a string ``str.format`` follows.
    "the-builtins-module-as-enum-keeps-it": (dict(top="import enum\n\n\n", warmup=("x = enum.bltns",)),
                                             "enum.bltns is the module builtins"),
    "the-same-beside-a-parameter-named-enum": (dict(
        top="import enum\n\n\ndef _h(enum):\n    return enum\n\n\n", warmup=("x = enum.bltns",)),
        "enum.bltns is the module builtins"),
    "sys-under-a-private-name-of-collections": (dict(
        top="import collections\n\n\n", warmup=("x = collections._sys",)),
        "collections._sys is the module sys"),
    "import-module-re-exported": (dict(top="from functools import import_module\n\n\n"),
                                  "names import_module"),
    "attrgetter-by-its-name": (dict(warmup=("x = torch.attrgetter",)), "names attrgetter"),
    "eval-as-an-attribute": (dict(warmup=("x = q.eval",)), "names eval"),
    "a-module-read-as-a-value": (dict(top="import collections\n\n\n",
                                      warmup=("x = getattr(collections, 'abc')",)),
                                 "reads the module collections as a value"),
    "a-format-string-reading-an-attribute": (dict(warmup=("x = '{0.shape}'.format(q)",)),
                                             "a format string that reads attributes"),
    "format-of-a-string-built-at-run-time": (dict(warmup=("x = ('{0' + '}').format(q)",)),
                                             "formats a string the walk cannot read"),
    "a-private-name-of-a-call-result": (dict(warmup=("x = q.float()._version",)),
                                        "a private name of what a call or an item gave"),
    "a-private-module-of-torch": (dict(top="from torch import _utils as _u\n\n\n"),
                                  "is the private module torch._utils"),
    "a-private-module-in-a-chain": (dict(warmup=("x = torch._jit_internal.FunctionModifiers",)),
                                    "is the private module torch._jit_internal"),
    "a-private-module-imported-by-path": (dict(top="from vllm._custom_ops import ScalarType\n\n\n"),
                                          "imports the private module vllm._custom_ops"),
    "a-lazy-module-loader": (dict(top="from vllm.utils import import_utils as _iu\n\n\n",
                                  warmup=("x = _iu.LazyLoader",)),
                             "_iu.LazyLoader makes modules"),
    "a-string-importer-by-its-name": (dict(top="from flashinfer import _import_dotted_name\n\n\n"),
                                      "names _import_dotted_name"),
    "format-reached-by-getattr": (dict(warmup=("x = getattr('{' + '}', 'format')",)),
                                  "formats a string the walk cannot read"),
    "vllms-qualname-importer": (dict(top="from vllm.utils.import_utils import resolve_obj_by_qualname\n\n\n"),
                                "names resolve_obj_by_qualname"),
    "a-standard-library-submodule-of-an-allowed-package": (dict(top="import logging.config\n\n\n"),
                                                           "the module imports logging.config"),
    "an-import-in-the-warmup-outside-the-allow-list": (dict(warmup=("import yaml_outside",)),
                                                       "the module imports yaml_outside"),
    "a-name-an-import-time-call-made-called-at-import": (dict(
        top="_dev = torch.device('cpu')\n_again = _dev('cpu')\n\n\n"),
        "_again is assigned a value that is not a constant or an imported name"),
    # ``typing.get_type_hints`` evaluates annotations, strings included.
    "an-annotation-string-reaching-sys": (dict(
        top="def _f(x: 'torch.sys.maxsize'):\n    pass\n\n\n"),
        "reaches sys, a module of the standard library"),
    "a-deferred-annotation-calling-module-code": (dict(
        top="from __future__ import annotations\n\n\ndef _g():\n    return int\n\n\n"
            "def _f(x: _g()):\n    pass\n\n\n"),
        "an annotation runs code"),
}


@pytest.mark.parametrize("shape", sorted(NOT_SAFE))
def test_module_shapes_that_may_crash_are_never_safe(stock, shape):
    kwargs, reason = NOT_SAFE[shape]
    text = build(stock, **kwargs)
    if shape == "mixin-after-an-imported-base":  # the mixin after vLLM's base
        text = text.replace(ANCHOR + "DeepseekV4Attention)", ANCHOR + "DeepseekV4Attention, _Mixin)")
    result = classify_source(text)
    assert result.verdict is Verdict.UNKNOWN and reason in result.reason, result.reason


# Plain spellings of the fix: read fixed (on the affected base: affected).
PLAIN = {
    "set-literal": dict(swa_test="self.compress_ratio in {0, 1}"),
    "module-constant-tuple": dict(top="_SWA_ONLY_RATIOS = (0, 1)\n\n\n",
                                  swa_test="self.compress_ratio in _SWA_ONLY_RATIOS"),
    "module-constant-frozenset": dict(top="_SWA = frozenset({0, 1})\n\n\n",
                                      swa_test="self.compress_ratio in _SWA"),
    "a-module-constant-naming-a-class-sorting-before-it": dict(
        top="class Aux:\n    pass\n\n\n_KIND = Aux\n\n\n"),
    "a-module-constant-naming-a-class-sorting-after-it": dict(
        top="class _Aux:\n    pass\n\n\n_KIND = _Aux\n\n\n"),
    "type-checking-imports": dict(top="if TYPE_CHECKING:\n    from vllm.config import VllmConfig\n\n\n"),
    "logger": dict(top="from vllm.logger import init_logger\n\nlogger = init_logger(__name__)\n\n\n"),
    "for-else": dict(warmup=("for _r in (0, 1):", "    if self.compress_ratio == _r:", "        break",
                             "else:", "    _r = None")),
    "mixin-before-the-imported-base": dict(
        top="class _Mixin:\n    def _ready(self):\n        return self.compress_ratio <= 1\n\n\n",
        bases="_Mixin, ", warmup=("x = self._ready()",)),
    "default-argument-of-the-ratio": dict(warmup=("_f = lambda r=self.compress_ratio: r", "x = _f()")),
    "property-helper": dict(body="    @property\n    def _swa(self):\n        return self.compress_ratio <= 1\n\n",
                            swa_test="self._swa"),
    # Module constants the walk computes: annotated, empty, negative, from
    # another constant, bound by a chained assignment (each name), beside a
    # value computed by an imported function (not a constant, never read).
    "annotated-module-constant": dict(top="_SWA: tuple = (0, 1)\n\n\n",
                                      swa_test="self.compress_ratio in _SWA"),
    "empty-frozenset-constant": dict(top="_NONE = frozenset()\n\n\n",
                                     swa_test="self.compress_ratio <= 1 and self.compress_ratio not in _NONE"),
    "negative-constant": dict(top="_NO_RATIO = -1\n\n\n",
                              swa_test="self.compress_ratio <= 1 and self.compress_ratio != _NO_RATIO"),
    "constant-from-a-constant": dict(top="_ONE = 1\n_MINUS_ONE = -_ONE\n\n\n",
                                     swa_test="self.compress_ratio <= 1 and self.compress_ratio != _MINUS_ONE"),
    "chained-constant": dict(top="_SWA = _SWA_ONLY_RATIOS = (0, 1)\n\n\n",
                             swa_test="self.compress_ratio in _SWA"),
    "chained-constant-second-name": dict(top="_SWA_ONLY_RATIOS = _SWA = (0, 1)\n\n\n",
                                         swa_test="self.compress_ratio in _SWA"),
    "value-of-an-imported-call": dict(top="from torch import device\n\n_CPU = device('cpu')\n\n\n"),
    "relative-import": dict(top="from . import ops  # noqa: F401\n\n\n"),
    "constant-after-a-computed-value": dict(top="from torch import device\n\n_CPU = device('cpu')\n_SWA = (0, 1)\n\n\n",
                                            swa_test="self.compress_ratio in _SWA"),
    "union-of-imported-names": dict(top="_T = torch.Tensor | None\n\n\n"),
    "bases-twenty-deep": dict(top=_chain("_M", 20), bases="_M0, "),
    # Annotations without a value declare what __init__ sets: no member.
    "annotation-only-attributes": dict(body="    window_size: int\n    max_num_batched_tokens: int\n\n"),
    # A try whose body calls module code that never touches the buffer: its
    # handler's store is not chosen by the buffer.
    "try-around-module-code-that-does-not-touch-the-buffer": dict(
        body="    def _setup(self):\n        try:\n            self._prepare()\n"
             "        except Exception:\n            self._flag = 1\n\n",
        warmup=("assert self._flag == 1",)),
    "mixin-with-a-property": dict(
        top="class _Mixin:\n    @property\n    def _ready(self):\n        return self.compress_ratio <= 1\n\n\n",
        bases="_Mixin, ", warmup=("x = self._ready",)),
    # A table of constants the warmup does not read.
    "module-constant-dict": dict(top="_TOPK_BY_RATIO = {0: 0, 1: 0}\n\n\n"),
    "bases-thirty-two-deep": dict(top=_chain("_M", 32), bases="_M0, "),
    "type-checking-read-off-typing": dict(
        top="import typing\n\nif typing.TYPE_CHECKING:\n    from vllm.config import ModelConfig\n\n\n"),
    # Code that would raise if it ran, in a method nothing calls.
    "setattr-without-a-value-in-a-method-never-called": dict(
        body="    def _unused(self):\n        setattr(self, '_x')\n\n"),
    "module-all": dict(top="__all__ = ['DeepseekV4FlashMLAAttention']\n\n\n"),
    # A method without parameters (called on the class) before one storing
    # on its own instance.
    "a-method-without-parameters-before-one-that-stores": dict(
        body="    def _nothing():\n        return None\n\n    def _setup(self):\n        self._ready = True\n\n"),
    "an-imported-decorator-on-another-class": dict(
        top="from functools import lru_cache\n\n\nclass _Cache:\n    @lru_cache(maxsize=None)\n"
            "    def _f(self):\n        return 0\n\n\n"),
    # Forward references and literal strings in annotations are no reach
    # into Python's machinery.
    "string-annotations": dict(
        top="from typing import Literal\n\n\ndef _f(x: 'torch.Tensor | None', "
            "k: Literal['fp8-e4m3', 'bf16'] = 'bf16') -> 'int':\n    return 0\n\n\n"),
}


@pytest.mark.parametrize("shape", sorted(PLAIN))
def test_plain_spellings_read_fixed(stock, shape):
    result = classify_source(build(stock, **PLAIN[shape]))
    assert result.verdict is Verdict.FIXED, result.reason
    affected = classify_source(build(stock, fixed=False, **PLAIN[shape]))
    assert affected.verdict is Verdict.AFFECTED, affected.reason


def test_the_walk_records_what_it_assumed(stock):
    text = build(stock, top=("_SWA = (0, 1)\n\n\ndef _probe(layer):\n    return 0\n\n\n"),
                 swa_test="self.compress_ratio in _SWA", warmup=("_probe(self)",))
    assumes = set(classify_source(text).assumes)
    assert {("member", "forward_mqa", "DeepseekV4FlashMLAAttention"),
            ("member", "_prepare", "DeepseekV4FlashMLAAttention"),
            ("function", "_probe"), ("constant", "_SWA", (0, 1))} <= assumes


# --- the runtime checks the assumptions on the loaded objects -----------------------


def _load(text: str, tmp_path):
    name = f"flashmla_as_loaded_{next(_n)}"
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


AFFECTED_WITH_HELPERS = dict(
    fixed=False,
    top="_SWA = (0, 1)\n\n\ndef _probe(layer):\n    return 0\n\n\n",
    warmup=("_probe(self)", "x = self.compress_ratio in _SWA"),
    body="    LIMIT = 4\n\n    def _limit(self):\n        return self.LIMIT\n\n",
)


def _decide(module, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    instrumentation._decide(module)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    return patch.is_patched(module), warnings


def test_loaded_module_as_its_source_says_is_patched(stock, tmp_path, caplog, cpu_workspace):
    text = build(stock, **{**AFFECTED_WITH_HELPERS, "warmup": (*AFFECTED_WITH_HELPERS["warmup"], "y = self._limit()")})
    assert classify_source(text).verdict is Verdict.AFFECTED
    module = _load(text, tmp_path)
    patched, warnings = _decide(module, caplog)
    assert patched and warnings == []


@pytest.mark.parametrize("change, named", [
    (lambda m: setattr(m.DeepseekV4FlashMLAAttention, "_prepare", lambda self: 1), "_prepare"),
    (lambda m: setattr(m, "_probe", lambda layer: 1), "_probe"),
    (lambda m: setattr(m, "_SWA", (0, 1, 2)), "_SWA"),
    (lambda m: setattr(m.DeepseekV4FlashMLAAttention, "LIMIT", 5), "LIMIT"),
    (lambda m: setattr(m.DeepseekV4FlashMLAAttention, "topk_indices_buffer",
                       property(lambda self: None, lambda self, v: None)), "topk_indices_buffer"),
    (lambda m: setattr(m.DeepseekV4FlashMLAAttention, "compress_ratio",
                       property(lambda self: 1, lambda self, v: None)), "compress_ratio"),
    (lambda m: setattr(m.DeepseekV4FlashMLAAttention, "__getattribute__",
                       lambda self, name: object.__getattribute__(self, name)), "__getattribute__"),
])
def test_loaded_objects_that_differ_from_the_source_are_left_alone(
    stock, tmp_path, caplog, cpu_workspace, change, named
):
    text = build(stock, **{**AFFECTED_WITH_HELPERS, "warmup": (*AFFECTED_WITH_HELPERS["warmup"], "y = self._limit()")})
    module = _load(text, tmp_path)
    change(module)  # what other code did to the module after its import
    patched, warnings = _decide(module, caplog)
    assert not patched
    assert len(warnings) == 1 and named in warnings[0], warnings


def test_a_metaclass_of_its_own_is_not_assumed_plain(stock, tmp_path):
    module = _load(build(stock, fixed=False), tmp_path)
    cls = module.DeepseekV4FlashMLAAttention
    meta = type("Meta", (type(cls),), {})
    other = meta(cls.__name__, (cls,), {})
    source = module.__loader__.get_source(module.__name__)
    result = classify_source(source)
    problem = loaded_code.check_assumptions(module, other, source, module.__file__, result.assumes)
    assert problem and "metaclass" in problem
    assert loaded_code.check_assumptions(module, cls, source, module.__file__, result.assumes) is None


def test_affected_code_without_the_warmup_branch_shape_is_refused_not_raised(
    stock, tmp_path, caplog, cpu_workspace
):
    from dspark_attn_plugin import status

    text = variants._replace_once(
        stock, "        if attn_metadata is None:\n",
        "        if attn_metadata is None and self.topk_indices_buffer is not None:\n")
    path = tmp_path / "flashmla.py"
    path.write_text(text)
    verdict, reason = status._classify_file(str(tmp_path), str(path))
    # (The warmup branch's code, skipped for lack of the buffer, changes
    # objects the rest reads: unknown, before any crash after it is certain.)
    assert verdict is Verdict.UNKNOWN, reason
    module = _load(text, tmp_path)
    patched, warnings = _decide(module, caplog)
    assert not patched and len(warnings) == 1


def test_a_module_whose_source_cannot_be_read_is_left_alone(stock, tmp_path, caplog, cpu_workspace):
    module = _load(build(stock, fixed=False), tmp_path)
    module.__name__ = "vllm.models.deepseek_v4.nvidia.not_this_one"
    patched, warnings = _decide(module, caplog)
    assert not patched and len(warnings) == 1 and "cannot read the source" in warnings[0]


def test_a_local_named_like_a_builtin_exception_does_not_catch_it(stock):
    """``except AssertionError:`` where a local ``AssertionError`` is
    ValueError: not the builtin, so the fix is not read into it; the walk
    does not know which class the local holds, so the crash is not certain
    either (``unknown``; Python lets the assertion go on)."""
    text = build(stock, warmup=("AssertionError = ValueError", "try:",
                                "    assert self.topk_indices_buffer is not None",
                                "except AssertionError:", "    pass"))
    assert classify_source(text).verdict is Verdict.UNKNOWN
    control = text.replace("            AssertionError = ValueError\n", "")
    assert classify_source(control).verdict is Verdict.FIXED


def test_a_module_defining_the_class_twice_is_left_alone_for_that_reason(
    stock, tmp_path, caplog, cpu_workspace
):
    """A fork that appends a second ``class DeepseekV4FlashMLAAttention``
    (upstream's fix, say) runs the last one. The classifier reads the class
    Python uses, and the runtime's one warning names the rebinding, not a
    file changed since import (which it would if the first class were read)."""
    fixed = build(stock)
    affected_class = stock[stock.index("class DeepseekV4FlashMLAAttention("):]
    text = fixed + "\n\n" + affected_class
    module = _load(text, tmp_path)
    result = classify_source(text)
    assert result.verdict is Verdict.UNKNOWN and "binds DeepseekV4FlashMLAAttention again" in result.reason
    assert result.method_line == module.DeepseekV4FlashMLAAttention.forward_mqa.__code__.co_firstlineno
    patched, warnings = _decide(module, caplog)
    assert not patched
    assert len(warnings) == 1 and "binds DeepseekV4FlashMLAAttention again" in warnings[0], warnings
    assert "changed since import" not in warnings[0]


@pytest.mark.parametrize("imported", [
    "from torch import no_grad",
    "from torch.autograd import no_grad",
    "from contextlib import nullcontext as no_grad",
])
def test_a_context_manager_imported_from_torch_or_contextlib_swallows_nothing(stock, imported):
    """``with no_grad():`` around the buffer assertion, ``no_grad`` imported
    from torch or contextlib: the assertion fails on SWA-only layers
    (`affected`, which the runtime can patch), not `unknown`."""
    warmup = ("with no_grad():", "    assert self.topk_indices_buffer is not None")
    result = classify_source(build(stock, fixed=False, top=f"{imported}\n\n\n", warmup=warmup))
    if " as " in imported:  # imported under another name: not trusted
        assert result.verdict is Verdict.UNKNOWN, result.reason
    else:
        assert result.verdict is Verdict.AFFECTED, result.reason
    # The same name defined by the module: it may swallow the failure (this
    # one does: run, the warmup passes), so the walk cannot say `affected`.
    own = "import contextlib\n\n\ndef no_grad():\n    return contextlib.suppress(AssertionError)\n\n\n"
    result = classify_source(build(stock, fixed=False, top=own, warmup=warmup))
    assert result.verdict is Verdict.UNKNOWN and "context manager" in result.reason, result.reason


def test_a_list_inside_a_module_tuple_is_no_constant(stock):
    """``tuple([[]])`` holds a list any code may fill (the layer's
    ``__init__``, another module): a ratio test on it is not decided."""
    text = build(stock, top="_SPARSE = tuple([[]])\n\n\n",
                 swa_test="self.compress_ratio <= 1 and self.compress_ratio not in _SPARSE[0]")
    result = classify_source(text)
    assert result.verdict is Verdict.UNKNOWN, result.reason


@pytest.mark.parametrize("fixed", [True, False])
def test_a_chained_module_constant_is_checked_on_the_loaded_module(stock, tmp_path, caplog, cpu_workspace, fixed):
    """``_SWA = _SWA_ONLY_RATIOS = (0, 1)``: the runtime keeps what the file
    says (the affected base patched, the fixed one left alone, no warning),
    and a loaded module whose constant changed after import is left alone."""
    text = build(stock, fixed=fixed, top="_SWA = _SWA_ONLY_RATIOS = (0, 1)\n\n\n",
                 swa_test="self.compress_ratio in _SWA")
    module = _load(text, tmp_path)
    patched, warnings = _decide(module, caplog)
    assert patched is not fixed and warnings == []
    if patched:
        patch.remove(module)
    module._SWA = (0, 1, 4)
    caplog.clear()
    patched, warnings = _decide(module, caplog)
    assert not patched and len(warnings) == 1 and "_SWA" in warnings[0], warnings


def test_import_torch_dot_submodule_binds_torch_whose_context_managers_are_trusted(stock):
    """``import torch.nn`` binds ``torch`` (not ``nn``): ``with
    torch.no_grad():`` around the buffer assertion reads `affected`."""
    text = build(stock, fixed=False, warmup=("with torch.no_grad():",
                                             "    assert self.topk_indices_buffer is not None"))
    text = variants._replace_once(text, "\nimport torch\n", "\nimport torch.nn\n")
    result = classify_source(text)
    assert result.verdict is Verdict.AFFECTED, result.reason


def test_a_context_manager_of_another_package_may_swallow(stock):
    """``import vllm`` then ``with vllm.utils.no_grad():`` around the assertion:
    a name like torch's from another package is not torch's; only torch's
    and contextlib's are trusted not to take the failure."""
    text = build(stock, fixed=False, top="import vllm\n\n\n",
                 warmup=("with vllm.utils.no_grad():",
                         "    assert self.topk_indices_buffer is not None"))
    result = classify_source(text)
    assert result.verdict is Verdict.UNKNOWN and "context manager" in result.reason, result.reason


def test_a_module_name_bound_to_an_imported_value_is_no_constant(stock):
    """``_FULL = VLLM_DSV4_WARMUP_FULL_TOPK`` (an imported flag) gating the
    SWA-only arm: its value is the environment's, not the file's. Where it
    is true, SWA-only layers take the sparse arm and assert the buffer."""
    text = build(stock, top=("from vllm.envs import VLLM_DSV4_WARMUP_FULL_TOPK\n\n"
                             "_WARMUP_FULL_TOPK = VLLM_DSV4_WARMUP_FULL_TOPK\n\n\n"),
                 swa_test="self.compress_ratio <= 1 and not _WARMUP_FULL_TOPK")
    result = classify_source(text)
    assert result.verdict is Verdict.UNKNOWN, result.reason


@pytest.mark.parametrize("body", [
    "return 0 if swa_only else layer.topk_indices_buffer.shape[-1]",
    "assert layer.topk_indices_buffer is not None\n    return 0",
])
def test_an_async_module_helper_is_not_walked_as_a_call(stock, body):
    """Calling an ``async def`` runs none of its body (it returns a
    coroutine): the walk cannot read it as if it ran, either way."""
    text = build(stock, top=f"async def _warmup_top_k(layer, swa_only):\n    {body}\n\n\n",
                 warmup=("x = _warmup_top_k(self, self.compress_ratio <= 1)",))
    result = classify_source(text)
    assert result.verdict is Verdict.UNKNOWN, result.reason


def test_a_relative_module_named_like_torch_is_not_torch(stock):
    """``from .torch import no_grad``: the fork's own module, whose
    ``no_grad`` may swallow the assertion's failure: `unknown`."""
    text = build(stock, fixed=False, top="from .torch import no_grad\n\n\n",
                 warmup=("with no_grad():", "    assert self.topk_indices_buffer is not None"))
    result = classify_source(text)
    assert result.verdict is Verdict.UNKNOWN and "context manager" in result.reason, result.reason


def test_a_frozenset_of_two_arguments_is_no_constant(stock):
    """``frozenset((0, 1), ())`` raises TypeError when the module is
    imported: nothing about its warmup is proven."""
    text = build(stock, top="_SWA = frozenset((0, 1), ())\n\n\n", swa_test="self.compress_ratio in _SWA")
    result = classify_source(text)
    assert result.verdict is Verdict.UNKNOWN, result.reason


def test_torch_s_name_imported_under_another_name_does_not_vouch_for_a_module_s_own(stock):
    """``from torch import no_grad as _torch_no_grad`` beside the fork's own
    ``from .compat import no_grad``: ``with no_grad():`` is the fork's, which
    may swallow the assertion's failure: `unknown`."""
    top = "from torch import no_grad as _torch_no_grad\nfrom .compat import no_grad\n\n\n"
    text = build(stock, fixed=False, top=top,
                 warmup=("with no_grad():", "    assert self.topk_indices_buffer is not None"))
    result = classify_source(text)
    assert result.verdict is Verdict.UNKNOWN and "context manager" in result.reason, result.reason


def test_a_list_inside_a_tuple_literal_is_no_constant(stock):
    """``([],)`` as ``tuple([[]])``: the list in it may be filled by any code."""
    text = build(stock, top="_SPARSE = ([],)\n\n\n",
                 swa_test="self.compress_ratio <= 1 and self.compress_ratio not in _SPARSE[0]")
    result = classify_source(text)
    assert result.verdict is Verdict.UNKNOWN, result.reason


@pytest.mark.parametrize("other", ["is_forward_context_available", "create_forward_context"])
def test_another_name_from_forward_context_is_not_get_forward_context(stock, other):
    """Another function of ``vllm.forward_context`` (its name sorting after
    or before ``get_forward_context``), imported beside it: vLLM sets the
    context for the dummy run, so ``is_forward_context_available()`` returns
    True there and the assertion under it runs and fails on SWA-only layers;
    neither call is known to this reading. Read as the forward context, the
    test would be false and the warmup `fixed`."""
    text = build(stock, warmup=(f"if {other}() is True:",
                                "    assert self.topk_indices_buffer is not None"))
    text = variants._replace_once(
        text, "from vllm.forward_context import get_forward_context\n",
        f"from vllm.forward_context import get_forward_context, {other}\n")
    result = classify_source(text)
    assert result.verdict is Verdict.UNKNOWN, result.reason


@pytest.mark.parametrize("source", [
    "from vllm.distributed import get_forward_context",
    "from vllm.forward_context_extras import get_forward_context",
    "from vllm.attention.my_forward_context import get_forward_context",
    "from .forward_context import get_forward_context",
])
def test_get_forward_context_from_anywhere_but_vllm_forward_context_is_not_vllms(stock, source):
    """The walk knows what vLLM's ``get_forward_context`` returns in the
    warmup (a context without attention metadata); a function of that name
    imported from elsewhere may return anything, so the test on it is not
    decided and the steady path, which needs the buffer, may run: never the
    fix's `fixed`."""
    text = variants._replace_once(build(stock),
                                  "from vllm.forward_context import get_forward_context\n",
                                  source + "\n")
    result = classify_source(text)
    assert result.verdict is Verdict.UNKNOWN, result.reason


@pytest.mark.parametrize("handler, verdict", [
    ("LookupError", Verdict.AFFECTED),
    ("KeyError", Verdict.AFFECTED),
    ("ArithmeticError", Verdict.AFFECTED),
    ("NameError", Verdict.AFFECTED),
    ("(TypeError, ValueError)", Verdict.AFFECTED),
    ("AttributeError", Verdict.FIXED),
    ("Exception", Verdict.FIXED),
    ("(KeyError, AttributeError)", Verdict.FIXED),
])
def test_only_a_handler_of_attributeerror_or_a_base_of_it_catches_the_missing_buffer(
        stock, handler, verdict):
    """``None.zero_()`` raises AttributeError: an ``except`` of a class that
    is not AttributeError nor one of its bases lets it through (the warmup
    crashes: `affected`); one that names it or a base catches it."""
    text = build(stock, warmup=("try:", "    self.topk_indices_buffer.zero_()",
                                f"except {handler}:", "    pass"))
    result = classify_source(text)
    assert result.verdict is verdict, result.reason


def test_the_exception_classes_the_walk_knows_have_pythons_bases():
    """Checked against Python's own classes: the walk decides which handler
    catches which exception from this table."""
    import builtins

    from dspark_attn_plugin.warmup_shape.values import _EXC_BASES

    assert "AttributeError" in _EXC_BASES
    for name, base in _EXC_BASES.items():
        assert getattr(builtins, name).__bases__ == (getattr(builtins, base),), name


@pytest.mark.parametrize("wrap", ["if True:", "try:", "def _make():"])
def test_the_class_nested_in_a_module_statement_is_unknown_not_absent(stock, wrap):
    """`absent` (no such class: nothing to judge) reads safe; a class defined
    under an ``if``, a ``try`` or in a function is there but is not what the
    walk can read."""
    at = stock.index(ANCHOR)
    tail = "".join("    " + l if l.strip() else l for l in stock[at:].splitlines(True))
    handler = "except Exception:\n    pass\n" if wrap == "try:" else ""
    text = stock[:at] + wrap + "\n" + tail + handler
    compile(text, "flashmla.py", "exec")
    result = classify_source(text)
    assert result.verdict is Verdict.UNKNOWN, result.reason
    assert "not defined at module level" in result.reason


def test_a_keyword_only_parameter_of_forward_mqa_is_read_as_given(stock):
    """vLLM's fixed method with ``output`` keyword-only reads as the fixed
    method it is (the parameter has a value, as a caller must pass it)."""
    for fixed, verdict in ((True, Verdict.FIXED), (False, Verdict.AFFECTED)):
        text = variants._replace_once(
            build(stock, fixed=fixed),
            "        positions: torch.Tensor,\n        output: torch.Tensor,\n    ) -> None:\n",
            "        positions: torch.Tensor,\n        *,\n        output: torch.Tensor,\n    ) -> None:\n")
        result = classify_source(text)
        assert result.verdict is verdict, result.reason


def test_a_certain_crash_at_one_ratio_is_affected_whatever_the_other_ratio_does(stock):
    """At ``compress_ratio`` 0 the warmup hands the buffer to outside code
    (a doubt); at 1 it calls a method of it, None on a layer without one (a
    crash): an SWA-only layer of ratio 1 crashes, so `affected`."""
    text = build(stock, warmup=("if self.compress_ratio == 0:",
                                "    print(self.topk_indices_buffer)",
                                "else:",
                                "    self.topk_indices_buffer.zero_()"))
    result = classify_source(text)
    assert result.verdict is Verdict.AFFECTED, result.reason
    assert "compress_ratio 1" in result.reason


@pytest.mark.parametrize("warmup, verdict", [
    # 1 == True, but `1 is True` is false: joined, they are neither (read
    # as 1, this warmup was `fixed`, and it crashes where q.dim() is 0).
    (("flag = 1 if q.dim() else True", "if flag is True:",
      "    assert self.topk_indices_buffer is not None"), Verdict.UNKNOWN),
    (("flag = 0 if q.dim() else False", "if flag is False:",
      "    assert self.topk_indices_buffer is not None"), Verdict.UNKNOWN),
    (("flag = (1,) if q.dim() else (True,)", "if flag[0] is True:",
      "    assert self.topk_indices_buffer is not None"), Verdict.UNKNOWN),
    # (str() of a constant is computed; an f-string's is not, so it reads
    # unknown whatever the join does.)
    (("flag = 0.0 if q.dim() else -0.0", "if str(flag) == '-0.0':",
      "    assert self.topk_indices_buffer is not None"), Verdict.UNKNOWN),
    # The class (whose walk value carries no data) is not the constant None.
    (("k = None if q.dim() else DeepseekV4FlashMLAAttention", "if k is not None:",
      "    assert self.topk_indices_buffer is not None"), Verdict.UNKNOWN),
    (("k = type(self) if q.dim() else None", "if k is not None:",
      "    assert self.topk_indices_buffer is not None"), Verdict.UNKNOWN),
    # Equal constants built twice are one value (the SWA-only ratios).
    (("ratios = (0, 1) if q.dim() else (0, 1)", "if self.compress_ratio not in ratios:",
      "    assert self.topk_indices_buffer is not None"), Verdict.FIXED),
    # Bound on one path only: reading it may raise UnboundLocalError.
    (("if q.dim():", "    seen = 1", "seen"), Verdict.UNKNOWN),
    # A constant that a test on the buffer chose, joined with the same
    # constant bound on the other path, is still that constant (0: false).
    (("flag = 0 if self.topk_indices_buffer is None else 0", "if q.dim():", "    flag = 0",
      "if flag:", "    pass"), Verdict.FIXED),
])
def test_values_joined_after_an_undecided_test_are_what_python_would_have(stock, warmup, verdict):
    """Where one path binds one constant and the other path another, the
    walk keeps one value only if Python could not tell them apart."""
    result = classify_source(build(stock, warmup=warmup))
    assert result.verdict is verdict, result.reason


@pytest.mark.parametrize("iterated, says", [
    ("self.topk_indices_buffer", "iterates over None"),
    ("self.compress_ratio", "iterates over a constant of type int"),
])
def test_iterating_what_does_not_iterate_is_named_in_the_reason(stock, iterated, says):
    """The reason is what the WARNING and `status` print."""
    result = classify_source(build(stock, warmup=(f"for _ in {iterated}:", "    pass")))
    assert result.verdict is Verdict.AFFECTED, result.reason
    assert says in result.reason, result.reason


@pytest.mark.parametrize("iterated", ["DeepseekV4FlashMLAAttention", "type(self)"])
def test_iterating_the_layer_class_is_not_read_as_the_missing_buffer(stock, iterated):
    """Iterating the class raises TypeError on every layer, with the buffer
    or without: not vLLM #50615's crash, nothing the fix would cure."""
    result = classify_source(build(stock, warmup=(f"for _ in {iterated}:", "    pass")))
    assert result.verdict is Verdict.UNKNOWN, result.reason
    assert "iterates over None" not in result.reason


def test_where_the_swa_only_ratios_crash_at_two_lines_the_reason_names_ratio_0s(stock):
    """At ``compress_ratio`` 1 the warmup first calls a method of the
    buffer; at 0 it reaches the assertion. The reason, and the line the edit
    is planned on, are those of ratio 0, the first walked."""
    text = build(stock, fixed=False, warmup=("if self.compress_ratio == 1:",
                                             "    self.topk_indices_buffer.zero_()",
                                             "assert self.topk_indices_buffer is not None"))
    result = classify_source(text)
    line = text.splitlines().index(" " * 12 + "assert self.topk_indices_buffer is not None") + 1
    assert result.verdict is Verdict.AFFECTED, result.reason
    assert (result.crash_line, result.reason) == (
        line, f"line {line} fails an assertion on SWA-only layers without "
              "topk_indices_buffer (compress_ratio 0)")


def test_where_the_swa_only_ratios_are_in_doubt_at_two_lines_the_reason_names_ratio_0s(stock):
    """At ``compress_ratio`` 1 the warmup first hands the buffer to outside
    code; at 0 it does so a line later. The reason names ratio 0's."""
    text = build(stock, warmup=("if self.compress_ratio == 1:",
                                "    print(self.topk_indices_buffer)",
                                "print(self.topk_indices_buffer, 0)"))
    result = classify_source(text)
    line = text.splitlines().index(" " * 12 + "print(self.topk_indices_buffer, 0)") + 1
    assert result.verdict is Verdict.UNKNOWN, result.reason
    assert result.reason.startswith(f"line {line} "), result.reason
    assert "(compress_ratio 0)" in result.reason, result.reason


@pytest.mark.parametrize("handler", ["ZeroDivisionError", "ArithmeticError", "Exception"])
def test_an_error_computed_on_constants_is_taken_by_its_own_handler(stock, handler):
    """``1 // 0`` raises ZeroDivisionError; a handler of that class or a
    base of it takes it and the warmup goes on to the fix."""
    text = build(stock, warmup=("try:", "    1 // 0", f"except {handler}:", "    pass"))
    result = classify_source(text)
    assert result.verdict is Verdict.FIXED, result.reason


@pytest.mark.parametrize("warmup", [
    # The class is true, as every class is.
    ("if not type(self):", "    assert self.topk_indices_buffer is not None"),
    # One method on both paths is that method: called, it is followed.
    ("f = self._prepare if q.dim() else self._prepare", "f()"),
])
def test_the_class_is_true_and_one_method_on_both_paths_is_that_method(stock, warmup):
    """Neither warmup touches the buffer as Python runs it: `fixed`."""
    result = classify_source(build(stock, warmup=warmup))
    assert result.verdict is Verdict.FIXED, result.reason


def test_annotations_that_call_module_code_are_unknown_with_or_without_the_future_import(stock):
    """Without ``from __future__ import annotations`` an annotation naming
    a module function runs it when the method is defined; with it, Python
    stores the annotation as a string, which ``typing.get_type_hints``
    evaluates whenever it is called (read fixed until 2026-12-07): unknown
    either way."""
    text = build(stock, top="def _kind():\n    return int\n\n\n",
                 body="    def _typed(self) -> _kind():\n        return None\n\n")
    lazy = classify_source("from __future__ import annotations\n" + text)
    assert lazy.verdict is Verdict.UNKNOWN and "an annotation runs code" in lazy.reason, lazy.reason
    plain = build(stock, body="    def _typed(self) -> 'torch.Tensor | None':\n        return None\n\n")
    assert classify_source("from __future__ import annotations\n" + plain).verdict is Verdict.FIXED
    eager = classify_source(text)
    assert eager.verdict is Verdict.UNKNOWN and "an annotation of _typed runs code" in eager.reason
    # Other features of __future__ (sorting before or after "annotations")
    # leave annotations eager.
    for feature in ("absolute_import", "generator_stop"):
        other = classify_source(f"from __future__ import {feature}\n" + text)
        assert other.verdict is Verdict.UNKNOWN and "an annotation of _typed runs code" in other.reason


def test_a_staticmethod_stored_in_a_loaded_class_is_judged_by_what_it_gives(stock, monkeypatch):
    """A class of an imported package keeping ``__import__`` as a
    ``staticmethod`` (as ``logging.config.BaseConfigurator.importer`` does):
    read off the class it is ``__import__`` itself."""
    import sys
    import types

    fake = types.ModuleType("vllm.dspark_attn_test_kit")

    class Kit:
        load = staticmethod(__import__)

    fake.Kit = Kit
    monkeypatch.setitem(sys.modules, fake.__name__, fake)
    text = build(stock, top=f"from {fake.__name__} import Kit\n\n\n", warmup=("x = Kit.load",))
    result = classify_source(text)
    assert result.verdict is Verdict.UNKNOWN and "Kit.load is builtins.__import__" in result.reason, result.reason


def test_a_dotted_import_read_as_a_module_value_where_the_package_is_not_imported(stock, monkeypatch):
    """``import numpy.linalg`` binds ``numpy``: reading ``numpy`` as a value
    is refused even where the package cannot be looked at (``status``
    reads files in a process that has not imported torch or vLLM; here
    ``numpy`` is hidden from ``sys.modules``). A survivor of the mutation
    tool (2026-12-07 night) took the last part of the name (``linalg``)
    for the name bound, and read this ``fixed``."""
    monkeypatch.delitem(sys.modules, "numpy")
    text = build(stock, top="import numpy.linalg\n\n\n", warmup=("_m = numpy",))
    result = classify_source(text)
    assert result.verdict is Verdict.UNKNOWN and "reads the module numpy as a value" in result.reason, result.reason


def test_an_annotation_string_python_cannot_compile_is_no_code(stock):
    """A string annotation holding a lone surrogate: Python cannot compile
    it (UnicodeEncodeError, a ValueError), so ``typing`` runs no code for
    it; the classifier reads on, and does not fail on it. A survivor of the
    mutation tool (2026-12-07 night) let the ValueError out of the
    classifier."""
    text = build(stock, warmup=('def _z(x: "\\udcff"):', "    pass", "_z(1)"))
    assert "\\udcff" in text
    result = classify_source(text)
    assert result.verdict is Verdict.FIXED, result.reason
