"""Thread choice: cores this process may use, minus the ones other work keeps busy."""

import os
import subprocess
import sys
import time

import pytest

from sao_online.config import ConfigError, load_config
from sao_online.runtime.host.threads import CoreCensus, busy_shares, census, resolve_threads
from sao_online.runtime.launch import learner_threads

BUSY_LOOP = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"


def test_busy_shares_are_busy_over_total_jiffies_per_core():
    before = {0: (100, 1000), 1: (50, 1000), 2: (0, 0)}
    after = {0: (190, 1100), 1: (60, 1100), 2: (0, 0)}
    assert busy_shares(before, after, (0, 1, 2)) == {0: 0.9, 1: 0.1, 2: 0.0}


def test_free_cores_leave_out_busy_ones_and_keep_at_least_one():
    assert CoreCensus((0, 1, 2, 3), {0: 0.9, 1: 0.2, 2: 0.6, 3: 0.0}, 5.0).free == 2
    assert CoreCensus((0, 1), {0: 1.0, 1: 0.95}, 0.0).free == 1
    # Without per-core times the load average stands in (rounded to whole cores).
    assert CoreCensus((0, 1, 2, 3), None, 1.4).free == 3
    assert CoreCensus((0, 1), None, 7.0).free == 1


def test_a_core_held_by_a_busy_process_is_seen_busy():
    core = max(os.sched_getaffinity(0))
    busy = subprocess.Popen([sys.executable, "-c", BUSY_LOOP, str(core)])
    try:
        time.sleep(0.3)
        measured = census(sample_seconds=0.2)
    finally:
        busy.kill()
        busy.wait()
    assert measured.usable == tuple(sorted(os.sched_getaffinity(0)))
    assert measured.busy_share[core] > 0.5
    assert 1 <= measured.free <= len(measured.usable) - 1 or len(measured.usable) == 1


def test_the_knob_is_validated_and_a_number_is_used_as_given():
    assert resolve_threads(3) == 3
    assert 1 <= resolve_threads("auto") <= len(os.sched_getaffinity(0))
    with pytest.raises(ValueError, match="runtime.torch_threads"):
        resolve_threads(0)
    assert learner_threads(load_config(None, ["runtime.torch_threads=3"])) == 3
    # Local: one thread per free core, less the rollout workers' (at least one).
    auto = learner_threads(load_config(None, ["runtime.backend=local", "runtime.num_workers=64"]))
    assert auto == 1
    for bad in ("0", "many"):
        with pytest.raises(ConfigError, match="runtime.torch_threads"):
            load_config(None, [f"runtime.torch_threads={bad}"])


def test_threads_far_above_the_cores_are_refused_and_above_them_warned(recwarn):
    from sao_online.config import ConfigWarning
    from sao_online.runtime.host.machine_fit import check_machine_fit
    from sao_online.runtime.host.threads import (
        THREADS_PER_CORE_LIMIT,
        thread_count_problem,
        usable_cores,
    )

    assert thread_count_problem("auto", cores=2) == ("", "")
    assert thread_count_problem(2, cores=2) == ("", "")
    assert thread_count_problem(3, cores=2)[0] == "warning"
    assert thread_count_problem(2 * THREADS_PER_CORE_LIMIT, cores=2)[0] == "warning"
    level, message = thread_count_problem(2 * THREADS_PER_CORE_LIMIT + 1, cores=2)
    assert level == "error" and "runtime.torch_threads: 9 threads on 2 usable" in message
    # The check every run makes before any work, against this machine's usable cores.
    cores = usable_cores()
    for backend in ("sync", "local", "ray"):
        with pytest.raises(ConfigError, match=r"runtime.torch_threads: 1000 threads on"):
            check_machine_fit(
                load_config(None, [f"runtime.backend={backend}", "runtime.torch_threads=1000"])
            )
    check_machine_fit(load_config(None, [f"runtime.torch_threads={cores + 1}"]))
    (warned,) = [w for w in recwarn if issubclass(w.category, ConfigWarning)]
    assert f"runtime.torch_threads={cores + 1} is more than the {cores} core" in str(warned.message)
