"""What a ``vllm serve`` server's ``/metrics`` page says, as data. (Its log
is read by the plugin's own reader: ``dspark_attn_plugin.log_reader``.)"""

from __future__ import annotations

SPEC_COUNTERS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens")


def spec_decode_counters(metrics: str) -> dict[str, float]:
    """``vllm:spec_decode_<name>`` counters from a Prometheus text page,
    summed over their labels (``_total`` samples; ``_created`` ignored)."""
    totals = {name: 0.0 for name in SPEC_COUNTERS}
    seen = set()
    for line in metrics.splitlines():
        if not line.startswith("vllm:spec_decode_"):
            continue
        name_labels, _, value = line.rpartition(" ")
        name = name_labels.split("{", 1)[0][len("vllm:spec_decode_"):]
        if name.endswith("_created"):
            continue
        name = name.removesuffix("_total")
        if name in totals:
            totals[name] += float(value)
            seen.add(name)
    return {name: totals[name] for name in SPEC_COUNTERS if name in seen}


# Each request's mean time per output token (vLLM's histogram, in seconds).
TPOT = "vllm:request_time_per_output_token_seconds"


def histogram(metrics: str, name: str) -> dict[str, float]:
    """``{"sum": ..., "count": ...}`` of the histogram ``name`` on a
    Prometheus text page, summed over its labels (empty when absent)."""
    out: dict[str, float] = {}
    for line in metrics.splitlines():
        if not line.startswith(name + "_"):
            continue
        name_labels, _, value = line.rpartition(" ")
        part = name_labels.split("{", 1)[0][len(name) + 1:]
        if part in ("sum", "count"):
            out[part] = out.get(part, 0.0) + float(value)
    return out
