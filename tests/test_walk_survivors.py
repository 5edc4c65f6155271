"""Survivors of the mutation tool over ``warmup_shape/statements.py`` and
``warmup_shape/expressions.py`` (2026-12-07): each fork below gets one
verdict from the walk and another (or an exception) from one surviving
mutant, so these pin what the walk says of them. Sources are vLLM
0.27.1's ``flashmla.py`` with vLLM #50693 applied (``fixed``), changed by
``test_module_as_loaded.build``.

- a set of constants unpacked into names (``a, b = {1, 2}``): the walk
  reads the set as a frozenset of unknown order, and goes on;
- ``match`` with a case whose pattern is a value the walk cannot read
  (``case torch.bfloat16:``) that may raise: unknown;
- ``case _:`` (a pattern that is ``None`` in the tree): no crash;
- a case that cannot match before one that matches and raises: affected;
- an or-pattern none of whose values matches: the arm never runs;
- this module's function handed to outside code (``torch.compile(_h)``):
  walked as called there, with no receiver;
- a method called with the layer's class as its ``self``, storing an
  attribute on it: the class handed to a store is unknown, not a crash;
- the layer handed to a module function through ``*args``: the tuple may
  hold the buffer (unknown); constants handed so hold nothing of it;
- a crash after a ``for`` loop that has no ``break``: reached for sure;
- a case whose guard the walk cannot decide (a mutant raised on it);
- ``case True:`` does not match ``1`` (Python compares singletons by
  identity);
- a module function with a parameter handed to outside code: walked with
  a value for it;
- ``a, *b, c = (1, 2, 3)``: ``c`` is 3; ``*a, b, c`` of five items: ``b``
  and ``c`` are the last two;
- ``raise ValueError(x.shape)``: the argument runs (and fails) before
  the raise a handler would take;
- an attribute stored in a ``try`` after what fails for lack of the
  buffer: after the handler it holds what it held before (without the
  buffer the warmup's ``self._d['k']`` fails; it reads unknown);
- a ``finally`` block with a ``def`` and then ``return``: the return
  drops the exception;
- a context manager reached by a subscript (``with [suppress(...)][0]:``)
  may swallow what its body raises: the warmup runs, so not affected;
- ``case 3:`` on ``q.dim()``, a value the walk cannot read, may match:
  the crash under it is reached maybe (a mutant never matched it: fixed);
- a ``for`` over a constant too long to unroll (``("a",) * 9``, a string
  of ten characters) binds its items, not an unknown value;
- a crash after a loop whose body changes a name (a second pass) is still
  certain;
- a ``for``'s ``else`` that may return: the crash after it is reached
  maybe (the walk read it certain: affected, until 2026-12-07); an
  ``else`` that returns: never reached;
- a ``with`` that may swallow, in a loop, whose body may return: the crash
  after the loop is reached maybe;
- a method of the layer handed to outside code (``torch.compile(self._m)``):
  walked as called there with the layer as ``self`` (a mutant that dropped
  the receiver read every such fork unknown);
- code the missing buffer chose (an arm, a helper's arm) reads an
  iterator, the caller's or the layer's, that the code after reads: the
  warmup fails without the buffer; unknown (read fixed until 2026-12-07);
  a constant read there changes nothing: fixed; so is a function called
  where the buffer steers (after a return it could have taken); the
  layer's attribute read by ``getattr`` and the forward context's
  containers, chosen or skipped, are unknown too (a held-out review's
  forks, read fixed until 2026-12-07); ``attn_metadata`` read there: fixed;
- a nested ``def``'s annotations run when it does (``flashmla.py`` has no
  ``from __future__ import annotations``): one that reads ``.shape`` of
  the missing buffer fails (affected, read fixed until 2026-12-07), one
  that binds a name is unknown, plain type names change nothing;
- an unrolled loop's pass that one path leaves by ``return`` and another
  by ``continue``: the crash after the loop is reached maybe (a mutant
  took the paths that go on for all of them: affected);
- a nested function whose parameter named ``self`` holds another object
  (a tensor): ``self.foo = 1`` there sets the tensor's attribute, and the
  layer's ``foo`` read after it is still 0 (a mutant stored it on the
  layer: affected);
- a ``while`` whose test on the missing buffer is true runs its first
  pass: a call there that changes nothing leaves the method ``fixed`` (a
  mutant held the body to the rule for skipped code: unknown);
- the buffer read off an object other than the layer (vLLM's registry of
  layers by prefix holds the layer itself): unknown;
- (survivors of ``warmup_shape/expressions.py``) a constant looked up by
  an index of any kind the missing buffer chose (the layer's class): the
  lookup may fail (it does: TypeError), unknown; so are ``**`` of a value
  the missing buffer chose, a name bound by ``:=`` in both arms of an
  undecided conditional, and a comprehension's name over constants the
  missing buffer chose; ``isinstance`` with three arguments in a ``try``
  that takes the TypeError: fixed.
"""

from __future__ import annotations

import pytest

from dspark_attn_plugin.warmup_shape import Verdict, classify_source

from test_module_as_loaded import build, stock  # noqa: F401  (the fixture: vLLM 0.27.1's source)

CASES = [
    pytest.param(dict(warmup=("a, b = {1, 2}",)), Verdict.FIXED,
                 id="set-of-constants-unpacked"),
    pytest.param(dict(warmup=("match 1:", "    case torch.bfloat16:", "        raise ValueError('x')")),
                 Verdict.UNKNOWN, id="match-on-a-value-the-walk-cannot-read-may-raise"),
    pytest.param(dict(warmup=("match 1:", "    case _:", "        pass")), Verdict.FIXED,
                 id="match-wildcard"),
    pytest.param(dict(warmup=("match 1:", "    case 2:", "        pass", "    case 1:",
                              "        raise ValueError('x')")),
                 Verdict.AFFECTED, id="match-second-case-matches-and-raises"),
    pytest.param(dict(warmup=("match 1:", "    case 2 | 3:", "        raise ValueError('x')")),
                 Verdict.FIXED, id="match-or-pattern-that-never-matches"),
    pytest.param(dict(top="def _h():\n    return None\n\n\n", warmup=("torch.compile(_h)",)),
                 Verdict.FIXED, id="module-function-handed-to-outside-code"),
    pytest.param(dict(body="    def _store(self):\n        self.foo = 1\n\n",
                      warmup=("type(self)._store(type(self))",)),
                 Verdict.UNKNOWN, id="method-called-with-the-class-as-self-stores-on-it"),
    pytest.param(dict(top="def _h(*a):\n    return a[0].topk_indices_buffer.shape[-1]\n\n\n",
                      warmup=("x = _h(self)",)),
                 Verdict.UNKNOWN, id="the-layer-handed-through-star-args"),
    pytest.param(dict(top="def _h(*a):\n    return len(a)\n\n\n", warmup=("x = _h(1, 2)",)),
                 Verdict.FIXED, id="constants-handed-through-star-args"),
    pytest.param(dict(warmup=("for _d in q.shape:", "    pass", "x = self.topk_indices_buffer.shape")),
                 Verdict.AFFECTED, id="crash-after-a-loop-without-break-is-certain"),
    pytest.param(dict(warmup=("match 1:", "    case 1 if q.dim() == 3:", "        pass")),
                 Verdict.FIXED, id="match-case-with-a-guard-the-walk-cannot-decide"),
    pytest.param(dict(warmup=("match 1:", "    case True:", "        raise ValueError('x')")),
                 Verdict.FIXED, id="match-singleton-compares-by-identity"),
    pytest.param(dict(top="def _h(x):\n    return x\n\n\n", warmup=("torch.compile(_h)",)),
                 Verdict.FIXED, id="module-function-with-a-parameter-handed-to-outside-code"),
    pytest.param(dict(warmup=("a, *b, c = (1, 2, 3)", "x = (0,)[3 - c]")),
                 Verdict.FIXED, id="starred-unpacking-of-constants-gives-the-last-name-the-last-item"),
    pytest.param(dict(warmup=("*a, b, c = (10, 11, 12, 13, 14)", "x = (0,)[b - 13] + (0,)[c - 14]")),
                 Verdict.FIXED, id="starred-first-unpacking-gives-the-last-two-names-the-last-two-items"),
    pytest.param(dict(warmup=("try:", "    raise ValueError(self.topk_indices_buffer.shape)",
                              "except ValueError:", "    pass")),
                 Verdict.AFFECTED, id="raise-runs-its-arguments-first"),
    pytest.param(dict(warmup=("self._d = {}", "try:", "    self.topk_indices_buffer.shape",
                              "    self._d = {'k': 1}", "except AttributeError:", "    pass",
                              "x = self._d['k']")),
                 Verdict.UNKNOWN, id="attribute-stored-after-what-raises-for-lack-of-the-buffer"),
    pytest.param(dict(body="    def _h(self):\n        try:\n            self.topk_indices_buffer.shape\n"
                           "        finally:\n            def _g():\n                pass\n            return 0\n\n",
                      warmup=("x = self._h()",)),
                 Verdict.FIXED, id="finally-with-a-def-then-return-drops-the-exception"),
    pytest.param(dict(top="import contextlib\n",
                      warmup=("with [contextlib.suppress(AttributeError)][0]:",
                              "    self.topk_indices_buffer.shape")),
                 Verdict.UNKNOWN, id="a-manager-reached-by-a-subscript-may-swallow"),
    pytest.param(dict(warmup=("match q.dim():", "    case 3:", "        self.topk_indices_buffer.shape")),
                 Verdict.UNKNOWN, id="a-value-case-on-a-subject-the-walk-cannot-read-may-match"),
    # (2026-12-07, statements.py's open survivors and the for-else found
    # while reading them)
    pytest.param(dict(warmup=('for k in ("a",) * 9:',
                              '    x = 0 if k == "a" else self.topk_indices_buffer.shape[-1]')),
                 Verdict.FIXED, id="for-over-a-long-constant-tuple-takes-its-items"),
    pytest.param(dict(warmup=('for k in "aaaaaaaaaa":',
                              '    x = 0 if k == "a" else self.topk_indices_buffer.shape[-1]')),
                 Verdict.FIXED, id="for-over-a-long-constant-string-takes-its-characters"),
    pytest.param(dict(warmup=("n = 0", "for _ in range(2):", "    n = 1", "raise ValueError('x')")),
                 Verdict.AFFECTED, id="crash-after-a-loop-whose-body-changes-a-name-is-certain"),
    pytest.param(dict(warmup=("for _ in range(2):", "    pass", "else:", "    if q.dim() == 3:",
                              "        return", "raise ValueError('x')")),
                 Verdict.UNKNOWN, id="for-else-that-may-return-then-a-crash"),
    pytest.param(dict(warmup=("for _ in range(2):", "    pass", "else:", "    return",
                              "raise ValueError('x')")),
                 Verdict.FIXED, id="for-else-that-returns-then-a-crash-never-reached"),
    pytest.param(dict(top="import contextlib\n",
                      warmup=("for _ in range(2):", "    with contextlib.suppress(ValueError):",
                              "        if q.dim() == 3:", "            return",
                              "raise ValueError('x')")),
                 Verdict.UNKNOWN, id="a-loop-whose-swallowing-with-may-return-then-a-crash"),
    # (2026-12-07, the unrolled loop's `else` survivor: how a loop or a try
    # left decides what runs next. Each of these fails the SWA-only warmup
    # without the buffer: tests/test_generated_variants.py runs them.)
    pytest.param(dict(warmup=("_g = iter((5, 6))", "try:", "    for _ in (1,):",
                              "        _t = self.topk_indices_buffer.shape", "    else:", "        next(_g)",
                              "except AttributeError:", "    pass", "_a, = _g")),
                 Verdict.UNKNOWN, id="unrolled-for-else-skipped-by-a-caught-failure"),
    pytest.param(dict(warmup=("_g = iter((5, 6))", "try:", "    for _ in range(1):",
                              "        _t = self.topk_indices_buffer.shape", "    else:", "        next(_g)",
                              "except AttributeError:", "    pass", "_a, = _g")),
                 Verdict.UNKNOWN, id="for-else-skipped-by-a-caught-failure"),
    pytest.param(dict(body="    def _configure(self):\n        for _ in (1,):\n"
                           "            if self.topk_indices_buffer is None:\n                return\n"
                           "        else:\n            next(self._ids)\n\n",
                      warmup=("self._ids = iter(range(2))", "self._configure()", "_a, = self._ids")),
                 Verdict.UNKNOWN, id="helper-for-else-skipped-by-a-return"),
    pytest.param(dict(warmup=("_g = iter((5, 6))", "_k = 0", "try:", "    _t = self.topk_indices_buffer.shape",
                              "except AttributeError:", "    pass", "else:", "    _k = 1", "if _k:",
                              "    next(_g)", "_a, = _g")),
                 Verdict.UNKNOWN, id="try-else-binds-a-name-the-buffer-skips"),
    pytest.param(dict(warmup=("_g = iter((5, 6))", "_k = 0", "try:", "    _t = self.topk_indices_buffer.shape",
                              "except AttributeError:", "    _k = 1", "if not _k:", "    next(_g)", "_a, = _g")),
                 Verdict.UNKNOWN, id="handler-chosen-by-the-buffer-binds-a-name"),
    pytest.param(dict(body="    def _probe(self):\n        try:\n            self.topk_indices_buffer.shape\n"
                           "        except AttributeError:\n            return 1\n        return 0\n\n",
                      warmup=("_g = iter((5, 6))", "if not self._probe():", "    next(_g)", "_a, = _g")),
                 Verdict.UNKNOWN, id="handler-chosen-by-the-buffer-returns"),
    pytest.param(dict(body="    def _probe(self):\n        try:\n"
                           "            return self.topk_indices_buffer.shape[0] * 0\n"
                           "        except AttributeError:\n            pass\n        return 1\n\n",
                      warmup=("_g = iter((5, 6))", "if not self._probe():", "    next(_g)", "_a, = _g")),
                 Verdict.UNKNOWN, id="return-cut-short-by-the-buffer-leaves-the-rest"),
    pytest.param(dict(warmup=("_g = iter((5, 6))", "_k = 0", "try:", "    _t = self.topk_indices_buffer.shape",
                              "except AttributeError:", "    _k = 1", "finally:", "    if not _k:",
                              "        next(_g)", "_a, = _g")),
                 Verdict.UNKNOWN, id="finally-reads-what-a-chosen-handler-bound"),
    pytest.param(dict(warmup=("_g = iter((5, 6))", "_k = 0", "try:", "    try:",
                              "        _t = self.topk_indices_buffer.shape", "        raise ValueError('x')",
                              "    except AttributeError:", "        pass", "except ValueError:", "    _k = 1",
                              "if _k:", "    next(_g)", "_a, = _g")),
                 Verdict.UNKNOWN, id="raise-cut-short-by-the-buffer-reaches-an-outer-handler"),
    pytest.param(dict(body="    def _probe(self):\n        try:\n            self.topk_indices_buffer.shape\n"
                           "            return 0\n        except AttributeError:\n            pass\n"
                           "        return 1\n\n",
                      warmup=("_g = iter((5, 6))", "if not self._probe():", "    next(_g)", "_a, = _g")),
                 Verdict.UNKNOWN, id="return-after-a-failure-in-a-try-body"),
    # (a held-out review of those rules, 2026-12-07)
    pytest.param(dict(warmup=('lst = []', 'try:', '    try:', '        self.topk_indices_buffer.shape', '    except KeyError:', '        pass', '    lst.append(1)', 'except AttributeError:', '    pass', 'lst[0]')),
                 Verdict.UNKNOWN, id="inner-try-of-another-class-leaves-the-outer-body-rest"),
    pytest.param(dict(warmup=('lst = []', 'try:', '    try:', '        self.topk_indices_buffer.shape', '    except KeyError:', '        pass', 'except AttributeError:', '    pass', 'else:', '    lst.append(1)', 'lst[0]')),
                 Verdict.UNKNOWN, id="inner-try-of-another-class-leaves-the-outer-else"),
    pytest.param(dict(body='    def _h(self, lst):\n        try:\n            try:\n                self.topk_indices_buffer.shape\n            except KeyError:\n                pass\n            lst.append(1)\n        finally:\n            return\n\n', warmup=('lst = []', 'self._h(lst)', 'lst[0]')),
                 Verdict.UNKNOWN, id="inner-try-of-another-class-under-a-finally-that-returns"),
    pytest.param(dict(body="    def _h(self):\n        _r = 'b'\n        for _ in (0,):\n            if self.topk_indices_buffer is None:\n                continue\n            _r = 'a'\n        return _r\n\n", warmup=('_v = self._h()', "{'a': 1}[_v]")),
                 Verdict.UNKNOWN, id="helper-loop-continued-by-the-buffer-returns-a-name"),
    pytest.param(dict(body="    def _h(self):\n        _r = 'b'\n        for _ in (0,):\n            try:\n                self.topk_indices_buffer.shape\n            except AttributeError:\n                break\n            _r = 'a'\n        return _r\n\n", warmup=('_v = self._h()', "{'a': 1}[_v]")),
                 Verdict.UNKNOWN, id="helper-loop-left-by-a-handler-returns-a-name"),
    pytest.param(dict(warmup=('lst = []', 'try:', '    for _x in self.topk_indices_buffer.shape[:1]:', '        lst.append(1)', 'except AttributeError:', '    pass', 'lst[0]')),
                 Verdict.UNKNOWN, id="loop-header-fails-its-body-skipped"),
    pytest.param(dict(warmup=('g = iter((5, 6))', 'try:', '    match self.topk_indices_buffer.shape:', '        case _:', '            next(g)', 'except AttributeError:', '    pass', '_a, = g')),
                 Verdict.UNKNOWN, id="match-subject-fails-its-case-skipped"),
    pytest.param(dict(top="import contextlib\ndef _h(layer, k):\n    try:\n        with contextlib.nullcontext(layer.topk_indices_buffer.shape):\n            k[0] = 'b'\n    except AttributeError:\n        pass\n    return None\n\n", warmup=("k = ['a']", '_h(self, k)', "{'b': 1}[k[0]]")),
                 Verdict.UNKNOWN, id="with-item-fails-its-body-skipped-in-a-module-function"),
    pytest.param(dict(body='    def _h(self, g):\n        try:\n            try:\n                self.topk_indices_buffer.shape\n            except KeyError:\n                pass\n        except AttributeError:\n            return\n        next(g)\n\n', warmup=('g = iter((5, 6))', 'self._h(g)', '_a, = g')),
                 Verdict.UNKNOWN, id="outer-handler-leaves-after-an-inner-try-of-another-class"),
    pytest.param(dict(warmup=("_k = 0", "try:", "    _t = self.compress_ratio + 0", "except TypeError:",
                              "    _k = 1", "x = _k")),
                 Verdict.FIXED, id="handler-no-failure-chose-binds-a-name"),
    pytest.param(dict(warmup=("_k = 0", "for _ in (1,):", "    _t = self.compress_ratio", "else:", "    _k = 1",
                              "x = (0, 1)[_k]")),
                 Verdict.FIXED, id="for-else-no-failure-left"),
    pytest.param(dict(body="    def _reserve(self):\n        if self.compress_ratio <= 1:\n"
                           "            return\n        assert self.topk_indices_buffer is not None\n\n",
                      warmup=("torch.compile(self._reserve)",)),
                 Verdict.FIXED, id="bound-method-handed-to-outside-code-runs-on-the-layer"),
    pytest.param(dict(warmup=("_k = 0", "for _d in q.shape:", "    _k = 1", "if _k:", "    pass")),
                 Verdict.FIXED, id="loop-the-buffer-does-not-steer-binds-plain-names"),
    pytest.param(dict(warmup=("_k = 0", "while _k < 3:", "    _k = _k + 1", "if _k:", "    pass")),
                 Verdict.FIXED, id="while-the-buffer-does-not-steer-binds-plain-names"),
    pytest.param(dict(warmup=("try:", "    raise torch.SomeError('x')", "except torch.OtherError:",
                              "    pass")),
                 Verdict.UNKNOWN, id="unknown-class-raised-an-unknown-class-caught-may-escape"),
    pytest.param(dict(top="def _h(a, b=2):\n    return a\n\n\n", warmup=("x = _h(1, b=3)",)),
                 Verdict.FIXED, id="keyword-argument-for-a-parameter"),
    pytest.param(dict(top="def _h(a, b=2):\n    return a\n\n\n", warmup=("x = _h(1, c=3)",)),
                 Verdict.AFFECTED, id="keyword-argument-no-parameter-takes-raises"),
    pytest.param(dict(warmup=("match 10 ** 3:", "    case 1000:", "        raise ValueError('x')")),
                 Verdict.AFFECTED, id="match-value-compares-by-equality-not-identity"),
    # Code the missing buffer chose reads an object a read changes (the
    # SWA-only warmup of each fails without the buffer: the same shapes in
    # tests/test_generated_variants.py run it).
    pytest.param(dict(warmup=("_g = iter((5,))", "if self.topk_indices_buffer is None:", "    _t = 5 in _g",
                              "_a, = _g")),
                 Verdict.UNKNOWN, id="chosen-arm-reads-an-iterator"),
    pytest.param(dict(body="    def _h(self, g):\n        if self.topk_indices_buffer is None:\n"
                           "            _t = 5 in g\n        return None\n\n",
                      warmup=("_g = iter((5,))", "self._h(_g)", "_a, = _g")),
                 Verdict.UNKNOWN, id="helper-chosen-arm-reads-the-callers-iterator"),
    pytest.param(dict(warmup=("self._ids = iter((5,))", "if self.topk_indices_buffer is None:",
                              "    _t = 5 in self._ids", "_a, = self._ids")),
                 Verdict.UNKNOWN, id="chosen-arm-reads-the-layers-iterator"),
    pytest.param(dict(warmup=("_c = (5,)", "if self.topk_indices_buffer is None:", "    _t = 5 in _c",
                              "_a, = _c")),
                 Verdict.FIXED, id="chosen-arm-reads-a-constant"),
    pytest.param(dict(warmup=("_g = iter((5,))", "def _adv():", "    _t = 5 in _g", "def _w():",
                              "    if self.topk_indices_buffer is not None:", "        return", "    _adv()",
                              "_w()", "_a, = _g")),
                 Verdict.UNKNOWN, id="closure-called-where-the-buffer-steers-reads-an-iterator"),
    pytest.param(dict(body="    def _p(self):\n        return 1\n\n",
                      warmup=("def _w():", "    if self.topk_indices_buffer is not None:", "        return",
                              "    return self._p()", "x = _w()")),
                 Verdict.FIXED, id="method-called-where-the-buffer-steers-reads-nothing"),
    pytest.param(dict(warmup=("self._ids = iter((5,))", "if self.topk_indices_buffer is None:",
                              "    _t = 5 in getattr(self, '_ids')", "_a, = self._ids")),
                 Verdict.UNKNOWN, id="chosen-arm-reads-the-layers-iterator-by-getattr"),
    pytest.param(dict(warmup=("_fc = get_forward_context()", "_fc.slot_mapping['ids'] = iter((5,))",
                              "if self.topk_indices_buffer is None:", "    _t = 5 in _fc.slot_mapping['ids']",
                              "_a, = _fc.slot_mapping['ids']")),
                 Verdict.UNKNOWN, id="chosen-arm-reads-a-forward-context-container"),
    pytest.param(dict(warmup=("_fc = get_forward_context()", "_fc.slot_mapping['ids'] = iter((5,))",
                              "if self.topk_indices_buffer is not None:", "    _t = 5 in _fc.slot_mapping['ids']",
                              "assert 5 not in _fc.slot_mapping['ids']")),
                 Verdict.UNKNOWN, id="skipped-arm-reads-a-forward-context-container"),
    pytest.param(dict(warmup=("_fc = get_forward_context()", "if self.topk_indices_buffer is None:",
                              "    _t = _fc.attn_metadata", "x = 1")),
                 Verdict.FIXED, id="chosen-arm-reads-the-attention-metadata"),
    pytest.param(dict(warmup=("def _z(x: self.topk_indices_buffer.shape): pass",)),
                 Verdict.AFFECTED, id="nested-def-argument-annotation-runs"),
    pytest.param(dict(warmup=("def _z(x) -> self.topk_indices_buffer.shape: pass",)),
                 Verdict.AFFECTED, id="nested-def-return-annotation-runs"),
    pytest.param(dict(warmup=("_n = 0", "def _z(x: (_n := int(self.topk_indices_buffer is None))): pass",
                              "x = (0,)[_n]")),
                 Verdict.UNKNOWN, id="nested-def-annotation-binds-a-name"),
    pytest.param(dict(warmup=("def _z(x: int, *a: int, k: float = 1.0, **kw: str) -> None:", "    pass",
                              "_z(1)")),
                 Verdict.FIXED, id="nested-def-plain-annotations"),
    # (2026-12-07 evening) a pass of an unrolled loop that a path may
    # leave by ``return`` and another by ``continue``: the paths that go
    # on are not all that entered (executed: the warmup returns before
    # the assertion, and starts without the buffer)
    pytest.param(dict(warmup=("if q.dim() == 3:", "    for _i in (1,):", "        if q.dim() >= 0:",
                              "            return q", "        if q.dim() == 3:", "            continue",
                              "assert self.topk_indices_buffer is not None")),
                 Verdict.UNKNOWN, id="unrolled-loop-a-return-and-a-continue-leave-the-crash-after-maybe"),
    # a nested function whose first parameter is named ``self`` but is
    # handed another object: its store lands there, not on the layer
    # (executed: the layer's ``foo`` stays 0, the warmup runs)
    pytest.param(dict(warmup=("self.foo = 0", "def _g(self, me):", "    self.foo = 1", "    return me.foo",
                              "_n = _g(q, self)", "x = (0,)[_n]")),
                 Verdict.FIXED, id="nested-function-self-parameter-holding-another-object-stores-there"),
    # a ``while`` on the missing buffer is entered on its first pass: its
    # body is code the buffer's absence chose, not code it skipped
    # (executed: the body calls a function that changes nothing, breaks,
    # and the warmup runs)
    pytest.param(dict(top="def _h():\n    return None\n\n\n",
                      body="    def _w(self):\n        while self.topk_indices_buffer is None:\n"
                           "            _h()\n            break\n        return None\n\n",
                      warmup=("self._w()",)),
                 Verdict.FIXED, id="while-on-the-missing-buffer-runs-its-first-pass"),
    # the forward context's ``no_compile_layers`` is vLLM's static forward
    # context, where each attention layer registers itself by its prefix:
    # this is the layer, read as an object the walk cannot tell from it
    # (read fixed until 2026-12-07)
    pytest.param(dict(warmup=("x = get_forward_context().no_compile_layers[self.prefix]"
                              ".topk_indices_buffer.shape",)),
                 Verdict.UNKNOWN, id="the-buffer-read-off-the-layer-found-in-a-registry"),
    # (survivors of warmup_shape/expressions.py, 2026-12-07 night) an index
    # that is the layer's class when the buffer is missing: a tuple looked
    # up by a class raises TypeError (executed: SWA-only layers without the
    # buffer fail, those with one run; a mutant that held only some kinds
    # of index to the rule read it fixed)
    pytest.param(dict(warmup=("x = (1, 2)[type(self) if self.topk_indices_buffer is None else 0]",)),
                 Verdict.UNKNOWN, id="a-constant-looked-up-by-the-class-when-the-buffer-is-missing"),
    # a helper that returns a list without the buffer (a dict with one):
    # ``**`` of a list raises TypeError (executed: SWA-only layers without
    # the buffer fail; a mutant that looked at another entry read it fixed)
    pytest.param(dict(body="    def _m(self):\n        if self.topk_indices_buffer is None:\n"
                           "            return []\n        return {}\n\n",
                      warmup=("x = {'k': 1, **self._m()}",)),
                 Verdict.UNKNOWN, id="double-star-unpacking-of-what-the-missing-buffer-chose"),
    # a name bound by ``:=`` in each arm of a conditional expression the
    # walk cannot decide: after it, the name may hold either (executed: the
    # else arm runs, ``None + 1`` fails without the buffer; a mutant kept
    # the first arm's value and read it fixed)
    pytest.param(dict(warmup=("x = (_v := 1) if q.dim() == 99 else (_v := self.topk_indices_buffer)",
                              "y = _v + 1")),
                 Verdict.UNKNOWN, id="walrus-in-both-arms-of-an-undecided-conditional"),
    # a comprehension over a constant tuple whose second item the missing
    # buffer chose: the loop name may be any item (executed: (0,)[1] fails
    # without the buffer; a mutant bound only the first item and read it fixed)
    pytest.param(dict(warmup=("x = [(0,)[_i] for _i in (0, 1 if self.topk_indices_buffer is None else 0)]",)),
                 Verdict.UNKNOWN, id="comprehension-over-constants-the-missing-buffer-chose"),
    # ``isinstance`` with three arguments raises TypeError, which the
    # warmup catches: it runs on every layer (a mutant unpacked the three
    # into two and raised inside the walk)
    pytest.param(dict(warmup=("try:", "    x = isinstance(1, (), 3)", "except TypeError:", "    pass")),
                 Verdict.FIXED, id="isinstance-with-three-arguments-caught"),
]


@pytest.mark.parametrize(("changes", "verdict"), CASES)
def test_what_the_walk_says_of_these_forks(stock, changes, verdict):
    c = classify_source(build(stock, **changes))
    assert c.verdict is verdict, c.reason
