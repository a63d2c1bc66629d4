""" "Did you mean ...?" for names a user types: methods, environment ids, bundled configs."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for the closest known name, or ``""`` when none is close.

    Case is ignored when matching (``styleshift`` finds ``StyleShift``).

    Example:
        >>> did_you_mean("grpoo", ["sao", "grpo", "rloo"])
        " (did you mean 'grpo'?)"
        >>> did_you_mean("zzz", ["sao", "grpo"])
        ''
    """
    by_folded = {str(k).lower(): str(k) for k in known}
    close = difflib.get_close_matches(str(name).lower(), list(by_folded), n=1, cutoff=0.6)
    return f" (did you mean {by_folded[close[0]]!r}?)" if close else ""
