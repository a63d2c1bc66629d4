import threading

import pytest

from sao_online.runtime.scheduling.staleness import StalenessGate


def test_capacity_matches_formula_by_hand():
    gate = StalenessGate(batch_size=4, max_staleness=2)
    assert gate.capacity() == (2 + 0 + 1) * 4  # 12
    assert gate.try_acquire(5)
    assert gate.capacity() == 7
    gate.finish(3)
    assert gate.capacity() == 7  # accepted + running unchanged: 3 + 2
    gate.finish(2, accepted=False)  # dropped episodes free their place
    assert gate.capacity() == 12 - 3
    gate.set_version(1)
    assert gate.capacity() == (2 + 1 + 1) * 4 - 3


def test_discarding_finished_episodes_frees_their_places():
    # B 4, bound 1: capacity (1 + 0 + 1) * 4 = 8. Admit 6, 5 finish (accepted), then a group of
    # 2 finished members is thrown away before training: 8 - (3 + 1) = 4 free again.
    gate = StalenessGate(batch_size=4, max_staleness=1)
    assert gate.try_acquire(6)
    gate.finish(5)
    assert gate.capacity() == 2
    gate.discard(2)
    assert gate.accepted == 3 and gate.capacity() == 4
    with pytest.raises(ValueError, match="discard.*only 3 accepted"):
        gate.discard(4)


def test_group_is_admitted_whole_or_not_at_all():
    gate = StalenessGate(batch_size=8, max_staleness=0)
    assert gate.try_acquire(8)
    assert not gate.try_acquire(1)
    gate.finish(8)
    gate.set_version(1)
    assert gate.capacity() == 8
    assert gate.try_acquire(6)
    assert not gate.try_acquire(4)  # only 2 left: a group of 4 waits whole
    assert gate.try_acquire(2)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="batch_size"):
        StalenessGate(0, 1)
    with pytest.raises(ValueError, match="max_staleness"):
        StalenessGate(4, -1)
    gate = StalenessGate(4, 1)
    with pytest.raises(ValueError, match="running"):
        gate.finish(1)
    gate.set_version(3)
    with pytest.raises(ValueError, match="version"):
        gate.set_version(2)


def test_concurrent_callers_never_exceed_the_bound():
    batch_size, max_staleness, versions = 4, 1, 20
    gate = StalenessGate(batch_size, max_staleness)
    admitted_at = []  # version at admission of every admitted episode
    lock = threading.Lock()
    stop = threading.Event()
    version = [0]

    def worker():
        while not stop.is_set():
            if gate.acquire(1, timeout=0.01):
                with lock:
                    admitted_at.append(version[0])
                gate.finish(1)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    consumed = 0
    for v in range(versions):
        # The learner waits for B accepted episodes, trains, publishes v + 1.
        while gate.accepted - consumed < batch_size:
            pass
        consumed += batch_size
        with lock:
            version[0] = v + 1
        gate.set_version(v + 1)
    stop.set()
    for t in threads:
        t.join()
    # Episode number i (0-based, in admission order) is trained at version i // B at the latest
    # if nothing is dropped, so its staleness is i // B - admitted version <= max_staleness.
    for index, admitted_version in enumerate(admitted_at[: versions * batch_size]):
        assert index // batch_size - admitted_version <= max_staleness
    assert len(admitted_at) <= (max_staleness + versions + 1) * batch_size


def test_acquire_blocks_until_version_advances():
    gate = StalenessGate(batch_size=2, max_staleness=0)
    assert gate.try_acquire(2)
    gate.finish(2)
    result = []
    thread = threading.Thread(target=lambda: result.append(gate.acquire(1, timeout=5)))
    thread.start()
    thread.join(0.1)
    assert thread.is_alive()
    gate.set_version(1)
    thread.join(5)
    assert result == [True]


def test_state_round_trip_drops_running():
    gate = StalenessGate(4, 2)
    gate.try_acquire(3)
    gate.finish(2)
    gate.set_version(1)
    restored = StalenessGate(4, 2)
    restored.load_state_dict(gate.state_dict())
    assert restored.running == 0 and restored.accepted == 2
    assert restored.capacity() == (2 + 1 + 1) * 4 - 2
