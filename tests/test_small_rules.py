"""One-line rules that a one-line change breaks: the switch, the
``VLLM_PLUGINS`` allow-list, ``uninstrument()``, the bytecode comparison,
and the classifier's own rules on small sources (each rule of
``warmup_shape``'s docstring has a case here that its mutation turns)."""

from __future__ import annotations

import sys
import textwrap

import pytest

import dspark_attn_plugin
from dspark_attn_plugin import method_code, settings, status
from dspark_attn_plugin.warmup_edit import plan_edit
from dspark_attn_plugin.warmup_shape import Verdict, classify_source

# --- the switch -------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["off", "OFF", " off ", "Off\n"])
def test_off_in_any_case_and_blanks_is_off(raw):
    assert settings.read_mode({settings.ENV_VAR: raw}) == (settings.OFF, None)


@pytest.mark.parametrize("raw", ["", "auto", " AUTO "])
def test_auto_and_unset(raw):
    assert settings.read_mode({settings.ENV_VAR: raw}) == (settings.AUTO, None)
    assert settings.read_mode({}) == (settings.AUTO, None)


@pytest.mark.parametrize("raw", ["of", "0", "false", "offf"])
def test_other_values_are_auto_with_a_problem(raw):
    mode, problem = settings.read_mode({settings.ENV_VAR: raw})
    assert mode == settings.AUTO and repr(raw) in problem


# --- VLLM_PLUGINS, as vLLM matches it -------------------------------------------


@pytest.mark.parametrize(
    "value, loads",
    [
        (None, True),
        ("dspark_attn_plugin", True),
        ("other,dspark_attn_plugin", True),
        ("dspark_attn_plugin,other", True),
        ("dspark_attn_plugin_extra", False),  # contains our name: not ours
        ("my_dspark_attn_plugin", False),
        ("dspark", False),
        ("", False),
        ("other", False),
    ],
)
def test_allow_list_matches_whole_names(value, loads):
    env = {} if value is None else {"VLLM_PLUGINS": value}
    assert status._plugin_load(env)[0] is loads


@pytest.mark.parametrize("value", ["dspark_attn_plugin, other", " dspark_attn_plugin", "a,,b",
                                   "dspark_attn_plugin ", "other,dspark_attn_plugin\t",
                                   "dspark_attn_plugin,"])
def test_allow_list_with_blanks_or_empty_names_is_an_error(value):
    with pytest.raises(status.StatusError):
        status.parse_vllm_plugins({"VLLM_PLUGINS": value})


# --- uninstrument leaves nothing behind ---------------------------------------------


def test_uninstrument_removes_the_hook_and_the_patch(layer_cls, stock_forward_mqa):
    before = list(sys.meta_path)
    dspark_attn_plugin.register()
    assert len(sys.meta_path) == len(before) + 1
    assert layer_cls.__dict__["forward_mqa"] is not stock_forward_mqa
    dspark_attn_plugin.uninstrument()
    assert sys.meta_path == before
    assert layer_cls.__dict__["forward_mqa"] is stock_forward_mqa
    # Registering again after uninstrument patches again (nothing stale kept).
    dspark_attn_plugin.register()
    assert layer_cls.__dict__["forward_mqa"] is not stock_forward_mqa
    dspark_attn_plugin.uninstrument()
    assert sys.meta_path == before


# --- the bytecode comparison ------------------------------------------------------------


def _code(body: str, filename="a.py"):
    source = "class DeepseekV4FlashMLAAttention:\n    def forward_mqa(self):\n" + textwrap.indent(
        body, " " * 8
    )
    return method_code.module_method_code(source, filename)


@pytest.mark.parametrize("body", ["return 1\n", "return (lambda: 1)()\n"],
                         ids=["flat", "nested-code"])
def test_same_code_ignores_lines_and_file_names(body):
    assert method_code.same_code(_code(body), _code("\n\n" + body, "b.py"))


def test_same_code_holds_for_a_method_with_hundreds_of_constants():
    body = "return (" + ", ".join(f"q + {i}" for i in range(300)) + ")\n"
    a = _code(body.replace("return", "q = self\nreturn"))
    assert len(a.co_consts) > 256
    assert method_code.same_code(a, _code("\n" + body.replace("return", "q = self\nreturn")))


def test_same_code_sees_one_constant_more_or_fewer():
    """Code objects (as a bytecode rewriter could leave them) that differ
    only by a constant the bytecode does not load: not the same, either way."""
    a = _code("return 1\n")
    longer = a.replace(co_consts=a.co_consts + ("spare",))
    assert not method_code.same_code(a, longer)
    assert not method_code.same_code(longer, a)


def test_same_code_says_no_without_raising_where_nested_code_meets_a_constant():
    import types

    a = _code("return (lambda: 1)()\n")
    flat = a.replace(co_consts=tuple(7 if isinstance(c, types.CodeType) else c
                                     for c in a.co_consts))
    assert method_code.same_code(a, flat) is False
    assert method_code.same_code(flat, a) is False


def test_every_module_scope_import_is_seen_by_the_rebuild_whatever_the_module_s_name():
    """CPython 3.12+ compiles a call on an imported name differently: the
    rebuilt method must see every import of the module scope, in ``if``,
    ``try`` (``except`` arms too), ``with`` and ``match`` blocks (not the
    ``__future__`` ones, which go first), and none from inside a function
    or class."""
    import ast

    source = (
        "from __future__ import annotations\n"
        "from PIL import Image\n"
        "import Zeta, torch\n"
        "if TYPE_CHECKING:\n    from A9 import b\n"
        "try:\n    from _x import y\nexcept ImportError:\n    from ._x import y\n"
        "with suppress(ImportError):\n    from W import w\n"
        "match sys.platform:\n    case 'linux':\n        from L import m\n"
        "def f():\n    from inner import no\n"
        "class C:\n    import not_this\n"
    )
    found = method_code._module_imports(ast.parse(source))
    assert [ast.unparse(n) for n in found] == [
        "from PIL import Image", "import Zeta, torch", "from A9 import b",
        "from _x import y", "from W import w", "from ._x import y", "from L import m"]


@pytest.mark.parametrize(
    "a, b",
    [
        ("return 1\n", "return 2\n"),  # constants
        ("return 1\n", "return True\n"),  # constant types (1 == True)
        ("return x\n", "return y\n"),  # names
        ("x = 1\nreturn x\n", "y = 1\nreturn y\n"),  # variables
        ("return (lambda: 1)()\n", "return (lambda: 2)()\n"),  # nested code
        ("return self.__a\n", "return self._DeepseekV4FlashMLAAttention__b\n"),  # mangling
    ],
)
def test_same_code_sees_constants_names_and_nested_code(a, b):
    assert not method_code.same_code(_code(a), _code(b))


def test_rebuilt_method_keeps_mangling_and_super():
    source = (
        "class DeepseekV4FlashMLAAttention(Base):\n"
        "    def forward_mqa(self, q):\n"
        "        self.__x = 1\n"
        "        return super().forward_mqa(q)\n"
    )
    import ast

    tree = ast.parse(source)
    function = tree.body[0].body[0]
    assert method_code.same_code(
        method_code.plain_code(function, tree, "f.py"),
        method_code.module_method_code(source, "f.py"),
    )


# --- the classifier's rules (warmup_shape docstring R1-R6) ---------------------------------

HEAD = (
    "from vllm.forward_context import get_forward_context\n"
    "from vllm.models.deepseek_v4.attention import DeepseekV4Attention as Base\n\n"
    "class DeepseekV4FlashMLAAttention(Base):\n"
    "{helpers}"
    "    def forward_mqa(self, q, kv, positions, output):\n"
    "        attn_metadata = get_forward_context().attn_metadata\n"
    "        if attn_metadata is None:\n"
    "{body}"
    "            output.zero_()\n"
    "            return\n"
    "        self.steady(q)\n"
    "{tail}"
)


def verdict(body: str, helpers: str = "", tail: str = "") -> Verdict:
    return classify_source(
        HEAD.format(
            body=textwrap.indent(textwrap.dedent(body), " " * 12),
            helpers=textwrap.indent(textwrap.dedent(helpers), " " * 4),
            tail=textwrap.dedent(tail),
        )
    ).verdict


GUARDED = "top_k = 0 if swa_only else self.topk_indices_buffer.shape[-1]\n"


@pytest.mark.parametrize(
    "body, expected",
    [
        # R2: the ratio decided in other spellings.
        ("if self.compress_ratio in (0, 1):\n    top_k = 0\nelse:\n    top_k = self.topk_indices_buffer.shape[-1]\n", Verdict.FIXED),
        ("if self.compress_ratio < 2:\n    top_k = 0\nelse:\n    top_k = self.topk_indices_buffer.shape[-1]\n", Verdict.FIXED),
        ("if not self.compress_ratio > 1:\n    top_k = 0\nelse:\n    top_k = self.topk_indices_buffer.shape[-1]\n", Verdict.FIXED),
        ("r = self.compress_ratio\nif r <= 1:\n    top_k = 0\nelse:\n    top_k = self.topk_indices_buffer.shape[-1]\n", Verdict.FIXED),
        ("match self.compress_ratio:\n    case 0 | 1:\n        top_k = 0\n    case _:\n        top_k = self.topk_indices_buffer.shape[-1]\n", Verdict.FIXED),
        ("try:\n    assert self.topk_indices_buffer is not None\nexcept AssertionError:\n    top_k = 0\n", Verdict.FIXED),
        ("try:\n    assert self.topk_indices_buffer is not None\nexcept ValueError:\n    top_k = 0\n", Verdict.AFFECTED),  # the handler names another class
        ("try:\n    assert self.topk_indices_buffer is not None\nexcept (KeyError, Exception):\n    top_k = 0\n", Verdict.FIXED),  # a base of it
        ("with torch.no_grad():\n    if swa_only:\n        output.zero_()\n        return\nassert self.topk_indices_buffer is not None\n", Verdict.FIXED),
        ("with other_context():\n    if swa_only:\n        output.zero_()\n        return\nassert self.topk_indices_buffer is not None\n", Verdict.UNKNOWN),
        ("if self.compress_ratio == 1:\n    top_k = 0\nelse:\n    top_k = self.topk_indices_buffer.shape[-1]\n", Verdict.AFFECTED),  # ratio 0
        # R3: a reached raise; an assert on a derived value; an unbound local.
        ("if self.topk_indices_buffer is None:\n    raise ValueError('x')\n", Verdict.AFFECTED),
        ("has = self.topk_indices_buffer is not None\nassert has\n", Verdict.AFFECTED),
        ("if q.dim() == 3:\n    raise ValueError('x')\n", Verdict.UNKNOWN),
        ("if q.dim() == 3:\n    t = 1\nprint(t)\n", Verdict.UNKNOWN),
        ("print(t)\nt = 1\n", Verdict.AFFECTED),
        # R3 through calls: methods, properties, lambdas, module functions.
        ("assert self._has()\n", Verdict.AFFECTED),
        ("assert self.has\n", Verdict.AFFECTED),
        ("assert (lambda: self.topk_indices_buffer is not None)()\n", Verdict.AFFECTED),
        ("_require(self.topk_indices_buffer)\n", Verdict.AFFECTED),
        # R4: derived values handed to outside code; undecided derived tests.
        ("torch._assert(self.topk_indices_buffer is not None, 'x')\n", Verdict.UNKNOWN),
        ("x = opaque(self.topk_indices_buffer)\n", Verdict.UNKNOWN),
        ("if self.topk_indices_buffer == q:\n    pass\n", Verdict.UNKNOWN),
        ("y = f'{self.topk_indices_buffer}' if q else 0\n", Verdict.FIXED),
        ("reserve(self)\n", Verdict.UNKNOWN),
        ("self.inherited()\n", Verdict.UNKNOWN),
        ("super().forward_mqa(q, kv, positions, output)\n", Verdict.UNKNOWN),
        ("x = [b for b in self.topk_indices_buffer]\n", Verdict.AFFECTED),
        # Safe: decided tests, guarded reads, conditional expressions.
        (GUARDED, Verdict.FIXED),
        ("x = self.topk_indices_buffer.shape[-1] if self.topk_indices_buffer is not None else 0\n", Verdict.FIXED),
        ("if (b := self.topk_indices_buffer) is not None:\n    x = b.shape\n", Verdict.FIXED),
        ("x = 0 if q.dim() else self.topk_indices_buffer.shape[-1]\n", Verdict.UNKNOWN),
        ("reserve(self.window_size)\n", Verdict.NOT_AFFECTED),
        # R4: an undecided test on a derived value (no operator involved).
        ("if self.topk_indices_buffer is q:\n    pass\n", Verdict.UNKNOWN),
        ("while self.topk_indices_buffer is q:\n    break\n", Verdict.UNKNOWN),
        # R4: a statement kind the walk does not model.
        ("class Inner:\n    pass\n", Verdict.UNKNOWN),
        ("global top_k\n", Verdict.UNKNOWN),
    ],
)
def test_rules(body, expected):
    helpers = (
        "def _has(self):\n    return self.topk_indices_buffer is not None\n\n"
        "@property\ndef has(self):\n    return self.topk_indices_buffer is not None\n\n"
    )
    tail = "\n\ndef _require(buffer):\n    assert buffer is not None\n"
    assert verdict("swa_only = self.compress_ratio <= 1\n" + body, helpers, tail) is expected


@pytest.mark.parametrize(
    "helpers, tail",
    [
        ("@some_decorator\n", ""),  # forward_mqa decorated
        ("@staticmethod\n", ""),  # a decorator the class body allows elsewhere
        ("@property\n", ""),
        ("", "\nDeepseekV4FlashMLAAttention.forward_mqa = other\n"),  # rebound after
        ("", "\nif TYPE_CHECKING:\n    class DeepseekV4FlashMLAAttention(Other):\n        pass\n"),  # defined twice
        ("", "\nsetattr(DeepseekV4FlashMLAAttention, 'forward_mqa', other)\n"),
        ("forward_mqa = None\n", ""),  # bound twice in the class
    ],
)
def test_class_as_loaded_must_be_the_class_as_written(helpers, tail):
    body = "swa_only = self.compress_ratio <= 1\n" + GUARDED
    assert verdict(body) is Verdict.FIXED  # the same class, as written
    assert verdict(body, helpers, tail) is Verdict.UNKNOWN


def test_an_alias_stored_on_the_layer_is_derived():
    helpers = "def __init__(self, buf):\n    self._topk = buf if buf is not None else self.topk_indices_buffer\n\n"
    assert verdict("assert self._topk is not None\n", helpers) is Verdict.UNKNOWN
    assert verdict("assert self._other is not None\n", helpers) is Verdict.NOT_AFFECTED


def test_undecided_conditional_expression_walks_both_arms():
    assert verdict("x = self.topk_indices_buffer.shape if q.dim() else 0\n") is Verdict.UNKNOWN
    assert verdict("x = 0 if q.dim() else self.topk_indices_buffer.shape\n") is Verdict.UNKNOWN


def test_merge_of_two_arms_keeps_only_common_facts():
    body = "if q.dim():\n    s = True\nelse:\n    s = False\nif s:\n    top_k = 0\nelse:\n    top_k = self.topk_indices_buffer.shape[-1]\n"
    assert verdict(body) is Verdict.UNKNOWN
    body = "if q.dim():\n    s = True\nelse:\n    s = True\nif s:\n    top_k = 0\nelse:\n    top_k = self.topk_indices_buffer.shape[-1]\n"
    assert verdict(body) is Verdict.FIXED


def test_rebuilt_method_calls_super_on_the_real_class():
    import ast

    class Base:
        def forward_mqa(self):
            return "base"

    source = (
        "class DeepseekV4FlashMLAAttention(Base):\n"
        "    def forward_mqa(self):\n"
        "        return __note__(super().forward_mqa())\n"
    )
    tree = ast.parse(source)
    namespace = {"Base": Base}
    exec(compile(tree, "f.py", "exec"), namespace)
    real = namespace["DeepseekV4FlashMLAAttention"]
    stock = real.__dict__["forward_mqa"]
    factory = method_code.edited_factory(tree.body[0].body[0], tree, "f.py", "__note__")
    rebuilt = method_code.build_edited(factory, namespace, str.upper, real, stock)
    assert rebuilt(real()) == "BASE"
    assert rebuilt.__qualname__ == stock.__qualname__


@pytest.mark.parametrize("imports", ["import torch\n", "if TYPE_CHECKING:\n    import torch\n", ""])
def test_rebuilt_method_compiles_calls_on_imported_modules_as_the_module_does(imports):
    import ast

    source = imports + (
        "class DeepseekV4FlashMLAAttention:\n"
        "    def forward_mqa(self, q):\n"
        "        torch._check(q.dim() == 3, lambda: 'q')\n"
    )
    tree = ast.parse(source)
    function = next(n for n in tree.body if isinstance(n, ast.ClassDef)).body[0]
    assert method_code.same_code(
        method_code.plain_code(function, tree, "f.py"),
        method_code.module_method_code(source, "f.py"),
    )


@pytest.mark.parametrize("body", [
    "if self.use_fast_path:\n    output.zero_()\n    return\nassert self.topk_indices_buffer is not None\n",
    "if q.dim() == 3:\n    return\nx = self.topk_indices_buffer.shape\n",
    "if self.use_fast_path:\n    pass\nelse:\n    return\nassert self.topk_indices_buffer is not None\n",
    "for _ in q:\n    return\nassert self.topk_indices_buffer is not None\n",
    "while q.dim():\n    return\nassert self.topk_indices_buffer is not None\n",
])
def test_an_undecided_arm_that_returns_leaves_the_crash_unknown_not_affected(body):
    """An SWA-only layer whose undecided test takes the returning arm never
    reaches the assertion: only "maybe" is proven, so the verdict is unknown,
    never affected (and never fixed)."""
    assert verdict(body) is Verdict.UNKNOWN
    # The same branch without the returning arm crashes for sure.
    assert verdict("assert self.topk_indices_buffer is not None\n") is Verdict.AFFECTED


def test_an_edit_plan_from_the_cache_cannot_be_changed_by_one_caller_for_the_next(flashmla):
    """plan_edit's plans are cached and shared (the runtime and `status` in
    one process): a caller cannot change one under another."""
    import dataclasses

    plan = plan_edit(flashmla.__loader__.get_source(flashmla.__name__))
    assert plan.applies
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.edited = None
    assert plan.applies


@pytest.mark.parametrize("derive, verdict", [
    ("upstream_fix", Verdict.FIXED), ("without_buffer_use", Verdict.NOT_AFFECTED),
    (lambda s: s + "\ndef broken(:\n", Verdict.UNKNOWN),
], ids=["fixed", "not-affected", "does-not-parse"])
def test_code_that_is_not_affected_gets_no_edit_and_nothing_to_refuse(flashmla, derive, verdict):
    """Only affected code is planned: for the rest the plan is the verdict
    alone (no edit, no refusal that a log or `status` could show), also for
    a source that does not parse."""
    import flashmla_variants as fv

    from dspark_attn_plugin.warmup_edit import EditPlan, plan_edit

    source = flashmla.__loader__.get_source(flashmla.__name__)
    text = getattr(fv, derive)(source) if isinstance(derive, str) else derive(source)
    plan = plan_edit(text)
    assert plan.classification.verdict is verdict
    assert plan == EditPlan(plan.classification)


# --- held-out mutations of warmup_shape (2026-12-04) that passed every other test ----------


def test_a_warmup_asserting_the_buffer_on_ratio_1_layers_only_is_affected():
    """compress_ratio 1 is SWA-only too (``compress_ratio <= 1``): a warmup
    that asserts the buffer there crashes a drafter's ratio-1 layers."""
    assert verdict("if self.compress_ratio == 1:\n    assert self.topk_indices_buffer is not None\n"
                   ) is Verdict.AFFECTED
    assert verdict("if self.compress_ratio == 0:\n    assert self.topk_indices_buffer is not None\n"
                   ) is Verdict.AFFECTED
    assert verdict("if self.compress_ratio == 4:\n    assert self.topk_indices_buffer is not None\n"
                   ) is Verdict.FIXED  # the sparse path only: what the fix does


def test_the_layer_or_none_handed_to_outside_code_is_unknown():
    assert verdict("owner = self if q.numel() > 0 else None\nreserve(owner)\n") is Verdict.UNKNOWN
    assert verdict("owner = None if q.numel() > 0 else self\nreserve(owner)\n") is Verdict.UNKNOWN


def test_outside_code_after_a_buffer_test_whose_arm_raises_a_bare_class_is_unknown():
    """The missing buffer chooses whether outside code runs (the arm that
    raises is skipped): what that code does is not known."""
    body = ("if self.topk_indices_buffer is not None:\n    raise NotImplementedError\n"
            "current_workspace_manager().get_simultaneous(((self.max_num_batched_tokens,), torch.int32),)\n")
    assert verdict(body) is Verdict.UNKNOWN


def test_a_mutable_module_list_deciding_the_ratio_is_unknown():
    """A module-level list may be changed by anyone before the warmup: the
    SWA-only test that reads it decides nothing (a tuple does)."""
    body = ("if self.compress_ratio in _SWA_ONLY_RATIOS:\n    output.zero_()\n    return\n"
            "assert self.topk_indices_buffer is not None\n")
    assert verdict(body, tail="\n_SWA_ONLY_RATIOS = [0, 1]\n") is Verdict.UNKNOWN
    assert verdict(body, tail="\n_SWA_ONLY_RATIOS = (0, 1)\n") is Verdict.FIXED


def test_get_forward_context_imported_under_another_name_is_still_read():
    """``from vllm.forward_context import get_forward_context as _fc``: the
    warmup branch under ``_fc().attn_metadata is None`` is still found."""
    body = "assert self.topk_indices_buffer is not None\n"
    plain = HEAD.format(body=" " * 12 + body, helpers="", tail="")
    assert classify_source(plain).verdict is Verdict.AFFECTED
    aliased = plain.replace("import get_forward_context\n", "import get_forward_context as _fc\n"
                            ).replace("get_forward_context().attn_metadata", "_fc().attn_metadata")
    assert "get_forward_context()" not in aliased
    assert classify_source(aliased).verdict is Verdict.AFFECTED


def test_a_warmup_that_stores_its_own_buffer_on_the_layer_is_unknown():
    body = ("self.topk_indices_buffer = torch.empty((self.max_num_batched_tokens, 0))\n"
            "assert self.topk_indices_buffer is not None\n")
    assert verdict(body) is Verdict.UNKNOWN


# --- survivors of the mutation tool over warmup_shape (2026-12-04): which names a closure
# may trust, module constants, attributes that carry code, decorators named through a module


CLOSURE = ("swa_only = self.compress_ratio <= 1\n"
           "def pick():\n    return 0 if swa_only else self.topk_indices_buffer.shape[-1]\n"
           "top_k = pick()\n")


def _with_steady(body: str, steady: str) -> Verdict:
    source = HEAD.format(body=textwrap.indent(body, " " * 12), helpers="", tail="")
    source = source.replace("        self.steady(q)\n",
                            "        self.steady(q)\n" + textwrap.indent(steady, " " * 8), 1)
    return classify_source(source).verdict


def test_a_closure_reading_a_name_bound_once_reads_its_value():
    assert _with_steady(CLOSURE, "") is Verdict.FIXED
    assert _with_steady(CLOSURE, "import torch\nfor x in q:\n    pass\n") is Verdict.FIXED


@pytest.mark.parametrize("steady", [
    "swa_only = False\n",
    "for swa_only in q:\n    pass\n",
    "while q:\n    swa_only = False\n",
    "for x in q:\n    y = [swa_only := 1 for z in q]\n",
    "def swa_only():\n    pass\n",
    "class swa_only:\n    pass\n",
    "import swa_only\n",
    "import swa_only.sub\n",
    "from m import x as swa_only\n",
    "try:\n    pass\nexcept Exception as swa_only:\n    pass\n",
    "match q:\n    case swa_only:\n        pass\n",
    "match q:\n    case [*swa_only]:\n        pass\n",
    "match q:\n    case {**swa_only}:\n        pass\n",
    "def g(x=(swa_only := False)):\n    pass\n",
    "def g(*, x=(swa_only := False)):\n    pass\n",
    "@(swa_only := deco)\ndef g():\n    pass\n",
    "class C(swa_only := Base):\n    pass\n",
    "f = lambda x=(swa_only := False): x\n",
    "f = lambda *, x=(swa_only := False): x\n",
])
def test_a_closure_reading_a_name_bound_again_anywhere_in_the_method_is_unknown(steady):
    """A closure reads the cell when it runs: a name the method binds a second
    time (any binding: assignment, loop, def, class, import, except, match
    capture, a walrus in a default or decorator), or once inside a loop, may
    hold another value by then."""
    assert _with_steady(CLOSURE, steady) is Verdict.UNKNOWN


def test_a_closure_reading_a_name_bound_once_inside_a_loop_is_unknown():
    body = ("for _ in (1,):\n    swa_only = self.compress_ratio <= 1\n"
            "def pick():\n    return 0 if swa_only else self.topk_indices_buffer.shape[-1]\n"
            "top_k = pick()\n")
    assert _with_steady(body, "") is Verdict.UNKNOWN


SWA_TEST = ("if self.compress_ratio in _SWA_ONLY:\n    output.zero_()\n    return\n"
            "assert self.topk_indices_buffer is not None\n")


@pytest.mark.parametrize("tail", [
    "\n_SWA_ONLY = (0, 1)\n",
    "\n_SWA_ONLY: tuple = (0, 1)\n",
    "\n_SWA_ONLY = _OTHER = (0, 1)\n",  # a chained assignment binds each name
    "\n_OTHER = _SWA_ONLY = (0, 1)\n",
])
def test_a_name_bound_once_by_an_assignment_is_a_module_constant(tail):
    assert verdict(SWA_TEST, tail=tail) is Verdict.FIXED


def test_a_name_bound_twice_is_no_module_constant():
    assert verdict(SWA_TEST, tail="\n_SWA_ONLY = (0, 1)\n_SWA_ONLY = (0, 1, 4)\n") is Verdict.UNKNOWN


@pytest.mark.parametrize("value, tail", [
    ("lambda: 0", ""),
    ("_module_function", "\ndef _module_function():\n    return 0\n"),
    ("DeepseekV4FlashMLAAttention", ""),
    ("self.steady", ""),
])
def test_an_attribute_given_code_of_this_module_is_read_as_derived(value, tail):
    """Code of the module stored on the layer may read the buffer when it
    runs later: the attribute is not a plain value."""
    helpers = f"def __init__(self):\n    self._kept = {value}\n\ndef steady(self, q):\n    return q\n\n"
    assert verdict("assert self._kept is not None\n", helpers, tail) is Verdict.UNKNOWN


def test_an_attribute_given_a_plain_value_is_not_derived():
    helpers = "def __init__(self, n):\n    self._kept = n\n\n"
    assert verdict("assert self._kept is not None\n", helpers) is Verdict.NOT_AFFECTED


def test_a_cached_property_named_through_functools_is_read_as_a_property():
    """``@functools.cached_property`` (functools imported) is the decorator
    ``@cached_property`` is: the walk reads the property's code."""
    body = "top_k = 0 if self.swa_only else self.topk_indices_buffer.shape[-1]\n"
    for decorator, imports in [("functools.cached_property", "import functools\n"),
                               ("cached_property", "from functools import cached_property\n")]:
        helpers = f"@{decorator}\ndef swa_only(self):\n    return self.compress_ratio <= 1\n\n"
        source = imports + HEAD.format(body=textwrap.indent(body, " " * 12),
                                       helpers=textwrap.indent(helpers, " " * 4), tail="")
        assert classify_source(source).verdict is Verdict.FIXED, decorator


# --- R1: the buffer reaching an attribute by way of a local, a registration, a call, a test -------
# Each ``__init__`` leaves ``self._b`` None (or unset) exactly when the layer has no
# buffer; the warmup asserts ``self._b``: SWA-only layers fail there, so the verdict
# must not be safe. Before R1 followed these ways, 26 of these 27 read not-affected.

_KEPT_BY = {
    "a-local": "b = topk_indices_buffer\nself._b = b\n",
    "register-buffer": "self.register_buffer('_b', topk_indices_buffer, persistent=False)\n",
    "register-buffer-computed-name": "name = '_b'\nself.register_buffer(name, topk_indices_buffer)\n",
    "outside-code-handed-the-layer": "register(self, '_b', topk_indices_buffer)\n",
    "a-method": "self._keep(topk_indices_buffer)\n",
    "a-method-by-keyword": "self._keep(b=topk_indices_buffer)\n",
    "a-method-by-star": "self._keep(*[topk_indices_buffer])\n",
    "a-method-through-a-local": "f = getattr(self, '_keep')\nf(topk_indices_buffer)\n",
    "a-method-through-partial": "f = functools.partial(self._keep)\nf(topk_indices_buffer)\n",
    "a-nested-def": "def keep(b):\n    self._b = b\nkeep(topk_indices_buffer)\n",
    "a-lambda": "keep = lambda b: setattr(self, '_b', b)\nkeep(topk_indices_buffer)\n",
    "a-closure-bound-later": "def keep():\n    self._b = b\nb = topk_indices_buffer\nkeep()\n",
    "a-default": "def keep(b=topk_indices_buffer):\n    self._b = b\nkeep()\n",
    "a-dict": "d = {}\nd['k'] = topk_indices_buffer\nself._b = d['k']\n",
    "a-list-append": "kept = []\nkept.append(topk_indices_buffer)\nself._b = kept[0]\n",
    "a-for-loop": "for b in [topk_indices_buffer]:\n    self._b = b\n",
    "a-walrus": "if (b := topk_indices_buffer) is not None or True:\n    self._b = b\n",
    "if-else-on-it": "if topk_indices_buffer is None:\n    self._b = None\nelse:\n    self._b = 1\n",
    "a-method-called-if-missing": "if topk_indices_buffer is None:\n    self._clear()\n",
    "an-early-return": "self._b = None\nif topk_indices_buffer is None:\n    return\nself._b = 1\n",
    "an-assertion-caught-by-the-caller": "self._b = None\ntry:\n    self._setup()\n"
                                         "except AssertionError:\n    pass\n",
    "try-except": "try:\n    self._b = topk_indices_buffer.shape[0]\nexcept AttributeError:\n    self._b = None\n",
    "try-skips-the-store": "self._b = None\ntry:\n    topk_indices_buffer.shape\n    self._b = 1\nexcept AttributeError:\n    pass\n",
    "suppress": "self._b = None\nwith contextlib.suppress(AttributeError):\n    topk_indices_buffer.shape\n    self._b = 1\n",
    "while": "self._b = 1\nwhile topk_indices_buffer is None:\n    self._b = None\n    break\n",
    "match": "match topk_indices_buffer:\n    case None:\n        self._b = None\n    case _:\n        self._b = 1\n",
    "and-or": "self._b = 1\ntopk_indices_buffer is None and self._clear()\n",
}


@pytest.mark.parametrize("init", list(_KEPT_BY.values()), ids=list(_KEPT_BY))
def test_an_attribute_that_may_hold_the_buffer_through_another_way_is_not_read_safe(init):
    """The warmup asserts an attribute that ``__init__`` filled from the
    buffer, or chose by it: the verdict must not be safe."""
    helpers = ("def __init__(self, topk_indices_buffer=None):\n"
               + textwrap.indent(init, "    ")
               + "\ndef _keep(self, b):\n    self._b = b\n\n"
               + "def _clear(self):\n    self._b = None\n\n"
               + "def _setup(self):\n    assert self.topk_indices_buffer is not None\n"
               "    self._b = 1\n\n")
    source = "import contextlib\nimport functools\n" + HEAD.format(
        body=" " * 12 + "assert self._b is not None\n",
        helpers=textwrap.indent(helpers, " " * 4), tail="")
    assert classify_source(source).verdict is Verdict.UNKNOWN


_KEPT_APART = {
    "a-parameter": "self._b = n\n",
    "after-storing-the-buffer": "self.topk_indices_buffer = topk_indices_buffer\nself._b = n\n",
    "after-handing-it-to-the-base": "super().__init__(topk_indices_buffer=topk_indices_buffer)\n"
                                    "self._b = n\n",
    "after-a-local-of-it": "buf = topk_indices_buffer\nself.topk_indices_buffer = buf\nself._b = n\n",
    "another-method-gets-it": "self._keep(n)\nself._note(topk_indices_buffer)\n",
    "outside-code-gets-it-alone": "self._b = n\ntorch.nn.init.zeros_(topk_indices_buffer)\n",
    "a-nested-def-gets-other": "def keep(b):\n    self._b = b\nkeep(n)\nx = topk_indices_buffer\n",
}


@pytest.mark.parametrize("init", list(_KEPT_APART.values()), ids=list(_KEPT_APART))
def test_an_attribute_the_buffer_never_reaches_stays_plain(init):
    """Only what the buffer reaches is derived: ``self._b`` given a plain
    value, beside the buffer going elsewhere, reads not-affected."""
    helpers = ("def __init__(self, n, topk_indices_buffer=None):\n"
               + textwrap.indent(init, "    ")
               + "\ndef _keep(self, b):\n    self._b = b\n\n"
               + "def _note(self, v):\n    self._seen = v\n\n")
    source = "import torch\n" + HEAD.format(
        body=" " * 12 + "assert self._b is not None\n",
        helpers=textwrap.indent(helpers, " " * 4), tail="")
    assert classify_source(source).verdict is Verdict.NOT_AFFECTED


# --- the classifier's bounds (warmup_shape/verdict.py), each at its edge ------------------
# A fork past a bound reads unknown: the walk does not follow it further.


def _call_chain(helpers: int) -> Verdict:
    """The warmup calls _h0, which calls _h1, ... _h{helpers}, which returns."""
    code = "".join(f"def _h{i}(self):\n    return self._h{i + 1}()\n\n" for i in range(helpers))
    code += f"def _h{helpers}(self):\n    return 0\n\n"
    return verdict("swa_only = self.compress_ratio <= 1\n" + GUARDED + "self._h0()\n", helpers=code)


def test_calls_are_followed_eight_deep_and_no_deeper():
    """MAX_CALL_DEPTH is 8: forward_mqa and seven helpers nested are read;
    one more nested call is unknown."""
    assert _call_chain(6) is Verdict.FIXED
    assert _call_chain(7) is Verdict.UNKNOWN


def _loop_over(items: int) -> Verdict:
    """A loop over a tuple of constants whose arm, never taken, reads the buffer."""
    values = ", ".join(str(i) for i in range(items))
    return verdict("swa_only = self.compress_ratio <= 1\n" + GUARDED + f"for i in ({values},):\n"
                   "    if i == 100:\n        top_k = self.topk_indices_buffer.shape[-1]\n")


def test_loops_over_up_to_eight_constants_are_unrolled():
    """MAX_UNROLL is 8: each of eight constants is walked on its own (the arm
    is never taken: fixed); a ninth makes the loop a loop whose arm may run."""
    assert _loop_over(8) is Verdict.FIXED
    assert _loop_over(9) is Verdict.UNKNOWN


def _settling_after(names: int) -> Verdict:
    """A while loop that hands a value down a chain of names, one a pass: its
    state settles after about ``names`` passes."""
    chain = [f"v{i}" for i in range(names + 1)]
    body = "".join(f"    {chain[i]} = {chain[i - 1]}\n" for i in range(names, 0, -1)) + "    v0 = 1\n"
    return verdict("swa_only = self.compress_ratio <= 1\n" + GUARDED
                   + "".join(f"{v} = 0\n" for v in chain)
                   + "n = len(q)\nwhile n > 0:\n    n = n - 1\n" + body)


def test_a_loop_is_walked_until_it_settles_within_six_passes():
    """MAX_LOOP_PASSES is 6: a chain of four names settles in time; five do
    not, and the loop reads unknown."""
    assert _settling_after(4) is Verdict.FIXED
    assert _settling_after(5) is Verdict.UNKNOWN


def test_a_cached_classification_cannot_be_changed_by_one_caller_for_the_next():
    """classify_source caches its answer, and the runtime, ``status`` and the
    edit all read it: the object they share is read-only."""
    import dataclasses

    source = HEAD.format(body=" " * 12 + "pass\n", helpers="", tail="")
    first = classify_source(source)
    assert classify_source(source) is first
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.verdict = Verdict.FIXED
    assert classify_source(source).verdict is first.verdict


def test_an_assertion_after_an_if_whose_arms_both_go_on_is_reached_surely():
    """An ``if`` whose arms both carry on leaves the statements after it
    reached on every path: the assertion there crashes SWA-only layers."""
    assert verdict("if q is None:\n    pass\nassert self.topk_indices_buffer is not None\n") \
        is Verdict.AFFECTED
    assert verdict("n = len(q)\nif n:\n    m = 1\nelse:\n    m = 2\n"
                   "assert self.topk_indices_buffer is not None\n") is Verdict.AFFECTED


def test_a_helper_that_rebinds_its_parameter_reads_its_own_value():
    """A parameter assigned again in its function stays that function's local."""
    helper = ("def _pick(self, swa_only):\n    swa_only = bool(swa_only)\n"
              "    return 0 if swa_only else self.topk_indices_buffer.shape[-1]\n\n")
    assert verdict("top_k = self._pick(self.compress_ratio <= 1)\n", helpers=helper) is Verdict.FIXED


def test_a_helper_with_a_yield_is_a_generator_whatever_follows_its_yield():
    """Calling a generator function runs none of its body: a helper whose
    ``yield`` comes before a nested ``def`` (or lambda, or class) is still
    a generator function, and its assertion is not read as reached."""
    for tail in ("def _unused():\n        pass\n", "_unused = lambda: 0\n",
                 "class _Unused:\n        pass\n"):
        helpers = ("def _reserve(self):\n    assert self.topk_indices_buffer is not None\n"
                   f"    yield\n    {tail}\n")
        assert verdict("self._reserve()\n", helpers=helpers) is Verdict.UNKNOWN, tail


def test_hasattr_of_the_buffer_on_the_layer_is_true_so_its_arm_runs():
    """vLLM's layer always has the attribute (None on SWA-only layers):
    ``if hasattr(self, "topk_indices_buffer"):`` runs its arm, and an
    assertion of the buffer there crashes them."""
    body = ("if hasattr(self, 'topk_indices_buffer'):\n"
            "    assert self.topk_indices_buffer is not None\n")
    assert verdict(body) is Verdict.AFFECTED


@pytest.mark.parametrize("known", ["self", "get_forward_context", "DeepseekV4FlashMLAAttention",
                                   "self.steady"])
def test_the_layer_a_function_or_the_class_is_not_none(known):
    """``assert self is not None`` (or of a function, the class, a method)
    holds: the warmup goes on to its guarded read and reads fixed."""
    body = f"assert {known} is not None\nswa_only = self.compress_ratio <= 1\n" + GUARDED
    assert verdict(body) is Verdict.FIXED


def test_a_warmup_reading_the_layer_s_registered_buffers_is_unknown():
    """``self._buffers`` (nn.Module's registry) holds the top-k buffer when
    it was registered: a warmup that uses its values may use the buffer."""
    body = ("for registered in self._buffers.values():\n    registered.zero_()\n"
            "swa_only = self.compress_ratio <= 1\n" + GUARDED)
    assert verdict(body) is Verdict.UNKNOWN


def test_a_module_list_that_init_fills_with_the_buffer_is_read_as_the_buffer():
    """``__init__`` appends the layer's buffer to a module-level list; the
    warmup reads ``_SEEN[-1].shape``: None on SWA-only layers, so not safe."""
    helpers = "def __init__(self):\n    _SEEN.append(self.topk_indices_buffer)\n\n"
    body = "swa_only = self.compress_ratio <= 1\n" + GUARDED + "cap = _SEEN[-1].shape[-1]\n"
    assert verdict(body, helpers, tail="\n_SEEN = []\n") is Verdict.UNKNOWN


@pytest.mark.parametrize("steady", [
    "aa = 1\n", "zz = 1\n", "def aa():\n    pass\n", "def zz():\n    pass\n",
    "class Aa:\n    pass\n", "class zz:\n    pass\n", "import math as aa\n",
    "import collections.abc as zz\n", "from math import pi as zz\n",
    "try:\n    pass\nexcept Exception as zz:\n    pass\n",
    "match q:\n    case [*zz]:\n        pass\n",
    "match q:\n    case {**zz}:\n        pass\n",
    "match q:\n    case [*aa]:\n        pass\n",
    "match q:\n    case {**aa}:\n        pass\n",
    "from math import pi as aa\n",
    "try:\n    pass\nexcept Exception as aa:\n    pass\n",
    "match q:\n    case [aa, zz]:\n        pass\n",
])
def test_a_closure_reading_a_name_bound_once_is_not_misled_by_other_names_the_method_binds(steady):
    """Only bindings of the name the closure reads count: the method binding
    other names (sorting before or after it, by any kind of binding) leaves
    the closure's value known."""
    assert _with_steady(CLOSURE, steady) is Verdict.FIXED


def _source(body: str, helpers: str = "") -> str:
    """The HEAD module with ``body`` (unindented) in its warmup branch."""
    return HEAD.format(body=textwrap.indent(body, " " * 12), helpers=helpers, tail="")


def test_a_warmup_asserting_a_local_alias_of_the_buffer_is_refused_by_the_edit_not_an_error():
    """``b = self.topk_indices_buffer; assert b is not None`` crashes
    SWA-only layers, but it is not the statement the edit rewrites: the
    plan refuses it, naming the line, and raises nothing."""
    source = _source("b = self.topk_indices_buffer\nassert b is not None\n")
    assert classify_source(source).verdict is Verdict.AFFECTED
    plan = plan_edit(source)
    assert plan.edited is None
    assert "is not `assert self.topk_indices_buffer is not None`" in plan.refusal, plan.refusal


@pytest.mark.parametrize("test", ["positions is None", "positions is q", "kv", "not kv"])
def test_the_edit_finds_the_warmup_branch_after_another_if_of_the_method(test):
    """``if positions is None:`` (or another ``if``) before ``if attn_metadata
    is None:``: the warmup branch is the one on the metadata, and the edit
    fits it."""
    source = _source("assert self.topk_indices_buffer is not None\n")
    source = source.replace("        if attn_metadata is None:\n",
                            f"        if {test}:\n            positions = q\n"
                            "        if attn_metadata is None:\n", 1)
    assert classify_source(source).verdict is Verdict.AFFECTED
    plan = plan_edit(source)
    assert plan.refusal is None and plan.edited is not None


@pytest.mark.parametrize("binding", [
    "@(flag := staticmethod)\ndef g():\n    pass\n",
    "class C((flag := object)):\n    pass\n",
    "_ = [1 for y in q if (flag := y)]\n",
    "_ = [1 for y in q for z in q if (flag := z)]\n",
])
def test_a_name_the_method_binds_only_by_a_walrus_is_its_local_read_before_it_is_bound(binding):
    """A walrus in a nested def's decorator, a class's bases or a
    comprehension's condition binds the method's own name: reading it
    before that line raises UnboundLocalError on every layer (Python's
    behaviour, checked here by running the body)."""
    body = "x = flag\n" + binding
    _raises_unbound_local(body)
    assert verdict(body) is Verdict.AFFECTED


def _raises_unbound_local(body: str) -> None:
    """Python itself raises UnboundLocalError for ``body`` as a method body."""
    namespace: dict = {}
    exec(compile("def f(q=(1,)):\n" + textwrap.indent(body, "    "), "<body>", "exec"), namespace)
    with pytest.raises(UnboundLocalError):
        namespace["f"]()


def test_the_edit_fits_only_a_warmup_branch_tested_by_attn_metadata_is_none_alone():
    """``if attn_metadata is None is not False:`` means the same, but it is
    not the shape the edit knows (warmup_edit's allow-list): the plan
    refuses it, and the plugin leaves the code alone."""
    source = _source("assert self.topk_indices_buffer is not None\n")
    assert plan_edit(source).edited is not None
    source = source.replace("if attn_metadata is None:", "if attn_metadata is None is not False:")
    assert classify_source(source).verdict is Verdict.AFFECTED
    plan = plan_edit(source)
    assert plan.edited is None
    assert "has no `if attn_metadata is None:` branch of that shape" in plan.refusal, plan.refusal


@pytest.mark.parametrize("attr", ["_LIMIT", "zlimit"])
def test_an_assertion_of_another_attribute_of_the_layer_is_not_the_one_the_edit_rewrites(attr):
    """``assert self._LIMIT is not None`` with ``_LIMIT = None`` fails on
    every layer; it is not the buffer's assertion, and the plan says so by
    its line (not by what the edit would leave)."""
    source = _source(f"assert self.{attr} is not None\n", helpers=f"    {attr} = None\n\n")
    assert classify_source(source).verdict is Verdict.AFFECTED
    plan = plan_edit(source)
    assert plan.edited is None
    assert plan.refusal.endswith(
        "is not `assert self.topk_indices_buffer is not None` directly in the warmup branch"
    ), plan.refusal


def test_importing_a_submodule_binds_the_package_s_name_in_the_method():
    """``import flag.sub`` binds ``flag`` (not ``sub``): reading ``flag``
    before that line raises UnboundLocalError on every layer. (Read
    through an attribute, of an allowed package: a module read as a value,
    or one off the allow-list, is refused first.)"""
    _raises_unbound_local("x = vllm.envs\nimport vllm.envs\n")
    assert verdict("x = vllm.envs\nimport vllm.envs\n") is Verdict.AFFECTED


def test_a_warmup_that_names_the_buffer_only_in_a_string_reads_fixed():
    """``getattr(self, "topk_indices_buffer")`` on the sparse path only:
    the warmup knows the buffer and SWA-only layers never touch it, so it
    is ``fixed`` (not ``not-affected``, which says the warmup never uses it)."""
    body = ("swa_only = self.compress_ratio <= 1\n"
            "top_k = 0 if swa_only else getattr(self, 'topk_indices_buffer').shape[-1]\n")
    assert verdict(body) is Verdict.FIXED


def test_the_edit_rewrites_only_the_plain_buffer_assertion_not_a_chained_one():
    """``assert self.topk_indices_buffer is not None is not False`` fails the
    same way, but it is not the statement the edit knows: refused by its line."""
    source = _source("assert self.topk_indices_buffer is not None is not False\n")
    assert classify_source(source).verdict is Verdict.AFFECTED
    plan = plan_edit(source)
    assert plan.edited is None
    assert "is not `assert self.topk_indices_buffer is not None`" in plan.refusal, plan.refusal


def test_the_layer_class_is_found_with_other_classes_after_it():
    """A module class written after the layer's (``Config``, sorting before
    its name) is not the layer class."""
    body = "swa_only = self.compress_ratio <= 1\n" + GUARDED
    assert verdict(body, tail="\n\nclass Config:\n    pass\n") is Verdict.FIXED


