"""rubricgym over OpenEnv: every registered id served, and any OpenEnv server played as a Gymnasium env.

* :mod:`rubricgym.openenv.client`: ``OpenEnv-v0`` (a Gymnasium env that plays a server's sessions)
  and ``served_variant`` (an id's rollouts played on servers), what the trainer and the TRL / verl
  adapters reach instead of a family module;
* :mod:`rubricgym.openenv.server`: ``rubricgym serve`` (one registered id as an OpenEnv server;
  needs the ``openenv`` extra, imported only here).
"""

#: the environment variable that holds a served id's shared token: ``rubricgym serve`` requires it
#: of every client when set (or given as ``--token``), and ``OpenEnv-v0`` sends it
TOKEN_ENV = "RUBRICGYM_SERVE_TOKEN"


def auth_headers(token: str | None = None) -> dict[str, str]:
    """The header that carries ``token`` (None: the one in :data:`TOKEN_ENV`, if set)."""
    import os

    token = token if token is not None else os.environ.get(TOKEN_ENV)
    return {"Authorization": f"Bearer {token}"} if token else {}
