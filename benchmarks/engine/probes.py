"""What the machine did while one timed batch ran: the GPU's clocks, power
and load (``nvidia-smi``, sampled in the background), the CPU time of the
server's processes and of the benchmark client; and, over a phase's rounds,
how each of them moves with a batch's time per output token.

A batch's TPOT varies by 15 to 20 % on one server with the same prompts.
These readings say what varies with it: a GPU running at a lower clock, a
server or client short of CPU, or none of them.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import threading
import time

# nvidia-smi's fields, in the order asked; the first is required, the rest
# read where the driver has them.
GPU_FIELDS = ("clocks.sm", "clocks.mem", "power.draw", "utilization.gpu", "temperature.gpu")
SAMPLE_MS = 100


def parse_gpu_line(line: str) -> dict | None:
    """One line of ``nvidia-smi --query-gpu=GPU_FIELDS --format=csv,noheader,nounits``
    (the first GPU's): numbers by field, None for what it could not read."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) < len(GPU_FIELDS):
        return None
    out = {}
    for name, text in zip(GPU_FIELDS, parts):
        try:
            out[name] = float(text)
        except ValueError:
            out[name] = None  # "[N/A]", "[Not Supported]"
    return out if out["clocks.sm"] is not None else None


class GpuSampler:
    """``nvidia-smi`` every ``SAMPLE_MS`` in a child process; each line is
    stamped with the wall clock when it arrives. Without nvidia-smi it
    samples nothing and ``problem`` says why."""

    def __init__(self, command: list[str] | None = None):
        self.samples: list[tuple[float, dict]] = []
        self.problem: str | None = None
        self._lock = threading.Lock()
        self._proc = None
        if command is None:
            exe = shutil.which("nvidia-smi")
            if exe is None:
                self.problem = "no nvidia-smi on PATH: GPU clocks not sampled"
                return
            command = [exe, "--query-gpu=" + ",".join(GPU_FIELDS), "--id=0",
                       "--format=csv,noheader,nounits", f"--loop-ms={SAMPLE_MS}"]
        try:
            self._proc = subprocess.Popen(command, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, text=True)
        except OSError as exc:
            self.problem = f"GPU clocks not sampled: {exc}"
            return
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self._proc.stdout:
            sample = parse_gpu_line(line)
            if sample is not None:
                with self._lock:
                    self.samples.append((time.time(), sample))

    def during(self, began: float, ended: float) -> dict | None:
        """The GPU over [began, ended]: mean and lowest SM clock, mean memory
        clock, power and load, and the number of samples; None when none
        fell in it."""
        with self._lock:
            inside = [s for t, s in self.samples if began <= t <= ended]
        if not inside:
            return None

        def mean(field):
            values = [s[field] for s in inside if s.get(field) is not None]
            return round(sum(values) / len(values), 1) if values else None

        return {"samples": len(inside), "sm_mhz_mean": mean("clocks.sm"),
                "sm_mhz_min": min(s["clocks.sm"] for s in inside),
                "mem_mhz_mean": mean("clocks.mem"), "power_w_mean": mean("power.draw"),
                "util_pct_mean": mean("utilization.gpu"), "temp_c_mean": mean("temperature.gpu")}

    def stop(self) -> str | None:
        """Ends the sampling; returns why nothing was sampled (nvidia-smi
        missing, failing to start, or running without one readable line),
        None when samples were taken."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        if self.problem is None and self._proc is not None:
            self._thread.join(timeout=5)
            with self._lock:
                if not self.samples:
                    self.problem = ("nvidia-smi gave no readable sample "
                                    f"(exit code {self._proc.poll()}): GPU clocks not sampled")
        return self.problem


def group_cpu_seconds(pgid: int, proc_root: str = "/proc") -> float | None:
    """User + system CPU seconds of process group ``pgid`` (a server and the
    processes it started: the API server, the engine core, workers): each live
    member's own time plus that of the children it has waited for, so a helper
    process that ends and is reaped inside the group keeps counting (the sum
    never drops). None when /proc cannot be read."""
    try:
        entries = os.listdir(proc_root)
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(proc_root, entry, "stat"), encoding="ascii",
                      errors="replace") as f:
                stat = f.read()
        except OSError:
            continue  # gone since the listing
        # Fields after the command name, which is in parentheses and may hold spaces.
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 14 and fields[2] == str(pgid):
            # utime, stime, cutime, cstime (stat fields 14-17).
            total += sum(int(x) for x in fields[11:15])
    return total / ticks


class Probe:
    """Readings taken around one batch: ``before`` then ``after``."""

    def __init__(self, gpu: GpuSampler | None):
        self.gpu = gpu

    def before(self, pgid: int | None) -> dict:
        return {"t": time.time(), "client": time.process_time(),
                "server": group_cpu_seconds(pgid) if pgid else None}

    def after(self, start: dict, pgid: int | None) -> dict:
        end = self.before(pgid)
        seconds = end["t"] - start["t"]
        out = {"client_cpu_s": round(end["client"] - start["client"], 3),
               "server_cpu_s": (round(end["server"] - start["server"], 3)
                                if end["server"] is not None and start["server"] is not None
                                else None)}
        out["gpu"] = self.gpu.during(start["t"], end["t"]) if self.gpu else None
        out["seconds"] = round(seconds, 3)
        return out


# What a batch's TPOT is set against: the name in the report and how to read it off a batch.
FACTORS = {
    "gpu_sm_mhz": lambda b: ((b.get("machine") or {}).get("gpu") or {}).get("sm_mhz_mean"),
    "gpu_power_w": lambda b: ((b.get("machine") or {}).get("gpu") or {}).get("power_w_mean"),
    "gpu_util_pct": lambda b: ((b.get("machine") or {}).get("gpu") or {}).get("util_pct_mean"),
    "server_cpu_s": lambda b: (b.get("machine") or {}).get("server_cpu_s"),
    "client_cpu_s": lambda b: (b.get("machine") or {}).get("client_cpu_s"),
    "ttft_ms": lambda b: b.get("mean_ttft_ms"),
}


def pearson(xs: list[float], ys: list[float]) -> float | None:
    """Pearson's r; None for fewer than 3 pairs or a constant series."""
    if len(xs) < 3 or len(xs) != len(ys):
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return None
    return round(sxy / math.sqrt(sxx * syy), 3)


def against_tpot(batches: list[dict], tpot_key: str = "mean_tpot_ms") -> dict:
    """Over one server's batches (each with its TPOT, time to first token
    and ``machine`` readings): per factor, the correlation with TPOT, its
    mean and range, and the batches it was read in."""
    out = {}
    for name, read in FACTORS.items():
        pairs = [(read(b), b[tpot_key]) for b in batches
                 if b.get(tpot_key) is not None and read(b) is not None]
        if not pairs:
            continue
        xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
        out[name] = {"r_with_tpot": pearson(xs, ys), "batches": len(pairs),
                     "mean": round(sum(xs) / len(xs), 3), "min": min(xs), "max": max(xs)}
    return out
