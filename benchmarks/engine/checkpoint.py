"""A tiny DeepSeek-V4 checkpoint folder, made offline: config and tokenizer.

No weights: the engine is started with ``--load-format dummy``. The config
(``tiny_dsv4_config.json`` beside this file) is the smallest DeepSeek-V4 +
DSpark shape seen to start a real vLLM 0.26.0 engine on an H200. What fixes
its values, read off vLLM 0.26.0's source:

- ``head_dim`` 512, ``qk_rope_head_dim`` 64, ``index_head_dim`` 128: the
  only sizes FlashMLA sparse, the SWA backend and the compressor take;
- ``hc_mult`` 4 and ``hidden_size`` 2048: tilelang's small-token kernels
  tile 24 = 4 x 6 outputs and need at least 2048 to cover every split;
- ``q_lora_rank``, ``o_lora_rank`` 1024 and ``moe_intermediate_size`` 256:
  multiples of 128, as the block-FP8 linears and DeepGEMM need (N % 64,
  K % 128); ``expert_dtype`` fp8 with float32 scales keeps dummy weights
  finite;
- ``compress_ratios`` [0, 4, 128, 4, 0]: an SWA-only layer, a C4 layer with
  its indexer, a C128 layer; vLLM needs one ratio above 1 and one SWA-only
  entry (the DSpark layers are SWA-only and use the SWA-only scheduler that
  entry makes it build);
- ``n_mtp_layers`` 3, ``dspark_target_layer_ids`` [1, 2, 3],
  ``dspark_block_size`` 5, ``dspark_noise_token_id`` 1023 (the last id of
  the 1024-id vocabulary): the DSpark drafter's layers, the target layers it
  taps, and the noise token it embeds; 5 speculative tokens are then
  allowed;
- ``index_topk`` 512, ``sliding_window`` 128, 16 routed experts of which 6
  per token, one hash-routed layer: production values or the sizes the
  top-k and routing kernels support;
- ``rope_scaling`` yarn x4 over 1024 positions: 4096 positions, so
  ``max_model_len`` may be 1024 and more.

``gpu-bound`` (``GPU_BOUND`` below) is the same shape made large enough
that a decode step's time is the GPU's, not the host's: the tiny model
decodes a batch of 64 in a few milliseconds of GPU time, less than vLLM's
own per-step work on the host, so host jitter and scheduling dominated its
timings. Every value keeps the constraints above: ``hidden_size`` 4096 (a
multiple of 2048), 16 layers alternating C4 and C128 after the SWA-only
first one (an SWA-only entry last, as required), 64 routed experts of
1,024 (a size the routing kernel supports; a multiple of 128). About
10 GiB of FP8 expert weights per server: a decode step of 64 sequences
reads most of them (6 of 64 experts per token, 64 tokens), a few
milliseconds of H200 memory bandwidth per step, and three servers fit one
H200 beside their KV caches. The vocabulary stays 1,024 ids (the tokenizer
built here), so the logits stay small.

The tokenizer is built here with the ``tokenizers`` library: a byte-level
BPE of exactly ``vocab_size`` ids, 0 = BOS, 1 = EOS, 2 = PAD and the last id
the DSpark noise token, so every id a random-weight model emits decodes.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

CONFIG_PATH = Path(__file__).with_name("tiny_dsv4_config.json")

BOS, EOS, PAD = "<s>", "</s>", "<pad>"
NOISE = "<|dspark_noise|>"


# What the gpu-bound size changes in the tiny config (reasons: above).
GPU_BOUND = {
    "hidden_size": 4096,
    "num_hidden_layers": 16,
    "compress_ratios": [0] + [4, 128] * 7 + [4, 0],
    "dspark_target_layer_ids": [13, 14, 15],
    "n_routed_experts": 64,
    "moe_intermediate_size": 1024,
}
SIZES = ("tiny", "gpu-bound")


def tiny_config() -> dict:
    return json.loads(CONFIG_PATH.read_text(encoding="utf-8"))


def config_for(size: str = "tiny") -> dict:
    """The checkpoint's config.json for ``size`` (one of ``SIZES``)."""
    if size not in SIZES:
        raise ValueError(f"unknown model size {size!r}; choose from {', '.join(SIZES)}")
    config = tiny_config()
    if size == "gpu-bound":
        config.update(GPU_BOUND)
    return config


def _byte_level_vocab(size: int) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Specials, the 256 byte symbols, then two-symbol merges up to ``size - 1``
    ids; the noise token takes the last id."""
    from tokenizers import pre_tokenizers

    vocab = {BOS: 0, EOS: 1, PAD: 2}
    symbols = sorted(pre_tokenizers.ByteLevel.alphabet())
    for symbol in symbols:
        vocab[symbol] = len(vocab)
    # Merges of frequent symbols ("Ġ" is the byte-level space).
    common = ["Ġ", *"etaoinshrdlucmfwypvbgkjqxz0123456789"]
    merges = []
    for left, right in itertools.product(common, common):
        if len(vocab) >= size - 1:
            break
        merges.append((left, right))
        vocab[left + right] = len(vocab)
    if len(vocab) != size - 1:
        raise ValueError(f"cannot fill a vocabulary of {size} ids")
    vocab[NOISE] = size - 1
    return vocab, merges


def write_tokenizer(folder: Path, vocab_size: int, model_max_length: int) -> None:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    vocab, merges = _byte_level_vocab(vocab_size)
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(
        [AddedToken(t, special=True) for t in (BOS, EOS, PAD, NOISE)]
    )
    if tokenizer.get_vocab_size(with_added_tokens=True) != vocab_size:
        raise ValueError("tokenizer size does not match vocab_size")
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": BOS,
                "eos_token": EOS,
                "pad_token": PAD,
                "additional_special_tokens": [NOISE],
                "model_max_length": model_max_length,
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )


def write_checkpoint(folder: Path, size: str = "tiny") -> Path:
    """Write config.json (of ``size``) and the tokenizer into ``folder``;
    return it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = config_for(size)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    write_tokenizer(folder, config["vocab_size"], config["max_position_embeddings"])
    return folder
