"""The walk against Python itself: each warmup body here is run by Python
on an SWA-only layer (``compress_ratio`` 0, no ``topk_indices_buffer``) and
classified; a verdict that says the warmup starts (``fixed``,
``not-affected``) must never meet a body that raises for lack of the
buffer, and ``affected`` never one that runs. Found by generating bodies
around comprehensions, generators, unpacking and context managers."""

from __future__ import annotations

import textwrap

import pytest

from dspark_attn_plugin.warmup_shape import Verdict
from test_small_rules import verdict

SAFE = (Verdict.FIXED, Verdict.NOT_AFFECTED)


def _raises(body: str, module: dict | None = None, helpers: str = "", tail: str = "") -> type | None:
    """What Python raises running ``body`` as the warmup's body on an
    SWA-only layer (``q`` a one-item tuple), with the class's ``helpers``
    and the module's ``tail`` code and ``module`` names; None if nothing."""
    namespace = {"contextlib": __import__("contextlib"), **(module or {})}
    source = ("class Layer:\n" + textwrap.indent(textwrap.dedent(helpers), "    ")
              + "    def f(self, q=(1,)):\n" + textwrap.indent(body, "        ")
              + textwrap.dedent(tail))
    exec(compile(source, "<body>", "exec"), namespace)
    layer = namespace["Layer"]()
    layer.compress_ratio, layer.topk_indices_buffer, layer.foo = 0, None, None
    try:
        layer.f()
    except Exception as exc:  # the exception is the result
        return type(exc)
    return None


def _raises_and_is_not_read_safe(exc: type, body: str, helpers: str = "", tail: str = "") -> None:
    """Python raises ``exc`` for ``body`` on an SWA-only layer, and the
    classifier does not say that the warmup starts."""
    assert _raises(body, helpers=helpers, tail=tail) is exc
    assert verdict(body, helpers=helpers, tail=tail) not in SAFE


@pytest.mark.parametrize("body", [
    "x = [y for y in q]\nz = y + 1\n",
    "x = {y for y in q}\nz = y + 1\n",
    "x = {y: 1 for y in q}\nz = y + 1\n",
    "x = list(y for y in q)\nz = y + 1\n",
    "x = [[y for y in q] for w in q]\nz = y + 1\n",
    "x = [(y, w) for y in q for w in q]\nz = y + w\n",
    "x = [y for y in q]\nw = [1 for _ in (y,)]\n",
    "x = [y for a in (y for y in q) if y]\n",
])
def test_a_comprehension_s_loop_variable_is_its_own_not_the_method_s(body):
    """After ``[y for y in q]`` the method's ``y`` is the module's constant
    (Python reads it, no error): the warmup never uses the buffer, not a
    local read before it is bound."""
    assert _raises(body, {"y": 3, "w": 4}) is None
    assert verdict(body, tail="\ny = 3\nw = 4\n") is Verdict.NOT_AFFECTED


@pytest.mark.parametrize("body", [
    "x = [1 for a in q if b for b in q]\n",
    "b = 1\nx = [1 for a in q if b for b in q]\n",
    "x = [1 for a in q if [b for c in q] for b in q]\n",
])
def test_a_comprehension_reading_its_own_loop_variable_before_its_loop_is_never_safe(body):
    """``b`` of a later ``for`` clause is the comprehension's own, unbound
    in the clauses before it (and in comprehensions nested there), whatever
    the module or the method binds: Python raises, so the warmup is neither
    fixed nor not-affected."""
    assert issubclass(_raises(body, {"b": 3}), NameError)  # UnboundLocalError, or a free b
    assert verdict(body, tail="\nb = 3\n") not in (Verdict.FIXED, Verdict.NOT_AFFECTED)


@pytest.mark.parametrize("body, module", [
    ("for a in 3:\n    pass\n", {}),
    ("x = [a for a in 2.5]\n", {}),
    ("x = [a for a in N]\n", {"N": 8}),
    ("x = [y for y in y]\n", {"y": 3}),
    ("x = {a for a in FLAG}\n", {"FLAG": True}),
    ("for a in self.topk_indices_buffer:\n    pass\n", {}),
])
def test_iterating_a_constant_that_does_not_iterate_crashes_every_layer(body, module):
    """``for a in 3`` (or a module constant, or the missing buffer) raises
    TypeError whenever the warmup runs: ``affected``, not a safe verdict."""
    tail = "".join(f"\n{k} = {v!r}\n" for k, v in module.items())
    assert _raises(body, module) is TypeError
    assert verdict(body, tail=tail) is Verdict.AFFECTED


@pytest.mark.parametrize("body", [
    "x = [1 for a in q for b in None]\n",
    "x = [1 for a in q for b in 3]\n",
])
def test_a_crash_in_a_later_for_clause_of_a_comprehension_is_reached_only_maybe(body):
    """The second ``for`` runs only when the first yields an item: with an
    empty ``q`` nothing raises, so the crash is not certain (``unknown``)."""
    assert _raises(body.replace("in q", "in ()"), {}) is None
    assert _raises(body, {}) is TypeError
    assert verdict(body) is Verdict.UNKNOWN


@pytest.mark.parametrize("body", [
    "r = [x for x in (1,) if self.topk_indices_buffer is not None]\nr[0]\n",
    "r = [x for x in (1,) if self.topk_indices_buffer]\nassert r\n",
    "a, = [x for x in (1,) if self.topk_indices_buffer is not None]\n",
    "r = {x for x in (1,) if self.topk_indices_buffer is not None}\nr.pop()\n",
    "next(x for x in (1,) if self.topk_indices_buffer is not None)\n",
    "d = {x: x for x in (1,) if self.topk_indices_buffer is not None}\nd[1]\n",
    "r = [[y for y in (x,) if self.topk_indices_buffer] for x in (1,)]\nr[0][0]\n",
])
def test_what_a_comprehension_keeps_by_a_test_on_the_buffer_is_derived_from_it(body):
    """A filter on the buffer empties the list on SWA-only layers: what
    reads it then raises. The result is derived from the buffer (as an
    ``if`` on it would make it), so the warmup is not read safe."""
    assert _raises(body) is not None
    assert verdict(body) not in SAFE


@pytest.mark.parametrize("body", [
    "b = (1,)\ng = (z for _ in (1,) for z in b)\nb = self.topk_indices_buffer\nlist(g)\n",
    "b = 1\ng = (z for z in (1,) if b.real)\nb = self.topk_indices_buffer\nlist(g)\n",
    "b = 1\ng = (b.real for z in (1,))\nb = self.topk_indices_buffer\nfor v in g:\n    pass\n",
    "b = ()\ng = (1 for _ in (1,) for z in b)\nb = self.topk_indices_buffer\nsum(g)\n",
])
def test_a_generator_expression_kept_for_later_reads_the_function_s_names_when_it_runs(body):
    """Only a generator's first iterable runs where it is written; the rest
    reads the function's locals when it is consumed, after ``b`` became
    the missing buffer: not read safe."""
    assert _raises(body) is not None
    assert verdict(body) not in SAFE


@pytest.mark.parametrize("body", [
    "n = sum(x for x in q)\n",
    "n = max(x + 1 for x in q if x)\n",
    "g = (x * 2 for x in q)\nn = list(g)\n",
])
def test_a_generator_consumed_at_once_or_reading_only_its_own_names_is_understood(body):
    """``sum(x for x in q)``, or a generator that reads nothing but its own
    loop variables, runs the same whenever it is consumed."""
    assert _raises(body) is None
    assert verdict(body) is Verdict.NOT_AFFECTED


@pytest.mark.parametrize("body", [
    "[self.topk_indices_buffer.shape for self.foo in (1,)]\n",
    "[self.topk_indices_buffer[0] for self.foo in (1,)]\n",
    "t = [0]\n[self.topk_indices_buffer.shape for t[0] in (1,)]\n",
])
def test_a_comprehension_binding_an_attribute_or_an_item_is_not_read_safe(body):
    """``for self.foo in ...`` in a comprehension stores into the layer, and
    ``self`` stays the layer: the buffer read in it is still None."""
    assert _raises(body) is AttributeError or _raises(body) is TypeError
    assert verdict(body) not in SAFE


def test_a_comprehension_storing_into_the_buffer_is_not_affected_for_sure():
    """``for self.topk_indices_buffer in ((1,),)`` gives the layer a buffer:
    the read after it runs, so ``affected`` would be wrong."""
    body = "[1 for self.topk_indices_buffer in ((1,),)]\nself.topk_indices_buffer[0]\n"
    assert _raises(body) is None
    assert verdict(body) is Verdict.UNKNOWN


@pytest.mark.parametrize("body, expected", [
    ("[*self.topk_indices_buffer]\n", Verdict.AFFECTED),
    ("x = (*self.topk_indices_buffer, 1)\n", Verdict.AFFECTED),
    ("x = {*self.topk_indices_buffer}\n", Verdict.AFFECTED),
    ("x = {**self.topk_indices_buffer}\n", Verdict.AFFECTED),
    ("print(*self.topk_indices_buffer)\n", Verdict.AFFECTED),
    ("print(**self.topk_indices_buffer)\n", Verdict.AFFECTED),
    ("[(*b,) for b in (self.topk_indices_buffer,)]\n", Verdict.UNKNOWN),
    ("[*None]\n", Verdict.AFFECTED),
    ("{*3}\n", Verdict.AFFECTED),
    ("{**None}\n", Verdict.AFFECTED),
])
def test_unpacking_the_missing_buffer_with_a_star_crashes(body, expected):
    """``*x`` and ``**x`` in a display or a call iterate x (or read it as a
    mapping): None raises TypeError. Where the walk knows the value it is
    ``affected``; through a comprehension's variable, ``unknown``."""
    assert _raises(body) is TypeError
    assert verdict(body) is expected


@pytest.mark.parametrize("body, expected", [
    ("a, *b = (1, 2, 3)\n", Verdict.NOT_AFFECTED),
    ("*a, b = (1,)\n", Verdict.NOT_AFFECTED),
    ("a, b = 'xy'\n", Verdict.NOT_AFFECTED),
    ("a, *b, c = (1,)\n", Verdict.AFFECTED),
    ("a, b = (1, 2, 3)\n", Verdict.AFFECTED),
    ("a, b = 3\n", Verdict.AFFECTED),
    ("try:\n    a, b = (1, 2, 3)\nexcept ValueError:\n    pass\n", Verdict.NOT_AFFECTED),
    ("try:\n    a, b = (1, 2, 3)\nexcept TypeError:\n    pass\n", Verdict.AFFECTED),
    ("try:\n    a, b = None\nexcept TypeError:\n    pass\n", Verdict.NOT_AFFECTED),
])
def test_unpacking_a_constant_binds_or_raises_as_python_does(body, expected):
    """Star targets take what is left; too many or too few values raise
    ValueError (not TypeError: a handler naming TypeError does not take
    it); a value that does not iterate raises TypeError."""
    assert (_raises(body) is None) is (expected is Verdict.NOT_AFFECTED)
    assert verdict(body) is expected


@pytest.mark.parametrize("body", [
    "e = 1\ntry:\n    self.topk_indices_buffer.shape\nexcept AttributeError as e:\n    pass\ne.real\n",
    "try:\n    self.topk_indices_buffer.shape\nexcept AttributeError as e:\n    pass\nprint(e)\n",
])
def test_the_name_of_an_except_clause_is_unbound_after_it(body):
    """Python deletes ``e`` when its handler ends: read after it, it raises
    UnboundLocalError on SWA-only layers (whose buffer read raised)."""
    assert _raises(body) is UnboundLocalError
    assert verdict(body) not in SAFE


@pytest.mark.parametrize("body", [
    "with contextlib.suppress(TypeError):\n    [x for x in None]\n",
    "with contextlib.suppress(AssertionError):\n    assert self.topk_indices_buffer is not None\n",
])
def test_a_crash_inside_a_with_block_that_may_swallow_it_is_not_certain(body):
    """``contextlib.suppress`` (or any context manager the walk does not
    know) may take the exception: the body's crash is reached only maybe,
    and the warmup is ``unknown``, not ``affected``."""
    assert _raises(body) is None
    assert verdict(body) is Verdict.UNKNOWN


@pytest.mark.parametrize("body", [
    "[a for a, b in (self.topk_indices_buffer,)]\n",
    "{a for (a, *b) in (self.topk_indices_buffer,)}\n",
    "[a for x in (1,) for a, b in (self.topk_indices_buffer,)]\n",
    "b = self.topk_indices_buffer\ntry:\n    [a for a, c in (b,)]\nexcept ValueError:\n    pass\n",
])
def test_a_comprehension_unpacking_the_missing_buffer_into_its_loop_variables_is_not_safe(body):
    """``for a, b in (buffer,)`` unpacks None: TypeError (a handler naming
    ValueError does not take it)."""
    _raises_and_is_not_read_safe(TypeError, body)


CALLBACK = "def cb(self):\n    return self.topk_indices_buffer.shape\n"


@pytest.mark.parametrize("body", [
    "try:\n    fs = [self.cb]\nexcept AttributeError:\n    fs = []\nfs[0]()\n",
    "try:\n    fs = {'f': self.cb}\nexcept AttributeError:\n    fs = {}\nfs['f']()\n",
    "try:\n    fs = (lambda: self.cb(),)\nexcept AttributeError:\n    fs = ()\nfs[0]()\n",
])
def test_a_method_handed_out_inside_a_try_runs_outside_its_handlers(body):
    """The layer's method kept in a container inside ``try`` is called after
    it: the handler does not take its crash."""
    _raises_and_is_not_read_safe(AttributeError, body, helpers=CALLBACK)


@pytest.mark.parametrize("body, helpers, tail", [
    ("try:\n    with contextlib.suppress(TypeError), self.topk_indices_buffer[0]:\n        pass\n"
     "    self.topk_indices_buffer.shape\nexcept TypeError:\n    pass\n", "", ""),
    ("with nullcontext(TypeError):\n    self.topk_indices_buffer[0]\nself.topk_indices_buffer.shape\n", "",
     "\nfrom contextlib import suppress as nullcontext\n"),
    ("with self.no_grad():\n    self.topk_indices_buffer[0]\nself.topk_indices_buffer.shape\n",
     "def no_grad(self):\n    return contextlib.suppress(TypeError)\n", ""),
])
def test_a_with_that_swallows_is_known_by_what_it_is_not_by_its_name(body, helpers, tail):
    """``suppress`` under the name ``nullcontext`` or a method ``no_grad``
    takes the first crash; the code after the block runs and raises.
    Items after a swallowing one are entered under it."""
    _raises_and_is_not_read_safe(AttributeError, body, helpers, tail)


HELPER = "def h(self, a=None, b=None):\n    return self.topk_indices_buffer.shape\n"


@pytest.mark.parametrize("body", [
    "self.h(*[1])\n",
    "self.h(**{})\n",
    "args = (1,)\nself.h(*args)\n",
])
def test_a_star_argument_to_a_method_keeps_the_layer(body):
    """``self.h(*args)``: the walk cannot match the arguments to the
    parameters, but ``self`` is still the layer whose buffer is None."""
    _raises_and_is_not_read_safe(AttributeError, body, helpers=HELPER)


@pytest.mark.parametrize("body", [
    "x = (self.topk_indices_buffer and {}) if output is not None else {}\ny = {**x}\n",
    "x = self.topk_indices_buffer if output is not None else ()\nprint(*x)\n",
    "x = self.topk_indices_buffer if output is not None else {}\nprint(**x)\n",
])
def test_unpacking_a_value_derived_from_the_buffer_with_a_star_is_not_safe(body):
    """``*x`` or ``**x`` of a value that is None without the buffer."""
    body = "output = 1\n" + body
    _raises_and_is_not_read_safe(TypeError, body)


@pytest.mark.parametrize("body", [
    "try:\n    self.topk_indices_buffer.shape\nfinally:\n    return\n",
    "for i in q:\n    try:\n        self.topk_indices_buffer.shape\n    finally:\n        break\n",
    "for i in q:\n    try:\n        self.topk_indices_buffer.shape\n    finally:\n        continue\n",
])
def test_a_finally_that_returns_or_leaves_the_loop_drops_the_crash(body):
    """Python drops the exception when the finally block returns, breaks or
    continues: the warmup runs, so it is not ``affected``."""
    assert _raises(body) is None
    assert verdict(body) is not Verdict.AFFECTED


@pytest.mark.parametrize("body", [
    "try:\n    for i in (1,):\n        try:\n            self.topk_indices_buffer.shape\n"
    "        finally:\n            for j in (1,):\n                break\nexcept TypeError:\n    pass\n",
])
def test_a_break_of_a_loop_inside_the_finally_does_not_drop_the_crash(body):
    """``break`` of a loop that the finally block itself holds leaves that
    loop only: the AttributeError goes on (a TypeError handler does not take it)."""
    assert _raises(body) is AttributeError
    assert verdict(body) is Verdict.AFFECTED


@pytest.mark.parametrize("body, tail", [
    ("try:\n    raise MyErr()\nexcept ValueError:\n    pass\n", "\nclass MyErr(ValueError):\n    pass\n"),
    ("try:\n    raise StopIteration\nexcept Exception:\n    pass\n", ""),
    ("try:\n    pass\nexcept self.topk_indices_buffer.Error:\n    pass\n", ""),
])
def test_what_a_handler_may_take_is_not_a_certain_crash(body, tail):
    """An exception class the walk does not know may be one a handler
    names; a handler's class is read only when an exception reaches it."""
    assert _raises(body, tail=tail) is None
    assert verdict(body, tail=tail) is not Verdict.AFFECTED


@pytest.mark.parametrize("body, helpers", [
    ("fn = getattr(self, '_sizes', None)\nif fn is not None:\n    n = fn()\n",
     "def _sizes(self):\n    return self.topk_indices_buffer.shape[0]\n"),
    ("k = getattr(self, 'top_k', 0)\n",
     "@property\ndef top_k(self):\n    return len(self.topk_indices_buffer)\n"),
])
def test_getattr_with_a_default_of_a_member_of_the_class_reads_the_member(body, helpers):
    """A method always exists, so ``getattr(self, name, None)`` is the
    method, and calling it reads the buffer; a property's TypeError is not
    the AttributeError that would give the default."""
    assert _raises(body, helpers=helpers) in (AttributeError, TypeError)
    assert verdict(body, helpers=helpers) not in SAFE


@pytest.mark.parametrize("body, helpers", [
    ("AttributeError = KeyError\ndef inner():\n    try:\n        return self.topk_indices_buffer.shape[0]\n"
     "    except AttributeError:\n        return 0\nn = inner()\n", ""),
    ("n = self._h(KeyError)\n",
     "def _h(self, AttributeError):\n    def inner():\n        try:\n"
     "            return self.topk_indices_buffer.shape[0]\n        except AttributeError:\n"
     "            return 0\n    return inner()\n"),
])
def test_a_handler_naming_a_builtin_class_that_an_enclosing_function_rebinds_is_that_binding(
        body, helpers):
    """``AttributeError = KeyError`` in the function around a nested one:
    the nested handler catches KeyError, and the AttributeError goes on."""
    _raises_and_is_not_read_safe(AttributeError, body, helpers=helpers)


@pytest.mark.parametrize("body, exc", [
    ("buf = self.topk_indices_buffer\ntop_k = len(buf) if buf is not None else None\n"
     "msg = f'top_k={top_k:d}'\n", TypeError),
    ("spec = '' if self.topk_indices_buffer is not None else 'Q'\nmsg = f'{1:{spec}}'\n", ValueError),
    ("msg = f'{self.topk_indices_buffer:d}'\n", TypeError),
])
def test_a_format_spec_the_missing_buffer_makes_wrong_raises(body, exc):
    """``f"{None:d}"`` raises TypeError, and a spec the buffer chose may be
    one the value does not take."""
    _raises_and_is_not_read_safe(exc, body)


def test_matrix_product_of_constants_raises_type_error_not_key_error():
    """``None @ None`` is a TypeError: a handler naming KeyError does not
    take it."""
    body = ("m = self.topk_indices_buffer\ntry:\n    r = m @ m if m is None else 0\n"
            "except KeyError:\n    r = 0\n")
    _raises_and_is_not_read_safe(TypeError, body)


@pytest.mark.parametrize("body", [
    "errs = (AttributeError, TypeError)\ntry:\n    n = self.topk_indices_buffer.shape[0]\n"
    "except errs:\n    n = 0\n",
    "try:\n    n = len(self.topk_indices_buffer)\nexcept (*(TypeError,),):\n    n = 0\n",
])
def test_a_handler_naming_classes_the_walk_cannot_read_may_take_the_crash(body):
    """``except errs:`` with a local tuple: the walk cannot tell which
    classes it names, so the crash is not certain (Python takes it here)."""
    assert _raises(body) is None
    assert verdict(body) is not Verdict.AFFECTED


def test_a_generator_handed_to_a_local_named_like_a_consuming_builtin_is_kept_for_later():
    """``list`` bound in the function is not the builtin: the generator is
    kept, and consumed after ``b`` became the missing buffer."""
    body = ("b = (1,)\nkept = []\nlist = kept.append\nlist(z for _ in (1,) for z in b)\n"
            "b = self.topk_indices_buffer\nfor v in kept[0]:\n    pass\n")
    _raises_and_is_not_read_safe(TypeError, body)


def test_getattr_of_an_attribute_the_layer_may_lack_may_give_the_default():
    """``getattr(self, "other", self.topk_indices_buffer)``: without
    ``other`` it is the missing buffer, and the arm for None runs."""
    body = "x = getattr(self, 'other', self.topk_indices_buffer)\nif x is None:\n    q.f()\n"
    _raises_and_is_not_read_safe(AttributeError, body)


def test_a_return_of_a_function_defined_in_a_finally_block_does_not_drop_the_crash():
    """A ``def`` in the finally block returns from itself, not from the
    finally: the AttributeError goes on."""
    body = ("try:\n    x = self.topk_indices_buffer.shape\nfinally:\n    def cb():\n"
            "        return 1\n")
    assert _raises(body) is AttributeError
    assert verdict(body) is Verdict.AFFECTED
