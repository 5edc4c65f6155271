"""R1 by execution: the module's other code (``__init__``, helpers, other
classes) makes what the warmup reads depend on the buffer, by a way the
classifier must follow. Each variant is classified, then run: layers built
through the module's own ``__init__`` (ratio 0 and 1, with and without a
buffer) warm up under vLLM's real forward context. Every variant here fails
on SWA-only layers without the buffer (checked), so it must read
``unknown``; the plain ones never fail and must read ``not-affected``.

The kinds come from two fuzz runs by reviewers who had not read the
classifier's tests (about 7,200 variants, 3,700 of them read safe while the
run crashed before R1 followed these ways; none since).
"""

from __future__ import annotations

import collections
import importlib.util
import itertools
import sys
import textwrap

import pytest

from dspark_attn_plugin.warmup_shape import Verdict, classify_source

HEAD = """\
import collections
import contextlib
import functools
import itertools
import torch
from collections import defaultdict
from functools import cached_property
from vllm.forward_context import get_forward_context
from torch.nn import Module as Base
{top}

class DeepseekV4FlashMLAAttention(Base):
    def __init__(self, compress_ratio, topk_indices_buffer=None):
        super().__init__()
        self.compress_ratio = compress_ratio
        self.topk_indices_buffer = topk_indices_buffer
{init}
{members}
    def forward_mqa(self, q, kv, positions, output):
        attn_metadata = get_forward_context().attn_metadata
        if attn_metadata is None:
{warm}
            output.zero_()
            return
        raise RuntimeError("the steady path is not run here")
"""

BUF = "topk_indices_buffer"
# Context managers whose exit swallows an exception when told to: handed
# the flag, or reading module state.
_QUIET = ("class _Quiet:\n    def __init__(self, on):\n        self.on = on\n\n"
          "    def __enter__(self):\n        return self\n\n"
          "    def __exit__(self, *exc):\n        return self.on\n")
_STEERED = ("_MODE = {}\n\n\nclass _Steered:\n    def __enter__(self):\n        return self\n\n"
            "    def __exit__(self, *exc):\n        return _MODE.get('swa', False)\n")
_FILL_UNDER_QUIET = ("def _fill(self, _):\n    with _Quiet(self._flag):\n        raise LookupError\n"
                     "    self._ok = False\n")
_SHARED_REG = "from vllm.dspark_flows_shared import REG\n"
_RAISE_ON_FLAG = "def _fill(self, _):\n    if self._flag:\n        raise LookupError\n"
# (init lines, warmup lines, class members, module top): the warmup fails
# on SWA-only layers without the buffer, and only there.
CRASHING = {
    # the buffer's value, by way of ...
    "a-local": ("b = topk_indices_buffer\nself._b = b", "assert self._b is not None"),
    "a-second-attribute": ("self._a = topk_indices_buffer\nself._ok = self._a is not None",
                           "assert self._ok"),
    "the-buffer-attribute": ("self._b = self.topk_indices_buffer", "assert self._b is not None"),
    "a-method": ("self._keep(topk_indices_buffer)", "assert self._b is not None",
                 "def _keep(self, v):\n    self._b = v\n"),
    "a-method-called-on-the-class": (
        "DeepseekV4FlashMLAAttention._keep(self, topk_indices_buffer)",
        "assert self._b is not None", "def _keep(self, v):\n    self._b = v\n"),
    "a-nested-def": ("def keep(v):\n    self._b = v\nkeep(topk_indices_buffer)",
                     "assert self._b is not None"),
    "a-callback": ("def keep(v):\n    setattr(self, '_b', v)\nlist(map(keep, [topk_indices_buffer]))",
                   "assert self._b is not None"),
    "register-buffer": ("self.register_buffer('_b', topk_indices_buffer, persistent=False)",
                        "assert self._b is not None"),
    "nn-module-registry": ("self.register_buffer('_k', topk_indices_buffer, persistent=False)",
                           "assert next(iter(self._buffers.values())) is not None"),
    "a-local-of-an-attribute": ("self._d = {}\nd = self._d\nd['k'] = topk_indices_buffer",
                                "assert self._d['k'] is not None"),
    "unbound-list-append": ("self._l = []\nlist.append(self._l, topk_indices_buffer)",
                            "assert self._l[0] is not None"),
    "a-bound-method-mapped": ("self._l = []\nlist(map(self._l.append, [topk_indices_buffer]))",
                              "assert self._l[0] is not None"),
    "a-holder-object": ("self._h = _l = Holder()\n_l.put(topk_indices_buffer)",
                        "assert self._h.items[0] is not None", "",
                        "class Holder:\n    def __init__(self):\n        self.items = []\n\n"
                        "    def put(self, v):\n        self.items.append(v)\n"),
    "a-property-container": ("self._l = []\nself.cont.append(topk_indices_buffer)",
                             "assert self._l[0] is not None",
                             "@property\ndef cont(self):\n    return self._l\n"),
    "a-module-function-of-an-item": ("self._ls = [[]]\n_first(self._ls).append(topk_indices_buffer)",
                                     "assert self._ls[0][0] is not None", "",
                                     "def _first(x):\n    return x[0]\n"),
    "a-module-level-list": ("_SEEN.append(topk_indices_buffer is not None)", "assert _SEEN[-1]", "",
                            "_SEEN = collections.deque()\n"),
    # ... or a value chosen by a test on it
    "if-else": ("if topk_indices_buffer is None:\n    self._b = None\nelse:\n    self._b = 1",
                "assert self._b is not None"),
    "an-early-return": ("self._b = None\nif topk_indices_buffer is None:\n    return\nself._b = 1",
                        "assert self._b is not None"),
    "a-caught-assertion": ("self._b = None\ntry:\n    self._setup()\nexcept AssertionError:\n    pass",
                           "assert self._b is not None",
                           "def _setup(self):\n    assert self.topk_indices_buffer is not None\n"
                           "    self._b = 1\n"),
    "suppress": ("self._b = None\nwith contextlib.suppress(AttributeError):\n"
                 "    topk_indices_buffer.shape\n    self._b = 1", "assert self._b is not None"),
    "an-iterator-advanced": ("self.it = iter([1])\nif topk_indices_buffer is None:\n    next(self.it)",
                             "x = next(self.it)"),
    "an-iterator-advanced-through-a-local": ("self.it = it = iter([1])\nif topk_indices_buffer is None:\n"
                                             "    next(it)", "x = next(self.it)"),
    "a-loop-consuming": ("self.it = iter([1])\nif topk_indices_buffer is None:\n"
                         "    for _ in self.it:\n        break", "x = next(self.it)"),
    "a-defaultdict-read": ("self.dd = defaultdict(list)\nif topk_indices_buffer is None:\n"
                           "    self.dd['a']", "x = [0][len(self.dd)]"),
    "a-cached-property-fixed": ("self.n = 1\nif topk_indices_buffer is None:\n    self.snap\nself.n = 0",
                                "x = [0][self.snap]",
                                "@cached_property\ndef snap(self):\n    return self.n\n"),
    "a-tensor-view-filled": ("self.w = torch.zeros(2, dtype=torch.long)\n"
                             "if topk_indices_buffer is None:\n"
                             "    torch.narrow(self.w, 0, 0, 1).fill_(1)",
                             "x = [0][int(self.w.sum())]"),
    "one-object-two-attributes": ("d = {}\nself.a = d\nself.b = d\nif topk_indices_buffer is None:\n"
                                  "    self.b['k'] = 1", "x = [0][len(self.a)]"),
    "a-helper-filling-a-local": ("lst = []\nself.items = lst\nif topk_indices_buffer is None:\n"
                                 "    _fill(lst)", "x = [0][len(self.items)]", "",
                                 "def _fill(l):\n    l.append(1)\n"),
    "the-ratio-set-by-it": ("if topk_indices_buffer is None:\n    self.compress_ratio = 4",
                            "if self.compress_ratio > 1:\n    raise ValueError('sparse')"),
    # the walk: an attribute or item of what the buffer reached
    "a-derived-attribute-read": ("self._b = topk_indices_buffer", "n = self._b.shape[0]"),
    "a-derived-item-read": ("self._b = topk_indices_buffer", "n = self._b[0]"),
    # a module-level object that takes it in under another name
    "a-module-list-through-a-local": ("store = _CACHE\nstore.append(topk_indices_buffer)",
                                      "assert _CACHE[-1] is not None", "", "_CACHE = []\n"),
    "a-module-list-through-a-parameter": ("_put(_CACHE, topk_indices_buffer)",
                                          "assert _CACHE[-1] is not None", "",
                                          "_CACHE = []\n\n\ndef _put(store, v):\n    store.append(v)\n"),
    "a-module-list-as-a-default": ("_put(topk_indices_buffer)", "assert _CACHE[-1] is not None", "",
                                   "_CACHE = []\n\n\ndef _put(v, store=_CACHE):\n    store.append(v)\n"),
    "a-module-list-in-a-loop": ("for s in (_CACHE,):\n    s.append(topk_indices_buffer)",
                                "assert _CACHE[-1] is not None", "", "_CACHE = []\n"),
    "a-module-list-under-a-second-name": ("_ALSO.append(topk_indices_buffer)",
                                          "assert _CACHE[-1] is not None", "",
                                          "_CACHE = []\n_ALSO = _CACHE\n"),
    "a-module-list-in-a-module-tuple": ("_BOTH[0].append(topk_indices_buffer)",
                                        "assert _CACHE[-1] is not None", "",
                                        "_CACHE = []\n_BOTH = (_CACHE,)\n"),
    "a-module-list-in-a-module-dict": ("_by_key['k'].append(topk_indices_buffer)",
                                       "assert _CACHE[-1] is not None", "",
                                       "_CACHE = []\n_by_key = {'k': _CACHE}\n"),
    "a-module-list-held-by-an-attribute": ("self._l = _CACHE\nself._l.append(topk_indices_buffer)",
                                           "assert _CACHE[-1] is not None", "", "_CACHE = []\n"),
    "a-module-list-held-by-a-class": ("Holder.items.append(topk_indices_buffer)",
                                      "assert _CACHE[-1] is not None", "",
                                      "_CACHE = []\n\n\nclass Holder:\n    items = _CACHE\n"),
    "an-imported-dict": ("registry['_dspark_test'] = topk_indices_buffer",
                         "assert registry['_dspark_test'] is not None", "",
                         "from vllm.envs import environment_variables as registry\n"),
    # module-level state read back by another way than its name
    "a-module-list-read-through-a-default": ("_CACHE.append(topk_indices_buffer)",
                                             "assert _read()[-1] is not None", "",
                                             "_CACHE = []\n\n\ndef _read(store=_CACHE):\n    return store\n"),
    "a-module-list-read-through-a-method-default": (
        "_CACHE.append(topk_indices_buffer)", "assert self._read()[-1] is not None",
        "def _read(self, store=_CACHE):\n    return store\n", "_CACHE = []\n"),
    "a-mutable-default-filled-by-an-earlier-call": (
        "_kept().append(topk_indices_buffer)", "assert _kept()[-1] is not None", "",
        "def _kept(_m=[]):\n    return _m\n"),
    "a-class-attribute-of-a-helper-class": ("_CACHE.append(topk_indices_buffer)",
                                            "assert Holder.items[-1] is not None", "",
                                            "_CACHE = []\n\n\nclass Holder:\n    items = _CACHE\n"),
    "a-class-attribute-through-self-class": ("self.__class__.items.append(topk_indices_buffer)",
                                             "assert _CACHE[-1] is not None", "items = _CACHE\n",
                                             "_CACHE = []\n"),
    "a-class-attribute-through-type-of-self": ("type(self).items.append(topk_indices_buffer)",
                                               "assert _CACHE[-1] is not None", "items = _CACHE\n",
                                               "_CACHE = []\n"),
    "a-closure-made-by-a-module-function": (
        "_putter(_CACHE)(topk_indices_buffer)", "assert _CACHE[-1] is not None", "",
        "_CACHE = []\n\n\ndef _putter(store):\n    def put(v):\n        store.append(v)\n\n"
        "    return put\n"),
    "a-bound-method-kept-at-module-level": ("_ADD(topk_indices_buffer)",
                                            "assert _CACHE[-1] is not None", "",
                                            "_CACHE = []\n_ADD = _CACHE.append\n"),
    "a-module-list-in-an-enumerate-loop": ("for _i, s in enumerate([_CACHE]):\n"
                                           "    s.append(topk_indices_buffer)",
                                           "assert _CACHE[-1] is not None", "", "_CACHE = []\n"),
    "an-attribute-holding-module-state": ("self._r = (_CACHE,)\n_CACHE.append(topk_indices_buffer)",
                                          "assert self._r[0][-1] is not None", "", "_CACHE = []\n"),
    "a-store-into-what-a-property-returns": (
        "self._store['k'] = topk_indices_buffer", "assert _CACHE['k'] is not None",
        "@property\ndef _store(self):\n    return _CACHE\n", "_CACHE = {}\n"),
    "an-imported-dict-filled-under-its-modules-name": (
        "envs_module.environment_variables['_dspark_a'] = topk_indices_buffer",
        "assert registry['_dspark_a'] is not None", "",
        "import vllm.envs as envs_module\nfrom vllm.envs import environment_variables as registry\n"),
    "an-imported-dict-read-under-its-modules-name": (
        "registry['_dspark_b'] = topk_indices_buffer",
        "assert envs_module.environment_variables['_dspark_b'] is not None", "",
        "import vllm.envs as envs_module\nfrom vllm.envs import environment_variables as registry\n"),
    # an imported module's state (vllm.dspark_flows_shared, put in
    # sys.modules by the test): a view of its tensor filled through a local,
    # this module's list handed to its code at import
    "a-view-of-an-imported-tensor-in-a-local": (
        "v = torch.narrow(shared.T, 0, 0, 1)\nv.fill_(float(topk_indices_buffer is not None))",
        "x = 1 // int(shared.T[0])", "", "import vllm.dspark_flows_shared as shared\n"),
    "module-state-handed-to-imported-code-at-import": (
        "_STATE.append(topk_indices_buffer)", "assert adopted()[-1] is not None", "",
        "from vllm.dspark_flows_shared import adopt, adopted\n\n_STATE = []\n_KEEP = adopt(_STATE)\n"),
    "an-imported-iterator-advanced-on-a-path-the-buffer-chose": (
        "if topk_indices_buffer is None:\n    next(CYCLE)", "assert next(CYCLE) == 0", "",
        "from vllm.dspark_flows_shared import CYCLE\n"),
    "an-imported-module-s-iterator-advanced-on-a-path-the-buffer-chose": (
        "if topk_indices_buffer is None:\n    next(shared.CYCLE)", "assert next(shared.CYCLE) == 0", "",
        "import vllm.dspark_flows_shared as shared\n"),
    # torch's in-place functions (a name ending in `_`) change their first
    # argument: a local, or an imported module's tensor
    "a-local-filled-by-a-torch-init-function": (
        "w = torch.zeros(1)\ntorch.nn.init.constant_(w, float(topk_indices_buffer is not None))\n"
        "self._w = w", "x = 1 // int(self._w[0])"),
    "an-imported-tensor-filled-by-a-torch-init-function": (
        "torch.nn.init.constant_(shared.T, float(topk_indices_buffer is not None))",
        "x = 1 // int(shared.T[0])", "", "import vllm.dspark_flows_shared as shared\n"),
    # an imported dict (or list) reached by another way: a default, a class
    # body, a helper class, typing.cast, a property; cleared on a chosen path
    "an-imported-list-cleared-on-a-path-the-buffer-chose": (
        "LISTS['k'].append(1)\nif topk_indices_buffer is None:\n    LISTS['k'].clear()",
        "x = LISTS['k'][-1]", "", "from vllm.dspark_flows_shared import LISTS\n"),
    "an-imported-dict-filled-through-a-keyword-only-default": (
        "_keep(self)", "x = REG['k'].dtype", "",
        _SHARED_REG + "\n\ndef _keep(layer, *, store=REG):\n    store['k'] = layer.topk_indices_buffer\n"),
    "an-imported-dict-filled-through-a-default": (
        "_keep(self)", "x = REG['k'].dtype", "",
        _SHARED_REG + "\n\ndef _keep(layer, store=REG):\n    store['k'] = layer.topk_indices_buffer\n"),
    "an-imported-dict-named-in-the-class-body": (
        "self._registry['k'] = topk_indices_buffer", "x = REG['k'].dtype", "_registry = REG\n",
        _SHARED_REG),
    "an-imported-dict-named-in-a-helper-class-body": (
        "reg = _Registry\nreg.by_prefix['k'] = topk_indices_buffer", "x = REG['k'].dtype", "",
        _SHARED_REG + "\n\nclass _Registry:\n    by_prefix = REG\n"),
    "an-imported-dict-through-typing-cast": (
        "registry = cast(dict, REG)\nregistry['k'] = topk_indices_buffer", "x = REG['k'].dtype", "",
        "from typing import cast\n" + _SHARED_REG),
    "an-imported-dict-a-property-returns": (
        "self._registry['k'] = topk_indices_buffer", "x = self._registry['k'].dtype",
        "@property\ndef _registry(self):\n    return REG\n", _SHARED_REG),
    "an-imported-tensor-viewed-by-an-unbound-tensor-method": (
        "v = torch.Tensor.view(shared.T, -1)\nv[0] = float(topk_indices_buffer is not None)",
        "x = 1 // int(shared.T[0])", "", "import vllm.dspark_flows_shared as shared\n"),
    "module-state-held-by-an-attribute-filled-through-outside-code": (
        "w = torch.atleast_1d(_WIDTHS)\nw[0] = 4 if topk_indices_buffer is not None else -1\n"
        "self._w = _WIDTHS", "x = torch.empty((2, int(self._w[0])))", "",
        "_WIDTHS = torch.zeros(4, dtype=torch.int64)\n"),
    # the layer's state by way of ...
    "a-module-function-handed-the-layer": ("self._cache = []\n_keep(self, topk_indices_buffer)",
                                           "assert self._cache[0] is not None", "",
                                           "def _keep(layer, v):\n    layer._cache.append(v)\n"),
    "a-module-function-handed-an-attribute": ("self._l = []\n_fill(self._l, topk_indices_buffer)",
                                              "assert self._l[0] is not None", "",
                                              "def _fill(store, v):\n    store.append(v)\n"),
    "a-property-whose-instance-has-another-name": (
        "self._held = topk_indices_buffer\nself._y = self._p", "assert self._y is not None",
        "@property\ndef _p(layer):\n    return layer._held\n"),
    "a-context-managers-target": (
        "self._pool = Pool()\nwith self._pool as pool:\n    pool.items.append(topk_indices_buffer)",
        "assert self._pool.items[0] is not None", "",
        "class Pool:\n    def __init__(self):\n        self.items = []\n\n"
        "    def __enter__(self):\n        return self\n\n"
        "    def __exit__(self, *exc):\n        return False\n"),
    "a-case-pattern-naming-it": (
        "self._b = topk_indices_buffer\nmatch None:\n    case self._b:\n        self._ok = False\n"
        "    case _:\n        self._ok = True", "assert self._ok"),
    # a context manager's exit swallows, by the buffer, what its body
    # raises: what follows the `with` runs only where it did; module code
    # handed to outside code (map, a sort key) that raises by the buffer
    "a-method-run-by-map-under-a-manager-handed-the-flag": (
        "self._flag = topk_indices_buffer is None\nself._ok = True\n"
        "try:\n    list(map(self._fill, [0]))\nexcept LookupError:\n    pass",
        "assert self._ok", _FILL_UNDER_QUIET, _QUIET),
    "a-method-run-by-map-raising-by-the-buffer": (
        "self._flag = topk_indices_buffer is not None\nself._ok = True\n"
        "try:\n    list(map(self._fill, [0]))\n    self._ok = False\nexcept LookupError:\n    pass",
        "assert self._ok", _RAISE_ON_FLAG, _QUIET),
    "a-sort-key-raising-by-the-buffer": (
        "self._flag = topk_indices_buffer is not None\nself._ok = True\n"
        "try:\n    sorted([0, 1], key=self._fill)\n    self._ok = False\nexcept LookupError:\n    pass",
        "assert self._ok", _RAISE_ON_FLAG, _QUIET),
    "a-manager-whose-exit-reads-module-state": (
        "_MODE['swa'] = topk_indices_buffer is None\nself._ok = True\n"
        "try:\n    self._fill(0)\nexcept LookupError:\n    pass",
        "assert self._ok",
        "def _fill(self, _):\n    with _Steered():\n        raise LookupError\n    self._ok = False\n",
        _STEERED),
    "a-held-manager-whose-exit-reads-module-state": (
        "_MODE['swa'] = topk_indices_buffer is None\nself._q = _Steered()\nself._ok = True\n"
        "try:\n    self._fill(0)\nexcept LookupError:\n    pass",
        "assert self._ok",
        "def _fill(self, _):\n    with self._q:\n        raise LookupError\n    self._ok = False\n",
        _STEERED),
    "a-manager-a-method-picks-by-the-buffer": (
        "self._ok = True\ntry:\n    self._fill(0)\nexcept LookupError:\n    pass",
        "assert self._ok",
        "def _fill(self, _):\n    with self._pick():\n        raise LookupError\n    self._ok = False\n\n"
        "def _pick(self):\n    return _Swallow() if self.topk_indices_buffer is None else _Pass()\n",
        "class _Swallow:\n    def __enter__(self):\n        return self\n\n"
        "    def __exit__(self, *exc):\n        return True\n\n\n"
        "class _Pass:\n    def __enter__(self):\n        return self\n\n"
        "    def __exit__(self, *exc):\n        return False\n"),
    "a-local-def-rebound-to-a-method-that-raises-by-the-buffer": (
        "def g(_):\n    return None\ng = self._check\nself._ok = True\n"
        "try:\n    g(0)\nexcept LookupError:\n    self._ok = False",
        "assert self._ok",
        "def _check(self, _):\n    if self.topk_indices_buffer is None:\n        raise LookupError\n"),
    # longer than the fixpoint's 200 rounds: every attribute may hold it
    "a-chain-of-methods-longer-than-the-fixpoint": (
        "self._y = self._m0()", "assert self._y is not None",
        "".join(f"def _m{i}(self):\n    return self._m{i + 1}()\n\n" for i in range(205))
        + "def _m205(self):\n    return self.topk_indices_buffer\n"),
}
PLAIN = {
    "a-parameter": ("self._b = compress_ratio + 1", "assert self._b is not None"),
    "beside-the-buffer": ("buf = topk_indices_buffer\nself._note(buf)\nself._b = 1",
                          "assert self._b is not None", "def _note(self, v):\n    self._seen = v\n"),
    "an-iterator-not-chosen": ("self.it = iter([1])\nif compress_ratio == 4:\n    next(self.it)",
                               "x = next(self.it)"),
    "a-getattr-append": ("self._a0 = []\ngetattr(self, '_a0').append(torch.zeros(2))",
                         "assert self._a0[0] is not None"),
    "a-holder-of-other-things": ("self._h = Holder()\nself._h.put(1)\nself._other = topk_indices_buffer",
                                 "assert self._h.items[0] is not None", "",
                                 "class Holder:\n    def __init__(self):\n        self.items = []\n\n"
                                 "    def put(self, v):\n        self.items.append(v)\n"),
    "module-state-the-warmup-never-reads": ("_CACHE.append(topk_indices_buffer)",
                                            "assert self.compress_ratio is not None", "",
                                            "_CACHE = []\n"),
    "a-method-run-by-map-that-never-raises": (
        "self._ok = True\ntry:\n    list(map(self._norm, [0]))\n    self._ok = False\n"
        "except LookupError:\n    pass",
        "assert not self._ok", "def _norm(self, x):\n    return x + 1\n", _QUIET),
    "a-local-deleted-before-a-store": ("tmp = [topk_indices_buffer]\ndel tmp\nself._b = 1",
                                       "assert self._b is not None"),
    "a-torch-submodule-named-on-a-path-the-buffer-chose": (
        "if topk_indices_buffer is not None:\n    self._i = id(F.relu)",
        "assert F.relu(torch.ones(1))[0] == 1", "", "import torch.nn.functional as F\n"),
    "a-setattr-of-another-name": ("w = 128\nsetattr(self, 'window_size_', w)\nself._w = w",
                                  "assert self._w is not None"),
    # a method's *args take only what its callers pass (a private name
    # sorts before __init__: not a constructor)
    "a-private-method-s-star-arguments": ("self._b = self.__first(1, 2)", "assert self._b is not None",
                                          "def __first(self, *values):\n    return values[0]\n"),
    "more-arguments-than-parameters-into-star-args": (
        "self._b = self._sum(1, 2, 3)", "assert self._b == 6",
        "def _sum(self, a, *rest):\n    return a + sum(rest)\n"),
    # a builtin called on a path the buffer chose holds nothing afterwards
    "a-builtin-called-on-a-path-the-buffer-chose": (
        "if topk_indices_buffer is not None:\n    x = len([1])\nself._n = len([2])", "assert self._n == 1"),
    "a-class-defined-in-init": ("class _Local:\n    pass\nself._b = 1", "assert self._b is not None"),
    "the-buffer-registered-under-another-name": (
        "self.register_buffer('_keep', topk_indices_buffer)\nself._w = 1", "assert self._w is not None"),
}

_counter = itertools.count()


def _source(init: str, warm: str, members: str = "", top: str = "") -> str:
    return HEAD.format(top=top, init=textwrap.indent(init, " " * 8),
                       members=textwrap.indent(members, " " * 4),
                       warm=textwrap.indent(warm, " " * 12))


def _shared_module():
    """A module of vLLM's package (in ``sys.modules`` only) with state of its
    own: a tensor, code that keeps what it is handed, an iterator, a dict
    and a dict of lists."""
    import types

    import torch

    shared = types.ModuleType("vllm.dspark_flows_shared")
    shared.T = torch.ones(4)
    kept = []
    shared.adopt = lambda obj: kept.append(obj) or obj
    shared.adopted = lambda: kept[-1]
    shared.CYCLE = itertools.cycle([0, 1])  # 0 at each warmup, unless advanced before
    shared.REG = {}
    shared.LISTS = collections.defaultdict(list)
    sys.modules[shared.__name__] = shared  # fresh for each variant: its own iterator, dict, lists


def _fails_without_the_buffer(source: str, tmp_path) -> bool:
    """The warmup of an SWA-only layer built through ``__init__`` fails
    without the buffer and not with it (ratio 0 or 1)."""
    import torch
    from dspark_attn_plugin import synthetic

    _shared_module()

    path = tmp_path / f"flashmla_flow_{next(_counter)}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)

    def outcome(ratio, buffer):
        module_state = {k: v for k, v in vars(module).items() if k.isupper()}
        try:
            layer = module.DeepseekV4FlashMLAAttention(ratio, buffer)
            with synthetic.warmup_context():
                layer.forward_mqa(*synthetic.qkv())
        except Exception as exc:  # the ground truth: whatever it raises
            return type(exc).__name__
        finally:
            for k, v in module_state.items():  # module-level lists start empty again
                if hasattr(v, "clear"):
                    v.clear()
        return None

    buffer = torch.zeros((8, 4), dtype=torch.int32)
    return any(
        outcome(r, None) is not None and outcome(r, None) != outcome(r, buffer) for r in (0, 1)
    )


@pytest.mark.parametrize("name", sorted(CRASHING))
def test_state_the_buffer_reaches_through_the_module_is_never_read_safe(name, tmp_path):
    source = _source(*CRASHING[name])
    assert _fails_without_the_buffer(source, tmp_path), "the variant must fail without it"
    result = classify_source(source)
    assert result.verdict is Verdict.UNKNOWN, result.reason


@pytest.mark.parametrize("name", sorted(PLAIN))
def test_state_the_buffer_never_reaches_stays_safe(name, tmp_path):
    source = _source(*PLAIN[name])
    assert not _fails_without_the_buffer(source, tmp_path)
    result = classify_source(source)
    assert result.verdict is Verdict.NOT_AFFECTED, result.reason
