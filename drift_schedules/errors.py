"""The error raised for a schedule (or clock) that cannot be used."""

from __future__ import annotations

MAX_PROBLEM = 300


class ScheduleError(ValueError):
    """A schedule that is malformed, named by the field at fault.

    The message reads ``"<field>: <problem>"``, e.g.
    ``"parameters.preferred.at: change points must be strictly increasing, got [0, 5, 5]"``.
    Errors are raised with the field relative to where they are found and prefixed on the way
    out (:meth:`within`), so a kind's checks need not know the parameter's name.

    Attributes:
        field: dotted path of the offending field (``""`` for the whole document).
        problem: what is wrong with it.
    """

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        # Problems quote the offending value; a huge one is cut so the message stays one line.
        problem = " ".join(str(problem).split("\n"))
        self.problem = (
            problem
            if len(problem) <= MAX_PROBLEM
            else (problem[: MAX_PROBLEM - 30] + f"... ({len(problem)} characters)")
        )
        super().__init__(f"{field}: {problem}" if field else problem)

    def within(self, prefix: str) -> ScheduleError:
        """The same error with ``prefix`` in front of its field path."""
        if not self.field:
            return ScheduleError(prefix, self.problem)
        joiner = "" if self.field.startswith("[") else "."
        return ScheduleError(f"{prefix}{joiner}{self.field}", self.problem)
