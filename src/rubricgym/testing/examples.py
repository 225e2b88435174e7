"""The shared worked examples that tests and benchmarks read (not library code)."""

from __future__ import annotations

import json

from rubricgym.data import shared_data_dir


def load_refund_group(system_prompt: str = "strict") -> tuple[list[str], list[list[dict[str, str]]]] | None:
    """The shared refund example (``../shared/examples/refund_group.json``) as message lists.

    Returns the answer labels in their published order (best first) and one
    system / user / assistant conversation per answer; None when the shared folder is absent.
    """
    data_dir = shared_data_dir()
    path = data_dir.parent / "examples" / "refund_group.json" if data_dir else None
    if path is None or not path.is_file():
        return None
    data = json.loads(path.read_text())
    user = data["user_template"].format(question=data["question"], context=data["context"])
    labels = list(data["expected_order"])
    return labels, [[{"role": "system", "content": data["system_prompts"][system_prompt]}, {"role": "user", "content": user},
                     {"role": "assistant", "content": data["responses"][label]}] for label in labels]
