"""``select_batch`` against hand-worked schedules: staleness bound, group order, short batches."""

from __future__ import annotations

from types import SimpleNamespace

from sao_online.runtime.scheduling.batch_selection import select_batch, stragglers_to_drop


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


def drop(ready, *, version, max_staleness, batch_size=2, waiting, pinned=()):
    return stragglers_to_drop(
        ready,
        version=version,
        max_staleness=max_staleness,
        batch_size=batch_size,
        waiting=waiting,
        pinned=pinned,
    )


def test_stragglers_that_hold_back_the_bound_are_dropped_oldest_first():
    # version 5, bound 2 -> due = 3: "b" (2) and "a" (3) would pass the bound; "c" and "d"
    # would not. After dropping both the rest passes every horizon: k = 1, <= 4: 1 <= 2;
    # k = 2, <= 5: 2 <= 4.
    fresh = episodes((10, 5), (11, 5))
    waiting = [("a", 3), ("b", 2), ("c", 4), ("d", 5)]
    assert drop(fresh, version=5, max_staleness=2, waiting=waiting) == ["b", "a"]


def test_horizon_stragglers_are_dropped_only_until_the_batch_is_allowed():
    # version 4, bound 3, B 2 -> due = 1. Five waiting at 2: at k = 1 (<= 2) at most 2 may be
    # left, so three go (the first three, in the order given); none is due by itself.
    fresh = episodes((20, 4), (21, 4))
    waiting = [(f"g{k}", 2) for k in range(5)]
    assert drop(fresh, version=4, max_staleness=3, waiting=waiting) == ["g0", "g1", "g2"]


def test_a_group_is_dropped_whole_and_is_as_old_as_its_oldest_member():
    # Group "x" has a member at 1 (due at version 3, bound 2) and one at 3: both go, and "y"
    # (at 3, the same as x's newer member) is kept.
    fresh = episodes((30, 3), (31, 3))
    waiting = [("y", 3), ("x", 3), ("x", 1)]
    assert drop(fresh, version=3, max_staleness=2, waiting=waiting) == ["x"]
    remaining = [oldest for key, oldest in waiting if key != "x"]
    assert (
        select_batch(
            fresh,
            version=3,
            max_staleness=2,
            batch_size=2,
            waiting_versions=remaining,
            exhausted=False,
        )
        is not None
    )


def test_nothing_is_dropped_when_the_learner_waits_for_episodes_or_need_not_wait():
    due = [("a", 1)]  # version 3, bound 1 -> due = 2
    assert drop(episodes((0, 3)), version=3, max_staleness=1, waiting=due) == []  # 1 ready < B
    assert drop(episodes((0, 3), (1, 3)), version=3, max_staleness=1, waiting=[("a", 3)]) == []


def test_pinned_groups_are_never_dropped_and_useless_drops_are_not_made():
    fresh = episodes((0, 5), (1, 5))
    # "p" is due and pinned: dropping "a" as well would not let the learner train, so nothing.
    assert drop(fresh, version=5, max_staleness=2, waiting=[("p", 2), ("a", 3)], pinned={"p"}) == []
    # Pinned but not due: the due group alone goes.
    assert drop(fresh, version=5, max_staleness=2, waiting=[("p", 5), ("a", 3)], pinned={"p"}) == [
        "a"
    ]
