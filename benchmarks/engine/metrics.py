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
