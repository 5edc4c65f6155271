"""Turning the plugin on and off in a process.

``register()`` is vLLM's ``vllm.general_plugins`` entry point: vLLM calls it
in every process and does not catch its exceptions, so it never raises, and it
imports neither torch nor vLLM. It first has vLLM copy the plugin's settings,
where one is set, to Ray workers (``ray_settings``), then installs a
post-import hook; the patch is
decided and applied when vLLM's flashmla module is imported (or at once, if it
already is). ``instrument()`` and ``uninstrument()`` are idempotent.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import types

from dspark_attn_plugin import ray_settings, settings
from dspark_attn_plugin.import_hook import PostImportHook
from dspark_attn_plugin.log import logger
from dspark_attn_plugin.target import CLASS_NAME, FLASHMLA_MODULE, TARGET

_lock = threading.RLock()
_hook: PostImportHook | None = None
_said: set[str] = set()  # messages logged once per process


def _once(key: str, log, message: str, *args) -> None:
    if key not in _said:
        _said.add(key)
        log(message, *args)


def register() -> None:
    """Entry point for vLLM's ``vllm.general_plugins``. Never raises."""
    try:
        # First, and whatever the switch says: an "off" set here must reach
        # the Ray workers too (ray_settings; nothing changes when none is set).
        stopped = ray_settings.carry_to_ray_workers()
        if stopped:
            _once("ray-carry", logger.warning,
                  "dspark-attn-plugin: its settings may not reach Ray workers: %s", stopped)
    except Exception as exc:
        _once("ray-carry", logger.warning,
              "dspark-attn-plugin: its settings may not reach Ray workers (%r); %s",
              exc, ray_settings.MANUAL)
    try:
        mode, problem = settings.read_mode()
        if problem:
            _once("bad-mode", logger.warning, "dspark-attn-plugin: %s", problem)
        if mode == settings.OFF:
            _once(
                "off",
                logger.info,
                "dspark-attn-plugin is disabled by %s=off; vLLM's code is left as it is",
                settings.ENV_VAR,
            )
            return
        instrument()
    except Exception as exc:  # never take vLLM down
        logger.warning(
            "dspark-attn-plugin could not register, vLLM's code is left as it is: %r",
            exc,
        )


def instrument() -> None:
    """Install the post-import hook; patch now if flashmla is already loaded."""
    global _hook
    with _lock:
        if _hook is not None:
            return
        if sys.modules.get("vllm") is None and importlib.util.find_spec("vllm") is None:
            logger.debug("vLLM is not installed: dspark-attn-plugin does nothing")
            return
        _hook = PostImportHook(FLASHMLA_MODULE, _on_flashmla_loaded)
        _hook.install()
        module = sys.modules.get(FLASHMLA_MODULE)
    if module is not None:
        _on_flashmla_loaded(module)


def uninstrument() -> None:
    """Remove the hook and put vLLM's own ``forward_mqa`` back, unless
    another plugin has wrapped the patched function since (then the class is
    left as it is, with one WARNING)."""
    global _hook
    with _lock:
        if _hook is not None:
            _hook.remove()
            _hook = None
        module = sys.modules.get(FLASHMLA_MODULE)
        if module is not None and hasattr(module, CLASS_NAME):
            from dspark_attn_plugin import patch

            try:
                if patch.remove(module):
                    logger.debug("dspark-attn-plugin removed its patch of %s", TARGET)
            except patch.ForeignWrapperError as exc:
                logger.warning(
                    "dspark-attn-plugin cannot put vLLM's %s back (%s); the class "
                    "is left as it is",
                    TARGET,
                    exc,
                )


def _vllm_version() -> str:
    version = getattr(sys.modules.get("vllm"), "__version__", None)
    if version:
        return str(version)
    try:
        from importlib.metadata import version as dist_version

        return dist_version("vllm")
    except Exception:
        return "(unknown version)"


def _on_flashmla_loaded(module: types.ModuleType) -> None:
    """Classify the loaded code and patch it if affected. Never raises: on
    any fault vLLM's code stays as it is."""
    try:
        with _lock:
            _decide(module)
    except Exception as exc:
        logger.warning(
            "dspark-attn-plugin failed on %s and left vLLM's code as it is: %r",
            TARGET,
            exc,
        )


def _decide(module: types.ModuleType) -> None:
    from dspark_attn_plugin import patch
    from dspark_attn_plugin.loaded_code import classify_loaded
    from dspark_attn_plugin.warmup_shape import Verdict

    if hasattr(module, CLASS_NAME) and patch.is_patched(module):
        return
    result = classify_loaded(module)
    version = _vllm_version()
    if result.verdict is Verdict.AFFECTED:
        try:
            applied = patch.apply(module)
        except patch.PatchError as exc:
            logger.warning(
                "dspark-attn-plugin cannot patch %s in vLLM %s safely (%s) and left "
                "it untouched; run `dspark-attn-plugin verify` to check this build",
                TARGET,
                version,
                exc,
            )
            return
        if applied:
            logger.info(
                "dspark-attn-plugin patched %s on vLLM %s: SWA-only layers warm up "
                "without topk_indices_buffer (backport of vllm-project/vllm#50693)",
                TARGET,
                version,
            )
    elif result.verdict is Verdict.FIXED:
        logger.info(
            "vLLM %s already has the fix for vllm-project/vllm#50615 (%s): "
            "dspark-attn-plugin left it untouched and is no longer needed here",
            version,
            result.reason,
        )
    elif result.verdict is Verdict.NOT_AFFECTED:
        logger.info(
            "vLLM %s is not affected by vllm-project/vllm#50615 (%s): "
            "dspark-attn-plugin left it untouched",
            version,
            result.reason,
        )
    elif result.verdict is Verdict.UNKNOWN:
        logger.warning(
            "dspark-attn-plugin does not recognise %s in vLLM %s (%s) and left it "
            "untouched; run `dspark-attn-plugin verify` to check this build",
            TARGET,
            version,
            result.reason,
        )
    elif result.verdict is Verdict.ABSENT:
        logger.info(
            "dspark-attn-plugin: %s in vLLM %s (%s): nothing to patch, left it untouched",
            module.__name__,
            version,
            result.reason,
        )
