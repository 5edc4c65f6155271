"""What a ``vllm serve`` log and its ``/metrics`` page say, as data."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

SPEC_COUNTERS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens")

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
_PROCESS = re.compile(r"^\((?P<proc>[A-Za-z_]+\w*)(?: pid=\d+)?\)")


@dataclass(frozen=True)
class Crash:
    """The last ``AssertionError`` traceback in a log, where it was raised."""

    file: str
    line: int
    statement: str
    under_profile_run: bool
    functions: list[str]
    process: str | None

    def to_dict(self) -> dict:
        return asdict(self)


def _strip_prefix(line: str) -> tuple[str | None, str]:
    """vLLM prefixes a child process's lines with ``(EngineCore_DP0 pid=N)``."""
    found = _PROCESS.match(line)
    if not found:
        return None, line
    return found.group("proc"), line[found.end():].lstrip()


def find_assertion_crash(log: str) -> Crash | None:
    """The innermost frame of the last traceback that ends in an
    ``AssertionError``, and whether ``profile_run`` is on its stack."""
    lines = [_strip_prefix(line) for line in log.splitlines()]
    last: Crash | None = None
    frames: list[tuple[str, int, str, str | None]] = []
    statement_for: dict[int, str] = {}
    for i, (proc, text) in enumerate(lines):
        stripped = text.strip()
        if stripped.startswith("Traceback (most recent call last)"):
            frames, statement_for = [], {}
            continue
        frame = _FRAME.search(stripped)
        if frame and stripped.startswith("File "):
            frames.append((frame["file"], int(frame["line"]), frame["func"], proc))
            nxt = lines[i + 1][1].strip() if i + 1 < len(lines) else ""
            statement_for[len(frames) - 1] = nxt
            continue
        if stripped.startswith("AssertionError") and frames:
            file, line, _func, frame_proc = frames[-1]
            functions = [f[2] for f in frames]
            last = Crash(
                file=file,
                line=line,
                statement=statement_for.get(len(frames) - 1, ""),
                under_profile_run="profile_run" in functions,
                functions=functions,
                process=frame_proc or proc,
            )
            frames = []
    return last


def lines_with(log: str, needle: str) -> list[dict]:
    """Lines containing ``needle``, with the process that wrote each."""
    found = []
    for line in log.splitlines():
        if needle in line:
            proc, text = _strip_prefix(line)
            found.append({"process": proc, "line": text.strip()})
    return found


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
