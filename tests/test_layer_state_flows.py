"""What a fork's ``__init__``, helpers and module do with the layer's state,
and what the warmup then reads: the buffer or a change it chose, kept under
another name (an attribute, a list, a class-level list, an imported
module's object, an iterator), is never read as safe; plain bookkeeping
beside it (a lambda that only tests the buffer, a copy of other values, a
helper with ``*args``) still reads fixed, and never makes the classifier
raise.

Each case is one a reviewer found by running the classifier's mutants
(``tests/mutation_score.py``, survivors of ``warmup_shape/aliases.py``):
the mutant read it otherwise; or one a reviewer's probe of generated
forks found read ``fixed`` while it crashed (``probe-*``, ``probe2-*``),
or read ``unknown`` while it was plain (``probe-control-*``). Each unsafe case was run as Python on a
stand-in layer with the buffer None: the warmup fails (``None.shape``, a
drained iterator, an emptied list, a failing assert), and it runs with a
tensor. Sources are vLLM 0.27.1's ``flashmla.py`` with vLLM #50693 applied
(fixed), changed by ``test_module_as_loaded.build`` and lines appended to
``__init__``.
"""

from __future__ import annotations

import pytest

from dspark_attn_plugin.warmup_shape import Verdict, classify_source

from test_module_as_loaded import build, stock  # noqa: F401  (the fixture: vLLM 0.27.1's source)

# The last line of DeepseekV4FlashMLAAttention.__init__ in vLLM 0.27.1.
INIT_END = "        self._einsum_recipe, self._tma_aligned_scales = compute_fp8_einsum_recipe()\n"


def fork(stock: str, *, init=(), **changes) -> str:
    """The fixed source changed by ``build`` and ``init``'s lines at the end
    of ``__init__``."""
    text = build(stock, **changes)
    assert text.count(INIT_END) == 1
    return text.replace(INIT_END, INIT_END + "".join(" " * 8 + line + "\n" for line in init))


NEVER_SAFE = [
    pytest.param(dict(warmup=('x = self._pending[-1].shape[-1]',), init=('pending = type(self)._pending', 'pending.append(self.topk_indices_buffer)')),
                 id='class-list-of-type(self)-takes-the-buffer'),  # type(self)._pending takes the buffer in; the warmup reads it back
    pytest.param(dict(top='def _remember(store, value):\n    store.append(value)\n\n\n', warmup=('x = self._seen[-1].shape[-1]',), init=('self._seen = []', '_remember(self._seen, self.topk_indices_buffer)')),
                 id='module-function-appends-to-the-layers-list'),  # a module function appends the buffer to the layer's list
    pytest.param(dict(warmup=('x = self._init_kwargs["topk_indices_buffer"].shape[-1]',), init=('self._init_kwargs = kwargs',)),
                 id='init-kwargs-kept'),  # __init__ keeps its **kwargs (vLLM passes topk_indices_buffer=None by keyword)
    pytest.param(dict(top='import vllm.envs as envs\n\n\n', warmup=('x = envs.PENDING[-1] + 1',), init=('if self.topk_indices_buffer is None:', '    envs.PENDING.pop()')),
                 id='imported-module-object-popped-by-the-buffer'),  # envs.PENDING.pop() under a test on the buffer
    pytest.param(dict(warmup=('x = self._seen[-1].shape[-1]',), body='    def configure(self):\n        setattr(self, "_remember", self._seen.append)\n        self._remember(self.topk_indices_buffer)\n\n', init=('self._seen = []', 'self.configure()')),
                 id='bound-append-stored-by-setattr'),  # setattr stores list.append, called with the buffer
    pytest.param(dict(warmup=('x = self._bufs["topk_indices_buffer"].shape[-1]',), body='    def configure(self):\n        self._bufs = dict(self._buffers)\n\n', init=('self.configure()',)),
                 id='copy-of-the-module-buffers-registry'),  # dict(self._buffers) copies the registry the buffer is in
    pytest.param(dict(top='def _topk_of(layer):\n    return layer.topk_indices_buffer\n\n\n', warmup=('x = self._topk.shape[-1]',), init=('self._topk = _topk_of(self)',)),
                 id='module-function-returns-the-layers-buffer'),  # a module function handed the layer returns its buffer
    pytest.param(dict(warmup=('i = next(self._ids)',), body='    def configure(self):\n        match self.topk_indices_buffer:\n            case None:\n                pass\n            case _:\n                return\n        next(self._ids)\n\n', init=('self._ids = iter(range(1))', 'self.configure()')),
                 id='match-on-the-buffer-returns-early'),  # a match on the buffer returns early, else advances an iterator
    pytest.param(dict(warmup=('i = next(self._ids)',), body='    def configure(self):\n        skipped = [0 for t in (self.topk_indices_buffer,) if t is None for _ in self._ids]\n\n', init=('self._ids = iter(range(1))', 'self.configure()')),
                 id='comprehension-filtered-by-the-buffer-drains-an-iterator'),  # a comprehension filtered by the buffer drains an iterator
    pytest.param(dict(warmup=('i = next(self._ids)',), body='    def configure(self):\n        skipped = [next(self._ids) for t in (self.topk_indices_buffer,) if t is None]\n\n', init=('self._ids = iter(range(1))', 'self.configure()')),
                 id='comprehension-element-advances-an-iterator'),  # a comprehension whose element advances an iterator, filtered by the buffer
    pytest.param(dict(warmup=('x = self._seen[-1].shape[-1]',), body='    def configure(self):\n        (lambda store, item: store.append(item))(self._seen, self.topk_indices_buffer)\n\n', init=('self._seen = []', 'self.configure()')),
                 id='lambda-called-at-once-appends-the-buffer'),  # a lambda called where it is written appends the buffer
    pytest.param(dict(warmup=('x = self._topk.shape[-1]',), body="    def set_topk(self, buf):\n        self.register_buffer('topk_indices_buffer', buf, persistent=False)\n        self._topk = buf\n\n"),
                 id='setter-registers-the-buffer-and-keeps-it'),  # a setter registers the buffer and keeps it under another name
    pytest.param(dict(top='from vllm.model_executor.layers.utils import attach_topk_view\n\n\n', warmup=('x = self._topk_view.shape[-1]',), body='    def configure(self):\n        attach_topk_view(self)\n\n', init=('self.configure()',)),
                 id='outside-function-handed-the-layer'),  # an imported function handed the layer
    pytest.param(dict(warmup=('for hook in self._warmup_hooks:', '    hook()'), body='    def _check_topk(self):\n        assert self.topk_indices_buffer is not None\n\n    def configure(self):\n        setattr(self, "_warmup_hooks", (self._check_topk,))\n\n', init=('self.configure()',)),
                 id='hook-method-stored-by-setattr'),  # setattr stores a method that asserts the buffer; the warmup calls it
    pytest.param(dict(warmup=('assert not self._swa_mask.any()',), body='    def configure(self):\n        torch.nn.init.constant_(self._swa_mask, float(self.topk_indices_buffer is None))\n\n', init=('self._swa_mask = torch.zeros(4)', 'self.configure()')),
                 id='torch-nn-init-constant-by-the-buffer'),  # torch.nn.init.constant_(mask, buffer is None)
    pytest.param(dict(top='from vllm.envs import LAYER_IDS\n\n\n', warmup=('idx = next(LAYER_IDS)',), init=('if self.topk_indices_buffer is None:', '    next(LAYER_IDS)')),
                 id='from-imported-iterator-advanced-by-the-buffer'),  # next(LAYER_IDS) under a test on the buffer
    pytest.param(dict(warmup=('i = next(self._ids)',), body='    def configure(self):\n        ids = self._ids\n        if self.topk_indices_buffer is None:\n            next(ids)\n\n', init=('self._ids = iter(range(1))', 'self.configure()')),
                 id='iterator-alias-advanced-by-the-buffer'),  # a local alias of the layer's iterator advanced under a test on the buffer
    # An exception raised for the buffer's sake where Python swallows it
    # with no try in sight: what follows the raise runs only without it.
    pytest.param(dict(warmup=('i = next(self._ids)',), body='    @property\n    def _armed(self):\n        if self.topk_indices_buffer is not None:\n            raise AttributeError("sparse layer")\n        next(self._ids)\n        return True\n\n', init=('self._ids = iter(range(1))', 'hasattr(self, "_armed")')),
                 id='property-raising-for-the-buffer-read-by-hasattr'),  # hasattr swallows the AttributeError
    pytest.param(dict(warmup=('i = next(self._ids)',), body='    @property\n    def _armed(self):\n        if self.topk_indices_buffer is not None:\n            raise AttributeError("sparse layer")\n        next(self._ids)\n        return True\n\n', init=('self._ids = iter(range(1))', 'getattr(self, "_armed", None)')),
                 id='property-raising-for-the-buffer-read-by-getattr-with-a-default'),
    pytest.param(dict(top='class _Once:\n    def __init__(self, layer):\n        self.layer = layer\n\n    def __iter__(self):\n        return self\n\n    def __next__(self):\n        if self.layer.topk_indices_buffer is not None:\n            raise StopIteration\n        next(self.layer._ids)\n        return 1\n\n\n', warmup=('i = next(self._ids)',), init=('self._ids = iter(range(1))', 'next(_Once(self), None)')),
                 id='dunder-next-stopping-for-the-buffer-under-next-with-a-default'),  # next(it, None) swallows StopIteration
    pytest.param(dict(top='class _Once:\n    def __init__(self, layer):\n        self.layer = layer\n\n    def __iter__(self):\n        return self\n\n    def __next__(self):\n        if self.layer.topk_indices_buffer is not None:\n            raise StopIteration\n        next(self.layer._ids)\n        return 1\n\n\n', warmup=('i = next(self._ids)',), init=('self._ids = iter(range(1))', 'for _ in _Once(self):', '    break')),
                 id='dunder-next-stopping-for-the-buffer-under-a-for'),
    pytest.param(dict(top='class _Once:\n    def __init__(self, layer):\n        self.layer = layer\n\n    def step(self):\n        if self.layer.topk_indices_buffer is None:\n            next(self.layer._ids)\n        return 1\n\n\n', warmup=('i = next(self._ids)',), init=('self._ids = iter(range(1))', '_Once(self).step()')),
                 id='another-object-keeps-the-layer-and-advances-its-iterator'),  # self.layer = layer, then self.layer._ids
    # A held-out probe of the rules above (run on the stand-in: each fails
    # the warmup without the buffer, runs with it).
    pytest.param(dict(body='    def _sparse_guard(self):\n        if self.topk_indices_buffer is not None:\n            raise AttributeError("sparse")\n\n    @property\n    def _armed(self):\n        x = (self._sparse_guard(), next(self._ids))\n        return True\n\n', init=('self._ids = iter(range(1))', 'hasattr(self, "_armed")'), warmup=('i = next(self._ids)',)),
                 id='probe-tuple-after-guard'),
    pytest.param(dict(body='    @property\n    def _armed(self):\n        x = (self.topk_indices_buffer.shape, self._ready.append(1))\n        return True\n\n', init=('self._ready = []', 'hasattr(self, "_armed")'), warmup=('x = self._ready[-1] + 1',)),
                 id='probe-tuple-after-shape'),
    pytest.param(dict(body='    @property\n    def _armed(self):\n        return max(self.topk_indices_buffer.shape[-1], self._ready.append(1) or 0)\n\n', init=('self._ready = []', 'hasattr(self, "_armed")'), warmup=('x = self._ready[-1] + 1',)),
                 id='probe-call-args'),
    pytest.param(dict(body='    @property\n    def _armed(self):\n        assert self.topk_indices_buffer is not None, (next(self._ids), self._no_such_attr)\n        return True\n\n', init=('self._ids = iter(range(1))', 'hasattr(self, "_armed")'), warmup=('i = next(self._ids)',)),
                 id='probe-assert-message'),
    pytest.param(dict(body='    def _arm(self):\n        if self.topk_indices_buffer is not None:\n            raise AttributeError("sparse")\n        next(self._ids)\n\n    @property\n    def _armed(self):\n        getattr(self, "_arm")()\n        return True\n\n', init=('self._ids = iter(range(1))', 'hasattr(self, "_armed")'), warmup=('i = next(self._ids)',)),
                 id='probe-getattr-string'),
    pytest.param(dict(top='class _Mixin:\n    def _arm(self):\n        if self.topk_indices_buffer is not None:\n            raise AttributeError("sparse")\n        next(self._ids)\n\n\n', bases='_Mixin, ', body='    @property\n    def _armed(self):\n        super()._arm()\n        return True\n\n', init=('self._ids = iter(range(1))', 'hasattr(self, "_armed")'), warmup=('i = next(self._ids)',)),
                 id='probe-super-mixin'),
    pytest.param(dict(init=('self._ids = iter(range(1))', '_ = self.topk_indices_buffer is None != next(self._ids)'), warmup=('i = next(self._ids)',)),
                 id='probe-chained-comparison'),
    pytest.param(dict(body='    def _steps(self):\n        yield self.topk_indices_buffer is not None\n        next(self._ids)\n\n', init=('self._ids = iter(range(1))', 'any(self._steps())'), warmup=('i = next(self._ids)',)),
                 id='probe-generator-any'),
    pytest.param(dict(body='    def _steps(self):\n        yield self.topk_indices_buffer is not None\n        self._seen.pop()\n\n', init=('self._seen = [torch.zeros(4, 8)]', 'for f in self._steps():', '    if f:', '        break'), warmup=('x = self._seen[-1].shape[-1]',)),
                 id='probe-generator-for-break'),
    pytest.param(dict(body='    def _steps(self):\n        yield 0\n        next(self._ids)\n        yield 1\n\n', init=('self._ids = iter(range(1))', 'g = self._steps()', 'next(g)', 'if self.topk_indices_buffer is None:', '    next(g)'), warmup=('i = next(self._ids)',)),
                 id='probe-generator-resumed-under-test'),
    pytest.param(dict(body='    def _steps(self):\n        yield 0\n        next(self._ids)\n        yield 1\n\n', init=('self._ids = iter(range(1))', 'g = self._steps()', 'next(g)', 'if self.topk_indices_buffer is not None:', '    g.close()', 'for _ in g:', '    pass'), warmup=('i = next(self._ids)',)),
                 id='probe-generator-closed-under-test'),
    pytest.param(dict(init=('self._seen = [torch.zeros(4, 8)]', 'self._seen[int(self.topk_indices_buffer is not None):] = []'), warmup=('x = self._seen[-1].shape[-1]',)),
                 id='probe-slice-clear'),
    pytest.param(dict(init=('self._mask = torch.zeros(4)', 'self._mask[:int(self.topk_indices_buffer is None)] = 1.0'), warmup=('assert not self._mask.any()',)),
                 id='probe-mask-slice'),
    pytest.param(dict(init=('self._cfg = {"w": 4, "u": 0}', 'del self._cfg["w" if self.topk_indices_buffer is None else "u"]'), warmup=('x = self._cfg["w"] + 1',)),
                 id='probe-dict-key-del'),
    pytest.param(dict(body='    def _mine(self):\n        yield self\n\n', init=('self._mask = torch.zeros(4)', 'if self.topk_indices_buffer is None:', '    next(self._mine())._mask.fill_(1)'), warmup=('assert not self._mask.any()',)),
                 id='probe-generator-yields-self'),
    pytest.param(dict(init=('self._ids = iter(range(1))', 'get = lambda: self', 'if self.topk_indices_buffer is None:', '    next(get()._ids)'), warmup=('i = next(self._ids)',)),
                 id='probe-closure-lambda'),
    pytest.param(dict(body='    def _me(self):\n        return self\n\n', init=('self._ids = iter(range(1))', 'if self.topk_indices_buffer is None:', '    next(self._me()._ids)'), warmup=('i = next(self._ids)',)),
                 id='probe-method-returns-self'),
    pytest.param(dict(body='    def _sparse_guard(self):\n        if self.topk_indices_buffer is not None:\n            raise AttributeError("sparse")\n\n    @property\n    def _armed(self):\n        get = lambda: self\n        self._sparse_guard()\n        next(get()._ids)\n        return True\n\n', init=('self._ids = iter(range(1))', 'hasattr(self, "_armed")'), warmup=('i = next(self._ids)',)),
                 id='probe-swallowed-plus-closure'),
    pytest.param(dict(init=('self._mask = torch.zeros(4)', 'torch.nn.functional.threshold(self._mask, 0.5, float(self.topk_indices_buffer is None), inplace=True)'), warmup=('assert not self._mask.any()',)),
                 id='probe-threshold-inplace'),
    # The forks that told the six open mutants of aliases.py apart (each
    # read fixed under its mutant; each fails the warmup without the buffer).
    pytest.param(dict(top='import contextlib\n\n\n', warmup=('i = next(self._ids)',), init=('self._ids = iter(range(1))', 'with contextlib.suppress(*([KeyError] if self.topk_indices_buffer is None else [])):', '    raise KeyError', 'next(self._ids)')),
                 id='suppress-chosen-by-the-buffer-swallows-a-raise'),  # steered_manager: the manager carries the buffer
    pytest.param(dict(top='import contextlib\n\n\n', warmup=('i = next(self._ids)',), init=('self._ids = iter(range(1))', '@contextlib.contextmanager', 'def quiet():', '    try:', '        yield', '    except KeyError:', '        if self.topk_indices_buffer is not None:', '            raise', 'with quiet():', '    raise KeyError', 'next(self._ids)')),
                 id='nested-context-manager-re-raises-by-the-buffer'),  # steered_manager: its callee touches the buffer
    pytest.param(dict(top='def _configure(layer):\n    seen = None\n    for _ in range(2):\n        if seen is not None:\n            seen.append(layer.topk_indices_buffer)\n        seen = layer._seen\n\n\n', warmup=('x = self._seen[-1].shape[-1]',), init=('self._seen = []', '_configure(self)')),
                 id='local-learnt-to-be-the-layers-list-on-a-later-round'),  # bind's views need another round of the fixpoint
    pytest.param(dict(top='from vllm.envs.torch import LAYER_IDS\n\n\n', warmup=('idx = next(LAYER_IDS)',), init=('if self.topk_indices_buffer is None:', '    next(LAYER_IDS)')),
                 id='iterator-from-a-module-whose-last-name-is-torch'),  # torch_names: torch is the first dotted name only
    pytest.param(dict(warmup=('i = next(self._ids)',), body='    def configure(self):\n        if self.topk_indices_buffer is not None:\n            return\n        next(self._ids)\n\n', init=('self._ids = iter(range(1))', 'self.configure()')),
                 id='return-for-the-buffer-then-advance-an-iterator'),  # an if whose body leaves: what follows is chosen
    pytest.param(dict(warmup=('x = self.warmup_buffers[-1].shape[-1]',), init=('self.warmup_buffers = []', 'self.warmup_buffers.append(self.topk_indices_buffer)')),
                 id='list-attribute-named-after-the-buffer-takes-it'),  # self.warmup_buffers.append(buffer)
    pytest.param(dict(warmup=('x = self._tables[0]["topk"].shape[-1]',), body='    def configure(self):\n        min(self._tables, key=len)["topk"] = self.topk_indices_buffer\n\n', init=('self._tables = [{}, {}]', 'self.configure()')),
                 id='min-with-a-builtin-key-stores-the-buffer'),  # min(tables, key=len)['topk'] = buffer, the warmup reads it
    pytest.param(dict(warmup=('x = self._seen[-1].shape[-1]',), body='    def _history(self):\n        return self._seen\n\n    def configure(self):\n        self._history().append(self.topk_indices_buffer)\n\n', init=('self._seen = []', 'self.configure()')),
                 id='method-returns-the-layers-list-that-takes-the-buffer'),  # a method returns the layer's list; the buffer is appended to it
    pytest.param(dict(top='from vllm.envs import PENDING\n\n\n', warmup=('x = PENDING[-1] + 1',), init=('if self.topk_indices_buffer is None:', '    PENDING.pop()')),
                 id='from-imported-object-popped-by-the-buffer'),  # PENDING.pop() under a test on the buffer, PENDING from-imported
    pytest.param(dict(warmup=('assert not self._swa_mask.any()',), body='    def configure(self):\n        torch.fill_(self._swa_mask, self.topk_indices_buffer is None)\n\n', init=('self._swa_mask = torch.zeros(4, dtype=torch.bool)', 'self.configure()')),
                 id='torch-fill_-by-the-buffer'),  # torch.fill_(mask, buffer is None)
    # A held-out reviewer's (2026-12-06): an object a default argument's call
    # made, shared by every call, filled with the buffer and read back.
    pytest.param(dict(top="from collections import OrderedDict\n\n\n",
                      body="    def _topk_registry(self, _registry=OrderedDict()):\n        return _registry\n\n",
                      init=('self._topk_registry()["topk"] = self.topk_indices_buffer',),
                      warmup=('width = self._topk_registry()["topk"].shape[-1]',)),
                 id='default-argument-made-by-a-call-keeps-the-buffer'),
    pytest.param(dict(top="from collections import defaultdict\n\n\n"
                          "def _shared_topk(_cache=defaultdict(list)):\n    return _cache\n\n\n",
                      init=('_shared_topk()["topk"].append(self.topk_indices_buffer)',),
                      warmup=('width = _shared_topk()["topk"][-1].shape[-1]',)),
                 id='module-function-default-made-by-a-call-keeps-the-buffer'),
    # A static method's first parameter takes the first argument (no self):
    # the buffer handed second is the one kept.
    pytest.param(dict(body='    @staticmethod\n    def _keep(store, value):\n        store.append(value)\n\n',
                      init=('self._kept = []', 'self._keep(self._kept, self.topk_indices_buffer)'),
                      warmup=('x = self._kept[-1].shape[-1]',)),
                 id='static-method-handed-a-list-and-the-buffer'),
    # torch's in-place and view functions called by the name `from ...
    # import` binds (read fixed before 2026-12-06 late evening: the
    # classifier knew them only as torch.fill_(...), torch.narrow(...)).
    pytest.param(dict(top='from torch import fill_\n\n\n', warmup=('assert not self._swa_mask.any()',),
                      init=('self._swa_mask = torch.zeros(4, dtype=torch.bool)',
                            'fill_(self._swa_mask, self.topk_indices_buffer is None)')),
                 id='from-imported-fill_-by-the-buffer'),
    pytest.param(dict(top='from torch.nn.init import constant_ as fill\n\n\n', warmup=('x = 1 // int(self._flag[0])',),
                      init=('self._flag = torch.ones(1)', 'fill(self._flag, float(self.topk_indices_buffer is not None))')),
                 id='from-imported-constant_-renamed-by-the-buffer'),
    pytest.param(dict(top='from torch import narrow as cut\n\n\n', warmup=('x = 1 // int(self._flag[0])',),
                      init=('self._flag = torch.ones(2)', 'v = cut(self._flag, 0, 0, 1)',
                            'v[0] = float(self.topk_indices_buffer is not None)')),
                 id='view-by-a-from-imported-narrow-set-by-the-buffer'),
    # A method of a module class called on an instance that is not the
    # layer: its first parameter is the instance, the next take the arguments.
    pytest.param(dict(top='class _Keeper:\n    def put(self, store, v):\n        store.append(v)\n\n\n',
                      init=('self._kept = []', 'k = _Keeper()', 'k.put(self._kept, self.topk_indices_buffer)'),
                      warmup=('x = self._kept[-1].shape[-1]',)),
                 id='method-of-another-instance-handed-a-list-and-the-buffer'),
    # The buffer stored from a list the layer keeps: the list's item is the
    # buffer, read back by the warmup under the list's name.
    pytest.param(dict(init=('kept = [None]', 'self.topk_indices_buffer = kept[0]', 'self._kept = kept'),
                      warmup=('x = self._kept[0].shape[-1]',)),
                 id='buffer-stored-from-a-list-the-layer-keeps'),
    # Python's code handed a value the buffer decides (a count, a
    # sequence repeated by it) advances or empties what it is handed
    # beside it; iterators over the layer's (map, itertools.chain) kept and
    # advanced later (read fixed before 2026-12-07).
    pytest.param(dict(init=('self._ids = iter(range(1))', 'list(zip([0] * (self.topk_indices_buffer is None), self._ids))'), warmup=('i = next(self._ids)',)),
                 id='zip-advances-the-layers-iterator-by-a-count-the-buffer-decides'),
    pytest.param(dict(top='import itertools\n\n\n', init=('self._ids = iter(range(1))', 'list(itertools.islice(self._ids, int(self.topk_indices_buffer is None)))'), warmup=('i = next(self._ids)',)),
                 id='islice-of-the-layers-iterator-by-the-buffer'),
    pytest.param(dict(init=('self._ids = iter(range(1))', 'list(map(next, [self._ids] * (self.topk_indices_buffer is None)))'), warmup=('i = next(self._ids)',)),
                 id='map-next-over-the-layers-iterator-repeated-by-the-buffer'),
    pytest.param(dict(init=('self._seen = [1]', 'list(map(list.clear, [self._seen] * (self.topk_indices_buffer is None)))'), warmup=('x = self._seen[0]',)),
                 id='list-clear-mapped-over-the-layers-list-repeated-by-the-buffer'),
    pytest.param(dict(init=('self._seen = [1]', 'list(map(list.clear, () + (self._seen,) * (self.topk_indices_buffer is None)))'), warmup=('x = self._seen[0]',)),
                 id='tuple-concatenation-repeated-by-the-buffer'),
    pytest.param(dict(init=('self._seen = [1]', 's = self._seen', 'for x in [s] * (self.topk_indices_buffer is None):', '    x.clear()'), warmup=('x = self._seen[0]',)),
                 id='loop-over-a-local-list-repeated-by-the-buffer'),
    pytest.param(dict(init=('self._ids = iter(range(1))', 'self._m = map(next, [self._ids])', 'if self.topk_indices_buffer is None:', '    next(self._m)'), warmup=('i = next(self._ids)',)),
                 id='lazy-map-kept-on-the-layer-advanced-by-the-buffer'),
    pytest.param(dict(init=('self._ids = iter(range(1))', 'm = map(next, [self._ids])', 'if self.topk_indices_buffer is None:', '    next(m)'), warmup=('i = next(self._ids)',)),
                 id='lazy-map-in-a-local-advanced-by-the-buffer'),
    pytest.param(dict(top='import itertools\n\n\n', init=('self._ids = iter(range(1))', 'self._c = itertools.chain(self._ids)', 'if self.topk_indices_buffer is None:', '    next(self._c)'), warmup=('i = next(self._ids)',)),
                 id='itertools-chain-kept-on-the-layer-advanced-by-the-buffer'),
    pytest.param(dict(top='import itertools\n\n\n', init=('self._ids = iter(range(1))', 'c = itertools.chain(self._ids)', 'if self.topk_indices_buffer is None:', '    next(c)'), warmup=('i = next(self._ids)',)),
                 id='itertools-chain-in-a-local-advanced-by-the-buffer'),
    pytest.param(dict(init=('self._ids = iter(range(1))', 'sum(1 for _ in zip(range(self.topk_indices_buffer is None), self._ids))'), warmup=('i = next(self._ids)',)),
                 id='sum-over-a-zip-with-a-range-the-buffer-decides'),
    pytest.param(dict(init=('self._ids = iter(range(1))', 'any(map(next, [self._ids] * (self.topk_indices_buffer is None)))'), warmup=('i = next(self._ids)',)),
                 id='any-over-map-next-repeated-by-the-buffer'),
    pytest.param(dict(top='import collections\nimport itertools\n\n\n', init=('self._ids = iter(range(1))', 'collections.deque(itertools.islice(self._ids, self.topk_indices_buffer is None), maxlen=0)'), warmup=('i = next(self._ids)',)),
                 id='deque-drains-an-islice-the-buffer-sizes'),
    pytest.param(dict(init=('self._ids = iter(range(1))', "d = dict(zip('a' * (self.topk_indices_buffer is None), self._ids))"), warmup=('i = next(self._ids)',)),
                 id='dict-of-a-zip-the-buffer-sizes'),
    pytest.param(dict(top='import itertools\nimport math\n\n\n', init=('self._ids = iter(range(1))', 'w = math.prod(itertools.islice(self._ids, int(self.topk_indices_buffer is None)))'), warmup=('i = next(self._ids)',)),
                 id='math-prod-of-an-islice-the-buffer-sizes'),
    pytest.param(dict(init=('self._ids = iter(range(1))', 'w = max(zip(range(self.topk_indices_buffer is None), self._ids), default=0)'), warmup=('i = next(self._ids)',)),
                 id='max-of-a-zip-the-buffer-sizes'),
    # A second reviewer's probe of 2,219 forks (2026-12-07): a loop whose exit,
    # round or test the buffer decides, `in` on an iterator, code Python runs
    # without a name (print's file, __str__, a property by hasattr, a logging
    # handler), a defaultdict read by a derived key, ExitStack callbacks,
    # iter(f, sentinel), a memoryview: one fork per mechanism. And forks
    # that tell apart the survivors of the mutation tool over aliases.py
    # (`survivor-<line> <operator>` of the run's source): each read fixed
    # under its mutant.
    pytest.param(dict(init=('self._ids = iter([1, 2, 3])', 'for _x in self._ids:', '    if self.topk_indices_buffer is not None:', '        break'), warmup=('next(self._ids)',)),
                 id='probe-for_break_init'),
    pytest.param(dict(top="class W:\n    def __init__(self):\n        self.log = []\n    def write(self, s):\n        self.log.append(s)\n    @property\n    def a(self):\n        self.log.append('a')\n        return 1\n    @property\n    def b(self):\n        return 2\n    def __str__(self):\n        self.log.append('s')\n        return 'w'\n\n", init=('self._w = W()', 'print(self.topk_indices_buffer is None, file=self._w)'), warmup=("self._w.log.index('False')",)),
                 id='probe-print_file'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', init=('self._ids = iter([1, 2, 3])', 'for _x in self._ids:', '    if not (self.topk_indices_buffer is None):', '        break'), warmup=('next(self._ids)',)),
                 id='probe-for_break-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', init=('self._ids = iter([1, 2, 3])', 'for _x in self._ids:', '    if not (self.topk_indices_buffer is None):', '        break', 'else:', '    pass'), warmup=('next(self._ids)',)),
                 id='probe-for_break_else-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', init=('self._ids = iter([1, 2, 3])', 'for _x in self._ids:', '    if self.topk_indices_buffer is None:', '        continue', '    break'), warmup=('next(self._ids)',)),
                 id='probe-for_continue-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', body='    def _setup(self):\n        _n = 3 if self.topk_indices_buffer is None else 1\n        for _i, _x in enumerate(self._ids):\n            if _i + 1 >= _n:\n                break\n\n', init=('self._ids = iter([1, 2, 3])', 'self._setup()'), warmup=('next(self._ids)',)),
                 id='probe-for_break_enum-helper-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', body='    def _setup(self):\n        _n = 3 if self.topk_indices_buffer is None else 1\n        for _x in self._ids:\n            if _x >= _n:\n                break\n\n', init=('self._ids = iter([1, 2, 3])', 'self._setup()'), warmup=('next(self._ids)',)),
                 id='probe-for_break_value-helper-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', body='    def _setup(self):\n        for _x in self._ids:\n            if not (self.topk_indices_buffer is None):\n                return\n\n', init=('self._ids = iter([1, 2, 3])', 'self._setup()'), warmup=('next(self._ids)',)),
                 id='probe-for_return-helper-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\ndef _gen(it):\n    yield from it\n\n', init=('self._ids = iter([1, 2, 3])', 'for _x in _gen(self._ids):', '    if not (self.topk_indices_buffer is None):', '        break'), warmup=('next(self._ids)',)),
                 id='probe-for_break_gen-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', init=('self._ids = iter([1, 2, 3])', 'for _k in range(3):', '    next(self._ids)', '    if not (self.topk_indices_buffer is None):', '        break'), warmup=('next(self._ids)',)),
                 id='probe-loop_back_range-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', init=('self._ids = iter([1, 2, 3])', '_k = 0', 'while _k < 3:', '    _k += 1', '    next(self._ids)', '    if not (self.topk_indices_buffer is None):', '        break'), warmup=('next(self._ids)',)),
                 id='probe-loop_back_while-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', init=('self._ids = iter([1, 2, 3])', '_n = 4 if self.topk_indices_buffer is None else 2', 'while next(self._ids, 99) < _n:', '    pass'), warmup=('next(self._ids)',)),
                 id='probe-while_test_next-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', init=('self._ids = iter([1, 2, 3])', 'while next(self._ids, None) is not None and self.topk_indices_buffer is None:', '    pass'), warmup=('next(self._ids)',)),
                 id='probe-while_test_and-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', init=('self._ids = iter([1, 2, 3])', '_f = (3 if self.topk_indices_buffer is None else 1) in self._ids'), warmup=('next(self._ids)',)),
                 id='probe-in_iter-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', init=('self._ids = iter([1, 2, 3])', '(3 if self.topk_indices_buffer is None else 1) in self._ids'), warmup=('next(self._ids)',)),
                 id='probe-in_iter_expr-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', init=('self._ids = iter([1, 2, 3])', '_f = (3 if self.topk_indices_buffer is None else 1) not in self._ids'), warmup=('next(self._ids)',)),
                 id='probe-notin_iter-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', body='    def _setup(self):\n        _f = (3 if self.topk_indices_buffer is None else 1) in (x for x in self._ids)\n\n', init=('self._ids = iter([1, 2, 3])', 'self._setup()'), warmup=('next(self._ids)',)),
                 id='probe-in_genexp-helper-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', init=('self._ids = iter([1, 2, 3])', '_n = 3 if self.topk_indices_buffer is None else 1', '_f = _n in self._ids'), warmup=('next(self._ids)',)),
                 id='probe-in_iter_local-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\nclass W:\n    def __init__(self):\n        self.log = []\n    def write(self, s):\n        self.log.append(str(s))\n    def flush(self):\n        self.log.append("flush")\n    @property\n    def a(self):\n        self.log.append("a")\n        return 1\n    @property\n    def b(self):\n        return 2\n    def __str__(self):\n        self.log.append("s")\n        return "w"\n    def __repr__(self):\n        self.log.append("r")\n        return "w"\n\n', init=('self._w = W()', "print(end='', file=self._w, flush=not (self.topk_indices_buffer is None))"), warmup=("self._w.log.remove('flush')",)),
                 id='probe-print_flush-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\nclass W:\n    def __init__(self):\n        self.log = []\n    def write(self, s):\n        self.log.append(str(s))\n    def flush(self):\n        self.log.append("flush")\n    @property\n    def a(self):\n        self.log.append("a")\n        return 1\n    @property\n    def b(self):\n        return 2\n    def __str__(self):\n        self.log.append("s")\n        return "w"\n    def __repr__(self):\n        self.log.append("r")\n        return "w"\n\n', init=('self._w = W()', 'with contextlib.redirect_stdout(self._w):', '    print(self.topk_indices_buffer is None)'), warmup=("self._w.log.index('False')",)),
                 id='probe-redirect_stdout-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\nclass W:\n    def __init__(self):\n        self.log = []\n    def write(self, s):\n        self.log.append(str(s))\n    def flush(self):\n        self.log.append("flush")\n    @property\n    def a(self):\n        self.log.append("a")\n        return 1\n    @property\n    def b(self):\n        return 2\n    def __str__(self):\n        self.log.append("s")\n        return "w"\n    def __repr__(self):\n        self.log.append("r")\n        return "w"\n\n', init=('self._w = W()', "print(*[self._w] * (not (self.topk_indices_buffer is None)), end='', file=W())"), warmup=("self._w.log.remove('s')",)),
                 id='probe-print_star_str-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\nclass W:\n    def __init__(self):\n        self.log = []\n    def write(self, s):\n        self.log.append(str(s))\n    def flush(self):\n        self.log.append("flush")\n    @property\n    def a(self):\n        self.log.append("a")\n        return 1\n    @property\n    def b(self):\n        return 2\n    def __str__(self):\n        self.log.append("s")\n        return "w"\n    def __repr__(self):\n        self.log.append("r")\n        return "w"\n\n', init=('self._w = W()', '_s = str([self._w] * (not (self.topk_indices_buffer is None)))'), warmup=("self._w.log.remove('r')",)),
                 id='probe-str_list_repr-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\nclass W:\n    def __init__(self):\n        self.log = []\n    def write(self, s):\n        self.log.append(str(s))\n    def flush(self):\n        self.log.append("flush")\n    @property\n    def a(self):\n        self.log.append("a")\n        return 1\n    @property\n    def b(self):\n        return 2\n    def __str__(self):\n        self.log.append("s")\n        return "w"\n    def __repr__(self):\n        self.log.append("r")\n        return "w"\n\n', init=('self._w = W()', "_s = '%s' % ([self._w] * (not (self.topk_indices_buffer is None)),)"), warmup=("self._w.log.remove('r')",)),
                 id='probe-percent_repr-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\nclass W:\n    def __init__(self):\n        self.log = []\n    def write(self, s):\n        self.log.append(str(s))\n    def flush(self):\n        self.log.append("flush")\n    @property\n    def a(self):\n        self.log.append("a")\n        return 1\n    @property\n    def b(self):\n        return 2\n    def __str__(self):\n        self.log.append("s")\n        return "w"\n    def __repr__(self):\n        self.log.append("r")\n        return "w"\n\n', init=('self._w = W()', "_s = f'{[self._w] * (not (self.topk_indices_buffer is None))}'"), warmup=("self._w.log.remove('r')",)),
                 id='probe-fstring_repr-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\nclass W:\n    def __init__(self):\n        self.log = []\n    def write(self, s):\n        self.log.append(str(s))\n    def flush(self):\n        self.log.append("flush")\n    @property\n    def a(self):\n        self.log.append("a")\n        return 1\n    @property\n    def b(self):\n        return 2\n    def __str__(self):\n        self.log.append("s")\n        return "w"\n    def __repr__(self):\n        self.log.append("r")\n        return "w"\n\n', init=('self._w = W()', '_s = repr((self._w,) * (not (self.topk_indices_buffer is None)))'), warmup=("self._w.log.remove('r')",)),
                 id='probe-repr_tuple-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\nclass W:\n    def __init__(self):\n        self.log = []\n    def write(self, s):\n        self.log.append(str(s))\n    def flush(self):\n        self.log.append("flush")\n    @property\n    def a(self):\n        self.log.append("a")\n        return 1\n    @property\n    def b(self):\n        return 2\n    def __str__(self):\n        self.log.append("s")\n        return "w"\n    def __repr__(self):\n        self.log.append("r")\n        return "w"\n\n', init=('self._w = W()', "hasattr(self._w, 'b' if self.topk_indices_buffer is None else 'a')"), warmup=("self._w.log.remove('a')",)),
                 id='probe-hasattr_prop-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', body='    @property\n    def _p1(self):\n        next(self._ids)\n        return 1\n\n    @property\n    def _p2(self):\n        return 2\n\n', init=('self._ids = iter([1])', "hasattr(self, '_p1' if self.topk_indices_buffer is None else '_p2')"), warmup=('next(self._ids)',)),
                 id='probe-hasattr_layer_prop-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', init=('self._dd = collections.defaultdict(int)', 'self._dd[self.topk_indices_buffer is None]'), warmup=('self._dd.pop(False)',)),
                 id='probe-defaultdict_read-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', init=('self._dd = collections.defaultdict(int)', '_v = self._dd[self.topk_indices_buffer is None]'), warmup=('self._dd.pop(False)',)),
                 id='probe-defaultdict_read_assign-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', init=('self._ids = iter([1, 2])', 'self._dd2 = collections.defaultdict(functools.partial(next, self._ids))', 'self._dd2[not (self.topk_indices_buffer is None)]', 'self._dd2[True]'), warmup=('next(self._ids)',)),
                 id='probe-defaultdict_factory-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', init=('self._ids = iter([1])', 'self._dd2 = collections.defaultdict(functools.partial(next, self._ids))', 'if self.topk_indices_buffer is None:', "    self._dd2['k']"), warmup=('next(self._ids)',)),
                 id='probe-defaultdict_factory_if-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', init=('self._ids = iter([1])', 'self._st = contextlib.ExitStack()', 'self._st.callback(next, self._ids)', 'if self.topk_indices_buffer is None:', '    self._st.close()'), warmup=('next(self._ids)',)),
                 id='probe-exitstack_close-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', init=('self._ids = iter([1])', 'self._st = contextlib.ExitStack()', 'self._st.callback(next, self._ids)', 'if self.topk_indices_buffer is None:', '    with self._st:', '        pass'), warmup=('next(self._ids)',)),
                 id='probe-exitstack_with-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', init=('self._ids = iter([1])', '_st = contextlib.ExitStack()', '_st.callback(next, self._ids)', 'if self.topk_indices_buffer is None:', '    _st.close()'), warmup=('next(self._ids)',)),
                 id='probe-exitstack_local-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', init=('self._l = [1, 2, 3]', 'for _x in iter(self._l.pop, 1 if self.topk_indices_buffer is None else 3):', '    pass'), warmup=('self._l[0]',)),
                 id='probe-iter_sentinel_pop-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', init=('self._ids = iter([1, 2, 3])', 'for _x in iter(functools.partial(next, self._ids), 3 if self.topk_indices_buffer is None else 1):', '    pass'), warmup=('next(self._ids)',)),
                 id='probe-iter_sentinel_partial-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\nclass W:\n    def __init__(self):\n        self.log = []\n    def write(self, s):\n        self.log.append(str(s))\n    def flush(self):\n        self.log.append("flush")\n    @property\n    def a(self):\n        self.log.append("a")\n        return 1\n    @property\n    def b(self):\n        return 2\n    def __str__(self):\n        self.log.append("s")\n        return "w"\n    def __repr__(self):\n        self.log.append("r")\n        return "w"\n\n', init=('self._w = W()', "self._lg = logging.getLogger('probe%d' % id(self))", 'self._lg.addHandler(logging.StreamHandler(self._w))', "self._lg.warning('%s', self.topk_indices_buffer is None)"), warmup=("self._w.log.index('False\\n')",)),
                 id='probe-logging_handler-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\nclass W:\n    def __init__(self):\n        self.log = []\n    def write(self, s):\n        self.log.append(str(s))\n    def flush(self):\n        self.log.append("flush")\n    @property\n    def a(self):\n        self.log.append("a")\n        return 1\n    @property\n    def b(self):\n        return 2\n    def __str__(self):\n        self.log.append("s")\n        return "w"\n    def __repr__(self):\n        self.log.append("r")\n        return "w"\n\n_LOG = logging.getLogger(\'probe_mod\')\n\n', init=('self._w = W()', '_LOG.addHandler(logging.StreamHandler(self._w))', "_LOG.warning('%s', self.topk_indices_buffer is None)"), warmup=("self._w.log.index('False\\n')",)),
                 id='probe-logging_handler_mod-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\nclass W:\n    def __init__(self):\n        self.log = []\n    def write(self, s):\n        self.log.append(str(s))\n    def flush(self):\n        self.log.append("flush")\n    @property\n    def a(self):\n        self.log.append("a")\n        return 1\n    @property\n    def b(self):\n        return 2\n    def __str__(self):\n        self.log.append("s")\n        return "w"\n    def __repr__(self):\n        self.log.append("r")\n        return "w"\n\n', init=('self._w = W()', '_s = format([self._w] * (not (self.topk_indices_buffer is None)))'), warmup=("self._w.log.remove('r')",)),
                 id='probe-format_list-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\nclass W:\n    def __init__(self):\n        self.log = []\n    def write(self, s):\n        self.log.append(str(s))\n    def flush(self):\n        self.log.append("flush")\n    @property\n    def a(self):\n        self.log.append("a")\n        return 1\n    @property\n    def b(self):\n        return 2\n    def __str__(self):\n        self.log.append("s")\n        return "w"\n    def __repr__(self):\n        self.log.append("r")\n        return "w"\n\n', init=('self._w = W()', "print('', '', sep=self._w if False else str(self.topk_indices_buffer is None), file=self._w)"), warmup=("self._w.log.index('False')",)),
                 id='probe-print_kw_sep-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', init=("self._ba = bytearray(b'x')", '_mv = memoryview(self._ba)', '_mv[0] = 0 if self.topk_indices_buffer is None else 1'), warmup=('[0, 1][self._ba[0]]', '1 // self._ba[0]')),
                 id='probe-memoryview_write-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', init=('self._ids = iter([1, 2, 3])', '_a, _c = itertools.tee(self._ids)', 'for _x in _a:', '    if not (self.topk_indices_buffer is None):', '        break'), warmup=('next(self._ids)',)),
                 id='probe-tee_copy-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', init=('self._ids = iter([1, 2, 3])', 'def _get():', '    return self._ids', 'for _x in _get():', '    if not (self.topk_indices_buffer is None):', '        break'), warmup=('next(self._ids)',)),
                 id='probe-nested_fn_returns_iter-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\ndef _setup(layer):\n    def _get():\n        return layer._ids\n    for _x in _get():\n        if not (layer.topk_indices_buffer is None):\n            break\n\n', init=('self._ids = iter([1, 2, 3])', '_setup(self)'), warmup=('next(self._ids)',)),
                 id='probe-nested_fn_returns_iter-modfunc-attr-isnone'),
    # A third reviewer's probe (2,306 forks, 2026-12-07): a subclass with no
    # methods of its own, ChainMap, a class made on the spot, a property read
    # in a conditional expression, process-wide settings set by the buffer.
    pytest.param(dict(top="class W:\n    def __init__(self, sink):\n        self.sink = sink\n    def __str__(self):\n        self.sink.append(1)\n        return 'w'\nclass W2(W):\n    pass\n", init=('self._hits = []', 'self._w = W2(self._hits)', 'if self.topk_indices_buffer is None:', '    str(self._w)'), warmup=('assert not self._hits',)),
                 id='probe2-subclass_nomethods-str-if-at-init'),
    pytest.param(dict(top="class W:\n    def __init__(self, sink):\n        self.sink = sink\n    def __format__(self, spec):\n        self.sink.append(1)\n        return 'w'\nclass W2(W):\n    pass\n", init=('self._hits = []', 'self._w = W2(self._hits)', 'if self.topk_indices_buffer is None:', "    f'{self._w}'"), warmup=('assert not self._hits',)),
                 id='probe2-subclass_nomethods-fstr-if-at-init'),
    pytest.param(dict(top="class W:\n    def __init__(self, sink):\n        self.sink = sink\n    def __repr__(self):\n        self.sink.append(1)\n        return 'w'\nclass W2(W):\n    pass\n", init=('self._hits = []', 'self._w = W2(self._hits)', 'if self.topk_indices_buffer is None:', '    repr(self._w)'), warmup=('assert not self._hits',)),
                 id='probe2-subclass_nomethods-repr-if-at-init'),
    pytest.param(dict(top='class W:\n    def __init__(self, sink):\n        self.sink = sink\n    def __len__(self):\n        self.sink.append(1)\n        return 0\nclass W2(W):\n    pass\n', init=('self._hits = []', 'self._w = W2(self._hits)', 'if self.topk_indices_buffer is None:', '    len(self._w)'), warmup=('assert not self._hits',)),
                 id='probe2-subclass_nomethods-len-if-at-init'),
    pytest.param(dict(top='class W:\n    def __init__(self, sink):\n        self.sink = sink\n    def __eq__(self, o):\n        self.sink.append(1)\n        return True\nclass W2(W):\n    pass\n', init=('self._hits = []', 'self._w = W2(self._hits)', 'if self.topk_indices_buffer is None:', '    self._w == 1'), warmup=('assert not self._hits',)),
                 id='probe2-subclass_nomethods-eq-if-at-init'),
    pytest.param(dict(top='class W:\n    def __init__(self, sink):\n        self.sink = sink\n    def __bool__(self):\n        self.sink.append(1)\n        return True\nclass W2(W):\n    pass\n', init=('self._hits = []', 'self._w = W2(self._hits)', 'if self.topk_indices_buffer is None:', '    bool(self._w)'), warmup=('assert not self._hits',)),
                 id='probe2-subclass_nomethods-bool-if-at-init'),
    pytest.param(dict(top='class W:\n    def __init__(self, sink):\n        self.sink = sink\n    def __index__(self):\n        self.sink.append(1)\n        return 0\nclass W2(W):\n    pass\n', init=('self._hits = []', 'self._w = W2(self._hits)', 'if self.topk_indices_buffer is None:', '    int(self._w)'), warmup=('assert not self._hits',)),
                 id='probe2-subclass_nomethods-int-if-at-init'),
    pytest.param(dict(top='class W:\n    def __init__(self, sink):\n        self.sink = sink\n    def __iter__(self):\n        self.sink.append(1)\n        return iter(())\nclass W2(W):\n    pass\n', init=('self._hits = []', 'self._w = W2(self._hits)', 'if self.topk_indices_buffer is None:', '    list(self._w)'), warmup=('assert not self._hits',)),
                 id='probe2-subclass_nomethods-iter-if-at-init'),
    pytest.param(dict(top='class W:\n    def __init__(self, sink):\n        self.sink = sink\n    def __getitem__(self, k):\n        self.sink.append(1)\n        return 0\nclass W2(W):\n    pass\n', init=('self._hits = []', 'self._w = W2(self._hits)', 'if self.topk_indices_buffer is None:', '    self._w[0]'), warmup=('assert not self._hits',)),
                 id='probe2-subclass_nomethods-getitem-if-at-init'),
    pytest.param(dict(top='class W:\n    def __init__(self, sink):\n        self.sink = sink\n    def __contains__(self, k):\n        self.sink.append(1)\n        return True\nclass W2(W):\n    pass\n', init=('self._hits = []', 'self._w = W2(self._hits)', 'if self.topk_indices_buffer is None:', '    0 in self._w'), warmup=('assert not self._hits',)),
                 id='probe2-subclass_nomethods-contains-if-at-init'),
    pytest.param(dict(top='class W:\n    def __init__(self, sink):\n        self.sink = sink\n    def __add__(self, o):\n        self.sink.append(1)\n        return 0\nclass W2(W):\n    pass\n', init=('self._hits = []', 'self._w = W2(self._hits)', 'if self.topk_indices_buffer is None:', '    self._w + 1'), warmup=('assert not self._hits',)),
                 id='probe2-subclass_nomethods-add-if-at-init'),
    pytest.param(dict(top='class W:\n    def __init__(self, sink):\n        self.sink = sink\n    def __hash__(self):\n        self.sink.append(1)\n        return 0\nclass W2(W):\n    pass\n', init=('self._hits = []', 'self._w = W2(self._hits)', 'if self.topk_indices_buffer is None:', '    hash(self._w)'), warmup=('assert not self._hits',)),
                 id='probe2-subclass_nomethods-hash-if-at-init'),
    pytest.param(dict(top="class W:\n    def __init__(self, sink):\n        self.sink = sink\n    def __getattr__(self, n):\n        if n.startswith('__') or n == 'sink':\n            raise AttributeError(n)\n        self.sink.append(1)\n        return None\nclass W2(W):\n    pass\n", init=('self._hits = []', 'self._w = W2(self._hits)', 'if self.topk_indices_buffer is None:', "    getattr(self._w, 'zz', None)"), warmup=('assert not self._hits',)),
                 id='probe2-subclass_nomethods-getattr-if-at-init'),
    pytest.param(dict(top='class W:\n    def __init__(self, sink):\n        self.sink = sink\n    def write(self, s):\n        self.sink.append(1)\n        return 0\nclass W2(W):\n    pass\n', init=('self._hits = []', 'self._w = W2(self._hits)', 'if self.topk_indices_buffer is None:', "    print('x', file=self._w)"), warmup=('assert not self._hits',)),
                 id='probe2-subclass_nomethods-print-if-at-init'),
    pytest.param(dict(top='class W:\n    def __init__(self, sink):\n        self.sink = sink\n    def __enter__(self):\n        self.sink.append(1)\n        return self\n    def __exit__(self, *a):\n        return False\nclass W2(W):\n    pass\n', init=('self._hits = []', 'self._w = W2(self._hits)', 'if self.topk_indices_buffer is None:', '    with self._w:', '        pass'), warmup=('assert not self._hits',)),
                 id='probe2-subclass_nomethods-with-if-at-init'),
    pytest.param(dict(init=('self._d = {}', 'self._cm = collections.ChainMap(self._d)', "self._cm['x'] = self.topk_indices_buffer is None"), warmup=("assert not self._d.get('x')",)),
                 id='probe2-chainmap-at-init'),
    pytest.param(dict(init=('self._d = {}', 'self._cm = collections.ChainMap(self._d)', 'if self.topk_indices_buffer is None:', "    self._cm['x'] = 1"), warmup=("assert not self._d.get('x')",)),
                 id='probe2-chainmap_if-at-init'),
    pytest.param(dict(init=('self._d = {}', "collections.ChainMap(self._d)['x'] = self.topk_indices_buffer is None"), warmup=("assert not self._d.get('x')",)),
                 id='probe2-chainmap_local-at-init'),
    pytest.param(dict(init=('self._l = []', "self._box = collections.namedtuple('Box', 'l')(self._l)", 'self._box.l.append(self.topk_indices_buffer is None)'), warmup=('assert not any(self._l)',)),
                 id='probe2-attr_of_attr_store-at-init'),
    pytest.param(dict(init=('torch.set_default_dtype(torch.float64 if self.topk_indices_buffer is None else torch.float32)',), warmup=('assert torch.get_default_dtype() == torch.float32',)),
                 id='probe2-default_dtype-at-init'),
    pytest.param(dict(init=('torch.set_grad_enabled(not (self.topk_indices_buffer is None))',), warmup=('assert torch.is_grad_enabled()',)),
                 id='probe2-grad_enabled-at-init'),
    pytest.param(dict(init=('torch.use_deterministic_algorithms(self.topk_indices_buffer is None)',), warmup=('assert not torch.are_deterministic_algorithms_enabled()',)),
                 id='probe2-deterministic-at-init'),
    pytest.param(dict(init=('torch.set_num_threads(1 if self.topk_indices_buffer is None else 2)',), warmup=('assert torch.get_num_threads() == 2',)),
                 id='probe2-num_threads-at-init'),
    pytest.param(dict(top='import logging\n', init=("logging.getLogger('dspark.probe').setLevel(logging.ERROR if self.topk_indices_buffer is None else logging.NOTSET)",), warmup=("assert logging.getLogger('dspark.probe').level == logging.NOTSET",)),
                 id='probe2-logger_level-at-init'),
    pytest.param(dict(top='from vllm.logger import init_logger\n', init=("init_logger('vllm.dspark.probe').setLevel(40 if self.topk_indices_buffer is None else 0)",), warmup=("assert init_logger('vllm.dspark.probe').level == 0",)),
                 id='probe2-vllm_logger-at-init'),
    pytest.param(dict(init=('torch.set_printoptions(precision=2 if self.topk_indices_buffer is None else 4)',), warmup=('assert torch._tensor_str.PRINT_OPTS.precision == 4',)),
                 id='probe2-torch_printopts-at-init'),
    pytest.param(dict(body='    @property\n    def _p(self):\n        self._hits.append(1)\n        return 0\n', init=('self._hits = []', '_ = self._p if self.topk_indices_buffer is None else 0'), warmup=('assert not self._hits',)),
                 id='probe2-prop_ifexp-at-init'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', body='    def _setup(self):\n        def _drain(*, it=self._ids, stop=3 if self.topk_indices_buffer is None else 1):\n            for x in it:\n                if x >= stop:\n                    break\n        _drain()\n\n', init=('self._ids = iter([1, 2, 3])', 'self._setup()'), warmup=('next(self._ids)',)),
                 id='probe-kwonly_default-helper-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', init=('self._ids = iter([1, 2, 3])', '_n = 3 if self.topk_indices_buffer is None else 1', 'while (_x := next(self._ids, 99)) < _n:', '    pass'), warmup=('next(self._ids)',)),
                 id='probe-while_walrus-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', init=('self._d = {}', 'self._dd = collections.defaultdict(int)', "self._d.pop('k', None) if False else None", '_v = self._dd[str(self.topk_indices_buffer is None)]'), warmup=("self._dd.pop('False')",)),
                 id='probe-dict_pop_default-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', body='    def _setup(self):\n        for _x in self._ids:\n            if not (self.topk_indices_buffer is None):\n                break\n        else:\n            pass\n\n', init=('self._ids = iter([1, 2, 3])', 'self._setup()'), warmup=('next(self._ids)',)),
                 id='probe-for_break_else-helper-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', body='    def _setup(self):\n        for _x in self._ids:\n            if not (self.topk_indices_buffer is None):\n                break\n\n', init=('self._ids = iter([1, 2, 3])',), warmup=('self._setup()', 'next(self._ids)')),
                 id='probe-for_break-warm_helper-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', body='    def _setup(self):\n        _k = 0\n        while _k < 3:\n            _k += 1\n            next(self._ids)\n            if not (self.topk_indices_buffer is None):\n                break\n\n', init=('self._ids = iter([1, 2, 3])', 'self._setup()'), warmup=('next(self._ids)',)),
                 id='probe-loop_back_while-helper-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\ndef _setup(layer):\n    _n = 4 if layer.topk_indices_buffer is None else 2\n    while next(layer._ids, 99) < _n:\n        pass\n\n', init=('self._ids = iter([1, 2, 3])', '_setup(self)'), warmup=('next(self._ids)',)),
                 id='probe-while_test_next-modfunc-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', body='    def _setup(self):\n        (3 if self.topk_indices_buffer is None else 1) in self._ids\n\n', init=('self._ids = iter([1, 2, 3])', 'self._setup()'), warmup=('next(self._ids)',)),
                 id='probe-in_iter_expr-helper-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\ndef _setup(layer):\n    _f = (3 if layer.topk_indices_buffer is None else 1) not in layer._ids\n\n', init=('self._ids = iter([1, 2, 3])', '_setup(self)'), warmup=('next(self._ids)',)),
                 id='probe-notin_iter-modfunc-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\nclass W:\n    def __init__(self):\n        self.log = []\n    def write(self, s):\n        self.log.append(str(s))\n    def flush(self):\n        self.log.append("flush")\n    @property\n    def a(self):\n        self.log.append("a")\n        return 1\n    @property\n    def b(self):\n        return 2\n    def __str__(self):\n        self.log.append("s")\n        return "w"\n    def __repr__(self):\n        self.log.append("r")\n        return "w"\n\n', init=('self._w = W()', 'print(self.topk_indices_buffer is None, file=self._w)'), warmup=("self._w.log.index('False')",)),
                 id='probe-print_file-init-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\nclass W:\n    def __init__(self):\n        self.log = []\n    def write(self, s):\n        self.log.append(str(s))\n    def flush(self):\n        self.log.append("flush")\n    @property\n    def a(self):\n        self.log.append("a")\n        return 1\n    @property\n    def b(self):\n        return 2\n    def __str__(self):\n        self.log.append("s")\n        return "w"\n    def __repr__(self):\n        self.log.append("r")\n        return "w"\n\n', body="    def _setup(self):\n        print(end='', file=self._w, flush=not (self.topk_indices_buffer is None))\n\n", init=('self._w = W()', 'self._setup()'), warmup=("self._w.log.remove('flush')",)),
                 id='probe-print_flush-helper-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\nclass W:\n    def __init__(self):\n        self.log = []\n    def write(self, s):\n        self.log.append(str(s))\n    def flush(self):\n        self.log.append("flush")\n    @property\n    def a(self):\n        self.log.append("a")\n        return 1\n    @property\n    def b(self):\n        return 2\n    def __str__(self):\n        self.log.append("s")\n        return "w"\n    def __repr__(self):\n        self.log.append("r")\n        return "w"\n\ndef _setup(layer):\n    with contextlib.redirect_stdout(layer._w):\n        print(layer.topk_indices_buffer is None)\n\n', init=('self._w = W()', '_setup(self)'), warmup=("self._w.log.index('False')",)),
                 id='probe-redirect_stdout-modfunc-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\nclass W:\n    def __init__(self):\n        self.log = []\n    def write(self, s):\n        self.log.append(str(s))\n    def flush(self):\n        self.log.append("flush")\n    @property\n    def a(self):\n        self.log.append("a")\n        return 1\n    @property\n    def b(self):\n        return 2\n    def __str__(self):\n        self.log.append("s")\n        return "w"\n    def __repr__(self):\n        self.log.append("r")\n        return "w"\n\n', body='    def _setup(self):\n        _s = str([self._w] * (not (self.topk_indices_buffer is None)))\n\n', init=('self._w = W()', 'self._setup()'), warmup=("self._w.log.remove('r')",)),
                 id='probe-str_list_repr-helper-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\nclass W:\n    def __init__(self):\n        self.log = []\n    def write(self, s):\n        self.log.append(str(s))\n    def flush(self):\n        self.log.append("flush")\n    @property\n    def a(self):\n        self.log.append("a")\n        return 1\n    @property\n    def b(self):\n        return 2\n    def __str__(self):\n        self.log.append("s")\n        return "w"\n    def __repr__(self):\n        self.log.append("r")\n        return "w"\n\ndef _setup(layer):\n    _s = \'%s\' % ([layer._w] * (not (layer.topk_indices_buffer is None)),)\n\n', init=('self._w = W()', '_setup(self)'), warmup=("self._w.log.remove('r')",)),
                 id='probe-percent_repr-modfunc-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', body="    @property\n    def _p1(self):\n        next(self._ids)\n        return 1\n\n    @property\n    def _p2(self):\n        return 2\n\n    def _setup(self):\n        hasattr(self, '_p1' if self.topk_indices_buffer is None else '_p2')\n\n", init=('self._ids = iter([1])', 'self._setup()'), warmup=('next(self._ids)',)),
                 id='probe-hasattr_layer_prop-helper-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\nclass W:\n    def __init__(self):\n        self.log = []\n    def write(self, s):\n        self.log.append(str(s))\n    def flush(self):\n        self.log.append("flush")\n    @property\n    def a(self):\n        self.log.append("a")\n        return 1\n    @property\n    def b(self):\n        return 2\n    def __str__(self):\n        self.log.append("s")\n        return "w"\n    def __repr__(self):\n        self.log.append("r")\n        return "w"\n\n', init=('self._w = W()',), warmup=("hasattr(self._w, 'b' if self.topk_indices_buffer is None else 'a')", "self._w.log.remove('a')")),
                 id='probe-hasattr_prop-warmup-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', body='    def _setup(self):\n        _v = self._dd[self.topk_indices_buffer is None]\n\n', init=('self._dd = collections.defaultdict(int)', 'self._setup()'), warmup=('self._dd.pop(False)',)),
                 id='probe-defaultdict_read_assign-helper-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\ndef _setup(layer):\n    layer._dd2[not (layer.topk_indices_buffer is None)]\n    layer._dd2[True]\n\n', init=('self._ids = iter([1, 2])', 'self._dd2 = collections.defaultdict(functools.partial(next, self._ids))', '_setup(self)'), warmup=('next(self._ids)',)),
                 id='probe-defaultdict_factory-modfunc-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', body='    def _setup(self):\n        if self.topk_indices_buffer is None:\n            with self._st:\n                pass\n\n', init=('self._ids = iter([1])', 'self._st = contextlib.ExitStack()', 'self._st.callback(next, self._ids)', 'self._setup()'), warmup=('next(self._ids)',)),
                 id='probe-exitstack_with-helper-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\ndef _setup(layer):\n    _st = contextlib.ExitStack()\n    _st.callback(next, layer._ids)\n    if layer.topk_indices_buffer is None:\n        _st.close()\n\n', init=('self._ids = iter([1])', '_setup(self)'), warmup=('next(self._ids)',)),
                 id='probe-exitstack_local-modfunc-attr-isnone'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\n', body='    def _setup(self):\n        for _x in iter(functools.partial(next, self._ids), 3 if self.topk_indices_buffer is None else 1):\n            pass\n\n', init=('self._ids = iter([1, 2, 3])', 'self._setup()'), warmup=('next(self._ids)',)),
                 id='probe-iter_sentinel_partial-helper-attr-isnone'),
    pytest.param(dict(init=('self._l = []', '[self._l.append(1) for _ in range(1) if self.topk_indices_buffer is not None]'), warmup=('self._l.pop()',)),
                 id='survivor-725-zeroiterationforloop'),
    pytest.param(dict(init=('self._ids = iter([1])', '[0 for a in range(self.topk_indices_buffer is None) for b in self._ids]'), warmup=('next(self._ids)',)),
                 id='survivor-721-delete-not'),
    pytest.param(dict(top='def _fill(d, b):\n    if b is not None:\n        d.append(1)\n\n', init=('self._l = []', '_fill(self._l, self.topk_indices_buffer)'), warmup=('self._l.pop()',)),
                 id='survivor-1155-addnot'),
    pytest.param(dict(init=('self._l = []', '(lambda d, b: d.append(1) if b is not None else None)(self._l, self.topk_indices_buffer)'), warmup=('self._l.pop()',)),
                 id='survivor-798-numberreplacer'),
    pytest.param(dict(body='    @staticmethod\n    def _fill(d, b):\n        if b is not None:\n            d.append(1)\n\n', init=('self._l = []', 'self._fill(self._l, self.topk_indices_buffer)'), warmup=('self._l.pop()',)),
                 id='survivor-815-numberreplacer'),
    pytest.param(dict(top='class H:\n    def fill(self, d, b):\n        if b is not None:\n            d.append(1)\n\n', init=('self._l = []', 'H().fill(self._l, self.topk_indices_buffer)'), warmup=('self._l.pop()',)),
                 id='survivor-815-numberreplacer-2'),
    pytest.param(dict(init=('self._l = []', 'list.append((self._l, len)[0], self.topk_indices_buffer is not None)'), warmup=('assert self._l[0]',)),
                 id='survivor-1005-continuewithbreak'),
    pytest.param(dict(init=('self.w_l = []', 'self.w_l.append(self.topk_indices_buffer is not None)'), warmup=('assert self.w_l[0]',)),
                 id='survivor-994-noteq-lt'),
    pytest.param(dict(init=('self._l = []', 'for _ in [1]:', '    if self.topk_indices_buffer is None:', '        return', 'self._l.append(1)'), warmup=('self._l.pop()',)),
                 id='survivor-565-orwithand'),
    pytest.param(dict(init=('self._l = []', 'match self.topk_indices_buffer:', '    case None:', '        return', 'self._l.append(1)'), warmup=('self._l.pop()',)),
                 id='survivor-603-orwithand'),
    pytest.param(dict(init=('self._l = []', 'match None:', '    case self.topk_indices_buffer:', '        return', 'self._l.append(1)'), warmup=('self._l.pop()',)),
                 id='survivor-597-zeroiterationforloop'),
    pytest.param(dict(top='import collections\n', init=('self._dd = collections.defaultdict(list)', 'd = self._dd', 'if self.topk_indices_buffer is not None:', "    d['k']"), warmup=("self._dd.pop('k')",)),
                 id='survivor-982-zeroiterationforloop'),
    pytest.param(dict(body='    def _get(self):\n        return self._l\n\n', init=('self._l = []', 'self._get().append(self.topk_indices_buffer is not None)'), warmup=('assert self._l[0]',)),
                 id='survivor-1012-zeroiterationforloop'),
    pytest.param(dict(body='    def _setup(self):\n        c1 = c2 = c3 = c4 = c5 = None\n        for i in range(6):\n            if i == 5:\n                c5.append(self.topk_indices_buffer is not None)\n            c5 = c4\n            c4 = c3\n            c3 = c2\n            c2 = c1\n            c1 = self._l\n\n', init=('self._l = []', 'self._setup()'), warmup=('assert self._l[0]',)),
                 id='survivor-749-truewithfalse'),
    pytest.param(dict(body='    def _keep(self, v):\n        self._l.append(v)\n\n    def _setup(self):\n        self._fs = [self._keep]\n        self._fs[0](self.topk_indices_buffer is not None)\n\n', init=('self._l = []', 'self._setup()'), warmup=('assert self._l[0]',)),
                 id='survivor-828-falsewithtrue'),
    pytest.param(dict(body="    def __repr__(self):\n        return 'a' if self.topk_indices_buffer is None else 'b'\n\n    def _setup(self):\n        if repr(self) == 'b':\n            self._l.append(1)\n\n", init=('self._l = []', 'self._setup()'), warmup=('self._l.pop()',)),
                 id='survivor-385-truewithfalse'),
    pytest.param(dict(top='class Sup:\n    def __init__(self):\n        self.on = []\n    def __enter__(self):\n        return self\n    def __exit__(self, *a):\n        return bool(self.on)\n\n', body='    def _mk(self):\n        s = Sup()\n        t = [s]\n        if self.topk_indices_buffer is not None:\n            t[0].on.append(1)\n        return s\n\n    def _h(self):\n        with self._mk():\n            raise KeyError\n        self._l.append(1)\n\n    def _setup(self):\n        try:\n            self._h()\n        except KeyError:\n            pass\n\n', init=('self._l = []', 'self._setup()'), warmup=('self._l.pop()',)),
                 id='survivor-628-truewithfalse'),
]

READS_FIXED = [
    pytest.param(dict(top='from torch import empty, zeros\n\n\n', warmup=('x = self._shape_ref.shape[-1]',), body='    def configure(self):\n        flag = self._flag.view_as(self._shape_ref)\n        flag.fill_(float(self.topk_indices_buffer is None))\n\n', init=('self._flag = zeros(4)', 'self._shape_ref = empty(2, 2)', 'self.configure()')),
                 id='view_as-of-another-tensor'),  # view_as(other) views self._flag, not other
    pytest.param(dict(init=('self._dtype = torch.get_default_dtype()',)),
                 id='torch-call-without-arguments'),  # a torch call with no argument in __init__
    pytest.param(dict(warmup=("self._note('warmup', 'swa')",), body='    def _note(self, *parts):\n        return None\n\n'),
                 id='star-args-helper-called-with-two'),  # a helper taking *parts called with two arguments
    pytest.param(dict(init=('valid = lambda t: t is None or t.dim() == 2', 'assert valid(self.topk_indices_buffer)')),
                 id='local-lambda-tests-the-buffer'),  # a local lambda only tests the buffer
    pytest.param(dict(warmup=('x = self._sizes[0] + 1',), body='    def __cache_sizes(self, *sizes):\n        self._sizes = sizes\n\n', init=('self.__cache_sizes(64, 128)',)),
                 id='private-method-named-before-init'),  # a private method (name sorts before __init__) keeps its own *sizes
    pytest.param(dict(top='import torch.nn.init as init\n\n\n', init=('self._scratch = torch.empty(4)', 'if self.topk_indices_buffer is None:', '    init.zeros_(self._scratch)')),
                 id='torch-init-zeros-on-another-tensor'),  # torch.nn.init.zeros_ on a tensor the warmup never reads
    pytest.param(dict(init=('setattr(self, "0_topk", self.topk_indices_buffer)',)),
                 id='setattr-of-an-odd-name'),  # setattr of a name no code reads
    pytest.param(dict(warmup=('x = 1 if self._fp8 else 0',), body='    def configure(self):\n        self._fp8 = getattr(self, "use_fp8", False)\n\n', init=('self.configure()',)),
                 id='getattr-of-another-attribute-with-default'),  # getattr(self, 'use_fp8', False)
    pytest.param(dict(warmup=('x = self._opts[0] + 1',), body='    def configure(self):\n        class _Opts:\n            size = 4\n        self._opts = [_Opts.size]\n\n', init=('self.configure()',)),
                 id='nested-class-in-a-method'),  # a class statement inside a method
    pytest.param(dict(warmup=('x = self._block_sizes[0] + 1',), body='    def configure(self):\n        return [s for s in self._block_sizes]\n\n', init=('self._block_sizes = (64,)',)),
                 id='comprehension-over-the-layers-list'),  # a comprehension over the layer's list
    pytest.param(dict(warmup=('x = self._limits[0] + 1',), body='    def configure(self):\n        return [s for s in range(4) if s < self._limits[0]]\n\n', init=('self._limits = (2,)',)),
                 id='comprehension-filtered-by-an-attribute'),  # a comprehension filtered by another attribute
    pytest.param(dict(warmup=('x = self._scales[0] + 1',), body='    def configure(self):\n        return [self._scales[0] * s for s in range(4)]\n\n', init=('self._scales = (2,)',)),
                 id='comprehension-element-reads-an-attribute'),  # a comprehension whose element reads another attribute
    pytest.param(dict(body='    def configure(self):\n        setattr(self, "topk_indices_buffer")\n\n'),
                 id='two-argument-setattr-never-called'),  # setattr with two arguments in code never called
    pytest.param(dict(body='    def configure(self):\n        self.register_buffer("_topk_copy", self.topk_indices_buffer, persistent=False)\n\n', init=('self.configure()',)),
                 id='buffer-registered-under-another-name'),  # the buffer registered under another name no warmup reads
    pytest.param(dict(top='import collections\n\n\n', warmup=('x = len(self._names[0]) + 1',), init=('self._names = ("q", "kv")', 'self._slots = collections.OrderedDict.fromkeys(self._names, self.topk_indices_buffer)')),
                 id='dict-fromkeys-of-the-layers-names'),  # OrderedDict.fromkeys(names, buffer) builds a new dict
    pytest.param(dict(warmup=('x = self._counts[0] + 1',), body="    def configure(self):\n        if self.topk_indices_buffer is None:\n            self._mode = len('swa')\n        self._counts = [len(self._sizes)]\n\n", init=('self._sizes = (64, 128)', 'self.configure()')),
                 id='builtin-len-under-a-test-on-the-buffer'),  # len() called under a test on the buffer
    pytest.param(dict(warmup=('x = self._counts[0] + 1',), body='    def configure(self):\n        max(self._buckets, key=len).append(self.topk_indices_buffer)\n        self._counts = [len(self._sizes)]\n\n', init=('self._sizes = (64, 128)', 'self._buckets = [[], []]', 'self.configure()')),
                 id='max-with-a-builtin-key-appends-the-buffer'),  # max(lists, key=len).append(buffer), the warmup never reads them
    pytest.param(dict(top='from torch.nn import init\n\n\n', init=('self._scratch = torch.zeros(4)', 'if self.topk_indices_buffer is None:', '    init.zeros_(self._scratch)')),
                 id='torch-submodule-imported-by-name-fills-scratch-the-warmup-never-reads'),  # torch's names include from torch.nn's
    pytest.param(dict(top='from torch import zeros, fill_\n\n\n', warmup=('x = self._w.shape[-1]',),
                      init=('self._w = zeros(4)',)),
                 id='from-imported-fill_-not-called'),  # (torch.fill_(x, v) itself reads unknown)
    # Python's code that reads the buffer beside the layer's objects but
    # decides no count over them; a kernel-free dict keeping the ratio.
    pytest.param(dict(init=('self._ids = iter(range(2))', 'list(zip([0], self._ids))'), warmup=('i = next(self._ids)',)),
                 id='zip-of-a-constant-list-and-the-layers-iterator'),
    pytest.param(dict(init=('self._ids = iter(range(2))', 'self._m = map(str, [1])', 'if self.topk_indices_buffer is None:', '    next(self._m)'), warmup=('i = next(self._ids)',)),
                 id='lazy-map-of-constants-advanced-by-the-buffer'),
    pytest.param(dict(init=('self._ids = iter(range(1))', 'ok = isinstance(self.topk_indices_buffer, (type(None), torch.Tensor))'), warmup=('i = next(self._ids)',)),
                 id='isinstance-of-the-buffer'),
    pytest.param(dict(init=('self._ids = iter(range(1))', 's = str(self.topk_indices_buffer) + repr(self._ids)'), warmup=('i = next(self._ids)',)),
                 id='str-of-the-buffer-and-repr-of-the-iterator'),
    pytest.param(dict(init=('self._ids = iter(range(1))', 'self._info = dict(topk=self.topk_indices_buffer is not None, block=self.compress_ratio)'), warmup=('i = next(self._ids)',)),
                 id='dict-keeping-the-ratio-beside-a-test-on-the-buffer'),
    pytest.param(dict(init=('self._ids = iter(range(1))', 'w = max(self.compress_ratio, 0 if self.topk_indices_buffer is None else self.topk_indices_buffer.shape[-1])'), warmup=('i = next(self._ids)',)),
                 id='max-of-the-ratio-and-the-buffers-width'),
    pytest.param(dict(top='import math\n\n\n', init=('self._ids = iter(range(1))', 'w = math.ceil(self.compress_ratio / (1 if self.topk_indices_buffer is None else 2))'), warmup=('i = next(self._ids)',)),
                 id='math-ceil-of-the-ratio-by-the-buffer'),
    pytest.param(dict(init=('self._ids = iter(range(1))', 'ok = all(t is None or t.dim() == 2 for t in (self.topk_indices_buffer,))'), warmup=('i = next(self._ids)',)),
                 id='all-over-a-generator-testing-the-buffer'),
    pytest.param(dict(top='import math\n\n\n', init=('self._ids = iter(range(1))', 'w = math.gcd(self.compress_ratio, 1 if self.topk_indices_buffer is None else 2)'), warmup=('i = next(self._ids)',)),
                 id='math-gcd-of-the-ratio-and-a-number-the-buffer-decides'),
    pytest.param(dict(init=('self._ids = iter(range(1))', 'w = pow(self.compress_ratio, int(self.topk_indices_buffer is None))'), warmup=('i = next(self._ids)',)),
                 id='pow-of-the-ratio-by-the-buffer'),
    pytest.param(dict(top='import collections\n\n\n', init=('self._names = list(("q", "kv"))', 'self._slots = collections.OrderedDict.fromkeys(self._names, self.topk_indices_buffer is None)'), warmup=('x = len(self._names[0]) + 1',)),
                 id='dict-fromkeys-of-a-list-made-by-a-call'),
    # Survivors of the mutation tool over aliases.py that read plain code
    # unknown; lists only iterated beside a value the buffer decides.
    pytest.param(dict(top='def _g(*a):\n    return None\n\n', init=('_g(1, 2)',), warmup=('pass',)),
                 id='survivor-1139-lt-isnot'),
    pytest.param(dict(init=('h = [1]', 'self.w_x = h', 'self._k = h'), warmup=('self._k.index(1)',)),
                 id='survivor-741-eq-gt'),
    pytest.param(dict(init=('f = lambda x: x', 'f(self.topk_indices_buffer)'), warmup=('pass',)),
                 id='survivor-189-eq-is'),
    pytest.param(dict(init=('f = lambda x: x', 'f(self.topk_indices_buffer)'), warmup=('pass',)),
                 id='survivor-189-eq-gt'),
    pytest.param(dict(init=('f = lambda x: x', 'f(self.topk_indices_buffer)'), warmup=('pass',)),
                 id='survivor-188-delete-not'),
    pytest.param(dict(init=('f = lambda x: x', 'f(self.topk_indices_buffer)'), warmup=('pass',)),
                 id='survivor-183-numberreplacer'),
    pytest.param(dict(init=('f = lambda x: x', 'f(self.topk_indices_buffer)'), warmup=('pass',)),
                 id='survivor-209-addnot'),
    pytest.param(dict(init=('self._l = [1]', 'b = self._l', 'a = b = []', 'a.append(self.topk_indices_buffer)'), warmup=('self._l.index(1)',)),
                 id='survivor-518-andwithor'),
    pytest.param(dict(body='    def _setup(self):\n        self._m = [x for x in self._n]\n\n', init=('self._n = [1, 2]', 'self._setup()'), warmup=('self._n.index(1)',)),
                 id='survivor-721-addnot'),
    pytest.param(dict(body='    def _setup(self):\n        self._m = [self._n for _ in range(1)]\n\n', init=('self._n = [1, 2]', 'self._setup()'), warmup=('self._n.index(1)',)),
                 id='survivor-732-addnot'),
    pytest.param(dict(body='    def _setup(self):\n        self._m = [x for x in range(2) if self._n.count(x)]\n\n', init=('self._n = [1, 2]', 'self._setup()'), warmup=('self._n.index(1)',)),
                 id='survivor-727-andwithor'),
    pytest.param(dict(body='    def _setup(self):\n        list(map(len, [[self.topk_indices_buffer]]))\n        self._k = len([1])\n\n', init=('self._setup()',), warmup=('self._k.bit_length()',)),
                 id='survivor-1004-numberreplacer'),
    pytest.param(dict(body='    def _setup(self):\n        if self.topk_indices_buffer is not None:\n            len([])\n        self._k = len([1])\n\n', init=('self._setup()',), warmup=('self._k.bit_length()',)),
                 id='survivor-979-numberreplacer'),
    pytest.param(dict(init=("setattr(self, '0', self.topk_indices_buffer)",), warmup=('pass',)),
                 id='survivor-338-eq-lte'),
    pytest.param(dict(body="    def _setup(self):\n        if getattr(self, '_n') is not None:\n            self._m = 1\n\n", init=('self._n = 1', 'self._setup()'), warmup=('self._m.bit_length()',)),
                 id='survivor-412-delete-not'),
    pytest.param(dict(body="    def _setup(self):\n        if getattr(self, '_n') is not None:\n            self._m = 1\n\n", init=('self._n = 1', 'self._setup()'), warmup=('self._m.bit_length()',)),
                 id='survivor-412-addnot'),
    pytest.param(dict(body="    def _setup(self):\n        if getattr(self, '_n') is not None:\n            self._m = 1\n\n", init=('self._n = 1', 'self._setup()'), warmup=('self._m.bit_length()',)),
                 id='survivor-416-delete-not'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\nimport math\n', init=("self._names = ['q', 'k']", 'for _n, _f in zip(self._names, [self.topk_indices_buffer is None] * 2):', '    pass'), warmup=('self._names[0]',)),
                 id='probe-control-names-zip-for'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\nimport math\n', init=("self._names = ['q', 'k']", 'self._flags = dict(zip(self._names, (self.topk_indices_buffer is None, False)))'), warmup=('self._names[0]',)),
                 id='probe-control-names-zip-dict'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\nimport math\n', init=("self._names = ['q', 'k']", 'for _i, _n in zip(range(1 + (self.topk_indices_buffer is None)), self._names):', '    pass'), warmup=('self._names[0]',)),
                 id='probe-control-range-len-zip'),
    # `super().__init__(*args, **kwargs)` hands nothing to `self`; a str's
    # methods (`' '.join`) are Python's, not code the walk cannot name.
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\nimport math\n', init=("self._names = ['q', 'k']", "self._anyt = any(n == 'topk' and self.topk_indices_buffer is not None for n in self._names)"), warmup=('self._names[0]',)),
                 id='probe-control-any-names'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\nimport math\n', init=("self._names = ['q', 'k']", "self._s = ','.join(self._names) + str(self.topk_indices_buffer is None)"), warmup=('self._names[0]',)),
                 id='probe-control-str-join-names'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\nimport math\n', init=("self._tag = 'mla'", "self._desc = ' '.join(['flashmla', str(self.topk_indices_buffer is not None)])"), warmup=('self._tag.upper()',)),
                 id='probe-control-join-desc'),
    pytest.param(dict(top='import itertools\nimport functools\nimport collections\nimport contextlib\nimport logging\nimport math\n', init=("self._tag = 'mla'", "self._desc = 'topk={}'.format(self.topk_indices_buffer is not None)"), warmup=('self._tag.upper()',)),
                 id='probe-control-format-desc'),
]


@pytest.mark.parametrize("changes", NEVER_SAFE)
def test_state_that_may_hand_the_warmup_a_missing_buffer_is_never_safe(stock, changes):
    """The warmup may crash for lack of the buffer: never fixed or not affected."""
    c = classify_source(fork(stock, **changes))
    assert c.verdict not in (Verdict.FIXED, Verdict.NOT_AFFECTED), c.reason


@pytest.mark.parametrize("changes", READS_FIXED)
def test_bookkeeping_that_keeps_nothing_of_the_buffer_reads_fixed(stock, changes):
    """Nothing of the buffer reaches the warmup: the fix is still recognised."""
    c = classify_source(fork(stock, **changes))
    assert c.verdict is Verdict.FIXED, c.reason
