"""``status``'s judgement of what it read: each verdict, with the plugin on
and off, gets the exit status and advice a user acts on; and where the
plugin's own checks of the source cannot pass, ``status`` says it cannot be
judged, as the runtime would leave the code alone.

The snapshots are this environment's real vLLM 0.27.1 with its flashmla
source replaced by a variant (``flashmla_variants``): fixed, not affected,
affected."""

from __future__ import annotations

import pytest

import flashmla_variants as fv
from dspark_attn_plugin import method_code, status

ON = {}
OFF = {"DSPARK_ATTN_PLUGIN": "off"}
NOT_ALLOWED = {"VLLM_PLUGINS": "lora_filesystem_resolver"}


@pytest.fixture(scope="module")
def real():
    snap = status.snapshot({})
    assert snap["vllm_version"] == "0.27.1" and snap["flashmla_source"]
    return snap


def _judge(real, variant=None, environ=ON):
    source = real["flashmla_source"] if variant is None else variant(real["flashmla_source"])
    return status.judge(dict(real, flashmla_source=source, settings=dict(environ)))


@pytest.mark.parametrize("environ", [ON, OFF, NOT_ALLOWED], ids=["on", "off", "not-allowed"])
@pytest.mark.parametrize("variant, verdict, says", [
    (fv.upstream_fix, "fixed", "has the fix (vLLM #50693): you can uninstall the plugin"),
    (fv.without_buffer_use, "not-affected", "Nothing to fix on this vLLM."),
], ids=["fixed", "not-affected"])
def test_a_safe_vllm_is_safe_and_says_why_whether_or_not_the_plugin_runs(
        real, variant, verdict, says, environ):
    st = _judge(real, variant, environ)
    assert (st.verdict, st.exit_code, st.protected) == (verdict, status.EXIT_SAFE, True)
    assert says in st.advice
    assert "Protected" not in st.advice and "Enable it" not in st.advice


def test_an_affected_vllm_with_the_plugin_running_is_protected(real):
    st = _judge(real)
    assert (st.verdict, st.exit_code, st.protected) == ("affected", status.EXIT_SAFE, True)
    assert st.advice == "Protected: the plugin patches this vLLM in every process."


@pytest.mark.parametrize("environ, why", [
    (OFF, "DSPARK_ATTN_PLUGIN=off"),
    (NOT_ALLOWED, "VLLM_PLUGINS does not name dspark_attn_plugin"),
], ids=["off", "not-allowed"])
def test_an_affected_vllm_without_the_plugin_running_is_unprotected_and_says_why(
        real, environ, why):
    st = _judge(real, environ=environ)
    assert (st.verdict, st.exit_code, st.protected) == ("affected", status.EXIT_UNPROTECTED, False)
    assert f"the plugin will not run ({why})" in st.advice
    assert "upgrade vLLM to >= 0.28.0" in st.advice


def test_the_report_names_the_vllm_it_read(real):
    text = status.render(_judge(real))
    assert f"0.27.1  ({real['vllm_path']})" in text.splitlines()[0]


@pytest.mark.parametrize("error", [SyntaxError("bad"), ValueError("bad"), TypeError("bad")],
                         ids=lambda e: type(e).__name__)
def test_affected_code_whose_edit_does_not_compile_cannot_be_judged(real, monkeypatch, error):
    def refuse(*args, **kwargs):
        raise error

    monkeypatch.setattr(method_code, "edited_factory", refuse)
    st = _judge(real)
    assert (st.verdict, st.exit_code) == ("unknown", status.EXIT_ERROR)
    assert "the plugin cannot patch it: the edited forward_mqa does not compile: bad" in st.reason


def test_affected_code_whose_rebuilt_method_differs_from_the_module_s_cannot_be_judged(
        real, monkeypatch):
    plain = method_code.plain_code

    def other(*args, **kwargs):
        return plain(*args, **kwargs).replace(co_consts=("another constant",))

    monkeypatch.setattr(method_code, "plain_code", other)
    st = _judge(real)
    assert (st.verdict, st.exit_code) == ("unknown", status.EXIT_ERROR)
    assert "rebuilt from its source does not match the module's own" in st.reason


def test_code_the_plugin_cannot_read_cannot_be_judged(real, monkeypatch):
    def broken(source):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(status, "plan_edit", broken)
    st = _judge(real)
    assert (st.verdict, st.exit_code) == ("unknown", status.EXIT_ERROR)
    assert st.reason.startswith("the plugin could not read vllm/models/deepseek_v4/nvidia/flashmla.py")
    assert "RecursionError" in st.reason


@pytest.mark.parametrize("environ", [ON, OFF], ids=["on", "off"])
def test_a_vllm_without_deepseek_v4_has_nothing_to_fix_whether_or_not_the_plugin_runs(
        real, environ):
    """vLLM is installed but has no DeepSeek-V4 FlashMLA module (an older
    release): safe, nothing to fix, never "protected by the plugin"."""
    snap = dict(real, flashmla_source=None, compiled_forms=[], package_readable=True,
                settings=dict(environ))
    st = status.judge(snap)
    assert (st.verdict, st.exit_code, st.protected) == ("absent", status.EXIT_SAFE, True)
    assert st.advice == "Nothing to fix on this vLLM."


def test_a_switch_value_it_does_not_know_reads_as_auto_and_says_so(real):
    """``DSPARK_ATTN_PLUGIN=on`` is not one of auto/off: the runtime warns
    and runs as ``auto``, so an affected vLLM is protected, and `status`
    says what it read."""
    st = _judge(real, environ={"DSPARK_ATTN_PLUGIN": "on"})
    assert (st.plugin_enabled, st.protected, st.exit_code) == (True, True, status.EXIT_SAFE)
    assert "DSPARK_ATTN_PLUGIN='on' is not one of auto, off; using auto" in st.enabled_reason
