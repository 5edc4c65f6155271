"""What ``loaded_code`` says of a loaded flashmla module that is, or is not,
what its source file says: the cases that its checks decide one by one.

Each test loads real vLLM 0.27.1 code (the installed module itself, or a fork
of its ``flashmla.py`` built by ``test_module_as_loaded.build`` and loaded
from a file), changes what other code could change after the import, and
asks ``classify_loaded`` for the verdict the plugin would act on."""

from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import itertools
import os
import types
import warnings
from pathlib import Path

import pytest

from dspark_attn_plugin import loaded_code
from dspark_attn_plugin.target import CLASS_NAME
from dspark_attn_plugin.warmup_shape import Verdict

import flashmla_variants as variants
from test_module_as_loaded import build, _load as load_fork

MANGLED = f"self._{CLASS_NAME}"
_n = itertools.count()


@pytest.fixture
def stock(flashmla):
    return flashmla.__loader__.get_source(flashmla.__name__)


def fork(stock, tmp_path, **shape):
    """A fork of vLLM's flashmla.py (``build``'s shapes, on the affected
    base unless told), loaded from its own file."""
    folder = tmp_path / f"fork{next(_n)}"
    folder.mkdir()
    return load_fork(build(stock, **{"fixed": False, **shape}), folder)


def layer_class(module):
    return getattr(module, CLASS_NAME)


def assert_unknown(module, *words):
    result = loaded_code.classify_loaded(module)
    assert result.verdict is Verdict.UNKNOWN, result.reason
    for word in words:
        assert word in result.reason, result.reason
    return result


def assert_affected(module):
    result = loaded_code.classify_loaded(module)
    assert result.verdict is Verdict.AFFECTED, result.reason
    return result


class _ClaimsEquality(type):
    """A metaclass whose classes say they equal every class."""

    def __eq__(cls, other):
        return True

    def __ne__(cls, other):
        return False

    __hash__ = type.__hash__


class EqualToEverything(metaclass=_ClaimsEquality):
    """What a mock or a lazy proxy can be: an object that says it equals
    every object (and whose class says it equals every class)."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = object.__hash__

    def __call__(self, *args, **kwargs):
        return None


# --- forward_mqa itself: where its code comes from ------------------------------------


def test_a_forward_mqa_replaced_by_the_same_code_from_another_file_is_unknown(
    flashmla, layer_cls, stock_forward_mqa, monkeypatch
):
    """Code compiled from another file (here: the same bytecode, from a file
    of the same folder whose name sorts first) is not the module's own."""
    folder = os.path.dirname(os.path.realpath(flashmla.__file__))
    other = os.path.join(folder, "a_fork.py")
    code = stock_forward_mqa.__code__.replace(co_filename=other)
    replaced = types.FunctionType(code, stock_forward_mqa.__globals__, stock_forward_mqa.__name__,
                                  stock_forward_mqa.__defaults__, stock_forward_mqa.__closure__)
    replaced.__kwdefaults__ = stock_forward_mqa.__kwdefaults__
    monkeypatch.setattr(layer_cls, "forward_mqa", replaced)
    assert_unknown(flashmla, "replaced by code from", other)


def test_a_module_without_a_file_name_is_unknown_not_an_error(flashmla, monkeypatch):
    """A module whose loader still gives its source but that has no
    ``__file__``: the plugin cannot tell where forward_mqa came from, and
    says so instead of raising."""
    monkeypatch.delattr(flashmla, "__file__")
    assert_unknown(flashmla, "has no __file__", "cannot be checked")


def test_a_flashmla_py_edited_on_disk_so_that_forward_mqa_moved_down_is_unknown(
    stock, tmp_path
):
    """Lines added above the class after the import: what the file now says
    is not what was loaded."""
    module = variants.load(stock, tmp_path)
    (tmp_path / "flashmla.py").write_text(variants.far_down(stock))
    assert_unknown(module, "file changed since import")


def test_a_flashmla_py_edited_on_disk_so_that_forward_mqa_moved_up_is_unknown(
    stock, tmp_path
):
    """Lines removed above the class after the import."""
    module = variants.load(variants.far_down(stock), tmp_path)
    (tmp_path / "flashmla.py").write_text(stock)
    assert_unknown(module, "file changed since import")


def test_a_fork_whose_forward_mqa_is_past_line_256_is_still_classified_from_its_source(
    stock, tmp_path
):
    """Line numbers past 256 are not Python's cached small ints: the same
    line is still the same line."""
    module = variants.load(variants.far_down(stock), tmp_path)
    assert layer_class(module).forward_mqa.__code__.co_firstlineno > 256
    assert_affected(module)


# --- the class as a whole ---------------------------------------------------------------


def test_a_getattribute_that_only_compares_equal_to_objects_own_is_unknown(
    flashmla, layer_cls, monkeypatch
):
    """A ``__getattribute__`` installed on the class (here a proxy-like
    object that says it equals ``object.__getattribute__``) intercepts every
    read of the layer: it is the class's own, whatever it compares equal to."""
    monkeypatch.setattr(layer_cls, "__getattribute__", EqualToEverything())
    assert_unknown(flashmla, "__getattribute__")


def test_a_plain_class_level_default_of_the_ratio_does_not_make_the_class_unknown(
    flashmla, layer_cls, monkeypatch
):
    """An imported base that declares ``compress_ratio = 1`` at class level
    (a plain value, not a descriptor): instances still read their own."""
    monkeypatch.setattr(layer_cls.__mro__[1], "compress_ratio", 1, raising=False)
    assert_affected(flashmla)


class _SetOnly:
    """A data descriptor that defines ``__set__`` only."""

    def __get__(self, obj, owner=None):
        return 0

    def __set__(self, obj, value):
        pass


class _DeleteOnly:
    """A data descriptor that defines ``__delete__`` only."""

    def __get__(self, obj, owner=None):
        return 0

    def __delete__(self, obj):
        pass


@pytest.mark.parametrize("descriptor", [_SetOnly, _DeleteOnly], ids=["set-only", "delete-only"])
def test_a_data_descriptor_with_only_a_setter_or_a_deleter_on_the_ratio_is_unknown(
    flashmla, layer_cls, monkeypatch, descriptor
):
    """Either method makes a data descriptor, which intercepts the layer's
    reads of ``compress_ratio``."""
    monkeypatch.setattr(layer_cls, "compress_ratio", descriptor(), raising=False)
    assert_unknown(flashmla, "compress_ratio is a data descriptor")


@contextlib.contextmanager
def renamed(cls, name):
    """``cls.__name__`` set to ``name`` (monkeypatch cannot undo it)."""
    before = cls.__name__
    cls.__name__ = name
    try:
        yield
    finally:
        cls.__name__ = before


@pytest.mark.parametrize("name", [CLASS_NAME + "Fork", "Attention"], ids=["sorts-after", "sorts-before"])
def test_a_class_renamed_after_import_is_unknown(flashmla, layer_cls, name):
    """The class the module binds no longer calls itself by the name its
    source gives it."""
    with renamed(layer_cls, name):
        assert_unknown(flashmla, f"resolves to {flashmla.__name__}.")


def test_a_class_given_its_own_name_again_is_still_classified(flashmla, layer_cls):
    """``cls.__name__`` set again to an equal string made at run time (not
    the very string object Python made it with): the class is unchanged."""
    same = "".join([CLASS_NAME[:10], CLASS_NAME[10:]])
    assert same == CLASS_NAME and same is not layer_cls.__name__
    with renamed(layer_cls, same):
        assert_affected(flashmla)


@pytest.mark.parametrize("where", ["{}_fork", "vllm.models.deepseek_v4.flashmla"],
                         ids=["sorts-after", "sorts-before"])
def test_a_class_that_claims_another_module_is_unknown(flashmla, layer_cls, monkeypatch, where):
    """A class whose ``__module__`` names another module is not known to be
    the one this module's source defines."""
    monkeypatch.setattr(layer_cls, "__module__", where.format(flashmla.__name__))
    assert_unknown(flashmla, "not to DeepseekV4FlashMLAAttention of this module")


def test_a_class_whose_module_is_set_again_to_its_own_name_is_still_classified(
    flashmla, layer_cls, monkeypatch
):
    """``__module__`` re-set to an equal string (as re-exporting code does
    with a literal module path): still this module."""
    same = ".".join(flashmla.__name__.split("."))
    assert same == flashmla.__name__ and same is not flashmla.__name__
    monkeypatch.setattr(layer_cls, "__module__", same)
    assert_affected(flashmla)


# --- members the walk followed ------------------------------------------------------------


def test_a_helper_removed_from_the_class_after_import_resolves_nowhere(stock, tmp_path):
    """The warmup calls ``self._prepare()``, which no class defines any more."""
    module = fork(stock, tmp_path)
    del layer_class(module)._prepare
    assert_unknown(module, "_prepare resolves to nowhere")


def test_a_helper_moved_to_an_imported_base_names_where_it_now_resolves(stock, tmp_path):
    """The helper now comes from vLLM's base class: the reason names it."""
    module = fork(stock, tmp_path)
    cls = layer_class(module)
    base = cls.__mro__[1]
    helper = cls.__dict__["_prepare"]
    del cls._prepare
    base._prepare = helper
    try:
        assert_unknown(module, f"_prepare resolves to {base.__module__}.{base.__qualname__}")
    finally:
        del base._prepare


MIXIN = dict(top="class _Mixin:\n    def _ready(self):\n        return self.compress_ratio <= 1\n\n\n",
             bases="_Mixin, ", warmup=("x = self._ready()",))


def test_a_mixin_the_module_rebinds_to_a_look_alike_is_unknown(stock, tmp_path):
    """The helper resolves to the mixin in the class's MRO, but the module's
    name ``_Mixin`` now holds another object (one that compares equal to
    every class): not the class of this module's source."""
    module = fork(stock, tmp_path, **MIXIN)
    assert_affected(module)
    module._Mixin = EqualToEverything()
    assert_unknown(module, "_ready resolves to")


PROPERTY = dict(body="    @property\n    def _swa(self):\n        return self.compress_ratio <= 1\n\n",
                swa_test="self._swa")


def test_a_getter_only_property_helper_is_classified_from_its_source(stock, tmp_path):
    """``@property`` helpers are what the source says as long as they
    only have a getter."""
    assert_affected(fork(stock, tmp_path, **PROPERTY))


def test_a_property_helper_given_a_setter_after_import_is_unknown(stock, tmp_path):
    """The same getter, now with a setter: writes of the layer's ``_swa``
    would run code the walk never saw."""
    module = fork(stock, tmp_path, **PROPERTY)
    cls = layer_class(module)
    cls._swa = property(cls.__dict__["_swa"].fget, lambda self, value: None)
    assert_unknown(module, "_swa is not the function its source defines")


def test_a_private_helper_method_is_classified_from_its_source(stock, tmp_path):
    """``def __helper`` (stored as ``_DeepseekV4FlashMLAAttention__helper``)
    called by its mangled name: its code is found under the name it was
    written with."""
    module = fork(stock, tmp_path, body="    def __helper(self):\n        return 0\n\n",
                  warmup=(f"x = {MANGLED}__helper()",))
    assert_affected(module)


def test_a_helper_method_defined_under_its_mangled_name_is_classified_from_its_source(
        stock, tmp_path):
    """``def _DeepseekV4FlashMLAAttention__helper`` (the stored name spelled
    out in the def) called as such: the same member as ``def __helper``,
    its code named as written. An unchanged fork is not unknown for it."""
    module = fork(stock, tmp_path,
                  body="    def _DeepseekV4FlashMLAAttention__helper(self):\n        return 0\n\n",
                  warmup=(f"x = {MANGLED}__helper()",))
    assert_affected(module)
    # Replaced after import, it is unknown as any other helper is.
    cls = layer_class(module)
    cls._DeepseekV4FlashMLAAttention__helper = lambda self: 1
    assert_unknown(module, "_DeepseekV4FlashMLAAttention__helper is not the function its source defines")


# --- class constants the walk read ----------------------------------------------------


@pytest.mark.parametrize("other", ["Config", "_Defaults"], ids=["sorts-before", "sorts-after"])
def test_a_class_constant_that_another_class_of_the_module_also_binds_is_read_from_its_own_class(
    stock, tmp_path, other
):
    """The warmup reads ``self.LIMIT`` (4); another class of the module,
    written earlier, binds ``LIMIT = 5``: the loaded 4 is what the source
    says."""
    module = fork(stock, tmp_path, top=f"class {other}:\n    LIMIT = 5\n\n\n",
                  body="    LIMIT = 4\n\n", warmup=("x = self.LIMIT",))
    assert_affected(module)


def test_a_class_constant_is_read_from_its_own_binding_not_an_earlier_one(stock, tmp_path):
    """``ZLIMIT = 5`` written before ``LIMIT = 4`` in the class body."""
    module = fork(stock, tmp_path, body="    ZLIMIT = 5\n    LIMIT = 4\n\n",
                  warmup=("x = self.LIMIT",))
    assert_affected(module)


def test_a_large_class_constant_is_compared_by_value(stock, tmp_path):
    """``LIMIT = 4096`` (not one of Python's cached small ints)."""
    module = fork(stock, tmp_path, body="    LIMIT = 4096\n\n", warmup=("x = self.LIMIT",))
    assert_affected(module)


def test_a_private_class_constant_is_classified_from_its_source(stock, tmp_path):
    """``__LIMIT = 4`` read by its mangled name."""
    module = fork(stock, tmp_path, body="    __LIMIT = 4\n\n", warmup=(f"x = {MANGLED}__LIMIT",))
    assert_affected(module)


@pytest.mark.parametrize("value", [3, EqualToEverything()], ids=["smaller", "claims-equality"])
def test_a_class_constant_changed_after_import_is_unknown(stock, tmp_path, value):
    """``LIMIT`` set after the import to a smaller int, or to an object that
    says it equals 4 (and whose class says it is int)."""
    module = fork(stock, tmp_path, body="    LIMIT = 4\n\n", warmup=("x = self.LIMIT",))
    layer_class(module).LIMIT = value
    assert_unknown(module, "LIMIT is")


# --- module constants and functions the walk followed ----------------------------------------

HELPERS = dict(top="_SWA = (0, 1)\n\n\ndef _probe(layer):\n    return 0\n\n\n",
               warmup=("_probe(self)", "x = self.compress_ratio in _SWA"))


@pytest.mark.parametrize("value", [(0,), EqualToEverything()], ids=["smaller", "claims-equality"])
def test_a_module_constant_changed_after_import_is_unknown(stock, tmp_path, value):
    """``_SWA`` rebound after the import to a smaller tuple, or to an object
    that says it equals ``(0, 1)`` (and whose class says it is tuple)."""
    module = fork(stock, tmp_path, **HELPERS)
    assert_affected(module)
    module._SWA = value
    assert_unknown(module, "the module constant _SWA is")


def test_a_module_function_replaced_by_a_partial_is_unknown_not_an_error(stock, tmp_path):
    """``_probe`` wrapped in ``functools.partial`` (no code of its own)."""
    module = fork(stock, tmp_path, **HELPERS)
    module._probe = functools.partial(module._probe)
    assert_unknown(module, "the module function _probe is not the one its source defines")


# --- the compiled module is kept, within bounds --------------------------------------------


def _forks(stock, tmp_path, count):
    """``count`` loaded copies of vLLM's module, each its own source text."""
    modules = []
    for i in range(count):
        folder = tmp_path / f"copy{i}"
        folder.mkdir()
        modules.append(variants.load(stock + f"\n# copy {i}\n", folder))
    return modules


@pytest.fixture
def compiles(monkeypatch):
    """The files compiled to module code (not to a tree) from now on."""
    real = builtins.compile
    seen: list = []

    def counting(source, filename, mode, flags=0, *args, **kwargs):
        if mode == "exec" and not flags & ast.PyCF_ONLY_AST:
            seen.append(str(filename))
        return real(source, filename, mode, flags, *args, **kwargs)

    monkeypatch.setattr(builtins, "compile", counting)
    return seen


def test_checking_the_same_module_again_does_not_compile_its_source_again(
    stock, tmp_path, compiles
):
    """Every check of a loaded module compiles its source whole: the second
    check of the same module reuses it."""
    (module,) = _forks(stock, tmp_path, 1)
    compiles.clear()
    assert_affected(module)
    assert_affected(module)
    assert compiles.count(module.__file__) == 1, compiles


# --- the plugin's own module --------------------------------------------------------------


def test_loaded_code_compiles_without_warnings():
    """Where no bytecode cache can be written, Python compiles the module
    on every start of vLLM: a SyntaxWarning (``is`` with a literal, say)
    would print each time."""
    path = loaded_code.__file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compile(Path(path).read_text(), path, "exec", dont_inherit=True)


def test_a_flashmla_py_that_no_longer_decodes_after_import_is_unknown_not_an_error(
        stock, tmp_path):
    """A byte that is not UTF-8 appended to the file after the import (a
    bad copy, another encoding): its source cannot be read again, so the
    verdict is unknown with the reason, not an exception."""
    module = fork(stock, tmp_path)
    assert_affected(module)
    with open(module.__file__, "ab") as fh:
        fh.write(b"# caf\xe9\n")
    assert_unknown(module, f"cannot read the source of {module.__name__}", "codec can't decode")
