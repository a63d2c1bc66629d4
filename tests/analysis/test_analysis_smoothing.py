"""The trailing moving average: hand values, restarts at shifts, warm-up, no look-ahead."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sao_online.analysis.smoothing import trailing_mean


def naive_trailing_mean(times, values, width, queries, phase_starts, min_window_fraction):
    """The definition, one query at a time."""
    times, values = np.asarray(times, float), np.asarray(values, float)
    starts = sorted({float(min(times)), *map(float, phase_starts)})
    out = []
    for t in queries:
        before = [s for s in starts if s <= t]
        start = before[-1] if before else -np.inf
        inside = (times > t - width) & (times <= t) & (times >= start) & np.isfinite(values)
        if not inside.any() or t - start < min_window_fraction * width:
            out.append(np.nan)
        else:
            out.append(values[inside].mean())
    return np.array(out)


def test_hand_values_without_and_with_a_restart():
    times = np.arange(6)
    values = [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    plain = trailing_mean(times, values, 2, min_window_fraction=0.0)
    np.testing.assert_allclose(plain, [1, 1, 1, 0.5, 0, 0])
    restarted = trailing_mean(times, values, 2, phase_starts=[3], min_window_fraction=0.0)
    np.testing.assert_allclose(restarted, [1, 1, 1, 0, 0, 0])


def test_window_is_open_on_the_left_and_closed_on_the_right():
    # width 3 at t=5 holds times 3, 4, 5 (not 2): (10 + 20 + 30) / 3
    values = [0.0, 0.0, 1000.0, 10.0, 20.0, 30.0]
    result = trailing_mean(np.arange(6), values, 3, min_window_fraction=0.0)
    assert result[5] == pytest.approx(20.0)


def test_warm_up_after_a_shift_is_undefined():
    times = np.arange(10)
    values = np.arange(10, dtype=float)
    result = trailing_mean(times, values, 4, phase_starts=[5], min_window_fraction=0.5)
    # the phase starting at 5 needs 2 clock units: t=5, 6 undefined; t=7 averages 5, 6, 7
    assert np.isnan(result[5]) and np.isnan(result[6])
    assert result[7] == pytest.approx(6.0)
    # the data start counts as a phase start as well
    assert np.isnan(result[0]) and np.isnan(result[1]) and result[2] == pytest.approx(1.0)


def test_nan_values_are_left_out_and_ties_share_a_value():
    times = [0, 1, 1, 2]
    values = [1.0, np.nan, 3.0, 5.0]
    result = trailing_mean(times, values, 2, min_window_fraction=0.0)
    np.testing.assert_allclose(result, [1.0, 2.0, 2.0, 4.0])


def test_query_times_between_samples_and_after_the_data():
    narrow = trailing_mean(
        [0, 1, 2], [1.0, 2.0, 3.0], 1.5, query_times=[1.5, 10.0], min_window_fraction=0.0
    )
    assert narrow[0] == pytest.approx(2.0)  # (0, 1.5] holds only the sample at 1
    assert np.isnan(narrow[1])  # nothing in (8.5, 10]
    wide = trailing_mean(
        [0, 1, 2], [1.0, 2.0, 3.0], 1.6, query_times=[1.5], min_window_fraction=0.0
    )
    assert wide[0] == pytest.approx(1.5)


@settings(max_examples=60, deadline=None)
@given(
    times=st.lists(st.integers(0, 40), min_size=1, max_size=30),
    width=st.integers(1, 12),
    shift=st.integers(1, 40),
    fraction=st.sampled_from([0.0, 0.5, 1.0]),
    data=st.data(),
)
def test_matches_the_definition_and_never_looks_ahead(times, width, shift, fraction, data):
    values = data.draw(st.lists(st.floats(-5, 5), min_size=len(times), max_size=len(times)))
    times_array = np.array(times, dtype=float)
    queries = np.arange(-1, 42, dtype=float)
    fast = trailing_mean(
        times_array,
        values,
        width,
        query_times=queries,
        phase_starts=[shift],
        min_window_fraction=fraction,
    )
    slow = naive_trailing_mean(times_array, values, width, queries, [shift], fraction)
    # cumulative sums cancel to within rounding, hence the absolute tolerance
    np.testing.assert_allclose(fast, slow, atol=1e-9, equal_nan=True)

    # change everything after a cut: nothing at or before the cut may move
    cut = data.draw(st.integers(0, 40))
    changed = np.where(times_array > cut, 99.0, np.asarray(values))
    altered = trailing_mean(
        times_array,
        changed,
        width,
        query_times=queries,
        phase_starts=[shift],
        min_window_fraction=fraction,
    )
    up_to_cut = queries <= cut
    np.testing.assert_allclose(altered[up_to_cut], fast[up_to_cut], atol=1e-9, equal_nan=True)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"width": 0}, "width"),
        ({"width": 2, "min_window_fraction": 1.5}, "min_window_fraction"),
    ],
)
def test_bad_parameters_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        trailing_mean([0, 1], [1.0, 2.0], **kwargs)


def test_mismatched_lengths_are_rejected():
    with pytest.raises(ValueError, match="same length"):
        trailing_mean([0, 1, 2], [1.0, 2.0], 2)
