"""The warmup dummy run of real vLLM 0.27.1 layers, without and with the plugin."""

from __future__ import annotations

import types

import pytest
import torch

from dspark_attn_plugin import patch, synthetic, uninstrument

import flashmla_variants as variants

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


def _failure_site(excinfo) -> tuple[str, int]:
    entry = excinfo.traceback[-1]
    return str(entry.path), entry.lineno


def test_plugin_keeps_vllms_own_assertion_for_sparse_layers_without_buffer(
    flashmla, layer_cls, load_plugins, cpu_workspace
):
    sparse_no_buffer = synthetic.LayerKind("sparse_no_buffer", 4, False)
    with pytest.raises(AssertionError) as stock:
        warmup(layer_cls, sparse_no_buffer)
    with pytest.raises(AssertionError) as swa_stock:
        warmup(layer_cls, synthetic.SWA_ONLY_NO_BUFFER)
    cpu_workspace.reset()
    load_plugins()
    assert patch.is_patched(flashmla)
    with pytest.raises(AssertionError) as mine:
        warmup(layer_cls, sparse_no_buffer)
    # The same statement of vLLM's file as stock: the assertion #50298 added.
    assert _failure_site(mine) == _failure_site(stock) == _failure_site(swa_stock)
    assert _failure_site(mine)[0] == flashmla.__file__
    assert "assert self.topk_indices_buffer is not None" in str(mine.traceback[-1].statement)


def test_without_workspace_manager_the_patched_warmup_fails_as_stock_does(
    layer_cls, load_plugins
):
    """The reservation is vLLM's own code: with no WorkspaceManager it fails
    in vLLM's way for every layer, with or without the plugin."""
    from vllm.v1.worker import workspace

    workspace.reset_workspace_manager()
    with pytest.raises(AssertionError, match="WorkspaceManager not initialized"):
        warmup(layer_cls, synthetic.SWA_ONLY_WITH_BUFFER)
    load_plugins()
    with pytest.raises(AssertionError, match="WorkspaceManager not initialized"):
        warmup(layer_cls, synthetic.SWA_ONLY_NO_BUFFER)


# --- the steady path: vLLM's dispatch, unchanged ------------------------------


def _dispatch(layer, forward_mqa, step):
    """What ``forward_mqa`` hands ``_forward_prefill`` / ``_forward_decode``
    on a mixed batch: tensors by storage, offset, shape and stride."""
    calls = []
    layer_metadata = step["layer_metadata"]

    def describe(value):
        if value is layer_metadata:
            return ("the layer's metadata",)
        return _describe(value)

    def recorder(name):
        def record(**kwargs):
            calls.append((name, {k: describe(v) for k, v in sorted(kwargs.items())}))
        return record

    layer._forward_prefill = recorder("prefill")
    layer._forward_decode = recorder("decode")
    q, kv, positions, output = synthetic.qkv(num_tokens=step["tokens"])
    with synthetic.step_context(
        [layer],
        num_decodes=step["decodes"],
        num_decode_tokens=step["decode_tokens"],
        num_prefills=step["prefills"],
        num_prefill_tokens=step["tokens"] - step["decode_tokens"],
        layer_metadata=step["layer_metadata"],
    ):
        forward_mqa(layer, q, kv, positions, output)
    inputs = {"q": q, "positions": positions, "output": output}
    return calls, {k: _describe(v) for k, v in inputs.items()}


def _describe(value):
    if isinstance(value, torch.Tensor):
        return ("tensor", value.untyped_storage().data_ptr(), value.storage_offset(),
                tuple(value.shape), value.stride())
    if value is None or isinstance(value, (bool, int)):
        return ("value", value)
    return ("object", type(value).__name__)


@pytest.mark.parametrize("kind", synthetic.LAYER_KINDS, ids=lambda k: k.name)
@pytest.mark.parametrize(
    "decodes, decode_tokens, prefills, tokens",
    [(3, 3, 2, 11), (0, 0, 1, 6), (4, 8, 0, 8)],
    ids=["mixed", "prefill-only", "decode-only"],
)
def test_steady_dispatch_is_vllms_with_and_without_the_plugin(
    layer_cls, load_plugins, stock_forward_mqa, kind, decodes, decode_tokens, prefills, tokens
):
    layer = synthetic.make_layer(layer_cls, kind)
    step = dict(decodes=decodes, decode_tokens=decode_tokens, prefills=prefills,
                tokens=tokens, layer_metadata=object())
    stock_calls, stock_inputs = _dispatch(layer, stock_forward_mqa, step)
    load_plugins()
    patched = layer_cls.__dict__["forward_mqa"]
    assert patched is not stock_forward_mqa
    calls, inputs = _dispatch(layer, patched, step)

    expected = [n for n, c in (("prefill", prefills), ("decode", decodes)) if c]
    assert [name for name, _ in stock_calls] == expected
    # Same calls, same arguments: the same slices of different tensors.
    def by_input(calls_, inputs_):
        """Tensors named by the input they slice (q, positions, output)."""
        ptrs = {v[1]: k for k, v in inputs_.items()}
        return [
            (name, {k: (v[0], ptrs.get(v[1], v[1]), *v[2:]) if v[0] == "tensor" else v
                    for k, v in kwargs.items()})
            for name, kwargs in calls_
        ]
    assert by_input(calls, inputs) == by_input(stock_calls, stock_inputs)


# --- a fork's own sizing -------------------------------------------------------


def test_on_a_fork_the_plugin_reserves_the_forks_own_swa_workspace(
    tmp_path, cpu_workspace, flashmla
):
    """A fork whose warmup sizes its gather buffer differently: the plugin
    reserves for an SWA-only layer without a buffer exactly what that fork's
    own warmup reserves with top_k = 0 (for a layer that has a buffer)."""
    source = flashmla.__loader__.get_source(flashmla.__name__)
    fork = variants.load(variants.larger_gather(source), tmp_path)
    cls = fork.DeepseekV4FlashMLAAttention
    warmup(cls, synthetic.SWA_ONLY_WITH_BUFFER)
    forks_own = cpu_workspace.reserved_bytes()
    assert forks_own != UPSTREAM_BYTES["swa_only_with_buffer"]

    cpu_workspace.reset()
    assert patch.apply(fork) is True
    _, output = warmup(cls, synthetic.SWA_ONLY_NO_BUFFER)
    assert not output.any()
    assert cpu_workspace.reserved_bytes() == forks_own


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
    real_ensure = cpu_workspace.manager._ensure_workspace_size

    def recording_ensure(required_bytes):
        requests.append(required_bytes)
        return real_ensure(required_bytes)

    warmup_kind = (
        synthetic.SWA_ONLY_NO_BUFFER if kind.compress_ratio <= 1 else kind
    )
    warmup(layer_cls, warmup_kind, **SMALL)
    reserved = cpu_workspace.reserved_bytes()
    cpu_workspace.lock()
    monkeypatch.setattr(cpu_workspace.manager, "_ensure_workspace_size", recording_ensure)

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
