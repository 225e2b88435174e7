"""Compare reward schemes side by side (see rubricgym.app.bench): a markdown table and PNG
learning curves under benchmarks/results/, each with the command that produced it.

    python benchmarks/reward_schemes.py                    # default CPU run (math + RAG)
    python benchmarks/reward_schemes.py --quick            # under 10 minutes on CPU
    python benchmarks/reward_schemes.py --judge openai/smollm2 --api-base http://127.0.0.1:8000/v1

Ends with ``RESULT schemes=<n> <suite>:<scheme>=<held-out after> ...``.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from rubricgym.app.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
