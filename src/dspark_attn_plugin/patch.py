"""The patch on ``DeepseekV4FlashMLAAttention.forward_mqa``.

Patch note
----------
Why
    vLLM #50298 made the warmup branch of ``forward_mqa`` (the profile/warmup
    dummy run, where the forward context has no attention metadata) assert
    ``self.topk_indices_buffer is not None`` for every layer. SWA-only layers
    (``compress_ratio <= 1``), such as a DSpark drafter's, need no sparse
    top-k buffer and may have none, so the engine dies in ``profile_run``
    after loading every weight (vLLM #50615).
How
    ``forward_mqa`` is replaced on the class by a thin dispatcher. Calls with
    real metadata (the steady state) go straight to vLLM's own function, and
    so does the warmup of sparse layers (``compress_ratio > 1``): their stock
    warmup already asserts the buffer and uses its width, as upstream's fix
    does. Only the warmup of SWA-only layers runs the plugin's code: it
    reserves what ``_forward_prefill`` will request with ``top_k = 0``
    (``warmup_workspace``), never touching ``topk_indices_buffer``, and zeroes
    the output, as stock does. ``remove()`` puts vLLM's function back.
Upstream
    vLLM #50693 (in vLLM 0.28.0), fixing #50615, a regression from #50298.
    Affected: the 0.26.1rc1 nightlies from dev77 on, 0.27.0, 0.27.1 and forks
    built from them. Which code is patched is decided from the loaded code
    (``warmup_shape``), never from the version string.
Remove when
    vLLM < 0.28.0 is no longer supported by this plugin's users. On a fixed
    vLLM the plugin already leaves the code untouched and logs that it is no
    longer needed.
"""

from __future__ import annotations

import functools
import sys
import types

from dspark_attn_plugin.target import CLASS_NAME, METHOD_NAME

# Set on the dispatcher: vLLM's own forward_mqa, which remove() puts back.
STOCK_ATTR = "__dspark_attn_plugin_stock__"


def _make_forward_mqa(stock, get_forward_context, run_warmup):
    """vLLM's ``forward_mqa`` for every call but an SWA-only layer's warmup.

    The steady path (metadata present) is the hot one: vLLM calls
    ``forward_mqa`` eagerly for every layer on every step. Where vLLM keeps
    the forward context in a module global read by ``get_forward_context``
    (every affected build), the dispatcher reads that global itself: no call,
    and no attribute lookup through ``nn.Module`` (whose ``__getattr__`` makes
    ``self.x`` slow) before it knows it is in a warmup.
    """
    context_module = sys.modules.get(getattr(get_forward_context, "__module__", ""))
    reads_global = "_forward_context" in getattr(
        getattr(get_forward_context, "__code__", None), "co_names", ()
    )

    if context_module is not None and reads_global and hasattr(
        context_module, "_forward_context"
    ):

        def forward_mqa(self, q, kv, positions, output):
            context = context_module._forward_context
            if context is None or context.attn_metadata is not None or self.compress_ratio > 1:
                return stock(self, q, kv, positions, output)
            return run_warmup(self, q, output)

    else:  # a build that keeps the context elsewhere: ask it

        def forward_mqa(self, q, kv, positions, output):
            if get_forward_context().attn_metadata is not None or self.compress_ratio > 1:
                return stock(self, q, kv, positions, output)
            return run_warmup(self, q, output)

    functools.update_wrapper(forward_mqa, stock)
    setattr(forward_mqa, STOCK_ATTR, stock)
    return forward_mqa


def _target_class(module: types.ModuleType) -> type:
    return getattr(module, CLASS_NAME)


def is_patched(module: types.ModuleType) -> bool:
    current = _target_class(module).__dict__.get(METHOD_NAME)
    return getattr(current, STOCK_ATTR, None) is not None


def apply(module: types.ModuleType) -> bool:
    """Patch the flashmla ``module``'s class; False if it already was."""
    # Imported here: it loads torch and vLLM's workspace manager, which are
    # already in memory once the flashmla module is.
    from dspark_attn_plugin.warmup_workspace import run_warmup

    cls = _target_class(module)
    stock = cls.__dict__[METHOD_NAME]
    if getattr(stock, STOCK_ATTR, None) is not None:
        return False
    dispatcher = _make_forward_mqa(stock, module.get_forward_context, run_warmup)
    setattr(cls, METHOD_NAME, dispatcher)  # the only change, made last
    return True


def remove(module: types.ModuleType) -> bool:
    """Put vLLM's own ``forward_mqa`` back; False if it was not patched."""
    cls = _target_class(module)
    stock = getattr(cls.__dict__.get(METHOD_NAME), STOCK_ATTR, None)
    if stock is None:
        return False
    setattr(cls, METHOD_NAME, stock)
    return True
