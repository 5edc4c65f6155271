"""Generated variants of the real warmup branch, and their ground truth by execution.

A Hypothesis strategy rewrites the warmup branch of the installed vLLM
0.27.1 ``flashmla.py`` (the affected shape) and of the same source with
vLLM #50693 applied (0.28.0's shape): the assertion and the ``top_k`` line
are replaced by a generated block of tests, assertions, raises, aliases,
walrus, lambdas, methods, properties, ``torch._assert``, conditional
expressions, early returns, ``match`` (on the ratio, on the buffer, on a
test of it), ``try``, ``with``, loops, and (one statement in five)
comprehensions, kept generators, ``*``/``**`` unpacking,
``getattr`` with a default, f-string format specs, ``contextlib.suppress``,
``try``/``finally`` and broad ``except`` clauses; sometimes
``forward_mqa`` is decorated or its steady path gains statements
(``torch._check``, ``super()``, a name-mangled attribute).

``observe`` then executes a variant on synthetic layers (SWA-only with ratio
0 and 1 and no buffer, sparse with and without one) and sets the
classifier's, ``plan_edit``'s, the runtime's and ``status``'s answers
beside what ran. ``problems`` lists every way they disagree with the run.
A failure that the same layer with a buffer also has (a variant that
asserts something false of ``q``, say) is not vLLM #50615's and is left
out: the claim under test is "SWA-only layers do not need the buffer".
Shared by ``test_generated_variants.py`` and ``fuzz_variants.py``.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st

import flashmla_variants as variants

# --- the generator ------------------------------------------------------------------

_BUFFER_TESTS = [
    "self.topk_indices_buffer is not None",
    "self.topk_indices_buffer is None",
    "self.topk_indices_buffer",
    "bool(self.topk_indices_buffer)",
    "getattr(self, 'topk_indices_buffer') is not None",
    "has_buf",
    "(b := self.topk_indices_buffer) is not None",
    "self._has_topk()",
    "self.has_topk",
    "(lambda: self.topk_indices_buffer is not None)()",
]
_RATIO_TESTS = [
    "swa_only",
    "not swa_only",
    "self.compress_ratio <= 1",
    "self.compress_ratio > 1",
    "self.compress_ratio in (0, 1)",
    "self.compress_ratio < 2",
    "not self.compress_ratio > 1",
    "self.compress_ratio == 1",
    "self.compress_ratio == 0",
    "ratio <= 1",
    "1 >= ratio",
]
_OTHER_TESTS = ["q.dim() == 3", "q.dim() == 2", "True", "False"]

_TOPK_EXPRS = [
    "0",
    "self.topk_indices_buffer.shape[-1]",
]


@st.composite
def tests(draw, depth=0):
    atom = st.sampled_from(_BUFFER_TESTS + _RATIO_TESTS + _OTHER_TESTS)
    if depth >= 2:
        return draw(atom)
    kind = draw(st.integers(0, 5))
    if kind <= 2:
        return draw(atom)
    if kind == 3:
        return f"not ({draw(tests(depth + 1))})"
    op = draw(st.sampled_from(["and", "or"]))
    return f"({draw(tests(depth + 1))}) {op} ({draw(tests(depth + 1))})"


@st.composite
def topk_exprs(draw):
    base = st.sampled_from(_TOPK_EXPRS)
    if draw(st.booleans()):
        return draw(base)
    return f"{draw(base)} if {draw(tests())} else {draw(base)}"


def _indent(lines: list[str], n: int = 4) -> list[str]:
    return [" " * n + line for line in lines]


@st.composite
def statements(draw, depth=0):
    """One statement, as lines indented from 0."""
    simple = [
        lambda: [f"assert {draw(tests())}"],
        lambda: [f"assert {draw(tests())}, 'needs the top-k buffer'"],
        lambda: [f"if {draw(tests())}:", "    raise ValueError('no top-k buffer')"],
        lambda: [f"torch._assert({draw(tests())}, 'needs the top-k buffer')"],
        lambda: [f"top_k = {draw(topk_exprs())}"],
        lambda: [f"x = {draw(topk_exprs())}"],
        lambda: ["pass"],
        lambda: ["self._validate()"],
        lambda: ["_check_buffer(self.topk_indices_buffer)"],
        lambda: [f"if {draw(tests())}:", "    output.zero_()", "    return"],
    ]
    if draw(st.integers(0, 4)) == 0:  # one in five: a construct of 2026-12-05 (below)
        pick = draw(st.integers(0, 2 if depth >= 2 else 3))
        if pick == 0:
            return [draw(st.sampled_from(_LATER_STATEMENTS)).format(test=draw(tests()))]
        if pick == 1:
            return [line.format(test=draw(tests())) for line in draw(st.sampled_from(_KEPT_GENERATORS))]
        if pick == 2:
            return [draw(st.sampled_from(_LATER_STATEMENTS)).format(test=draw(tests()))]
        head, tail = draw(st.sampled_from(_LATER_COMPOUNDS))
        deeper = len(head[-1]) - len(head[-1].lstrip(" "))
        return [*head, *_indent(_indent(draw(blocks(depth + 1))), deeper), *tail]
    if depth >= 2:
        return draw(st.sampled_from(simple))()
    kind = draw(st.integers(0, len(simple) + 8))
    if kind < len(simple):
        return simple[kind]()
    body = lambda: _indent(draw(blocks(depth + 1)))  # noqa: E731
    compound = kind - len(simple)
    if compound == 0:
        lines = [f"if {draw(tests())}:", *body()]
        if draw(st.booleans()):
            lines += ["else:", *body()]
        return lines
    if compound == 1:
        return ["for _ in range(1):", *body()]
    if compound == 2:
        return [f"while {draw(tests())}:", *body(), "    break"]
    if compound == 3:
        return ["try:", *body(), "except AssertionError:", "    top_k = 0"]
    if compound == 4:
        return ["with contextlib.nullcontext():", *body()]
    if compound == 5:
        return [
            "match self.compress_ratio:",
            "    case 0 | 1:", *_indent(body()),
            "    case _:", *_indent(body()),
        ]
    if compound == 6:  # the buffer (or a test on it) chooses the case
        return [
            "match self.topk_indices_buffer:",
            "    case None:", *_indent(body()),
            "    case _:", *_indent(body()),
        ]
    if compound == 7:
        return [f"match {draw(tests())}:", "    case True:", *_indent(body())]
    return ["if self.compress_ratio <= 1:", *body(), "else:", *body()]


# Constructs whose reading the classifier learned on 2026-12-05, by bodies run
# in Python: comprehensions (their own scope, filters, kept generators),
# star unpacking, getattr with a default, f-string format specs, `with` that
# may swallow, and `finally` that discards. ``{test}`` is a generated test.
_LATER_STATEMENTS = [
    # Constants that compare equal but that `is` tells apart, joined by an
    # undecided test: one value only if Python could not tell them apart.
    "x = self.topk_indices_buffer.shape if (1 if {test} else True) is True else 0",
    "x = self.topk_indices_buffer.shape if (0 if {test} else False) is False else 0",
    "x = self.topk_indices_buffer.shape if ((1,) if {test} else (True,))[0] is True else 0",
    "x = [e for e in (self.topk_indices_buffer,) if e is not None]",
    "x = [e.shape for e in (self.topk_indices_buffer,)]",
    "x = [e.shape for e in (self.topk_indices_buffer,) if {test}]",
    "x = [0 for _ in range(1) if {test}]",
    "top_k = [0 if swa_only else e.shape[-1] for e in (self.topk_indices_buffer,)][0]",
    "top_k = [e.shape[-1] for e in (self.topk_indices_buffer,) if e is not None] or 0",
    "top_k = sum(1 for e in (self.topk_indices_buffer,) if {test})",
    "x = {{k: v.shape for k, v in (('b', self.topk_indices_buffer),)}}",
    "x = [y for y in (ratio,)]; top_k = 0 if swa_only else y",
    "x = (*self.topk_indices_buffer.shape,)",
    "x = [*(self.topk_indices_buffer.shape if {test} else ())]",
    "x, *rest = (self.topk_indices_buffer, 0)",
    "x = {{**({{'k': self.topk_indices_buffer.shape}} if {test} else {{}})}}",
    "x = (*self.topk_indices_buffer,)",
    "x = getattr(self, 'topk_indices_buffer', None)",
    "top_k = getattr(self.topk_indices_buffer, 'shape', (0,))[-1]",
    "x = getattr(self, 'no_such_attribute', self.topk_indices_buffer).shape",
    "x = getattr(self, '_has_topk', None)()",
    "x = getattr(self, 'has_topk', False)",
    'msg = f"{{self.topk_indices_buffer!r:>4}}"',
    'msg = f"{{ratio:>{{self.topk_indices_buffer.shape[-1]}}}}"',
    'msg = f"{{ratio:>{{0 if {test} else 1}}}}"',
    "top_k = self.topk_indices_buffer.shape[-1] if {test} else 0",
]
_KEPT_GENERATORS = [
    ("g = (e.shape for e in (self.topk_indices_buffer,))", "if {test}:", "    x = list(g)"),
    ("g = (e.shape for e in (self.topk_indices_buffer,) if {test})", "x = next(g, None)"),
    ("g = (0 for _ in range(1))", "x = list(g)"),
    ("g = (self.topk_indices_buffer.shape for _ in range(1))", "if {test}:", "    x = max(g)"),
]
# (lines before the body, lines after it); the body is indented one level
# deeper than the last line before it.
_LATER_COMPOUNDS = [
    (["with contextlib.suppress(AttributeError):"], []),
    (["with contextlib.suppress(ValueError, AssertionError):"], []),
    (["try:"], ["finally:", "    pass"]),
    (["for _ in range(1):", "    try:"], ["    finally:", "        break"]),
    (["def _inner():", "    try:"], ["    finally:", "        return 0", "_inner()"]),
    (["try:"], ["except Exception:", "    top_k = 0"]),
    (["try:"], ["except (AttributeError, TypeError) as exc:", "    top_k = 0"]),
    (["with torch.no_grad():"], []),
]

_LATER_MARKERS = (" for e in ", " for y in ", " for _ in range(1)", " for k, v in ", "g = (", "(*", "[*",
                  "{**", "*rest", "getattr(self, 'topk_indices_buffer', ", "getattr(self.topk",
                  "getattr(self, 'no_such", "getattr(self, '_has_topk', ", "getattr(self, 'has_topk', ",
                  "msg = f", "suppress(", "finally:", "except Exception", " as exc", "torch.no_grad")


def has_later_construct(variant) -> bool:
    """Whether the variant's block uses one of the constructs above."""
    return any(marker in line for line in variant.block for marker in _LATER_MARKERS)


@st.composite
def blocks(draw, depth=0):
    n = draw(st.integers(1, 3))
    lines: list[str] = []
    for _ in range(n):
        lines += draw(statements(depth))
    return lines


CLASS_HELPERS = (
    "    def _has_topk(self):\n"
    "        return self.topk_indices_buffer is not None\n\n"
    "    @property\n"
    "    def has_topk(self):\n"
    "        return self.topk_indices_buffer is not None\n\n"
    "    def _prepare(self):\n"
    "        return None\n\n"
    "    def _validate(self):\n"
    "        if self.topk_indices_buffer is None:\n"
    "            raise ValueError('no top-k buffer')\n\n"
)
MODULE_HELPERS = (
    "import contextlib\n\n\n"
    "def _check_buffer(buffer):\n"
    "    assert buffer is not None\n\n\n"
    "def _identity(function):\n"
    "    return function\n\n\n"
)
_CLASS_ANCHOR = "class DeepseekV4FlashMLAAttention("
STEADY_EXTRAS = {
    "torch-check": "        torch._check(q.dim() == 3, lambda: 'q must be 3-d')\n",
    "super": "        if q.dim() < 0:\n            super().forward_mqa(q, kv, positions, output)\n",
    "mangled": "        if q.dim() < 0:\n            self.__scratch = None\n",
}
_STEADY_ANCHOR = "        assert isinstance(attn_metadata, dict)\n"


# --- module-level shapes -----------------------------------------------------------
# What a fork's module does around the class (vLLM decides what runs when it
# imports the module, not only inside the method). Each shape adds code at
# the module's top, to the class body, after the class, and a line at the
# top of the warmup branch; ``plain`` ones are ordinary safe spellings (their
# ``unknown`` counts as a false alarm of plain code), the others adversarial.
# The class body has ``_prepare`` (harmless) and ``_probe`` / ``_module_probe``
# (harmless); shapes rebind them, or read the layer in ways the walk must see.
# The last line of DeepseekV4FlashMLAAttention.__init__ in vLLM 0.27.1, and
# the method a module shape's ``init`` lines go into.
_INIT_END = "        self._einsum_recipe, self._tma_aligned_scales = compute_fp8_einsum_recipe()\n"
INIT_HELPER = "_dspark_fuzz_init"
_STRICT = "def _strict(self, *args):\n    return self.topk_indices_buffer.shape[-1]\n\n\n"


FOREIGN_FORWARD_CONTEXT = "vllm.dspark_fuzz_forward_context"
FUZZ_STATE = "vllm.dspark_fuzz_state"


def _foreign_forward_context():
    """A module of vLLM's package (in ``sys.modules`` only) whose
    ``get_forward_context`` reads the buffer of the layer that calls it,
    then returns vLLM's context."""
    import types

    def get_forward_context():
        from vllm.forward_context import get_forward_context as vllm_get_forward_context

        _ = sys._getframe(1).f_locals["self"].topk_indices_buffer.shape
        return vllm_get_forward_context()

    module = types.ModuleType(FOREIGN_FORWARD_CONTEXT)
    module.get_forward_context = get_forward_context
    sys.modules.setdefault(FOREIGN_FORWARD_CONTEXT, module)
    state = types.ModuleType(FUZZ_STATE)  # a set another module owns
    state.FLAGS = set()
    sys.modules.setdefault(FUZZ_STATE, state)


@dataclass(frozen=True)
class ModuleShape:
    top: str = ""  # module text before the class
    body: str = ""  # class-body lines (4 spaces in)
    after: str = ""  # module text after the class
    warmup: tuple[str, ...] = ()  # first lines of the warmup branch (12 spaces in)
    bases: str = ""  # extra bases, before the class's own
    plain: bool = False
    ratio_test: str | None = None  # replaces `self.compress_ratio <= 1` in swa_only
    fc_import: str | None = None  # replaces the module's import of get_forward_context
    # Lines that end the layer's construction (8 spaces in): a method that
    # __init__ calls last; ``observe`` runs it on each synthetic layer, which
    # ``synthetic.make_layer`` builds without __init__.
    init: tuple[str, ...] = ()


MODULE_SHAPES = {
    "alias-store": ModuleShape(top=_STRICT, after="_Alias = DeepseekV4FlashMLAAttention\n_Alias._prepare = _strict\n",
                               warmup=("self._prepare()",)),
    "function-sets-attr": ModuleShape(
        top=_STRICT, after="def _install():\n    DeepseekV4FlashMLAAttention._prepare = _strict\n\n\n_install()\n",
        warmup=("self._prepare()",)),
    "setattr-after": ModuleShape(top=_STRICT, after="setattr(DeepseekV4FlashMLAAttention, '_prepare', _strict)\n",
                                 warmup=("self._prepare()",)),
    "sys-modules-setattr": ModuleShape(
        top="import sys\n\n\n" + _STRICT + "def _module_probe(layer):\n    return 0\n\n\n",
        after="setattr(sys.modules[__name__], '_module_probe', _strict)\n", warmup=("_module_probe(self)",)),
    "globals-rebind": ModuleShape(
        top=_STRICT + "def _module_probe(layer):\n    return 0\n\n\n",
        after="globals()['_module_probe'] = _strict\n", warmup=("_module_probe(self)",)),
    "module-function-rebound": ModuleShape(
        top=_STRICT + "def _module_probe(layer):\n    return 0\n\n\n",
        after="_module_probe = _strict\n", warmup=("_module_probe(self)",)),
    "init-subclass-mixin": ModuleShape(
        top=_STRICT + "class _Mixin:\n    def __init_subclass__(cls, **kw):\n        super().__init_subclass__(**kw)\n"
        "        cls._prepare = _strict\n\n\n", bases="_Mixin, ", warmup=("self._prepare()",)),
    "mixin-property": ModuleShape(
        top="class _Mixin:\n    @property\n    def _ready(self):\n        return self.topk_indices_buffer.shape[-1]\n\n\n",
        bases="_Mixin, ", warmup=("x = self._ready",)),
    "mixin-method-safe": ModuleShape(
        top="class _Mixin:\n    def _ready(self):\n        return self.compress_ratio <= 1\n\n\n",
        bases="_Mixin, ", warmup=("x = self._ready()",), plain=True),
    "class-body-rebind": ModuleShape(top=_STRICT, body="    _prepare = _strict\n", warmup=("self._prepare()",)),
    "default-arg": ModuleShape(warmup=("_f = lambda b=self.topk_indices_buffer: b.shape", "_f()")),
    "default-arg-safe": ModuleShape(warmup=("_f = lambda r=self.compress_ratio: r", "x = _f()"), plain=True),
    "closure-late": ModuleShape(warmup=("cell = 0", "def _g():", "    return cell.shape", "cell = self.topk_indices_buffer", "_g()")),
    "generator-truthy": ModuleShape(
        top="def _gen(layer):\n    yield layer.topk_indices_buffer.shape\n\n\n", warmup=("assert _gen(self)",)),
    "generator-consumed": ModuleShape(
        top="def _gen(layer):\n    yield layer.topk_indices_buffer.shape\n\n\n", warmup=("x = list(_gen(self))",)),
    "eval": ModuleShape(warmup=("eval('self.topk_indices_buffer.shape')",)),
    "exec": ModuleShape(warmup=("exec('assert self.topk_indices_buffer is not None')",)),
    "vars": ModuleShape(warmup=("x = vars(self)['topk_indices_buffer'].shape",)),
    "frame": ModuleShape(top="import sys\n\n\n", warmup=("x = sys._getframe(0).f_locals['self'].topk_indices_buffer.shape",)),
    "dict-read": ModuleShape(warmup=("x = self.__dict__['topk_indices_buffer'].shape",)),
    "set-literal": ModuleShape(ratio_test="self.compress_ratio in {0, 1}", plain=True),
    "module-constant": ModuleShape(top="_SWA_ONLY_RATIOS = (0, 1)\n\n\n",
                                   ratio_test="self.compress_ratio in _SWA_ONLY_RATIOS", plain=True),
    "type-checking": ModuleShape(top="if TYPE_CHECKING:\n    from vllm.config import VllmConfig\n\n\n", plain=True),
    "for-else": ModuleShape(warmup=("for _r in (0, 1):", "    if self.compress_ratio == _r:", "        break",
                                    "else:", "    _r = None"), plain=True),
    "logger": ModuleShape(top="from vllm.logger import init_logger\n\nlogger = init_logger(__name__)\n\n\n", plain=True),
    "chained-constant": ModuleShape(top="_SWA_ONLY_RATIOS = _SWA = (0, 1)\n\n\n",
                                    ratio_test="self.compress_ratio in _SWA", plain=True),
    "torch-context": ModuleShape(top="from torch import no_grad\n\n\n",
                                 warmup=("with no_grad():", "    x = self.compress_ratio"), plain=True),
    "tuple-of-list-filled": ModuleShape(
        top="_SPARSE = tuple([[]])\n\n\ndef _mark(layer):\n    _SPARSE[0].append(layer.compress_ratio)\n\n\n",
        warmup=("_mark(self)",), ratio_test="self.compress_ratio not in _SPARSE[0]"),
    # ``get_forward_context`` from a module of vLLM's package other than
    # ``vllm.forward_context`` (a fork's own, named as vLLM's ends): it reads
    # the calling layer's buffer (``_foreign_forward_context`` below).
    "foreign-forward-context": ModuleShape(
        fc_import=f"from {FOREIGN_FORWARD_CONTEXT} import get_forward_context\n"),
    # A module-level list that takes the buffer in under another name (a
    # default argument, a second module name), read back by the warmup;
    # and one that takes the ratio in the same way (plain).
    "module-list-through-a-default": ModuleShape(
        top="_SEEN = []\n\n\ndef _keep(v, store=_SEEN):\n    store.append(v)\n\n\n",
        warmup=("_keep(self.topk_indices_buffer)", "x = _SEEN[-1].shape")),
    "module-list-under-a-second-name": ModuleShape(
        top="_SEEN = []\n_ALSO = _SEEN\n\n\ndef _keep(layer):\n"
            "    _ALSO.append(layer.topk_indices_buffer)\n\n\n",
        warmup=("_keep(self)", "x = _SEEN[-1].shape")),
    "module-list-through-a-local-plain": ModuleShape(
        top="_SEEN = []\n\n\ndef _keep(layer):\n    store = _SEEN\n"
            "    store.append(layer.compress_ratio)\n\n\n",
        warmup=("_keep(self)", "x = _SEEN[-1]"), plain=True),
    # torch's in-place functions (names ending in `_`) and an unbound
    # Tensor method change module state from the buffer, which the warmup
    # reads back; and the same on a local tensor of the ratio (plain).
    "torch-init-fills-a-module-tensor": ModuleShape(
        top="_FLAG = torch.ones(1)\n\n\n",
        warmup=("torch.nn.init.constant_(_FLAG, float(self.topk_indices_buffer is not None))",
                "x = 1 // int(_FLAG[0])")),
    "unbound-tensor-view-of-a-module-tensor": ModuleShape(
        top="_FLAG = torch.ones(1)\n\n\n",
        warmup=("v = torch.Tensor.view(_FLAG, -1)", "v[0] = float(self.topk_indices_buffer is not None)",
                "x = 1 // int(_FLAG[0])")),
    "torch-init-fills-a-local-plain": ModuleShape(
        warmup=("w = torch.zeros(1)", "torch.nn.init.constant_(w, float(self.compress_ratio))"),
        plain=True),
    # functools.update_wrapper copying code between module functions: the
    # function the warmup calls next runs another's code.
    "update-wrapper-copies-code": ModuleShape(
        top="from functools import update_wrapper\n\n\n" + _STRICT
            + "def _module_probe(layer):\n    return 0\n\n\n",
        warmup=("update_wrapper(_module_probe, _strict, assigned=('__code__',), updated=())",
                "_module_probe(self)")),
    # A context manager whose exit swallows the exception or not, as module
    # state set from the buffer tells it.
    "steered-with": ModuleShape(
        top="_MODE = {}\n\n\nclass _Steered:\n    def __enter__(self):\n        return self\n\n"
            "    def __exit__(self, *exc):\n        return _MODE.get('swa', False)\n\n\n",
        warmup=("_MODE['swa'] = self.topk_indices_buffer is not None", "with _Steered():",
                "    raise LookupError")),
    # A module function handed the layer and the buffer, which keeps it on
    # the layer for the warmup to read.
    "module-function-handed-the-layer": ModuleShape(
        top="def _keep(layer, v):\n    layer._kept = [v]\n\n\n",
        warmup=("_keep(self, self.topk_indices_buffer)", "x = self._kept[0].shape")),
    # A special module name bound second in a chained assignment.
    "chained-special-name": ModuleShape(
        top="def _lookup(name):\n    raise AttributeError(name)\n\n\n_g = __getattr__ = _lookup\n\n\n"),
    # torch's in-place function, a method of a from-imported object and a
    # default argument made by a call, each in a method the warmup calls
    # and each changing what the warmup reads back by the buffer. (The
    # classifier once read these safe when ``__init__`` did the same; the
    # fuzz's layers are built without ``__init__``, so those forks are
    # tests of test_layer_state_flows.py; here the warmup does it.)
    "torch-fill-by-the-buffer": ModuleShape(
        body="    def _configure(self):\n        torch.fill_(self._swa_mask, self.topk_indices_buffer is None)\n\n",
        warmup=("self._swa_mask = torch.zeros(4, dtype=torch.bool)", "self._configure()",
                "assert not self._swa_mask.any()")),
    "from-imported-object-changed-by-the-buffer": ModuleShape(
        top=f"from {FUZZ_STATE} import FLAGS\n\n\n",
        body="    def _configure(self):\n        if self.topk_indices_buffer is None:\n"
             "            FLAGS.add('swa')\n        else:\n            FLAGS.discard('swa')\n\n",
        warmup=("self._configure()", "x = 1 // ('swa' not in FLAGS)")),
    # torch's in-place and view functions by the name a from-import binds.
    "from-imported-fill_-by-the-buffer": ModuleShape(
        top="from torch import fill_\n\n\n",
        body="    def _configure(self):\n        fill_(self._swa_mask, self.topk_indices_buffer is None)\n\n",
        warmup=("self._swa_mask = torch.zeros(4, dtype=torch.bool)", "self._configure()",
                "assert not self._swa_mask.any()")),
    "from-imported-narrow-set-by-the-buffer": ModuleShape(
        top="from torch import narrow as cut\n\n\n",
        warmup=("self._flag = torch.ones(2)", "v = cut(self._flag, 0, 0, 1)",
                "v[0] = float(self.topk_indices_buffer is not None)", "x = 1 // int(self._flag[0])")),
    "default-made-by-a-call-keeps-the-buffer": ModuleShape(
        top="from collections import OrderedDict\n\n\n",
        body="    def _registry(self, _kept=OrderedDict()):\n        return _kept\n\n"
             "    def _configure(self):\n        self._registry()['topk'] = self.topk_indices_buffer\n\n",
        warmup=("self._configure()", "x = self._registry()['topk'].shape[-1]")),
    # Code Python runs where an exception is swallowed (a property read by
    # hasattr, a __next__ by next(it, None), a generator stopped by any()):
    # what follows a failure for lack of the buffer never runs, and the
    # warmup reads that back.
    "property-read-by-hasattr": ModuleShape(
        body="    @property\n    def _arm(self):\n        x = self.topk_indices_buffer.shape\n"
             "        next(self._ids)\n        return x\n\n",
        warmup=("self._ids = iter(range(2))", "hasattr(self, '_arm')", "x = 1 // next(self._ids)")),
    "next-with-a-default-over-a-module-iterator": ModuleShape(
        top="class _Arm:\n    def __init__(self, layer):\n        self.layer = layer\n\n"
            "    def __iter__(self):\n        return self\n\n    def __next__(self):\n"
            "        if self.layer.topk_indices_buffer is None:\n            raise StopIteration\n"
            "        next(self.layer._ids)\n        return 1\n\n\n",
        warmup=("self._ids = iter(range(2))", "next(_Arm(self), None)", "x = 1 // next(self._ids)")),
    "generator-stopped-by-any": ModuleShape(
        top="def _steps(layer):\n    yield layer.topk_indices_buffer is None\n"
            "    next(layer._ids)\n    yield True\n\n\n",
        warmup=("self._ids = iter(range(2))", "any(_steps(self))", "x = 1 // next(self._ids)")),
    "generator-stopped-by-any-plain": ModuleShape(
        top="def _steps(layer):\n    yield layer.compress_ratio > 1\n    yield True\n\n\n",
        warmup=("x = any(_steps(self))",), plain=True),
    # Python's code advancing the layer's iterator by a count the buffer
    # decides, or an iterator over it kept and advanced later; and the same
    # by a constant (plain).
    "zip-advances-by-the-buffer": ModuleShape(
        body="    def _configure(self):\n"
             "        list(zip([0] * (self.topk_indices_buffer is None), self._ids))\n\n",
        warmup=("self._ids = iter(range(1))", "self._configure()", "i = next(self._ids)")),
    "lazy-map-advanced-by-the-buffer": ModuleShape(
        body="    def _configure(self):\n        m = map(next, [self._ids])\n"
             "        if self.topk_indices_buffer is None:\n            next(m)\n\n",
        warmup=("self._ids = iter(range(1))", "self._configure()", "i = next(self._ids)")),
    # A loop over the layer's iterator that the buffer leaves early; the
    # module's code Python runs without a name (print's file, a property
    # by hasattr with a name the buffer chose); and a list written out,
    # iterated beside the buffer (plain).
    "loop-left-by-the-buffer": ModuleShape(
        body="    def _configure(self):\n        for _x in self._ids:\n"
             "            if self.topk_indices_buffer is not None:\n                break\n\n",
        warmup=("self._ids = iter([1, 2, 3])", "self._configure()", "i = next(self._ids)")),
    "print-to-a-module-writer": ModuleShape(
        top="class _Writer:\n    def __init__(self):\n        self.log = []\n\n"
            "    def write(self, s):\n        self.log.append(s)\n\n    def flush(self):\n        pass\n\n\n",
        body="    def _configure(self):\n        print(self.topk_indices_buffer is None, file=self._w)\n\n",
        warmup=("self._w = _Writer()", "self._configure()", "x = self._w.log.index('False')")),
    "hasattr-runs-a-chosen-property": ModuleShape(
        body="    @property\n    def _p1(self):\n        next(self._ids)\n        return 1\n\n"
             "    @property\n    def _p2(self):\n        return 2\n\n"
             "    def _configure(self):\n"
             "        hasattr(self, '_p1' if self.topk_indices_buffer is None else '_p2')\n\n",
        warmup=("self._ids = iter([1])", "self._configure()", "i = next(self._ids)")),
    "zip-of-a-written-out-list-plain": ModuleShape(
        body="    def _configure(self):\n"
             "        self._flags = dict(zip(self._names, (self.compress_ratio > 1, False)))\n\n",
        warmup=("self._names = ['q', 'kv']", "self._configure()", "x = self._names[0]"), plain=True),
    "zip-advances-by-a-constant-plain": ModuleShape(
        body="    def _configure(self):\n        list(zip([0], self._ids))\n\n",
        warmup=("self._ids = iter(range(2))", "self._configure()", "i = next(self._ids)"), plain=True),
    # What the layer's construction leaves for the warmup (``init``: the end
    # of __init__). Each unsafe one fails the SWA-only warmup without the
    # buffer and runs with it; the plain ones run either way.
    "init-annotation-alone-then-a-chosen-store": ModuleShape(
        body="    _k: int\n\n",
        init=("if self.topk_indices_buffer is not None:", "    self._k = 1"), warmup=("x = self._k",)),
    "init-store-deleted-then-a-chosen-store": ModuleShape(
        init=("self._k = 1", "del self._k", "if self.topk_indices_buffer is not None:", "    self._k = 1"),
        warmup=("x = self._k",)),
    "init-self-rebound-around-a-store": ModuleShape(
        init=("_me = self", "self = type('_Other', (), {})()", "self._k = 1", "self = _me",
              "if self.topk_indices_buffer is not None:", "    self._k = 1"),
        warmup=("x = self._k",)),
    "init-index-set-by-the-buffer": ModuleShape(
        init=("self._i = 5", "if self.topk_indices_buffer is not None:", "    self._i = 0"),
        warmup=("x = (0,)[self._i]",)),
    "init-key-set-by-the-buffer": ModuleShape(
        init=("self._key = ''", "if self.topk_indices_buffer is not None:", "    self._key = 'k'"),
        warmup=("x = {'k': 1}[self._key]",)),
    "init-helper-by-getattr-advances-an-iterator": ModuleShape(
        body="    def _arm(self):\n        if self.topk_indices_buffer is None:\n"
             "            next(self._ids)\n        return 0\n\n",
        init=("self._ids = iter(range(1))", "getattr(self, '_arm')()"), warmup=("i = next(self._ids)",)),
    "init-numpy-write-by-the-buffer": ModuleShape(
        top="import numpy as np\n\n\n",
        init=("self._flag = np.zeros(1)", "np.copyto(self._flag, float(self.topk_indices_buffer is not None))"),
        warmup=("assert self._flag[0] == 1",)),
    "init-namespace-list-filled-by-the-buffer": ModuleShape(
        top="import types\n\n\n",
        init=("self._ns = types.SimpleNamespace(items=[])", "if self.topk_indices_buffer is not None:",
              "    self._ns.items.append(1)"),
        warmup=("x = self._ns.items[0]",)),
    "init-store-on-both-sides-plain": ModuleShape(
        init=("if self.topk_indices_buffer is not None:", "    self._k = 1", "else:", "    self._k = 2"),
        warmup=("x = self._k",), plain=True),
    "init-annotation-then-a-store-plain": ModuleShape(
        body="    _k: int\n\n",
        init=("self._k = 0", "if self.topk_indices_buffer is not None:", "    self._k = 1"),
        warmup=("x = self._k",), plain=True),
    "init-torch-factory-sized-by-the-buffer-plain": ModuleShape(
        init=("self._pad = torch.zeros(int(self.topk_indices_buffer is None) + 1)",), plain=True),
    "init-list-append-of-a-test-plain": ModuleShape(
        init=("self._notes = []", "self._notes.append(self.topk_indices_buffer is None)"), plain=True),
    # Warmup containers filled only with the buffer through a closure or a
    # walrus; a key kept by the buffer's absence.
    "closure-fills-by-the-buffer": ModuleShape(
        warmup=("_d = {}", "def _fill():", "    _d['k'] = 1", "if self.topk_indices_buffer is not None:",
                "    _fill()", "x = _d['k']")),
    "walrus-fills-by-the-buffer": ModuleShape(
        warmup=("_d = {}", "if self.topk_indices_buffer is not None:", "    (_e := _d)['k'] = 1",
                "x = _d['k']")),
    # Code the buffer skips that changes an object without a store: an
    # iterator advanced by `in` in a skipped operand, a defaultdict's
    # missing key read in a skipped arm, a while on the buffer filling a
    # dict read through another name; and plain reads beside them.
    "iterator-advanced-in-a-skipped-operand": ModuleShape(
        warmup=("_g = iter((5, 6))", "_t = self.topk_indices_buffer is None or (5 in _g)", "_a, = _g")),
    "defaultdict-read-in-a-skipped-arm": ModuleShape(
        top="import collections\n\n\n",
        warmup=("_m = collections.defaultdict(int)", "if self.topk_indices_buffer is not None:",
                "    _t = _m['k']", "x = _m.pop('k')")),
    "while-on-the-buffer-fills-through-another-name": ModuleShape(
        body="    def _fill(self, d):\n        while self.topk_indices_buffer is not None:\n"
             "            d['k'] = 1\n            break\n\n",
        warmup=("_d = {}", "_e = _d", "self._fill(_d)", "x = _e['k']")),
    "constant-read-in-a-skipped-operand-plain": ModuleShape(
        warmup=("_c = (5, 6)", "_t = self.topk_indices_buffer is None or (5 in _c)", "_a, _b = _c"), plain=True),
    "key-kept-by-the-buffer": ModuleShape(
        warmup=("_s = ''", "if self.topk_indices_buffer is not None:", "    _s = 'k'", "x = {'k': 1}[_s]")),
    # Code the buffer's absence skips without an `if` of its own: a read of
    # an iterator under a second name, the rest of a helper after a return
    # taken by the buffer, a chained comparison's later comparand, a try's
    # else and the rest of its body after a caught crash, an attribute of
    # an expression; each with a plain spelling that reads a constant.
    "iterator-read-through-a-second-name-skipped": ModuleShape(
        warmup=("_d = iter([None, 1])", "_e = _d", "if self.topk_indices_buffer is not None:",
                "    _t = None in _d", "x = next(_e).bit_length()")),
    "helper-returns-early-by-the-buffer": ModuleShape(
        body="    def _configure(self):\n        if self.topk_indices_buffer is not None:\n"
             "            return\n        next(self._ids)\n\n",
        warmup=("self._ids = iter(range(1))", "self._configure()", "i = next(self._ids)")),
    "helper-returns-early-by-the-buffer-plain": ModuleShape(
        body="    def _configure(self):\n        if self.topk_indices_buffer is not None:\n"
             "            return 1\n        return 0\n\n",
        warmup=("x = self._configure()",), plain=True),
    "chained-comparand-skipped": ModuleShape(
        warmup=("_g = iter((5, 6))", "_t = (self.topk_indices_buffer is not None) == True == (5 in _g)",
                "_a, = _g")),
    "chained-comparand-skipped-plain": ModuleShape(
        warmup=("_c = (5, 6)", "_t = (self.topk_indices_buffer is not None) == True == (5 in _c)",
                "_a, _b = _c"), plain=True),
    "try-else-skipped": ModuleShape(
        warmup=("_g = iter((5, 6))", "try:", "    _t = self.topk_indices_buffer.shape",
                "except AttributeError:", "    pass", "else:", "    next(_g)", "_a, = _g")),
    "try-body-rest-skipped": ModuleShape(
        warmup=("_g = iter((5, 6))", "try:", "    _t = self.topk_indices_buffer.shape", "    next(_g)",
                "except AttributeError:", "    pass", "_a, = _g")),
    "try-else-skipped-plain": ModuleShape(
        warmup=("_c = 0", "try:", "    _t = self.topk_indices_buffer.shape",
                "except AttributeError:", "    _c = 1", "else:", "    _c = 2", "x = (0, 1, 2)[_c]"),
        plain=True),
    "attribute-of-an-expression-skipped": ModuleShape(
        warmup=("self._ids = iter((5, 6))", "_t = self.topk_indices_buffer is None or 5 in (self,)[0]._ids",
                "_a, = self._ids")),
    # How a loop or a try left decides what runs next: a loop's `else` that
    # a caught failure or a return taken for lack of the buffer skipped, a
    # try's `else` binding a name, and handlers a failure for lack of the
    # buffer chose (what they bind or return, what a return cut short
    # leaves to the code after the try, what `finally` reads).
    "unrolled-for-else-skipped-by-a-caught-failure": ModuleShape(
        warmup=("_g = iter((5, 6))", "try:", "    for _ in (1,):", "        _t = self.topk_indices_buffer.shape",
                "    else:", "        next(_g)", "except AttributeError:", "    pass", "_a, = _g")),
    "for-else-skipped-by-a-caught-failure": ModuleShape(
        warmup=("_g = iter((5, 6))", "try:", "    for _ in range(1):", "        _t = self.topk_indices_buffer.shape",
                "    else:", "        next(_g)", "except AttributeError:", "    pass", "_a, = _g")),
    "helper-for-else-skipped-by-a-return": ModuleShape(
        body="    def _configure(self):\n        for _ in (1,):\n            if self.topk_indices_buffer is None:\n"
             "                return\n        else:\n            next(self._ids)\n\n",
        warmup=("self._ids = iter(range(2))", "self._configure()", "_a, = self._ids")),
    "try-else-binds-a-name-the-buffer-skips": ModuleShape(
        warmup=("_g = iter((5, 6))", "_k = 0", "try:", "    _t = self.topk_indices_buffer.shape",
                "except AttributeError:", "    pass", "else:", "    _k = 1", "if _k:", "    next(_g)", "_a, = _g")),
    "handler-chosen-by-the-buffer-binds-a-name": ModuleShape(
        warmup=("_g = iter((5, 6))", "_k = 0", "try:", "    _t = self.topk_indices_buffer.shape",
                "except AttributeError:", "    _k = 1", "if not _k:", "    next(_g)", "_a, = _g")),
    "handler-chosen-by-the-buffer-returns": ModuleShape(
        body="    def _probe(self):\n        try:\n            self.topk_indices_buffer.shape\n"
             "        except AttributeError:\n            return 1\n        return 0\n\n",
        warmup=("_g = iter((5, 6))", "if not self._probe():", "    next(_g)", "_a, = _g")),
    "return-cut-short-by-the-buffer-leaves-the-rest": ModuleShape(
        body="    def _probe(self):\n        try:\n            return self.topk_indices_buffer.shape[0] * 0\n"
             "        except AttributeError:\n            pass\n        return 1\n\n",
        warmup=("_g = iter((5, 6))", "if not self._probe():", "    next(_g)", "_a, = _g")),
    "finally-reads-what-a-chosen-handler-bound": ModuleShape(
        warmup=("_g = iter((5, 6))", "_k = 0", "try:", "    _t = self.topk_indices_buffer.shape",
                "except AttributeError:", "    _k = 1", "finally:", "    if not _k:", "        next(_g)", "_a, = _g")),
    "raise-cut-short-by-the-buffer-reaches-an-outer-handler": ModuleShape(
        warmup=("_g = iter((5, 6))", "_k = 0", "try:", "    try:", "        _t = self.topk_indices_buffer.shape",
                "        raise ValueError('x')", "    except AttributeError:", "        pass",
                "except ValueError:", "    _k = 1", "if _k:", "    next(_g)", "_a, = _g")),
    "return-after-a-failure-in-a-try-body": ModuleShape(
        body="    def _probe(self):\n        try:\n            self.topk_indices_buffer.shape\n"
             "            return 0\n        except AttributeError:\n            pass\n        return 1\n\n",
        warmup=("_g = iter((5, 6))", "if not self._probe():", "    next(_g)", "_a, = _g")),
    # A held-out review's (2026-12-07): a failure an outer handler takes
    # past an inner try of another class, in a statement's header, and a
    # loop a continue or break leaves early in a helper that returns a name.
    "inner-try-of-another-class-leaves-the-outer-body-rest": ModuleShape(
        warmup=('lst = []', 'try:', '    try:', '        self.topk_indices_buffer.shape', '    except KeyError:', '        pass', '    lst.append(1)', 'except AttributeError:', '    pass', 'lst[0]')),
    "inner-try-of-another-class-leaves-the-outer-else": ModuleShape(
        warmup=('lst = []', 'try:', '    try:', '        self.topk_indices_buffer.shape', '    except KeyError:', '        pass', 'except AttributeError:', '    pass', 'else:', '    lst.append(1)', 'lst[0]')),
    "inner-try-of-another-class-under-a-finally-that-returns": ModuleShape(
        body='    def _h(self, lst):\n        try:\n            try:\n                self.topk_indices_buffer.shape\n            except KeyError:\n                pass\n            lst.append(1)\n        finally:\n            return\n\n',
        warmup=('lst = []', 'self._h(lst)', 'lst[0]')),
    "helper-loop-continued-by-the-buffer-returns-a-name": ModuleShape(
        body="    def _h(self):\n        _r = 'b'\n        for _ in (0,):\n            if self.topk_indices_buffer is None:\n                continue\n            _r = 'a'\n        return _r\n\n",
        warmup=('_v = self._h()', "{'a': 1}[_v]")),
    "helper-loop-left-by-a-handler-returns-a-name": ModuleShape(
        body="    def _h(self):\n        _r = 'b'\n        for _ in (0,):\n            try:\n                self.topk_indices_buffer.shape\n            except AttributeError:\n                break\n            _r = 'a'\n        return _r\n\n",
        warmup=('_v = self._h()', "{'a': 1}[_v]")),
    "loop-header-fails-its-body-skipped": ModuleShape(
        warmup=('lst = []', 'try:', '    for _x in self.topk_indices_buffer.shape[:1]:', '        lst.append(1)', 'except AttributeError:', '    pass', 'lst[0]')),
    "match-subject-fails-its-case-skipped": ModuleShape(
        warmup=('g = iter((5, 6))', 'try:', '    match self.topk_indices_buffer.shape:', '        case _:', '            next(g)', 'except AttributeError:', '    pass', '_a, = g')),
    "with-item-fails-its-body-skipped-in-a-module-function": ModuleShape(
        top="def _h(layer, k):\n    try:\n        with contextlib.nullcontext(layer.topk_indices_buffer.shape):\n            k[0] = 'b'\n    except AttributeError:\n        pass\n    return None\n\n",
        warmup=("k = ['a']", '_h(self, k)', "{'b': 1}[k[0]]")),
    "outer-handler-leaves-after-an-inner-try-of-another-class": ModuleShape(
        body='    def _h(self, g):\n        try:\n            try:\n                self.topk_indices_buffer.shape\n            except KeyError:\n                pass\n        except AttributeError:\n            return\n        next(g)\n\n',
        warmup=('g = iter((5, 6))', 'self._h(g)', '_a, = g')),
    # Code the missing buffer chose reads an object, and the read changes
    # it (an iterator `in`, a loop or unpacking advances): what follows
    # reads the object as the buffer's absence left it, under any name.
    "iterator-read-in-a-chosen-arm": ModuleShape(
        warmup=("_g = iter((5,))", "if self.topk_indices_buffer is None:", "    _t = 5 in _g", "_a, = _g")),
    "helper-reads-the-callers-iterator-in-a-chosen-arm": ModuleShape(
        body="    def _h(self, g):\n        if self.topk_indices_buffer is None:\n"
             "            _t = 5 in g\n        return None\n\n",
        warmup=("_g = iter((5,))", "self._h(_g)", "_a, = _g")),
    "helper-loops-over-the-callers-iterator-in-a-chosen-arm": ModuleShape(
        body="    def _h(self, g):\n        if self.topk_indices_buffer is None:\n"
             "            for _x in g:\n                break\n        return None\n\n",
        warmup=("_g = iter((5,))", "self._h(_g)", "_a, = _g")),
    "helper-while-on-the-buffer-reads-the-callers-iterator": ModuleShape(
        body="    def _h(self, g):\n        while self.topk_indices_buffer is None:\n"
             "            _t = 5 in g\n            break\n        return None\n\n",
        warmup=("_g = iter((5,))", "self._h(_g)", "_a, = _g")),
    "chosen-operand-reads-the-callers-iterator": ModuleShape(
        top="def _h(layer, g):\n    return layer.topk_indices_buffer is None and 5 in g\n\n\n",
        warmup=("_g = iter((5,))", "_t = _h(self, _g)", "_a, = _g")),
    "chosen-arm-reads-the-layers-iterator": ModuleShape(
        warmup=("self._ids = iter((5,))", "if self.topk_indices_buffer is None:", "    _t = 5 in self._ids",
                "_a, = self._ids")),
    "closure-called-after-an-early-return-by-the-buffer": ModuleShape(
        warmup=("_g = iter((5,))", "def _adv():", "    _t = 5 in _g", "def _w():",
                "    if self.topk_indices_buffer is not None:", "        return", "    _adv()", "_w()", "_a, = _g")),
    "lambda-called-after-an-early-return-by-the-buffer": ModuleShape(
        warmup=("_g = iter((5,))", "_adv = lambda: 5 in _g", "def _w():",
                "    if self.topk_indices_buffer is not None:", "        return", "    _adv()", "_w()", "_a, = _g")),
    # A held-out review's (2026-12-07): the layer's attribute read by
    # getattr, and the forward context's containers, chosen or skipped.
    "chosen-arm-reads-the-layers-iterator-by-getattr": ModuleShape(
        init=("self._ids = iter((5,))",),
        warmup=("if self.topk_indices_buffer is None:", "    _t = 5 in getattr(self, '_ids')", "_a, = self._ids")),
    "chosen-arm-reads-a-forward-context-container": ModuleShape(
        warmup=("get_forward_context().slot_mapping['ids'] = iter((5,))", "if self.topk_indices_buffer is None:",
                "    _t = 5 in get_forward_context().slot_mapping['ids']",
                "_a, = get_forward_context().slot_mapping['ids']")),
    "skipped-arm-reads-a-forward-context-container": ModuleShape(
        warmup=("_fc = get_forward_context()", "_fc.slot_mapping['ids'] = iter((5,))",
                "if self.topk_indices_buffer is not None:", "    _t = 5 in _fc.slot_mapping['ids']",
                "assert 5 not in _fc.slot_mapping['ids']")),
    # A second held-out review's (2026-12-07): a nested def's annotations
    # run when it does (flashmla.py defers none).
    "nested-def-annotation-reads-the-layers-iterator-in-a-chosen-arm": ModuleShape(
        init=("self._ids = iter((5,))",),
        warmup=("if self.topk_indices_buffer is None:", "    def _z(x: 5 in self._ids):", "        pass",
                "_a, = self._ids")),
    "nested-def-annotations-plain": ModuleShape(
        warmup=("def _z(x: int, *a: int, k: float = 1.0, **kw: str) -> None:", "    pass", "_z(1)"),
        plain=True),
    "chosen-arm-reads-a-constant-plain": ModuleShape(
        warmup=("_c = (5,)", "if self.topk_indices_buffer is None:", "    _t = 5 in _c", "_a, = _c"),
        plain=True),
    "handler-binds-a-name-plain": ModuleShape(
        warmup=("_k = 0", "try:", "    _t = self.compress_ratio + 0", "except TypeError:", "    _k = 1", "x = _k"),
        plain=True),
    "for-else-beside-the-ratio-plain": ModuleShape(
        warmup=("_k = 0", "for _ in (1,):", "    _t = self.compress_ratio", "else:", "    _k = 1", "x = (0, 1)[_k]"),
        plain=True),
    # (2026-12-07 evening, a held-out review) the module decides what
    # Python runs around the method: class-body names, the standard
    # library reached through allowed packages, __builtins__, annotations
    # typing evaluates.
    "class-body-shadows-property": ModuleShape(
        body="    def property(fn):\n        return fn\n\n    @property\n    def _armed(self):\n"
             "        return self.topk_indices_buffer is not None\n\n",
        warmup=("if self._armed:", "    x = self.topk_indices_buffer.shape")),
    "class-body-shadows-cached-property": ModuleShape(
        top="from functools import cached_property\n\n\n",
        body="    cached_property = torch.no_grad()\n\n    @cached_property\n    def _armed(self):\n"
             "        return False\n\n",
        warmup=("x = self.topk_indices_buffer.shape if self._armed else 0",)),
    "frame-through-a-name-imported-from-typing": ModuleShape(
        top="from typing import sys\n\n\n",
        warmup=("x = sys._getframe(0).f_locals['self'].topk_indices_buffer.shape",)),
    "locals-through-torch-builtins": ModuleShape(
        warmup=("x = torch.builtins.locals()['self'].topk_indices_buffer.shape",)),
    "frame-through-dataclasses-inspect-in-a-nested-function": ModuleShape(
        top="from dataclasses import inspect\n\n\n",
        warmup=("def _n():",
                "    assert inspect.currentframe().f_back.f_locals['self'].topk_indices_buffer is not None",
                "    return 0", "_n()")),
    "frame-through-logging-currentframe": ModuleShape(
        top="import logging\n\n\n",
        warmup=("x = logging.currentframe().f_locals['self'].topk_indices_buffer.shape",)),
    "module-builtins-proxy-class": ModuleShape(
        top="from dataclasses import builtins as _real\n\n\ndef _len(t):\n    return 0\n\n\n"
            "class __builtins__:\n    def __class_getitem__(cls, name):\n        if name == 'len':\n"
            "            return _len\n        return _real.getattr(_real, name)\n\n\n",
        warmup=("if len((1,)) != 1:", "    x = self.topk_indices_buffer.shape")),
    "exec-through-torch-builtins-at-import": ModuleShape(
        after="_x = torch.builtins.exec('len = lambda *a: 0')\n",
        warmup=("if len((1,)) != 1:", "    x = self.topk_indices_buffer.shape")),
    "annotation-string-run-by-get-type-hints": ModuleShape(
        top="import typing\n\n\ndef _f(x: \"[f.f_locals['self'].topk_indices_buffer.shape"
            " for f in [torch.sys._getframe(i) for i in range(1, 12)]"
            " if 'q' in f.f_locals and 'self' in f.f_locals]\"):\n    pass\n\n\n",
        warmup=("typing.get_type_hints(_f)",)),
    # (a second review) Python's reflection under names the rules did not
    # know: found by what it is.
    "format-string-follows-a-frame-into-the-layer": ModuleShape(
        top="import logging\n\n\n",
        warmup=("x = '{0.f_locals[self].topk_indices_buffer.shape}'.format(logging.currentframe())",)),
    "sys-under-a-private-name-of-collections": ModuleShape(
        top="import collections\n\n\n",
        warmup=("x = getattr(collections, '_sys').modules['builtins'].eval('self.topk_indices_buffer.shape')",)),
    "builtins-module-kept-by-enum-evaluates-in-the-caller": ModuleShape(
        top="import enum\n\n\n",
        warmup=("x = enum.bltns.eval('self.topk_indices_buffer.shape')",)),
    "import-module-re-exported-by-vllm": ModuleShape(
        top="from vllm.model_executor.layers.rotary_embedding.common import import_module\n\n\n",
        warmup=("x = import_module('builtins').eval('self.topk_indices_buffer.shape')",)),
    "attrgetter-re-exported-by-torch": ModuleShape(
        top="from torch.autograd.profiler_util import attrgetter\nimport logging\n\n\n",
        warmup=("x = attrgetter('f_locals')(logging.currentframe())['self']",
                "y = attrgetter('topk_indices_buffer.shape')(x)")),
    "forward-ref-evaluates-a-string": ModuleShape(
        top="import typing\n\n\n",
        warmup=("x = typing.ForwardRef(\"type(__import__('sys')._getframe(2).f_locals['self']"
                ".topk_indices_buffer.shape)\")._evaluate(None, None, frozenset())",)),
    "exec-through-enum-at-import-rebinds-len": ModuleShape(
        top="import enum\n\n\n", after="_x = enum.bltns.exec('len = lambda *a: 0')\n",
        warmup=("if len((1,)) != 1:", "    x = self.topk_indices_buffer.shape")),
    # (a third review) importers that take a string, run-time format
    # strings, a forward reference reached without its name.
    "eval-resolved-by-vllms-qualname-importer": ModuleShape(
        top="from vllm.utils.import_utils import resolve_obj_by_qualname\n\n\n",
        warmup=("x = resolve_obj_by_qualname('builtins.eval')('self.topk_indices_buffer.shape')",)),
    "eval-resolved-by-logging-config": ModuleShape(
        top="import logging.config\n\n\n",
        warmup=("x = logging.config.BaseConfigurator({}).resolve('builtins.eval')('self.topk_indices_buffer.shape')",)),
    "logging-config-imported-in-the-warmup": ModuleShape(
        warmup=("import logging.config as _lcfg",
                "x = _lcfg.BaseConfigurator({}).resolve('builtins.eval')('self.topk_indices_buffer.shape')")),
    "format-string-built-at-run-time": ModuleShape(
        top="import logging\n\n\n",
        warmup=("x = ('{0.f_locals[self]' + '.topk_indices_buffer.shape}').format(logging.currentframe())",)),
    "forward-ref-reached-through-get-args": ModuleShape(
        top="import typing\n\n\n",
        warmup=("x = typing.get_args(typing.List[\"type([fi.frame.f_locals['self'] for fi in "
                "__import__('inspect').stack() if type(fi.frame.f_locals.get('self')).__name__ == "
                "'DeepseekV4FlashMLAAttention'][0].topk_indices_buffer.shape)\"])[0]"
                "._evaluate(None, None, frozenset())",)),
    "exec-through-a-name-an-import-time-call-made": ModuleShape(
        top="from vllm.utils.import_utils import resolve_obj_by_qualname\n\n\n"
            "_ex = resolve_obj_by_qualname('builtins.exec')\n_x = _ex('len = lambda *a: 0')\n\n\n",
        warmup=("if len((1,)) != 1:", "    x = self.topk_indices_buffer.shape")),
    # (a fourth review) torch's private string importer and frame lookup,
    # vLLM's lazy module loader, format reached by getattr.
    "eval-imported-by-torchs-dotted-name-importer": ModuleShape(
        warmup=("x = torch._utils._import_dotted_name('builtins.eval')('self.topk_indices_buffer.shape')",)),
    "caller-frame-lookup-of-torchs-jit": ModuleShape(
        top="from torch._jit_internal import createResolutionCallbackFromFrame as _crf\n\n\n",
        warmup=("x = _crf(0)('self.topk_indices_buffer').shape",)),
    "a-module-made-by-vllms-lazy-loader": ModuleShape(
        top="from vllm.utils.import_utils import LazyLoader\n\n\n",
        warmup=("x = LazyLoader('_p', {}, 'pydoc').locate('builtins.eval')('self.topk_indices_buffer.shape')",)),
    "format-reached-by-getattr-on-a-built-string": ModuleShape(
        top="from torch._utils import _import_dotted_name as _idn\n\n\n",
        warmup=("x = getattr('{0.f_locals[self]' + '.topk_indices_buffer.shape}', 'format')(_idn('sys._getframe')(0))",)),
}


@dataclass(frozen=True)
class Variant:
    base: str  # "0.27.1" (affected) or "0.28.0-shape" (upstream's fix)
    mode: str  # "replace" the base's assertion and top_k lines, or "prefix" them
    block: tuple[str, ...]
    decorated: bool
    steady: tuple[str, ...]
    module: str | None = None  # a MODULE_SHAPES name

    def source(self, stock: str) -> str:
        text = variants.upstream_fix(stock) if self.base != "0.27.1" else stock
        old = (
            variants.WARMUP_ASSERT
            if self.base == "0.27.1"
            else "            if swa_only:\n"
            "                top_k = 0\n"
            "            else:\n"
            "                assert self.topk_indices_buffer is not None\n"
            "                top_k = self.topk_indices_buffer.shape[-1]\n"
        )
        prelude = [
            "ratio = self.compress_ratio",
            "has_buf = self.topk_indices_buffer is not None",
            "top_k = 0",
        ]
        shape = MODULE_SHAPES[self.module] if self.module else ModuleShape()
        block = "".join(" " * 12 + line + "\n" for line in [*prelude, *self.block])
        text = variants._replace_once(text, old, block if self.mode == "replace" else block + old)
        if shape.fc_import:
            text = variants._replace_once(
                text, "from vllm.forward_context import get_forward_context\n", shape.fc_import)
        if shape.ratio_test:
            text = variants._replace_once(text, " " * 12 + "swa_only = self.compress_ratio <= 1\n",
                                          " " * 12 + f"swa_only = {shape.ratio_test}\n")
        if shape.warmup:
            text = variants._replace_once(
                text, "        if attn_metadata is None:\n",
                "        if attn_metadata is None:\n" + "".join(" " * 12 + l + "\n" for l in shape.warmup))
        if shape.after:
            text = text + "\n\n" + shape.after
        body = shape.body
        if shape.init:
            body += "    def " + INIT_HELPER + "(self):\n" + "".join(
                " " * 8 + line + "\n" for line in shape.init) + "\n"
            text = variants._replace_once(text, _INIT_END, _INIT_END + " " * 8 + f"self.{INIT_HELPER}()\n")
        helpers = CLASS_HELPERS + body + ("    @_identity\n" if self.decorated else "")
        text = variants._replace_once(text, "    def forward_mqa(\n", helpers + "    def forward_mqa(\n")
        extras = "".join(STEADY_EXTRAS[name] for name in self.steady)
        text = variants._replace_once(text, _STEADY_ANCHOR, _STEADY_ANCHOR + extras)
        if shape.bases:
            text = variants._replace_once(text, _CLASS_ANCHOR, _CLASS_ANCHOR + shape.bases)
        return variants._replace_once(text, _CLASS_ANCHOR, MODULE_HELPERS + shape.top + _CLASS_ANCHOR)


@st.composite
def generated(draw):
    base = draw(st.sampled_from(["0.27.1", "0.28.0-shape"]))
    mode = draw(st.sampled_from(["replace", "prefix"]))
    keep = mode == "prefix" and draw(st.integers(0, 4)) == 0  # the base's own branch
    block = () if keep else tuple(draw(blocks()))
    decorated = draw(st.integers(0, 9)) == 0
    steady = tuple(
        name for name in sorted(STEADY_EXTRAS) if draw(st.integers(0, 3)) == 0
    )
    module = draw(st.one_of(st.none(), st.sampled_from(sorted(MODULE_SHAPES))))
    return Variant(base, mode, block, decorated, steady, module)


# --- ground truth ----------------------------------------------------------------------

_counter = itertools.count()


def load(source: str, folder: Path):
    """``source`` executed as a module from a file of its own."""
    n = next(_counter)
    _foreign_forward_context()
    path = folder / f"flashmla_gen_{n}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"flashmla_gen_{n}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import leaves it (sys.modules[__name__])
    spec.loader.exec_module(module)
    return module


def _buffer_class():
    import torch

    class Buffer(torch.Tensor):
        """A top-k buffer that is true, as a present one reads in a test."""

        def __bool__(self):
            return True

    return Buffer


class _LazyBuffer:
    cls = None


def _run(method, layer, qkv, synthetic):
    """None if the warmup runs, else (exception class name, line in flashmla)."""
    q, kv, positions, output = qkv()
    try:
        with synthetic.warmup_context():
            method(layer, q, kv, positions, output)
    except Exception as exc:  # the ground truth: whatever it raises
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if "flashmla_gen_" in f.filename]
        return (type(exc).__name__, frames[-1].lineno if frames else None)
    return None


@dataclass
class Observation:
    verdict: str
    runs: dict = field(default_factory=dict)  # layer kind -> None | (exc, line)
    plan_applies: bool = False
    patched_runs: dict = field(default_factory=dict)
    runtime_patched: bool = False
    status_verdict: str = ""
    build_error: str | None = None

    def lacks_buffer(self, runs: dict) -> list[str]:
        """The SWA-only layers (of ``runs``) whose warmup fails for lack of
        the buffer: without one it fails, and not as it does with one."""
        return [
            kind for kind in ("swa0", "swa1")
            if runs[kind] is not None and runs[kind] != self.runs[kind + "-buffer"]
        ]


def observe(variant: Variant, stock_source: str, folder: Path, synthetic) -> Observation:
    from dspark_attn_plugin import instrumentation, patch, status
    from dspark_attn_plugin.warmup_edit import plan_edit
    from dspark_attn_plugin.warmup_shape import classify_source

    text = variant.source(stock_source)
    module = load(text, folder)
    cls = module.DeepseekV4FlashMLAAttention
    kinds = {
        "swa0": synthetic.LayerKind("swa0", 0, False),
        "swa1": synthetic.LayerKind("swa1", 1, False),
        "swa0-buffer": synthetic.LayerKind("swa0b", 0, True),
        "swa1-buffer": synthetic.LayerKind("swa1b", 1, True),
        "sparse": synthetic.SPARSE_C4,
        "sparse-no-buffer": synthetic.LayerKind("sparse_nb", 4, False),
    }
    layers = {k: synthetic.make_layer(cls, kind) for k, kind in kinds.items()}
    for layer in layers.values():  # a buffer whose truth test is defined, as None's is
        if layer.topk_indices_buffer is not None:
            _LazyBuffer.cls = _LazyBuffer.cls or _buffer_class()
            layer.topk_indices_buffer = layer.topk_indices_buffer.as_subclass(_LazyBuffer.cls)
    if INIT_HELPER in cls.__dict__:  # the end of __init__, which make_layer skips
        for layer in layers.values():
            getattr(cls, INIT_HELPER)(layer)
    stock = cls.__dict__["forward_mqa"]
    obs = Observation(verdict=str(classify_source(text).verdict))
    # What runs: the class attribute as Python looks it up at call time.
    obs.runs = {k: _run(lambda *a: type(a[0]).forward_mqa(*a), layer, synthetic.qkv, synthetic)
                for k, layer in layers.items()}

    plan = plan_edit(text)
    obs.plan_applies = plan.applies
    if plan.applies:
        try:
            patched = patch._build(module, stock, lambda layer: None)
        except patch.PatchError as exc:
            obs.build_error = str(exc)
        else:
            obs.patched_runs = {
                k: _run(patched, layer, synthetic.qkv, synthetic) for k, layer in layers.items()
            }
    # The runtime's own decision on the loaded module, and status's on the file.
    instrumentation._decide(module)
    obs.runtime_patched = patch.is_patched(module)
    if obs.runtime_patched:
        patch.remove(module)
    obs.status_verdict = str(status._classify_file(str(folder), module.__file__)[0])
    return obs


def problems(obs: Observation) -> list[str]:
    """Every way the plugin's answers disagree with what ran."""
    found = []
    safe = obs.verdict in ("fixed", "not-affected")
    if safe and obs.lacks_buffer(obs.runs):
        found.append(f"read {obs.verdict} but the SWA-only warmup fails: {obs.runs}")
    if obs.plan_applies and not obs.build_error:
        if obs.lacks_buffer(obs.patched_runs):
            found.append(f"the edit applies but the edited warmup fails: {obs.patched_runs}")
        if obs.patched_runs["sparse-no-buffer"] != obs.runs["sparse-no-buffer"]:
            found.append(
                "the edit changes the sparse layer without a buffer: "
                f"{obs.runs['sparse-no-buffer']} -> {obs.patched_runs['sparse-no-buffer']}"
            )
        if obs.patched_runs["sparse"] != obs.runs["sparse"]:
            found.append("the edit changes the sparse layer with a buffer")
    # status = runtime: protected exactly where the runtime patches or leaves
    # safe code alone.
    status_protected = obs.status_verdict in ("fixed", "not-affected", "affected")
    runtime_protected = obs.runtime_patched or safe
    if status_protected != runtime_protected:
        found.append(
            f"status says {obs.status_verdict} but the runtime "
            f"{'patched' if obs.runtime_patched else 'did not patch'} ({obs.verdict})"
        )
    if obs.runtime_patched and not obs.plan_applies:
        found.append("the runtime patched code plan_edit refuses")
    return found
