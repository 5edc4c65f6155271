"""``make fuzz``: the generated-variant check of ``test_generated_variants``,
long, with its tally written as JSON.

    python tests/fuzz_variants.py --examples 5000 --json benchmarks/results/fuzz-DATE.json

Each example is a generated variant of vLLM 0.27.1's or 0.28.0's warmup
branch, executed on synthetic layers (``generated_variants.observe``). The
tally: verdicts, how many the edit applies to, how many ``unknown`` variants
in fact warm up SWA-only layers without the buffer (false alarms), and every
disagreement with what ran (must be none). Exit 0 when there is none.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the tally here")
    args = parser.parse_args(argv)

    import torch
    from hypothesis import HealthCheck, given, seed, settings
    from vllm.models.deepseek_v4.nvidia import flashmla
    from vllm.v1.worker import workspace

    import generated_variants as gen
    from dspark_attn_plugin import __version__, synthetic

    torch.accelerator.empty_cache = lambda: None  # no accelerator here (test-only stub)
    workspace.init_workspace_manager(torch.device("cpu"))
    logging.disable(logging.WARNING)
    source = flashmla.__loader__.get_source(flashmla.__name__)
    folder = Path(tempfile.mkdtemp(prefix="dspark-fuzz-"))
    tally = collections.Counter()
    problems = []

    @seed(args.seed)
    @settings(max_examples=args.examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(variant=gen.generated())
    def run(variant):
        obs = gen.observe(variant, source, folder, synthetic)
        tally["examples"] += 1
        tally[f"verdict {obs.verdict}"] += 1
        tally["edit applies"] += obs.plan_applies
        tally["runtime patched"] += obs.runtime_patched
        if obs.verdict == "unknown" and not obs.lacks_buffer(obs.runs):
            tally["unknown but starts without the buffer (false alarm)"] += 1
        # Module-level shapes: plain spellings apart from adversarial ones.
        kind = "plain" if variant.module is None or gen.MODULE_SHAPES[variant.module].plain \
            else "adversarial"
        tally[f"{kind} module shape"] += 1
        if not obs.lacks_buffer(obs.runs):
            tally[f"{kind} module shape, starts without the buffer"] += 1
            tally[f"{kind} module shape, starts without the buffer, read unknown"] += (
                obs.verdict == "unknown")
        if obs.verdict == "unknown" and obs.lacks_buffer(obs.runs):
            tally["unknown and needs the buffer"] += 1
        if obs.verdict == "affected" and obs.runs["swa0"] is None and obs.runs["swa1"] is None:
            tally["affected but starts (outside code raised first)"] += 1
        if gen.has_later_construct(variant):
            later = "with a comprehension, star, getattr default, format spec, suppress or finally"
            tally[later] += 1
            tally[f"{later}, read {obs.verdict}"] += 1
            tally[f"{later}, starts without the buffer"] += not obs.lacks_buffer(obs.runs)
        found = gen.problems(obs)
        if found and len(problems) < 20:
            problems.append({"variant": list(variant.block), "base": variant.base,
                             "mode": variant.mode, "module": variant.module,
                             "problems": found})
        tally["problems"] += bool(found)

    start = time.monotonic()
    run()
    unknown = tally["verdict unknown"]
    report = {
        "what": "generated flashmla variants executed on synthetic layers (tests/fuzz_variants.py)",
        "date": time.strftime("%Y-%m-%d"),
        "plugin": __version__,
        "vllm": __import__("vllm").__version__,
        "python": platform.python_version(),
        "seed": args.seed,
        "seconds": round(time.monotonic() - start, 1),
        "tally": dict(sorted(tally.items())),
        "false_alarm_rate": {
            kind: round(tally[f"{kind} module shape, starts without the buffer, read unknown"]
                        / tally[f"{kind} module shape, starts without the buffer"], 3)
            if tally[f"{kind} module shape, starts without the buffer"] else 0.0
            for kind in ("plain", "adversarial")
        },
        "false_alarm_rate_of_unknown": round(
            tally["unknown but starts without the buffer (false alarm)"] / unknown, 3
        ) if unknown else 0.0,
        "problems": problems,
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    return 1 if tally["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
