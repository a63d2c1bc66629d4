"""Where a trainer's wall time goes: one clock, split among phases, the same for every trainer.

``bench throughput`` compares the suite's trainer with TRL's ``GRPOTrainer``; to say where one
is faster, both are timed by this module in the same way. A :class:`PhaseClock` belongs to the
thread that runs the trainer's loop. Each moment of its wall time between ``start`` and
``stop`` goes to exactly one phase, the innermost one open (a forward pass inside generation is
generation's); what no phase holds is ``other``:

- ``generation``: sampling the completions, prompt tokenization and decoding included;
- ``environment``: building, resetting and stepping environments (the reward);
- ``forward`` / ``backward`` / ``optimizer``: the learner's passes over the policy and its
  optimiser (gradient clipping and the step).

The learner's phases are marked the same way for every trainer, by hooks on the objects the
trainer is handed or calls (:func:`learner_hooks`): forward hooks on the policy, the optimiser
step hooks torch offers, and wrappers around ``torch.autograd.backward`` and
``torch.nn.utils.clip_grad_norm_`` while the clock runs. Generation and the environment are
each trainer's own code, marked by wrapping the function that does it (:func:`patched`,
:func:`timed_call`, :func:`timed_generator`). Work done on other threads or in other processes
is not seen by the clock; what the trainer measures there itself can be moved between phases
afterwards (:meth:`PhaseClock.move`).

Example:
    >>> clock = PhaseClock()
    >>> clock.start()
    >>> with clock.phase("generation"):
    ...     with clock.phase("environment"):
    ...         pass
    >>> seconds = clock.stop()
    >>> sorted(clock.split(seconds, updates=1))  # doctest: +NORMALIZE_WHITESPACE
    ['backward', 'environment', 'forward', 'generation', 'optimizer', 'other']
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)

PHASES = ("generation", "environment", "forward", "backward", "optimizer")
"""The phases a clock splits time among; what none of them holds is ``other``."""
LEARNER_PHASES = ("forward", "backward", "optimizer")


class PhaseClock:
    """Wall time of one thread, each moment given to the innermost open phase.

    Only the thread that created the clock moves it: a phase opened on another thread (a worker
    pool, the critic's lane) is ignored, since the owner's own time is what it accounts for.
    """

    def __init__(self) -> None:
        self.owner = threading.get_ident()
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self._open: list[str] = []
        self._mark: float | None = None
        self._started: float | None = None

    @property
    def running(self) -> bool:
        return self._started is not None

    def is_open(self, phase: str) -> bool:
        """Whether ``phase`` is open on the owner thread (at any depth)."""
        return phase in self._open

    def start(self) -> None:
        self._started = self._mark = time.perf_counter()

    def stop(self) -> float:
        """Close the clock; returns the seconds since ``start``."""
        if self._started is None:
            raise RuntimeError("PhaseClock.stop: the clock was not started")
        now = time.perf_counter()
        self._charge(now)
        self._open.clear()
        elapsed = now - self._started
        self._started = self._mark = None
        return elapsed

    def _charge(self, now: float) -> None:
        if self._open and self._mark is not None:
            self.seconds[self._open[-1]] += now - self._mark
        self._mark = now

    def enter(self, phase: str) -> bool:
        """Open ``phase``; False (nothing changes) off the owner thread or while stopped."""
        if phase not in self.seconds:
            raise ValueError(f"PhaseClock: unknown phase {phase!r}; phases: {PHASES}")
        if not self.running or threading.get_ident() != self.owner:
            return False
        self._charge(time.perf_counter())
        self._open.append(phase)
        return True

    def exit(self, phase: str) -> None:
        """Close the innermost open ``phase`` (and anything opened inside it that was left open,
        as by an exception)."""
        if not self.running or threading.get_ident() != self.owner or phase not in self._open:
            return
        self._charge(time.perf_counter())
        while self._open.pop() != phase:
            pass

    @contextlib.contextmanager
    def phase(self, phase: str) -> Iterator[None]:
        entered = self.enter(phase)
        try:
            yield
        finally:
            if entered:
                self.exit(phase)

    def move(self, seconds: float, source: str, target: str) -> None:
        """Give ``seconds`` measured elsewhere to ``target``, taken from ``source``: work that
        ran on another thread while the owner waited inside ``source``."""
        if seconds < 0 or seconds > self.seconds[source] + 1e-9:
            raise ValueError(
                f"PhaseClock.move: {seconds:.6f} s is not within the {self.seconds[source]:.6f} "
                f"s of {source!r}"
            )
        self.seconds[source] -= seconds
        self.seconds[target] += seconds

    def split(self, total_seconds: float, updates: int) -> dict[str, float]:
        """Seconds per update of each phase, and ``other``: ``total_seconds`` (the trainer's own
        measure of the run) less every phase."""
        if updates < 1:
            raise ValueError(f"PhaseClock.split: updates must be >= 1, got {updates}")
        split = {name: seconds / updates for name, seconds in self.seconds.items()}
        split["other"] = (total_seconds - sum(self.seconds.values())) / updates
        return {name: round(value, 5) for name, value in split.items()}


def timed_call(clock: PhaseClock, phase: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` with every call inside ``phase``."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with clock.phase(phase):
            return function(*args, **kwargs)

    return wrapper


def timed_generator(
    clock: PhaseClock, phase: str, function: Callable[..., Iterator[Any]]
) -> Callable[..., Iterator[Any]]:
    """A generator function with the work of each step inside ``phase`` (not the consumer's work
    between steps)."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Iterator[Any]:
        iterator = function(*args, **kwargs)
        try:
            while True:
                with clock.phase(phase):
                    try:
                        item = next(iterator)
                    except StopIteration:
                        return
                yield item
        finally:
            iterator.close()

    return wrapper


_ABSENT = object()


@contextlib.contextmanager
def patched(owner: Any, name: str, wrap: Callable[[Any], Any]) -> Iterator[None]:
    """``owner.name`` replaced by ``wrap(owner.name)`` inside the block; after it, ``owner``'s
    own attribute is what it was (an instance's method patched is the class's again)."""
    own = vars(owner).get(name, _ABSENT)
    setattr(owner, name, wrap(getattr(owner, name)))
    try:
        yield
    finally:
        if own is _ABSENT:
            delattr(owner, name)
        else:
            setattr(owner, name, own)


class _ForwardHooks:
    """Forward hooks that open ``forward`` on the outermost call into the hooked modules, unless
    generation is open (the sampler's passes are generation's)."""

    def __init__(self, clock: PhaseClock) -> None:
        self.clock = clock
        self.depth = 0
        self.entered = False
        self.handles: list[Any] = []

    def attach(self, module: torch.nn.Module) -> None:
        self.handles.append(module.register_forward_pre_hook(self.before))
        self.handles.append(module.register_forward_hook(self.after, always_call=True))

    def before(self, module: torch.nn.Module, args: Any) -> None:
        if threading.get_ident() != self.clock.owner:
            return
        if self.depth == 0:
            self.entered = not self.clock.is_open("generation") and self.clock.enter("forward")
        self.depth += 1

    def after(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        if threading.get_ident() != self.clock.owner or self.depth == 0:
            return
        self.depth -= 1
        if self.depth == 0 and self.entered:
            self.clock.exit("forward")
            self.entered = False

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def entry_modules(policy: torch.nn.Module) -> list[torch.nn.Module]:
    """The modules a trainer may call to run ``policy``: the model itself, its decoder and its
    output head (a learner that computes logits only where it needs them calls the last two)."""
    modules = [policy]
    for getter in ("get_decoder", "get_output_embeddings"):
        module = getattr(policy, getter, lambda: None)()
        if isinstance(module, torch.nn.Module) and all(module is not m for m in modules):
            modules.append(module)
    return modules


@contextlib.contextmanager
def learner_hooks(clock: PhaseClock, policy: torch.nn.Module | None = None) -> Iterator[Any]:
    """The learner's phases marked on ``clock`` while the block runs.

    ``backward`` wraps ``torch.autograd.backward`` (what ``Tensor.backward`` calls);
    ``optimizer`` is every optimiser's ``step`` (torch's global step hooks) and
    ``torch.nn.utils.clip_grad_norm_``; ``forward`` needs the policy's modules: pass ``policy``
    or call the yielded ``attach(policy)`` once the trainer has built it. Only the entry
    modules are hooked (:func:`entry_modules`), so the hooks cost a few calls per pass.
    """
    forward = _ForwardHooks(clock)
    attached: list[int] = []

    def attach(model: torch.nn.Module) -> None:
        if id(model) in attached:
            return
        attached.append(id(model))
        for module in entry_modules(model):
            forward.attach(module)

    if policy is not None:
        attach(policy)

    def before_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        clock.enter("optimizer")

    def after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        clock.exit("optimizer")

    step_hooks = [
        register_optimizer_step_pre_hook(before_step),
        register_optimizer_step_post_hook(after_step),
    ]
    try:
        with (
            patched(torch.autograd, "backward", lambda f: timed_call(clock, "backward", f)),
            patched(torch.nn.utils, "clip_grad_norm_", lambda f: timed_call(clock, "optimizer", f)),
        ):
            yield attach
    finally:
        for handle in step_hooks:
            handle.remove()
        forward.remove()
