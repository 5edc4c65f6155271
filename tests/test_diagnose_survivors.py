"""What ``diagnose`` tells the user where surviving mutants of
``diagnose.py`` showed it unpinned: a process read as several (lines with
no prefix) that the plugin found fixed in and was turned off in is no
"not needed" server, nor counted among the ranks it covers; a restart on
fewer ranks than the start before is not judged by that start, and the
report names each start's ranks; an unreadable traceback in the last of
several starts is named by its line in the whole input. Each test fails
on the mutant named in it."""

from __future__ import annotations

from test_diagnose import diagnosed
from test_diagnose_collection import cuda_crash
from test_diagnose_deployments import (
    API,
    ENGINE,
    FIXED_HERE,
    api_start,
    engine_start,
    loaded,
    protected_tp1,
    serving,
    text,
    warmed,
)
from test_log_reader_details import PATCHED

DISABLED = "dspark-attn-plugin is disabled by DSPARK_ATTN_PLUGIN=off; vLLM's code is left as it is"
WHEN, LATER = "12-06 10:00:00", "12-06 10:20:00"
SHUTDOWN = f"({API}) INFO:     Shutting down"


def bare(where: str, message: str) -> str:
    """A line as vLLM writes it with no process prefix (the engine in the
    script's own process, or two servers' lines in one stream)."""
    return f"INFO {WHEN} [{where}] {message}"


def merged_past_warmup(plugin_lines: list[str], world: int | None = None) -> list[str]:
    """One process read from lines with no prefix, past its warmup, that
    logged each of ``plugin_lines``."""
    lines = [bare("parallel_state.py:1208",
                  f"rank 0 in world size {world} is assigned as DP rank 0, PP rank 0, TP rank 0")] if world else []
    return lines + [
        bare("gpu_model_runner.py:3365", "Starting to load model deepseek-ai/DeepSeek-V4-Flash..."),
        *plugin_lines,
        bare("gpu_model_runner.py:3460", "Model loading took 71.3 GiB memory and 44.8 seconds"),
        bare("gpu_worker.py:298", "Available KV cache memory: 4.82 GiB"),
    ]


def test_a_process_that_says_the_build_is_fixed_and_the_plugin_is_off_is_not_read_not_needed():
    """Lines of two processes with no prefix read as one: the plugin found
    the build fixed, and was turned off (DSPARK_ATTN_PLUGIN=off). That is
    no evidence every process is safe: exit 2, naming what the plugin said
    (Eq->LtE on the "not needed" count read it "Not needed", exit 0)."""
    d = diagnosed(text(merged_past_warmup([bare("instrumentation.py:165", FIXED_HERE),
                                           bare("instrumentation.py:55", DISABLED)])))
    assert (d.verdict, d.exit_code) == ("inconclusive", 2), d.summary
    assert d.summary == (
        "The server got past its warmup, but the plugin is not in effect in (no prefix) "
        "(fixed (vLLM 0.28.0); disabled by DSPARK_ATTN_PLUGIN=off): this log does not show "
        "the deployment protected.")


def test_a_process_the_plugin_patched_and_was_turned_off_in_is_named_not_counted_among_the_ranks():
    """The same with the plugin patched and turned off, at world size 2:
    the report names that process and what the plugin said in it, not
    "the other ranks' processes are not in it" (Eq->LtE on the ranks'
    count took it for one rank in effect)."""
    d = diagnosed(text(merged_past_warmup([bare("instrumentation.py:157", PATCHED),
                                           bare("instrumentation.py:55", DISABLED)], world=2)))
    assert (d.verdict, d.exit_code) == ("inconclusive", 2), d.summary
    assert d.summary == (
        "The server got past its warmup, but the plugin is not in effect in (no prefix) "
        "(patched (vLLM 0.26.0); disabled by DSPARK_ATTN_PLUGIN=off): this log does not show "
        "the deployment protected.")


def _tp2_protected_then_tp1_cut() -> list[str]:
    workers = ["Worker_TP0 pid=455", "Worker_TP1 pid=456"]
    tp2 = api_start(WHEN, 2) + [line for r, w in enumerate(workers) for line in
                                loaded(w, WHEN, world=f"rank {r} in world size 2") + warmed(w, WHEN)]
    cut = api_start(LATER) + engine_start(LATER) + loaded(ENGINE, LATER)[:-1]  # still loading
    return tp2 + serving(WHEN) + [SHUTDOWN] + cut


def test_a_restart_on_fewer_ranks_cut_before_its_warmup_is_not_judged_by_the_start_before():
    """A protected start at tensor parallel 2, then a restart at tensor
    parallel 1 cut while loading (patched so far): the earlier start's
    processes are not this one's, so its "Protected" is no verdict for it:
    exit 2 (NotEq->Lt took only a restart on more ranks as changed, and
    read this one protected, exit 0)."""
    d = diagnosed(text(_tp2_protected_then_tp1_cut()))
    assert (d.verdict, d.exit_code, d.starts) == ("inconclusive", 2, 2), d.summary
    assert "that is no verdict for this start" in d.summary, d.summary


def test_a_changed_layout_names_the_earlier_start_s_ranks_then_this_one_s():
    """The report says how many ranks each start ran the model on: the
    earlier start's 2, this one's 1 (not "on 1 ranks, this one on 1")."""
    d = diagnosed(text(_tp2_protected_then_tp1_cut()))
    assert ("Start 1 before it (from line 1) ran the model on 2 ranks, this one on 1: "
            "that is no verdict for this start.") in d.summary, d.summary


def test_an_unread_traceback_in_the_last_start_is_named_by_its_line_in_the_whole_log():
    """Two protected starts, the log ending inside a traceback of the
    second: the user is pointed at the traceback's line in the file (29),
    not its line counted from the start it is in (15)."""
    lines = (protected_tp1(WHEN) + [SHUTDOWN] + protected_tp1(LATER)
             + cuda_crash("12-06 10:25:00")[:-1])
    assert lines[28].endswith("Traceback (most recent call last):")  # line 29
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code, d.starts) == ("inconclusive", 2, 2), d.summary
    assert d.summary.startswith(
        f"Nothing conclusive: a traceback at line 29 ({ENGINE}) could not be read"), d.summary
