"""The phase clock of ``bench throughput``: each moment to the innermost phase, hooks that mark
the learner's passes the same way in any trainer."""

import threading

import pytest
import torch

from sao_online.perf import phases
from sao_online.perf.phases import PhaseClock, learner_hooks, patched, timed_call, timed_generator


class FakeTime:
    """``time.perf_counter`` that moves only when told."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def fake_time(monkeypatch):
    clock = FakeTime()
    monkeypatch.setattr(phases.time, "perf_counter", clock)
    return clock


def test_each_moment_goes_to_the_innermost_open_phase(fake_time):
    clock = PhaseClock()
    clock.start()
    fake_time.advance(1.0)  # other
    with clock.phase("generation"):
        fake_time.advance(2.0)
        with clock.phase("environment"):
            fake_time.advance(0.5)
        fake_time.advance(0.25)
    with clock.phase("backward"):
        fake_time.advance(3.0)
    assert clock.stop() == pytest.approx(6.75)
    assert clock.seconds == pytest.approx(
        {"generation": 2.25, "environment": 0.5, "forward": 0, "backward": 3.0, "optimizer": 0}
    )
    # Over 3 updates; other is the trainer's own total less every phase: (7.5 - 5.75) / 3.
    split = clock.split(7.5, updates=3)
    assert split["generation"] == pytest.approx(0.75) and split["backward"] == pytest.approx(1)
    assert split["other"] == pytest.approx(1.75 / 3, abs=1e-5)


def test_other_threads_and_a_stopped_clock_move_nothing(fake_time):
    clock = PhaseClock()
    assert not clock.enter("forward")  # not started
    clock.start()

    def elsewhere() -> None:
        with clock.phase("forward"):
            fake_time.advance(5.0)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    clock.stop()
    assert clock.seconds["forward"] == 0


def test_a_phase_left_open_inside_another_closes_with_it(fake_time):
    clock = PhaseClock()
    clock.start()
    clock.enter("generation")
    clock.enter("forward")  # an exception skipped its exit
    fake_time.advance(1.0)
    clock.exit("generation")
    fake_time.advance(1.0)
    clock.stop()
    assert clock.seconds["forward"] == pytest.approx(1.0)
    assert clock.seconds["generation"] == 0


def test_move_gives_time_measured_elsewhere_to_another_phase(fake_time):
    clock = PhaseClock()
    clock.start()
    with clock.phase("generation"):
        fake_time.advance(2.0)
    clock.stop()
    clock.move(0.5, "generation", "environment")
    assert clock.seconds["generation"] == pytest.approx(1.5)
    assert clock.seconds["environment"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="not within the 1.500000 s of 'generation'"):
        clock.move(2.0, "generation", "environment")


def test_bad_phases_and_updates_are_named():
    clock = PhaseClock()
    clock.start()
    with pytest.raises(ValueError, match="unknown phase 'sampling'"):
        clock.enter("sampling")
    with pytest.raises(ValueError, match="updates must be >= 1, got 0"):
        clock.split(1.0, updates=0)


def test_timed_generator_times_each_step_not_the_consumer(fake_time):
    clock = PhaseClock()

    def produce():
        for item in range(3):
            fake_time.advance(1.0)
            yield item

    clock.start()
    for _ in timed_generator(clock, "generation", produce)():
        fake_time.advance(10.0)  # the consumer's work
    clock.stop()
    assert clock.seconds["generation"] == pytest.approx(3.0)


def test_patched_restores_what_the_owner_had(fake_time):
    class Owner:
        def work(self) -> str:
            fake_time.advance(1.0)
            return "done"

    clock = PhaseClock()
    owner = Owner()
    clock.start()
    with patched(owner, "work", lambda f: timed_call(clock, "environment", f)):
        assert owner.work() == "done"
    assert "work" not in vars(owner)  # the class's method again
    original = Owner.__dict__["work"]
    with patched(Owner, "work", lambda f: timed_call(clock, "environment", f)):
        assert Owner().work() == "done"
    assert Owner.__dict__["work"] is original
    clock.stop()
    assert clock.seconds["environment"] == pytest.approx(2.0)


class Policy(torch.nn.Module):
    """A model with a decoder and an output head, as a trainer may call either."""

    def __init__(self) -> None:
        super().__init__()
        self.model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh())
        self.lm_head = torch.nn.Linear(16, 4)

    def get_decoder(self) -> torch.nn.Module:
        return self.model

    def get_output_embeddings(self) -> torch.nn.Module:
        return self.lm_head

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.model(inputs))


def test_learner_hooks_mark_forward_backward_and_optimizer_once_each(monkeypatch):
    events = []
    clock = PhaseClock()
    monkeypatch.setattr(clock, "enter", lambda phase: events.append(f"+{phase}") or True)
    monkeypatch.setattr(clock, "exit", lambda phase: events.append(f"-{phase}"))
    clock.start()
    policy = Policy()
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.1)
    with learner_hooks(clock, policy):
        loss = policy(torch.ones(2, 8)).sum()  # nested modules: one forward
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        optimizer.step()
        # A learner that runs the decoder and the head itself: two forwards.
        policy.lm_head(policy.model(torch.ones(2, 8)))
    assert events == [
        "+forward",
        "-forward",
        "+backward",
        "-backward",
        "+optimizer",
        "-optimizer",
        "+optimizer",
        "-optimizer",
        "+forward",
        "-forward",
        "+forward",
        "-forward",
    ]
    events.clear()
    policy(torch.ones(1, 8)).sum().backward()  # the hooks are gone
    optimizer.step()
    assert events == []
    assert torch.autograd.backward.__module__ == "torch.autograd"


def test_forward_passes_inside_generation_are_generations(fake_time):
    clock = PhaseClock()
    policy = Policy()
    policy.lm_head.register_forward_pre_hook(lambda module, args: fake_time.advance(1.0))
    clock.start()
    with learner_hooks(clock, policy):
        with clock.phase("generation"):
            policy(torch.ones(1, 8))  # a second inside the pass: generation's
        policy(torch.ones(1, 8))  # the learner's: forward
    clock.stop()
    assert clock.seconds["generation"] == pytest.approx(1.0)
    assert clock.seconds["forward"] == pytest.approx(1.0)
