"""``diagnose`` on what log collection does to vLLM's lines on their way to
the user: rsyslog's and ``cat -v``'s carriage returns, ``jq`` without
``-r``, a shipper's record whose message key is not known, a log cut inside
a traceback, an architecture's name cut at a width, a ``grep`` that kept
too few lines, ``tail``'s file headers, Elastic's pod names and Splunk's
``_raw``. Each case is one a reviewer who had not read these tests found
read wrong (most as exit 0), each test failing on the source before its
rule was fixed; the controls beside them keep the fixes from reaching too
far.
"""

from __future__ import annotations

import csv
import io
import json

import pytest

from test_diagnose import diagnosed
from test_diagnose_deployments import API, ENGINE, api_start, engine_start, loaded, protected_tp1, text, warmed
from test_log_reader_details import logged, traceback_50615

WORKERS = ("Worker_TP0 pid=455", "Worker_TP1 pid=456", "Worker_TP2 pid=457", "Worker_TP3 pid=458")


def cuda_crash(when: str, process: str = ENGINE) -> list[str]:
    """The engine's traceback of a crash while serving (not #50615)."""
    head = f"({process}) ERROR {when} [core.py:1351] "
    return [head + line for line in (
        "EngineCore encountered a fatal error.",
        "Traceback (most recent call last):",
        '  File "/v/vllm/v1/worker/gpu_model_runner.py", line 6620, in _to_list',
        "    self.transfer_event.synchronize()",
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
    )]


def protected_then_crashed(when: str = "12-06 10:00:00") -> list[str]:
    """A protected start that served, then crashed (not #50615), and the API
    server shut down after it."""
    return protected_tp1(when) + cuda_crash("12-06 10:05:00") + [f"({API}) INFO:     Shutting down"]


def crash_50615_tp2(when: str = "12-06 10:00:00") -> list[str]:
    """A start at tensor parallel 2 with the plugin not installed: #50615."""
    lines = api_start(when, 2)
    lines += loaded(WORKERS[0], when, patched=False, world="rank 0 in world size 2")
    lines += loaded(WORKERS[1], when, patched=False, world=None)
    return lines + traceback_50615(f"({WORKERS[1]}) ERROR {when} [multiproc_executor.py:1018] ")


# --- carriage returns and quotes --------------------------------------------------------


@pytest.mark.parametrize("end", ["#015", "^M", "#015#015", "\r"], ids=["rsyslog", "cat-v", "twice", "cr"])
def test_a_50615_traceback_whose_lines_end_in_an_escaped_carriage_return_is_50615(end):
    """vLLM's formatter ends each line of a record but the last with ``\\r``;
    rsyslog (docker's syslog driver) writes it ``#015``, ``cat -v`` and
    editors ``^M``: the frame is still forward_mqa's, not
    ``forward_mqa#015``'s (that read "a different crash")."""
    d = diagnosed(text([line + end for line in crash_50615_tp2()]))
    assert (d.verdict, d.exit_code) == ("crash-50615", 1), d.summary


def test_a_log_quoted_by_jq_without_r_is_read_as_vllm_wrote_it():
    """``jq .log`` (no ``-r``) prints each line as a JSON string: ``File
    \\"x.py\\"``. The crash after a protected warmup is a crash (it read
    protected, exit 0), and #50615 is #50615."""
    quoted = [json.dumps(line + "\r\n") for line in protected_then_crashed()]
    d = diagnosed(text(quoted))
    assert (d.verdict, d.exit_code) == ("other-crash", 3), d.summary
    assert "AcceleratorError" in d.summary, d.summary
    d = diagnosed(text([json.dumps(line + "\r\n") for line in crash_50615_tp2()]))
    assert (d.verdict, d.exit_code) == ("crash-50615", 1), d.summary


def fluent_bit_out_file(lines: list[str]) -> list[str]:
    """Fluent Bit's ``out_file`` default: ``TAG: [TIME, {record}]``."""
    return [f'vllm.var.log: [1733479200.{i:03d}, {{"log":{json.dumps(line + chr(13) + chr(10))},'
            f'"stream":"stdout"}}]' for i, line in enumerate(lines)]


def shipper_record(lines: list[str]) -> list[str]:
    """A shipper's JSON record whose message key diagnose does not know."""
    return [json.dumps({"event": line, "host": "gpu-node-3", "offset": i}) for i, line in enumerate(lines)]


@pytest.mark.parametrize("shape", [fluent_bit_out_file, shipper_record, lambda lines: lines[:-4]],
                         ids=["fluent-bit-out-file", "unknown-message-key", "log-ends-inside-it"])
def test_a_traceback_that_cannot_be_read_is_no_protected_server(shape):
    """A traceback whose lines are not as Python prints them (escaped inside
    a wrapper diagnose cannot open), or that the log ends inside: what it
    raised is not known, so the server is not shown protected (it read
    exit 0: the plugin's lines still read, and uvicorn's "Shutting down"
    as a stop)."""
    lines = protected_then_crashed()
    if shape.__name__ == "<lambda>":
        lines = protected_tp1("12-06 10:00:00") + cuda_crash("12-06 10:05:00")[:-1]
    else:
        lines = shape(lines)
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code) == ("inconclusive", 2), d.summary
    assert "could not be read" in d.summary, d.summary


def test_an_unread_traceback_after_the_server_was_stopped_changes_nothing():
    """Control: what a process prints after the stop is its consequence,
    read or not: the protected start stays protected."""
    lines = protected_tp1("12-06 10:00:00") + [f"({API}) INFO:     Shutting down"]
    lines += cuda_crash("12-06 10:05:00")[:-1]  # the log ends inside it
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary


# --- lines cut at a width, lines a grep left out ----------------------------------------


def resolving(name: str) -> list[str]:
    """A start that resolved ``name`` and got past its warmup, no plugin line."""
    when = "12-06 10:00:00"
    start = [line for line in api_start(when) if "Resolved architecture" not in line]
    start.append(logged(API, when, "model.py:645", f"Resolved architecture: {name}"))
    lines = start + engine_start(when) + loaded(ENGINE, when, patched=False)
    return lines + [logged(ENGINE, when, "gpu_worker.py:298", "Available KV cache memory: 4.82 GiB")]


@pytest.mark.parametrize("name", ["Deep", "DeepseekV4For", "DeepseekV4ForCausalL", "DSpa"])
def test_an_architecture_name_cut_at_a_width_is_no_other_model(name):
    """``Resolved architecture: Deep`` (a terminal or a capture that cut
    the line at 80 columns) may be DeepSeek-V4: no "Not applicable" (exit
    0) for a start that shows no plugin."""
    d = diagnosed(text(resolving(name)))
    assert d.exit_code == 2, d.summary


@pytest.mark.parametrize("name", ["DeepseekV3ForCausalLM", "Qwen3ForCausalLM"])
def test_a_whole_name_of_another_model_is_still_not_applicable(name):
    """Control: a complete name of another model is still another model."""
    d = diagnosed(text(resolving(name)))
    assert (d.verdict, d.exit_code) == ("not-applicable", 0), d.summary


def parallel_start(tp: int, pp: int, shown: int) -> list[str]:
    """A protected start at ``tp`` x ``pp``, ``shown`` of its workers in the
    log (``grep dspark`` kept no world-size line)."""
    when = "12-06 10:00:00"
    lines = api_start(when, tp)
    lines.append(logged("EngineCore_DP0 pid=312", when, "core.py:97",
                        "Initializing a V1 LLM engine (v0.27.1) with config: model='deepseek-ai/DeepSeek-V4-Flash', "
                        f"tensor_parallel_size={tp}, pipeline_parallel_size={pp}, data_parallel_size=1"))
    for worker in WORKERS[:shown]:
        lines += loaded(worker, when, world=None) + warmed(worker, when)
    return lines


@pytest.mark.parametrize("tp, pp, shown", [(2, 1, 1), (2, 2, 2), (1, 2, 1)])
def test_a_log_showing_fewer_model_processes_than_the_engine_runs_is_no_protected_server(tp, pp, shown):
    """The engine's configuration says how many processes run the model
    (tensor_parallel_size x pipeline_parallel_size): a log that shows fewer
    of them with the plugin in effect (a ``grep`` that kept only some) does
    not show the server protected (it read exit 0 when vLLM's world-size
    line was not among the lines kept)."""
    d = diagnosed(text(parallel_start(tp, pp, shown)))
    assert (d.verdict, d.exit_code) == ("inconclusive", 2), d.summary
    assert f"runs on {tp * pp} ranks" in d.summary, d.summary


@pytest.mark.parametrize("tp, pp", [(2, 1), (2, 2)])
def test_a_log_showing_every_model_process_protected_is_protected(tp, pp):
    """Control: every process the configuration asks for, each patched."""
    d = diagnosed(text(parallel_start(tp, pp, tp * pp)))
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary


# --- several files, several pods ------------------------------------------------------


def crash_50615_tp1(when: str) -> list[str]:
    return (api_start(when) + engine_start(when) + loaded(ENGINE, when, patched=False)
            + traceback_50615(f"({ENGINE}) ERROR {when} [core.py:1010] "))


def test_two_files_tailed_together_are_two_servers():
    """``tail -n +1 node-a.log node-b.log``: server A's #50615 crash, then
    server B protected; the ``==> file <==`` headers name two files, so
    B's start is no verdict for A (it read protected, exit 0)."""
    lines = (["==> /var/log/vllm/node-a.log <=="] + crash_50615_tp1("12-06 09:00:00")
             + ["", "==> /var/log/vllm/node-b.log <=="] + protected_tp1("12-06 10:00:00"))
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code) == ("inconclusive", 2), d.summary
    assert "2 sources" in d.summary, d.summary


def test_two_servers_logs_of_one_name_in_two_folders_are_two_servers():
    """``tail -n +1 node-a/vllm.log node-b/vllm.log``: one file name, two
    servers."""
    lines = (["==> /logs/node-a/vllm.log <=="] + crash_50615_tp1("12-06 09:00:00")
             + ["", "==> /logs/node-b/vllm.log <=="] + protected_tp1("12-06 10:00:00"))
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code) == ("inconclusive", 2), d.summary


def test_a_rotated_log_tailed_with_its_current_file_is_one_server():
    """Control: ``tail -n +1 vllm.log.1 vllm.log`` is one server's log,
    rotated: its last start is judged."""
    lines = (["==> /var/log/vllm/vllm.log.1 <=="] + crash_50615_tp1("12-06 09:00:00")
             + ["", "==> /var/log/vllm/vllm.log <=="] + protected_tp1("12-06 10:00:00"))
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code, d.starts) == ("protected", 0, 2), d.summary


def two_pods() -> list[tuple[str, str]]:
    """(pod, line): pod vllm-0's #50615 crash, then pod vllm-1 protected."""
    return ([("vllm-0", line) for line in crash_50615_tp1("12-06 09:00:00")]
            + [("vllm-1", line) for line in protected_tp1("12-06 10:00:00")])


def test_elastic_records_naming_their_pod_in_an_object_are_two_servers():
    """Filebeat's and Elastic Agent's ``kubernetes.pod.name`` is
    ``{"pod": {"name": ...}}``: two pods, not one server restarted (it read
    protected, exit 0)."""
    records = [json.dumps({"@timestamp": "2026-12-06T10:00:00Z", "message": line,
                           "kubernetes": {"pod": {"name": pod}, "namespace": "llm"}})
               for pod, line in two_pods()]
    d = diagnosed(text(records))
    assert (d.verdict, d.exit_code) == ("inconclusive", 2), d.summary
    assert "2 sources" in d.summary, d.summary
    flat = [json.dumps({"message": line, "kubernetes.pod.name": pod}) for pod, line in two_pods()]
    d = diagnosed(text(flat))
    assert (d.verdict, d.exit_code) == ("inconclusive", 2), d.summary


def test_a_kibana_csv_with_a_dotted_pod_column_is_two_servers():
    """Kibana's CSV names the column ``kubernetes.pod.name``."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["@timestamp", "kubernetes.pod.name", "message"])
    for pod, line in two_pods():
        writer.writerow(["Dec 6, 2026 @ 10:00:00.000", pod, line])
    d = diagnosed(out.getvalue())
    assert (d.verdict, d.exit_code) == ("inconclusive", 2), d.summary
    assert "2 sources" in d.summary, d.summary


@pytest.mark.parametrize("key", ["_raw", "short_message"])
def test_splunk_and_gelf_messages_are_read(key):
    """Splunk's export keeps the line in ``_raw``, GELF in
    ``short_message``: the crash after the protected warmup is a crash (it
    read protected, exit 0)."""
    records = [json.dumps({"_time": "2026-12-06T10:00:00.000+00:00", key: line, "host": "gpu-node-3"})
               for line in protected_then_crashed()]
    d = diagnosed(text(records))
    assert (d.verdict, d.exit_code) == ("other-crash", 3), d.summary
