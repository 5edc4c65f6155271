"""``diagnose`` on what a deployment's log shows beyond one clean start: how
a start ended (a failure reported, a container or service killed, a client
that went away), who is in the log (the ranks of the model, two replicas'
lines mixed) and how a process's lines were written (a JSON logging config
behind vLLM's process prefix). Each case is one a reviewer who had not read
these tests found read wrong (most as exit 0), each test failing on the
source before its rule was fixed; the controls beside them (stop lines that
must still stop the server, endings that went well, vLLM's aborted
request) keep the fixes from reaching too far.
"""

from __future__ import annotations

import json

import pytest

from test_diagnose import diagnosed
from test_log_reader_details import PATCHED, logged, traceback_50615

API, ENGINE = "APIServer pid=1", "EngineCore pid=312"
RESCUED = ("dspark-attn-plugin: model.layers.4.attn warmed up without topk_indices_buffer; "
           "stock vLLM would have stopped here (vllm-project/vllm#50615)")


def api_start(when: str, tp: int = 1) -> list[str]:
    return [
        logged(API, when, "api_server.py:1896", "vLLM API server version 0.27.1"),
        logged(API, when, "utils.py:328", "non-default args: {'model': 'deepseek-ai/DeepSeek-V4-Flash', "
               f"'speculative_config': {{'method': 'dspark'}}, 'tensor_parallel_size': {tp}}}"),
        logged(API, when, "model.py:547", "Resolved architecture: DeepseekV4ForCausalLM"),
        logged(API, when, "model.py:547", "Resolved architecture: DSparkDraftModel"),
    ]


def engine_start(when: str, engine: str = ENGINE) -> list[str]:
    return [logged(engine, when, "core.py:97", "Initializing a V1 LLM engine (v0.27.1) with config: "
                   "model='deepseek-ai/DeepSeek-V4-Flash', tensor_parallel_size=1")]


def loaded(process: str, when: str, patched: bool = True, world: str | None = "rank 0 in world size 1") -> list[str]:
    lines = [logged(process, when, "parallel_state.py:1208",
                    f"{world} is assigned as DP rank 0, PP rank 0, TP rank 0")] if world else []
    lines.append(logged(process, when, "gpu_model_runner.py:3365",
                        "Starting to load model deepseek-ai/DeepSeek-V4-Flash..."))
    if patched:
        lines.append(logged(process, when, "instrumentation.py:157", PATCHED))
    lines.append(logged(process, when, "gpu_model_runner.py:3460",
                        "Model loading took 71.3 GiB memory and 44.8 seconds"))
    return lines


def warmed(process: str, when: str) -> list[str]:
    return [logged(process, when, "rescue_note.py:31", RESCUED),
            logged(process, when, "gpu_worker.py:298", "Available KV cache memory: 4.82 GiB")]


def serving(when: str) -> list[str]:
    return [logged(ENGINE, when, "core.py:210", "init engine (profile, create kv cache, warmup model) took 98 seconds"),
            f"({API}) INFO:     Application startup complete."]


def protected_tp1(when: str) -> list[str]:
    return (api_start(when) + engine_start(when) + loaded(ENGINE, when) + warmed(ENGINE, when)
            + serving(when))


def engine_failed_report(when: str) -> list[str]:
    """The API server's report that the engine failed: its cause is elsewhere."""
    return [f"({API}) " + line for line in (
        "Traceback (most recent call last):",
        '  File "/v/vllm/v1/engine/core_client.py", line 911, in wait_for_engine_startup',
        "    raise RuntimeError(",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    )]


def text(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


# --- how a start ended --------------------------------------------------------------


def test_a_restart_that_loaded_the_model_and_reported_a_failure_is_not_judged_by_the_start_before():
    """The last start loaded the model, then the API server reported that the
    engine failed, its cause not in the log: that start failed, it was not
    cut before its warmup, and the protected start before it is no verdict
    for it."""
    lines = (protected_tp1("12-01 01:28:10") + [f"({API}) INFO:     Shutting down"]
             + api_start("12-01 02:28:10") + engine_start("12-01 02:28:21")
             + loaded(ENGINE, "12-01 02:28:35") + engine_failed_report("12-01 02:41:07"))
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code, d.starts) == ("inconclusive", 2, 2), d.summary
    assert "reporting that the engine failed" in d.summary, d.summary


def test_a_worker_that_died_before_the_api_server_reported_the_failure_is_a_different_crash():
    """``Worker proc ... died unexpectedly`` then the API server's report:
    the death is the crash (3), in a single start and in a restart."""
    died = [logged("EngineCore_DP0 pid=312", "12-01 01:29:33", "multiproc_executor.py:152",
                   "Worker proc VllmWorker-1 died unexpectedly, shutting down executor.", "ERROR")]
    one = (api_start("12-01 01:28:10", 2) + loaded("Worker_TP0 pid=455", "12-01 01:28:35", world=None)
           + loaded("Worker_TP1 pid=456", "12-01 01:28:35", world=None) + died
           + engine_failed_report("12-01 01:29:34"))
    d = diagnosed(text(one))
    assert (d.verdict, d.exit_code) == ("other-crash", 3), d.summary
    assert "died unexpectedly" in d.summary, d.summary
    d = diagnosed(text(protected_tp1("12-01 00:28:10") + [f"({API}) INFO:     Shutting down"] + one))
    assert (d.verdict, d.exit_code, d.starts) == ("other-crash", 3, 2), d.summary


@pytest.mark.parametrize("ending, dies", [
    ("vllm-1 exited with code 137", True),
    ("vllm-1 exited with code 139", True),
    ("vllm-1 exited with code 1", True),
    ("Dec 01 03:20:41 gpu-node-3 systemd[1]: vllm.service: Main process exited, code=killed, status=9/KILL", True),
    ("Dec 01 03:20:41 gpu-node-3 systemd[1]: vllm.service: Main process exited, code=dumped, status=11/SEGV", True),
    ("Dec 01 03:20:41 gpu-node-3 systemd[1]: vllm.service: Main process exited, code=exited, status=1/FAILURE", True),
    ("vllm-1 exited with code 0", False),
    ("vllm-1 exited with code 143", False),
    ("vllm-1 exited with code 130", False),
    ("Dec 01 03:20:41 gpu-node-3 systemd[1]: vllm.service: Main process exited, code=killed, status=15/TERM", False),
    ("Dec 01 03:20:41 gpu-node-3 systemd[1]: vllm.service: Main process exited, code=exited, status=0/SUCCESS", False),
])
def test_a_container_or_service_that_was_killed_or_failed_is_a_process_that_died(ending, dies):
    """docker (compose)'s ``exited with code N`` and systemd's ``Main process
    exited`` say the server's process ended: killed, dumped or failed is a
    crash (3), also where it came right after the rescued layer in the
    warmup; ended well, or stopped (SIGINT, SIGTERM), is not."""
    d = diagnosed(text(protected_tp1("12-01 01:28:10") + [ending]))
    assert (d.verdict, d.exit_code) == (("other-crash", 3) if dies else ("protected", 0)), d.summary
    if dies:
        assert "a process died" in d.summary, d.summary
        mid_warmup = (api_start("12-01 01:28:10") + engine_start("12-01 01:28:10")
                      + loaded(ENGINE, "12-01 01:28:10") + warmed(ENGINE, "12-01 01:29:34")[:1] + [ending])
        d = diagnosed(text(mid_warmup))
        assert (d.verdict, d.exit_code) == ("other-crash", 3), d.summary


def test_a_client_that_went_away_is_no_stop_and_a_later_crash_is_still_judged():
    """uvicorn's "Exception in ASGI application" ending in a
    ``CancelledError`` (a client disconnected) is neither a stop nor a
    crash: the engine's fatal error hours later is judged (3)."""
    cancelled = [f"({API}) ERROR:    Exception in ASGI application"] + [f"({API}) " + line for line in (
        "Traceback (most recent call last):",
        '  File "/u/starlette/responses.py", line 238, in listen_for_disconnect',
        "    message = await receive()",
        '  File "/usr/lib/python3.12/asyncio/locks.py", line 214, in wait',
        "    await fut",
        "asyncio.exceptions.CancelledError: Cancelled by cancel scope 7f6028dc8ee0",
    )]
    fatal = [logged(ENGINE, "12-01 03:12:44", "core.py:851", line, "ERROR") for line in (
        "EngineCore encountered a fatal error.",
        "Traceback (most recent call last):",
        '  File "/v/vllm/v1/engine/core.py", line 869, in run_busy_loop',
        "    self._process_engine_step()",
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
    )]
    d = diagnosed(text(protected_tp1("12-01 01:28:10") + cancelled + fatal))
    assert (d.verdict, d.exit_code) == ("other-crash", 3), d.summary
    assert "AcceleratorError" in d.summary and "stopped" not in d.summary, d.summary
    d = diagnosed(text(protected_tp1("12-01 01:28:10") + cancelled))
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary


def test_a_worker_s_failure_relayed_by_the_engine_is_a_report_not_the_cause():
    """The engine's ``Worker failed with error '', please check the stack
    trace above for the root cause`` relays a worker's failure (a bare
    AssertionError prints as ''): with the worker's traceback not in the
    log, nothing conclusive, not "a different crash"."""
    relayed = [logged("EngineCore_DP0 pid=312", "12-01 01:29:31", "core.py:1099", line, "ERROR") for line in (
        "EngineCore failed to start.",
        "Traceback (most recent call last):",
        '  File "/v/vllm/v1/executor/multiproc_executor.py", line 300, in collective_rpc',
        "    raise RuntimeError(",
        "RuntimeError: Worker failed with error '', please check the stack trace above for the root cause",
    )]
    lines = (api_start("12-01 01:28:10", 2) + loaded("Worker_TP0 pid=455", "12-01 01:28:35", patched=False, world=None)
             + relayed)
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code) == ("inconclusive", 2), d.summary
    assert "reporting that the engine failed" in d.summary, d.summary


# --- an earlier start as the verdict of a start cut before its warmup ------------


def _crash_without_plugin(when: str) -> list[str]:
    return (api_start(when) + engine_start(when) + loaded(ENGINE, when, patched=False)
            + traceback_50615(f"({ENGINE}) ERROR {when} [core.py:708] "))


def test_an_earlier_50615_crash_is_no_verdict_for_a_cut_start_that_shows_the_plugin_in_effect():
    """The crash before had the plugin not in effect; the start after it,
    cut before its warmup, shows it patched: its remedy would be stale."""
    lines = (_crash_without_plugin("12-01 01:28:10") + api_start("12-01 02:28:10")
             + engine_start("12-01 02:28:21") + loaded(ENGINE, "12-01 02:28:35"))
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code, d.starts) == ("inconclusive", 2, 2), d.summary
    assert "shows it in effect, so that is no verdict for it" in d.summary, d.summary
    # Not shown in effect: the crash before still stands for it.
    lines = (_crash_without_plugin("12-01 01:28:10") + api_start("12-01 02:28:10")
             + engine_start("12-01 02:28:21") + loaded(ENGINE, "12-01 02:28:35", patched=False))
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code) == ("crash-50615", 1), d.summary


def test_another_model_s_crash_is_no_verdict_for_a_deepseek_v4_start_cut_before_its_warmup():
    """A Qwen3 start that ran out of memory, then a DeepSeek-V4 start cut
    before its warmup: the other model's crash says nothing of it."""
    qwen = [
        logged(API, "12-01 01:00:00", "api_server.py:1896", "vLLM API server version 0.27.1"),
        logged(API, "12-01 01:00:00", "model.py:547", "Resolved architecture: Qwen3ForCausalLM"),
        logged(ENGINE, "12-01 01:00:05", "gpu_model_runner.py:3460", "Model loading took 60 GiB memory and 30 seconds"),
    ] + [logged(ENGINE, "12-01 01:00:09", "core.py:708", line, "ERROR") for line in (
        "Traceback (most recent call last):",
        '  File "/v/vllm/v1/worker/gpu_worker.py", line 488, in determine_available_memory',
        "    self.model_runner.profile_run()",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    )]
    lines = qwen + api_start("12-01 02:28:10") + engine_start("12-01 02:28:21") + loaded(ENGINE, "12-01 02:28:35")
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code, d.starts) == ("inconclusive", 2, 2), d.summary
    assert "ran another model" in d.summary, d.summary
    # The same crash from a start that names no model (its architecture
    # lines cut off): the log cannot say it was another model, so that
    # start's crash stands for the cut one.
    unnamed = [line for line in qwen if "Resolved architecture" not in line]
    d = diagnosed(text(unnamed + api_start("12-01 02:28:10") + engine_start("12-01 02:28:21")
                       + loaded(ENGINE, "12-01 02:28:35")))
    assert (d.verdict, d.exit_code, d.starts) == ("other-crash", 3, 2), d.summary
    # A DeepSeek-V4 start without the plugin (no line of it), cut before its
    # warmup: its architecture alone says it is another model than Qwen3's.
    d = diagnosed(text(qwen + api_start("12-01 02:28:10") + engine_start("12-01 02:28:21")
                       + loaded(ENGINE, "12-01 02:28:35", patched=False)))
    assert (d.verdict, d.exit_code, d.starts) == ("inconclusive", 2, 2), d.summary
    assert "ran another model" in d.summary, d.summary


# --- who is in the log ---------------------------------------------------------------


def test_two_replicas_mixed_with_nothing_naming_each_are_not_one_protected_server():
    """``kubectl logs -l app=vllm`` without ``--prefix``: two replicas with
    the same pids, their starts a second apart, one protected and one still
    loading without the plugin. A process that logs its start twice before
    it got anywhere is two servers' lines: nothing conclusive."""
    a, b = "12-01 01:28:10", "12-01 01:28:11"
    lines = (api_start(a) + api_start(b) + engine_start(a) + engine_start(b) + loaded(ENGINE, a)
             + warmed(ENGINE, a) + serving(a))
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code) == ("inconclusive", 2), d.summary
    assert "at line 5 a process logs a second time" in d.summary, d.summary
    # One server, its data-parallel engines each starting once: protected.
    engines = ["EngineCore_DP0 pid=312", "EngineCore_DP1 pid=313"]
    lines = (api_start(a) + engine_start(a, engines[0]) + engine_start(a, engines[1])
             + [line for e, r in zip(engines, "01") for line in
                loaded(e, a, world=f"rank {r} in world size 2") + warmed(e, a)] + serving(a))
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary


def test_a_node_s_log_that_shows_some_of_the_model_s_ranks_is_not_the_deployment_protected():
    """Tensor parallel 4 over two nodes: this node's log shows its two
    workers patched, but vLLM's world size is 4: the other node's are not in
    it."""
    workers = [(f"Worker_TP{r} pid={455 + r}", f"rank {r} in world size 4") for r in (0, 1)]
    lines = api_start("12-01 01:28:10", 4) + [line for w, world in workers for line in
                                              loaded(w, "12-01 01:28:35", world=world) + warmed(w, "12-01 01:29:34")]
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code) == ("inconclusive", 2), d.summary
    assert "runs on 4 ranks" in d.summary and "in 2 of them" in d.summary, d.summary
    # The same with all four in the log: protected.
    workers = [(f"Worker_TP{r} pid={455 + r}", f"rank {r} in world size 4") for r in range(4)]
    lines = api_start("12-01 01:28:10", 4) + [line for w, world in workers for line in
                                              loaded(w, "12-01 01:28:35", world=world) + warmed(w, "12-01 01:29:34")]
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary


def test_ray_s_folded_plugin_lines_count_the_processes_they_stand_for():
    """Ray folds the same line of several workers into one (``[repeated Nx
    across cluster]``): six ranks, the plugin's line of four (one shown, three
    folded), a node's workers without it folded away: nothing conclusive;
    with the plugin's line of all six: protected."""
    def ray(pid: int, ip: str) -> str:
        return f"EngineCore_DP0 pid=312) (RayWorkerWrapper pid={pid}, ip={ip}"

    def start(folded_plugin: int) -> list[str]:
        when = "12-01 01:28:30"
        return api_start(when, 2) + [
            logged(ray(2201, "10.0.0.1"), when, "parallel_state.py:1208", "rank 0 in world size 6 is assigned as DP rank 0"),
            logged(ray(1990, "10.0.0.3"), when, "parallel_state.py:1208",
                   "rank 5 in world size 6 is assigned as DP rank 0 [repeated 5x across cluster]"),
            logged(ray(2201, "10.0.0.1"), when, "gpu_model_runner.py:3365", "Starting to load model x..."),
            logged(ray(1990, "10.0.0.3"), when, "gpu_model_runner.py:3365",
                   "Starting to load model x... [repeated 2x across cluster]"),
            logged(ray(2201, "10.0.0.1"), when, "instrumentation.py:157", PATCHED),
            logged(ray(1990, "10.0.0.3"), when, "instrumentation.py:157",
                   f"{PATCHED} [repeated {folded_plugin}x across cluster]"),
            logged(ray(2201, "10.0.0.1"), when, "gpu_worker.py:298", "Available KV cache memory: 4.82 GiB"),
            logged(ray(1990, "10.0.0.3"), when, "gpu_worker.py:298",
                   "Available KV cache memory: 4.82 GiB [repeated 2x across cluster]"),
        ]

    d = diagnosed(text(start(3)))
    assert (d.verdict, d.exit_code) == ("inconclusive", 2), d.summary
    assert "in 4 of them" in d.summary, d.summary
    d = diagnosed(text(start(5)))
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary


# --- how a process's lines were written ---------------------------------------------


def test_a_json_logging_config_behind_vllm_s_process_prefix_is_read_as_that_process_s_lines():
    """With a JSON logging config at tensor parallel 2, each worker's
    traceback exists only in its record's ``exc_info``, behind vLLM's
    ``(Worker_TPn pid=N)`` prefix: the #50615 crash (1), in both workers."""
    trace = "\n".join(line.split("] ", 1)[1] if "] " in line else line
                      for line in traceback_50615("X] "))
    records = [
        f"(Worker_TP{r} pid={455 + r}) " + json.dumps({
            "asctime": "2026-12-01 01:29:31,123", "levelname": "ERROR", "filename": "multiproc_executor.py",
            "lineno": 851, "message": "WorkerProc hit an exception.", "exc_info": trace})
        for r in (0, 1)
    ]
    lines = (api_start("12-01 01:28:10", 2)
             + [line for r in (0, 1) for line in loaded(f"Worker_TP{r} pid={455 + r}", "12-01 01:28:35",
                                                          patched=False, world=None)]
             + records)
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code) == ("crash-50615", 1), d.summary
    assert d.crash["processes"] == ["Worker_TP0 pid=455", "Worker_TP1 pid=456"], d.crash


# --- a seventh review: stops, starts, sources, tracebacks as copied --------------


def _fatal(when: str) -> list[str]:
    return [logged(ENGINE, when, "core.py:851", line, "ERROR") for line in (
        "EngineCore encountered a fatal error.",
        "Traceback (most recent call last):",
        '  File "/v/vllm/v1/engine/core.py", line 869, in run_busy_loop',
        "    self._process_engine_step()",
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
    )]


@pytest.mark.parametrize("logged_text", [
    logged(API, "12-01 02:00:00", "logger.py:43", "Received request chatcmpl-8f3a: prompt: "
           "'Our Kubernetes node keeps shutting down at night. How do I find out why?', params: ..."),
    logged(API, "12-01 02:00:00", "request_logger.py:91", "Generated response chatcmpl-8f3a: output: "
           "\"You will see 'Shutting down' in the log.\", output_token_ids: [1, 2]"),
    logged(API, "12-01 02:00:00", "request_logger.py:53", "Request chatcmpl-77aa details: prompt: "
           "'Why does my program print \"received signal 11\" and exit?'", "DEBUG"),
    f"({API}) Shutting down the reactor is step 3 of the prompt's second line.",
    logged(ENGINE, "12-01 02:00:00", "wrapper.py:142", "Shutting down profiler"),
])
def test_the_words_of_a_stop_in_a_logged_prompt_or_output_are_no_stop(logged_text):
    """A prompt or an output logged (``--enable-log-requests``,
    ``--enable-log-outputs``) with "shutting down" or "received signal" in
    it does not stop the server, nor does vLLM's profiler stopping: the
    engine's fatal error after it is judged (3), not dropped as a
    consequence of a stop (it read protected)."""
    d = diagnosed(text(protected_tp1("12-01 01:28:10") + [logged_text] + _fatal("12-01 03:12:44")))
    assert (d.verdict, d.exit_code) == ("other-crash", 3), d.summary
    assert "AcceleratorError" in d.summary and "stopped" not in d.summary, d.summary


@pytest.mark.parametrize("stop", [
    f"({API}) INFO:     Shutting down",
    logged(API, "12-01 03:12:40", "launcher.py:161", "[shutdown] API server: shutting down FastAPI HTTP server"),
    logged(API, "12-01 03:12:40", "api_server.py:1", "Received SIGTERM, exiting."),
    logged(API, "12-01 03:12:40", "utils.py:582", "Received KeyboardInterrupt, shutting down API servers..."),
    logged(API, "12-01 03:12:40", "dp_supervisor.py:383", "DPSupervisor received SIGTERM, shutting down."),
    logged(ENGINE, "12-01 03:12:40", "core.py:1333", "[shutdown] EngineCore: trigger received signal=15"),
    "Aborted!",
])
def test_the_stop_lines_of_vllm_uvicorn_and_click_still_stop_the_server(stop):
    """What vLLM, uvicorn and click write when the server is told to stop:
    what is raised after it is a consequence, not a crash."""
    d = diagnosed(text(protected_tp1("12-01 01:28:10") + [stop] + _fatal("12-01 03:12:44")))
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary
    assert "stopped at line" in d.summary, d.summary


def test_a_start_that_died_before_loading_is_not_merged_with_the_next_start():
    """``tee -a``: a Qwen3 start killed before it loaded anything (its API
    server pid=4411), then a DeepSeek-V4 start (pid=5120) cut after its
    arguments: two starts, and the other model's architecture is not this
    start's (it read "Not applicable", exit 0)."""
    qwen = [
        logged("APIServer pid=4411", "12-01 09:00:00", "api_server.py:1896", "vLLM API server version 0.27.1"),
        logged("APIServer pid=4411", "12-01 09:00:01", "utils.py:328", "non-default args: {'model': 'Qwen/Qwen3-32B'}"),
        logged("APIServer pid=4411", "12-01 09:00:07", "model.py:547", "Resolved architecture: Qwen3ForCausalLM"),
        logged("EngineCore_DP0 pid=4520", "12-01 09:00:10", "core.py:77",
               "Initializing a V1 LLM engine (v0.27.1) with config: model='Qwen/Qwen3-32B', speculative_config=None"),
    ]
    v4 = [
        logged("APIServer pid=5120", "12-01 09:02:11", "api_server.py:1896", "vLLM API server version 0.27.1"),
        logged("APIServer pid=5120", "12-01 09:02:12", "utils.py:328",
               "non-default args: {'model': '/models/DeepSeek-V4-Flash', 'speculative_config': {'method': 'dspark'}}"),
    ]
    d = diagnosed(text(qwen + v4))
    assert (d.verdict, d.exit_code, d.starts) == ("inconclusive", 2, 2), d.summary


def test_systemd_s_main_process_exited_ends_a_start():
    """journald: a start that failed on a bad argument (``Main process
    exited, code=exited, status=2``), then a protected start: two starts,
    the last protected (the first's death decided it, exit 3)."""
    bad = [logged(API, "12-01 09:59:59", "utils.py:328", "non-default args: {'model': 'x', 'bad': 1}"),
           "Dec 01 10:00:00 gpu-node-3 systemd[1]: vllm.service: Main process exited, code=exited, "
           "status=2/INVALIDARGUMENT",
           "Dec 01 10:00:05 gpu-node-3 systemd[1]: vllm.service: Scheduled restart job, restart counter is at 1."]
    d = diagnosed(text(bad + protected_tp1("12-01 10:00:10")))
    assert (d.verdict, d.exit_code, d.starts) == ("protected", 0, 2), d.summary


def test_a_replica_caught_at_its_start_is_a_source_however_few_its_lines():
    """``kubectl logs -l app=vllm --prefix``: one pod's protected start, the
    other's first seven lines among its lines (its API server's start and
    its engine's, no model loaded yet): two sources, nothing conclusive (it
    read protected)."""
    a = [f"[pod/vllm-0/vllm] {line}" for line in protected_tp1("12-01 01:28:10")]
    b = [f"[pod/vllm-1/vllm] {line.replace('pid=1)', 'pid=63)').replace('pid=312)', 'pid=72)')}"
         for line in api_start("12-01 01:28:11")
         + [logged(API, "12-01 01:28:12", "model.py:1510", "Using max model len 65536"),
            logged(API, "12-01 01:28:12", "scheduler.py:205", "Chunked prefill is enabled")]
         + engine_start("12-01 01:28:15")]
    assert len(b) == 7
    d = diagnosed(text(a[:2] + b + a[2:]))
    assert (d.verdict, d.exit_code) == ("inconclusive", 2), d.summary
    assert "holds the lines of 2 sources" in d.summary, d.summary


def _crash_traceback(head: str, trim: bool) -> list[str]:
    """#50615 as Python 3.12 writes it (with its ^^^ markers), each line after
    ``head``; ``trim``: every line's indentation lost (a web page, a log
    shipper that trims)."""
    lines = [
        "Traceback (most recent call last):",
        '  File "/v/vllm/v1/engine/core.py", line 92, in __init__',
        "    self._initialize_kv_caches(vllm_config)",
        '  File "/v/vllm/v1/worker/gpu_worker.py", line 263, in determine_available_memory',
        "    self.model_runner.profile_run()",
        '  File "/v/vllm/v1/worker/gpu_model_runner.py", line 3017, in profile_run',
        "    = self._dummy_run(self.max_num_tokens, is_profile=True)",
        "      ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        '  File "/v/vllm/models/deepseek_v4/nvidia/flashmla.py", line 99, in forward_mqa',
        "    assert self.topk_indices_buffer is not None",
        "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        "AssertionError",
    ]
    return [head + (line.strip() if trim else line) for line in lines]


@pytest.mark.parametrize("trim", [False, True])
def test_a_traceback_whose_lines_lost_their_indentation_is_still_the_50615_crash(trim):
    """Statements without their four spaces (``self._initialize_kv_caches(
    vllm_config)`` read as an exception named ``vllm_config``) and marker
    lines (``^^^``) without theirs: the #50615 crash still (it read "a
    different crash")."""
    lines = (api_start("12-01 10:00:00") + engine_start("12-01 10:00:00")
             + loaded(ENGINE, "12-01 10:00:30", patched=False)
             + _crash_traceback(f"({ENGINE}) ERROR 12-01 10:01:58 [core.py:708] ", trim))
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code) == ("crash-50615", 1), d.summary


def test_a_traceback_wrapped_by_a_terminal_is_maybe_50615_not_another_crash():
    """``tmux capture-pane`` without ``-J``: lines longer than the pane go
    on at the start of the next line, so the frames read are not those
    written; the process wrote #50615's assertion, so the AssertionError is
    maybe #50615 (2), not "a different crash" (3)."""
    wrapped = []
    for line in _crash_traceback(f"({ENGINE}) ", False):
        while len(line) > 80:
            wrapped.append(line[:80])
            line = line[80:]
        wrapped.append(line)
    lines = (api_start("12-01 10:00:00") + engine_start("12-01 10:00:00")
             + loaded(ENGINE, "12-01 10:00:30", patched=False) + wrapped)
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code) == ("inconclusive", 2), d.summary
    assert d.summary.startswith("Probably vllm-project/vllm#50615"), d.summary
    # Another exception from the same wrapped process is no #50615.
    d = diagnosed(text(lines[:-1] + [f"({ENGINE}) RuntimeError: CUDA error: an illegal memory access"]))
    assert not d.summary.startswith("Probably vllm-project/vllm#50615"), d.summary


def test_ray_s_notice_after_its_first_folded_line_keeps_the_count():
    """Ray adds "(Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 ...)"
    after the first ``[repeated Nx across cluster]``: the count is read
    still (six ranks, the plugin's line of all six: protected)."""
    notice = (" (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log deduplication, "
              "or see https://docs.ray.io/en/master/ray-observability/user-guides/configure-logging.html"
              "#log-deduplication for more options.)")
    ray = "EngineCore_DP0 pid=312) (RayWorkerWrapper pid=1990, ip=10.0.0.3"
    ray0 = "EngineCore_DP0 pid=312) (RayWorkerWrapper pid=2201, ip=10.0.0.1"
    when = "12-01 01:28:30"
    lines = api_start(when, 2) + [
        logged(ray0, when, "instrumentation.py:157", PATCHED),
        logged(ray, when, "instrumentation.py:157", f"{PATCHED} [repeated 5x across cluster]" + notice),
        logged(ray0, when, "parallel_state.py:1208", "rank 0 in world size 6 is assigned as DP rank 0"),
        logged(ray, when, "parallel_state.py:1208", "rank 5 in world size 6 is assigned as DP rank 0 "
               "[repeated 5x across cluster]"),
        logged(ray0, when, "gpu_model_runner.py:3365", "Starting to load model x..."),
        logged(ray, when, "gpu_model_runner.py:3365", "Starting to load model x... [repeated 5x across cluster]"),
        logged(ray0, when, "gpu_worker.py:298", "Available KV cache memory: 4.82 GiB"),
    ]
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary


@pytest.mark.parametrize("abort", [
    "Fatal Python error: Aborted",
    "terminate called after throwing an instance of 'c10::Error'",
])
def test_a_process_that_aborted_is_a_different_crash(abort):
    """Python's "Fatal Python error" and the C++ runtime's "terminate called
    after throwing" say a process aborted: a crash (3), also where the API
    server reported only that the engine failed."""
    lines = (api_start("12-01 10:00:00") + engine_start("12-01 10:00:00")
             + loaded(ENGINE, "12-01 10:00:30") + [f"({ENGINE}) {abort}"]
             + engine_failed_report("12-01 10:01:00"))
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code) == ("other-crash", 3), d.summary


# --- an eighth review: deaths as supervisors write them, stops of others ---------


@pytest.mark.parametrize("death", [
    "/opt/start-vllm.sh: line 14:   100 Killed                  vllm serve /models/DeepSeek-V4-Flash",
    "/opt/start-vllm.sh: line 14:   100 Segmentation fault      vllm serve /models/DeepSeek-V4-Flash",
    "[1]+  Killed                  vllm serve /models/DeepSeek-V4-Flash",
    "2026-12-01 03:20:41,112 INFO exited: vllm (exit status 1; not expected)",
    "2026-12-01 03:20:41,112 INFO exited: vllm (terminated by SIGKILL; not expected)",
    "2026-12-01 03:20:44,120 INFO gave up: vllm entered FATAL state, too many start retries too quickly",
    "srun: error: gpu-node-3: task 0: Exited with exit code 1",
    "srun: error: gpu-node-3: task 0: Killed",
    "srun: Force Terminated StepId=4242.0",
    "[2026-12-01 03:20:41,000] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) "
    "local_rank: 0 (pid: 100) of binary: /usr/bin/python3",
])
def test_a_death_as_a_shell_supervisord_slurm_or_torchrun_writes_it_is_a_crash(death):
    """A shell's job notice, supervisord's and slurm's lines and torchrun's
    say the server's process died: a crash (3), not a protected server;
    also where it was the start after a protected one, killed while it
    loaded (it read as cut, judged by the start before)."""
    d = diagnosed(text(protected_tp1("12-01 01:28:10") + [death]))
    assert (d.verdict, d.exit_code) == ("other-crash", 3), d.summary
    restart = (api_start("12-01 02:28:10") + engine_start("12-01 02:28:21")
               + loaded(ENGINE, "12-01 02:28:35") + [death])
    d = diagnosed(text(protected_tp1("12-01 01:28:10") + [f"({API}) INFO:     Shutting down"] + restart))
    assert (d.verdict, d.exit_code, d.starts) == ("other-crash", 3, 2), d.summary


@pytest.mark.parametrize("line", [
    "2026-12-01 03:20:41,112 INFO exited: vllm (exit status 0; expected)",
    "[1]+  Done                    vllm serve /models/DeepSeek-V4-Flash",
    logged(API, "12-01 03:00:00", "async_llm.py:400", "Aborted request chatcmpl-8f3a."),
    logged(API, "12-01 03:00:00", "loggers.py:127", "Engine 000: Running: 3 reqs, Waiting: 0 reqs, 2 Killed"),
])
def test_an_ending_that_went_well_or_a_request_aborted_is_no_death(line):
    """What the death lines must not take: a supervisor's expected exit, a
    shell's finished job, vLLM's aborted request."""
    d = diagnosed(text(protected_tp1("12-01 01:28:10") + [line]))
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary


def test_another_unit_stopping_in_a_whole_journal_does_not_stop_the_server():
    """``journalctl -b``: systemd stopping an ssh session's scope or another
    service is no stop of the server; the engine's fatal error after it is
    judged (3, it read protected)."""
    other = "Dec 01 03:00:00 gpu-node-3 systemd[1]: Stopping session-42.scope - Session 42 of User ubuntu..."
    d = diagnosed(text(protected_tp1("12-01 01:28:10") + [other] + _fatal("12-01 03:12:44")))
    assert (d.verdict, d.exit_code) == ("other-crash", 3), d.summary


def test_a_client_stopped_by_ctrl_c_in_the_same_log_does_not_stop_the_server():
    """A CI script's log: ``vllm bench serve`` (no vLLM prefix, it starts no
    server) stopped by Ctrl-C while the server goes on; the engine's fatal
    error after it is judged (3, it read protected). The server's own
    ``KeyboardInterrupt`` still stops it."""
    client = [
        "INFO 12-01 02:59:00 [__init__.py:216] Automatically detected platform cuda.",
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/vllm", line 10, in <module>',
        "    sys.exit(main())",
        '  File "/v/vllm/benchmarks/serve.py", line 900, in main',
        "    asyncio.run(benchmark(args))",
        "KeyboardInterrupt",
    ]
    d = diagnosed(text(protected_tp1("12-01 01:28:10") + client + _fatal("12-01 03:12:44")))
    assert (d.verdict, d.exit_code) == ("other-crash", 3), d.summary
    server = [f"({API}) " + line for line in client[1:]]
    d = diagnosed(text(protected_tp1("12-01 01:28:10") + server + _fatal("12-01 03:12:44")))
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary


# --- a ninth review: an engine core that died with no traceback ------------------


@pytest.mark.parametrize("after", [
    [],
    [f"({API}) INFO:     Shutting down"],
    [f"({API}) " + line for line in (
        "ERROR 12-06 10:08:02 [async_llm.py:708] AsyncLLM output_handler failed.",
        "ERROR 12-06 10:08:02 [async_llm.py:708] Traceback (most recent call last):",
        'ERROR 12-06 10:08:02 [async_llm.py:708]   File "/v/vllm/v1/engine/async_llm.py", line 664, in output_handler',
        "ERROR 12-06 10:08:02 [async_llm.py:708]     outputs = await engine_core.get_output_async()",
        "ERROR 12-06 10:08:02 [async_llm.py:708] vllm.v1.engine.exceptions.EngineDeadError: EngineCore "
        "encountered an issue. See stack trace (above) for the root cause.",
        "INFO:     Shutting down",
    )],
], ids=["log-ends", "uvicorn-shuts-down", "output-handler-then-shutdown"])
def test_an_engine_core_that_exited_unexpectedly_is_a_different_crash(after):
    """At one API server, an engine core killed without a traceback (the OOM
    killer, a segfault) shows only as the API server's ``engine core exited
    unexpectedly``, then uvicorn's shutdown: a death, not a protected server
    that was stopped (it read exit 0), nor a report whose cause is missing
    (exit 2)."""
    lines = protected_tp1("12-06 10:00:00") + [logged(
        API, "12-06 10:08:02", "core_client.py:726",
        "[shutdown] MPClient: engine core exited unexpectedly; starting cleanup", "WARNING")] + after
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code) == ("other-crash", 3), d.summary
    assert "exited unexpectedly" in d.summary, d.summary


# --- a tenth review: the plugin's own states and the remedy ------------------------

FIXED_HERE = ("vLLM 0.28.0 already has the fix for vllm-project/vllm#50615 (SWA-only layers warm "
              "up without touching topk_indices_buffer): dspark-attn-plugin left it untouched and "
              "is no longer needed here")
NOT_AFFECTED_HERE = ("vLLM 0.26.0 is not affected by vllm-project/vllm#50615 (the warmup reserves "
                     "no top-k workspace): dspark-attn-plugin left it untouched")


def test_processes_patched_on_one_build_and_fixed_on_another_are_protected():
    """Two nodes with different vLLM builds: the plugin patched one worker
    and found the other's build fixed. Every process that runs the model
    has it in effect: protected (it read exit 2, naming no process)."""
    when = "12-06 10:00:00"
    w0, w1 = "Worker_TP0 pid=455", "Worker_TP1 pid=456"
    lines = api_start(when, 2) + loaded(w0, when, world="rank 0 in world size 2") + warmed(w0, when)
    lines += [line for line in loaded(w1, when, patched=False, world=None)]
    lines += [logged(w1, when, "instrumentation.py:165", FIXED_HERE),
              logged(w1, when, "gpu_worker.py:298", "Available KV cache memory: 4.82 GiB")]
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary
    assert w0 in d.summary and w1 in d.summary, d.summary


@pytest.mark.parametrize("warning", [
    "dspark-attn-plugin could not register, vLLM's code is left as it is: ImportError('x')",
    "dspark-attn-plugin failed on vllm.models.deepseek_v4.nvidia.flashmla.DeepseekV4FlashMLAAttention"
    ".forward_mqa and left vLLM's code as it is: ModuleNotFoundError()",
])
def test_a_crash_where_the_plugin_itself_failed_asks_for_a_reinstall_not_another_build(warning):
    """The plugin's own failure (its install, its code) is no build that
    cannot be patched: the remedy says to reinstall it and verify."""
    when = "12-06 10:00:00"
    lines = api_start(when) + engine_start(when) + loaded(ENGINE, when, patched=False)
    lines.append(logged(ENGINE, when, "instrumentation.py:62", warning, "WARNING"))
    lines += traceback_50615(f"({ENGINE}) ERROR {when} [core.py:1010] ")
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code) == ("crash-50615", 1), d.summary
    assert "reinstall" in d.remedy and "cannot be patched" not in d.remedy, d.remedy


def test_a_crash_where_the_plugin_found_the_build_not_affected_asks_for_a_report():
    """The process that crashed logged the plugin's "not affected": the
    plugin was in effect and judged wrong; installing it is no remedy."""
    when = "12-06 10:00:00"
    lines = api_start(when) + engine_start(when) + loaded(ENGINE, when, patched=False)
    lines.append(logged(ENGINE, when, "instrumentation.py:172", NOT_AFFECTED_HERE))
    lines += traceback_50615(f"({ENGINE}) ERROR {when} [core.py:1010] ")
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code) == ("crash-50615", 1), d.summary
    assert "report it" in d.remedy and "install dspark-attn-plugin" not in d.remedy, d.remedy


# --- an eleventh review: Kubernetes' kills, starts cut at their top, restarts that changed


@pytest.mark.parametrize("kill, dies", [
    (["    Last State:     Terminated", "      Reason:       Error", "      Exit Code:    137"], True),
    (["    lastState:", "      terminated:", "        exitCode: 137", "        reason: Error"], True),
    (["  Warning  Unhealthy  2m  kubelet  Liveness probe failed: Get \"http://10.0.0.5:8000/health\": "
      "context deadline exceeded",
      "  Normal   Killing    2m  kubelet  Container vllm failed liveness probe, will be restarted"], True),
    (["  Normal   Killing    2m  kubelet  Container vllm failed startup probe, will be restarted"], True),
    (["command terminated with exit code 137"], True),
    (["    Last State:     Terminated", "      Reason:       Completed", "      Exit Code:    0"], False),
    (["  Warning  Unhealthy  2m  kubelet  Readiness probe failed: connection refused"], False),
], ids=["describe-137", "yaml-137", "liveness-kill", "startup-kill", "exec-137", "describe-0", "readiness"])
def test_a_container_kubernetes_killed_is_a_process_that_died(kill, dies):
    """``kubectl describe`` (or the pod's YAML) pasted below the log: a
    container a probe killed, or that exited 137, died (it read protected,
    exit 0); one that completed, or failed only its readiness probe, did
    not."""
    d = diagnosed(text(protected_tp1("12-06 10:00:00") + kill))
    expected = ("other-crash", 3) if dies else ("protected", 0)
    assert (d.verdict, d.exit_code) == expected, d.summary


def test_a_start_whose_first_lines_were_cut_off_is_not_merged_with_the_next_start():
    """``kubectl logs --previous --tail=N`` then the current start: the
    first start's top is gone, so it never logged its start lines. The
    next start (this one with the plugin switched off, cut while loading)
    is a start of its own: the first start's protected warmup is no
    verdict for it (it read protected, exit 0)."""
    when = "12-06 10:00:00"
    first = loaded(ENGINE, when, world=None) + warmed(ENGINE, when) + serving(when)
    second = [f"INFO 12-06 10:20:00 [instrumentation.py:55] dspark-attn-plugin is disabled by "
              "DSPARK_ATTN_PLUGIN=off; vLLM's code is left as it is"]
    second += api_start("12-06 10:20:00")[1:]  # vLLM 0.27.1's logo, then its arguments; cut there
    d = diagnosed(text(first + second))
    assert d.exit_code == 2 and d.starts == 2, d.summary
    # and an old pod's tail with its #50615 crash says nothing of a new pod's protected start
    old = loaded(ENGINE, when, patched=False, world=None) + traceback_50615(
        f"({ENGINE}) ERROR {when} [core.py:1010] ")
    d = diagnosed(text(old + protected_tp1("12-06 10:20:00")[1:]))
    assert (d.verdict, d.exit_code, d.starts) == ("protected", 0, 2), d.summary


def test_an_earlier_start_of_another_vllm_or_another_layout_is_no_verdict_for_a_cut_start():
    """A start on vLLM 0.26.0 (not affected) or at tensor parallel 1, then
    a restart on vLLM 0.27.1 or at tensor parallel 2 cut while loading:
    the earlier start's verdict says nothing of the processes of this one
    (it read "Not needed" or protected, exit 0)."""
    when, later = "12-06 10:00:00", "12-06 10:20:00"
    not_affected = (api_start(when) + engine_start(when) + loaded(ENGINE, when, patched=False)
                    + [logged(ENGINE, when, "instrumentation.py:172", NOT_AFFECTED_HERE)]
                    + warmed(ENGINE, when) + serving(when))
    cut = [line.replace("0.27.1", "0.27.1") for line in api_start(later, 2)]
    cut.append(logged("EngineCore_DP0 pid=312", later, "core.py:97",
                      "Initializing a V1 LLM engine (v0.27.1) with config: model='deepseek-ai/DeepSeek-V4-Flash', "
                      "tensor_parallel_size=2, pipeline_parallel_size=1"))
    cut += loaded("Worker_TP0 pid=455", later, world="rank 0 in world size 2")[:-1]  # still loading
    d = diagnosed(text([line.replace("0.27.1", "0.26.0") for line in not_affected] + cut))
    assert d.exit_code == 2 and d.starts == 2, d.summary
    assert "that is no verdict for this start" in d.summary, d.summary
    d = diagnosed(text(protected_tp1(when) + cut))
    assert d.exit_code == 2 and d.starts == 2, d.summary
    # control: the same vLLM and layout, cut while loading, patched so far
    d = diagnosed(text(protected_tp1(when) + api_start(later) + engine_start(later)
                       + loaded(ENGINE, later)[:-1]))
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary


def test_vllm_s_logo_begins_a_start_and_names_its_version():
    """vLLM 0.27's API server logs its logo (``version 0.26.0`` on one of
    its lines) or ``vLLM server version X, serving model Y`` before its
    arguments: the start begins there, and a #50615 crash on 0.27.1 is no
    verdict for a rollback to 0.26.0 cut while loading (it read exit 1)."""
    when, later = "12-06 10:00:00", "12-06 10:20:00"
    crash = (api_start(when)[1:] + engine_start(when) + loaded(ENGINE, when, patched=False)
             + traceback_50615(f"({ENGINE}) ERROR {when} [core.py:1010] "))
    for first in (logged(API, later, "api_server.py:624",
                         " \u2584\u2584 \u2584\u2588 \u2588     \u2588     \u2588 \u2580\u2584\u2580 \u2588  version 0.26.0"),
                  logged(API, later, "api_utils.py:325",
                         "vLLM server version 0.26.0, serving model deepseek-ai/DeepSeek-V4-Flash")):
        d = diagnosed(text(crash + [first] + api_start(later)[1:]))
        assert (d.exit_code, d.starts) == (2, 2), d.summary
        assert "0.26.0" in d.summary, d.summary


# --- a twelfth review: deaths in Ray clusters, multi-node data parallel, pods ------


_STOP_AFTER = [logged(API, "12-06 10:41:25", "launcher.py:112", "[shutdown] API server: shutdown triggered"),
               logged(ENGINE, "12-06 10:41:25", "core.py:1333",
                      "[shutdown] EngineCore: trigger received signal=SIGTERM"),
               f"({API}) INFO:     Shutting down"]


@pytest.mark.parametrize("death", [
    f"({ENGINE}) 2026-12-06 10:41:05,774\tWARNING worker.py:2081 -- The node with node id: 9426f4 and "
    "address: 10.0.0.2 and node name: 10.0.0.2 has been marked dead because the detector has missed "
    "too many heartbeats from it.",
    f"({ENGINE}) (raylet, ip=10.0.0.2) A worker died or was killed while executing a task by an "
    "unexpected system error. Worker PID: 1877 Worker exit type: SYSTEM_ERROR Worker exit detail: "
    "Worker exits unexpectedly. Worker exits with an exit code None.",
    f"({ENGINE}) (raylet, ip=10.0.0.2) Worker exit detail: Task was killed due to the node running low "
    "on memory.",
    f"({ENGINE}) (raylet, ip=10.0.0.2) [2026-12-06 10:36:12,041 E 118 118] (raylet) node_manager.cc:3193: "
    "1 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other "
    "reasons at node 9426f4",
    "Status message: Job entrypoint command failed with exit code -9, last available logs (truncated "
    "to 20,000 chars):",
    "Status message: Job entrypoint command failed with exit code 137",
    "(DPSupervisor pid=1) INFO 12-06 10:14:00 [dp_supervisor.py:485] DPSupervisor found 1 exited DP Servers.",
    "vllm-ds-0-1  0/1     CrashLoopBackOff   3 (42s ago)   31m",
    "2m40s       Warning   BackOff        pod/vllm-ds-0-1   Back-off restarting failed container vllm "
    "in pod vllm-ds-0-1_default(7c1e2f3a)",
    "3m12s       Warning   NodeNotReady   pod/vllm-ds-0-1   Node is not ready",
], ids=["ray-node-dead", "raylet-worker-died", "raylet-low-memory", "raylet-oom", "ray-job-minus-9",
        "ray-job-137", "dp-supervisor", "crash-loop", "back-off", "node-not-ready"])
@pytest.mark.parametrize("then", ["log-ends", "a-stop-follows"])
def test_a_death_as_ray_kubernetes_or_the_dp_supervisor_write_it_is_a_crash(death, then):
    """A node Ray marked dead, a worker the raylet saw die or killed for
    memory, a ``ray job`` whose entrypoint failed, a data-parallel API
    server the supervisor found exited, a pod in a crash loop or on a node
    not ready: a process of the server died (it read protected, exit 0),
    whether the log ends there or a stop (the group restart, the
    supervisor's SIGTERM) follows."""
    d = diagnosed(text(protected_tp1("12-06 10:00:00") + [death] + (_STOP_AFTER if then != "log-ends" else [])))
    assert (d.verdict, d.exit_code) == ("other-crash", 3), d.summary


@pytest.mark.parametrize("line", [
    logged(ENGINE, "12-06 10:30:00", "base_worker.py:2569",
           "Evicted stale remote engine 3f2a (inactive for 61.0s)."),
    "(DPSupervisor pid=1) INFO 12-06 10:14:00 [dp_supervisor.py:485] DPSupervisor found 0 exited DP Servers.",
    "Status message: Job entrypoint command failed with exit code 0",
    "vllm-ds-0-1  1/1     Running   0   31m",
])
def test_what_the_new_death_lines_must_not_take(line):
    """vLLM's NIXL connector evicting a stale remote engine, a supervisor
    that found none exited, a pod running: no death."""
    d = diagnosed(text(protected_tp1("12-06 10:00:00") + [line]))
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary


@pytest.mark.parametrize("state", ["patched", "fixed", "mixed"])
def test_a_deployment_of_more_than_256_ranks_reads_as_a_small_one(state):
    """320 workers (forty nodes of eight), each with the plugin in effect:
    protected (also where half the nodes run a fixed build), or not needed
    where each found the build fixed, as it reads for two."""
    when, world = "12-06 10:00:00", 320
    lines = api_start(when, world)
    for r in range(world):
        w = f"Worker_TP{r} pid={1000 + r}"
        patched = state == "patched" or (state == "mixed" and r % 2 == 0)
        lines += loaded(w, when, patched=patched, world=f"rank {r} in world size {world}")
        if not patched:
            lines.append(logged(w, when, "instrumentation.py:165", FIXED_HERE))
        lines.append(logged(w, when, "gpu_worker.py:298", "Available KV cache memory: 4.82 GiB"))
    d = diagnosed(text(lines))
    expected = ("not-needed", 0) if state == "fixed" else ("protected", 0)
    assert (d.verdict, d.exit_code) == expected, d.summary


def test_a_restart_on_the_same_320_ranks_cut_before_its_warmup_takes_the_start_before():
    """A protected start of 320 workers, then a restart on the same layout
    with the plugin patched so far, cut while it loads: the start before
    stands for it, as for two ranks (the layouts are the same, not
    "changed")."""
    when, world = "12-06 10:00:00", 320
    lines = api_start(when, world)
    for r in range(world):
        w = f"Worker_TP{r} pid={1000 + r}"
        lines += loaded(w, when, world=f"rank {r} in world size {world}")
        lines.append(logged(w, when, "gpu_worker.py:298", "Available KV cache memory: 4.82 GiB"))
    lines += [f"({API}) INFO:     Shutting down"]
    lines += api_start("12-06 11:00:00", world) + loaded("Worker_TP0 pid=5000", "12-06 11:00:30",
                                                        world=f"rank 0 in world size {world}")
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code, d.starts) == ("protected", 0, 2), d.summary
    assert "this one on" not in d.summary, d.summary


def test_a_plugin_line_written_before_vllm_s_prefix_counts_its_process_among_the_ranks():
    """The engine's plugin line written before vLLM prefixed its output,
    then its own prefixed lines with the world size: that process is the
    one rank, protected (the count of ranks in effect takes it)."""
    when = "12-06 10:00:00"
    bare = f"INFO {when} [instrumentation.py:157] {PATCHED}"
    lines = (api_start(when) + [bare] + engine_start(when) + loaded(ENGINE, when, patched=False)
             + warmed(ENGINE, when) + serving(when))
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary
