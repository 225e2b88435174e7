"""Reference-guided RULER (``<Family>RulerRef-v0``): the judge also reads the episode's reference answer.

MT-Bench's reference-guided grading showed that an LLM judge grades maths and reasoning far
better when it is given a reference solution to compare with, instead of solving the problem
itself. This scheme is RULER with that one change: each group's judge prompt carries the task's
reference answer (``EpisodeResult.reference``, which the env records and never shows the agent)
inside the rubric, as the standard a correct answer must agree with. Everything else (one call
per group, shared prefix, ids, clamping, fallback) is RULER's.

It is derived for every family whose env records a reference (overrides
:meth:`rubricgym.chatenv.ChatEnv.reference`), with RULER's default combination (sum); a group
whose members carry no reference is judged as plain RULER would judge it.

Examples:
    >>> import gymnasium as gym, rubricgym
    >>> env = gym.make("MathRulerRef-v0", judge="oracle:1.0", levels=(1,))
    >>> obs, info = env.reset(seed=0)
    >>> obs, reward, terminated, truncated, info = env.step("\\\\boxed{6}")
    >>> terminated, info["reward_components"]["ruler"]
    (True, 1.0)
    >>> scheme = rubricgym.registration.scheme_of("MathRulerRef-v0")
    >>> scheme.name, scheme.suffix, "WordSortRulerRef-v0" in rubricgym.ENVS, "ToolUseRulerRef-v0" in rubricgym.ENVS
    ('ruler_ref', 'RulerRef', True, False)
"""

from __future__ import annotations

from functools import partial
from typing import Sequence

from rubricgym.chatenv import ChatEnv
from rubricgym.judges.base import Member
from rubricgym.judges.ruler import RulerConfig, RulerScorer, with_reference

from .ruler import RULER, ruler_scorer
from .scheme import RewardScheme


class ReferenceRulerScorer(RulerScorer):
    """RULER whose rubric names each group's reference answer (see the module docstring)."""

    name = "ruler"  # the same components and info keys as RULER: tables and viewers read them alike

    def group_config(self, members: Sequence[Member]) -> RulerConfig:
        return with_reference(self.config, next((m.episode.reference for m in members if m.episode.reference), None))


def records_reference(env_class: type) -> bool:
    """Families whose env overrides :meth:`ChatEnv.reference` (they have reference answers)."""
    return isinstance(env_class, type) and issubclass(env_class, ChatEnv) and env_class.reference is not ChatEnv.reference


RULER_REF = RewardScheme(
    name="ruler_ref", suffix="RulerRef", summary="reference-guided RULER: the judge also sees the reference answer",
    knobs=RULER.knobs, build_scorer=partial(ruler_scorer, scorer_class=ReferenceRulerScorer), judge_knob="judge", defaults=dict(RULER.defaults),
    derive=records_reference)
"""``<Family>RulerRef-v0`` for every family with reference answers."""
