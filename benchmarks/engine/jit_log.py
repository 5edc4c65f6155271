"""Kernels a ``vllm serve`` server compiled or first loaded while serving,
read from its log with their times.

vLLM's JIT monitor warns "<kind> JIT compilation during inference: NAME"
(its own words: "This causes a latency spike"), and TileLang logs
"begins to compile kernel `NAME`" for each compile. A timed batch that
overlaps one of them is slower for a reason that is not the code under
test: the evidence run marks such batches and reports its cost intervals
with and without the rounds that had one.

Times in those lines are the machine's local time, as ``time.time()`` read
through ``datetime.fromtimestamp`` on the same machine: the harness and the
servers share it. The JIT monitor's lines carry no year: the batch's is used.
"""

from __future__ import annotations

import datetime
import re

_MONITOR = re.compile(
    r"(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d) \[jit_monitor\.py:\d+\] "
    r".*JIT compilation during inference: (\w+(?:\.\w+)*)")
_TILELANG = re.compile(
    r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\s+\[TileLang:[^\]]*\]"
    r".*begins to compile kernel `([^`]+)`")


def events(text: str, year: int) -> list[tuple[float, str]]:
    """(local time as a Unix timestamp, kernel) for every compile or first
    load the log reports during serving, in log order."""
    out = []
    for line in text.splitlines():
        m = _MONITOR.search(line)
        if m:
            month, day, hh, mm, ss = map(int, m.groups()[:5])
            when = datetime.datetime(year, month, day, hh, mm, ss)
            out.append((when.timestamp(), m.group(6)))
            continue
        m = _TILELANG.search(line)
        if m:
            when = datetime.datetime(*map(int, m.groups()[:6]))
            out.append((when.timestamp(), m.group(7)))
    return out


def during(found: list[tuple[float, str]], began: float, ended: float) -> list[str]:
    """The kernels of ``found`` logged while a batch ran from ``began`` to
    ``ended`` (Unix times); the log's whole seconds widen the window by one
    second on each side."""
    return [name for when, name in found if began - 1.0 <= when <= ended + 1.0]
