"""``status --ray``'s judgement of each node, in this process: snapshots of
this environment (the real vLLM 0.27.1) as a node would send them, judged
under the settings that travel. The cluster itself: tests/test_ray_cluster.py."""

from __future__ import annotations

import pytest

from dspark_attn_plugin import __version__, cluster_status, status


@pytest.fixture
def snap():
    return status.snapshot({})


def test_a_node_is_judged_as_status_judges_this_machine(snap):
    node = cluster_status.judge_node(snap, {}, "n1", "10.0.0.1")
    assert node.status == status.collect({}).to_dict()
    assert node.exit_code == 0 and node.status["verdict"] == "affected"
    assert node.settings_from == {"VLLM_PLUGINS": "unset", "DSPARK_ATTN_PLUGIN": "unset"}
    assert node.node_plugin_version == __version__


def test_settings_set_here_replace_the_nodes_own(snap):
    off_there = dict(snap, settings={"DSPARK_ATTN_PLUGIN": "off"})
    assert cluster_status.judge_node(off_there, {}, "n", "ip").exit_code == 1
    node = cluster_status.judge_node(off_there, {"DSPARK_ATTN_PLUGIN": "auto"}, "n", "ip")
    assert node.exit_code == 0 and node.settings_from["DSPARK_ATTN_PLUGIN"] == "here"
    node = cluster_status.judge_node(snap, {"VLLM_PLUGINS": "other"}, "n", "ip")
    assert node.exit_code == 1 and node.settings_from["VLLM_PLUGINS"] == "here"
    node = cluster_status.judge_node(off_there, {}, "n", "ip")
    assert node.settings_from["DSPARK_ATTN_PLUGIN"] == "node"


def test_a_node_without_the_plugin_is_unprotected_with_its_remedy(snap):
    bare = dict(snap, entry_points=[e for e in snap["entry_points"]
                                    if e != status.ENTRY_POINT_NAME], plugin_version=None)
    node = cluster_status.judge_node(bare, {}, "n", "ip")
    assert node.exit_code == 1 and node.status["protected"] is False
    assert "not installed on this node" in node.status["advice"]


def test_another_plugin_version_cannot_be_promised_for(snap):
    older = dict(snap, plugin_version="0.1.0")
    node = cluster_status.judge_node(older, {}, "n", "ip")
    assert node.exit_code == 2 and node.status["protected"] is None
    assert f"dspark-attn-plugin 0.1.0, this check is {__version__}" in node.status["advice"]
    # A vLLM that needs no plugin is safe whatever plugin the node has.
    fixed = dict(older, flashmla_source="class Nothing:\n    pass\n")
    assert cluster_status.judge_node(fixed, {}, "n", "ip").exit_code == 0


def test_a_node_whose_vllm_cannot_be_read_cannot_be_judged(snap):
    broken = dict(snap, read_error="cannot read flashmla.py: permission denied")
    node = cluster_status.judge_node(broken, {}, "n", "ip")
    assert node.exit_code == 2 and node.status is None
    assert "permission denied" in node.error


@pytest.mark.parametrize("codes, worst", [
    ([0, 0], 0), ([0, 2], 2), ([2, 1], 1), ([1, 0, 2], 1), ([], 0),
])
def test_the_worst_node_decides_a_crash_before_a_doubt(codes, worst):
    assert cluster_status.worst(codes) == worst


def test_render_lists_each_node_and_the_cluster_verdict(snap):
    nodes = [cluster_status.judge_node(snap, {}, "a", "10.0.0.1"),
             cluster_status.judge_node(dict(snap, settings={"DSPARK_ATTN_PLUGIN": "off"}),
                                       {}, "b", "10.0.0.2")]
    code = cluster_status.worst([n.exit_code for n in nodes])
    result = cluster_status.ClusterStatus("10.0.0.1:6379", nodes, ["10.0.0.9"], code,
                                          cluster_status._summary(nodes, code))
    text = cluster_status.render(result)
    lines = text.splitlines()
    assert lines[0] == "Ray cluster at 10.0.0.1:6379"
    assert lines[1].startswith("  10.0.0.1        exit 0  vLLM 0.27.1  affected  protected: yes")
    assert lines[2].startswith("  10.0.0.2        exit 1") and "DSPARK_ATTN_PLUGIN=off" in lines[3]
    assert "10.0.0.9        dead, not checked" in text
    assert lines[-1] == ("cluster: a node runs an affected vLLM unprotected: 2 node(s), 1 safe, "
                         "1 unprotected, 0 cannot be judged (exit 1)")
    assert result.to_dict()["nodes"][1]["status"]["plugin_enabled"] is False


@pytest.mark.parametrize("settings, here", [
    ({"DSPARK_ATTN_PLUGIN": "off"}, {}),
    ({}, {"DSPARK_ATTN_PLUGIN": "off"}),
    ({}, {"VLLM_PLUGINS": "lora_filesystem_resolver"}),
])
def test_a_node_with_another_plugin_version_switched_off_is_unprotected(snap, settings, here):
    """Whatever plugin version the node has, with the plugin switched off (or
    left out of VLLM_PLUGINS) it crashes: unprotected (1), not "cannot be
    judged" (2)."""
    older = dict(snap, plugin_version="0.1.0", settings=settings)
    node = cluster_status.judge_node(older, here, "n", "ip")
    assert node.exit_code == status.EXIT_UNPROTECTED, node
    assert node.status["protected"] is False
