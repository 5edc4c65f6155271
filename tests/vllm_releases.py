"""Real vLLM release wheels from PyPI, cached outside the clone.

Downloads go to ``$DSPARK_ATTN_PLUGIN_CACHE/wheels`` (default
``~/.cache/dspark-attn-plugin/wheels``), so reruns on one machine fetch
nothing. A release is ~300 MB; only ``flashmla.py`` is read from most.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

from dspark_attn_plugin.target import FLASHMLA_PATH

# The compatibility matrix: what the classifier must say of each release.
EXPECTED = {
    "0.26.0": "not-affected",
    "0.27.0": "affected",
    "0.27.1": "affected",
    "0.28.0": "fixed",
    "0.29.0": "fixed",
    "0.30.0": "fixed",
    "0.31.0": "fixed",
    "0.32.0": "fixed",
    "0.33.0": "fixed",
}

CACHE = (
    Path(os.environ.get("DSPARK_ATTN_PLUGIN_CACHE", "~/.cache/dspark-attn-plugin"))
    .expanduser()
    / "wheels"
)


def _pip(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=cwd,
    )


def newest_version() -> str:
    """The newest vLLM release on PyPI, asked now (not pinned)."""
    proc = _pip("index", "versions", "vllm")
    found = re.search(r"^vllm \(([^)]+)\)", proc.stdout, re.MULTILINE)
    if proc.returncode != 0 or not found:
        raise RuntimeError(f"pip index versions vllm failed:\n{proc.stderr[-2000:]}")
    return found.group(1)


def wheel(version: str) -> Path:
    """The vLLM ``version`` wheel, from the cache or PyPI."""
    CACHE.mkdir(parents=True, exist_ok=True)
    cached = sorted(CACHE.glob(f"vllm-{version}-*.whl"))
    if not cached:
        proc = _pip(
            "download", "--no-deps", "--only-binary=:all:", "-d", str(CACHE),
            f"vllm=={version}",
        )
        if proc.returncode != 0:
            raise RuntimeError(f"pip download vllm=={version} failed:\n{proc.stderr[-2000:]}")
        cached = sorted(CACHE.glob(f"vllm-{version}-*.whl"))
    return cached[0]


def flashmla_source(wheel_path: Path) -> str:
    with zipfile.ZipFile(wheel_path) as zf:
        return zf.read(FLASHMLA_PATH).decode("utf-8")


def install_target(wheel_path: Path, dest: Path) -> Path:
    """``pip install --no-deps --target dest`` of that wheel."""
    proc = _pip("install", "--no-deps", "--no-compile", "--target", str(dest), str(wheel_path))
    if proc.returncode != 0:
        raise RuntimeError(f"pip install --target failed:\n{proc.stderr[-2000:]}")
    return dest
