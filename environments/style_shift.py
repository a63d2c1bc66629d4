"""StyleShift-v0: the paper's online-learning experiment (SAO, section 4.5) in miniature.

The agent writes one short line about a topic, in one of the styles offered by the prompt. A judge
scores ``quality`` (a well-formed line on the topic, in an offered style) and ``style`` (the style
is the preferred one), both binary; the reward is their product. The prompt never says which style
is preferred: the agent learns it from reward, and must relearn it when the preference drifts
(cute -> chuunibyou -> classical in the paper) while the offered pool changes too.

Style detection is rule based and unambiguous: a line shows a style when it holds a marker of that
style and of no other (none -> ``"none"``, several -> ``"mixed"``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from sao_online.drift_schedules.space import Choice
from sao_online.environments.base import DriftingTextEnv, TurnResult, is_printable

STYLES: tuple[str, ...] = ("academic", "cute", "chuunibyou", "classical")

#: Drift value of ``pool`` -> the styles the prompt offers, in prompt order.
POOLS: dict[str, tuple[str, ...]] = {
    "academic_cute_chuunibyou": ("academic", "cute", "chuunibyou"),
    "classical_cute_chuunibyou": ("classical", "cute", "chuunibyou"),
}

TOPICS: tuple[str, ...] = (
    "rain",
    "cats",
    "tea",
    "moon",
    "river",
    "bread",
    "snow",
    "music",
    "trains",
    "books",
    "coffee",
    "gardens",
    "stars",
    "clocks",
    "bees",
    "ocean",
    "lamps",
    "maps",
    "bells",
    "foxes",
)

#: Distinctive markers of each style, matched case-insensitively as whole words.
STYLE_MARKERS: dict[str, tuple[str, ...]] = {
    "academic": ("furthermore", "hypothesis", "empirically", "notably"),
    "cute": ("nya~", "uwu", "(^_^)", "teehee"),
    "chuunibyou": ("dark flame", "sealed eye", "kukuku"),
    "classical": ("thee", "thou", "hath", "doth"),
}

#: The oracle's lines: short, the marker first, so a tiny byte-level model can learn them.
TEMPLATES: dict[str, tuple[str, ...]] = {
    "academic": (
        "Furthermore, we study {topic} closely.",
        "Empirically, we observe {topic} daily.",
        "Notably, little is known of {topic}.",
    ),
    "cute": (
        "Nya~ I love {topic} so much!",
        "Uwu, {topic} for me? Yay!",
        "Teehee, {topic} time! (^_^)",
    ),
    "chuunibyou": (
        "Kukuku, my dark flame consumes {topic}.",
        "My sealed eye sees through {topic}.",
        "Kukuku, I alone command {topic}.",
    ),
    "classical": (
        "Thou art lovelier than {topic}.",
        "Hath aught a charm like {topic}?",
        "I sing of {topic} to thee.",
    ),
}

MIN_LINE_BYTES = 8
MAX_LINE_BYTES = 60

#: ``judge(text, topic, pool, preferred) -> (quality, style)``, each a number in [0, 1].
Judge = Callable[[str, str, Sequence[str], str], tuple[float, float]]


def _holds_marker(lowered: str, marker: str) -> bool:
    # A marker's letters must not continue a longer word ("thou" is not in "though"). str.find
    # keeps this fast on huge actions, where a regex with look-arounds was not.
    start = lowered.find(marker)
    while start != -1:
        end = start + len(marker)
        before_ok = not (marker[0].isalpha() and start > 0 and lowered[start - 1].isalpha())
        after_ok = not (marker[-1].isalpha() and end < len(lowered) and lowered[end].isalpha())
        if before_ok and after_ok:
            return True
        start = lowered.find(marker, start + 1)
    return False


def detect_style(text: str) -> str:
    """The style ``text`` shows: one of :data:`STYLES`, ``"none"`` or ``"mixed"``.

    Example:
        >>> detect_style("Nya~ rain is fun"), detect_style("Thou uwu"), detect_style("Rain.")
        ('cute', 'mixed', 'none')
    """
    lowered = text.lower()
    found = [
        style
        for style, markers in STYLE_MARKERS.items()
        if any(_holds_marker(lowered, marker) for marker in markers)
    ]
    if not found:
        return "none"
    return found[0] if len(found) == 1 else "mixed"


def mentions_topic(text: str, topic: str) -> bool:
    """True when ``text`` holds ``topic`` as a whole word (case-insensitive)."""
    return _holds_marker(text.lower(), topic.lower())


def line_problem(text: str, topic: str, pool: Sequence[str]) -> str | None:
    """Why ``text`` fails the quality bar, or None when it passes.

    The bar: printable ASCII, one line, :data:`MIN_LINE_BYTES` to :data:`MAX_LINE_BYTES` bytes
    once surrounding whitespace is stripped, mentions ``topic``, and shows a style from ``pool``.
    """
    line = text.strip()
    size = len(line.encode("utf-8", errors="replace"))
    if not MIN_LINE_BYTES <= size <= MAX_LINE_BYTES:
        return f"length {size} outside {MIN_LINE_BYTES}..{MAX_LINE_BYTES} bytes"
    if not is_printable(line):
        return "not printable ASCII"
    if "\n" in line:
        return "more than one line"
    if not mentions_topic(line, topic):
        return f"topic '{topic}' not mentioned"
    style = detect_style(line)
    if style not in pool:
        return f"style {style} not offered"
    return None


def rule_judge(text: str, topic: str, pool: Sequence[str], preferred: str) -> tuple[float, float]:
    """The default judge: (quality, style), each 0.0 or 1.0.

    Args:
        text: the agent's line.
        topic: the topic word of the prompt.
        pool: the styles offered.
        preferred: the rewarded style.
    """
    quality = float(line_problem(text, topic, pool) is None)
    style = float(detect_style(text.strip()) == preferred)
    return quality, style


class StyleShiftEnv(DriftingTextEnv):
    """Write one short line about a topic in the (hidden) preferred style.

    Drift:
        ``preferred``: the rewarded style. ``pool``: the styles the prompt offers. When the
        preferred style is not offered, nothing scores (ceiling 0): such regimes exist only
        transiently, e.g. while one parameter has moved and the other has not yet.

    Info:
        reset: ``topic``, ``pool`` (tuple of styles). End of episode: ``style`` (detected),
        ``quality``, ``style_match``, ``behavior`` (== ``style``).

    Args:
        judge: replaces :func:`rule_judge` (e.g. an LLM judge); the behaviour label still comes
            from the rule-based :func:`detect_style`, and :meth:`oracle_reward` stays the
            rule judge's ceiling.
    """

    description: ClassVar[str] = (
        "Write one short line about a topic in the hidden preferred style (drifts with the pool)."
    )
    drift_space: ClassVar[dict[str, Choice]] = {
        "preferred": Choice(STYLES, help="the style the judge rewards"),
        "pool": Choice(tuple(POOLS), help="the styles the prompt offers"),
    }
    max_action_length: ClassVar[int] = 256

    def __init__(self, judge: Judge | None = None) -> None:
        super().__init__()
        if judge is not None and not callable(judge):
            raise ValueError(f"judge: expected a callable, got {type(judge).__name__}")
        self.judge: Judge = judge if judge is not None else rule_judge
        self._topic = TOPICS[0]

    def _begin_episode(self) -> tuple[str, dict[str, Any]]:
        self._topic = TOPICS[int(self.np_random.integers(len(TOPICS)))]
        pool = POOLS[self._theta["pool"]]
        prompt = f"Write one short line about {self._topic}. Styles: {', '.join(pool)}."
        return prompt, {"topic": self._topic, "pool": pool}

    def _respond(self, action: str) -> TurnResult:
        pool = POOLS[self._theta["pool"]]
        quality, style_score = self._judge(action, pool)
        style = detect_style(action.strip())
        problem = line_problem(action, self._topic, pool)
        verdict = f"style: {style}; quality: {quality:g}"
        if problem is not None and self.judge is rule_judge:
            verdict += f" ({problem})"
        return TurnResult(
            observation=verdict,
            reward=quality * style_score,
            terminated=True,
            behavior=style,
            info={
                "topic": self._topic,
                "pool": pool,
                "style": style,
                "quality": quality,
                "style_match": style_score,
            },
        )

    def _judge(self, action: str, pool: tuple[str, ...]) -> tuple[float, float]:
        scores = self.judge(action, self._topic, pool, self._theta["preferred"])
        if not (isinstance(scores, tuple | list) and len(scores) == 2):
            raise ValueError(f"judge returned {scores!r}; expected a (quality, style) pair")
        checked = []
        for name, score in zip(("quality", "style"), scores):
            if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
                raise ValueError(f"judge returned {name}={score!r}; expected a number in [0, 1]")
            checked.append(float(score))
        return checked[0], checked[1]

    def demonstration(
        self, observation: str, info: Mapping[str, Any], style: str, variant: int | None = None
    ) -> str:
        """A competent line in ``style`` about the episode's topic (for the warm start).

        Args:
            observation: the prompt (unused: the topic is read from ``info``).
            info: the reset info (its ``topic`` is used).
            style: one of :data:`STYLES`.
            variant: which template; by default one fixed per topic, so demonstrations vary
                across prompts but the oracle stays deterministic.

        Raises:
            ValueError: an unknown style.
        """
        if style not in TEMPLATES:
            raise ValueError(f"style: {style!r} is not one of {', '.join(STYLES)}")
        topic = info["topic"]
        templates = TEMPLATES[style]
        if variant is None:
            variant = TOPICS.index(topic) if topic in TOPICS else 0
        return templates[variant % len(templates)].format(topic=topic)

    def demonstration_action(self, observation: str, info: dict[str, Any]) -> str:
        """A competent line in a style drawn uniformly from the offered pool, any template."""
        pool = info["pool"]
        style = pool[int(self.np_random.integers(len(pool)))]
        variant = int(self.np_random.integers(len(TEMPLATES[style])))
        return self.demonstration(observation, info, style, variant)

    def oracle_action(self, observation: str, info: dict[str, Any]) -> str:
        """A line in the preferred style (reads the regime from ``info["theta"]``)."""
        return self.demonstration(observation, info, info["theta"]["preferred"])

    def oracle_reward(self, theta: Mapping[str, Any]) -> float:
        """1.0 when the preferred style is offered, else 0.0 (under :func:`rule_judge`)."""
        resolved = self.complete_theta(theta)
        return float(resolved["preferred"] in POOLS[resolved["pool"]])
