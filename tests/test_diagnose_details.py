"""The details of ``diagnose``'s report that a reader acts on, beyond the exit
status: how many earlier starts it counts and which it names, the report's
lines for each process and the failing statement, what it says of a process
the plugin does not cover, what it calls an input with no vLLM line, the
lines it read, the files it names in its notes (and closes), the stop note
around a death or a second crash, and the start of a long death message.
(Surviving mutants of ``diagnose.py`` showed each of these unpinned.)"""

from __future__ import annotations

import gc
import gzip
import warnings

from dspark_attn_plugin import diagnose
from test_diagnose import diagnosed

PATCHED = ("dspark-attn-plugin patched vllm.models.deepseek_v4.nvidia.flashmla."
           "DeepseekV4FlashMLAAttention.forward_mqa on vLLM 0.26.0: SWA-only layers warm up "
           "without topk_indices_buffer (backport of vllm-project/vllm#50693)")
DISABLED = "dspark-attn-plugin is disabled by DSPARK_ATTN_PLUGIN=off"
CANNOT_PATCH = ("dspark-attn-plugin cannot patch vllm.models.deepseek_v4.nvidia.flashmla."
                "DeepseekV4FlashMLAAttention.forward_mqa in vLLM 0.26.0 safely (the edited "
                "forward_mqa does not compile) and left it untouched; run `dspark-attn-plugin "
                "verify` to check this build")
FLASHMLA = "/v/vllm/models/deepseek_v4/nvidia/flashmla.py"


def api_start(minute: int = 0) -> str:
    """The API server's first lines of a start of the server (3 lines)."""
    t = f"12-03 10:{minute:02d}:00"
    return (
        f"(APIServer pid=100) INFO {t} [api_server.py:1] vLLM API server version 0.26.0\n"
        f"(APIServer pid=100) INFO {t} [utils.py:273] non-default args: "
        "{'model': '/models/DeepSeek-V4-Flash'}\n"
        f"(APIServer pid=100) INFO {t} [model.py:623] Resolved architecture: DeepseekV4ForCausalLM\n"
    )


def protected_start(minute: int = 0) -> str:
    """One start of a server the plugin patched, up to its startup (9 lines)."""
    e = "(EngineCore pid=200) INFO 12-03 10:"
    return api_start(minute) + (
        f"{e}{minute:02d}:10 [instrumentation.py:144] {PATCHED}\n"
        f"{e}{minute:02d}:10 [core.py:116] Initializing a V1 LLM engine (v0.26.0) with config: "
        "model='/models/DeepSeek-V4-Flash'\n"
        f"{e}{minute:02d}:10 [model_runner.py:305] Model loading took 0.58 GiB and 15.8 seconds\n"
        f"{e}{minute:02d}:12 [gpu_worker.py:400] Available KV cache memory: 10.00 GiB\n"
        f"{e}{minute:02d}:12 [kv_cache_utils.py:1] GPU KV cache size: 100,000 tokens\n"
        f"(APIServer pid=100) INFO 12-03 10:{minute:02d}:20 [launcher.py:1] "
        "Application startup complete.\n"
    )


def crash_traceback(prefix: str) -> str:
    """The #50615 traceback as ``prefix`` (process and log head) writes it."""
    return (
        f"{prefix} Traceback (most recent call last):\n"
        f'{prefix}   File "/v/vllm/v1/worker/gpu/model_runner.py", line 674, in profile_run\n'
        f"{prefix}     self._dummy_run(n)\n"
        f'{prefix}   File "{FLASHMLA}", line 90, in forward_mqa\n'
        f"{prefix}     assert self.topk_indices_buffer is not None\n"
        f"{prefix} AssertionError\n"
    )


def crashed_start() -> str:
    """A start without the plugin whose engine core hits the #50615 assertion."""
    return api_start() + (
        "(EngineCore pid=200) INFO 12-03 10:00:10 [core.py:116] Initializing a V1 LLM engine "
        "(v0.26.0) with config: model='/models/DeepSeek-V4-Flash'\n"
        "(EngineCore pid=200) INFO 12-03 10:00:10 [model_runner.py:305] Model loading took "
        "0.58 GiB and 15.8 seconds\n"
    ) + crash_traceback("(EngineCore pid=200) ERROR 12-03 10:00:11 [core.py:1]")


def report(text: str) -> str:
    return diagnose.render(diagnosed(text))


# --- earlier starts ----------------------------------------------------------------


def test_three_starts_are_reported_as_two_earlier_ones_numbered_from_1():
    """Three starts: the report counts two earlier ones, as start 1 and start 2."""
    out = report(protected_start(0) + protected_start(1) + protected_start(2))
    assert "Earlier starts of the server in this log (2):" in out.splitlines()
    assert "  start 1 (from line 1): protected, exit 0" in out.splitlines()
    assert "  start 2 (from line 10): protected, exit 0" in out.splitlines()


def test_eight_starts_name_the_first_three_and_the_last_three_earlier_ones():
    """Eight starts: seven earlier ones counted, starts 1-3 and 5-7 named."""
    text = "".join(protected_start(minute) for minute in range(8))
    lines = report(text).splitlines()
    at = lines.index("Earlier starts of the server in this log (7):")
    named = [line for line in lines[at + 1:] if line.startswith("  start ")]
    assert named == [f"  start {n} (from line {9 * n - 8}): protected, exit 0"
                     for n in (1, 2, 3, 5, 6, 7)]


# --- the report's lines ------------------------------------------------------------


def test_the_report_lists_each_process_and_what_the_plugin_did():
    """The report has one line per process: runs the model, the plugin's state."""
    lines = report(protected_start()).splitlines()
    at = lines.index("Processes (in order of appearance):")
    assert lines[at + 1:at + 3] == [
        "  APIServer pid=100   plugin: no line",
        "  EngineCore pid=200  runs the model; plugin: patched (vLLM 0.26.0)",
    ]


def test_the_crash_report_quotes_the_failing_statement():
    """A #50615 report quotes the assertion that failed, under its summary."""
    lines = report(crashed_start()).splitlines()
    assert lines[0].startswith("vllm-project/vllm#50615: AssertionError at")
    assert lines[1] == "  the failing statement: assert self.topk_indices_buffer is not None"


def test_each_unprotected_worker_is_named_with_what_the_plugin_said():
    """Past the warmup without the plugin: each worker with its plugin's word."""
    w = "INFO 12-03 10:00:10"
    text = api_start() + (
        f"(Worker_TP0 pid=201) {w} [__init__.py:1] {DISABLED}\n"
        f"(Worker_TP1 pid=202) WARNING 12-03 10:00:10 [instrumentation.py:148] {CANNOT_PATCH}\n"
        f"(Worker_TP2 pid=203) {w} [parallel_state.py:1] rank 2 in world size 3\n"
    ) + "".join(
        f"(Worker_TP{n} pid={201 + n}) INFO 12-03 10:00:12 [gpu_worker.py:400] "
        "Available KV cache memory: 10.00 GiB\n" for n in range(3)
    ) + "(APIServer pid=100) INFO 12-03 10:00:20 [launcher.py:1] Application startup complete.\n"
    d = diagnosed(text)
    assert d.exit_code == 2
    assert d.summary == (
        "The server got past its warmup, but the plugin is not in effect in "
        "Worker_TP0 pid=201 (disabled by DSPARK_ATTN_PLUGIN=off), "
        "Worker_TP1 pid=202 (left vLLM's code alone with a WARNING), "
        "Worker_TP2 pid=203 (no line from the plugin): "
        "this log does not show the deployment protected."
    )


def test_text_with_no_vllm_line_is_called_not_a_vllm_log_not_empty():
    """Lines that are none of vLLM's: "not a vLLM log"; no line at all: "empty"."""
    assert diagnosed("hello\nthis is not a server log\n").summary == (
        "Nothing conclusive: the input is not a vLLM log (no vLLM log line in it).")
    assert diagnosed("").summary == "Nothing conclusive: the input is empty."


def test_a_newest_first_log_of_two_starts_counts_every_line_read():
    """A log of two starts written newest first: all its 18 lines are counted."""
    lines = (protected_start(0) + protected_start(1)).splitlines(keepends=True)
    d = diagnosed("".join(reversed(lines)))
    assert d.exit_code == 2 and "reads newest first" in d.summary
    assert diagnose.render(d).splitlines()[-1] == "(18 lines read; exit 2)"


# --- files ------------------------------------------------------------------------


def test_notes_of_several_files_name_the_file_they_come_from(tmp_path):
    """Two files read: the note that one was gzip names that file."""
    first, second = tmp_path / "first.log.gz", tmp_path / "second.log"
    first.write_bytes(gzip.compress(protected_start(0).encode()))
    second.write_text(protected_start(1))
    out = diagnose.render(diagnose.diagnose(diagnose.read_paths([str(first), str(second)])))
    assert f"(input: {first}: read through gzip)" in out.splitlines()


def test_reading_log_files_leaves_none_of_them_open(tmp_path):
    """Each log file read is closed: no "unclosed file" ResourceWarning."""
    paths = []
    for n in range(3):
        path = tmp_path / f"server-{n}.log"
        path.write_text(protected_start(n))
        paths.append(str(path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        log = diagnose.read_paths(paths)
        assert diagnose.diagnose(log).exit_code == 0
        del log
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


# --- stops and deaths ---------------------------------------------------------------


def test_a_process_dying_after_the_server_was_stopped_is_no_crash():
    """SIGTERM, then the engine core dies: protected, with the stop noted."""
    text = protected_start() + (
        "(APIServer pid=100) INFO 12-03 10:05:00 [launcher.py:1] Received SIGTERM, exiting\n"
        "(APIServer pid=100) ERROR 12-03 10:05:02 [core_client.py:1] Engine core proc "
        "EngineCore_DP0 died unexpectedly, shutting down client.\n"
    )
    d = diagnosed(text)
    assert d.verdict == "protected" and d.exit_code == 0, d.summary
    assert d.summary.endswith("(The server was stopped at line 10 of the log.)")


def test_a_crash_after_a_death_and_its_shutdown_has_no_stop_note():
    """A worker dies, the engine shuts down, then #50615: no "server was stopped"."""
    text = api_start() + (
        "(EngineCore pid=200) INFO 12-03 10:00:10 [core.py:116] Initializing a V1 LLM engine "
        "(v0.26.0) with config: model='/models/DeepSeek-V4-Flash'\n"
        "(Worker_TP0 pid=201) INFO 12-03 10:00:10 [model_runner.py:305] Model loading took "
        "0.58 GiB and 15.8 seconds\n"
        "(Worker_TP1 pid=202) INFO 12-03 10:00:10 [model_runner.py:305] Model loading took "
        "0.58 GiB and 15.8 seconds\n"
        "(EngineCore pid=200) ERROR 12-03 10:00:12 [multiproc_executor.py:284] Worker proc "
        "VllmWorker-1 died unexpectedly (exit code: -6), shutting down executor.\n"
        "(EngineCore pid=200) INFO 12-03 10:00:12 [core.py:1313] [shutdown] EngineCore: "
        "trigger received signal=SIGTERM\n"
    ) + crash_traceback("(Worker_TP0 pid=201) ERROR 12-03 10:00:12 [multiproc_executor.py:1007]")
    d = diagnosed(text)
    assert d.summary == (f"vllm-project/vllm#50615: AssertionError at {FLASHMLA}:90 in "
                         "forward_mqa under profile_run, in Worker_TP0 pid=201.")


def test_a_stop_after_the_first_crash_is_not_noted_though_a_second_follows_it():
    """The first engine's crash precedes the stop: no stop note, both named."""
    engines = "".join(
        f"(EngineCore_DP{n} pid={200 + 100 * n}) INFO 12-03 10:00:10 [model_runner.py:305] "
        "Model loading took 0.58 GiB and 15.8 seconds\n" for n in range(2)
    )
    text = (
        api_start() + engines
        + crash_traceback("(EngineCore_DP0 pid=200) ERROR 12-03 10:00:11 [core.py:1]")
        + "(APIServer pid=100) INFO 12-03 10:00:12 [launcher.py:1] Received SIGTERM, exiting\n"
        + crash_traceback("(EngineCore_DP1 pid=300) ERROR 12-03 10:00:12 [core.py:1]")
    )
    d = diagnosed(text)
    assert d.summary == (f"vllm-project/vllm#50615: AssertionError at {FLASHMLA}:90 in "
                         "forward_mqa under profile_run, in EngineCore_DP0 pid=200, "
                         "EngineCore_DP1 pid=300.")


def test_a_long_death_message_is_quoted_to_its_first_200_characters():
    """A traceback that says a process died: its first 200 characters quoted."""
    message = (
        "Worker failed with error 'NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:3356, remote process exited or there was a network error, "
        "Last error: peer Worker proc VllmWorker-1 died unexpectedly "
        "(exit code: -9)', please check the stack trace above for the cause"
    )
    assert 200 < len(message) < 300
    e = "(EngineCore pid=200) ERROR 12-03 10:00:11 [core.py:1]"
    text = api_start() + (
        "(EngineCore pid=200) INFO 12-03 10:00:10 [model_runner.py:305] Model loading took "
        "0.58 GiB and 15.8 seconds\n"
        f"{e} Traceback (most recent call last):\n"
        f'{e}   File "/v/vllm/v1/executor/multiproc_executor.py", line 300, in collective_rpc\n'
        f"{e}     raise RuntimeError(\n"
        f"{e} RuntimeError: {message}\n"
    )
    d = diagnosed(text)
    assert d.exit_code == 3
    assert f" A process died: {message[:200]}. dspark-attn-plugin does not address it." in d.summary
