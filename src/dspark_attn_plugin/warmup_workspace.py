"""The workspace the warmup dummy run reserves for ``_forward_prefill``.

Imported only once vLLM's flashmla module is loaded (it imports torch and
vLLM's workspace manager), never by ``register()``.
"""

from __future__ import annotations

import torch
from vllm.v1.worker import workspace as vllm_workspace

from dspark_attn_plugin.log import logger

# Shape and dtype of one workspace tensor, as WorkspaceManager takes them.
Spec = tuple[tuple[int, ...], torch.dtype]

# _forward_prefill rounds the combined top-k + SWA index width up to this.
_INDEX_WIDTH_ALIGN = 128
# WorkspaceManager.get_simultaneous aligns each tensor to this many bytes.
_TENSOR_ALIGN = 256


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def prefill_workspace_specs(layer, head_dim: int) -> tuple[Spec, Spec, Spec]:
    """What 0.26.1rc1.dev77 .. 0.27.x ``_forward_prefill`` requests at most.

    - gather buffer ``(PREFILL_CHUNK_SIZE, M, head_dim)`` bf16, with
      ``M = N + window_size + max_num_batched_tokens`` and ``N`` the compressed
      prefix (0 for SWA-only layers, else ``ceil(max_model_len / ratio)``);
    - combined index buffer ``(max_num_batched_tokens, W)`` int32, with
      ``W = round_up(top_k + window_size, 128)``; ``top_k`` is 0 for SWA-only
      layers and the width of ``topk_indices_buffer`` for sparse ones;
    - combined lengths ``(max_num_batched_tokens,)`` int32.

    SWA-only layers never read ``topk_indices_buffer``; sparse layers need it,
    as upstream (vLLM #50693) does.
    """
    ratio = layer.compress_ratio
    if ratio <= 1:
        compressed, top_k = 0, 0
    else:
        buffer = layer.topk_indices_buffer
        if buffer is None:
            raise AssertionError(
                f"sparse DeepSeek-V4 layer {getattr(layer, 'prefix', '?')!r} "
                f"(compress_ratio={ratio}) has no topk_indices_buffer"
            )
        compressed = -(-layer.max_model_len // ratio)
        top_k = buffer.shape[-1]
    tokens = layer.max_num_batched_tokens
    gather_width = compressed + layer.window_size + tokens
    index_width = _round_up(top_k + layer.window_size, _INDEX_WIDTH_ALIGN)
    return (
        ((layer.PREFILL_CHUNK_SIZE, gather_width, head_dim), torch.bfloat16),
        ((tokens, index_width), torch.int32),
        ((tokens,), torch.int32),
    )


def layout_bytes(specs) -> int:
    """Bytes ``WorkspaceManager.get_simultaneous(*specs)`` needs."""
    total = 0
    for shape, dtype in specs:
        count = 1
        for dim in shape:
            count *= dim
        total += _round_up(count * dtype.itemsize, _TENSOR_ALIGN)
    return total


def held_bytes() -> int:
    """Bytes vLLM's WorkspaceManager holds now, over its ubatch slots (0
    without a manager). Reads the manager's own bookkeeping."""
    if not vllm_workspace.is_workspace_manager_initialized():
        return 0
    manager = vllm_workspace.current_workspace_manager()
    return sum(manager._workspace_size_bytes(ws) for ws in manager._current_workspaces)


def reserve_prefill_workspace(layer, head_dim: int) -> bool:
    """Grow vLLM's workspace to what ``_forward_prefill`` may request.

    Returns False, with a DEBUG line, when no workspace manager is set up
    (stock code would fail there with an AssertionError).
    """
    specs = prefill_workspace_specs(layer, head_dim)
    if not vllm_workspace.is_workspace_manager_initialized():
        logger.debug(
            "no WorkspaceManager initialised: warmup of %s reserves nothing",
            getattr(layer, "prefix", "?"),
        )
        return False
    vllm_workspace.current_workspace_manager().get_simultaneous(*specs)
    return True


# Set once this process has said that a layer without a buffer warmed up.
_said_rescued = False


def _note_rescued(layer) -> None:
    """One INFO line per process: the first SWA-only layer without a buffer
    that warmed up here is the run stock vLLM would have stopped."""
    global _said_rescued
    if _said_rescued or getattr(layer, "topk_indices_buffer", None) is not None:
        return
    _said_rescued = True
    logger.info(
        "dspark-attn-plugin: %s warmed up without topk_indices_buffer; stock "
        "vLLM would have stopped here (vllm-project/vllm#50615)",
        getattr(layer, "prefix", "?"),
    )


def run_warmup(layer, q: torch.Tensor, output: torch.Tensor) -> None:
    """The warmup dummy run of ``forward_mqa`` for an SWA-only layer:
    reserve, zero, no kernels."""
    if output.shape != q.shape or output.dtype != q.dtype:
        raise AssertionError(
            f"output buffer {tuple(output.shape)} {output.dtype} must match "
            f"q {tuple(q.shape)} {q.dtype}"
        )
    reserve_prefill_workspace(layer, q.shape[-1])
    output.zero_()
    _note_rescued(layer)
