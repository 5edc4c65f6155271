"""The warmup dummy run of real vLLM 0.27.1 layers, without and with the plugin."""

from __future__ import annotations

import types

import pytest
import torch

from dspark_attn_plugin import synthetic, uninstrument
from dspark_attn_plugin.warmup_workspace import layout_bytes, prefill_workspace_specs

# vLLM 0.28.0's own warmup reservation for the synthetic layers' defaults
# (max_num_batched_tokens 8192, window 128, head_dim 512, max_model_len 65536,
# index_topk 512); test_upstream_overlay.py measures it on a 0.28.0 overlay.
UPSTREAM_BYTES = {
    "swa_only_no_buffer": 38_305_792,
    "swa_only_with_buffer": 38_305_792,
    "compress_ratio_4": 122_191_872,
    "compress_ratio_128": 57_180_160,
}


def warmup(layer_cls, kind, **layer_kwargs):
    layer = synthetic.make_layer(layer_cls, kind, **layer_kwargs)
    q, kv, positions, output = synthetic.qkv()
    with synthetic.warmup_context():
        layer.forward_mqa(q, kv, positions, output)
    return layer, output


def test_stock_swa_only_warmup_without_buffer_raises_the_regression(
    layer_cls, cpu_workspace
):
    with pytest.raises(AssertionError) as info:
        warmup(layer_cls, synthetic.SWA_ONLY_NO_BUFFER)
    failing = info.traceback[-1]
    assert failing.path.name == "flashmla.py"
    assert "assert self.topk_indices_buffer is not None" in str(failing.statement)


def test_plugin_swa_only_warmup_without_buffer_passes_zeroes_and_reserves(
    layer_cls, load_plugins, cpu_workspace
):
    load_plugins()
    _, output = warmup(layer_cls, synthetic.SWA_ONLY_NO_BUFFER)
    assert not output.any()
    assert cpu_workspace.reserved_bytes() == UPSTREAM_BYTES["swa_only_no_buffer"]


@pytest.mark.parametrize(
    "kind",
    [synthetic.SWA_ONLY_WITH_BUFFER, synthetic.SPARSE_C4, synthetic.SPARSE_C128],
    ids=lambda k: k.name,
)
def test_plugin_reserves_exactly_as_stock_where_stock_works(
    layer_cls, load_plugins, cpu_workspace, stock_forward_mqa, kind
):
    _, stock_output = warmup(layer_cls, kind)
    stock_bytes = cpu_workspace.reserved_bytes()

    cpu_workspace.reset()
    load_plugins()
    assert layer_cls.__dict__["forward_mqa"] is not stock_forward_mqa
    _, output = warmup(layer_cls, kind)

    assert cpu_workspace.reserved_bytes() == stock_bytes == UPSTREAM_BYTES[kind.name]
    assert not output.any() and not stock_output.any()


def test_plugin_keeps_the_assertion_for_sparse_layers_without_buffer(
    layer_cls, load_plugins, cpu_workspace
):
    load_plugins()
    with pytest.raises(AssertionError):
        warmup(layer_cls, synthetic.LayerKind("sparse_no_buffer", 4, False))


def test_without_workspace_manager_the_fixed_warmup_skips_reservation(
    layer_cls, load_plugins, caplog
):
    from vllm.v1.worker import workspace

    workspace.reset_workspace_manager()
    load_plugins()
    caplog.set_level("DEBUG", logger="vllm.dspark_attn_plugin")
    _, output = warmup(layer_cls, synthetic.SWA_ONLY_NO_BUFFER)
    assert not output.any()
    assert not workspace.is_workspace_manager_initialized()
    assert any(
        r.levelname == "DEBUG" and "no WorkspaceManager" in r.getMessage()
        for r in caplog.records
    )


@pytest.mark.parametrize("kind", synthetic.LAYER_KINDS, ids=lambda k: k.name)
def test_reservation_specs_give_upstream_bytes(layer_cls, kind):
    layer = synthetic.make_layer(layer_cls, kind)
    specs = prefill_workspace_specs(layer, synthetic.HEAD_DIM)
    assert layout_bytes(specs) == UPSTREAM_BYTES[kind.name]


# --- after lock_workspace(), every request _forward_prefill makes must fit ---

SMALL = dict(max_num_batched_tokens=1024, max_model_len=8192, window_size=128)


def _prefill_batches(max_tokens: int, max_len: int, window: int):
    """Batches (query_lens, seq_lens) at and near the chunk-plan bounds."""
    yield [max_tokens], [max_len]  # one full-length prefill, longest prefix
    yield [max_tokens], [max_tokens]  # no prefix
    yield [1] * 64, [max_len] * 64  # many one-token chunks, long prefixes
    yield [window] * (max_tokens // window), [max_len] * (max_tokens // window)
    gen = torch.Generator().manual_seed(0)
    for _ in range(12):
        n = int(torch.randint(1, 40, (1,), generator=gen))
        cuts = sorted(torch.randint(0, max_tokens, (n - 1,), generator=gen).tolist())
        q = [b - a for a, b in zip([0, *cuts], [*cuts, max_tokens])]
        q = [max(1, x) for x in q]
        while sum(q) > max_tokens:
            q[q.index(max(q))] -= 1
        s = [
            min(max_len, x + int(torch.randint(0, max_len, (1,), generator=gen)))
            for x in q
        ]
        yield q, s


def _swa_metadata(query_lens, seq_lens, window, max_len, max_tokens):
    from vllm.v1.attention.backends.mla.sparse_swa import DeepseekSparseSWAMetadata

    q = torch.tensor(query_lens, dtype=torch.int32)
    s = torch.tensor(seq_lens, dtype=torch.int32)
    starts = torch.zeros(len(query_lens) + 1, dtype=torch.int32)
    starts[1:] = torch.cumsum(q, 0)
    return DeepseekSparseSWAMetadata(
        block_table=torch.zeros((len(q), 1), dtype=torch.int32),
        slot_mapping=torch.zeros((int(q.sum()),), dtype=torch.int64),
        block_size=64,
        query_start_loc=starts,
        query_start_loc_cpu=starts,
        num_prefills=len(q),
        num_prefill_tokens=int(q.sum()),
        prefill_seq_lens=s,
        prefill_seq_lens_cpu=s,
        prefill_query_lens_cpu=q,
        prefill_gather_lens=q + torch.clamp(s - q, min=0, max=window - 1),
        prefill_window_size=window,
        prefill_max_model_len=max_len,
        prefill_max_num_batched_tokens=max_tokens,
    )


@pytest.mark.parametrize(
    "kind",
    [synthetic.SWA_ONLY_WITH_BUFFER, synthetic.SPARSE_C4, synthetic.SPARSE_C128],
    ids=lambda k: k.name,
)
def test_after_lock_every_prefill_request_fits(
    flashmla, layer_cls, load_plugins, cpu_workspace, monkeypatch, kind
):
    """Warm up (plugin), lock, then run vLLM's real ``_forward_prefill`` over
    batches at the chunk-plan bounds; only its kernels are stubbed. A request
    larger than the reservation would raise from the locked WorkspaceManager.

    SWA-only layers are warmed up *without* a buffer; their prefill runs with
    one, because vLLM's ``_forward_prefill`` itself asserts it (0.27.x and
    upstream alike) though it uses ``top_k = 0``: the reservation is the same.
    """
    load_plugins()
    requests = []
    monkeypatch.setattr(flashmla, "dequantize_and_gather_k_cache", lambda *a, **k: None)
    monkeypatch.setattr(flashmla, "flash_mla_sparse_fwd", lambda *a, **k: None)
    monkeypatch.setattr(
        flashmla, "combine_topk_swa_indices", lambda *a, out, **k: out
    )
    real_get = cpu_workspace.manager.get_simultaneous

    def recording_get(*specs):
        requests.append(layout_bytes(specs))
        return real_get(*specs)

    warmup_kind = (
        synthetic.SWA_ONLY_NO_BUFFER if kind.compress_ratio <= 1 else kind
    )
    warmup(layer_cls, warmup_kind, **SMALL)
    reserved = cpu_workspace.reserved_bytes()
    cpu_workspace.lock()
    monkeypatch.setattr(cpu_workspace.manager, "get_simultaneous", recording_get)

    layer = synthetic.make_layer(layer_cls, kind, **SMALL)
    tokens, max_len, window = (
        SMALL["max_num_batched_tokens"], SMALL["max_model_len"], SMALL["window_size"]
    )
    for query_lens, seq_lens in _prefill_batches(tokens, max_len, window):
        swa = _swa_metadata(query_lens, seq_lens, window, max_len, tokens)
        n = swa.num_prefill_tokens
        flash = types.SimpleNamespace(
            block_table=torch.zeros((len(query_lens), 1), dtype=torch.int32),
            block_size=256,
            c128a_prefill_topk_indices=torch.zeros(
                (n, synthetic.INDEX_TOPK), dtype=torch.int32
            ),
        )
        q = torch.zeros((n, 1, synthetic.HEAD_DIM), dtype=torch.bfloat16)
        layer._forward_prefill(
            q=q,
            positions=torch.zeros(n, dtype=torch.int64),
            compressed_k_cache=None if kind.compress_ratio <= 1 else layer.kv_cache,
            swa_k_cache=layer.swa_cache_layer.kv_cache,
            output=torch.empty_like(q),
            attn_metadata=None if kind.compress_ratio <= 1 else flash,
            swa_metadata=swa,
        )
    assert requests, "_forward_prefill made no workspace request"
    assert max(requests) <= reserved


def test_uninstrument_restores_the_original_function(
    layer_cls, load_plugins, stock_forward_mqa
):
    load_plugins()
    assert layer_cls.__dict__["forward_mqa"] is not stock_forward_mqa
    uninstrument()
    assert layer_cls.__dict__["forward_mqa"] is stock_forward_mqa


# --- the log line that says the fix mattered --------------------------------


def _info_rescued(caplog):
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "vllm.dspark_attn_plugin"
        and r.levelname == "INFO"
        and "warmed up without topk_indices_buffer" in r.getMessage()
    ]


def test_first_swa_only_warmup_without_buffer_says_so_once_per_process(
    layer_cls, load_plugins, cpu_workspace, caplog
):
    load_plugins()
    caplog.set_level("INFO", logger="vllm.dspark_attn_plugin")
    # Layers that stock vLLM warms up fine say nothing.
    warmup(layer_cls, synthetic.SWA_ONLY_WITH_BUFFER)
    warmup(layer_cls, synthetic.SPARSE_C4)
    assert _info_rescued(caplog) == []
    warmup(layer_cls, synthetic.SWA_ONLY_NO_BUFFER, prefix="model.layers.43.attn")
    warmup(layer_cls, synthetic.SWA_ONLY_NO_BUFFER, prefix="model.layers.44.attn")
    assert _info_rescued(caplog) == [
        "dspark-attn-plugin: model.layers.43.attn warmed up without "
        "topk_indices_buffer; stock vLLM would have stopped here "
        "(vllm-project/vllm#50615)"
    ]


def test_steady_path_never_logs_the_rescue(layer_cls, load_plugins, caplog):
    load_plugins()
    caplog.set_level("DEBUG", logger="vllm.dspark_attn_plugin")
    layer = synthetic.make_layer(layer_cls, synthetic.SWA_ONLY_NO_BUFFER)
    q, kv, positions, output = synthetic.qkv()
    with synthetic.idle_step_context([layer]):
        layer.forward_mqa(q, kv, positions, output)
    assert _info_rescued(caplog) == []
