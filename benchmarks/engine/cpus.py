"""Each evidence server on CPUs of its own, and the benchmark client on others
(``--evidence-cpus split``).

Why: at the gpu-bound size a decode step of 64 requests took 5 to 11 ms, of
which the GPU's part is a few ms; the rest is host work in the server's
processes (scheduler, output processing, streaming) and in the client that
reads 64 streams at once. Left to the kernel's scheduler, those busy
processes may share a core, or its SMT sibling, with each other from one
batch to the next. Split, each server's processes (API server, engine core
and whatever they start: children inherit the affinity) run on whole
physical cores that nothing else of the run uses.

Only the standard library (the harness imports no vLLM here).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# The command's first words, before the server's own: sets the affinity,
# then becomes the server (the same process: its group, its signals).
_PIN = ("import os, sys; os.sched_setaffinity(0, [int(c) for c in sys.argv[1].split(',')]); "
        "os.execvp(sys.argv[2], sys.argv[2:])")


def cores(cpus: list[int], sys_root: Path = Path("/sys/devices/system/cpu")) -> list[list[int]]:
    """``cpus`` grouped by physical core (SMT siblings together, as the
    kernel's topology lists them), in order of each core's lowest CPU; a CPU
    whose topology cannot be read is a core of its own."""
    groups: dict[tuple[int, ...], list[int]] = {}
    wanted = set(cpus)
    for cpu in sorted(wanted):
        try:
            text = (sys_root / f"cpu{cpu}" / "topology" / "thread_siblings_list").read_text()
            siblings = tuple(sorted(c for c in _cpu_list(text) if c in wanted)) or (cpu,)
        except (OSError, ValueError):
            siblings = (cpu,)
        groups.setdefault(siblings, list(siblings))
    return sorted(groups.values(), key=min)


def _cpu_list(text: str) -> list[int]:
    """The kernel's CPU list syntax: ``0-3,8,10-11``."""
    out: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def split(groups: list[list[int]], servers: list[str]) -> dict:
    """Whole cores dealt out in blocks, one per server in ``servers``' order
    and one for the client, which also takes what does not divide evenly.
    ValueError when there are fewer cores than blocks."""
    blocks = len(servers) + 1
    per = len(groups) // blocks
    if per < 1:
        raise ValueError(f"{len(groups)} physical core(s) cannot give {len(servers)} servers "
                         "and the client one each")
    plan = {name: sorted(c for g in groups[k * per:(k + 1) * per] for c in g)
            for k, name in enumerate(servers)}
    client = sorted(c for g in groups[len(servers) * per:] for c in g)
    return {"servers": plan, "client": client, "cores_per_server": per,
            "threads_per_core": max(len(g) for g in groups)}


def pinned(command: list[str], cpus: list[int]) -> list[str]:
    """``command`` run with its affinity set to ``cpus`` (exec'd in place)."""
    return [sys.executable, "-c", _PIN, ",".join(map(str, cpus)), *command]


def available() -> list[int]:
    """The CPUs this process may run on."""
    return sorted(os.sched_getaffinity(0))


def pin_self(cpus: list[int]) -> None:
    """This process (the harness, whose thread runs `vllm bench serve`) on ``cpus``."""
    os.sched_setaffinity(0, cpus)
