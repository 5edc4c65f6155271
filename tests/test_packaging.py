"""The tests run against the built wheel, installed: not the source tree."""

import json
from importlib import metadata
from pathlib import Path

import dspark_attn_plugin

REPO = Path(__file__).resolve().parents[1]


def test_plugin_is_imported_from_an_installed_wheel():
    dist = metadata.distribution("dspark-attn-plugin")
    direct_url = dist.read_text("direct_url.json")
    if direct_url:
        assert not json.loads(direct_url).get("dir_info", {}).get("editable", False)
    assert REPO / "src" not in Path(dspark_attn_plugin.__file__).resolve().parents
    assert dist.version == dspark_attn_plugin.__version__


def test_wheel_declares_the_entry_point_and_no_vllm_or_torch_requirement():
    dist = metadata.distribution("dspark-attn-plugin")
    plugins = [ep for ep in dist.entry_points if ep.group == "vllm.general_plugins"]
    assert [(ep.name, ep.value) for ep in plugins] == [
        ("dspark_attn_plugin", "dspark_attn_plugin:register")
    ]
    base = [r for r in (dist.requires or []) if "extra ==" not in r]
    assert not [r for r in base if r.split()[0].lower() in ("vllm", "torch")]
