"""register(): loading through vLLM, switches, idempotence, faults, imports."""

from __future__ import annotations

import functools
import logging
import os
import select
import shutil
import sys

import pytest

import dspark_attn_plugin
from dspark_attn_plugin import instrumentation, loaded_code, patch, synthetic
from dspark_attn_plugin.import_hook import PostImportHook

from conftest import run_python

LOGGER = "vllm.dspark_attn_plugin"


def _records(caplog, level):
    return [r for r in caplog.records if r.name == LOGGER and r.levelname == level]


def _hooks():
    return [f for f in sys.meta_path if isinstance(f, PostImportHook)]


# --- the steady path is vLLM's own code ------------------------------------


@pytest.mark.parametrize(
    "kind", [synthetic.SWA_ONLY_NO_BUFFER, synthetic.SPARSE_C4], ids=lambda k: k.name
)
def test_steady_path_runs_vllms_own_forward_mqa(flashmla, layer_cls, load_plugins, kind):
    load_plugins()
    assert patch.is_patched(flashmla)
    calls = []
    layer = synthetic.make_layer(layer_cls, kind)
    layer._forward_prefill = lambda **kw: calls.append(("prefill", kw))
    layer._forward_decode = lambda **kw: calls.append(("decode", kw))
    q, kv, positions, output = synthetic.qkv()
    # Idle step: vLLM's body runs its bookkeeping and launches nothing.
    with synthetic.idle_step_context([layer]):
        assert layer.forward_mqa(q, kv, positions, output) is None
    assert calls == []
    assert output.eq(7).all(), "the steady path must not zero the output"
    # Metadata that vLLM's body rejects: the failing statement is vLLM's own,
    # at its own line of vLLM's file.
    with synthetic.idle_step_context([]) as ctx:
        ctx.attn_metadata = {layer.prefix: None}
        with pytest.raises(AssertionError) as info:
            layer.forward_mqa(q, kv, positions, output)
    failing = info.traceback[-1]
    assert str(failing.path) == flashmla.__file__
    assert "assert swa_metadata is not None" in str(failing.statement)


def test_patched_function_is_vllms_code_compiled_from_vllms_file(
    flashmla, layer_cls, load_plugins, stock_forward_mqa
):
    load_plugins()
    patched = layer_cls.__dict__["forward_mqa"]
    assert patch.is_ours(patched) and patch.stock_of(patched) is stock_forward_mqa
    code, stock_code = patched.__code__, stock_forward_mqa.__code__
    assert (code.co_filename, code.co_firstlineno) == (
        stock_code.co_filename,
        stock_code.co_firstlineno,
    )
    assert patched.__qualname__ == stock_forward_mqa.__qualname__
    assert patched.__globals__ is flashmla.__dict__
    # vLLM's module namespace gains nothing.
    assert not [n for n in vars(flashmla) if "dspark" in n]


def test_source_that_does_not_match_the_loaded_code_is_not_patched(
    flashmla, layer_cls, stock_forward_mqa, monkeypatch, caplog
):
    real = flashmla.__loader__.get_source(flashmla.__name__)
    edited = real.replace(
        "num_decodes = swa_metadata.num_decodes", "num_decodes = swa_metadata.num_prefills"
    )
    assert edited != real and edited.count("\n") == real.count("\n")
    monkeypatch.setattr(flashmla.__loader__, "get_source", lambda name: edited)
    caplog.set_level(logging.INFO, logger=LOGGER)
    dspark_attn_plugin.register()
    assert layer_cls.__dict__["forward_mqa"] is stock_forward_mqa
    warnings = _records(caplog, "WARNING")
    assert len(warnings) == 1 and "not the function its source defines" in warnings[0].getMessage()


# --- switches ----------------------------------------------------------------


def test_off_leaves_vllm_untouched(
    layer_cls, load_plugins, stock_forward_mqa, monkeypatch, caplog
):
    monkeypatch.setenv("DSPARK_ATTN_PLUGIN", "off")
    caplog.set_level(logging.INFO, logger=LOGGER)
    load_plugins()
    assert layer_cls.__dict__["forward_mqa"] is stock_forward_mqa
    assert _hooks() == []
    assert any("DSPARK_ATTN_PLUGIN=off" in r.getMessage() for r in _records(caplog, "INFO"))


def test_unknown_switch_value_warns_once_then_runs_auto(
    layer_cls, stock_forward_mqa, monkeypatch, caplog
):
    monkeypatch.setenv("DSPARK_ATTN_PLUGIN", "sometimes")
    caplog.set_level(logging.INFO, logger=LOGGER)
    dspark_attn_plugin.register()
    dspark_attn_plugin.register()
    warnings = _records(caplog, "WARNING")
    assert len(warnings) == 1
    assert "'sometimes'" in warnings[0].getMessage()
    assert "auto, off" in warnings[0].getMessage()
    assert layer_cls.__dict__["forward_mqa"] is not stock_forward_mqa


def test_vllm_plugins_allowlist_without_us_keeps_stock(
    layer_cls, load_plugins, stock_forward_mqa, monkeypatch
):
    monkeypatch.setenv("VLLM_PLUGINS", "some_other_plugin")
    load_plugins()
    assert layer_cls.__dict__["forward_mqa"] is stock_forward_mqa


# --- idempotence -------------------------------------------------------------


def test_register_twice_is_a_no_op(layer_cls, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    dspark_attn_plugin.register()
    first = layer_cls.__dict__["forward_mqa"]
    dspark_attn_plugin.register()
    assert layer_cls.__dict__["forward_mqa"] is first
    assert len(_hooks()) == 1
    patched = [r for r in _records(caplog, "INFO") if "patched" in r.getMessage()]
    assert len(patched) == 1


def test_register_again_in_a_forked_child_is_a_no_op(layer_cls):
    dspark_attn_plugin.register()
    first = layer_cls.__dict__["forward_mqa"]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: what a forked vLLM worker does
        try:
            os.close(read)
            dspark_attn_plugin.register()
            same = layer_cls.__dict__["forward_mqa"] is first and len(_hooks()) == 1
            os.write(write, b"1" if same else b"0")
        finally:
            os._exit(0)
    os.close(write)  # the child's end: a child that dies gives EOF, not a hang
    try:
        ready, _, _ = select.select([read], [], [], 60)
        answer = os.read(read, 1) if ready else b"(no answer in 60 s)"
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    assert answer == b"1"


def test_patch_applied_by_hand_twice_changes_nothing(flashmla, layer_cls):
    assert patch.apply(flashmla) is True
    first = layer_cls.__dict__["forward_mqa"]
    assert patch.apply(flashmla) is False
    assert layer_cls.__dict__["forward_mqa"] is first


# --- faults never take vLLM down ---------------------------------------------


@pytest.mark.parametrize(
    "where",
    [
        (loaded_code, "classify_loaded"),
        (patch, "_build"),
        (instrumentation, "PostImportHook"),
    ],
    ids=["detection", "patching", "hook"],
)
def test_fault_leaves_stock_code_and_does_not_raise(
    layer_cls, load_plugins, stock_forward_mqa, monkeypatch, caplog, where
):
    def boom(*args, **kwargs):
        raise RuntimeError("injected fault")

    monkeypatch.setattr(*where, boom)
    caplog.set_level(logging.INFO, logger=LOGGER)
    load_plugins()  # vLLM does not catch: this would raise if register() did
    assert layer_cls.__dict__["forward_mqa"] is stock_forward_mqa
    warnings = _records(caplog, "WARNING")
    assert len(warnings) == 1 and "injected fault" in warnings[0].getMessage()


def test_unknown_code_shape_is_left_alone_with_one_warning(
    flashmla, layer_cls, stock_forward_mqa, monkeypatch, caplog
):
    # What another patcher's replacement looks like to the plugin.
    def forward_mqa(self, q, kv, positions, output):
        return stock_forward_mqa(self, q, kv, positions, output)

    monkeypatch.setattr(layer_cls, "forward_mqa", forward_mqa)
    caplog.set_level(logging.INFO, logger=LOGGER)
    dspark_attn_plugin.register()
    assert layer_cls.__dict__["forward_mqa"] is forward_mqa
    warnings = _records(caplog, "WARNING")
    assert len(warnings) == 1
    message = warnings[0].getMessage()
    assert "0.27.1" in message and "replaced by code from" in message


# --- fresh interpreters -------------------------------------------------------


def test_register_imports_nothing_heavy_and_hooks_the_later_import():
    proc = run_python(
        """
        import sys
        import dspark_attn_plugin
        dspark_attn_plugin.register()
        heavy = [m for m in sys.modules if m.split(".")[0] in ("torch", "vllm")]
        assert heavy == [], heavy
        import vllm.plugins
        vllm.plugins.load_general_plugins()   # vLLM's own discovery, as in serve
        from vllm.models.deepseek_v4.nvidia import flashmla
        from importlib.machinery import SourceFileLoader
        from dspark_attn_plugin import patch
        fn = flashmla.DeepseekV4FlashMLAAttention.__dict__["forward_mqa"]
        assert patch.is_ours(fn)
        assert type(flashmla.__loader__) is SourceFileLoader
        assert type(flashmla.__spec__.loader) is SourceFileLoader
        print("OK")
        """
    )
    assert "OK" in proc.stdout
    lines = [l for l in proc.stdout.splitlines() if "dspark-attn-plugin patched" in l]
    assert len(lines) == 1, proc.stdout
    # vLLM's own log format, naming the version and the target.
    assert lines[0].startswith("INFO ")
    assert "vLLM 0.27.1" in lines[0]
    assert "DeepseekV4FlashMLAAttention.forward_mqa" in lines[0]


def test_register_without_vllm_installed_does_nothing(tmp_path):
    package = os.path.dirname(dspark_attn_plugin.__file__)
    shutil.copytree(package, tmp_path / "dspark_attn_plugin")
    # -S: no site-packages, so neither vLLM nor torch can be found.
    proc = run_python(
        f"""
        import sys, importlib.util
        sys.path.insert(0, {str(tmp_path)!r})
        assert importlib.util.find_spec("vllm") is None
        import dspark_attn_plugin
        from dspark_attn_plugin import instrumentation
        dspark_attn_plugin.register()
        dspark_attn_plugin.register()
        assert instrumentation._hook is None
        assert not any(type(f).__name__ == "PostImportHook" for f in sys.meta_path)
        print("OK")
        """,
        args=("-S",),
    )
    assert proc.stdout.strip() == "OK"
    assert proc.stderr == ""


# --- what tracebacks and profilers see ------------------------------------------


def test_the_patched_method_runs_on_vllm_s_own_lines_and_columns(layer_cls, stock_forward_mqa):
    """Tracebacks, debuggers and profilers name vLLM's lines: every line of
    the patched forward_mqa is a line of vLLM's method (the added ``if``
    stands on the assertion's line), and the assertion keeps its positions
    to the column."""
    import inspect

    dspark_attn_plugin.register()
    patched = layer_cls.__dict__["forward_mqa"]
    assert patch.is_ours(patched)
    stock = stock_forward_mqa.__code__
    source, first = inspect.getsourcelines(stock_forward_mqa)
    span = set(range(first, first + len(source)))
    assert {line for *_, line in patched.__code__.co_lines() if line is not None} <= span
    at = first + next(i for i, text in enumerate(source)
                      if "assert self.topk_indices_buffer is not None" in text)
    before = {p for p in stock.co_positions() if p[0] == at}
    after = {p for p in patched.__code__.co_positions() if p[0] == at}
    assert before and before <= after
    assert {p[0] for p in patched.__code__.co_positions()} - {p[0] for p in stock.co_positions()} <= {None}


# --- ownership by identity -----------------------------------------------------


def test_a_functools_wraps_wrapper_is_not_ours_and_survives_uninstrument(
    flashmla, layer_cls, caplog
):
    dspark_attn_plugin.register()
    ours = layer_cls.__dict__["forward_mqa"]

    @functools.wraps(ours)
    def other_plugins_wrapper(self, *args, **kwargs):
        return ours(self, *args, **kwargs)

    layer_cls.forward_mqa = other_plugins_wrapper
    assert other_plugins_wrapper.__dict__.keys() >= ours.__dict__.keys()
    assert not patch.is_ours(other_plugins_wrapper)
    assert patch.is_patched(flashmla)  # the fix still runs, through the wrapper
    caplog.set_level(logging.INFO, logger=LOGGER)
    dspark_attn_plugin.uninstrument()
    assert layer_cls.__dict__["forward_mqa"] is other_plugins_wrapper
    warnings = _records(caplog, "WARNING")
    assert len(warnings) == 1 and "left as it is" in warnings[0].getMessage()


def test_uninstrument_puts_back_vllms_function_only_when_ours_is_in_place(
    layer_cls, stock_forward_mqa
):
    dspark_attn_plugin.register()
    dspark_attn_plugin.uninstrument()
    assert layer_cls.__dict__["forward_mqa"] is stock_forward_mqa
    dspark_attn_plugin.uninstrument()  # idempotent
    assert layer_cls.__dict__["forward_mqa"] is stock_forward_mqa


def test_patch_apply_refuses_a_source_that_is_not_the_loaded_code(
    flashmla, layer_cls, stock_forward_mqa, monkeypatch
):
    """The patch's own check, whoever calls it: the rebuilt method must be
    the loaded one, compiled from the source it is given."""
    real = flashmla.__loader__.get_source(flashmla.__name__)
    edited = real.replace(
        "num_decodes = swa_metadata.num_decodes", "num_decodes = swa_metadata.num_prefills"
    )
    monkeypatch.setattr(flashmla.__loader__, "get_source", lambda name: edited)
    with pytest.raises(patch.PatchError, match="does not match"):
        patch.apply(flashmla)
    assert layer_cls.__dict__["forward_mqa"] is stock_forward_mqa


# --- what the runtime says and does at its edges (mutation-score survivors) --------------


def test_a_flashmla_without_the_class_is_left_with_no_verdict_claimed(caplog):
    """A build whose flashmla module has no DeepseekV4FlashMLAAttention: the
    plugin patches nothing and claims no verdict (no "patched", "already has
    the fix", "not affected", "does not recognise", no failure): one INFO line
    saying what is missing."""
    import types

    module = types.ModuleType(instrumentation.FLASHMLA_MODULE)
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    instrumentation._on_flashmla_loaded(module)
    said = [r for r in caplog.records if r.name == LOGGER]
    assert [r.levelname for r in said] == ["INFO"], [r.getMessage() for r in said]
    message = said[0].getMessage()
    assert "has no DeepseekV4FlashMLAAttention" in message and "nothing to patch" in message
    assert not hasattr(module, instrumentation.CLASS_NAME)


def test_uninstrument_with_a_flashmla_without_the_class_does_not_raise(monkeypatch):
    import types

    monkeypatch.setitem(sys.modules, instrumentation.FLASHMLA_MODULE,
                        types.ModuleType(instrumentation.FLASHMLA_MODULE))
    dspark_attn_plugin.uninstrument()  # nothing to put back, nothing raised


def test_the_logs_name_the_loaded_vllm_s_version_not_the_installed_metadata(monkeypatch):
    """A vLLM on PYTHONPATH over another one installed: its own __version__."""
    import vllm

    monkeypatch.setattr(vllm, "__version__", "0.27.1+fork.3")
    assert instrumentation._vllm_version() == "0.27.1+fork.3"
    monkeypatch.delattr(vllm, "__version__")
    assert instrumentation._vllm_version() == "0.27.1"  # the installed metadata

    def missing(name):
        from importlib.metadata import PackageNotFoundError
        raise PackageNotFoundError(name)

    monkeypatch.setattr("importlib.metadata.version", missing)
    assert instrumentation._vllm_version() == "(unknown version)"


def test_uninstrument_says_at_debug_that_it_put_vllm_s_function_back(layer_cls, caplog):
    dspark_attn_plugin.register()
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    dspark_attn_plugin.uninstrument()
    assert any("removed its patch" in r.getMessage() for r in _records(caplog, "DEBUG"))
    caplog.clear()
    dspark_attn_plugin.uninstrument()  # not patched: nothing removed, nothing said
    assert not any("removed its patch" in r.getMessage() for r in _records(caplog, "DEBUG"))


def test_patch_remove_says_whether_it_put_anything_back(flashmla, layer_cls, stock_forward_mqa):
    assert patch.remove(flashmla) is False
    assert patch.apply(flashmla) is True
    assert patch.apply(flashmla) is False  # already
    assert patch.remove(flashmla) is True
    assert layer_cls.__dict__["forward_mqa"] is stock_forward_mqa
    assert patch.remove(flashmla) is False


@pytest.mark.parametrize("depth, ours", [(0, True), (31, True), (32, False)])
def test_wrappers_around_ours_are_followed_32_deep(flashmla, layer_cls, depth, ours):
    """Another plugin's wrappers around the patched function (each with
    __wrapped__): the fix still runs, and is_patched follows the chain to 32
    functions, no further (a chain that long is not ours)."""
    patch.apply(flashmla)
    func = layer_cls.__dict__["forward_mqa"]
    for _ in range(depth):
        func = functools.wraps(func)(lambda self, *a, _f=func, **k: _f(self, *a, **k))
    layer_cls.forward_mqa = func
    assert patch.is_patched(flashmla) is ours


def test_a_wrapper_chain_that_loops_ends(flashmla, layer_cls):
    def looping(self, *args, **kwargs):
        return None

    looping.__wrapped__ = looping
    layer_cls.forward_mqa = looping
    assert patch.is_patched(flashmla) is False  # and returns: no endless walk


def test_a_refused_plan_s_reason_is_the_patch_error(flashmla, monkeypatch):
    """patch.apply on code the edit refuses: the refusal, word for word."""
    from dspark_attn_plugin import warmup_edit

    real = warmup_edit.plan_edit

    import dataclasses

    def refusing(why):
        return lambda source: dataclasses.replace(real(source), edited=None, refusal=why)

    monkeypatch.setattr(patch, "plan_edit", refusing("the warmup branch changed shape"))
    with pytest.raises(patch.PatchError) as info:
        patch.apply(flashmla)
    assert str(info.value) == "the warmup branch changed shape"
    monkeypatch.setattr(patch, "plan_edit", refusing(None))
    with pytest.raises(patch.PatchError) as info:
        patch.apply(flashmla)
    assert str(info.value) == "affected code: nothing to edit"


def test_register_where_vllm_is_not_importable_installs_no_hook(monkeypatch):
    """vLLM not installed (find_spec finds nothing): register() does nothing
    at all, no hook; vLLM installed but not imported yet: the hook waits."""
    monkeypatch.setitem(sys.modules, "vllm", None)  # find_spec("vllm") is then None
    instrumentation.instrument()
    assert instrumentation._hook is None and _hooks() == []
    monkeypatch.delitem(sys.modules, "vllm")
    monkeypatch.setattr(instrumentation.importlib.util, "find_spec", lambda name: object())
    instrumentation.instrument()
    assert instrumentation._hook is not None and len(_hooks()) == 1
    instrumentation.uninstrument()
