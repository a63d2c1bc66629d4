import pytest
import torch

# Tiny models run fastest on one thread; on a shared 2-core machine a second OpenMP thread
# waiting for a busy core can make small ops orders of magnitude slower.
torch.set_num_threads(1)


#: The properties that keep a test out of `make test` (the fast tier): real processes, a CLI
#: subprocess or a whole pipeline (``e2e``), training until something is learned
#: (``learning``), a real model (``slow``), the Docker engine (``docker``). `make test-all`
#: and CI run every test. Each is registered in pyproject.toml and marked in the test's module.
SLOW_PROPERTIES = ("learning", "slow", "e2e", "docker")

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


def _rank(item: pytest.Item) -> int:
    """The position of the item's slowest property in SLOW_PROPERTIES; after them if none."""
    for position, name in enumerate(SLOW_PROPERTIES):
        if item.get_closest_marker(name):
            return position
    return len(SLOW_PROPERTIES)


@pytest.hookimpl(tryfirst=True)  # before xdist hands out the work
def pytest_collection_modifyitems(items):
    # The modules of the long tests first, the longest kind leading: one that starts last keeps
    # a worker busy after the other has finished. Whole modules move, in collection order: a
    # module split in two would tear its module-scoped fixtures down between the halves.
    ranks: dict[object, int] = {}
    for item in items:
        ranks[item.path] = min(ranks.get(item.path, len(SLOW_PROPERTIES)), _rank(item))
    items.sort(key=lambda item: ranks[item.path])


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
