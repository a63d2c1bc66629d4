from pathlib import Path

import pytest
import torch

# Tiny models run fastest on one thread; on a shared 2-core machine a second OpenMP thread
# waiting for a busy core can make small ops orders of magnitude slower.
torch.set_num_threads(1)

TESTS = Path(__file__).resolve().parent

#: `make test` runs the suite on every core (pytest-xdist, ``--dist loadgroup``). The modules
#: below run together, one after another, on one worker; everything else is spread freely,
#: except tests marked ``xdist_group`` in their module (those sharing an expensive fixture).
RUN_TOGETHER = {
    # Sandboxes: the containment tests check that no ``sao-sandbox-*`` folder is left in the
    # shared temp dir (a run on another worker would leave one for a moment), and their fork
    # bombs and wall-clock limits should not meet each other's bursts.
    "environments/sandbox/test_sandbox_backends.py": "sandbox",
    "environments/sandbox/test_sandbox_containment.py": "sandbox",
    "environments/sandbox/test_sandbox_isolation.py": "sandbox",
    "environments/test_code_shift.py": "sandbox",
    "environments/test_env_contract.py": "sandbox",
    "bench/test_bench_sandbox.py": "sandbox",
    # One worker each, so each module builds its reference run once.
    "cli/test_compare_signals.py": "compare_signals",
    "rundir/test_disk_full.py": "disk_full",
}


#: Modules of the longest single tests (10-30 s each serially: a real model, several processes
#: per run, CLI processes), handed out first, longest first: one that starts last keeps a worker
#: busy after the other has finished. Groups go out before any of them (xdist orders work units
#: by their number of tests): the sandbox group (about two minutes serially on one core of a
#: busy machine, about 45 s on a worker of a quiet ``make test``), then SmolLM2's (about 45 s).
START_FIRST = [
    "benchmark/test_benchmark_smoke.py",  # the whole smoke tier: 20 runs, 4 warm starts
    "cli/test_compare_signals.py",
    "benchmark/test_benchmark_signals.py",  # a reference benchmark, one stopped and resumed
    "models/test_smollm2.py",
    "cli/test_user_task_cli.py",
    "test_wheel_install.py",  # builds a wheel, a venv, and runs the installed command line
    "cli/test_quiet_output.py",
    "cli/test_compare_summary.py",
    "bench/test_bench_async.py",
    "test_api.py",
    "runtime/test_async_backends.py",
    "runtime/test_ray_two_nodes.py",
    "benchmark/test_benchmark_ray.py",
    "runtime/test_async_invariants.py",
    "rollout/test_chat_model_rollout.py",
    # 5-10 s each under `make test` (CLI processes, a killed run resumed, forkserver children,
    # full reports): handed out late, one of them ended a run 9 s after the other worker.
    "rundir/test_run_integrity.py",
    "runtime/test_env_failures.py",
    "runtime/test_sync_runtime.py",
    "runtime/test_processes.py",
    "analysis/test_analysis_report.py",
]


#: What an engine from ``make_engine`` runs unless the test says otherwise: two slots, short
#: episodes, and a cut action submitted to the env (most tests count env steps per turn).
ENGINE_DEFAULTS = {
    "num_slots": 2,
    "max_turns": 2,
    "max_action_tokens": 4,
    "max_episode_tokens": 200,
    "on_action_cap": "submit",
}


@pytest.fixture
def tiny_policy():
    """The tiny policy and its byte tokenizer: two layers 64 wide, seed 0."""
    from sao_online.models import build_tiny_policy

    return build_tiny_policy(num_layers=2, hidden_size=64, seed=0)


@pytest.fixture
def make_engine(request):
    """``make_engine(policy=None, **settings)`` builds a ``RolloutEngine``.

    The engine runs ``policy`` (a ``(model, tokenizer)`` pair; the test's ``tiny_policy`` when
    omitted, built only then) with ``ENGINE_DEFAULTS`` updated by ``settings``. Every engine
    built is closed when the test ends, so a failing test leaves no env threads behind.
    """
    from sao_online.rollout import RolloutEngine

    engines = []

    def make(policy=None, **settings):
        model, tokenizer = policy or request.getfixturevalue("tiny_policy")
        engines.append(RolloutEngine(model, tokenizer, **{**ENGINE_DEFAULTS, **settings}))
        return engines[-1]

    yield make
    for engine in engines:
        engine.close()


def pytest_configure(config):
    # A module moved or renamed without its entry here would silently lose its group or its
    # early start: say so instead.
    missing = [module for module in (*RUN_TOGETHER, *START_FIRST) if not (TESTS / module).is_file()]
    if missing:
        raise pytest.UsageError(
            f"tests/conftest.py names test modules that do not exist: {', '.join(missing)}"
        )


def _module(item: pytest.Item) -> str | None:
    try:
        return item.path.relative_to(TESTS).as_posix()
    except ValueError:  # a test outside tests/ (run by path)
        return None


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups off the items
def pytest_collection_modifyitems(items):
    for item in items:
        group = RUN_TOGETHER.get(_module(item))
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
    # A stable sort: the first modules in START_FIRST order, everything else as collected.
    rank = {module: position for position, module in enumerate(START_FIRST)}
    items.sort(key=lambda item: rank.get(_module(item), len(START_FIRST)))


_GROUPS_LOST = pytest.StashKey[str]()


def pytest_collection_finish(session):
    # pytest-xdist marks a grouped test by appending "@<group>" to its node id in each worker;
    # pytest 9.2 ignores that (pytest-xdist issue 1386) and the groups are silently dropped:
    # sandboxes beside sandboxes, the SmolLM2 model loaded twice. Such a run fails its grouped
    # tests, saying why, instead of running them where they do not belong.
    if not getattr(session.config.option, "loadgroup", False):
        return  # not an xdist worker under --dist loadgroup
    for item in session.items:
        if item.get_closest_marker("xdist_group") and "@" not in item.nodeid:
            session.config.stash[_GROUPS_LOST] = (
                f"--dist loadgroup does not honour xdist_group marks with pytest "
                f"{pytest.__version__} (pytest-xdist issue 1386): install pytest<9.2 "
                "(`make venv` does) or run the suite with TEST_WORKERS=0"
            )
            return


def pytest_runtest_setup(item):
    lost = item.config.stash.get(_GROUPS_LOST, None)
    if lost and item.get_closest_marker("xdist_group"):
        pytest.fail(lost, pytrace=False)
