"""rubricgym over OpenEnv: every registered id served, and any OpenEnv server played as a Gymnasium env.

* :mod:`rubricgym.openenv.client`: ``OpenEnv-v0`` (a Gymnasium env that plays a server's sessions)
  and ``served_variant`` (an id's rollouts played on servers), what the trainer and the TRL / verl
  adapters reach instead of a family module;
* :mod:`rubricgym.openenv.server`: ``rubricgym serve`` (one registered id as an OpenEnv server;
  needs the ``openenv`` extra, imported only here).
"""
