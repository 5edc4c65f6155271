"""One timed round per server with vLLM's own serving benchmark,
``vllm bench serve``: the client operators already use to compare servers.

The command is the one a user types against a running server
(:func:`command`); the harness runs that same command's code in its own
process (:func:`run`: ``vllm.benchmarks.serve``'s argument parser and
``main``), because a new ``vllm bench serve`` process imports vLLM again
each round, seconds every time. Its result is the JSON that
``--save-result`` writes; :func:`parse_printed` reads the table it prints,
the numbers a user compares.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

# The figures read from each round, by their key in --save-result's JSON.
FIGURES = ("mean_tpot_ms", "median_tpot_ms", "mean_itl_ms", "median_itl_ms",
           "mean_ttft_ms", "median_ttft_ms", "output_throughput", "duration", "completed", "failed",
           "total_output_tokens")

# A line of the table `vllm bench serve` prints: "Mean TPOT (ms):   12.34".
_PRINTED = re.compile(r"^(?P<label>[A-Za-z][A-Za-z0-9 ()/.\-]*?):\s+(?P<value>-?[0-9][0-9.]*)\s*$")
_PRINTED_KEYS = {
    "Successful requests": "completed",
    "Failed requests": "failed",
    "Benchmark duration (s)": "duration",
    "Total generated tokens": "total_output_tokens",
    "Output token throughput (tok/s)": "output_throughput",
    "Mean TPOT (ms)": "mean_tpot_ms",
    "Median TPOT (ms)": "median_tpot_ms",
    "Mean ITL (ms)": "mean_itl_ms",
    "Median ITL (ms)": "median_itl_ms",
    "Mean TTFT (ms)": "mean_ttft_ms",
    "Median TTFT (ms)": "median_ttft_ms",
}


def command(base_url: str, model: str, tokenizer: Path, *, served_model_name: str,
            num_prompts: int, input_len: int, output_len: int, seed: int,
            result_dir: Path | None = None, result_filename: str | None = None) -> list[str]:
    """``vllm bench serve``'s arguments for one round: the random dataset
    (fixed seed, fixed lengths), every request at once, ``--ignore-eos`` so
    each request makes exactly ``output_len`` tokens, greedy."""
    argv = [
        "bench", "serve", "--backend", "vllm", "--base-url", base_url,
        "--model", model, "--served-model-name", served_model_name,
        "--tokenizer", str(tokenizer),
        "--dataset-name", "random", "--random-input-len", str(input_len),
        "--random-output-len", str(output_len), "--random-range-ratio", "0",
        "--num-prompts", str(num_prompts), "--seed", str(seed),
        "--request-rate", "inf", "--ignore-eos", "--temperature", "0",
        "--percentile-metrics", "ttft,tpot,itl", "--metric-percentiles", "50,90,99",
        "--disable-tqdm",
    ]
    if result_dir is not None:
        argv += ["--save-result", "--result-dir", str(result_dir),
                 "--result-filename", result_filename or "bench.json"]
    return argv


def shell_line(argv: list[str]) -> str:
    """The command as a user types it."""
    import shlex

    return "vllm " + " ".join(shlex.quote(a) for a in argv)


def run(argv: list[str]) -> tuple[dict, str]:
    """``vllm bench serve`` in this process: (its result, what it printed)."""
    from vllm.benchmarks import serve as bench  # the Python that runs the harness has vLLM

    parser = _parser()
    bench.add_cli_args(parser)
    args = parser.parse_args(argv[2:])  # after "bench serve"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        result = bench.main(args)
    return figures(result), printed.getvalue()


def _parser():
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # older layouts
        from vllm.utils import FlexibleArgumentParser
    return FlexibleArgumentParser(prog="vllm bench serve")


def figures(result: dict) -> dict:
    """The figures of one round, from ``--save-result``'s JSON (or ``main``'s
    return value, the same dictionary)."""
    return {k: result[k] for k in FIGURES if k in result}


def parse_printed(text: str) -> dict:
    """The figures of the table ``vllm bench serve`` prints."""
    out = {}
    for line in text.splitlines():
        m = _PRINTED.match(line.strip())
        if m and m.group("label") in _PRINTED_KEYS:
            value = float(m.group("value"))
            key = _PRINTED_KEYS[m.group("label")]
            out[key] = int(value) if key in ("completed", "failed", "total_output_tokens") else value
    return out


def read_saved(path: Path) -> dict:
    return figures(json.loads(Path(path).read_text(encoding="utf-8")))
