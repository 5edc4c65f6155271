"""The plugin on a real Ray cluster: two nodes (and two more for ``status
--ray``) on this machine, each its own ``ray start`` with its own environment
and IP.

Node ``dspark_node_a`` (the head) has nothing set; ``dspark_node_b`` was
started with ``DSPARK_ATTN_PLUGIN=off``. Both run this venv (vLLM 0.27.1 and
the plugin's wheel). A driver (tests/ray_probe.py) starts one vLLM
``RayWorkerWrapper`` per node the way vLLM's Ray executor does; each worker
loads the general plugins in ``init_worker`` and imports the real flashmla.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ray_cluster
import vllm_releases
from ray_cluster import TESTS, clean_env

pytestmark = pytest.mark.ray

NODE_A, NODE_B = "dspark_node_a", "dspark_node_b"
NODE_C, NODE_D = "dspark_node_c", "dspark_node_d"
CLI = [sys.executable, "-m", "dspark_attn_plugin", "status", "--ray"]


def _two_nodes() -> dict:
    return {
        NODE_A: {"ip": "127.0.0.1", "python": sys.executable,
                 "env": clean_env(PYTHONPATH=str(TESTS))},
        NODE_B: {"ip": "127.0.0.2", "python": sys.executable,
                 "env": clean_env(PYTHONPATH=str(TESTS), DSPARK_ATTN_PLUGIN="off")},
    }


@pytest.fixture
def cluster():
    return ray_cluster.ensure(_two_nodes())


def _probe(cluster, load_plugins=True, **driver_env) -> dict:
    proc = subprocess.run(
        [sys.executable, str(TESTS / "ray_probe.py"), cluster["address"],
         f"{NODE_A},{NODE_B}", "1" if load_plugins else "0"],
        env=clean_env(PYTHONPATH=str(TESTS), **driver_env),
        capture_output=True, text=True, timeout=300,
    )
    line = next((l for l in proc.stdout.splitlines() if l.startswith("PROBE ")), None)
    assert proc.returncode == 0 and line, proc.stderr[-4000:]
    report = json.loads(line[len("PROBE "):])
    a, b = report["workers"]
    assert a["ip"] != b["ip"] and b["ip"] == "127.0.0.2", report
    assert a["vllm_version"] == b["vllm_version"] == "0.27.1"
    return report


def test_unset_on_the_driver_each_node_keeps_its_own(cluster):
    report = _probe(cluster)
    a, b = report["workers"]
    assert report["driver"]["prefixes"] is None  # nothing set here: nothing to carry
    assert a["switch"] is None and a["registered"] and a["patched"]
    assert b["switch"] == "off" and not b["registered"] and not b["patched"]


def test_switch_set_on_the_driver_reaches_every_node(cluster):
    report = _probe(cluster, DSPARK_ATTN_PLUGIN="auto")
    assert "DSPARK_ATTN_PLUGIN" in report["driver"]["copied"]
    for worker in report["workers"]:  # node b said off: it follows the driver
        assert worker["switch"] == "auto", worker
        assert worker["plugins_loaded"] and worker["registered"] and worker["patched"], worker


def test_off_on_the_driver_is_off_on_both_nodes(cluster):
    report = _probe(cluster, DSPARK_ATTN_PLUGIN="off")
    for worker in report["workers"]:
        assert worker["switch"] == "off", worker
        assert worker["plugins_loaded"] and not worker["registered"], worker
        assert not worker["patched"], worker


def test_without_the_plugin_on_the_driver_off_stops_there(cluster):
    """The control: vLLM alone does not carry the switch (the gap the plugin
    closes), so the test above can tell."""
    report = _probe(cluster, load_plugins=False, DSPARK_ATTN_PLUGIN="off")
    a, _ = report["workers"]
    assert report["driver"]["copied"] == []
    assert a["switch"] is None and a["patched"], a


def test_vllm_plugins_without_it_loads_it_nowhere(cluster):
    report = _probe(cluster, VLLM_PLUGINS="lora_filesystem_resolver")
    for worker in report["workers"]:
        assert worker["vllm_plugins"] == "lora_filesystem_resolver", worker
        assert worker["plugins_loaded"] and not worker["plugin_imported"], worker
        assert not worker["patched"], worker


# --- status --ray --------------------------------------------------------------------


@pytest.fixture
def mixed_cluster():
    """Four nodes: a and b as above; c: an image without the plugin (vLLM
    0.27.1); d: this venv with vLLM 0.26.0 overlaid (PYTHONPATH)."""
    nodes = _two_nodes()
    if NODE_C not in (ray_cluster.load() or {}).get("nodes", []):
        state_dir = Path(os.environ[ray_cluster.STATE_VAR])
        overlay = state_dir / "vllm-0.26.0"
        if not overlay.exists():
            vllm_releases.install_target(vllm_releases.wheel("0.26.0"), overlay)
        no_plugin = ray_cluster.venv_without_plugin(state_dir / "venv-without-plugin")
        nodes[NODE_C] = {"ip": "127.0.0.3", "python": no_plugin, "env": clean_env()}
        nodes[NODE_D] = {"ip": "127.0.0.4", "python": sys.executable,
                         "env": clean_env(PYTHONPATH=str(overlay))}
    return ray_cluster.ensure(nodes)


def _status_ray(cluster, *args, **env):
    proc = subprocess.run([*CLI, cluster["address"], *args], env=clean_env(**env),
                          capture_output=True, text=True, timeout=300)
    return proc


def _by_ip(report: dict) -> dict:
    return {n["ip"]: n for n in report["nodes"]}


@pytest.mark.network
def test_status_ray_reports_each_node_of_a_mixed_cluster(mixed_cluster):
    proc = _status_ray(mixed_cluster, "--json")
    report = json.loads(proc.stdout)
    nodes = _by_ip(report)
    assert set(nodes) >= {"127.0.0.2", "127.0.0.3", "127.0.0.4"} and len(nodes) == 4, nodes
    head = next(n for ip, n in nodes.items() if ip not in ("127.0.0.2", "127.0.0.3", "127.0.0.4"))
    b, c, d = nodes["127.0.0.2"], nodes["127.0.0.3"], nodes["127.0.0.4"]
    assert head["exit_code"] == 0 and head["status"]["protected"] is True
    assert head["status"]["verdict"] == "affected"
    # b: its node says off, this shell says nothing.
    assert b["exit_code"] == 1 and b["status"]["plugin_enabled"] is False
    assert b["settings_from"]["DSPARK_ATTN_PLUGIN"] == "node"
    # c: affected vLLM, no plugin in that image.
    assert c["exit_code"] == 1 and c["status"]["plugin_will_load"] is False
    assert c["status"]["verdict"] == "affected" and "not installed" in c["status"]["advice"]
    # d: the older vLLM overlaid there.
    assert d["status"]["vllm_version"] == "0.26.0" and d["status"]["verdict"] == "not-affected"
    assert d["exit_code"] == 0
    assert report["exit_code"] == proc.returncode == 1

    human = _status_ray(mixed_cluster)
    assert human.returncode == 1
    assert "127.0.0.3" in human.stdout and "cluster: a node runs an affected vLLM" in human.stdout


@pytest.mark.network
def test_status_ray_judges_nodes_with_the_settings_that_travel(mixed_cluster):
    on = json.loads(_status_ray(mixed_cluster, "--json", DSPARK_ATTN_PLUGIN="auto").stdout)
    b = _by_ip(on)["127.0.0.2"]
    assert b["exit_code"] == 0 and b["settings_from"]["DSPARK_ATTN_PLUGIN"] == "here"
    assert on["exit_code"] == 1  # c still lacks the plugin

    off = json.loads(_status_ray(mixed_cluster, "--json",
                                 VLLM_PLUGINS="lora_filesystem_resolver").stdout)
    codes = {ip: n["exit_code"] for ip, n in _by_ip(off).items()}
    assert codes["127.0.0.4"] == 0  # 0.26.0 needs no plugin
    assert [c for ip, c in codes.items() if ip != "127.0.0.4"] == [1, 1, 1], codes


def test_status_ray_without_a_cluster_says_so():
    from ray_cluster import _free_port

    proc = subprocess.run([*CLI, f"127.0.0.1:{_free_port()}"], env=clean_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "no Ray cluster answers at 127.0.0.1:" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr

    as_json = subprocess.run([*CLI, f"127.0.0.1:{_free_port()}", "--json"], env=clean_env(),
                             capture_output=True, text=True, timeout=120)
    assert as_json.returncode == 2 and json.loads(as_json.stdout)["exit_code"] == 2
