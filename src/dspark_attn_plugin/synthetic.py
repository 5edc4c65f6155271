"""Synthetic DeepSeek-V4 attention layers and forward contexts.

Real ``DeepseekV4FlashMLAAttention`` instances, built without ``__init__``
(no weights, no config, no GPU), with just what ``forward_mqa`` reads; and the
forward contexts of a warmup dummy run and of an idle steady step. Used by
``dspark-attn-plugin verify``, the tests and the benchmarks. Imports torch and
vLLM: never imported by ``register()``.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import torch
from vllm.forward_context import ForwardContext, override_forward_context

# DeepSeek-V4-Flash's shapes, and a typical serving configuration.
HEAD_DIM = 512
WINDOW_SIZE = 128
INDEX_TOPK = 512
MAX_NUM_BATCHED_TOKENS = 8192
MAX_MODEL_LEN = 65536


@dataclass(frozen=True)
class LayerKind:
    name: str
    compress_ratio: int
    has_buffer: bool


SWA_ONLY_NO_BUFFER = LayerKind("swa_only_no_buffer", 1, False)
SWA_ONLY_WITH_BUFFER = LayerKind("swa_only_with_buffer", 1, True)
SPARSE_C4 = LayerKind("compress_ratio_4", 4, True)
SPARSE_C128 = LayerKind("compress_ratio_128", 128, True)
LAYER_KINDS = (SWA_ONLY_NO_BUFFER, SWA_ONLY_WITH_BUFFER, SPARSE_C4, SPARSE_C128)


def make_layer(
    layer_cls: type,
    kind: LayerKind,
    *,
    device: str | torch.device = "cpu",
    prefix: str | None = None,
    max_num_batched_tokens: int = MAX_NUM_BATCHED_TOKENS,
    max_model_len: int = MAX_MODEL_LEN,
    window_size: int = WINDOW_SIZE,
    index_topk: int = INDEX_TOPK,
):
    """A ``layer_cls`` instance for ``kind``, as a model would hold it."""
    layer = layer_cls.__new__(layer_cls)
    torch.nn.Module.__init__(layer)
    prefix = prefix or f"model.layers.0.{kind.name}.attn"
    layer.prefix = prefix
    layer.compress_ratio = kind.compress_ratio
    layer.window_size = window_size
    layer.max_num_batched_tokens = max_num_batched_tokens
    layer.max_model_len = max_model_len
    layer.head_dim = HEAD_DIM
    layer.scale = HEAD_DIM**-0.5
    layer.attn_sink = torch.full((64,), float("-inf"), device=device)
    layer.topk_indices_buffer = (
        torch.empty((max_num_batched_tokens, index_topk), dtype=torch.int32, device=device)
        if kind.has_buffer
        else None
    )
    empty_cache = torch.empty((0,), dtype=torch.uint8, device=device)
    layer.kv_cache = empty_cache
    layer.swa_cache_layer = types.SimpleNamespace(
        prefix=f"{prefix}.swa_cache", kv_cache=empty_cache
    )
    return layer


def qkv(num_tokens: int = 4, num_heads: int = 64, *, device="cpu"):
    """``(q, kv, positions, output)`` arguments for ``forward_mqa``."""
    q = torch.ones((num_tokens, num_heads, HEAD_DIM), dtype=torch.bfloat16, device=device)
    kv = torch.empty((num_tokens, HEAD_DIM), dtype=torch.bfloat16, device=device)
    positions = torch.arange(num_tokens, device=device)
    output = torch.full_like(q, 7.0)
    return q, kv, positions, output


@contextlib.contextmanager
def warmup_context() -> Iterator[ForwardContext]:
    """The forward context of the profile/warmup dummy run: no metadata."""
    ctx = ForwardContext(no_compile_layers={}, attn_metadata=None, slot_mapping={})
    with override_forward_context(ctx):
        yield ctx


@contextlib.contextmanager
def step_context(
    layers: Iterable,
    device="cpu",
    *,
    num_decodes: int = 0,
    num_decode_tokens: int = 0,
    num_prefills: int = 0,
    num_prefill_tokens: int = 0,
    layer_metadata: object = None,
) -> Iterator[ForwardContext]:
    """A steady-state forward context with real SWA metadata for ``layers``
    (and ``layer_metadata`` as each layer's own) describing a batch of
    ``num_decodes`` decode and ``num_prefills`` prefill requests, decodes
    first, as vLLM orders them."""
    from vllm.v1.attention.backends.mla.sparse_swa import DeepseekSparseSWAMetadata

    swa = DeepseekSparseSWAMetadata(
        block_table=torch.zeros((1, 1), dtype=torch.int32, device=device),
        slot_mapping=torch.zeros((1,), dtype=torch.int64, device=device),
        block_size=64,
        num_decodes=num_decodes,
        num_decode_tokens=num_decode_tokens,
        num_prefills=num_prefills,
        num_prefill_tokens=num_prefill_tokens,
    )
    metadata: dict = {}
    for layer in layers:
        metadata[layer.prefix] = layer_metadata
        metadata[layer.swa_cache_layer.prefix] = swa
    ctx = ForwardContext(no_compile_layers={}, attn_metadata=metadata, slot_mapping={})
    with override_forward_context(ctx):
        yield ctx


def idle_step_context(layers: Iterable, device="cpu"):
    """A steady-state forward context with real metadata for ``layers`` that
    has no prefill and no decode tokens: vLLM's own ``forward_mqa`` body runs
    its bookkeeping and returns without launching kernels."""
    return step_context(layers, device)
