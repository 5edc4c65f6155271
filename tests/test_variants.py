"""Releases' and forks' shapes of ``flashmla.py``, derived offline from the
installed vLLM 0.27.1's own source: what ``status`` says of each, and what
the runtime then does. ``status`` may say protected only where the runtime
patch is built and the SWA-only warmup passes."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys

import pytest

import dspark_attn_plugin
from dspark_attn_plugin import method_code, patch, synthetic
from dspark_attn_plugin.warmup_shape import Verdict, classify_source

import flashmla_variants as variants

LOGGER = "vllm.dspark_attn_plugin"
CLI = shutil.which("dspark-attn-plugin", path=os.path.dirname(sys.executable))


@pytest.fixture
def source(flashmla):
    return flashmla.__loader__.get_source(flashmla.__name__)


def _status(tmp_path, text: str) -> dict:
    """``status --json`` on a vLLM tree whose flashmla.py is ``text``."""
    pkg = tmp_path / "tree" / "vllm" / "models" / "deepseek_v4" / "nvidia"
    pkg.mkdir(parents=True)
    (tmp_path / "tree" / "vllm" / "__init__.py").write_text("")
    (pkg / "flashmla.py").write_text(text)
    env = {k: v for k, v in os.environ.items() if k not in ("VLLM_PLUGINS", "DSPARK_ATTN_PLUGIN")}
    # First on the path, before whatever PYTHONPATH already holds.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path / "tree"),
                                                      os.environ.get("PYTHONPATH")]))
    proc = subprocess.run([CLI, "status", "--json"], env=env, capture_output=True,
                          text=True, timeout=120)
    report = json.loads(proc.stdout)
    assert report["exit_code"] == proc.returncode
    return report


def _runtime(tmp_path, text: str, caplog, errors=(AssertionError,)):
    """Load ``text`` as vLLM's flashmla module, register the plugin, and run
    the warmup of an SWA-only layer without a buffer: (patched, error)."""
    module = variants.load(text, tmp_path, install=True)
    caplog.set_level(logging.INFO, logger=LOGGER)
    dspark_attn_plugin.register()
    layer = synthetic.make_layer(module.DeepseekV4FlashMLAAttention, synthetic.SWA_ONLY_NO_BUFFER)
    q, kv, positions, output = synthetic.qkv()
    try:
        with synthetic.warmup_context():
            layer.forward_mqa(q, kv, positions, output)
    except errors as exc:
        return patch.is_patched(module), exc
    return patch.is_patched(module), None


def _messages(caplog, level):
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelname == level]


# --- releases' shapes: left alone ------------------------------------------------


@pytest.mark.parametrize(
    "derive, verdict, says",
    [
        (variants.upstream_fix, "fixed", "no longer needed"),
        (variants.without_buffer_use, "not-affected", "is not affected"),
    ],
    ids=["upstream-fix", "no-buffer-use"],
)
def test_fixed_and_not_affected_code_is_left_alone(
    tmp_path, source, cpu_workspace, caplog, derive, verdict, says
):
    text = derive(source)
    report = _status(tmp_path, text)
    assert (report["verdict"], report["exit_code"]) == (verdict, 0)
    patched, error = _runtime(tmp_path, text, caplog)
    assert not patched and error is None
    assert _messages(caplog, "WARNING") == []
    assert any(says in m for m in _messages(caplog, "INFO"))


# --- forks' signatures: patched where the warmup branch is the known shape -------


@pytest.mark.parametrize(
    "derive",
    [
        variants.extra_parameter, variants.renamed_parameter, variants.larger_gather,
        variants.steady_torch_check, variants.steady_super, variants.steady_mangled,
        variants.relative_import, variants.future_annotations, variants.reversed_assertion,
        variants.annotated_inner_helper, variants.future_annotations_inner_helper,
        variants.far_down, variants.code_after_the_method,
    ],
    ids=[
        "extra-optional-parameter", "renamed-parameter-and-annotation", "other-sizing",
        "steady-torch-check", "steady-super", "steady-name-mangled",
        "relative-import", "future-annotations", "assertion-written-none-first",
        "annotated-inner-helper", "future-annotations-inner-helper",
        "assertion-past-line-256", "code-after-the-method-and-the-class",
    ],
)
def test_fork_with_the_known_warmup_is_protected_and_patched(
    tmp_path, source, cpu_workspace, caplog, derive
):
    text = derive(source)
    report = _status(tmp_path, text)
    assert (report["verdict"], report["protected"], report["exit_code"]) == ("affected", True, 0)
    patched, error = _runtime(tmp_path, text, caplog)
    assert patched and error is None
    assert _messages(caplog, "WARNING") == []


def test_a_fork_under_future_annotations_keeps_them_strings_once_patched(
        tmp_path, source, cpu_workspace, caplog):
    """The patched method is the fork's own, annotations included: under
    ``from __future__ import annotations`` they stay the strings the module
    compiled, as ``inspect.signature`` and ``typing.get_type_hints`` expect."""
    text = variants.future_annotations(source)
    (tmp_path / "stock").mkdir()
    stock = variants.load(text, tmp_path / "stock").DeepseekV4FlashMLAAttention.forward_mqa
    patched, error = _runtime(tmp_path, text, caplog)
    assert patched and error is None
    now = sys.modules[variants.FLASHMLA_MODULE].DeepseekV4FlashMLAAttention.forward_mqa
    assert now is not stock
    assert now.__annotations__ == stock.__annotations__
    assert now.__annotations__["q"] == "torch.Tensor"


@pytest.mark.parametrize(
    "derive",
    [variants.annotated_inner_helper, variants.future_annotations_inner_helper],
    ids=["annotated-inner-helper", "future-annotations-inner-helper"],
)
def test_the_patch_adds_nothing_to_the_method_but_its_swa_only_arm(
        tmp_path, source, cpu_workspace, caplog, derive):
    """The patched method is vLLM's, compiled as its module compiles it,
    plus the edit: no constant of its own (annotations of an inner helper
    stay objects or strings as the module says, whatever the plugin's own
    module is compiled under), the same inner functions and global names,
    and one new free variable: the note the SWA-only arm calls."""
    import types

    text = derive(source)
    (tmp_path / "stock").mkdir()
    stock = variants.load(text, tmp_path / "stock").DeepseekV4FlashMLAAttention.forward_mqa
    patched, error = _runtime(tmp_path, text, caplog)
    assert patched and error is None
    now = sys.modules[variants.FLASHMLA_MODULE].DeepseekV4FlashMLAAttention.forward_mqa

    def split(code):
        inner = {c.co_name: c for c in code.co_consts if isinstance(c, types.CodeType)}
        return inner, {repr(c) for c in code.co_consts if not isinstance(c, types.CodeType)}

    (inner_now, consts_now), (inner_stock, consts_stock) = split(now.__code__), split(stock.__code__)
    assert consts_now == consts_stock
    assert set(inner_now) == set(inner_stock) >= {"_width"}
    for name, code in inner_stock.items():
        assert method_code.same_code(inner_now[name], code), name
    assert set(now.__code__.co_names) == set(stock.__code__.co_names)
    assert set(now.__code__.co_freevars) - set(stock.__code__.co_freevars) == {patch.NOTE_NAME}


@pytest.mark.parametrize(
    "derive, crash",
    [(variants.nested_assertion_first, "assert self.topk_indices_buffer is not None"),
     (variants.buffer_read_first, "_rows = self.topk_indices_buffer.shape[0]")],
    ids=["assertion-nested-first", "buffer-read-first"],
)
def test_the_refusal_names_the_line_that_crashes_when_it_is_not_the_edit_s_statement(
        tmp_path, source, cpu_workspace, caplog, derive, crash):
    """The known assertion is there, but something before it crashes first:
    status and the runtime's one WARNING name that line as the reason, and
    the warmup still fails."""
    text = derive(source)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if t.strip() == crash)
    why = f"line {line} is not `assert self.topk_indices_buffer is not None` directly in the warmup branch"
    assert classify_source(text).crash_line == line
    report = _status(tmp_path, text)
    assert (report["verdict"], report["protected"], report["exit_code"]) == ("unknown", False, 2)
    assert why in report["reason"], report["reason"]
    patched, error = _runtime(tmp_path, text, caplog, errors=(AssertionError, AttributeError))
    assert not patched and error is not None
    warnings = _messages(caplog, "WARNING")
    assert len(warnings) == 1 and why in warnings[0], warnings


@pytest.mark.parametrize(
    "derive",
    [variants.assert_in_helper_method, variants.validator_method, variants.assert_then_unseen_check,
     variants.alias_assertion, variants.alias_assertion_after_self, variants.double_assertion],
    ids=["assert-in-helper", "validator-method-raises", "edited-method-still-unknown",
         "assertion-through-an-alias", "assertion-through-an-alias-after-self",
         "assertion-twice"],
)
def test_affected_code_the_edit_does_not_fit_is_unknown_and_left_alone(
    tmp_path, source, cpu_workspace, caplog, derive
):
    text = derive(source)
    assert classify_source(text).verdict is Verdict.AFFECTED
    report = _status(tmp_path, text)
    assert (report["verdict"], report["protected"], report["exit_code"]) == ("unknown", False, 2)
    assert "cannot patch" in report["reason"]
    patched, error = _runtime(tmp_path, text, caplog, errors=(AssertionError, ValueError))
    # What status warned of: no patch, and the warmup still fails.
    assert not patched and error is not None
    warnings = _messages(caplog, "WARNING")
    assert len(warnings) == 1 and "cannot patch" in warnings[0]


# --- shapes that crash must never read as safe ------------------------------------


@pytest.mark.parametrize("name", sorted(variants.FAIL_OPEN))
def test_crashing_shapes_are_never_fixed(tmp_path, source, cpu_workspace, caplog, name):
    text = variants.fail_open(source, name)
    assert classify_source(text).verdict in (Verdict.UNKNOWN, Verdict.AFFECTED)
    report = _status(tmp_path, text)
    assert report["exit_code"] != 0 and report["protected"] is False
    patched, error = _runtime(tmp_path, text, caplog)
    assert not patched and error is not None  # stock crashes there: status was right
    assert len(_messages(caplog, "WARNING")) == 1
