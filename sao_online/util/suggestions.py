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
        >>> did_you_mean("gpro", ["gspo", "grpo"])
        " (did you mean 'grpo'?)"
    """
    by_folded = {str(k).lower(): str(k) for k in known}
    folded = str(name).lower()
    close = difflib.get_close_matches(folded, list(by_folded), n=5, cutoff=0.6)
    # Of the close ones, the fewest edits first, a swap of two neighbours counting as one:
    # ``gpro`` is ``grpo`` typed with two letters swapped, not ``gspo``.
    close.sort(key=lambda candidate: edit_distance(folded, candidate))
    return f" (did you mean {by_folded[close[0]]!r}?)" if close else ""


def edit_distance(first: str, second: str) -> int:
    """Insertions, deletions, substitutions and swaps of neighbours that turn ``first`` into
    ``second`` (optimal string alignment distance).

    Example:
        >>> edit_distance("gpro", "grpo"), edit_distance("gpro", "gspo")
        (1, 2)
    """
    previous2: list[int] = []
    previous = list(range(len(second) + 1))
    for i, a in enumerate(first, 1):
        current = [i]
        for j, b in enumerate(second, 1):
            cost = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a != b))
            if i > 1 and j > 1 and a == second[j - 2] and first[i - 2] == b:
                cost = min(cost, previous2[j - 2] + 1)
            current.append(cost)
        previous2, previous = previous, current
    return previous[-1]
