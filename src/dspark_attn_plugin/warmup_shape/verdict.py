"""The verdicts, and what the walk takes as given of the #50615 run."""

from __future__ import annotations

import enum
from dataclasses import dataclass

BUFFER_ATTR = "topk_indices_buffer"
RATIO_ATTR = "compress_ratio"

# The compress_ratio values an SWA-only layer can have: one walk each.
SWA_RATIOS = (0, 1)
# How deep the walk follows calls into this module's functions.
MAX_CALL_DEPTH = 8
# How many passes a loop body gets before its state must have settled.
MAX_LOOP_PASSES = 6
# A ``for`` over a constant this short is walked once per item.
MAX_UNROLL = 8


class Verdict(str, enum.Enum):
    AFFECTED = "affected"
    FIXED = "fixed"
    NOT_AFFECTED = "not-affected"
    ABSENT = "absent"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value

    @property
    def safe(self) -> bool:
        """True when this code needs no fix to start an SWA-only drafter."""
        return self in (Verdict.FIXED, Verdict.NOT_AFFECTED, Verdict.ABSENT)


@dataclass(frozen=True)
class Classification:
    verdict: Verdict
    reason: str
    # First line of the ``forward_mqa`` definition (decorators included), for
    # checking that the loaded function is the one that was classified.
    method_line: int | None = None
    # ``affected``: the line of the first statement that fails on the run.
    crash_line: int | None = None
    # What the walk took the loaded objects to be, for the runtime to check
    # (``loaded_code``): ("member", name, defining class) for every member
    # of the class it resolved, ("function", name) for module functions,
    # ("constant", name, value) for module constants.
    assumes: tuple = ()
