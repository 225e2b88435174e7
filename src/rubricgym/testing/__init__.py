"""Test doubles and shared examples, for tests, benchmarks and users' own tests (not used by
the library itself):

* :mod:`.loopback`: a small OpenAI-compatible server on loopback (scripted judges, a vLLM-API
  double with token ids and runtime LoRA endpoints, latency, 429s);
* :mod:`.hostile`: a hostile agent, a faulty judge and sandbox escape attempts (the fuzz
  benchmark and the property tests);
* :mod:`.examples`: the shared refund-policy group as message lists;
* :mod:`.tiny`: a tiny random Llama with the default tokenizer, built offline from a seed, for
  plumbing tests that need a model but not its answers.
"""

from .examples import load_refund_group
from .hostile import ESCAPES, FaultyJudge, FuzzReport, fuzz_env, hostile_action, try_escapes
from .loopback import LoopbackServer, Reply, chat_body
from .tiny import TinyModelConfig, tiny_model, tiny_model_dir

__all__ = ["ESCAPES", "FaultyJudge", "FuzzReport", "LoopbackServer", "Reply", "chat_body", "fuzz_env", "hostile_action",
           "load_refund_group", "tiny_model", "tiny_model_dir", "TinyModelConfig", "try_escapes"]
