"""The bench's rows: what each row trains (an id and its knobs, from one start), derived from
the registry for a family (the env's own reward, the controls, then every registered variant)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rubricgym.registration import ENVS, SCHEMES, base_env_id, env_class


@dataclass(frozen=True)
class BenchRow:
    """One row of a family's table: the id trained and the knobs that make this row."""

    name: str
    env_id: str
    knobs: dict[str, Any] = field(default_factory=dict)
    """Env knobs of this row; a judge knob named here (``verifier``, ``judge``) wins over the bench's judge."""
    adapter: str | None = None
    """A checkpoint whose LoRA weights this row's policy starts from (a cold start); the held-out
    score before training stays the untrained weights' (gains are over the same start for every row)."""


CONTROLS = ("random", "format")
"""Control schemes (``wrappers/controls.py``): listed first after the reference row."""


def bench_envs() -> tuple[str, ...]:
    """The base ids of the default bench (families whose training defaults ask for it)."""
    return tuple(info.id for info in ENVS.values() if info.base is None and env_class(info.id).training.bench)


def bench_rows(env_id: str) -> list[BenchRow]:
    """The env's own reward, then every registered variant of the family (see the module docstring).

    Examples:
        >>> import rubricgym
        >>> rows = bench_rows("WordSort-v0")
        >>> rows[0].name, {"rubric", "ruler", "ruler+env"} <= {row.name for row in rows}
        ('env', True)
    """
    base = base_env_id(env_id)
    reward_name = env_class(base).training.reward_name
    rows = [BenchRow(reward_name, base)]
    # the controls right beside the env's own reward (a scheme that does not beat them has shown nothing)
    variants = sorted((info for info in ENVS.values() if info.base == base),
                      key=lambda info: (info.scheme not in CONTROLS, CONTROLS.index(info.scheme) if info.scheme in CONTROLS else 0))
    for info in variants:
        scheme = SCHEMES[info.scheme]
        if scheme.judge_knob and scheme.combines:
            rows += [BenchRow(scheme.name, info.id, {"combine": "replace"}), BenchRow(f"{scheme.name}+{reward_name}", info.id)]
        else:
            rows.append(BenchRow(scheme.name, info.id))
    return rows
