"""A real Ray cluster of several nodes on this one machine, for the tests.

Each node is its own ``ray start --block`` (in its own process group), with its
own environment and its own IP on the loopback network (127.0.0.N: vLLM
insists on one IP per node). The cluster outlives the forked test processes:
its state is a JSON file in ``$DSPARK_TEST_RAY_STATE`` (set by conftest.py in
the pytest process), and conftest stops it when the session ends.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parent
STATE_VAR = "DSPARK_TEST_RAY_STATE"
# Names of the plugin's settings and of vLLM's allow-list: never inherited
# from the shell that runs the tests.
SCRUBBED = ("DSPARK_ATTN_PLUGIN", "VLLM_PLUGINS", "PYTHONPATH", "RAY_ADDRESS",
            "VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY")


def _state_file() -> Path:
    return Path(os.environ[STATE_VAR]) / "cluster.json"


def load() -> dict | None:
    path = _state_file()
    return json.loads(path.read_text()) if path.exists() else None


def _save(state: dict) -> None:
    _state_file().write_text(json.dumps(state))


def clean_env(**extra: str) -> dict:
    """This environment less the plugin's settings (``DSPARK_ATTN_PLUGIN*``,
    the Makefile's cache folder among them), vLLM's allow-list and paths."""
    env = {k: v for k, v in os.environ.items()
           if k not in SCRUBBED and not k.startswith("DSPARK_ATTN_PLUGIN")}
    env.update(extra)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_node(state: dict, name: str, python: str, env: dict, head: bool) -> None:
    log = Path(os.environ[STATE_VAR]) / f"{name}.log"
    args = [python, "-c", "from ray.scripts.scripts import main; main()", "start", "--block",
            "--num-cpus=1", f"--resources={json.dumps({name: 1})}",
            "--object-store-memory=100000000", "--disable-usage-stats"]
    if head:
        args += ["--head", f"--port={state['port']}", "--node-ip-address=127.0.0.1",
                 "--include-dashboard=false",
                 f"--temp-dir={Path(os.environ[STATE_VAR]) / 'rt'}"]
    else:
        args += [f"--address={state['address']}", f"--node-ip-address={state['ips'][name]}"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    state["sessions"].append(proc.pid)
    _save(state)
    deadline = time.monotonic() + 120
    while b"Ray runtime started" not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"ray start for {name} failed:\n{log.read_text()[-3000:]}")
        time.sleep(0.5)


def ensure(nodes: dict[str, dict]) -> dict:
    """Start the cluster if needed and every node in ``nodes`` not yet in it.

    ``nodes``: name -> {"ip": ..., "python": ..., "env": {...}}; the first
    one is the head. Returns the state ({"address": ..., "nodes": [...]}).
    """
    state = load()
    names = list(nodes)
    if state is None:
        port = _free_port()
        state = {"port": port, "address": f"127.0.0.1:{port}", "sessions": [],
                 "nodes": [], "ips": {n: spec["ip"] for n, spec in nodes.items()}}
        _save(state)
    for name in names:
        if name in state["nodes"]:
            continue
        state["ips"][name] = nodes[name]["ip"]
        _start_node(state, name, nodes[name]["python"], nodes[name]["env"],
                    head=not state["nodes"])
        state["nodes"].append(name)
        _save(state)
    return state


def stop() -> None:
    """Stop every node started, and whatever Ray process still names the
    cluster's address."""
    if STATE_VAR not in os.environ:
        return
    state = load()
    if state is None:
        return
    for pid in state["sessions"]:
        _signal_group(pid, signal.SIGTERM)
    time.sleep(3)
    for pid in state["sessions"]:
        _signal_group(pid, signal.SIGKILL)
    marker = f":{state['port']}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if marker in cmdline and b"ray" in cmdline:
            try:
                os.kill(int(proc.name), signal.SIGKILL)
            except OSError:
                pass
    _state_file().unlink()


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except OSError:
        pass


def venv_without_plugin(dest: Path) -> str:
    """A copy of this test venv (hard links where the file system allows,
    else symbolic ones) with the plugin's installed files removed: an image
    that has vLLM and Ray but not the plugin."""
    python = dest / "bin" / "python"
    if python.exists():
        return str(python)
    prefix = Path(sys.prefix)
    site = Path(sysconfig.get_paths()["purelib"])
    building = dest.with_name(dest.name + ".partial")
    shutil.rmtree(building, ignore_errors=True)
    (building / "bin").mkdir(parents=True)
    shutil.copyfile(prefix / "pyvenv.cfg", building / "pyvenv.cfg")
    os.symlink(os.path.realpath(sys.executable), building / "bin" / "python")
    for sub in ("lib", "include"):
        if (prefix / sub).exists():
            linked = subprocess.run(["cp", "-al", str(prefix / sub), str(building / sub)],
                                    capture_output=True)
            if linked.returncode != 0:
                shutil.rmtree(building / sub, ignore_errors=True)
                subprocess.run(["cp", "-as", str(prefix / sub), str(building / sub)],
                               check=True)
    copied_site = building / site.relative_to(prefix)
    removed = [p for p in copied_site.iterdir()
               if p.name == "dspark_attn_plugin" or p.name.startswith("dspark_attn_plugin-")]
    assert removed, f"the plugin is not installed in {site}"
    for path in removed:
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    building.rename(dest)
    return str(python)
