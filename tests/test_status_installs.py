"""``status`` on installs it cannot call safe: no vLLM at all, and a vLLM
installed as byte-code only (a copy of this environment's real vLLM 0.27.1)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import vllm

SITE = Path(vllm.__file__).resolve().parents[1]


def _status(python: str, *args, pythonpath: str | None = None):
    env = {k: v for k, v in os.environ.items()
           if k not in ("VLLM_PLUGINS", "DSPARK_ATTN_PLUGIN", "PYTHONPATH")}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run(
        [python, "-m", "dspark_attn_plugin", "status", *args],
        env=env, capture_output=True, text=True, timeout=120,
    )


def _venv_with_the_plugin_only(root: Path) -> str:
    """A new venv holding the plugin's installed files and nothing else."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = str(root / "bin" / "python")
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    dist = metadata.distribution("dspark-attn-plugin")
    for file in dist.files:
        source = Path(dist.locate_file(file))
        if source.is_file() and ".." not in file.parts:
            dest = Path(purelib) / file
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, dest)
    return python


def test_without_vllm_status_claims_nothing_to_protect(tmp_path):
    python = _venv_with_the_plugin_only(tmp_path / "venv")
    proc = _status(python, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["vllm_version"] is None and report["vllm_path"] is None
    assert report["verdict"] == "absent"
    assert report["protected"] is None
    assert report["plugin_will_load"] is True  # the plugin itself is installed there
    assert "nothing to protect" in report["advice"]

    human = _status(python)
    assert human.returncode == 0
    row = next(l for l in human.stdout.splitlines() if l.startswith("protected"))
    assert row.split()[1] == "n/a" and "nothing to protect" in row
    assert "yes" not in row.split()


def _bytecode_only_copy(dest: Path) -> Path:
    """This environment's vLLM with its ``.py`` removed and its byte-code kept
    where Python loads it without source (``compileall -b``'s layout)."""
    tag = sys.implementation.cache_tag
    for root, _dirs, files in os.walk(SITE / "vllm"):
        if Path(root).name != "__pycache__":
            continue
        rel = Path(root).parent.relative_to(SITE)
        (dest / rel).mkdir(parents=True, exist_ok=True)
        for name in files:
            if name.endswith(f".{tag}.pyc"):
                shutil.copyfile(Path(root) / name, dest / rel / name.replace(f".{tag}", ""))
    dist_info = next(SITE.glob("vllm-*.dist-info"))
    shutil.copytree(dist_info, dest / dist_info.name)
    return dest


def test_bytecode_only_vllm_is_unknown_not_safe(tmp_path):
    site = _bytecode_only_copy(tmp_path / "site")
    flashmla = site / "vllm/models/deepseek_v4/nvidia"
    assert (flashmla / "flashmla.pyc").is_file() and not (flashmla / "flashmla.py").exists()
    assert not list((site / "vllm").rglob("*.py"))
    # A real install: Python finds the modules there, byte-code only.
    where = subprocess.run(
        [sys.executable, "-c",
         "import importlib.util as u; print(u.find_spec('vllm').origin)"],
        env={**os.environ, "PYTHONPATH": str(site)}, capture_output=True, text=True, check=True,
    ).stdout.strip()
    assert where == str(site / "vllm" / "__init__.pyc")

    proc = _status(sys.executable, "--json", pythonpath=str(site))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["vllm_version"] == "0.27.1"
    assert report["vllm_path"] == str(site / "vllm")
    assert report["verdict"] == "unknown"
    assert "without its source" in report["reason"]
    assert report["protected"] is False
    assert "dspark-attn-plugin verify" in report["advice"]


def test_bytecode_in_pycache_alone_is_unknown_too(tmp_path):
    site = tmp_path / "site"
    nvidia = site / "vllm/models/deepseek_v4/nvidia"
    (nvidia / "__pycache__").mkdir(parents=True)
    shutil.copyfile(SITE / "vllm/__init__.py", site / "vllm/__init__.py")
    tag = sys.implementation.cache_tag
    source_cache = SITE / "vllm/models/deepseek_v4/nvidia/__pycache__"
    shutil.copyfile(source_cache / f"flashmla.{tag}.pyc", nvidia / "__pycache__" / f"flashmla.{tag}.pyc")
    proc = _status(sys.executable, "--json", pythonpath=str(site))
    report = json.loads(proc.stdout)
    assert (proc.returncode, report["verdict"]) == (2, "unknown")


def test_without_vllm_verify_says_so_and_exits_2(tmp_path):
    python = _venv_with_the_plugin_only(tmp_path / "venv")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    proc = subprocess.run([python, "-m", "dspark_attn_plugin", "verify"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("dspark-attn-plugin verify: vLLM is not installed for this Python")
    assert "Traceback" not in proc.stderr and "ModuleNotFoundError" not in proc.stderr


def test_status_ray_without_ray_says_what_it_needs(tmp_path):
    python = _venv_with_the_plugin_only(tmp_path / "venv")
    proc = _status(python, "--ray")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("dspark-attn-plugin status --ray: status --ray needs Ray")
    assert "Traceback" not in proc.stderr
    as_json = _status(python, "--ray", "--json")
    assert as_json.returncode == 2
    assert "needs Ray" in json.loads(as_json.stdout)["error"]


def _flashmla_dir(root: Path) -> Path:
    folder = root / "vllm" / "models" / "deepseek_v4" / "nvidia"
    folder.mkdir(parents=True)
    return folder


def test_flashmla_as_an_extension_module_is_unknown_not_absent(tmp_path):
    """A build that compiled flashmla to a ``.so`` (Cython, Nuitka): nothing
    to read, so nothing to promise."""
    from dspark_attn_plugin import status
    from dspark_attn_plugin.warmup_shape import Verdict

    folder = _flashmla_dir(tmp_path)
    (folder / "flashmla.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    verdict, reason = status._classify_file(str(tmp_path / "vllm"), str(folder / "flashmla.py"))
    assert verdict is Verdict.UNKNOWN and ".so" in reason


def test_a_package_that_cannot_be_listed_is_unknown_not_absent(tmp_path, monkeypatch):
    """Where the package folder cannot be listed (permissions), its flashmla
    may exist: unknown, never absent."""
    from dspark_attn_plugin import installation, status
    from dspark_attn_plugin.warmup_shape import Verdict

    folder = _flashmla_dir(tmp_path)

    def denied(path):
        raise PermissionError(13, "Permission denied", str(folder))

    monkeypatch.setattr(installation, "compiled_forms", denied)
    verdict, reason = status._classify_file(str(tmp_path / "vllm"), str(folder / "flashmla.py"))
    assert verdict is Verdict.UNKNOWN and "Permission denied" in reason


def test_only_flashmla_s_own_compiled_forms_stand_for_it(tmp_path):
    """Beside a missing flashmla.py: other modules' byte-code and extension
    modules, and files that merely sort before it, are not flashmla; its own
    sourceless .pyc, extension module and cached byte-code are. The first
    leave the module absent, the second make it unknown."""
    from dspark_attn_plugin import installation, status
    from dspark_attn_plugin.warmup_shape import Verdict

    folder = _flashmla_dir(tmp_path)
    (folder / "__pycache__").mkdir()
    tag = sys.implementation.cache_tag
    for name in ("__init__.py", "attention.pyc", "flashmla_utils.py",
                 "indexer.cpython-311-x86_64-linux-gnu.so", "flashmla_ops.pyd",
                 f"__pycache__/indexer.{tag}.pyc", f"__pycache__/flashmla_utils.{tag}.pyc"):
        (folder / name).write_bytes(b"")
    source = str(folder / "flashmla.py")
    assert installation.compiled_forms(source) == []
    assert status._classify_file(str(tmp_path / "vllm"), source)[0] is Verdict.ABSENT
    own = ["flashmla.pyc", "flashmla.cpython-311-x86_64-linux-gnu.so", f"__pycache__/flashmla.{tag}.pyc"]
    for name in own:
        (folder / name).write_bytes(b"")
    assert installation.compiled_forms(source) == sorted(str(folder / n) for n in own)
    verdict, reason = status._classify_file(str(tmp_path / "vllm"), source)
    assert verdict is Verdict.UNKNOWN and "without its source" in reason
    # Every compiled form is named, in the order they were found.
    assert "(only " + ", ".join(Path(f).name for f in installation.compiled_forms(source)) + ")" in reason


def test_a_package_folder_that_can_be_read_but_not_entered_is_unknown(tmp_path, monkeypatch):
    """A folder with read but not search permission (r--): its files cannot
    be opened, so flashmla may be there: unknown, not absent. (The tests run
    as root, for whom permissions do not apply: os.access answers as for an
    ordinary user here.)"""
    from dspark_attn_plugin import installation, status
    from dspark_attn_plugin.warmup_shape import Verdict

    folder = _flashmla_dir(tmp_path)
    package = str(tmp_path / "vllm")
    granted = {"r--": os.R_OK, "--x": os.X_OK, "r-x": os.R_OK | os.X_OK}
    for perms, allowed in granted.items():
        monkeypatch.setattr(installation.os, "access",
                            lambda path, mode, allowed=allowed: mode & ~allowed == 0)
        out = installation.read_module(package, str(folder / "flashmla.py"))
        assert out["package_readable"] is (perms == "r-x"), perms
        verdict, reason = status._classify_file(package, str(folder / "flashmla.py"))
        if perms == "r-x":
            assert verdict is Verdict.ABSENT
        else:
            assert verdict is Verdict.UNKNOWN and f"cannot read {package}" == reason, perms


def test_the_snapshot_of_this_environment_says_what_it_has(monkeypatch):
    """installation.read(): the host, this Python and its version as Python
    prints it, only the settings that are set, vLLM 0.27.1 where `import
    vllm` finds it, and flashmla's text as on disk."""
    import platform
    import socket

    from dspark_attn_plugin import installation

    monkeypatch.setenv("DSPARK_ATTN_PLUGIN", "off")
    monkeypatch.delenv("VLLM_PLUGINS", raising=False)
    relpath = "vllm/models/deepseek_v4/nvidia/flashmla.py"
    snap = installation.read(relpath, "dspark-attn-plugin", ("DSPARK_ATTN_PLUGIN", "VLLM_PLUGINS"))
    assert snap["host"] == socket.gethostname()
    assert (snap["python"], snap["python_version"]) == (sys.executable, platform.python_version())
    assert snap["settings"] == {"DSPARK_ATTN_PLUGIN": "off"}
    assert snap["vllm_version"] == metadata.version("vllm") == vllm.__version__
    assert snap["vllm_path"] == str(SITE / "vllm")
    assert snap["flashmla_source"] == (SITE / relpath).read_text(encoding="utf-8")
    assert "dspark_attn_plugin" in snap["entry_points"]
    assert snap["plugin_version"] == metadata.version("dspark-attn-plugin")
    assert (snap["locate_error"], snap["read_error"], snap["listing_error"]) == (None, None, None)
    # A node without the plugin installed (status --ray ships this module by
    # value): read all the same, its plugin version None.
    assert installation.read(relpath, "no-such-distribution", ())["plugin_version"] is None


def test_a_vllm_split_across_two_path_entries_is_read_where_python_looks_first(tmp_path):
    """vLLM as a namespace package in two PYTHONPATH entries (no
    ``__init__.py``): Python resolves ``vllm.models...`` in the first entry
    that has it, and status reads that one's flashmla, not the second's."""
    python = _venv_with_the_plugin_only(tmp_path / "venv")
    relpath = "vllm/models/deepseek_v4/nvidia/flashmla.py"
    first, second = tmp_path / "first", tmp_path / "second"
    for site, text in ((first, "FIRST = 1\n"), (second, "SECOND = 1\n")):
        (site / relpath).parent.mkdir(parents=True)
        (site / relpath).write_text(text)
    code = ("import json; from dspark_attn_plugin import installation as i; "
            f"s = i.read({relpath!r}, 'dspark-attn-plugin', ()); "
            "print(json.dumps([s['vllm_path'], s['flashmla_source']]))")
    # The plugin as this test imported it (a copy: its folder may hold a vLLM).
    from dspark_attn_plugin import installation

    plugin = tmp_path / "plugin"
    shutil.copytree(Path(installation.__file__).parent, plugin / "dspark_attn_plugin")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join(map(str, (first, second, plugin)))
    proc = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [str(first / "vllm"), "FIRST = 1\n"]
    loaded = subprocess.run(
        [python, "-c", "import vllm.models.deepseek_v4.nvidia.flashmla as m; print(m.__file__)"],
        env=env, capture_output=True, text=True, timeout=120)
    assert loaded.stdout.strip() == str(first / relpath)  # where Python loads it from


@pytest.mark.parametrize("cause", ["spec-none", "finder-fails"])
def test_a_vllm_that_cannot_be_located_is_said_not_raised(monkeypatch, cause):
    """``importlib`` refusing to locate vLLM (a module object without a spec
    in sys.modules, an import hook that fails): the snapshot says so, and
    status reports it instead of crashing or calling vLLM absent."""
    import types

    from dspark_attn_plugin import installation, status

    if cause == "spec-none":
        stub = types.ModuleType("vllm")
        stub.__spec__ = None
        monkeypatch.setitem(sys.modules, "vllm", stub)
    else:
        class Broken:
            @staticmethod
            def find_spec(name, path=None, target=None):
                if name == "vllm":
                    raise ImportError("import hook broken")
                return None

        monkeypatch.delitem(sys.modules, "vllm", raising=False)
        monkeypatch.setattr(sys, "meta_path", [Broken(), *sys.meta_path])
    snap = installation.read("vllm/models/deepseek_v4/nvidia/flashmla.py", "dspark-attn-plugin", ())
    assert snap["locate_error"].startswith("cannot locate vLLM: ")
    assert snap["vllm_path"] is None
    with pytest.raises(status.StatusError, match="cannot locate vLLM"):
        status.judge(snap)
