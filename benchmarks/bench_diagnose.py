"""What ``dspark-attn-plugin diagnose`` costs on a large server log.

    python benchmarks/bench_diagnose.py [--mb 100] [--runs 3] [--json]

Builds a log of about ``--mb`` MB from the real server logs committed under
``benchmarks/results/`` (a healthy server's log repeated, the #50615 crash
at the end, so that the whole log must be read), then runs the command as a
user would, ``dspark-attn-plugin diagnose LOG``, ``--runs`` times in fresh
processes. Reports the median wall time, the throughput and the largest
resident memory of the child (``ru_maxrss``), next to that of a bare Python
start, so that what the log adds shows. Target: seconds, not minutes, for
100 MB; memory that does not grow with the log.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "engine-e2e-2026-11-30"


def _child_run(cmd: list[str]) -> tuple[float, int, int]:
    """Wall seconds, exit status and peak RSS (KiB) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    # ru_maxrss of children is the largest so far: run the smaller first.
    return seconds, proc.returncode, max(after, before)


def build_log(path: Path, megabytes: int) -> int:
    healthy = (RESULTS / "run-D-cost-plugin-0.log").read_bytes()
    crash = (RESULTS / "run-C-standin-stock.log").read_bytes()
    target = megabytes * 1024 * 1024
    with path.open("wb") as f:
        written = 0
        while written < target - len(crash):
            f.write(healthy)
            written += len(healthy)
        f.write(crash)
        written += len(crash)
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    cli = shutil.which("dspark-attn-plugin", path=os.path.dirname(sys.executable)) or shutil.which(
        "dspark-attn-plugin"
    )
    if cli is None:
        print("bench_diagnose: the dspark-attn-plugin command is not installed", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "server.log"
        size = build_log(log, args.mb)
        _, _, bare_kib = _child_run([sys.executable, "-c", "pass"])
        times, codes, peak = [], set(), 0
        for _ in range(args.runs):
            seconds, code, kib = _child_run([cli, "diagnose", str(log)])
            times.append(seconds)
            codes.add(code)
            peak = max(peak, kib)
    median = statistics.median(times)
    result = {
        "log_bytes": size,
        "runs": args.runs,
        "seconds": [round(t, 2) for t in times],
        "median_s": round(median, 2),
        "mb_per_s": round(size / 1e6 / median, 1),
        "exit_codes": sorted(codes),
        "peak_rss_mib": round(peak / 1024, 1),
        "bare_python_rss_mib": round(bare_kib / 1024, 1),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"diagnose on {size / 1e6:.0f} MB: median {median:.2f} s over {args.runs} runs "
              f"({result['mb_per_s']} MB/s), exit {sorted(codes)}, peak RSS "
              f"{result['peak_rss_mib']} MiB (bare Python {result['bare_python_rss_mib']} MiB)")
    return 0 if codes == {1} else 1


if __name__ == "__main__":
    sys.exit(main())
