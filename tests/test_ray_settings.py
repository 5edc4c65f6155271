"""The plugin's settings reach vLLM's Ray workers: read through vLLM 0.27.1's
own ``get_env_vars_to_copy`` (what its Ray executor copies to every worker),
whether or not vLLM has cached its environment before the plugin loads."""

from __future__ import annotations

import logging
import os

import pytest
import vllm.envs as envs
from vllm.ray.ray_env import get_env_vars_to_copy

import dspark_attn_plugin
from dspark_attn_plugin import ray_settings

VAR = ray_settings.PREFIXES_VAR


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    for name in (VAR, "DSPARK_ATTN_PLUGIN", "DSPARK_ATTN_PLUGIN_FUTURE", "DSPARK_ATTN_PLUGIN_CACHE"):
        monkeypatch.delenv(name, raising=False)
    envs.disable_envs_cache()


def copied() -> set[str]:
    """What vLLM's Ray executor would set in each worker."""
    return {n for n in get_env_vars_to_copy(destination="workers") if n in os.environ}


def test_vllm_alone_does_not_copy_the_switch(monkeypatch):
    monkeypatch.setenv("DSPARK_ATTN_PLUGIN", "off")
    assert "DSPARK_ATTN_PLUGIN" not in copied()


@pytest.mark.parametrize("mode", ["off", "auto", "bogus"])
def test_register_has_vllm_copy_every_setting_whatever_the_switch(monkeypatch, mode):
    monkeypatch.setenv("DSPARK_ATTN_PLUGIN", mode)
    monkeypatch.setenv("DSPARK_ATTN_PLUGIN_FUTURE", "1")
    dspark_attn_plugin.register()
    assert {"DSPARK_ATTN_PLUGIN", "DSPARK_ATTN_PLUGIN_FUTURE"} <= copied()


@pytest.mark.parametrize("stray", [None, "dspark_attn_plugin", "Dspark_Attn_Plugin_X"])
def test_with_no_setting_set_the_environment_is_left_as_it_was(monkeypatch, stray):
    """Nothing to carry; and vLLM hashes VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY
    into its torch.compile cache key: an installed plugin must not change it.
    Names are case-sensitive (as vLLM copies them): a variable spelled in
    another case is no setting of the plugin."""
    from vllm.envs import compile_factors

    if stray:
        monkeypatch.setenv(stray, "off")
    before_env, before_key = dict(os.environ), compile_factors()
    dspark_attn_plugin.register()
    assert dict(os.environ) == before_env and VAR not in os.environ
    assert compile_factors() == before_key
    assert not {n for n in copied() if n.startswith("DSPARK")}


@pytest.mark.parametrize(
    "before, after",
    [
        (None, "DSPARK_ATTN_PLUGIN"),
        ("", "DSPARK_ATTN_PLUGIN"),
        ("MY_", "MY_,DSPARK_ATTN_PLUGIN"),
        ("MY_, ", "MY_,DSPARK_ATTN_PLUGIN"),
        ("DSPARK_", "DSPARK_"),  # already covers it
        (" DSPARK_ATTN_PLUGIN ", " DSPARK_ATTN_PLUGIN "),
        ("DSPARK_ATTN_PLUGIN_X", "DSPARK_ATTN_PLUGIN_X,DSPARK_ATTN_PLUGIN"),
        # a blank Python strips that sorts after the letters (copied from a
        # web page): still a list vLLM reads as "MY_", still extended
        ("\u00a0MY_", "MY_,DSPARK_ATTN_PLUGIN"),
    ],
)
def test_the_prefix_is_added_once_and_others_kept(monkeypatch, before, after):
    monkeypatch.setenv("DSPARK_ATTN_PLUGIN", "auto")
    if before is not None:
        monkeypatch.setenv(VAR, before)
    dspark_attn_plugin.register()
    dspark_attn_plugin.register()
    ray_settings.carry_to_ray_workers()
    assert os.environ[VAR] == after


def test_a_mapping_given_is_the_one_read_and_changed(monkeypatch):
    """carry_to_ray_workers(environ): the prefix list of the mapping given is
    the one extended, and the process environment is not touched."""
    monkeypatch.setenv(VAR, "OTHER_")
    envs.enable_envs_cache()
    cached = envs.__getattr__
    given = {"DSPARK_ATTN_PLUGIN": "off", VAR: "MY_"}
    assert ray_settings.carry_to_ray_workers(given) is None
    assert given[VAR] == "MY_,DSPARK_ATTN_PLUGIN"
    assert os.environ[VAR] == "OTHER_"
    assert envs.__getattr__ is cached  # vLLM's cache is the process's: not refreshed


def test_a_cache_taken_before_the_plugin_is_refreshed(monkeypatch):
    monkeypatch.setenv("DSPARK_ATTN_PLUGIN", "off")
    envs.enable_envs_cache()
    assert envs._is_envs_cache_enabled()
    dspark_attn_plugin.register()
    assert envs._is_envs_cache_enabled()  # left as it was found: on
    assert "DSPARK_ATTN_PLUGIN" in copied()


def test_a_cache_taken_before_the_plugin_is_left_alone_when_nothing_is_set():
    envs.enable_envs_cache()
    cached = envs.__getattr__
    dspark_attn_plugin.register()
    assert envs.__getattr__ is cached  # the same cache, not refreshed
    assert VAR not in os.environ


# One before the prefix variable in name order, one after it.
@pytest.mark.parametrize("name", ["VLLM_LOGGING_PREFIX", "VLLM_RPC_BASE_PATH"])
def test_a_cache_that_differs_from_the_environment_is_left_alone(monkeypatch, caplog, name):
    monkeypatch.setenv(name, "before")
    envs.enable_envs_cache()
    monkeypatch.setenv(name, "after")  # changed since it was cached
    monkeypatch.setenv("DSPARK_ATTN_PLUGIN", "off")
    with caplog.at_level(logging.WARNING, logger="dspark_attn_plugin"):
        dspark_attn_plugin.register()
    assert getattr(envs, name) == "before"  # vLLM's cache untouched
    warnings = [r for r in caplog.records if "may not reach Ray workers" in r.getMessage()]
    assert len(warnings) == 1
    assert "export VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY=DSPARK_ATTN_PLUGIN" in warnings[0].getMessage()
    assert name in warnings[0].getMessage()


def test_a_cached_variable_that_no_longer_parses_leaves_the_cache_alone(monkeypatch, caplog):
    """A variable vLLM cached as a number, set since to text vLLM cannot
    read: the cache stays, and the WARNING says re-reading failed and how to
    set the variable by hand."""
    envs.enable_envs_cache()
    cached = envs.__getattr__
    monkeypatch.setenv("VLLM_RINGBUFFER_WARNING_INTERVAL", "sixty")
    monkeypatch.setenv("DSPARK_ATTN_PLUGIN", "off")
    with caplog.at_level(logging.WARNING, logger="dspark_attn_plugin"):
        dspark_attn_plugin.register()
    assert envs.__getattr__ is cached
    warnings = [r.getMessage() for r in caplog.records if "may not reach Ray workers" in r.getMessage()]
    assert len(warnings) == 1
    assert "re-reading it failed" in warnings[0] and "sixty" in warnings[0]
    assert ray_settings.MANUAL in warnings[0]


def test_a_vllm_without_an_environment_cache_gets_the_settings_and_no_warning(
        monkeypatch, caplog):
    """vLLM releases from before ``enable_envs_cache`` read every variable
    live: the prefix is added, nothing else is needed, nothing is said."""
    monkeypatch.delattr(envs, "_is_envs_cache_enabled")
    monkeypatch.setenv("DSPARK_ATTN_PLUGIN", "auto")
    with caplog.at_level(logging.WARNING, logger="dspark_attn_plugin"):
        dspark_attn_plugin.register()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert "DSPARK_ATTN_PLUGIN" in copied()


def test_a_cache_whose_table_is_not_the_known_dict_is_left_alone(monkeypatch, caplog):
    """Only vLLM's own shape (a dict of readers) is refreshed: a read-only
    mapping in its place is not understood, so the cache stays as it is and
    one WARNING says how to set the variable by hand."""
    import types

    monkeypatch.setattr(envs, "environment_variables",
                        types.MappingProxyType(dict(envs.environment_variables)))
    envs.enable_envs_cache()
    cached = envs.__getattr__
    monkeypatch.setenv("DSPARK_ATTN_PLUGIN", "off")
    with caplog.at_level(logging.WARNING, logger="dspark_attn_plugin"):
        dspark_attn_plugin.register()
    assert envs.__getattr__ is cached  # not refreshed
    warnings = [r.getMessage() for r in caplog.records if "may not reach Ray workers" in r.getMessage()]
    assert len(warnings) == 1 and "cached its environment before the plugin loaded" in warnings[0]
    assert ray_settings.MANUAL in warnings[0]


def test_the_warning_counts_the_changed_variables_and_names_the_first(monkeypatch, caplog):
    """Two variables changed since vLLM cached them: the WARNING says two,
    and names the first in vLLM's own order."""
    changed = ("VLLM_LOGGING_PREFIX", "VLLM_LOGGING_CONFIG_PATH")
    first = next(n for n in envs.environment_variables if n in changed)
    for name in changed:
        monkeypatch.setenv(name, "before")
    envs.enable_envs_cache()
    for name in changed:
        monkeypatch.setenv(name, "after")
    monkeypatch.setenv("DSPARK_ATTN_PLUGIN", "off")
    with caplog.at_level(logging.WARNING, logger="dspark_attn_plugin"):
        dspark_attn_plugin.register()
    warnings = [r.getMessage() for r in caplog.records if "may not reach Ray workers" in r.getMessage()]
    assert len(warnings) == 1
    assert "2 variable(s) changed" in warnings[0] and f"(e.g. {first})" in warnings[0]


def test_a_failure_to_carry_still_patches(monkeypatch, caplog, layer_cls, stock_forward_mqa):
    def broken(*a, **k):
        raise OSError("environment is read-only")

    monkeypatch.setattr(ray_settings, "carry_to_ray_workers", broken)
    with caplog.at_level(logging.WARNING, logger="dspark_attn_plugin"):
        dspark_attn_plugin.register()
    assert any("may not reach Ray workers" in r.getMessage() for r in caplog.records)
    assert layer_cls.__dict__["forward_mqa"] is not stock_forward_mqa
