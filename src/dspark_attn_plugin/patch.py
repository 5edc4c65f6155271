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
    Upstream's own change, applied to the loaded source (``warmup_edit``):
    that one assertion is made conditional on the layer not being SWA-only,
    and the SWA-only arm calls the once-per-process rescue note instead.
    Nothing else changes: the workspace the warmup reserves (with
    ``top_k = 0`` for SWA-only layers), the zeroing and the steady path are
    the build's own statements, compiled from the build's own file at its
    own line numbers, so a fork that sizes its workspace differently gets
    its own sizing. The edit is accepted only if the classifier reads the
    edited method as ``fixed``, and only after the unedited source, compiled
    the same way (``method_code``: as a method of a class of vLLM's name,
    beside the module's imports), gives the loaded function's bytecode (so
    the source is the code that runs). ``status`` runs the same build. The new function replaces the old one on the class,
    so every instance gets it however it was built. ``remove()`` puts vLLM's
    own function back; the plugin knows its functions by identity.
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

import threading
import types

from dspark_attn_plugin import method_code
from dspark_attn_plugin.target import CLASS_NAME, METHOD_NAME
from dspark_attn_plugin.warmup_edit import NOTE_NAME, plan_edit

# The functions this plugin made, by identity: patched -> vLLM's own.
_ours: dict[types.FunctionType, types.FunctionType] = {}
_lock = threading.Lock()


class PatchError(Exception):
    """The loaded ``forward_mqa`` cannot be patched safely."""


class ForeignWrapperError(Exception):
    """Another plugin wrapped the patched function: it cannot be undone
    without removing theirs."""


def _target_class(module: types.ModuleType) -> type:
    return getattr(module, CLASS_NAME)


def is_ours(func: object) -> bool:
    """True for a function this plugin built (never for a copy of its
    attributes, such as a ``functools.wraps`` wrapper)."""
    return isinstance(func, types.FunctionType) and func in _ours


def stock_of(func: object) -> types.FunctionType | None:
    """vLLM's own function behind one of ours."""
    return _ours.get(func) if isinstance(func, types.FunctionType) else None


def _wraps_ours(func: object) -> bool:
    seen = 0
    while func is not None and seen < 32:
        if is_ours(func):
            return True
        func = getattr(func, "__wrapped__", None)
        seen += 1
    return False


def is_patched(module: types.ModuleType) -> bool:
    """The class's ``forward_mqa`` is ours, or another plugin's wrapper
    around ours (then the fix still runs)."""
    current = _target_class(module).__dict__.get(METHOD_NAME)
    return _wraps_ours(current)


def _build(module: types.ModuleType, stock: types.FunctionType, note) -> types.FunctionType:
    """vLLM's ``forward_mqa`` compiled again from its source with upstream's
    edit. Raises PatchError where that is not safe."""
    filename = stock.__code__.co_filename
    source = module.__loader__.get_source(module.__name__)
    if source is None:
        raise PatchError(f"no source for {module.__name__}")
    plan = plan_edit(source)
    if not plan.applies:
        raise PatchError(plan.refusal or f"{plan.classification.verdict} code: nothing to edit")
    # The source must be the loaded code: compiled as it is, same bytecode.
    if not method_code.same_code(
        method_code.plain_code(plan.function, plan.tree, filename), stock.__code__
    ):
        raise PatchError(f"loaded {METHOD_NAME} does not match {filename}")
    factory = method_code.edited_factory(plan.edited, plan.tree, filename, NOTE_NAME)
    return method_code.build_edited(
        factory, module.__dict__, note, _target_class(module), stock
    )


def apply(module: types.ModuleType) -> bool:
    """Patch the flashmla ``module``'s class; False if it already was.
    Raises PatchError, leaving vLLM's code as it is, where it cannot."""
    from dspark_attn_plugin.rescue_note import note

    cls = _target_class(module)
    with _lock:
        stock = cls.__dict__[METHOD_NAME]
        if _wraps_ours(stock):
            return False
        patched = _build(module, stock, note)
        _ours[patched] = stock
        setattr(cls, METHOD_NAME, patched)  # the only change, made last
    return True


def remove(module: types.ModuleType) -> bool:
    """Put vLLM's own ``forward_mqa`` back; False if it was not patched.

    Raises ForeignWrapperError, leaving the class as it is, where another
    plugin has wrapped ours: removing ours would remove theirs too.
    """
    cls = _target_class(module)
    with _lock:
        current = cls.__dict__.get(METHOD_NAME)
        stock = stock_of(current)
        if stock is not None:
            setattr(cls, METHOD_NAME, stock)
            return True
        if _wraps_ours(current):
            raise ForeignWrapperError(
                f"{CLASS_NAME}.{METHOD_NAME} is another plugin's wrapper around "
                "dspark-attn-plugin's"
            )
    return False
