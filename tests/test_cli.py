"""The ``dspark-attn-plugin`` command on this environment's vLLM 0.27.1."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

CLI = shutil.which("dspark-attn-plugin", path=os.path.dirname(sys.executable))


def cli(*args, **env):
    full_env = {k: v for k, v in os.environ.items() if k not in ("VLLM_PLUGINS",)}
    full_env.pop("DSPARK_ATTN_PLUGIN", None)
    if "PYTHONPATH" in env and os.environ.get("PYTHONPATH"):
        # A fake vLLM first, before whatever PYTHONPATH already holds.
        env = {**env, "PYTHONPATH": env["PYTHONPATH"] + os.pathsep + os.environ["PYTHONPATH"]}
    full_env.update(env)
    return subprocess.run(
        [CLI, *args], env=full_env, capture_output=True, text=True, timeout=300
    )


def test_console_script_is_installed():
    assert CLI, "the wheel must install the dspark-attn-plugin console script"


def test_status_human_output_on_affected_protected_vllm():
    proc = cli("status")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:2] == ["vLLM", "0.27.1"]
    assert any(l.split()[:2] == ["verdict", "affected"] for l in lines)
    assert any(l.split()[:2] == ["protected", "yes"] for l in lines)
    assert lines[-1].startswith("Protected")


def test_status_json_keys_and_values():
    proc = cli("status", "--json")
    report = json.loads(proc.stdout)
    assert {"vllm_version", "verdict", "plugin_will_load", "protected"} <= set(report)
    assert report["vllm_version"] == "0.27.1"
    assert report["verdict"] == "affected"
    assert report["plugin_will_load"] is True and report["protected"] is True


@pytest.mark.parametrize(
    "env, will_load, enabled",
    [
        ({"DSPARK_ATTN_PLUGIN": "off"}, True, False),
        ({"VLLM_PLUGINS": "some_other_plugin"}, False, True),
        ({"VLLM_PLUGINS": ""}, False, True),
    ],
)
def test_status_exit_1_when_affected_and_unprotected(env, will_load, enabled):
    proc = cli("status", "--json", **env)
    report = json.loads(proc.stdout)
    assert proc.returncode == 1
    assert report["protected"] is False
    assert (report["plugin_will_load"], report["plugin_enabled"]) == (will_load, enabled)


def test_status_with_allowlist_naming_us_is_protected():
    proc = cli("status", "--json", VLLM_PLUGINS="some_other_plugin,dspark_attn_plugin")
    assert proc.returncode == 0 and json.loads(proc.stdout)["protected"] is True


@pytest.mark.parametrize(
    "args, env",
    [
        (("frobnicate",), {}),
        (("status", "--yaml"), {}),
        ((), {}),
        (("status",), {"VLLM_PLUGINS": "dspark_attn_plugin, other"}),
        (("status", "--json"), {"VLLM_PLUGINS": "dspark_attn_plugin,"}),
    ],
    ids=["unknown-command", "unknown-flag", "no-command", "plugins-blank", "plugins-empty"],
)
def test_bad_input_exits_2_without_traceback(args, env):
    proc = cli(*args, **env)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stdout + proc.stderr
    assert (proc.stdout + proc.stderr).strip()


def _fake_vllm(root, flashmla_is_dir=False, flashmla_bytes=None):
    pkg = root / "vllm" / "models" / "deepseek_v4" / "nvidia"
    pkg.mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text("")
    dist = root / "vllm-9.9.9.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 9.9.9\n")
    if flashmla_is_dir:
        (pkg / "flashmla.py").mkdir()
    else:
        (pkg / "flashmla.py").write_bytes(flashmla_bytes)


@pytest.mark.parametrize(
    "kind", ["directory", "not-utf8"],
)
def test_status_exit_2_when_vllm_files_are_unreadable(tmp_path, kind):
    _fake_vllm(
        tmp_path,
        flashmla_is_dir=kind == "directory",
        flashmla_bytes=b"\xff\xfe\x00broken",
    )
    proc = cli("status", PYTHONPATH=str(tmp_path))
    assert proc.returncode == 2
    assert "cannot read" in proc.stderr and "Traceback" not in proc.stderr


def test_status_exit_2_on_unknown_layout(tmp_path):
    _fake_vllm(
        tmp_path,
        flashmla_bytes=b"class DeepseekV4FlashMLAAttention:\n"
        b"    def forward_mqa(self, q, kv, positions, output):\n"
        b"        return self.run(q)\n",
    )
    proc = cli("status", "--json", PYTHONPATH=str(tmp_path))
    report = json.loads(proc.stdout)
    assert (proc.returncode, report["verdict"], report["protected"]) == (2, "unknown", False)
    assert report["vllm_version"] == "9.9.9"


def test_verify_shows_stock_failure_and_fixed_pass():
    proc = cli("verify")
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    lines = out.splitlines()
    # The report alone on standard output: vLLM's own log lines go to stderr.
    assert not [l for l in lines if l.startswith(("INFO ", "WARNING ", "DEBUG "))]
    assert "dspark-attn-plugin patched" in proc.stderr
    # No GPU on this machine: one line says which of vLLM's messages are
    # expected, and each message it quotes is one vLLM printed.
    note = next(l for l in lines if l.startswith("No GPU here:"))
    quoted = re.findall(r'"([^"]+?)(?: \.\.\.)?"', note)
    assert len(quoted) >= 3
    for message in quoted:
        assert message in proc.stderr, message
    assert "dspark-attn-plugin verify" not in proc.stderr

    def line(label):
        return next(l for l in lines if label in l)

    stock = line("stock vLLM, SWA-only")
    assert "fails" in stock and "flashmla.py:99" in stock and "topk_indices_buffer" in stock
    # vLLM 0.28.0's own figures (test_upstream_overlay.py measures them there),
    # from vLLM 0.27.1's own sizing code with the plugin.
    assert "passes, reserves 38,305,792 B" in line("with the plugin, SWA-only without buffer")
    assert "passes, reserves 38,305,792 B" in line("with the plugin, SWA-only with buffer")
    assert "passes, reserves 122,191,872 B" in line("with the plugin, sparse (compress_ratio 4)")
    kept = line("with the plugin, sparse without buffer")
    assert "fails: AssertionError at flashmla.py:99" in kept
    assert "FlashMLA sparse kernels: not available here" in out
    assert lines[-1].startswith("PASS")


def test_verify_exit_status_counts_every_layer_it_checks(monkeypatch, capsys):
    """A sparse layer that fails with the plugin fails the proof, even though
    the SWA-only layer passes."""
    monkeypatch.setattr(torch.accelerator, "empty_cache", lambda: None)
    from dspark_attn_plugin import synthetic, verify

    monkeypatch.setattr(synthetic, "SPARSE_C4", synthetic.LayerKind("c4_no_buffer", 4, False))
    report, errors = [], []
    code = verify.run(report.append, errors.append)
    assert code == verify.EXIT_FAIL
    assert any("passes" in l for l in report if "SWA-only without buffer" in l)
    assert any(e.startswith("FAIL: with the plugin, the c4_no_buffer warmup fails") for e in errors)
    assert not any(l.startswith("PASS") for l in report)


def test_verify_without_deepseek_v4_reports_on_stderr_and_exits_2(tmp_path):
    # A vLLM package that has no DeepSeek-V4 FlashMLA module.
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text("")
    proc = cli("verify", PYTHONPATH=str(tmp_path))
    assert proc.returncode == 2
    assert "cannot import vllm.models.deepseek_v4.nvidia.flashmla" in proc.stderr
    assert "cannot import" not in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("command", ["status", "verify"])
def test_help_lists_the_exit_codes(command):
    proc = cli(command, "--help")
    text = " ".join(proc.stdout.split())
    assert proc.returncode == 0
    assert "Exit status: 0" in text and " 1 " in text and " 2 " in text


def test_readme_lists_verify_exit_codes():
    from dspark_attn_plugin.verify import EXIT_CODES_HELP

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    for code, meaning in (
        (0, "every check passes with the plugin"), (1, "a check fails"), (2, "could not run"),
    ):
        assert f"{code} " in EXIT_CODES_HELP and meaning in EXIT_CODES_HELP
        assert meaning in readme, f"README lacks verify's exit code {code} ({meaning})"


def test_version_names_the_tool():
    from dspark_attn_plugin import __version__

    proc = cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"dspark-attn-plugin {__version__}"
