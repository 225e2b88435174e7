"""Reference answers from MATH-500 and AIME 2024 are accepted; perturbed ones are refused.

The rates are printed (run with ``-s``) so the closing notes can quote them.
"""

import re

import gymnasium as gym
import pytest

import rubricgym  # noqa: F401
from rubricgym.envs.math.grader import _math_verify


def perturb(answer: str) -> str | None:
    """Change every number in the answer (n -> n + 1); None when it has no digits."""
    if not re.search(r"\d", answer):
        return None
    return re.sub(r"\d+", lambda m: str(int(m.group()) + 1), answer)


def reply(answer: str) -> str:
    return f"Working through the steps carefully, we combine the results.\nTherefore the final answer is $\\boxed{{{answer}}}$."


@pytest.mark.parametrize("name", ["math500", "aime2024"])
def test_reference_accepted_and_perturbed_rejected(name, shared_data):
    env = gym.make("Math-v0", dataset=name, disable_env_checker=True)
    tasks = env.unwrapped.tasks
    accepted, rejected, perturbed_total, verify_only = 0, 0, 0, 0
    misses, false_accepts = [], []
    for task in tasks:
        env.reset(options={"task_id": task.id})
        _, reward, *_, info = env.step(reply(task.answer))
        if reward == 1.0:
            accepted += 1
        else:
            misses.append((task.id, task.answer, info["extracted_answer"]))
        verify_only += _math_verify(task.answer, task.answer, 2)
        wrong = perturb(task.answer)
        if wrong is not None:
            perturbed_total += 1
            env.reset(options={"task_id": task.id})
            _, reward, *_ = env.step(reply(wrong))
            if reward == -1.0:
                rejected += 1
            else:
                false_accepts.append((task.id, task.answer, wrong))
    n = len(tasks)
    print(f"\n{name}: reference accepted {accepted}/{n} = {accepted / n:.4f}; "
          f"math-verify alone (no string match) accepts {verify_only}/{n}; "
          f"perturbed rejected {rejected}/{perturbed_total} = {rejected / perturbed_total:.4f}")
    print(f"{name}: false accepts: {false_accepts}")
    assert misses == []
    assert verify_only == n  # math-verify alone agrees: the string fast path is a shortcut, not a crutch
    assert false_accepts == [] and rejected == perturbed_total
