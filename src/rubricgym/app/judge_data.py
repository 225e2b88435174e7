"""Data for judge training: groups of a policy's own episodes with their verified outcome, and a
teacher's judgements of them as supervised rows.

``record_groups`` plays groups of any registered id with a policy (the default model unless one
is given) and writes them as ``groups.jsonl`` rows, the format ``rubricgym view`` reads and the
``JudgeGroup`` family trains on (each trajectory keeps its ``correct`` flag, the gold).
``teacher_rows`` turns groups into (judge prompt, teacher reply) rows for supervised
distillation: the prompt is exactly what RULER sends, the reply the JSON a judge would write.

Examples:
    >>> from rubricgym.app.judge_data import record_groups
    >>> record_groups("Math-v0", {"levels": (1,)}, groups=8, group_size=4, out="groups.jsonl")  # doctest: +SKIP
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rubricgym.registration import training_kwargs


def record_groups(env_id: str, env_kwargs: dict[str, Any], groups: int, group_size: int, out: str | Path,
                  seed: int = 0, policy: Any = None, groups_per_batch: int = 8, max_new_tokens: int | None = None,
                  progress: bool = True) -> Path:
    """Play ``groups`` groups of ``group_size`` episodes of ``env_id`` (sampled at the policy's
    temperature) and append them to ``out`` as ``groups.jsonl`` rows; returns ``out``."""
    from tqdm import tqdm

    from rubricgym.agents.evaluation import make_envs
    from rubricgym.agents.logs import group_row
    from rubricgym.agents.policy import Policy, PolicyConfig
    from rubricgym.agents.rollout import collect_rollouts

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    policy = policy or Policy(PolicyConfig(lora_r=0, **({"max_new_tokens": max_new_tokens} if max_new_tokens else {})))
    per_batch = max(1, min(groups_per_batch, groups))
    envs = make_envs(env_id, per_batch * group_size, group_size, training_kwargs(env_id, env_kwargs))
    written = 0
    try:
        with tqdm(total=groups, desc=f"recording {env_id} groups", unit="group", disable=not progress) as bar, \
                open(out, "a", encoding="utf-8") as handle:
            while written < groups:
                batch = collect_rollouts(envs, policy, seed=seed + written, generation_seed=seed + 104_729 * written)
                for group in batch.groups[: groups - written]:
                    handle.write(json.dumps(group_row(group, None, f"record_groups {env_id} seed={seed}")) + "\n")
                    written += 1
                    bar.update(1)
                handle.flush()
    finally:
        envs.close()
    return out
