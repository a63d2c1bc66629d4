"""``select_batch`` against hand-worked schedules: staleness bound, group order, short batches."""

from __future__ import annotations

from types import SimpleNamespace

from sao_online.runtime.batch_selection import select_batch


def episodes(*pairs):
    """Ready episodes from (group_id, oldest_version) pairs, in completion order."""
    return [SimpleNamespace(group_id=group, oldest_version=admitted) for group, admitted in pairs]


def groups(items):
    return [item.group_id for item in items]


def test_oldest_admission_first_and_completion_order_otherwise():
    ready = episodes((0, 3), (1, 2), (2, 3), (3, 2))
    batch, rest = select_batch(
        ready, version=3, max_staleness=4, batch_size=2, waiting_versions=[], exhausted=False
    )
    assert groups(batch) == [1, 3] and groups(rest) == [0, 2]


def test_a_group_is_as_old_as_its_oldest_member_and_stays_contiguous():
    # Group 5's retried member was admitted at 1, so the whole group goes before group 4.
    ready = episodes((4, 2), (5, 3), (4, 2), (5, 1))
    batch, rest = select_batch(
        ready, version=3, max_staleness=4, batch_size=2, waiting_versions=[], exhausted=False
    )
    assert groups(batch) == [5, 5] and groups(rest) == [4, 4]


def test_waits_while_an_episode_that_training_would_make_too_stale_is_still_running():
    # version 5, bound 2: training makes anything admitted at <= 3 too stale.
    ready = episodes((0, 5), (1, 5))
    assert (
        select_batch(
            ready, version=5, max_staleness=2, batch_size=2, waiting_versions=[3], exhausted=False
        )
        is None
    )
    assert (
        select_batch(
            ready, version=5, max_staleness=2, batch_size=2, waiting_versions=[4], exhausted=False
        )
        is not None
    )


def test_learner_waits_for_old_stragglers_instead_of_training_fresh_episodes_past_the_bound():
    # max_staleness 2, B 2, learner at version 2: two fresh episodes (admitted at 2) finished
    # first while three admitted at 1 still run. Training the fresh pair now would leave three
    # version-1 episodes for the one batch at version 3 that keeps them within the bound
    # (k = 1: 3 untrained admitted at <= 1 > 1 * B).
    ready = episodes((10, 2), (11, 2))
    assert (
        select_batch(
            ready,
            version=2,
            max_staleness=2,
            batch_size=2,
            waiting_versions=[1, 1, 1],
            exhausted=False,
        )
        is None
    )
    # The stragglers finish: the oldest admissions go first, the fresh pair waits its turn.
    ready += episodes((7, 1), (8, 1), (9, 1))
    batch, rest = select_batch(
        ready, version=2, max_staleness=2, batch_size=2, waiting_versions=[], exhausted=False
    )
    assert groups(batch) == [7, 8] and groups(rest) == [9, 10, 11]


def test_every_horizon_up_to_the_bound_is_checked_not_only_the_next_version():
    # version 4, bound 3, B 2 -> due = 1. Untrained after a fresh batch: five admitted at 2
    # (<= due + 1 = 2: 5 > 1 * 2, refused at k = 1). With two admitted at 2 and five at 3:
    # k = 1: 2 <= 2 fine; k = 2: 7 > 4 refused (a k = 1-only check would train and later hang).
    fresh = episodes((20, 4), (21, 4))
    assert (
        select_batch(
            fresh,
            version=4,
            max_staleness=3,
            batch_size=2,
            waiting_versions=[2] * 5,
            exhausted=False,
        )
        is None
    )
    assert (
        select_batch(
            fresh,
            version=4,
            max_staleness=3,
            batch_size=2,
            waiting_versions=[2] * 2 + [3] * 5,
            exhausted=False,
        )
        is None
    )
    assert (
        select_batch(
            fresh,
            version=4,
            max_staleness=3,
            batch_size=2,
            waiting_versions=[2] * 2 + [3] * 2,
            exhausted=False,
        )
        is not None
    )


def test_short_last_batch_only_when_nothing_more_can_come():
    ready = episodes((0, 7))
    assert (
        select_batch(
            ready, version=7, max_staleness=1, batch_size=4, waiting_versions=[], exhausted=False
        )
        is None
    )
    batch, rest = select_batch(
        ready, version=7, max_staleness=1, batch_size=4, waiting_versions=[], exhausted=True
    )
    assert groups(batch) == [0] and rest == []
    assert (
        select_batch(
            [], version=7, max_staleness=1, batch_size=4, waiting_versions=[], exhausted=True
        )
        is None
    )


def test_max_staleness_zero_trains_only_the_current_version():
    # Synchronous schedule: anything admitted before the current version must not wait.
    ready = episodes((0, 3), (1, 3))
    assert (
        select_batch(
            ready, version=3, max_staleness=0, batch_size=2, waiting_versions=[3], exhausted=False
        )
        is None
    )
    batch, _ = select_batch(
        ready, version=3, max_staleness=0, batch_size=2, waiting_versions=[], exhausted=False
    )
    assert groups(batch) == [0, 1]
