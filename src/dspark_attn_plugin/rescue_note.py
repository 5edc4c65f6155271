"""The once-per-process line that says the fix mattered.

The edited ``forward_mqa`` calls ``note`` on the warmup run of every SWA-only
layer, where stock vLLM asserted the buffer. The first layer that has no
``topk_indices_buffer`` is the run that stock vLLM would have stopped: that
one is logged, at INFO, once per process. Imports neither torch nor vLLM.
"""

from __future__ import annotations

import threading

from dspark_attn_plugin.log import logger

_lock = threading.Lock()
_said = False


def note(layer) -> None:
    """Called by the edited warmup for SWA-only layers. Never raises."""
    global _said
    if _said:
        return
    try:
        if getattr(layer, "topk_indices_buffer", None) is not None:
            return
        with _lock:
            if _said:
                return
            _said = True
        logger.info(
            "dspark-attn-plugin: %s warmed up without topk_indices_buffer; stock "
            "vLLM would have stopped here (vllm-project/vllm#50615)",
            getattr(layer, "prefix", "?"),
        )
    except Exception:  # a log line must never fail the warmup
        pass
