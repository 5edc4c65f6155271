"""vLLM 0.28.0 (fixed upstream) overlaid on the test environment."""

from __future__ import annotations

import json
import shutil

import pytest

import vllm_releases
from conftest import run_python
from test_warmup import UPSTREAM_BYTES

pytestmark = pytest.mark.network


@pytest.fixture(scope="module")
def overlay_0_28(tmp_path_factory):
    dest = tmp_path_factory.mktemp("vllm-0.28.0")
    vllm_releases.install_target(vllm_releases.wheel("0.28.0"), dest)
    yield dest
    shutil.rmtree(dest, ignore_errors=True)


def test_fixed_vllm_is_classified_fixed_and_left_untouched(overlay_0_28):
    proc = run_python(
        """
        import json, torch
        torch.accelerator.empty_cache = lambda: None   # test stub: no accelerator
        import vllm, vllm.plugins
        vllm.plugins.load_general_plugins()
        from vllm.models.deepseek_v4.nvidia import flashmla
        from vllm.v1.worker import workspace
        from dspark_attn_plugin import patch, synthetic
        from dspark_attn_plugin.loaded_code import classify_loaded
        from dspark_attn_plugin.workspace_bytes import held_bytes
        cls = flashmla.DeepseekV4FlashMLAAttention
        fn = cls.__dict__["forward_mqa"]
        upstream = {}
        for kind in synthetic.LAYER_KINDS:
            workspace.reset_workspace_manager()
            workspace.init_workspace_manager(torch.device("cpu"))
            layer = synthetic.make_layer(cls, kind)
            q, kv, positions, output = synthetic.qkv()
            with synthetic.warmup_context():
                layer.forward_mqa(q, kv, positions, output)
            upstream[kind.name] = held_bytes()
        print(json.dumps({
            "version": vllm.__version__,
            "file": fn.__code__.co_filename,
            "patched": patch.is_patched(flashmla),
            "verdict": classify_loaded(flashmla).verdict.value,
            "upstream": upstream,
        }))
        """,
        env={"PYTHONPATH": str(overlay_0_28)},
    )
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["version"] == "0.28.0"
    assert report["file"].startswith(str(overlay_0_28))
    assert report["verdict"] == "fixed"
    assert report["patched"] is False
    assert "no longer needed" in proc.stdout
    # Upstream's own reservation, measured: the figures test_warmup.py holds
    # the plugin on vLLM 0.27.1 to.
    assert report["upstream"] == UPSTREAM_BYTES


def test_verify_on_fixed_vllm_passes_and_leaves_it_untouched(overlay_0_28):
    proc = run_python(
        "import sys; from dspark_attn_plugin.cli import main; sys.exit(main(['verify']))",
        env={"PYTHONPATH": str(overlay_0_28)},
    )
    lines = proc.stdout.splitlines()
    assert any(l.startswith("vLLM 0.28.0") and "'fixed'" in l for l in lines)
    stock = next(l for l in lines if "stock vLLM" in l)
    assert "passes" in stock
    assert any("left untouched), SWA-only" in l and "passes" in l for l in lines)
    assert lines[-1].startswith("PASS")
