"""rubricgym inside other trainers: TRL's GRPOTrainer (:mod:`rubricgym.integrations.trl`) and
verl's agent loops and reward stage (:mod:`rubricgym.integrations.verl`).

Both play episodes through the env loop (``reset`` / ``step``) and hand the trainer one token
sequence per episode: the first prompt, then the model's turns (mask 1) and the env's turns
(tool results, feedback; mask 0), built by :class:`~rubricgym.integrations.transcript.TokenTranscript`.
"""
