"""What ``dspark-attn-plugin diagnose`` costs on a large server log.

    python benchmarks/bench_diagnose.py [--mb 100] [--runs 3] [--json]

Builds two logs of about ``--mb`` MB each from the real server logs committed
under ``benchmarks/results/``: ``healthy`` (a healthy server's log repeated,
the #50615 crash at the end, so that the whole log must be read) and
``crashes`` (the #50615 crash log repeated: a tracebacks-heavy log of many
restarts), and ``crashes.gz``, the same compressed (size: uncompressed). Then runs the command as a user would, ``dspark-attn-plugin
diagnose LOG``, ``--runs`` times each in fresh processes. Reports the median wall time, the throughput and the largest
resident memory of the child (``ru_maxrss``), next to that of a bare Python
start, so that what the log adds shows. Target: seconds, not minutes, for
100 MB; memory that does not grow with the log.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "engine-e2e-2026-11-30"


# Runs a command and prints its exit status and peak RSS (KiB): a process
# of its own per measurement, since ru_maxrss of children only grows.
_MEASURE = (
    "import resource, subprocess, sys\n"
    "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
    "print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def _child_run(cmd: list[str]) -> tuple[float, int, int]:
    """Wall seconds, exit status and peak RSS (KiB) of one child process."""
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _MEASURE, *cmd], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    rc, kib = out.stdout.split()
    return seconds, int(rc), int(kib)


def build_log(path: Path, megabytes: int, kind: str = "healthy") -> int:
    healthy = (RESULTS / "run-D-cost-plugin-0.log").read_bytes()
    crash = (RESULTS / "run-C-standin-stock.log").read_bytes()
    block = healthy if kind == "healthy" else crash
    target = megabytes * 1024 * 1024
    with path.open("wb") as f:
        written = 0
        while written < target - len(crash):
            f.write(block)
            written += len(block)
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
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        _, _, bare_kib = _child_run([sys.executable, "-c", "pass"])
        for kind in ("healthy", "crashes", "crashes.gz"):
            log = Path(tmp) / f"{kind}.log"
            size = build_log(log, args.mb, kind.removesuffix(".gz"))
            if kind.endswith(".gz"):  # a rotated log: read through gzip
                packed = Path(tmp) / f"{kind}.1"
                with log.open("rb") as src, gzip.open(packed, "wb", compresslevel=1) as dst:
                    shutil.copyfileobj(src, dst)
                log.unlink()
                log = packed
            times, codes, peak = [], set(), 0
            for _ in range(args.runs):
                seconds, code, kib = _child_run([cli, "diagnose", str(log)])
                times.append(seconds)
                codes.add(code)
                peak = max(peak, kib)
            log.unlink()
            median = statistics.median(times)
            rows.append({
                "log": kind,
                "log_bytes": size,
                "runs": args.runs,
                "seconds": [round(t, 2) for t in times],
                "median_s": round(median, 2),
                "mb_per_s": round(size / 1e6 / median, 1),
                "exit_codes": sorted(codes),
                "peak_rss_mib": round(peak / 1024, 1),
            })
    result = {
        "rows": rows,
        "bare_python_rss_mib": round(bare_kib / 1024, 1),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
    }
    if args.json:
        print(json.dumps(result))
    else:
        for row in rows:
            print(f"diagnose on {row['log_bytes'] / 1e6:.0f} MB ({row['log']}): median "
                  f"{row['median_s']:.2f} s over {args.runs} runs ({row['mb_per_s']} MB/s), "
                  f"exit {row['exit_codes']}, peak RSS {row['peak_rss_mib']} MiB (bare Python "
                  f"{result['bare_python_rss_mib']} MiB)")
    return 0 if all(row["exit_codes"] == [1] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
