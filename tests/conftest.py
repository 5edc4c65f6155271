"""Fixtures over the real vLLM installed in the test environment.

vLLM's flashmla module is imported once here, at collection, so that every
forked test starts with it in memory (importing it costs seconds). vLLM's
plugins are *not* loaded here: a test that wants the plugin loads it through
vLLM's own ``load_general_plugins()``, in its own forked process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import vllm
import vllm.plugins
from vllm.models.deepseek_v4.nvidia import flashmla as _flashmla
from vllm.v1.worker import workspace as _workspace

from dspark_attn_plugin.workspace_bytes import held_bytes

assert not vllm.plugins.plugins_loaded, "vLLM plugins must load inside each test"

STOCK_FORWARD_MQA = _flashmla.DeepseekV4FlashMLAAttention.__dict__["forward_mqa"]


@pytest.fixture
def stock_forward_mqa():
    """vLLM's own forward_mqa, as imported before any plugin ran."""
    return STOCK_FORWARD_MQA


@pytest.fixture
def flashmla():
    return _flashmla


@pytest.fixture
def layer_cls():
    return _flashmla.DeepseekV4FlashMLAAttention


@pytest.fixture
def load_plugins():
    """Load vLLM's general plugins the way every vLLM process does."""

    def load():
        vllm.plugins.load_general_plugins()
        assert vllm.plugins.plugins_loaded

    return load


class CpuWorkspace:
    """vLLM's real WorkspaceManager on the CPU."""

    def reset(self) -> None:
        _workspace.reset_workspace_manager()
        _workspace.init_workspace_manager(torch.device("cpu"))

    @property
    def manager(self):
        return _workspace.current_workspace_manager()

    def reserved_bytes(self) -> int:
        return held_bytes()

    def lock(self) -> None:
        _workspace.lock_workspace()


@pytest.fixture
def cpu_workspace(monkeypatch):
    # WorkspaceManager releases the accelerator cache before growing; with no
    # accelerator, torch raises. Test-only stub: nothing to release on a CPU.
    monkeypatch.setattr(torch.accelerator, "empty_cache", lambda: None)
    ws = CpuWorkspace()
    ws.reset()
    yield ws
    _workspace.reset_workspace_manager()


def run_python(code: str, *, env: dict | None = None, args=(), check=True):
    """Run ``code`` in a fresh interpreter of this environment."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("DSPARK_")}
    full_env.pop("VLLM_PLUGINS", None)
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, *args, "-c", textwrap.dedent(code)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        )
    return proc


# --- the Ray cluster of tests/test_ray_cluster.py ---------------------------------
# It outlives the forked test processes (tests/ray_cluster.py): its state lives
# in a folder made here, in the pytest process, and it is stopped here.


def pytest_configure(config):
    import tempfile

    from ray_cluster import STATE_VAR

    os.environ.setdefault(STATE_VAR, tempfile.mkdtemp(prefix="dspark-ray-"))


def pytest_sessionfinish(session, exitstatus):
    import shutil

    import ray_cluster

    ray_cluster.stop()
    shutil.rmtree(os.environ[ray_cluster.STATE_VAR], ignore_errors=True)


# --- the mutation score's map (tests/mutation_score.py map) -----------------------
# Only while that map is made (MUTATION_COVERAGE_DIR set): each test measured on
# its own, in the process that runs it (the forked one under --forked).

if os.environ.get("MUTATION_COVERAGE_DIR"):

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_setup(item):
        from mutation_score import TestCoverage

        item._mutation_coverage = TestCoverage(item.nodeid)
        yield

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_teardown(item):
        yield
        measured = getattr(item, "_mutation_coverage", None)
        if measured is not None:
            measured.stop()


# --- the mutation score's runs: a mutant that loops forever fails its test ---------
# (MUTATION_TEST_SECONDS set by tests/mutation_score.py only.)

if os.environ.get("MUTATION_TEST_SECONDS"):

    _usual: dict = {}

    def _mutation_limit(nodeid: str) -> int:
        """The floor, or four times what the test took when the map was made."""
        if not _usual and os.environ.get("MUTATION_MAP"):
            import json

            with open(os.environ["MUTATION_MAP"], encoding="utf-8") as fh:
                _usual.update((t["nodeid"], t["seconds"]) for t in json.load(fh)["tests"].values())
        return int(max(float(os.environ["MUTATION_TEST_SECONDS"]), 4 * _usual.get(nodeid, 0.0)))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(item):
        import signal

        def too_long(signum, frame):
            raise TimeoutError(f"over {_mutation_limit(item.nodeid)} s (a mutant that loops?)")

        previous = signal.signal(signal.SIGALRM, too_long)
        signal.alarm(_mutation_limit(item.nodeid))
        try:
            yield
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
