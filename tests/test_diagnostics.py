"""Reward diagnostics of a step (agents/diagnostics.py) on hand-made groups: the spread, the
silent groups and the reward's agreement with the verifier."""

from __future__ import annotations

import pytest

from rubricgym.agents.diagnostics import reward_diagnostics
from rubricgym.records import EpisodeResult, Group, Trajectory


def group(*members) -> Group:
    return Group(trajectories=[Trajectory(reward=r, episode=None if c is None else EpisodeResult(task_id="t", specification="", task="", correct=c, reward=r))
                               for r, c in members])


def test_a_judge_that_follows_the_verifier_agrees_and_one_against_it_does_not():
    follows = reward_diagnostics([group((0.9, True), (0.1, False), (0.8, True))])
    assert follows["reward_verifier_agreement"] == 1.0 and follows["zero_variance_fraction"] == 0.0
    against = reward_diagnostics([group((0.1, True), (0.9, False))])
    assert against["reward_verifier_agreement"] == 0.0 and against["group_reward_std"] == pytest.approx(0.4)


def test_silent_groups_ties_and_groups_without_a_verifier():
    stats = reward_diagnostics([group((0.5, True), (0.5, False)), group((1.0, None), (0.0, None)), group((0.3, True))])
    assert stats["zero_variance_fraction"] == 0.5  # the group of one tells nothing and is left out
    assert stats["reward_verifier_agreement"] == 0.5  # a tie on the one pair the verifier orders
    assert "reward_verifier_agreement" not in reward_diagnostics([group((1.0, None), (0.0, None))])
    assert "reward_verifier_agreement" not in reward_diagnostics([group((1.0, True), (0.0, True))])
    assert reward_diagnostics([]) == {}
