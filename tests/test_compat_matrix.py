"""The classifier on real vLLM releases, and ``status --json`` on installs of them."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dspark_attn_plugin.warmup_shape import Verdict, classify_source

import vllm_releases
from vllm_releases import EXPECTED

pytestmark = pytest.mark.network

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.parametrize("version", sorted(EXPECTED))
def test_classifier_on_release(version):
    source = vllm_releases.flashmla_source(vllm_releases.wheel(version))
    assert classify_source(source).verdict.value == EXPECTED[version]


def _status_json(pythonpath: Path, **env) -> tuple[int, dict]:
    full_env = {k: v for k, v in os.environ.items() if k not in ("VLLM_PLUGINS",)}
    full_env.pop("DSPARK_ATTN_PLUGIN", None)
    full_env.update(PYTHONPATH=str(pythonpath), **env)
    proc = subprocess.run(
        [sys.executable, "-m", "dspark_attn_plugin", "status", "--json"],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.returncode, json.loads(proc.stdout)


@pytest.fixture
def target_dir(tmp_path):
    dest = tmp_path / "vllm-target"
    yield dest
    shutil.rmtree(dest, ignore_errors=True)  # ~750 MB each


@pytest.mark.parametrize("version", sorted(EXPECTED))
def test_status_json_on_target_install(version, target_dir):
    vllm_releases.install_target(vllm_releases.wheel(version), target_dir)
    code, report = _status_json(target_dir)
    assert report["vllm_version"] == version
    assert report["verdict"] == EXPECTED[version]
    assert report["flashmla_path"].startswith(str(target_dir))
    assert report["plugin_will_load"] is True
    assert report["protected"] is True and code == 0
    if EXPECTED[version] == "affected":
        code, report = _status_json(target_dir, DSPARK_ATTN_PLUGIN="off")
        assert (code, report["protected"]) == (1, False)


def test_newest_release_on_pypi_is_not_affected_or_unknown():
    """Canary: a regression or a refactor the classifier misreads in a new
    vLLM release fails here the day it ships."""
    try:
        version = vllm_releases.newest_version()
    except RuntimeError as exc:  # PyPI unreachable: nothing to judge
        pytest.skip(str(exc))
    result = classify_source(vllm_releases.flashmla_source(vllm_releases.wheel(version)))
    assert result.verdict not in (Verdict.AFFECTED, Verdict.UNKNOWN), (
        f"vLLM {version}: {result.verdict} ({result.reason})"
    )


def matrix_table() -> str:
    rows = ["| vLLM | verdict | what the plugin does |", "| --- | --- | --- |"]
    action = {
        "not-affected": "nothing (no assertion in warmup)",
        "affected": "patches `forward_mqa`",
        "fixed": "nothing; logs that it can be uninstalled",
    }
    for version in sorted(EXPECTED, key=lambda v: tuple(map(int, v.split(".")))):
        rows.append(f"| {version} | `{EXPECTED[version]}` | {action[EXPECTED[version]]} |")
    return "\n".join(rows)


def test_readme_matrix_matches_the_tested_one():
    text = README.read_text(encoding="utf-8")
    found = re.search(r"<!-- matrix:start -->\n(.*?)\n<!-- matrix:end -->", text, re.S)
    assert found, "README.md lacks the <!-- matrix:start/end --> table"
    assert found.group(1).strip() == matrix_table(), (
        "README matrix is stale; expected:\n" + matrix_table()
    )
