"""``diagnose``'s rules on small logs written in vLLM's line shape, one rule
each (held-out mutations of ``diagnose.py`` and ``log_reader.py`` by a
reviewer who had not read the tests passed every other test): exit 0 only on
positive evidence, and what a reader of the verdict acts on."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from test_diagnose import CLI

RULES = Path(__file__).resolve().parent / "logs" / "rules"

# log: (exit status, words the first lines must hold)
EXPECTED = {
    # The second start shows one process patched and a worker switched off:
    # the plugin is not in effect there yet, whatever start 1 came to.
    "restart-not-yet-patched-everywhere.log": (2, "this start does not show the plugin in effect yet"),
    # VLLM_PLUGINS set without the plugin: the remedy is that setting.
    "crash-with-vllm-plugins-leaving-it-out.log": (1, "add dspark_attn_plugin to VLLM_PLUGINS"),
    # DeepSeek-V4 with a second (draft) architecture: DeepSeek-V4 all the same.
    "deepseek-v4-beside-another-architecture.log": (2, "not in effect in EngineCore pid=200"),
    # A warning that names CUDA out of memory is no death.
    "protected-with-an-oom-warning.log": (0, "Protected"),
    # Stamps going back by exactly the step: newest first, not in order.
    "newest-first-2-s-apart.log": (2, "reads newest first"),
    # A TP worker that logs only from gpu_worker.py still runs the model.
    "tp1-logs-only-from-gpu-worker.log": (2, "not in effect in Worker_TP1 pid=202"),
    # The same pid on two Ray nodes: two processes, one of them unpatched.
    "two-ray-nodes-one-pid.log": (2, "not in effect in RayWorkerWrapper pid=500"),
    # A traceback after "Received SIGTERM" is the stop, not a crash.
    "stopped-by-sigterm-then-a-traceback.log": (0, "The server was stopped at line 10"),
}


def test_every_rule_log_is_listed():
    assert sorted(p.name for p in RULES.glob("*.log")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_rule_logs(name):
    code, words = EXPECTED[name]
    proc = subprocess.run([CLI, "diagnose", str(RULES / name)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == code, proc.stdout
    assert words in "\n".join(proc.stdout.splitlines()[:4]), proc.stdout
