"""The ``DSPARK_ATTN_PLUGIN`` switch."""

from __future__ import annotations

import os
from collections.abc import Mapping

ENV_VAR = "DSPARK_ATTN_PLUGIN"
AUTO = "auto"
OFF = "off"
ACCEPTED = (AUTO, OFF)


def read_mode(environ: Mapping[str, str] = os.environ) -> tuple[str, str | None]:
    """Return the mode, ``auto`` or ``off``, and what was wrong with the
    variable's value, if anything (then the mode is ``auto``).

    Unset or empty means ``auto``; case and surrounding blanks are ignored.
    """
    raw = environ.get(ENV_VAR, "")
    value = raw.strip().lower()
    if not value:
        return AUTO, None
    if value in ACCEPTED:
        return value, None
    return AUTO, (
        f"{ENV_VAR}={raw!r} is not one of {', '.join(ACCEPTED)}; "
        f"using {AUTO}"
    )
