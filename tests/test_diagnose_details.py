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

import pytest

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
    # `--json` tells a script that no start was read as reaching its warmup.
    assert d.to_dict()["reached"] is False


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


# --- more of what the report says (survivors of the 2026-12-04 mutation run) --------


RESCUE = "(EngineCore pid=200) INFO 12-03 10:00:11 [flashmla.py:1] dspark-attn-plugin: {} " \
         "warmed up without topk_indices_buffer; stock vLLM would have stopped here\n"


def test_the_protected_summary_counts_the_processes_that_warmed_up_through_the_fix():
    """One process rescued two layers: "1 of them", and the first layer named."""
    lines = protected_start().splitlines(keepends=True)
    text = "".join(lines[:6] + [RESCUE.format("model.layers.16.attn"),
                                RESCUE.format("model.layers.17.attn")] + lines[6:])
    d = diagnosed(text)
    assert d.verdict == "protected", d.summary
    assert "(EngineCore pid=200); 1 of them warmed up an SWA-only layer" in d.summary
    assert ("  EngineCore pid=200  runs the model; plugin: patched (vLLM 0.26.0); warmed up "
            "model.layers.16.attn through the fix") in diagnose.render(d).splitlines()


def test_a_crash_without_any_plugin_line_is_remedied_by_installing_the_plugin():
    """No plugin line and no plugin list in the log: install it (not VLLM_PLUGINS)."""
    d = diagnosed(crashed_start())
    assert d.remedy.startswith("Install dspark-attn-plugin into the image that runs vLLM")


def test_a_stop_before_the_crash_is_noted_with_the_crash():
    """SIGTERM at line 6, then the #50615 crash: the stop is noted."""
    lines = crashed_start().splitlines(keepends=True)
    stop = "(APIServer pid=100) INFO 12-03 10:00:10 [launcher.py:1] Received SIGTERM, exiting\n"
    d = diagnosed("".join(lines[:5] + [stop] + lines[5:]))
    assert d.verdict == "crash-50615"
    assert d.summary.endswith("(The server was stopped at line 6 of the log.)")


def _other_crash_text() -> str:
    e = "(EngineCore pid=200) ERROR 12-03 10:00:11 [core.py:1]"
    return api_start() + (
        "(EngineCore pid=200) INFO 12-03 10:00:10 [model_runner.py:305] Model loading took "
        "0.58 GiB and 15.8 seconds\n"
        f"{e} Traceback (most recent call last):\n"
        f'{e}   File "/v/vllm/v1/worker/gpu_model_runner.py", line 300, in load_model\n'
        f"{e}     raise ValueError(bad)\n"
        f"{e} ValueError: unsupported quantization\n"
    )


def test_only_the_50615_crash_quotes_a_failing_statement():
    """A different crash, and a #50615 traceback cut before profile_run: no
    "the failing statement" line (that line is the #50615 crash's)."""
    other = diagnosed(_other_crash_text())
    assert other.verdict == "other-crash"
    assert not any("the failing statement" in x for x in diagnose.render(other).splitlines())
    cut = crash_traceback("(EngineCore pid=200) ERROR 12-03 10:00:11 [core.py:1]").splitlines(
        keepends=True)
    near = diagnosed(api_start() + cut[0] + "".join(cut[3:]))
    assert near.verdict == "inconclusive" and near.summary.startswith("Probably vllm-project/vllm#50615")
    assert not any("the failing statement" in x for x in diagnose.render(near).splitlines())


def test_a_50615_traceback_cut_before_profile_run_says_why_it_is_only_probable():
    """The assertion read, but not the frames under it: the user is told
    the traceback is cut and to run diagnose on the whole log."""
    cut = crash_traceback("(EngineCore pid=200) ERROR 12-03 10:00:11 [core.py:1]").splitlines(
        keepends=True)
    d = diagnosed(api_start() + cut[0] + "".join(cut[3:]))
    assert d.summary.endswith("but the traceback is cut before it shows profile_run (a log cut "
                              "by --tail or --since?): run diagnose on the whole log."), d.summary


def test_a_cut_50615_traceback_before_a_stop_has_no_stop_note():
    cut = crash_traceback("(EngineCore pid=200) ERROR 12-03 10:00:11 [core.py:1]").splitlines(
        keepends=True)
    stop = "(APIServer pid=100) INFO 12-03 10:00:12 [launcher.py:1] Received SIGTERM, exiting\n"
    d = diagnosed(api_start() + cut[0] + "".join(cut[3:]) + stop)
    assert d.summary.startswith("Probably vllm-project/vllm#50615")
    assert "stopped" not in d.summary


def test_the_report_says_which_process_the_plugin_left_alone_and_which_it_was_turned_off_in():
    w = "INFO 12-03 10:00:10"
    text = api_start() + (
        f"(Worker_TP0 pid=201) {w} [__init__.py:1] {DISABLED}\n"
        f"(Worker_TP1 pid=202) WARNING 12-03 10:00:10 [instrumentation.py:148] {CANNOT_PATCH}\n"
    ) + "".join(
        f"(Worker_TP{n} pid={201 + n}) INFO 12-03 10:00:12 [gpu_worker.py:400] "
        "Available KV cache memory: 10.00 GiB\n" for n in range(2)
    ) + "(APIServer pid=100) INFO 12-03 10:00:20 [launcher.py:1] Application startup complete.\n"
    lines = report(text).splitlines()
    assert "  Worker_TP0 pid=201  runs the model; plugin: disabled by DSPARK_ATTN_PLUGIN=off" in lines
    assert "  Worker_TP1 pid=202  runs the model; plugin: left vLLM's code alone (WARNING)" in lines


def test_notes_of_standard_input_alone_are_not_prefixed(tmp_path):
    """Standard input read alone (no path, or "-"): its notes are unprefixed;
    beside a file, they are prefixed with "standard input"."""
    import io

    gz = gzip.compress(protected_start(0).encode())
    for paths in ([], ["-"]):
        out = diagnose.render(diagnose.diagnose(diagnose.read_paths(paths, stdin=io.BytesIO(gz))))
        assert "(input: read through gzip)" in out.splitlines(), paths
    second = tmp_path / "second.log"
    second.write_text(protected_start(1))
    out = diagnose.render(diagnose.diagnose(
        diagnose.read_paths(["-", str(second)], stdin=io.BytesIO(gz))))
    assert "(input: standard input: read through gzip)" in out.splitlines()


def test_a_relative_folder_or_file_named_with_a_plus_is_read_as_any_other(tmp_path, monkeypatch):
    """Paths that sort before "-" are paths too: a folder is refused as a
    folder, a file is read and closed."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "+logs").mkdir()
    try:
        diagnose.read_paths(["+logs"])
        raise AssertionError("a folder was read")
    except diagnose.LogError as exc:
        assert str(exc) == "+logs: is a folder, not a log file"
    (tmp_path / "+server.log").write_text(protected_start())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        log = diagnose.read_paths(["+server.log"])
        assert diagnose.diagnose(log).exit_code == 0
        del log
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
    # Its notes are its own, under its name.
    (tmp_path / "+server.log.gz").write_bytes(gzip.compress(protected_start(0).encode()))
    (tmp_path / "second.log").write_text(protected_start(1))
    out = diagnose.render(diagnose.diagnose(diagnose.read_paths(["+server.log.gz", "second.log"])))
    assert "(input: +server.log.gz: read through gzip)" in out.splitlines()


def test_a_missing_file_is_named_with_the_system_s_reason(tmp_path):
    missing = tmp_path / "missing.log"
    try:
        diagnose.read_paths([str(missing)])
        raise AssertionError("a missing file was read")
    except diagnose.LogError as exc:
        assert str(exc) == f"cannot read {missing}: No such file or directory"


def test_a_file_that_fails_while_read_is_named_with_the_system_s_reason():
    """A file that opens and then cannot be read (here /proc/self/mem, whose
    first page is not mapped): the system's reason, not Python's repr."""
    try:
        diagnose.read_paths(["/proc/self/mem"])
        raise AssertionError("/proc/self/mem was read")
    except diagnose.LogError as exc:
        assert str(exc) == "cannot read /proc/self/mem: Input/output error"


def test_a_traceback_before_a_death_is_the_crash_reported():
    """The first traceback comes before a process dies: that traceback is
    the crash named, not the death it led to."""
    text = _other_crash_text() + (
        "(APIServer pid=100) ERROR 12-03 10:00:12 [core_client.py:1] Engine core proc "
        "EngineCore_DP0 died unexpectedly, shutting down client.\n")
    d = diagnosed(text)
    assert d.verdict == "other-crash"
    assert d.summary.startswith("A different crash: ValueError at "), d.summary


def test_a_deepseek_v4_model_path_without_an_architecture_line_is_judged_not_waived():
    """Only the architecture vLLM resolved can say "not DeepSeek-V4"; a log
    that names a DeepSeek-V4 path and no architecture, past its warmup
    without the plugin, is not called "not applicable"."""
    lines = protected_start().splitlines(keepends=True)
    text = "".join(line for line in lines if "Resolved architecture" not in line
                   and "dspark-attn-plugin" not in line)
    d = diagnosed(text)
    assert d.verdict == "inconclusive" and d.exit_code == 2, d.summary


def test_a_process_seen_only_rescuing_a_layer_is_reported():
    """A log cut so that a process's only line is the rescue: it is listed."""
    d = diagnosed(api_start() + RESCUE.format("model.layers.16.attn"))
    assert [p["process"] for p in d.processes] == ["APIServer pid=100", "EngineCore pid=200"]


def test_of_two_reports_of_a_failed_engine_the_first_is_named():
    """Only reports of another process's failure: the first one is named."""
    def report_of(proc, pid):
        e = f"({proc} pid={pid}) ERROR 12-03 10:00:11 [core_client.py:1]"
        return (f"{e} Traceback (most recent call last):\n"
                f'{e}   File "/v/vllm/v1/engine/core_client.py", line 1, in wait\n'
                f"{e}     raise RuntimeError(msg)\n"
                f"{e} RuntimeError: Engine core initialization failed. See root cause above.\n")
    d = diagnosed(api_start() + report_of("APIServer", 100) + report_of("APIServer_1", 101))
    assert d.summary.startswith("Nothing conclusive: the log shows APIServer pid=100 reporting"), d.summary


def test_a_process_s_first_error_is_the_one_reported():
    e = "(EngineCore pid=200) ERROR 12-03 10:00:1{}"
    text = _other_crash_text() + (
        f"{e.format(3)} [core.py:2] Traceback (most recent call last):\n"
        f'{e.format(3)} [core.py:2]   File "/v/vllm/x.py", line 1, in f\n'
        f"{e.format(3)} [core.py:2]     g()\n"
        f"{e.format(3)} [core.py:2] KeyError: 'later'\n")
    lines = report(text).splitlines()
    assert any(x.startswith("  EngineCore pid=200") and x.endswith("raised ValueError")
               for x in lines), lines


def _engine_failed_report(minute: int = 0) -> str:
    e = f"(APIServer pid=100) ERROR 12-03 10:{minute:02d}:11 [core_client.py:1]"
    return (f"{e} Traceback (most recent call last):\n"
            f'{e}   File "/v/vllm/v1/engine/core_client.py", line 1, in wait\n'
            f"{e}     raise RuntimeError(msg)\n"
            f"{e} RuntimeError: Engine core initialization failed. See root cause above.\n")


def test_a_report_that_the_engine_failed_before_a_stop_has_no_stop_note():
    stop = "(APIServer pid=100) INFO 12-03 10:00:12 [launcher.py:1] Received SIGTERM, exiting\n"
    d = diagnosed(api_start() + _engine_failed_report() + stop)
    assert d.summary.startswith("Nothing conclusive: the log shows APIServer pid=100 reporting")
    assert "stopped" not in d.summary


def test_a_start_whose_only_failure_is_reported_by_another_does_not_judge_the_next():
    """Start 1 shows only the API server's report that the engine failed (its
    cause is not in the log); start 2 is cut before loading the model: start
    1 says nothing of start 2, which is judged on its own."""
    d = diagnosed(api_start(0) + _engine_failed_report(0) + api_start(1))
    assert d.exit_code == 2
    assert not d.summary.startswith("The last start"), d.summary


def test_in_a_later_start_a_death_before_a_traceback_is_the_crash_reported():
    """The second start of a log: a process dies, then a traceback follows.
    The death, first in that start, is the crash named (lines are counted
    within the start, not across the whole log)."""
    e = "(EngineCore pid=200) ERROR 12-03 10:01:13 [core.py:1]"
    text = protected_start(0) + api_start(1) + (
        "(EngineCore pid=200) INFO 12-03 10:01:10 [model_runner.py:305] Model loading took "
        "0.58 GiB and 15.8 seconds\n"
        "(APIServer pid=100) ERROR 12-03 10:01:12 [core_client.py:1] Engine core proc "
        "EngineCore_DP0 died unexpectedly, shutting down client.\n"
        f"{e} Traceback (most recent call last):\n"
        f'{e}   File "/v/vllm/x.py", line 1, in f\n'
        f"{e}     g()\n"
        f"{e} KeyError: 'later'\n"
    )
    d = diagnosed(text)
    assert d.verdict == "other-crash"
    assert d.summary.startswith("A different crash: a process died (Engine core proc EngineCore_DP0 "
                                "died unexpectedly"), d.summary


def test_an_in_process_log_without_the_plugin_names_the_unprefixed_process_unprotected():
    """vllm.LLM in one process (no process prefixes), past its warmup, no
    plugin line: that process runs the model and is named unprotected."""
    text = ("INFO 12-03 10:00:00 [utils.py:273] non-default args: "
            "{'model': '/models/DeepSeek-V4-Flash'}\n"
            "INFO 12-03 10:00:00 [model.py:623] Resolved architecture: DeepseekV4ForCausalLM\n"
            "INFO 12-03 10:00:10 [model_runner.py:305] Model loading took 0.58 GiB and 15.8 seconds\n"
            "INFO 12-03 10:00:12 [gpu_worker.py:400] Available KV cache memory: 10.00 GiB\n"
            "INFO 12-03 10:00:12 [kv_cache_utils.py:1] GPU KV cache size: 100,000 tokens\n")
    d = diagnosed(text)
    assert d.exit_code == 2
    assert d.summary == ("The server got past its warmup, but the plugin is not in effect in "
                         "(no prefix) (no line from the plugin): this log does not show the "
                         "deployment protected.")


def test_a_crash_where_vllm_loads_only_other_plugins_is_remedied_by_installing_this_one():
    """vLLM lists and loads its own plugin only (this one not installed, no
    VLLM_PLUGINS): the remedy is to install the plugin, not VLLM_PLUGINS."""
    a = "(APIServer pid=100) INFO 12-03 10:00:00"
    lines = crashed_start().splitlines(keepends=True)
    plugins = (f"{a} [__init__.py:36] Available plugins for group vllm.general_plugins:\n"
               f"{a} [__init__.py:38] - lora_filesystem_resolver -> "
               "vllm.plugins.lora_resolvers.filesystem_resolver:register_filesystem_resolver\n"
               f"{a} [__init__.py:46] Loading plugin lora_filesystem_resolver\n")
    d = diagnosed("".join(lines[:3]) + plugins + "".join(lines[3:]))
    assert d.verdict == "crash-50615"
    assert d.remedy.startswith("Install dspark-attn-plugin into the image that runs vLLM"), d.remedy


@pytest.mark.parametrize("earlier", [0, 1])
def test_a_crash_after_a_death_and_a_stop_has_no_stop_note(earlier):
    """A worker dies, the server is then stopped, and the #50615 traceback
    follows: the stop came from the death, so no "server was stopped" (in
    the first start of a log, and in a later one)."""
    text = protected_start(0) * earlier + api_start(1) + (
        "(EngineCore pid=200) INFO 12-03 10:00:10 [model_runner.py:305] Model loading took "
        "0.58 GiB and 15.8 seconds\n"
        "(EngineCore pid=200) ERROR 12-03 10:00:12 [multiproc_executor.py:284] Worker proc "
        "VllmWorker-1 died unexpectedly (exit code: -6), shutting down executor.\n"
        "(APIServer pid=100) INFO 12-03 10:00:12 [launcher.py:1] Received SIGTERM, exiting\n"
    ) + crash_traceback("(EngineCore pid=200) ERROR 12-03 10:00:13 [core.py:1]")
    d = diagnosed(text)
    assert d.verdict == "crash-50615"
    assert "stopped" not in d.summary, d.summary


def test_a_cut_restart_showing_the_plugin_patched_takes_the_protected_start_before_it():
    """Start 1 protected; start 2 cut after its engine's "patched" line: the
    verdict is start 1's, exit 0."""
    patched = protected_start(1).splitlines(keepends=True)[3]
    d = diagnosed(protected_start(0) + api_start(1) + patched)
    assert d.exit_code == 0
    assert d.summary.startswith("The last start (from line 10) had not reached its warmup; "
                                "start 1 (from line 1) before it: Protected"), d.summary


def test_a_cut_restart_whose_engine_logged_each_in_effect_word_takes_the_start_before_it():
    """A cut restart's engine that logged "patched", "not affected" and
    "already fixed" (each says the plugin is in effect, or not needed) shows
    the plugin in effect so far: the protected start before it is the verdict."""
    e = "(EngineCore pid=201) INFO 12-03 10:01:10 [instrumentation.py:144] "
    lines = (protected_start(1).splitlines(keepends=True)[3]
             + f"{e}vLLM 0.26.0 is not affected by vllm-project/vllm#50615\n"
             + f"{e}vLLM 0.26.0 already has the fix for vllm-project/vllm#50615\n")
    d = diagnosed(protected_start(0) + api_start(1) + lines.replace("pid=200", "pid=201"))
    assert d.exit_code == 0, d.summary
    assert d.summary.startswith("The last start (from line 10) had not reached its warmup; "
                                "start 1 (from line 1) before it: Protected"), d.summary


# --- the last survivors of diagnose.py's run of 2026-12-04 ------------------------


def test_a_different_crash_before_a_stop_has_no_stop_note():
    """A traceback, then the server stopped: the crash came first, so the
    report does not say the server was stopped."""
    stop = "(APIServer pid=100) INFO 12-03 10:00:12 [launcher.py:1] Received SIGTERM, exiting\n"
    d = diagnosed(_other_crash_text() + stop)
    assert d.verdict == "other-crash"
    assert "stopped" not in d.summary, d.summary


def test_a_different_crash_that_is_no_death_does_not_say_a_process_died():
    d = diagnosed(_other_crash_text())
    assert d.verdict == "other-crash"
    assert "died" not in d.summary, d.summary


def test_a_log_of_two_starts_counts_every_line_it_read():
    text = protected_start(0) + protected_start(1)
    d = diagnosed(text)
    assert d.starts == 2
    assert d.lines_read == text.count("\n"), (d.lines_read, text.count("\n"))


def test_of_two_processes_with_a_cut_50615_traceback_the_first_is_named():
    def cut(proc, pid):
        lines = crash_traceback(f"({proc} pid={pid}) ERROR 12-03 10:00:11 [core.py:1]").splitlines(
            keepends=True)
        return lines[0] + "".join(lines[3:])
    d = diagnosed(api_start() + cut("EngineCore_DP0", 200) + cut("EngineCore_DP1", 201))
    assert d.summary.startswith("Probably vllm-project/vllm#50615")
    assert "in EngineCore_DP0 pid=200," in d.summary and "DP1" not in d.summary, d.summary


def test_a_long_report_that_the_engine_failed_is_quoted_to_its_first_160_characters():
    message = ("Engine core initialization failed. See root cause above. Failed core proc(s): "
               "{'EngineCore_DP0': 1, 'EngineCore_DP1': 1, 'EngineCore_DP2': 1, "
               "'EngineCore_DP3': 1, 'EngineCore_DP4': 1}")
    assert 161 < len(message) < 300
    text = api_start() + _engine_failed_report().replace(
        "Engine core initialization failed. See root cause above.", message)
    d = diagnosed(text)
    assert d.exit_code == 2
    assert f"(RuntimeError: {message[:160]}), but not" in d.summary, d.summary


def test_a_restart_cut_while_its_model_warms_up_takes_the_protected_start_before_it():
    """Start 2 showed the plugin patched and loaded the model, then the log
    ends before its warmup is over: start 1, protected, is the verdict."""
    lines = protected_start(1).splitlines(keepends=True)
    d = diagnosed(protected_start(0) + "".join(lines[:6]))
    assert d.exit_code == 0, d.summary
    assert d.summary.startswith("The last start (from line 10) had not reached its warmup; "
                                "start 1 (from line 1) before it: Protected"), d.summary


def test_a_plain_text_restart_cut_at_its_first_line_is_judged_by_the_crash_before_it():
    """vLLM logging without its heads (VLLM_CONFIGURE_LOGGING=0): a #50615
    crash, then the next start's first line and nothing more. The cut start
    shows nothing of its own; the crash before it is the verdict."""
    plain = ("non-default args: {'model': '/models/DeepSeek-V4-Flash'}\n"
             "Resolved architecture: DeepseekV4ForCausalLM\n"
             "Model loading took 0.58 GiB and 15.8 seconds\n")
    crash = "".join(x[1:] + "\n" for x in crash_traceback("").splitlines())
    d = diagnosed(plain + crash + plain.splitlines(keepends=True)[0])
    assert d.starts == 2, d.summary
    assert d.exit_code == 1, d.summary
    assert d.summary.startswith("The last start"), d.summary
