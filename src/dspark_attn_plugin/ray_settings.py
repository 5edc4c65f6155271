"""The plugin's settings on every node of a Ray cluster.

With ``--distributed-executor-backend ray`` the processes that run the warmup
are Ray actors, started by each node's own ``ray start`` environment. vLLM
copies the driver's environment variables to them, but only those it knows
(``vllm.ray.ray_env.get_env_vars_to_copy``: its own, a few prefixes such as
``VLLM_`` and ``HF_``, and what ``VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY``
adds). ``DSPARK_ATTN_PLUGIN`` is none of them, so without this a switch set
where ``vllm serve`` starts would stop at the driver.

``carry_to_ray_workers()`` adds the plugin's prefix to
``VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY`` in this process's environment, the
documented, additive way to have vLLM copy more variables: every setting of
the plugin set on the driver then reaches every worker, whose node value it
replaces, as vLLM's own variables do. A setting the driver leaves unset is not
copied (the node's own value stays), as for vLLM's variables. So where no
setting of the plugin is set there is nothing to carry, and the environment
is left exactly as it was: that variable is one of those vLLM hashes into
its torch.compile cache key, and a plugin that is merely installed must not
change that key.

vLLM reads that variable through ``vllm.envs``, which can cache every value
(``enable_envs_cache()``, called once an engine core or worker has started;
vLLM 0.27.1 loads plugins before that). If the cache is already on when the
plugin registers, the new value is taken up only by refreshing the cache, and
only when that is provably harmless: every other cached value equal to what
the environment gives now. Otherwise the cache is left alone and one WARNING
says how to set the variable by hand.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping

from dspark_attn_plugin.settings import ENV_VAR

PREFIX = ENV_VAR  # DSPARK_ATTN_PLUGIN and any DSPARK_ATTN_PLUGIN_* setting
PREFIXES_VAR = "VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY"
MANUAL = f"export {PREFIXES_VAR}={PREFIX} where vllm serve starts"


def covered(value: str, prefix: str = PREFIX) -> bool:
    """Whether a prefix list, as vLLM parses it (comma-separated, blanks
    stripped), already copies every name starting with ``prefix``."""
    return any(p and prefix.startswith(p) for p in (t.strip() for t in value.split(",")))


def with_prefix(value: str, prefix: str = PREFIX) -> str:
    """``value`` with ``prefix`` appended, unless it already covers it."""
    if covered(value, prefix):
        return value
    kept = value.strip().rstrip(",")
    return f"{kept},{prefix}" if kept else prefix


def carry_to_ray_workers(environ: MutableMapping[str, str] = os.environ) -> str | None:
    """Have vLLM copy the plugin's settings to its Ray workers.

    Returns what stops it, for one WARNING (None when the settings travel,
    or none is set). Idempotent; imports nothing (``vllm.envs`` is used only
    if loaded).
    """
    if not any(name.startswith(PREFIX) for name in environ):
        return None  # nothing to carry: leave vLLM's environment alone
    before = environ.get(PREFIXES_VAR, "")
    after = with_prefix(before)
    if after != before:
        environ[PREFIXES_VAR] = after
    envs = sys.modules.get("vllm.envs")
    if envs is None or environ is not os.environ:
        return None
    return _take_up(envs)


def _take_up(envs) -> str | None:
    """Make a cached ``vllm.envs`` see the new value, where that is safe."""
    cache_on = getattr(envs, "_is_envs_cache_enabled", None)
    if cache_on is None or not cache_on():
        return None  # read live at every use
    if covered(getattr(envs, PREFIXES_VAR, "")):
        return None
    table = getattr(envs, "environment_variables", None)
    disable = getattr(envs, "disable_envs_cache", None)
    enable = getattr(envs, "enable_envs_cache", None)
    if not isinstance(table, dict) or disable is None or enable is None:
        return f"vLLM cached its environment before the plugin loaded; {MANUAL}"
    try:
        changed = [
            name for name, read in table.items()
            if name != PREFIXES_VAR and read() != getattr(envs, name)
        ]
    except Exception as exc:  # a variable that no longer parses
        return f"vLLM cached its environment and re-reading it failed ({exc!r}); {MANUAL}"
    if changed:
        return (
            f"vLLM cached its environment and {len(changed)} variable(s) changed "
            f"since (e.g. {changed[0]}), so the plugin leaves the cache alone; {MANUAL}"
        )
    disable()
    enable()
    return None
