"""A small OpenAI-compatible HTTP server on loopback, for tests and benchmarks.

It speaks the parts of the API the project calls: ``/v1/chat/completions`` (judges),
``/v1/completions`` with vLLM's extensions (prompt token ids in, sampled token ids and per-token
log-probs out, ``return_token_ids``), ``/v1/models`` and vLLM's runtime LoRA endpoints
``/v1/load_lora_adapter`` / ``/v1/unload_lora_adapter``. Replies come from Python callables, so
a test scripts latency, 429s with ``Retry-After``, or a judge's scores; every request is recorded.
It is a double for what llama.cpp lacks (token ids, LoRA loading), not a model: real generation
in the tests comes from llama.cpp or the in-process policy.

Examples:
    >>> server = LoopbackServer(chat=lambda body: "hello")
    >>> import urllib.request, json
    >>> request = urllib.request.Request(server.base + "/chat/completions", method="POST",
    ...     data=json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode(),
    ...     headers={"Content-Type": "application/json"})
    >>> json.loads(urllib.request.urlopen(request).read())["choices"][0]["message"]["content"]
    'hello'
    >>> server.close()
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator


@dataclass
class Reply:
    """What a handler may return instead of a body: an HTTP status, headers and a JSON body."""

    status: int = 200
    body: dict[str, Any] | None = None
    headers: dict[str, str] | None = None


def chat_body(model: str, text: str, prompt_tokens: int = 0, completion_tokens: int = 0) -> dict[str, Any]:
    """An OpenAI chat.completion body carrying ``text``."""
    return {"id": "loopback", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


class LoopbackServer:
    """An OpenAI-compatible server on 127.0.0.1 (a free port) answering from callables.

    ``chat(body) -> str | Reply`` answers chat completions (a string becomes the assistant's
    message); ``completions(body) -> dict | Reply`` answers ``/v1/completions``; ``latency_s``
    delays every reply. ``requests`` lists ``(path, body, time)`` of everything received;
    ``adapters`` maps each loaded LoRA name to its path.
    """

    def __init__(self, chat: Callable[[dict[str, Any]], Any] | None = None,
                 completions: Callable[[dict[str, Any]], Any] | None = None, latency_s: float = 0.0):
        self.chat, self.completions, self.latency_s = chat, completions, latency_s
        self.requests: list[tuple[str, dict[str, Any], float]] = []
        self.adapters: dict[str, str] = {}
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, reply: Reply) -> None:
                payload = json.dumps(reply.body or {}).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for key, value in (reply.headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    names = ["loopback", *server.adapters]
                    self._send(Reply(body={"object": "list", "data": [{"id": n, "object": "model"} for n in names]}))
                else:
                    self._send(Reply(404, {"error": {"message": f"no route {self.path}"}}))

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError:
                    return self._send(Reply(400, {"error": {"message": "the body is not JSON"}}))
                with server.lock:
                    server.requests.append((self.path, body, time.monotonic()))
                if server.latency_s:
                    time.sleep(server.latency_s)
                try:
                    self._send(server.route(self.path, body))
                except Exception as err:  # a scripted handler's bug is a 500 the client sees, not a hang
                    self._send(Reply(500, {"error": {"message": f"{type(err).__name__}: {err}"}}))

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 128  # the default backlog of 5 drops concurrent connects (a ~1 s SYN retry)

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def route(self, path: str, body: dict[str, Any]) -> Reply:
        path = path.rstrip("/")
        if path.endswith("/load_lora_adapter"):
            name, where = body.get("lora_name"), body.get("lora_path")
            if not name or not where:
                return Reply(400, {"error": {"message": "lora_name and lora_path are required"}})
            with self.lock:
                self.adapters[name] = where
            return Reply(200, {"status": "ok"})
        if path.endswith("/unload_lora_adapter"):
            with self.lock:
                found = self.adapters.pop(body.get("lora_name", ""), None)
            return Reply(200 if found else 404, {"status": "ok" if found else "unknown adapter"})
        if path.endswith("/chat/completions") and self.chat is not None:
            answer = self.chat(body)
            return answer if isinstance(answer, Reply) else Reply(body=chat_body(body.get("model", "loopback"), answer))
        if path.endswith("/completions") and self.completions is not None:
            answer = self.completions(body)
            return answer if isinstance(answer, Reply) else Reply(body=answer)
        return Reply(404, {"error": {"message": f"no route {path}"}})

    def paths(self) -> list[str]:
        with self.lock:
            return [path for path, _, _ in self.requests]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "LoopbackServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the OS's pick)."""
    import socket

    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


@contextmanager
def server_process(command: list[str], health_url: str, cwd: str | None = None, start_timeout_s: float = 120.0,
                   env: dict[str, str] | None = None) -> Iterator[Any]:
    """Run a server command until ``health_url`` answers 200, yield the process, stop it after
    (``rubricgym serve``, an OpenEnv example, a LiteLLM proxy). A server that exits or stays
    silent past ``start_timeout_s`` is an error with the end of its output; while it runs,
    ``process.output_tail()`` reads the end of what it has printed (to report a later crash).

    Examples:
        >>> import sys
        >>> port = free_port()
        >>> with server_process([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        ...                     f"http://127.0.0.1:{port}/") as process:
        ...     process.poll() is None
        True
    """
    import os
    import subprocess
    import tempfile
    import urllib.request

    log = tempfile.TemporaryFile()
    process = subprocess.Popen(command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=env)

    def output_tail(chars: int = 2000) -> str:
        # pread leaves the offset the server shares with this file alone (a seek would move its writes)
        size = os.fstat(log.fileno()).st_size
        start = max(0, size - 4 * chars)
        return os.pread(log.fileno(), size - start, start).decode(errors="replace")[-chars:]

    process.output_tail = output_tail
    deadline = time.monotonic() + start_timeout_s
    try:
        while True:
            try:
                with urllib.request.urlopen(health_url, timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{command[:4]} did not answer {health_url} within {start_timeout_s:.0f} s: "
                                   f"{output_tail()}")
            time.sleep(0.2)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
