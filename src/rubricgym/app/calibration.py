"""``rubricgym judge-eval --calibrate``: a judge's error profile on a labelled set.

A judge is read as RULER reads it on groups whose gold is known (the held-out math groups, whose
gold is the verifier's; an LLMBar subset; any ``groups.jsonl``), each group in its recorded and
in its reversed presentation order. The profile gives what the judge-noise literature models a
judge by: the false-positive and false-negative rates of its implied pass / fail (a score at or
above ``threshold`` passes; a member is good when its gold is the group's best), with Wilson 95 %
intervals; the pairwise accuracy in each order, and over the pairs whose better answer was shown
first and second (``position``; their gap, ``position_gap``, is order-following or position bias),
with bootstrap intervals; tied pairs and failed groups. It is written as JSON, the file
corrections read (``--judge-correction``, :mod:`rubricgym.judges.correction`).

Examples:
    >>> profile = judge_profile("oracle:fp=0.3,fn=0.05", groups="math", limit=8, progress=False)  # doctest: +SKIP
    >>> profile["false_positive"]["rate"], profile["pairwise"]["recorded"]["accuracy"]            # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from rubricgym.app.stats import mean_interval, wilson

#: what ``--groups`` names besides a file: the built-in held-out math groups, an LLMBar subset
LLMBAR_PREFIX = "llmbar:"


def labelled_env(groups: str, order: str, limit: int = 0):
    """``JudgeGroup-v0`` on the labelled set ``groups`` in presentation ``order``."""
    from rubricgym.envs.judge import JudgeGroupEnv

    if groups == "math":
        return JudgeGroupEnv(groups="math", split="test", order=order, max_groups=limit)
    if groups.startswith(LLMBAR_PREFIX):
        from rubricgym.app.llmbar import load_pairs

        return JudgeGroupEnv(groups=load_pairs(groups[len(LLMBAR_PREFIX):]), order=order, max_groups=limit)
    return JudgeGroupEnv(groups=groups, order=order, max_groups=limit)


def judge_profile(judge: Any, groups: str = "math", limit: int = 0, scoring: str = "sampled", threshold: float = 0.5,
                  max_tokens: int = 128, progress: bool = True) -> dict[str, Any]:
    """The error profile of ``judge`` on ``groups`` (see the module docstring)."""
    from rubricgym.app.judge_training import ruler_pairwise

    pairwise, members, pairs, ties, failed, read_groups = {}, [], [], 0, 0, 0
    for order in ("recorded", "reversed"):
        read = ruler_pairwise(judge, labelled_env(groups, order, limit), progress=progress, max_tokens=max_tokens,
                              scoring=scoring)
        interval = mean_interval(read["per_group"])
        pairwise[order] = {"accuracy": read["pairwise"], "low": interval.low, "high": interval.high}
        members += read["member_scores"]
        pairs += read["pairs"]
        ties, failed, read_groups = ties + read["tied_pairs"], failed + read["failed"], read_groups + read["groups"]
    good = [score >= threshold for score, best in members if best]
    bad = [score >= threshold for score, best in members if not best]

    def rate(errors: int, n: int) -> dict[str, float]:
        low, high = wilson(errors, n)
        return {"rate": errors / n if n else float("nan"), "low": low, "high": high, "members": n}

    def accuracy(agreements: list[float]) -> dict[str, float]:
        interval = mean_interval(agreements)
        return {"accuracy": interval.mean, "low": interval.low, "high": interval.high, "pairs": len(agreements)}

    # by where the better answer stood: an order-following judge is right when it stood first, wrong second
    position = {"good_first": accuracy([a for first, a in pairs if first]),
                "good_second": accuracy([a for first, a in pairs if not first])}
    name = judge if isinstance(judge, str) else str(getattr(judge, "name", judge))
    return {"judge": name, "groups": groups, "scoring": scoring, "threshold": threshold, "read_groups": read_groups,
            "false_positive": rate(sum(bad), len(bad)), "false_negative": rate(len(good) - sum(good), len(good)),
            "pairwise": pairwise, "position": position,
            "position_gap": position["good_first"]["accuracy"] - position["good_second"]["accuracy"],
            "tied_pairs": ties, "failed_groups": failed}


def profile_line(profile: dict[str, Any]) -> str:
    """One report line of a profile."""
    fp, fn, rec, rev = (profile["false_positive"], profile["false_negative"], profile["pairwise"]["recorded"],
                        profile["pairwise"]["reversed"])
    first, second = profile["position"]["good_first"], profile["position"]["good_second"]
    return (f"{profile['judge']} on {profile['groups']} ({profile['read_groups']} group readings): "
            f"FP {fp['rate']:.3f} [{fp['low']:.2f}, {fp['high']:.2f}] of {fp['members']} bad, "
            f"FN {fn['rate']:.3f} [{fn['low']:.2f}, {fn['high']:.2f}] of {fn['members']} good, "
            f"pairwise recorded {rec['accuracy']:.3f} [{rec['low']:.2f}, {rec['high']:.2f}] / reversed {rev['accuracy']:.3f} "
            f"[{rev['low']:.2f}, {rev['high']:.2f}], better shown first {first['accuracy']:.3f} [{first['low']:.2f}, "
            f"{first['high']:.2f}] / second {second['accuracy']:.3f} [{second['low']:.2f}, {second['high']:.2f}], "
            f"ties {profile['tied_pairs']}, failed {profile['failed_groups']}")
