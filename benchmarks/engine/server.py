"""One ``vllm serve`` in a subprocess on a loopback port: start, wait for
``/health`` (bounded), send completions, scrape ``/metrics``, stop.

Only the standard library: the harness runs in the same interpreter as vLLM
but imports none of it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

HOST = "127.0.0.1"
MODEL_NAME = "tiny-dsv4"
# Loopback only, never through a proxy: an ``http_proxy`` in the environment
# (common on GPU hosts) would otherwise take every request, /health included.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


_GIVEN: set[int] = set()


def free_port() -> int:
    """A loopback port no one listens on now and that this process has not
    handed out before. The kernel may give the same free port twice in a
    row; two servers started together on one port would answer for each
    other (the second dies on bind while the first answers its /health)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((HOST, 0))
            port = s.getsockname()[1]
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port


def serve_command(model_dir: Path, port: int, *, speculative: dict | None,
                  max_model_len: int, gpu_memory_utilization: float,
                  tensor_parallel_size: int = 1, enforce_eager: bool = False,
                  distributed_executor_backend: str | None = None,
                  max_num_seqs: int = 16,
                  cudagraph_capture_sizes: tuple[int, ...] | None = None,
                  kv_cache_memory_bytes: int | None = None,
                  max_num_batched_tokens: int | None = None,
                  prefix_caching: bool = True) -> list[str]:
    """``vllm serve``, spelled through the module so that a ``--target``
    install without the console script works the same."""
    command = [
        sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", str(model_dir),
        "--host", HOST, "--port", str(port),
        "--served-model-name", MODEL_NAME,
        "--load-format", "dummy",
        "--kv-cache-dtype", "fp8",  # required by DeepSeek-V4's FlashMLA path
        "--max-model-len", str(max_model_len),
        "--max-num-seqs", str(max_num_seqs),
        "--gpu-memory-utilization", str(gpu_memory_utilization),
    ]
    if enforce_eager:  # else vLLM's default: CUDA graphs captured
        command.append("--enforce-eager")
    if tensor_parallel_size > 1:
        command += ["--tensor-parallel-size", str(tensor_parallel_size)]
    if cudagraph_capture_sizes:  # else vLLM's own list (many sizes at 64 sequences)
        command += ["--cudagraph-capture-sizes", *map(str, cudagraph_capture_sizes)]
    if kv_cache_memory_bytes:  # else sized from the memory free while profiling
        command += ["--kv-cache-memory-bytes", str(kv_cache_memory_bytes)]
    if max_num_batched_tokens:  # else vLLM's default (8192 here)
        command += ["--max-num-batched-tokens", str(max_num_batched_tokens)]
    if not prefix_caching:  # every round prefills its prompts in full
        command.append("--no-enable-prefix-caching")
    if distributed_executor_backend:  # else vLLM's choice (mp on one node)
        command += ["--distributed-executor-backend", distributed_executor_backend]
    if speculative is not None:
        command += ["--speculative-config", json.dumps(speculative)]
    return command


class Server:
    """A server process group listening on ``port``, its log in ``log_path``."""

    def __init__(self, command: list[str], env: dict[str, str], log_path: Path, port: int):
        self.command, self.env, self.log_path, self.port = command, env, Path(log_path), port
        self.proc: subprocess.Popen | None = None
        self.started_at = 0.0
        self.last_health_error: str | None = None

    def __enter__(self) -> Server:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "wb")
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(
            self.command, env=self.env, stdout=log, stderr=subprocess.STDOUT,
            # Its own process group (to stop it whole), in the caller's
            # session: whatever ends the caller's session ends it too.
            stdin=subprocess.DEVNULL, process_group=0,
        )
        log.close()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _url(self, path: str) -> str:
        return f"http://{HOST}:{self.port}{path}"

    def wait_healthy(self, timeout_s: float) -> float | None:
        """Seconds from start to the first 200 on ``/health``; None if the
        process exited or ``timeout_s`` passed first."""
        deadline = self.started_at + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return None
            try:
                with _OPENER.open(self._url("/health"), timeout=5) as r:
                    ok = r.status == 200
                # A 200 counts only while our process still runs: another
                # process may hold the port after ours failed to bind it.
                if ok and self.proc.poll() is None:
                    return time.monotonic() - self.started_at
                if not ok:
                    self.last_health_error = f"HTTP {r.status}"
            except (urllib.error.URLError, OSError) as exc:
                self.last_health_error = repr(exc)
            time.sleep(1.0)
        return None

    def complete(self, prompts: list[str], max_tokens: int, timeout_s: float = 300,
                 token_ids: bool = False, top_logprobs: int = 0) -> dict:
        """One greedy ``/v1/completions`` call for ``prompts``; exactly
        ``max_tokens`` tokens each (``ignore_eos``). ``token_ids``: each
        choice's ``logprobs.tokens`` as ``token_id:N``, with the
        ``top_logprobs`` most likely ids and their log-probabilities at each
        position."""
        request_body = {
            "model": MODEL_NAME, "prompt": prompts, "max_tokens": max_tokens,
            "temperature": 0.0, "ignore_eos": True,
        }
        if token_ids:
            request_body.update(logprobs=top_logprobs, return_tokens_as_token_ids=True)
        body = json.dumps(request_body).encode()
        request = urllib.request.Request(
            self._url("/v1/completions"), data=body,
            headers={"Content-Type": "application/json"},
        )
        with _OPENER.open(request, timeout=timeout_s) as r:
            return json.loads(r.read())

    def metrics_text(self) -> str:
        with _OPENER.open(self._url("/metrics"), timeout=30) as r:
            return r.read().decode()

    def stop(self, grace_s: float = 30) -> int | None:
        """SIGINT to the whole process group, SIGKILL after ``grace_s``;
        waits until the group is gone (the GPU is free for the next one).
        Interrupted itself (a second stop signal), it kills the group at once
        rather than leave a server running."""
        if self.proc is None:
            return None
        pgid = self.proc.pid
        try:
            for sig, wait_s in ((signal.SIGINT, grace_s), (signal.SIGKILL, 30)):
                try:
                    os.killpg(pgid, sig)
                except ProcessLookupError:
                    break
                deadline = time.monotonic() + wait_s
                while time.monotonic() < deadline and _group_alive(pgid):
                    self.proc.poll()
                    time.sleep(0.5)
                if not _group_alive(pgid):
                    break
        except BaseException:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            raise
        return self.proc.wait()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
