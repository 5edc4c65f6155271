"""What ``diagnose`` says of logs that turn on the log reader's details: how
far back a timestamp must go to count as a step (month ends, steps forward,
the traceback headers of a log read bottom up), which lines vLLM's and log
pipelines' shapes make processes and tracebacks of (Ray's
``[repeated Nx across cluster]``, DEBUG-level file paths, a bare traceback
before ``[rank0]:`` lines, a Python dict that is not JSON, the same pid in
two nodes' logs), the line counts it prints, and the caps on what it keeps
(processes, names, tracebacks, the text of a death). Each log is written in
vLLM's line shape, as the server writes it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dspark_attn_plugin import diagnose
from dspark_attn_plugin.log_reader import MAX_PROCESSES

from test_diagnose import diagnosed, run
from test_diagnose_corpus import CRASH, PROTECTED, _json_records, text_of
from test_log_formats import loki_newest_first

PATCHED = ("dspark-attn-plugin patched vllm.models.deepseek_v4.nvidia.flashmla."
           "DeepseekV4FlashMLAAttention.forward_mqa on vLLM 0.26.0: SWA-only layers warm up "
           "without topk_indices_buffer (backport of vllm-project/vllm#50693)")


def logged(process: str, when: str, where: str, message: str, level: str = "INFO") -> str:
    """One line as vLLM writes it: ``(process) LEVEL MM-DD HH:MM:SS [file:N] message``."""
    return f"({process}) {level} {when} [{where}] {message}"


def protected_start(when: list[str]) -> list[str]:
    """A DeepSeek-V4 server that got past its warmup patched, its lines
    stamped ``when`` (five times, oldest first)."""
    return [
        logged("APIServer pid=100", when[0], "model.py:623", "Resolved architecture: DeepseekV4ForCausalLM"),
        logged("EngineCore pid=200", when[1], "instrumentation.py:144", PATCHED),
        logged("EngineCore pid=200", when[2], "model_runner.py:305",
               "Model loading took 0.58 GiB and 15.8 seconds"),
        logged("EngineCore pid=200", when[3], "gpu_worker.py:400", "Available KV cache memory: 10.00 GiB"),
        logged("APIServer pid=100", when[4], "launcher.py:1", "Application startup complete."),
    ]


def traceback_50615(head: str) -> list[str]:
    """The #50615 traceback, each line after ``head`` (a process's prefix
    and log head)."""
    return [head + line for line in (
        "Traceback (most recent call last):",
        '  File "/v/vllm/v1/worker/gpu_worker.py", line 488, in determine_available_memory',
        "    self.model_runner.profile_run()",
        '  File "/v/vllm/v1/worker/gpu/model_runner.py", line 674, in profile_run',
        "    hidden_states, sample_hidden_states = self._dummy_run(",
        '  File "/v/vllm/models/deepseek_v4/nvidia/flashmla.py", line 90, in forward_mqa',
        "    assert self.topk_indices_buffer is not None",
        "AssertionError",
    )]


def engine_loaded() -> list[str]:
    """A DeepSeek-V4 start whose engine loaded the model, its warmup not over."""
    return protected_start(["12-04 10:00:00"] * 5)[:1] + [
        logged("EngineCore pid=200", "12-04 10:00:20", "model_runner.py:305",
               "Model loading took 0.58 GiB and 15.8 seconds")]


def assert_the_value_error(d) -> None:
    """``d`` reads the engine's ValueError at core.py:700 as the crash."""
    assert (d.verdict, d.exit_code) == ("other-crash", 3), d.summary
    assert d.summary.startswith("A different crash: ValueError at /v/vllm/v1/engine/core.py:700 "
                                "in run_engine_core, in EngineCore pid=200"), d.summary


# --- which way a log reads --------------------------------------------------------


def test_a_log_read_newest_first_over_the_midnight_that_ends_a_month_is_said_to_be():
    """Loki's newest-first export of a start that ran over 10-31 24:00 is said to read newest first."""
    lines = protected_start(["10-31 23:59:58", "10-31 23:59:58", "11-01 00:00:00",
                             "11-01 00:00:02", "11-01 00:00:02"])
    d = diagnosed(loki_newest_first(lines))
    assert (d.verdict, d.exit_code) == ("inconclusive", 2), d.summary
    assert "reads newest first (its timestamps go back 2 times)" in d.summary


def test_a_one_second_step_back_over_a_31_day_month_s_end_is_no_step():
    """Newest first, a second back over 10-31 24:00 is no step: "go back 2 times", not 3."""
    lines = protected_start(["10-31 23:59:57", "10-31 23:59:59", "11-01 00:00:00",
                             "11-01 00:00:02", "11-01 00:00:02"])
    d = diagnosed(loki_newest_first(lines))
    assert d.exit_code == 2
    assert "its timestamps go back 2 times" in d.summary, d.summary


def test_a_newest_first_log_with_one_line_out_of_order_is_said_to_read_newest_first():
    """Two steps back against one forward (a line flushed late) still read newest first."""
    lines = [
        logged("APIServer pid=100", "12-03 10:00:12", "model.py:623",
               "Resolved architecture: DeepseekV4ForCausalLM"),
        logged("EngineCore pid=200", "12-03 10:00:12", "instrumentation.py:144", PATCHED),
        logged("EngineCore pid=200", "12-03 10:00:12", "model_runner.py:305",
               "Model loading took 0.58 GiB and 15.8 seconds"),
        logged("APIServer pid=100", "12-03 10:00:18", "api_server.py:1",
               "Starting vLLM API server 0 on http://0.0.0.0:8000"),
        logged("EngineCore pid=200", "12-03 10:00:16", "gpu_worker.py:400",
               "Available KV cache memory: 10.00 GiB"),
        logged("APIServer pid=100", "12-03 10:00:20", "launcher.py:1", "Application startup complete."),
    ]
    d = diagnosed(loki_newest_first(lines))
    assert (d.verdict, d.exit_code) == ("inconclusive", 2), d.summary
    assert "reads newest first (its timestamps go back 2 times)" in d.summary


def test_the_logs_of_nodes_started_before_the_head_are_not_said_to_read_newest_first(tmp_path):
    """Three nodes' logs, each in order, the later ones starting earlier, are judged: protected."""
    head = protected_start(["12-03 10:00:10", "12-03 10:00:15", "12-03 10:00:20",
                            "12-03 10:00:25", "12-03 10:00:30"])

    def node(worker: str, start: str) -> list[str]:
        return [
            logged(worker, start, "instrumentation.py:144", PATCHED),
            logged(worker, "12-03 10:00:20", "model_runner.py:305",
                   "Model loading took 0.58 GiB and 15.8 seconds"),
            logged(worker, "12-03 10:00:25", "gpu_worker.py:400", "Available KV cache memory: 10.00 GiB"),
        ]

    paths = []
    for name, lines in (("head.log", head), ("node-1.log", node("Worker_TP1 pid=301", "12-03 10:00:05")),
                        ("node-2.log", node("Worker_TP2 pid=302", "12-03 10:00:02"))):
        (tmp_path / name).write_text("\n".join(lines) + "\n")
        paths.append(tmp_path / name)
    proc = run(*paths)
    assert proc.returncode == 0, proc.stdout.decode()
    assert proc.stdout.startswith(b"Protected:")


def test_a_log_read_bottom_up_by_its_traceback_headers_is_said_to_read_newest_first():
    """Two workers' tracebacks of one second, newest first: their headers come after their frames."""
    lines = []
    for worker in ("Worker_TP0 pid=300", "Worker_TP1 pid=301"):
        head = f"({worker}) ERROR 12-01 01:51:26 [multiproc_executor.py:1007] "
        lines += [head + "WorkerProc hit an exception."] + traceback_50615(head)
    d = diagnosed(loki_newest_first(lines))
    assert (d.verdict, d.exit_code) == ("inconclusive", 2)
    assert "reads newest first (its timestamps go back 2 times)" in d.summary, d.summary


# --- what lines are read as ---------------------------------------------------------


@pytest.mark.parametrize("times", [1, 15])
def test_ray_s_repeated_lines_are_each_worker_s_own_crash(times):
    """A worker's traceback that Ray deduplicated (``[repeated 1x across
    cluster]``, ``[repeated 15x ...]`` for a larger cluster) is its #50615 crash."""
    lines = [logged("APIServer pid=100", "12-01 10:00:00", "model.py:623",
                    "Resolved architecture: DeepseekV4ForCausalLM")]
    for pid in (500, 501):
        lines.append(logged(f"RayWorkerWrapper pid={pid}, ip=10.0.0.1", "12-01 10:00:10",
                            "model_runner.py:305", "Model loading took 0.58 GiB and 15.8 seconds"))
    for pid, repeated in ((500, ""), (501, f" [repeated {times}x across cluster]")):
        head = f"(RayWorkerWrapper pid={pid}, ip=10.0.0.1) ERROR 12-01 10:00:30 [worker_base.py:620] "
        lines += [line + repeated for line in traceback_50615(head)]
    d = diagnosed("\n".join(lines) + "\n")
    assert d.exit_code == 1, d.summary
    assert d.crash["processes"] == ["RayWorkerWrapper pid=500", "RayWorkerWrapper pid=501"]
    assert "in RayWorkerWrapper pid=500, RayWorkerWrapper pid=501." in d.summary


def test_a_worker_logging_with_debug_paths_from_gpu_worker_still_runs_the_model():
    """DEBUG-level heads name paths (``[v1/worker/gpu_worker.py:N]``): TP1 still runs the model."""
    lines = [
        logged("APIServer pid=100", "12-03 10:00:00", "entrypoints/openai/api_server.py:1",
               "vLLM API server version 0.26.0"),
        logged("APIServer pid=100", "12-03 10:00:00", "config/model.py:623",
               "Resolved architecture: DeepseekV4ForCausalLM"),
        logged("Worker_TP0 pid=201", "12-03 10:00:10", "instrumentation.py:144", PATCHED),
        logged("Worker_TP0 pid=201", "12-03 10:00:10", "v1/worker/gpu/model_runner.py:305",
               "Model loading took 0.58 GiB and 15.8 seconds"),
        logged("Worker_TP1 pid=202", "12-03 10:00:10", "v1/worker/gpu_worker.py:250",
               "worker init: local_rank=1", level="DEBUG"),
        logged("Worker_TP1 pid=202", "12-03 10:00:10", "v1/worker/gpu_worker.py:378",
               "Using V2 Model Runner"),
        logged("Worker_TP0 pid=201", "12-03 10:00:12", "v1/worker/gpu_worker.py:400",
               "Available KV cache memory: 10.00 GiB"),
        logged("Worker_TP1 pid=202", "12-03 10:00:12", "v1/worker/gpu_worker.py:400",
               "Available KV cache memory: 10.00 GiB"),
        logged("APIServer pid=100", "12-03 10:00:20", "entrypoints/launcher.py:1",
               "Application startup complete."),
    ]
    d = diagnosed("\n".join(lines) + "\n")
    assert d.exit_code == 2, d.summary
    assert "not in effect in Worker_TP1 pid=202" in d.summary


def test_a_crash_under_rank0_after_a_bare_traceback_is_the_50615_crash():
    """An unprefixed traceback (a spawned helper's) does not stop torch's ``[rank0]: `` being read."""
    lines = [
        "INFO 12-01 10:00:00 [model.py:623] Resolved architecture: DeepseekV4ForCausalLM",
        "INFO 12-01 10:00:01 [core.py:116] Initializing a V1 LLM engine (v0.26.0) with config: "
        "model='/models/DeepSeek-V4-Flash'",
        "Traceback (most recent call last):",
        '  File "<string>", line 1, in <module>',
        '  File "/usr/lib/python3.12/multiprocessing/spawn.py", line 122, in spawn_main',
        "    exitcode = _main(fd, parent_sentinel)",
        '  File "/usr/lib/python3.12/multiprocessing/spawn.py", line 131, in _main',
        "    prepare(preparation_data)",
        "ModuleNotFoundError: No module named 'bench_offline'",
        "INFO 12-01 10:00:20 [model_runner.py:305] Model loading took 0.58 GiB and 15.8 seconds",
    ] + traceback_50615("[rank0]: ")
    d = diagnosed("\n".join(lines) + "\n")
    assert (d.verdict, d.exit_code) == ("crash-50615", 1), d.summary
    assert d.crash["statement"] == "assert self.topk_indices_buffer is not None"


def test_a_python_dict_line_that_is_not_json_is_read_as_a_line():
    """An offline script's printed dict (``{'model': ...}``) before the crash: still the crash, no error."""
    text = "{'model': '/models/DeepSeek-V4-Flash', 'tensor_parallel_size': 1}\n" + text_of(CRASH)
    d = diagnosed(text)
    assert (d.verdict, d.exit_code) == ("crash-50615", 1), d.summary


def test_the_same_pid_in_two_nodes_logs_is_two_processes(tmp_path):
    """Two containers' logs (pid 200 in each) given together: the unpatched one is named, exit 2."""
    node0 = protected_start(["12-01 10:00:00", "12-01 10:00:10", "12-01 10:00:12",
                             "12-01 10:00:14", "12-01 10:00:20"])
    node0 = [line.replace("(EngineCore pid=200)", "(EngineCore_DP0 pid=200)") for line in node0]
    node1 = [
        logged("EngineCore_DP1 pid=200", "12-01 10:00:12", "model_runner.py:305",
               "Model loading took 0.58 GiB and 15.8 seconds"),
        logged("EngineCore_DP1 pid=200", "12-01 10:00:14", "gpu_worker.py:400",
               "Available KV cache memory: 10.00 GiB"),
    ]
    (tmp_path / "node-0.log").write_text("\n".join(node0) + "\n")
    (tmp_path / "node-1.log").write_text("\n".join(node1) + "\n")
    proc = run(tmp_path / "node-0.log", tmp_path / "node-1.log")
    assert proc.returncode == 2, proc.stdout.decode()
    assert b"not in effect in EngineCore_DP1 pid=200" in proc.stdout


def test_a_text_that_is_no_vllm_log_is_said_to_be_none():
    """A pip log, not a server's: "the input is not a vLLM log"; nothing at all: "the input is empty"."""
    pip = ("Collecting vllm==0.26.0\n"
           "  Downloading vllm-0.26.0-cp38-abi3-manylinux1_x86_64.whl (400.1 MB)\n"
           "Successfully installed vllm-0.26.0\n")
    d = diagnosed(pip)
    assert d.summary == "Nothing conclusive: the input is not a vLLM log (no vLLM log line in it)."
    assert diagnosed("").summary == "Nothing conclusive: the input is empty."


# --- what is counted, and the caps ---------------------------------------------------------


def test_a_json_lines_log_is_said_to_hold_as_many_lines_as_it_has():
    """docker's json-file log: one record a line, each counted once in "(N lines read; ...)"."""
    records = _json_records(text_of(PROTECTED), docker=True)
    count = len(records.splitlines())
    d = diagnosed(records)
    assert d.exit_code == 0, d.summary
    assert d.lines_read == count
    assert diagnose.render(d).endswith(f"({count:,} lines read; exit 0)")


def test_a_long_death_line_is_quoted_to_300_characters():
    """Ray's long "A worker died" line is quoted in the summary cut at 300 characters."""
    death = (
        "A worker died or was killed while executing a task by an unexpected system error. To "
        "troubleshoot the problem, check the logs for the dead worker. RayTask ID: "
        "ffffffffffffffff0d3c7a8e01000000 Worker ID: 5a2f Node ID: 9b1c Worker IP address: 10.0.0.1 "
        "Worker port: 10002 Worker PID: 500 Worker exit type: SYSTEM_ERROR Worker exit detail: Worker "
        "unexpectedly exits with a connection error code 2. End of file. There are some potential root "
        "causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray "
        "stop --force is called. (3) The worker is crashed unexpectedly due to SIGSEGV or other "
        "unexpected errors."
    )
    assert len(death) > 301
    lines = [
        logged("APIServer pid=100", "12-01 10:00:00", "model.py:623",
               "Resolved architecture: DeepseekV4ForCausalLM"),
        logged("RayWorkerWrapper pid=500, ip=10.0.0.1", "12-01 10:00:10", "model_runner.py:305",
               "Model loading took 0.58 GiB and 15.8 seconds"),
        "(raylet) " + death,
    ]
    d = diagnosed("\n".join(lines) + "\n")
    assert (d.verdict, d.exit_code) == ("other-crash", 3), d.summary
    assert f"a process died ({death[:300]}), at line 3 of the log" in d.summary


def test_the_processes_reported_stop_at_the_cap():
    """A Ray cluster of 600 worker pids: the report lists 512 of them and one for the rest."""
    lines = [logged(f"RayWorkerWrapper pid={1000 + i}, ip=10.0.0.1", "12-01 10:00:00",
                    "worker.py:1", "Worker started") for i in range(600)]
    d = diagnosed("\n".join(lines) + "\n")
    assert len(d.processes) == MAX_PROCESSES + 1 == 512 + 1


def test_the_names_a_process_is_reported_under_stop_at_eight():
    """A pid that logs under nine names is reported under its first eight (and named by them)."""
    names = ["Worker", "Worker_DP0", "Worker_TP0", "Worker_PP0", "Worker_EP0", "Worker_DP0_TP0",
             "Worker_DP0_PP0", "Worker_TP0_EP0", "Worker_DP0_TP0_PP0_EP0"]
    lines = [logged(f"{name} pid=300", "12-01 10:00:00", "parallel_state.py:1", f"rank 0 as {name}")
             for name in names]
    d = diagnosed("\n".join(lines) + "\n")
    [process] = d.processes
    assert process["names"] == names[:8]
    assert process["process"] == "Worker_DP0_TP0 pid=300"


def test_a_process_s_reported_errors_are_its_first_two_and_the_oldest_of_its_last_six():
    """Ten failed requests' tracebacks: the JSON report's errors are the 1st, 2nd and 5th."""
    lines = []
    for i in range(1, 11):
        head = f"(APIServer pid=100) ERROR 12-01 10:01:{i:02d} [serving_chat.py:300] "
        lines += [
            head + "Traceback (most recent call last):",
            head + '  File "/v/vllm/entrypoints/openai/serving_chat.py", line 300, in create_chat_completion',
            head + "    generator = self.engine_client.generate(",
            head + f"ValueError: request chatcmpl-{i}: the prompt is longer than max_model_len",
        ]
    proc = run("-", "--json", stdin=("\n".join(lines) + "\n").encode())
    report = json.loads(proc.stdout)
    [api] = report["processes"]
    assert api["tracebacks"] == 10
    assert [e["message"].split(":")[0] for e in api["errors"]] == [
        "request chatcmpl-1", "request chatcmpl-2", "request chatcmpl-5"]


# --- survivors of the mutation tool over log_reader.py (2026-12-04) --------------------


def _offline_start(minute: int, crashed: bool) -> list[str]:
    """An offline ``vllm.LLM`` start (no API server, no process prefix)."""
    t = f"12-04 10:{minute:02d}"
    lines = [
        f"INFO {t}:00 [model.py:623] Resolved architecture: DeepseekV4ForCausalLM",
        f"INFO {t}:01 [core.py:116] Initializing a V1 LLM engine (v0.26.0) with config: "
        "model='/models/DeepSeek-V4-Flash'",
    ]
    if crashed:
        return lines + [f"INFO {t}:20 [model_runner.py:305] Model loading took 0.58 GiB and 15.8 seconds"] \
            + traceback_50615(f"ERROR {t}:30 [core.py:1] ")
    return lines + [
        f"INFO {t}:02 [instrumentation.py:144] {PATCHED}",
        f"INFO {t}:20 [model_runner.py:305] Model loading took 0.58 GiB and 15.8 seconds",
        f"INFO {t}:30 [gpu_worker.py:400] Available KV cache memory: 10.00 GiB",
    ]


def test_an_offline_engine_started_again_is_judged_by_its_last_start():
    """No API server in the log: each "Initializing a V1 LLM engine" after
    the engine got somewhere is a new start; the crash, then a protected
    restart, reads protected with two starts."""
    d = diagnosed("\n".join(_offline_start(0, True) + _offline_start(5, False)) + "\n")
    assert (d.exit_code, d.starts) == (0, 2), d.summary


def test_a_source_counts_from_its_tenth_line():
    """Two wrappers met ``MIN_SOURCE_LINES`` times each are two sources; one
    line fewer of either is a wrapper met by chance."""
    from dspark_attn_plugin import log_reader

    def reader_with(a: int, b: int) -> log_reader.LogReader:
        r = log_reader.LogReader()
        for i in range(a):
            r.feed(f"[pod/vllm-0/vllm] (APIServer pid=1) INFO 12-04 10:00:{i:02d} [x.py:1] a")
        for i in range(b):
            r.feed(f"[pod/vllm-1/vllm] (APIServer pid=1) INFO 12-04 10:01:{i:02d} [x.py:1] b")
        return r

    n = log_reader.MIN_SOURCE_LINES
    assert n == 10
    assert reader_with(n, n).interleaved_sources == 2
    assert reader_with(n, n - 1).interleaved_sources == 0
    assert reader_with(n - 1, n).interleaved_sources == 0


def test_vllm_text_beyond_a_thousand_characters_into_a_line_is_not_learnt_as_a_wrapper():
    """A wrapper is learnt up to ``MAX_WRAPPER`` characters before vLLM's
    line; past that (text quoting a log line, far into a message) it is not,
    and the line is no vLLM line."""
    for pad, expected in ((1000 - len("[p] "), 1), (1001 - len("[p] "), 2)):
        lines = ["[p] " + "x" * pad + l for l in text_of(CRASH).splitlines()]
        d = diagnosed("\n".join(lines) + "\n")
        assert d.exit_code == expected, (pad, d.summary)


def test_a_quoted_log_is_read_from_its_first_line():
    """Each line in quotes behind a wrapper (a CSV-like export): the first
    line, the one the wrapper is learnt from, is read without its closing
    quote like the others (its plugin line counts)."""
    lines = protected_start(["12-04 10:00:00", "12-04 10:00:01", "12-04 10:00:20",
                             "12-04 10:00:30", "12-04 10:00:40"])
    quoted = [f'"2026-12-04T10:00:{i:02d}Z {l}"' for i, l in enumerate(lines[1:] + lines[:1])]
    d = diagnosed("\n".join(quoted) + "\n")
    assert d.exit_code == 0, d.summary
    engine = next(p for p in d.processes if p["process"].startswith("EngineCore"))
    assert engine["plugin"] == [{"state": "patched", "detail": "0.26.0"}], engine


def test_the_source_lines_of_a_frame_are_no_death():
    """Python 3.13 prints every line of a statement that spans several: a
    frame's second source line that says "died unexpectedly" is code, not a
    process dying; the crash is the traceback's own exception."""
    head = "(EngineCore pid=200) ERROR 12-04 10:00:30 [core.py:1] "
    lines = engine_loaded() + [head + l for l in (
        "Traceback (most recent call last):",
        '  File "/v/vllm/v1/engine/core.py", line 700, in run_engine_core',
        "    raise ValueError(",
        '        "Engine core died unexpectedly (exit code: -9)")',
        "    ^^^^^^^^^^^^^^^^^",
        "ValueError: max_model_len is too large")]
    assert_the_value_error(diagnosed("\n".join(lines) + "\n"))


@pytest.mark.parametrize("words", ["Shutting down", "died unexpectedly (exit code: -9)"])
def test_a_frame_s_first_source_line_is_code_not_a_stop_or_a_death(words):
    """A frame's own source line that says the server is shutting down, or
    that a process died, is code being run, not a stop or a death: the API
    server's report of the failed engine (logged first here) is followed by
    the engine's own traceback, which is the crash."""
    api = "(APIServer pid=100) ERROR 12-04 10:00:29 [launcher.py:1] "
    engine = "(EngineCore pid=200) ERROR 12-04 10:00:30 [core.py:1] "
    lines = engine_loaded() + [api + l for l in (
        "Traceback (most recent call last):",
        '  File "/v/vllm/v1/engine/utils.py", line 900, in wait_for_engine_startup',
        f'    raise RuntimeError(  # logs "{words}" first',
        "RuntimeError: Engine core initialization failed. See root cause above.")] + [
        engine + l for l in (
            "Traceback (most recent call last):",
            '  File "/v/vllm/v1/engine/core.py", line 700, in run_engine_core',
            "    check_model_len(config)",
            "ValueError: max_model_len is too large")]
    assert_the_value_error(diagnosed("\n".join(lines) + "\n"))


def resolving(others: int) -> list[str]:
    """An API server's start that resolved ``others`` architectures, none DeepSeek-V4."""
    names = ["Llama", "Qwen2", "Qwen3", "Mistral", "Gemma2", "Phi3", "Granite", "Olmo2", "Mixtral"]
    return [logged("APIServer pid=100", "12-04 10:00:00", "api_server.py:1",
                   "vLLM API server version 0.27.1")] + [
        logged("APIServer pid=100", "12-04 10:00:00", "model.py:623",
               f"Resolved architecture: {n}ForCausalLM") for n in names[:others]]


@pytest.mark.parametrize("others", [7, 8, 9])
def test_a_start_that_resolves_deepseek_v4_after_other_architectures_is_still_deepseek_v4(others):
    """A log that names other resolved architectures before DeepSeek-V4's
    (more than the eight the reader keeps) is never "not applicable": a
    start cut before its warmup stays inconclusive."""
    d = diagnosed("\n".join(resolving(others) + engine_loaded()) + "\n")
    assert (d.verdict, d.exit_code) == ("inconclusive", 2), d.summary
    assert d.summary.startswith("Nothing conclusive: the log stops before the model's warmup"), d.summary


def test_nine_other_architectures_and_no_deepseek_v4_are_not_read_as_another_model():
    """Past the eight architectures kept, one not kept may be DeepSeek-V4's:
    the log no longer shows another model; with eight, it does."""
    for others, verdict in ((8, "not-applicable"), (9, "inconclusive")):
        d = diagnosed("\n".join(resolving(others)) + "\n")
        assert d.verdict == verdict, (others, d.summary)


# Held-out review of the reader's rules (2026-12-06): logs that read wrong.


def test_an_earlier_start_of_another_model_is_no_verdict_for_a_deepseek_v4_start():
    """A Llama server, then a DeepSeek-V4 start cut after the plugin's first
    line: the Llama start's "not applicable" says nothing of this one."""
    llama = [logged(*row) for row in (
        ("APIServer pid=100", "12-01 01:37:23", "api_utils.py:345", "vLLM API server version 0.26.0"),
        ("APIServer pid=100", "12-01 01:37:23", "model.py:623", "Resolved architecture: LlamaForCausalLM"),
        ("EngineCore pid=200", "12-01 01:37:50", "gpu_model_runner.py:5347",
         "Model loading took 0.42 GiB memory and 2.34 seconds"),
        ("EngineCore pid=200", "12-01 01:37:57", "gpu_worker.py:560", "Available KV cache memory: 0.75 GiB"),
    )] + ["(APIServer pid=100) INFO:     Application startup complete."]
    v4 = [logged(*row) for row in (
        ("APIServer pid=300", "12-01 02:10:23", "api_utils.py:345", "vLLM API server version 0.26.0"),
        ("APIServer pid=300", "12-01 02:10:23", "model.py:623",
         "Resolved architecture: DeepseekV4ForCausalLM"),
        ("APIServer pid=300", "12-01 02:10:24", "instrumentation.py:144", PATCHED),
    )]
    assert diagnosed("\n".join(llama) + "\n").verdict == "not-applicable"
    d = diagnosed("\n".join(llama + v4) + "\n")
    assert (d.verdict, d.exit_code) == ("inconclusive", 2), d.summary
    assert "ran another model: that is no verdict for this start" in d.summary, d.summary


def _drafter_start(first_line: bool, tp1_patched: bool) -> list[str]:
    """A start whose only resolved architecture is an out-of-tree drafter's
    (``AcmeDraftForCausalLM``), with two workers past their warmup."""
    patched = [logged("Worker_TP0 pid=301", "12-01 01:37:46", "instrumentation.py:144", PATCHED)]
    if tp1_patched:
        patched.append(logged("Worker_TP1 pid=302", "12-01 01:37:46", "instrumentation.py:144",
                              PATCHED))
    return ([logged("APIServer pid=100", "12-01 01:37:20", "api_utils.py:345",
                    "vLLM API server version 0.26.0")] if first_line else []) + [
        logged("APIServer pid=100", "12-01 01:37:43", "model.py:623",
               "Resolved architecture: AcmeDraftForCausalLM"),
        logged("EngineCore pid=200", "12-01 01:37:45", "core.py:116",
               "Initializing a V1 LLM engine (v0.26.0) with config: model='/m'")] + patched + [
        logged(f"Worker_TP{r} pid={301 + r}", "12-01 01:37:50", "gpu_model_runner.py:5347",
               "Model loading took 0.42 GiB memory and 2.34 seconds") for r in (0, 1)] + [
        logged(f"Worker_TP{r} pid={301 + r}", "12-01 01:37:57", "gpu_worker.py:560",
               "Available KV cache memory: 0.75 GiB") for r in (0, 1)] + [
        "(APIServer pid=100) INFO:     Application startup complete."]


def test_a_model_whose_attention_the_plugin_judged_is_deepseek_v4_s_whatever_its_name():
    """The plugin judges DeepSeek-V4's attention only once that module is
    loaded: an out-of-tree model that uses it is no other model, and its
    unpatched TP1 is not in effect; patched everywhere, it is protected."""
    d = diagnosed("\n".join(_drafter_start(first_line=True, tp1_patched=False)) + "\n")
    assert (d.verdict, d.exit_code) == ("inconclusive", 2), d.summary
    assert "not in effect in Worker_TP1 pid=302" in d.summary, d.summary
    d = diagnosed("\n".join(_drafter_start(first_line=True, tp1_patched=True)) + "\n")
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary


def test_a_start_read_without_its_first_line_shows_no_other_model():
    """Cut after the target's architecture line (``--since``), a stock
    start shows only its drafter's: that is no other model."""
    lines = [l for l in _drafter_start(first_line=False, tp1_patched=False)
             if "instrumentation.py" not in l]
    d = diagnosed("\n".join(lines) + "\n")
    assert d.exit_code == 2, d.summary
    d = diagnosed("\n".join([logged("APIServer pid=100", "12-01 01:37:20", "api_utils.py:345",
                                     "vLLM API server version 0.26.0")] + lines) + "\n")
    assert (d.verdict, d.exit_code) == ("not-applicable", 0), d.summary


@pytest.mark.parametrize("wrapper", [
    "2026-12-01T01:37:{i:02d}.{i:09d}Z ",  # kubectl logs --timestamps
    "Dec 01 01:37:{i:02d} gpu-host vllm[4242]: ",  # journalctl
    "[pod/vllm-0/vllm] ",  # kubectl logs --prefix
])
def test_torch_s_rank_prefix_after_a_pipeline_s_is_cut_too(wrapper):
    """``[rank0]:`` after a pipeline's wrapper: the traceback is still read,
    and the crash is #50615."""
    lines = (protected_start(["12-04 10:00:00"] * 5)[:1]
             + [logged("EngineCore pid=200", "12-04 10:00:20", "model_runner.py:305",
                       "Model loading took 0.58 GiB and 15.8 seconds")]
             + traceback_50615("[rank0]: "))
    d = diagnosed("\n".join(wrapper.format(i=i) + l for i, l in enumerate(lines)) + "\n")
    assert (d.verdict, d.exit_code) == ("crash-50615", 1), d.summary
    assert d.crash["statement"] == "assert self.topk_indices_buffer is not None"


def test_a_pipeline_s_wrapper_learnt_from_a_rank_line_leaves_torch_s_prefix_out():
    """``kubectl logs --timestamps`` of a TP=2 server whose first lines are
    torch's ``[rank0]:``/``[rank1]:`` (more than ten each): the ranks are no
    sources of their own; the log reads protected."""
    ranks = [f"[rank{i % 2}]: " + logged("EngineCore pid=200", "12-04 09:59:59", "parallel_state.py:1000",
                                         f"rank {i % 2} line {i // 2}")[len("(EngineCore pid=200) "):]
             for i in range(24)]
    lines = ranks + protected_start(["12-04 10:00:00"] * 5)
    d = diagnosed("\n".join(f"2026-12-04T10:00:{i % 60:02d}.{i:09d}Z " + l
                             for i, l in enumerate(lines)) + "\n")
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary


def _ranks(lines_of_rank) -> list[str]:
    """A ``torchrun`` run of vLLM's external launcher: each rank's lines,
    taken in turn, carry only torch's ``[rankN]:``."""
    out = []
    for row in zip(*lines_of_rank):
        out += [f"[rank{r}]: {l}" for r, l in enumerate(row) if l is not None]
    return out


def _external_launcher(rank: int, patched: bool) -> list:
    body = "INFO 12-01 01:37:{:02d} [{}] {}"
    lines = [("model.py:623", "Resolved architecture: DeepseekV4ForCausalLM"),
             ("llm_engine.py:1", "Initializing a V1 LLM engine (v0.26.0) with config: model='/m', "
              "distributed_executor_backend=external_launcher"),
             ("instrumentation.py:144", PATCHED) if patched else None,
             ("gpu_model_runner.py:5347", "Model loading took 0.42 GiB memory and 2.3 seconds"),
             ("gpu_worker.py:560", "Available KV cache memory: 0.75 GiB")]
    return [body.format(i, *l) if l else None for i, l in enumerate(lines)]


def test_torch_s_rank_tells_processes_apart_where_vllm_s_prefix_does_not():
    """Under ``torchrun``, ``[rank0]:`` and ``[rank1]:`` are two processes:
    rank 0's plugin line does not cover rank 1."""
    d = diagnosed("\n".join(_ranks([_external_launcher(0, True), _external_launcher(1, False)])) + "\n")
    assert d.exit_code == 2 and "not in effect in rank1" in d.summary, d.summary
    d = diagnosed("\n".join(_ranks([_external_launcher(0, True), _external_launcher(1, True)])) + "\n")
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary


@pytest.mark.parametrize("wrap", ["", "2026-12-01T01:37:{i:02d}.{i:09d}Z "], ids=["bare", "timestamps"])
def test_each_rank_s_traceback_is_read_on_its_own_when_they_interleave(wrap):
    """Rank 1's #50615 traceback with rank 0's lines between its lines:
    still the crash, in rank1."""
    tb = traceback_50615("")
    other = [f"INFO 12-01 01:37:50 [gpu_worker.py:1] rank 0 line {i}" for i in range(len(tb))]
    lines = (protected_start(["12-01 01:37:00"] * 5)[:1] + _ranks([other, tb]))
    d = diagnosed("\n".join(wrap.format(i=i) + l for i, l in enumerate(lines)) + "\n")
    assert (d.verdict, d.exit_code) == ("crash-50615", 1), d.summary
    assert d.crash["processes"] == ["rank1"], d.crash


def test_torch_s_rank_after_vllm_s_process_prefix_is_cut():
    """``(EngineCore pid=200) [rank0]: Traceback ...``: the traceback is read."""
    lines = engine_loaded() + traceback_50615("(EngineCore pid=200) [rank0]: ")
    d = diagnosed("\n".join(lines) + "\n")
    assert (d.verdict, d.exit_code) == ("crash-50615", 1), d.summary
    assert d.crash["processes"] == ["EngineCore pid=200"], d.crash


def test_torch_s_own_warning_takes_no_plugin_line_from_the_process_that_wrote_it():
    """An in-process run with no prefixes: a ``[rank0]:[W...]`` NCCL warning
    right after the plugin's line is torch's, not a new vLLM process that
    the plugin's line was written for; the run is one process, protected."""
    lines = [re.sub(r"^\(\w+ pid=\d+\) ", "", l) for l in text_of(PROTECTED).splitlines()]
    at = next(i for i, l in enumerate(lines) if "patched" in l) + 1
    lines[at:at] = ["[rank0]:[W1130 05:44:33.222862174 ProcessGroupNCCL.cpp:1575] Warning: "
                    "destroy_process_group() was not called before program exit"]
    d = diagnosed("\n".join(lines) + "\n")
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary
    assert [p["process"] for p in d.processes] == ["(no prefix)"], d.processes


def _offline(config: str, arch: str = "SwaDrafterForCausalLM") -> list[str]:
    """An offline run past its warmup, no plugin line, whose only resolved
    architecture is ``arch``, its engine configured with ``config``."""
    return [
        f"INFO 12-01 01:37:23 [model.py:623] Resolved architecture: {arch}",
        logged("EngineCore_DP0 pid=20", "12-01 01:37:42", "core.py:116",
               f"Initializing a V1 LLM engine (v0.26.0) with config: model='/m', {config}"),
        logged("EngineCore_DP0 pid=20", "12-01 01:37:44", "gpu_model_runner.py:5347",
               "Model loading took 0.42 GiB memory and 2.3 seconds"),
        logged("EngineCore_DP0 pid=20", "12-01 01:37:45", "gpu_worker.py:560",
               "Available KV cache memory: 0.75 GiB"),
    ]


def test_an_offline_start_shows_another_model_only_where_its_engine_has_no_drafter():
    """Offline, the only architecture a cut log shows may be the drafter's:
    another model only where the engine's config says it has none."""
    d = diagnosed("\n".join(_offline("speculative_config=SpeculativeConfig(method='dspark')")) + "\n")
    assert d.exit_code == 2, d.summary
    d = diagnosed("\n".join(_offline("speculative_config=None", "LlamaForCausalLM")) + "\n")
    assert (d.verdict, d.exit_code) == ("not-applicable", 0), d.summary


# A third held-out review (2026-12-06): logs that read wrong.


def test_a_start_with_no_plugin_line_after_an_in_process_protected_one_is_not_protected():
    """Two offline runs appended to one file, no prefixes: the first run's
    plugin line is its own, not the second's; the second shows none."""
    first = [re.sub(r"^\(\w+ pid=\d+\) ", "", l) for l in text_of(PROTECTED).splitlines()]
    second = [l.replace(" 11-30 06:", " 11-30 08:") for l in first if "dspark-attn-plugin" not in l]
    assert diagnosed("\n".join(first) + "\n").exit_code == 0
    d = diagnosed("\n".join(first + ["vllm-1 exited with code 0"] + second) + "\n")
    assert d.exit_code == 2 and d.starts == 2, d.summary


@pytest.mark.parametrize("line, verdict", [
    ("dspark-attn-plugin does not recognise vllm.models.deepseek_v4.nvidia.flashmla."
     "DeepseekV4FlashMLAAttention.forward_mqa in vLLM 0.27.1 (a shape it does not know) and "
     "left it untouched; run `dspark-attn-plugin verify` to check this build", "inconclusive"),
    ("dspark-attn-plugin could not register, vLLM's code is left as it is: "
     "RuntimeError('x')", "not-applicable"),
])
def test_the_plugin_leaving_deepseek_v4_s_attention_alone_is_deepseek_v4(line, verdict):
    """The plugin says it left DeepSeek-V4's attention alone only once that
    module is loaded: no other model; failing to register says nothing."""
    lines = resolving(1) + [logged("EngineCore pid=200", "12-04 10:00:05", "instrumentation.py:128",
                                   line, level="WARNING")]
    d = diagnosed("\n".join(lines) + "\n")
    assert d.verdict == verdict, d.summary


def test_torchrun_s_rank_before_torch_s_own_is_cut_with_it():
    """``TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE="[rank${rank}]:"`` before
    torch's excepthook's ``[rank0]: ``: the traceback is read."""
    lines = engine_loaded() + traceback_50615("[rank0]:[rank0]: ")
    d = diagnosed("\n".join(lines) + "\n")
    assert (d.verdict, d.exit_code) == ("crash-50615", 1), d.summary


def test_torchrun_s_default_prefix_names_each_rank():
    """``torchrun --tee 3`` writes ``[default0]:``, ``[default1]:``: each a
    process, no source; both patched, the run is protected."""
    more = [[f"INFO 12-01 01:38:{k:02d} [gpu_worker.py:1] rank {r} line {k}" for k in range(12)]
            for r in (0, 1)]  # more than ten lines each, as a source would need
    lines = [l.replace("[rank", "[default") for l in
             _ranks([_external_launcher(0, True) + more[0], _external_launcher(1, True) + more[1]])]
    d = diagnosed("\n".join(lines) + "\n")
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary


def test_a_process_that_says_both_patched_and_off_is_not_covered():
    """Two ranks with no prefix at all read as one process: one says the
    plugin patched, the other that it is off. Not protected."""
    ranks = _ranks([_external_launcher(0, True), _external_launcher(1, False)])
    lines = [re.sub(r"^\[rank\d+\]: ", "", l) for l in ranks]
    lines.insert(3, "INFO 12-01 01:37:02 [__init__.py:40] dspark-attn-plugin is disabled by "
                    "DSPARK_ATTN_PLUGIN=off: vLLM's code is left as it is")
    d = diagnosed("\n".join(lines) + "\n")
    assert d.exit_code == 2 and "not in effect" in d.summary, d.summary


# A fourth held-out review (2026-12-06): logs that read wrong.


def test_the_dspark_drafter_s_architecture_is_deepseek_v4_s():
    """vLLM builds ``DSparkDraftModel`` from DeepSeek-V4's module: a start
    that resolves it (its target under a fork's own name) is no other
    model, even cut before its warmup with no plugin line."""
    lines = resolving(0) + [logged("APIServer pid=100", "12-04 10:00:00", "model.py:623",
                                   f"Resolved architecture: {a}")
                            for a in ("AcmeV4ForCausalLM", "DSparkDraftModel")]
    d = diagnosed("\n".join(lines) + "\n")
    assert d.verdict == "inconclusive", d.summary


def test_two_torchrun_tee_runs_in_one_file_keep_each_rank_s_plugin_line():
    """``torchrun --tee`` twice into one file, both runs patched: each run's
    plugin lines, written before its engine's first line, stay its ranks'."""
    run = [l.replace("[rank", "[default") for l in
           _ranks([_external_launcher(0, True), _external_launcher(1, True)])]
    first = [l for l in run if "Resolved architecture" not in l]
    plugin_first = sorted(first, key=lambda l: "instrumentation.py" not in l)  # stable
    later = [l.replace(" 12-01 01:", " 12-01 02:") for l in plugin_first]
    d = diagnosed("\n".join(first + later) + "\n")
    assert (d.verdict, d.exit_code, d.starts) == ("protected", 0, 2), d.summary


# A fifth held-out review (2026-12-06): logs that read wrong.


def _ray_tp2(plugin_repeated: bool) -> list[str]:
    """Ray TP=2 over two nodes with Ray's log deduplication on: the second
    node's worker shows only through ``[repeated 1x across cluster]``."""
    folded = " [repeated 1x across cluster]"
    return [logged(*row) for row in (
        ("APIServer pid=100", "12-05 10:00:01", "api_utils.py:345", "vLLM API server version 0.27.1"),
        ("APIServer pid=100", "12-05 10:00:05", "model.py:645",
         "Resolved architecture: DeepseekV4ForCausalLM"),
        ("EngineCore pid=200", "12-05 10:00:20", "core.py:116",
         "Initializing a V1 LLM engine (v0.27.1) with config: model='/m'"),
        ("RayWorkerWrapper pid=300", "12-05 10:00:35", "instrumentation.py:157", PATCHED),
        ("RayWorkerWrapper pid=300", "12-05 10:00:45", "gpu_model_runner.py:5405",
         "Model loading took 40.1 GiB memory and 25.0 seconds"),
        ("EngineCore pid=200", "12-05 10:01:00", "kv_cache_utils.py:2177",
         "GPU KV cache size: 1,282,068 tokens"),
        ("RayWorkerWrapper pid=300", "12-05 10:00:46", "gpu_model_runner.py:5405",
         "Model loading took 40.1 GiB memory and 25.3 seconds" + folded),
    )] + ([logged("RayWorkerWrapper pid=300", "12-05 10:00:36", "instrumentation.py:157",
                  PATCHED + folded)] if plugin_repeated else []) + [
        "(APIServer pid=100) INFO:     Application startup complete."]


def test_a_worker_ray_folded_into_another_s_lines_must_show_the_plugin_too():
    """A model line repeated once more across the cluster is one more
    process that runs the model: without the plugin's line repeated as
    often, the log does not show it covered."""
    d = diagnosed("\n".join(_ray_tp2(plugin_repeated=False)) + "\n")
    assert d.exit_code == 2 and "[repeated 1x across cluster]" in d.summary, d.summary
    d = diagnosed("\n".join(_ray_tp2(plugin_repeated=True)) + "\n")
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary


def test_a_worker_that_never_says_it_loaded_the_model_still_runs_it():
    """vLLM 0.27 logs a model's loading once per host: a TP1 worker with no
    such line and no plugin line is still a process that runs the model."""
    lines = [logged(*row) for row in (
        ("APIServer pid=100", "12-05 10:00:01", "api_utils.py:345", "vLLM API server version 0.27.1"),
        ("APIServer pid=100", "12-05 10:00:05", "model.py:645",
         "Resolved architecture: DeepseekV4ForCausalLM"),
        ("Worker_TP0 pid=300", "12-05 10:00:35", "instrumentation.py:157", PATCHED),
        ("Worker_TP1 pid=301", "12-05 10:00:35", "parallel_state.py:1615", "world_size=2 rank=1"),
        ("Worker_TP0 pid=300", "12-05 10:00:45", "gpu_model_runner.py:5405",
         "Model loading took 40.1 GiB memory and 25.0 seconds"),
        ("Worker_TP0 pid=300", "12-05 10:01:00", "gpu_worker.py:560", "Available KV cache memory: 9 GiB"),
    )] + ["(APIServer pid=100) INFO:     Application startup complete."]
    d = diagnosed("\n".join(lines) + "\n")
    assert d.exit_code == 2 and "not in effect in Worker_TP1 pid=301" in d.summary, d.summary


@pytest.mark.parametrize("statement", [None, "    self.impl.forward("], ids=["none", "another-process-s"])
def test_an_assertion_in_forward_mqa_without_its_own_statement_is_probably_50615(statement):
    """The #50615 traceback with no source line for the assertion (an image
    without .py files), or with a line no assertion is in (two processes'
    tracebacks mixed): probably #50615 (exit 2), never a different crash."""
    tb = traceback_50615("")
    tb = [l for l in tb if "topk_indices_buffer" not in l]
    if statement is not None:
        tb.insert(-1, statement)
    d = diagnosed("\n".join(engine_loaded() + tb) + "\n")
    assert (d.verdict, d.exit_code) == ("inconclusive", 2), d.summary
    assert d.summary.startswith("Probably vllm-project/vllm#50615"), d.summary


# Survivors of the mutation tool over log_reader.py (2026-12-05).


def test_a_log_cut_right_after_the_plugins_rescue_line_reads_protected():
    """The plugin's "warmed up without topk_indices_buffer" line is written
    where stock vLLM would have died in ``profile_run``: a log that ends on
    it has passed the crash, and reads protected."""
    from dspark_attn_plugin import diagnose as diagnose_mod
    from dspark_attn_plugin.log_reader import RESCUED

    root = Path(__file__).resolve().parents[1]
    lines = (root / "benchmarks/results/engine-e2e-2026-11-30/run-D-standin-plugin.log").read_text(
        encoding="utf-8", errors="replace").splitlines()
    cut = next(i for i, l in enumerate(lines) if RESCUED.search(l)) + 1
    assert not any(w in l for l in lines[:cut] for w in ("Available KV cache memory", "GPU KV cache size",
                                                           "init engine (profile", "Graph capturing finished",
                                                           "Application startup complete"))
    d = diagnosed("\n".join(lines[:cut]) + "\n")
    assert (d.exit_code, d.verdict) == (diagnose_mod.EXIT_OK, "protected"), d.summary


def test_vllms_head_is_looked_for_in_the_first_300_characters_of_a_prefixed_line():
    """After a process prefix, vLLM's head (level, time, file) may follow a
    VLLM_LOGGING_PREFIX: it is read when it ends within the line's first 300
    characters after the prefix, and not further (the search stays bounded)."""
    from dspark_attn_plugin import log_reader

    head = "INFO 12-04 10:00:00 [x.py:1] "
    # The match may leave out the space after the file: it ends at filler + len(head).
    for filler, read in ((300 - len(head), True), (300 - len(head) + 1, False)):
        r = log_reader.LogReader()
        r.feed("(APIServer pid=1) " + "x" * filler + " " + head + "text")
        assert (r._latest is not None) is read, (filler, r._latest)


def test_a_restart_cut_early_quotes_the_start_before_it_as_that_start():
    """The last start cut before its warmup is judged by the one before it;
    the report quotes that start's verdict as its own, not as "the last of
    N starts" (which it is not)."""
    from test_log_formats import PROTECTED as PROTECTED_LOG, lines_of

    protected = lines_of(PROTECTED_LOG)
    restart = [l.replace(" 11-30 06:", " 11-30 08:") for l in protected[:20]]  # later, as a restart is
    d = diagnosed("\n".join(protected + restart) + "\n")
    assert (d.exit_code, d.starts) == (0, 2), d.summary
    assert "had not reached its warmup; start 1 (from line 1)" in d.summary, d.summary
    assert d.summary.count("This is the last of") == 0, d.summary


def test_the_same_assertion_in_another_function_of_flashmla_is_another_crash():
    """#50615 is the warmup's assertion in ``forward_mqa``; the same
    assertion in ``_forward_prefill`` (a sparse layer's prefill, which the
    plugin does not change) is a different crash, whatever the function's
    name sorts before or after."""
    for func in ("_forward_prefill", "forward_prefill", "forward_mqa_v2"):
        lines = _offline_start(0, True)
        at = lines.index(next(l for l in lines if l.endswith("line 90, in forward_mqa")))
        head = lines[at][:lines[at].index('  File "')]
        lines[at + 1:at + 1] = [head + '    return self._prefill(q, kv)',
                                head + f'  File "/v/vllm/models/deepseek_v4/nvidia/flashmla.py", line 130, in {func}']
        d = diagnosed("\n".join(lines) + "\n")
        assert (d.verdict, d.exit_code) == ("other-crash", 3), (func, d.summary)
        assert f"flashmla.py:130 in {func}" in d.summary, d.summary
    d = diagnosed("\n".join(_offline_start(0, True)) + "\n")
    assert (d.verdict, d.exit_code) == ("crash-50615", 1), d.summary


def _timed(lines: list[str], times: list[str]) -> list[str]:
    """``lines`` (vLLM's head, no prefix) stamped ``times`` (HH:MM:SS)."""
    out = []
    for line, when in zip(lines, times):
        level, day, _, rest = line.split(" ", 3)
        out.append(f"{level} {day} {when} {rest}")
    return out


def test_a_restart_a_second_after_the_start_before_it_is_the_same_server():
    """An offline engine made again at once (10:01:03, then 10:01:04): the
    restart's time is after the lines above it, whatever its seconds' bits
    (one server restarted, not two servers' logs)."""
    first = _timed(_offline_start(0, False), ["10:00:58", "10:00:59", "10:01:00", "10:01:02", "10:01:03"])
    second = _timed(_offline_start(0, False), ["10:01:04", "10:01:05", "10:01:06", "10:01:07", "10:01:08"])
    d = diagnosed("\n".join(first + second) + "\n")
    assert (d.verdict, d.exit_code, d.starts) == ("protected", 0, 2), d.summary


def test_a_restart_after_exited_with_code_begins_at_its_first_vllm_line():
    """After a supervisor's "exited with code 1", its own lines (no prefix,
    no vLLM head) are not the new start: that begins at the first vLLM line."""
    lines = (_offline_start(0, True) + ["vllm exited with code 1", "restarting vllm in 5 s",
                                        "+ python serve.py"] + _offline_start(5, False))
    first_vllm = len(_offline_start(0, True)) + 4
    d = diagnosed("\n".join(lines) + "\n")
    assert (d.exit_code, d.starts) == (0, 2), d.summary
    assert f"(it begins at line {first_vllm})." in d.summary, d.summary


def test_the_plugin_s_warning_is_reported_from_its_name_to_300_characters():
    """A WARNING of the plugin that left vLLM's code alone: the report
    quotes it from "dspark-attn-plugin" on, cut at 300 characters."""
    warning = ("dspark-attn-plugin cannot patch vllm.models.deepseek_v4.nvidia.flashmla."
               "DeepseekV4FlashMLAAttention.forward_mqa in vLLM 0.26.0 safely (" + "a reason " * 40
               + ") and left it untouched")
    lines = protected_start(["12-04 10:00:00"] * 5)
    lines[1] = logged("EngineCore pid=200", "12-04 10:00:01", "instrumentation.py:148",
                      "[plugins] " + warning, level="WARNING")
    d = diagnosed("\n".join(lines) + "\n")
    [core] = [p for p in d.processes if p["plugin"]]
    assert core["plugin"] == [{"state": "left-alone", "detail": warning[:300]}], core["plugin"]


def _dated(lines: list[str], day: str, times: list[str]) -> list[str]:
    """``lines`` (vLLM's head, no prefix) dated ``day`` (MM-DD) at ``times``."""
    return [f"{level} {day} {when} {rest}" for (level, _, _, rest), when in
            zip((line.split(" ", 3) for line in lines), times)]


def test_a_step_back_of_300_days_is_the_turn_of_a_year_and_less_is_another_server():
    """vLLM's times have no year: a start 300 days or more "before" the lines
    above it is a restart in the next year; one minute less is the log of
    another server (a restart cannot go back in time)."""
    first = _dated(_offline_start(0, False), "11-30", ["10:00:00", "10:00:01", "10:00:02", "10:00:03", "10:00:04"])
    for when, verdict in (("10:00:04", "protected"), ("10:01:04", "inconclusive")):
        # the second start begins at its second line ("Initializing ..."), 02-09 `when`
        second = _dated(_offline_start(0, False), "02-09", ["09:00:00", when, when, when, when])
        d = diagnosed("\n".join(first + second) + "\n")
        assert (d.verdict, d.starts) == (verdict, 2), (when, d.summary)


def test_one_step_back_in_time_is_no_log_read_newest_first():
    """A clock set back once during a start (NTP): one step back, no step
    forward, is not a log read newest first; as many steps back as forward
    (lines of two clocks) is not either."""
    once = _dated(_offline_start(0, False), "12-04", ["10:00:05", "10:00:00", "10:00:00", "10:00:00", "10:00:00"])
    d = diagnosed("\n".join(once) + "\n")
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary
    even = _dated(_offline_start(0, False), "12-04", ["10:00:00", "10:00:05", "10:00:00", "10:00:05", "10:00:00"])
    d = diagnosed("\n".join(even) + "\n")
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary


def test_a_dotted_cancelled_error_is_neither_a_crash_nor_a_stop():
    """asyncio's ``CancelledError`` is written with its module
    (``asyncio.exceptions.CancelledError``); a task cancelled (a Ctrl-C, a
    client that disconnected) is no crash, and no stop either: a crash after
    it is still judged."""
    cancelled = [
        "ERROR 12-04 10:01:00 [core.py:1] Traceback (most recent call last):",
        'ERROR 12-04 10:01:00 [core.py:1]   File "/v/vllm/v1/engine/core.py", line 10, in run',
        "ERROR 12-04 10:01:00 [core.py:1]     await task",
        "ERROR 12-04 10:01:00 [core.py:1] asyncio.exceptions.CancelledError",
    ]
    d = diagnosed("\n".join(_offline_start(0, False) + cancelled) + "\n")
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary
    assert "stopped" not in d.summary, d.summary
    crash = [
        "ERROR 12-04 10:02:00 [core.py:1] Traceback (most recent call last):",
        'ERROR 12-04 10:02:00 [core.py:1]   File "/v/vllm/v1/engine/core.py", line 20, in step',
        "ERROR 12-04 10:02:00 [core.py:1]     out = self.model_executor.execute_model()",
        "ERROR 12-04 10:02:00 [core.py:1] torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
    ]
    d = diagnosed("\n".join(_offline_start(0, False) + cancelled + crash) + "\n")
    assert (d.verdict, d.exit_code) == ("other-crash", 3), d.summary
    assert "AcceleratorError" in d.summary, d.summary


def test_a_log_that_begins_at_the_crash_s_innermost_frame_names_the_probable_50615():
    """A log cut (``tail``) inside the crash's traceback, at its frame in
    ``forward_mqa``: the frames of a traceback whose header was cut off
    still count."""
    tb = traceback_50615("(EngineCore_DP0 pid=214) ERROR 12-03 10:03:58 [core.py:708] ")
    at = next(i for i, line in enumerate(tb) if line.endswith("in forward_mqa"))
    d = diagnosed("\n".join(tb[at:]) + "\n")
    assert d.exit_code == 2 and d.summary.startswith("Probably vllm-project/vllm#50615: AssertionError at "
                                                     "/v/vllm/models/deepseek_v4/nvidia/flashmla.py:90 "
                                                     "in forward_mqa"), d.summary


def test_the_plugin_lines_carried_to_a_restart_stop_at_64():
    """Plugin lines written before vLLM prefixed its output go with the
    start that follows; the reader keeps the last 64 of them (bounded)."""
    lines = _offline_start(0, True) + [PATCHED] * 70 + _offline_start(5, False)
    d = diagnosed("\n".join(lines) + "\n")
    assert d.starts == 2 and [len(p["plugin"]) for p in d.processes] == [64 + 1], d.processes


# --- held-out mutations of log_reader.py (2026-12-06) ----------------------------------


def test_a_syslog_file_across_midnight_with_a_padded_day_is_one_source():
    """rsyslog writes a day below 10 padded with a space (``Dec  9``); one
    server's lines from ``Dec  9 23:59`` into ``Dec 10 00:00`` are one
    source, not two."""
    lines = text_of(PROTECTED).splitlines()
    half = len(lines) // 2
    wrapped = ([f"Dec  9 23:59:{i % 60:02d} gpu-node-3 vllm[4121]: {l}" for i, l in enumerate(lines[:half])]
               + [f"Dec 10 00:00:{i % 60:02d} gpu-node-3 vllm[4121]: {l}" for i, l in enumerate(lines[half:])])
    d = diagnosed("\n".join(wrapped) + "\n")
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary


def test_a_prefix_whose_text_collided_with_another_s_gets_the_next_bare_line():
    """Two workers writing at once: ``(Worker_TP1 ...) (Worker_TP0 ...) text``
    is TP0's line, and TP1's text comes on the next line with no prefix:
    both workers' plugin lines are theirs."""
    when = "12-06 07:10:17"
    lines = [logged("APIServer pid=1", when, "model.py:547", "Resolved architecture: DeepseekV4ForCausalLM"),
             f"(Worker_TP1 pid=332) (Worker_TP0 pid=331) INFO {when} [instrumentation.py:158] {PATCHED}",
             f"INFO {when} [instrumentation.py:158] {PATCHED}"]
    for tp, pid in ((0, 331), (1, 332)):
        lines += [logged(f"Worker_TP{tp} pid={pid}", "12-06 07:12:20", "model_runner.py:305",
                         "Model loading took 0.58 GiB and 15.8 seconds"),
                  logged(f"Worker_TP{tp} pid={pid}", "12-06 07:14:49", "gpu_worker.py:298",
                         "Available KV cache memory: 21.37 GiB")]
    lines.append(logged("APIServer pid=1", "12-06 07:15:28", "launcher.py:1", "Application startup complete."))
    d = diagnosed("\n".join(lines) + "\n")
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary
    plugin = {p["process"]: len(p["plugin"]) for p in d.processes if p["plugin"]}
    assert plugin == {"Worker_TP0 pid=331": 1, "Worker_TP1 pid=332": 1}, plugin


def test_ray_s_bare_pid_prefix_is_reported_as_a_ray_process():
    """Ray's older prefix names no actor (``(pid=500, ip=...)``): the
    process is reported as ``ray pid=500``."""
    lines = [logged("APIServer pid=100", "12-01 10:00:00", "model.py:623",
                    "Resolved architecture: DeepseekV4ForCausalLM"),
             "(pid=500, ip=10.0.0.1) INFO 12-01 10:00:10 [model_runner.py:305] "
             "Model loading took 0.58 GiB and 15.8 seconds"]
    lines += traceback_50615("(pid=500, ip=10.0.0.1) ERROR 12-01 10:00:30 [worker_base.py:620] ")
    d = diagnosed("\n".join(lines) + "\n")
    assert d.exit_code == 1 and d.crash["processes"] == ["ray pid=500"], d.summary


def test_the_first_line_of_a_wrapped_log_keeps_its_closing_quote():
    """A pod's log cut to begin at a death line that ends in a quote: the
    line learnt the wrapper, and its text is quoted whole (only a wrapper
    that opens a quote closes one)."""
    death = ('[pod/vllm-0/vllm] (EngineCore_DP0 pid=200) ERROR 12-01 10:00:30 [core.py:1] Worker proc '
             'VllmWorker-0 died unexpectedly, shutting down executor, signal "SIGKILL"')
    stop = "[pod/vllm-0/vllm] (APIServer pid=100) INFO 12-01 10:00:31 [x.py:1] Shutting down"
    d = diagnosed(death + "\n" + stop + "\n")
    assert d.exit_code == 3 and 'executor, signal "SIGKILL"), at line 1' in d.summary, d.summary


def test_a_data_parallel_engine_initialised_after_another_loaded_is_the_same_start():
    """``vllm serve --data-parallel-size 2``: an API server's engines start
    one after the other; the second's "Initializing a V1 LLM engine" after
    the first loaded the model is the same start, not a restart."""
    lines = [logged("APIServer pid=100", "12-04 10:00:00", "api_server.py:1", "vLLM API server version 0.26.0"),
             logged("APIServer pid=100", "12-04 10:00:01", "model.py:623",
                    "Resolved architecture: DeepseekV4ForCausalLM")]
    for dp in (0, 1):
        core = f"EngineCore_DP{dp} pid={200 + dp}"
        lines += [logged(core, "12-04 10:00:02", "core.py:116",
                         "Initializing a V1 LLM engine (v0.26.0) with config: model='/m'"),
                  logged(core, "12-04 10:00:03", "instrumentation.py:144", PATCHED),
                  logged(core, "12-04 10:00:20", "model_runner.py:305", "Model loading took 0.58 GiB and 15.8 seconds")]
    for dp in (0, 1):
        lines.append(logged(f"EngineCore_DP{dp} pid={200 + dp}", "12-04 10:00:30", "gpu_worker.py:400",
                            "Available KV cache memory: 10.00 GiB"))
    lines.append(logged("APIServer pid=100", "12-04 10:00:40", "launcher.py:1", "Application startup complete."))
    d = diagnosed("\n".join(lines) + "\n")
    assert (d.verdict, d.exit_code, d.starts) == ("protected", 0, 1), d.summary


def test_a_start_two_seconds_before_the_lines_above_it_is_another_servers():
    """Steps in time below two seconds are interleaving; a start timed two
    seconds or more before the lines above it is another server's log."""
    first = _dated(_offline_start(0, False), "12-04", ["10:00:00", "10:00:01", "10:00:02", "10:00:03", "10:00:04"])
    for when, verdict in (("10:00:02", "inconclusive"), ("10:00:03", "protected")):
        second = _dated(_offline_start(0, False), "12-04", [when, when, "10:00:06", "10:00:07", "10:00:08"])
        d = diagnosed("\n".join(first + second) + "\n")
        assert (d.verdict, d.starts) == (verdict, 2), (when, d.summary)
