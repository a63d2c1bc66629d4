"""Durations and sizes as a reader wants them in one line of output."""

from __future__ import annotations


def format_duration(seconds: float) -> str:
    """``"45 s"``, ``"12 min"``, ``"2.5 h"``, ``"3.2 days"``, ``"4.1 years"``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    if seconds < 730 * 86400:
        return f"{seconds / 86400:.1f} days"
    return f"{seconds / (365.25 * 86400):.3g} years"


def format_bytes(count: float) -> str:
    """``"580 MB"``, ``"3.1 GB"``, ``"2.4e+06 GB"``."""
    if count < 2**30:
        return f"{count / 2**20:.0f} MB"
    gigabytes = count / 2**30
    return f"{gigabytes:.1f} GB" if gigabytes < 10**5 else f"{gigabytes:.2g} GB"
