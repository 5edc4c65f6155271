"""What a Python environment has installed, read without importing vLLM.

``read()`` gathers everything ``status`` judges: the vLLM ``import vllm``
would load (located the way the import finds it), its version, its flashmla
source as text, the ``vllm.general_plugins`` entry points and the settings
that decide whether the plugin runs. It returns plain data, so that it can be
taken on another machine and judged here (``status --ray``).

This module imports only the standard library and nothing of its own
package: ``status --ray`` ships it by value to nodes that may not have the
plugin installed.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import sys
from importlib import metadata

ENTRY_POINT_GROUP = "vllm.general_plugins"


def read(flashmla_relpath: str, dist_name: str, setting_names: tuple[str, ...],
         environ=None) -> dict:
    """A snapshot of this environment, as a dict of plain values.

    ``flashmla_relpath``: the module's path inside site-packages;
    ``dist_name``: the plugin's distribution; ``setting_names``: the
    variables to record (absent ones are left out).
    """
    environ = os.environ if environ is None else environ
    snap = {
        "host": socket.gethostname(),
        "python": sys.executable,
        "python_version": ".".join(map(str, sys.version_info[:3])),
        "settings": {n: environ[n] for n in setting_names if n in environ},
        "entry_points": _entry_point_names(),
        "plugin_version": _dist_version(dist_name),
        "locate_error": None,
        "vllm_version": None,
        "vllm_path": None,
        "flashmla_path": None,
        "flashmla_source": None,
        "read_error": None,
        "compiled_forms": [],
        "listing_error": None,
        "package_readable": True,
    }
    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError) as exc:
        snap["locate_error"] = f"cannot locate vLLM: {exc}"
        return snap
    if spec is None:
        return snap
    locations = list(spec.submodule_search_locations or [])
    if not locations:
        snap["locate_error"] = f"vllm at {spec.origin} is not a package"
        return snap
    package_dir = locations[0]
    snap["vllm_path"] = package_dir
    snap["vllm_version"] = _dist_version("vllm") or "(no distribution metadata)"
    snap.update(read_module(package_dir, os.path.join(os.path.dirname(package_dir),
                                                       flashmla_relpath)))
    return snap


def read_module(package_dir: str, path: str) -> dict:
    """The module at ``path`` as text, or what stands for it when it is not
    there (byte-code, an extension module, an unreadable package)."""
    out = {"flashmla_path": path, "flashmla_source": None, "read_error": None,
           "compiled_forms": [], "listing_error": None, "package_readable": True}
    if os.path.exists(path):
        try:
            with open(path, encoding="utf-8") as f:
                out["flashmla_source"] = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            out["read_error"] = f"cannot read {path}: {exc}"
        return out
    try:
        out["compiled_forms"] = compiled_forms(path)
    except OSError as exc:
        out["listing_error"] = f"cannot read {package_dir}: {exc}"
    out["package_readable"] = os.access(package_dir, os.R_OK | os.X_OK)
    return out


def _entry_point_names() -> list[str]:
    return sorted({ep.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)})


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def compiled_forms(source_path: str) -> list[str]:
    """Files that can stand for ``source_path`` without it: a sourceless
    ``.pyc`` beside it, cached byte-code, or an extension module."""
    folder, name = os.path.split(source_path)
    stem = name[: -len(".py")]
    if not os.path.isdir(folder):
        return []
    found = [
        os.path.join(folder, entry)
        for entry in os.listdir(folder)
        if entry == stem + ".pyc"
        or (entry.startswith(stem + ".") and entry.endswith((".so", ".pyd")))
    ]
    cache = os.path.join(folder, "__pycache__")
    if os.path.isdir(cache):
        found += [
            os.path.join(cache, entry)
            for entry in os.listdir(cache)
            if entry.startswith(stem + ".") and entry.endswith(".pyc")
        ]
    return sorted(found)
