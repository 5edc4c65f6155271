"""``diagnose`` on logs as operators download them: each export written here
from its documentation (tests/logs/SOURCES.md, "Exports"), files as they
are on disk, vLLM's own logging settings, and a property: the real #50615
crash log through any of these wrappers exits 1 or 2, never 0; the
protected run 0 or 2, never 1."""

from __future__ import annotations

import codecs
import csv
import datetime
import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dspark_attn_plugin import diagnose
from dspark_attn_plugin import log_reader
from dspark_attn_plugin.log_reader import LogReader

ROOT = Path(__file__).resolve().parents[1]
CRASH = ROOT / "benchmarks/results/engine-e2e-2026-11-30/run-C-standin-stock.log"
PROTECTED = ROOT / "benchmarks/results/engine-e2e-2026-11-30/run-D-standin-plugin.log"


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def judged(data: bytes) -> diagnose.Diagnosis:
    return diagnose.diagnose(diagnose.read_paths(["-"], stdin=io.BytesIO(data)))


def stamp(i: int) -> str:
    return f"2026-11-30T10:{i // 60 % 60:02d}:{i % 60:02d}.{i:06d}Z"


# --- exports, each as its documentation describes it --------------------------------


def gcp_record(i: int, line: str, json_payload: bool) -> dict:
    """A Cloud Logging LogEntry: the line in ``textPayload`` (a container's
    stdout), or in ``jsonPayload.message`` (a structured logger)."""
    record = {"insertId": f"id{i}", "logName": "projects/p/logs/stdout",
              "resource": {"type": "k8s_container", "labels": {"container_name": "vllm"}},
              "severity": "INFO", "timestamp": stamp(i), "receiveTimestamp": stamp(i)}
    if json_payload:
        record["jsonPayload"] = {"message": line, "logger": "vllm"}
    else:
        record["textPayload"] = line
    return record


def gcp_json_lines(lines, json_payload=False) -> str:
    return "".join(json.dumps(gcp_record(i, l, json_payload)) + "\n" for i, l in enumerate(lines))


def gcp_array(lines, json_payload=False, newest_first=False) -> str:
    """``gcloud logging read --format=json``: one pretty-printed JSON array
    (newest first unless ``--order=asc``)."""
    records = [gcp_record(i, l, json_payload) for i, l in enumerate(lines)]
    if newest_first:
        records.reverse()
    return json.dumps(records, indent=2) + "\n"


def cloudwatch_insights_csv(lines) -> str:
    """A Logs Insights result exported as CSV: ``@timestamp,@message``."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["@timestamp", "@message"])
    for i, line in enumerate(lines):
        writer.writerow([stamp(i), line])
    return out.getvalue()


def cloudwatch_filter_log_events(lines) -> str:
    """``aws logs filter-log-events`` output: FilteredLogEvent objects in
    ``events`` (eventId, ingestionTime, logStreamName, message, timestamp)."""
    events = [{"logStreamName": "vllm/0", "timestamp": 1764496800000 + i, "message": l,
               "ingestionTime": 1764496800100 + i, "eventId": str(i)} for i, l in enumerate(lines)]
    return json.dumps({"events": events, "searchedLogStreams": []}, indent=4) + "\n"


def datadog(lines, one_a_line=False) -> str:
    """Datadog's Logs API (``data`` of log objects whose ``attributes`` hold
    ``message``, ``status``, ``timestamp``)."""
    records = [{"id": f"AQ{i}", "type": "log", "attributes": {
        "message": l, "status": "info", "timestamp": stamp(i), "service": "vllm", "host": "gpu-7",
        "attributes": {"container_name": "vllm"}}} for i, l in enumerate(lines)]
    if one_a_line:
        return "".join(json.dumps(r) + "\n" for r in records)
    return json.dumps({"data": records, "links": {}, "meta": {}}) + "\n"


def loki_newest_first(lines) -> str:
    """``logcli query`` as it prints by default (``direction=backward``):
    timestamp, labels, line; newest first."""
    out = [f"{stamp(i)} {{app=\"vllm\"}} {l}" for i, l in enumerate(lines)]
    return "\n".join(reversed(out)) + "\n"


EXPORTS = {
    "gcp-text-json-lines": lambda ls: gcp_json_lines(ls),
    "gcp-json-payload-lines": lambda ls: gcp_json_lines(ls, json_payload=True),
    "gcp-array": lambda ls: gcp_array(ls),
    "gcp-array-json-payload": lambda ls: gcp_array(ls, json_payload=True),
    "cloudwatch-insights-csv": cloudwatch_insights_csv,
    "cloudwatch-filter-log-events": cloudwatch_filter_log_events,
    "datadog-api": lambda ls: datadog(ls),
    "datadog-lines": lambda ls: datadog(ls, one_a_line=True),
}


@pytest.mark.parametrize("export", sorted(EXPORTS))
@pytest.mark.parametrize("path, expected", [(CRASH, 1), (PROTECTED, 0)], ids=["crash", "protected"])
def test_exports_keep_the_verdict(export, path, expected):
    d = judged(EXPORTS[export](lines_of(path)).encode())
    assert d.exit_code == expected, d.summary


@pytest.mark.parametrize("make", [
    lambda ls: gcp_array(ls, newest_first=True),
    loki_newest_first,
    lambda ls: "\n".join(reversed(ls)) + "\n",
], ids=["gcloud-default-order", "logcli-default-order", "reversed-plain"])
@pytest.mark.parametrize("path", [CRASH, PROTECTED], ids=["crash", "protected"])
def test_a_log_read_newest_first_is_never_a_verdict(make, path):
    d = judged(make(lines_of(path)).encode())
    assert d.exit_code == 2 and "newest first" in d.summary, d.summary


# --- files as they are on disk --------------------------------------------------------


def test_gzip_is_read_by_its_magic_bytes_not_its_name(tmp_path):
    path = tmp_path / "vllm.log.1"  # logrotate's name, no .gz
    path.write_bytes(gzip.compress(CRASH.read_bytes()))
    d = diagnose.diagnose(diagnose.read_paths([str(path)]))
    assert d.exit_code == 1 and "read through gzip" in d.notes


def test_utf16_with_a_byte_order_mark_is_decoded():
    data = codecs.BOM_UTF16_LE + CRASH.read_text().replace("\n", "\r\n").encode("utf-16-le")
    d = judged(data)
    assert d.exit_code == 1 and any("UTF-16" in n for n in d.notes)


def test_nul_padding_before_the_log_is_skipped_with_a_note():
    d = judged(b"\x00" * 65536 + PROTECTED.read_bytes())
    assert d.exit_code == 0 and any("NUL" in n for n in d.notes)


def test_a_latin1_byte_keeps_the_verdict_with_a_note():
    data = CRASH.read_bytes().replace(b"/usr/", b"/usr/caf\xe9/", 1)
    d = judged(data)
    assert d.exit_code == 1 and any("not UTF-8" in n for n in d.notes)


def test_a_rotated_log_cut_short_is_read_up_to_the_cut(tmp_path):
    packed = gzip.compress(CRASH.read_bytes())
    path = tmp_path / "vllm.log.2.gz"
    path.write_bytes(packed[: len(packed) - 40])
    d = diagnose.diagnose(diagnose.read_paths([str(path)]))
    assert d.exit_code == 1 and any("cut short" in n for n in d.notes)


@pytest.mark.parametrize("compress", ["bz2", "lzma"])
def test_bzip2_and_xz_are_read_too(compress):
    data = __import__(compress).compress(CRASH.read_bytes())
    assert judged(data).exit_code == 1


def test_json_output_on_unreadable_input_is_an_object_with_exit_4(tmp_path):
    path = tmp_path / "bin.log"
    path.write_bytes(b"vLLM\x00\x01\x02")
    proc = subprocess.run([sys.executable, "-m", "dspark_attn_plugin", "diagnose", "--json",
                           str(path)], capture_output=True)
    assert proc.returncode == 4
    out = json.loads(proc.stdout)
    assert out["exit_code"] == 4 and out["error"]


@pytest.mark.parametrize("prefix", ["[pod/vllm-0/vllm] ", "[entrypoint] ", "[W1203 10:00:00 socket.cpp:207] "])
def test_a_log_whose_lines_begin_with_brackets_is_not_a_json_array(prefix):
    lines = [prefix + "starting"] + lines_of(CRASH)
    assert judged(("\n".join(lines) + "\n").encode()).exit_code == 1


def test_an_elasticsearch_search_response_is_read_through_its_hits():
    hits = [{"_index": "logs", "_id": str(i), "_source": {"@timestamp": stamp(i), "message": l}}
            for i, l in enumerate(lines_of(CRASH))]
    body = {"took": 3, "timed_out": False, "_shards": {"total": 1},
            "hits": {"total": {"value": len(hits)}, "hits": hits}}
    assert judged(json.dumps(body, indent=2).encode()).exit_code == 1


# --- vLLM's own settings, stops and deaths -----------------------------------------------


def test_a_json_logging_config_is_read_as_vllm_writes_it():
    """VLLM_LOGGING_CONFIG_PATH with a JSON formatter (python-json-logger's
    fields: asctime, levelname, name, filename, lineno, message)."""
    out = []
    for line in lines_of(CRASH):
        out.append(json.dumps({"asctime": "2026-11-30 10:00:00", "levelname": "INFO",
                               "name": "vllm", "filename": "x.py", "lineno": 1, "message": line}))
    assert judged(("\n".join(out) + "\n").encode()).exit_code == 1


def test_vllm_logging_prefix_between_the_process_prefix_and_the_level():
    lines = [l.replace(") INFO ", ") [gpu-7] INFO ").replace(") ERROR ", ") [gpu-7] ERROR ")
             .replace(") WARNING ", ") [gpu-7] WARNING ") for l in lines_of(CRASH)]
    assert lines != lines_of(CRASH)
    assert judged(("\n".join(lines) + "\n").encode()).exit_code == 1


def _healthy_start(arch="DeepseekV4ForCausalLM") -> list[str]:
    return [
        "(APIServer pid=10) INFO 11-30 10:00:00 [api_server.py:1] vLLM API server version 0.27.1",
        f"(APIServer pid=10) INFO 11-30 10:00:01 [model.py:1] Resolved architecture: {arch}",
        "(EngineCore_DP0 pid=20) INFO 11-30 10:00:02 [gpu_model_runner.py:1] Starting to load model /models/m",
        "(EngineCore_DP0 pid=20) INFO 11-30 10:00:30 [gpu_model_runner.py:2] Model loading took 10 GiB",
    ]


def test_a_worker_killed_during_the_profile_run_is_a_crash_not_a_stop():
    lines = _healthy_start() + [
        "(EngineCore_DP0 pid=20) ERROR 11-30 10:00:40 [multiproc_executor.py:1] Worker proc "
        "VllmWorker-0 died unexpectedly (exit code: -9), shutting down executor.",
        "(EngineCore_DP0 pid=20) Traceback (most recent call last):",
        '(EngineCore_DP0 pid=20)   File "/v/engine/core.py", line 5, in run',
        "(EngineCore_DP0 pid=20)     raise EngineDeadError()",
        "(EngineCore_DP0 pid=20) vllm.v1.engine.exceptions.EngineDeadError: dead",
    ]
    d = judged(("\n".join(lines) + "\n").encode())
    assert d.exit_code == 3 and "died unexpectedly (exit code: -9)" in d.summary
    assert "stopped" not in d.summary


def test_a_stop_is_named_at_its_own_line():
    lines = _healthy_start() + [
        "(APIServer pid=10) INFO 11-30 10:00:50 [launcher.py:1] Shutting down FastAPI HTTP server.",
    ]
    d = judged(("\n".join(lines) + "\n").encode())
    assert d.exit_code == 2 and "stopped at line 5 of the log" in d.summary, d.summary


def test_the_crash_verdict_does_not_say_stopped_for_the_shutdown_that_follows_it():
    text = CRASH.read_text() + (
        "(APIServer pid=1) INFO 11-30 23:59:59 [launcher.py:1] Shutting down FastAPI HTTP server.\n")
    d = judged(text.encode())
    assert d.exit_code == 1 and "stopped" not in d.summary


# --- exit 0 only on positive evidence ------------------------------------------------------


def test_a_cut_start_with_a_local_model_path_is_not_called_another_model():
    lines = [
        "(APIServer pid=10) INFO 11-30 10:00:00 [api_server.py:1] vLLM API server version 0.27.1",
        "(APIServer pid=10) INFO 11-30 10:00:00 [utils.py:1] non-default args: {'model': '/tmp/x/model'}",
    ]
    d = judged(("\n".join(lines) + "\n").encode())
    assert d.exit_code == 2, d.summary


@pytest.mark.parametrize("arch", ["Qwen3ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM"])
def test_another_architecture_named_is_not_applicable(arch):
    d = judged(("\n".join(_healthy_start(arch)) + "\n").encode())
    assert d.exit_code == 0 and d.verdict == "not-applicable", d.summary


def test_deepseek_v4_named_is_applicable():
    d = judged(("\n".join(_healthy_start("DeepseekV4ForCausalLM")) + "\n").encode())
    assert d.verdict != "not-applicable" and d.exit_code == 2


def _tail(path: Path, n: int) -> bytes:
    return ("\n".join(lines_of(path)[-n:]) + "\n").encode()


def test_a_tail_that_cuts_profile_run_off_the_traceback_is_never_another_crash():
    lines = lines_of(CRASH)
    at = max(i for i, l in enumerate(lines) if ", in profile_run" in l)
    d = judged(("\n".join(lines[at + 1:]) + "\n").encode())
    assert d.exit_code == 2 and "Probably vllm-project/vllm#50615" in d.summary, d.summary


def test_only_the_api_server_s_report_is_no_other_crash():
    lines = [l for l in lines_of(CRASH) if l.startswith("(APIServer")]
    d = judged(("\n".join(lines) + "\n").encode())
    assert d.exit_code == 2 and "not the failure itself" in d.summary, d.summary


def test_a_core_that_died_by_a_signal_is_named():
    lines = _healthy_start() + [
        "(APIServer pid=10) Traceback (most recent call last):",
        '(APIServer pid=10)   File "/v/v1/engine/utils.py", line 9, in wait_for_engine_startup',
        "(APIServer pid=10)     raise RuntimeError(msg)",
        "(APIServer pid=10) RuntimeError: Engine core initialization failed. See root cause "
        "above. Failed core proc(s): {'EngineCore': -9}",
    ]
    d = judged(("\n".join(lines) + "\n").encode())
    assert d.exit_code == 3 and "{'EngineCore': -9}" in d.summary, d.summary


@pytest.mark.parametrize("restart_line", [
    None,
    "(EngineCore_DP0 pid=40) INFO 11-30 11:00:01 [instrumentation.py:1] "
    "dspark-attn-plugin is disabled by DSPARK_ATTN_PLUGIN=off; vLLM's code is left as it is",
])
def test_a_protected_start_says_nothing_of_a_cut_restart_without_the_plugin(restart_line):
    restart = [
        "(APIServer pid=30) INFO 11-30 11:00:00 [api_server.py:1] vLLM API server version 0.27.1",
        "(APIServer pid=30) INFO 11-30 11:00:00 [utils.py:1] non-default args: {'model': '/tmp/x/model'}",
    ] + ([restart_line] if restart_line else [])
    d = judged((PROTECTED.read_text() + "\n".join(restart) + "\n").encode())
    assert d.exit_code == 2, d.summary


@pytest.mark.parametrize("prefix, names", [
    ("[pod/vllm-7c9f-{}/vllm] ", ("abcde", "fghij")),
    ("vllm-7c9f-{} vllm ", ("abcde", "fghij")),
    # Names that differ only in digits: a StatefulSet's pods, compose's replicas.
    ("[pod/vllm-{}/vllm] ", ("0", "1")),
    ("[pod/vllm-7c9f-{}/vllm] ", ("12345", "67890")),
    ("vllm-{} vllm ", ("0", "1")),
    ("vllm-{}  | ", ("1", "2")),
    ("[pod/vllm-{}/vllm] 2026-12-04T10:00:00.000000Z ", ("0", "1")),
], ids=["kubectl-prefix", "stern", "statefulset", "digit-hash", "stern-statefulset",
        "compose-replicas", "kubectl-prefix-timestamps"])
def test_two_pods_in_one_log_are_never_shown_protected_as_one(prefix, names):
    """``kubectl logs -l app=vllm --prefix``, ``stern`` or ``docker compose
    logs``: one pod crashed, the other was protected; read as one server
    with a restart, the last start would say protected."""
    a = [prefix.format(names[0]) + l for l in lines_of(CRASH)]
    b = [prefix.format(names[1]) + l for l in lines_of(PROTECTED)]
    d = judged(("\n".join(a + b) + "\n").encode())
    assert d.exit_code == 2 and "holds the lines of 2 sources" in d.summary, d.summary


_T0 = datetime.datetime(2026, 12, 4, 9, 59, 50)


def _at(i: int, fmt: str) -> str:
    return (_T0 + datetime.timedelta(seconds=i * 0.37)).strftime(fmt)


@pytest.mark.parametrize("wrap", [
    lambda i, pid: _at(i, "%Y-%m-%dT%H:%M:%S.%f") + "123Z ",  # kubectl logs --timestamps
    lambda i, pid: _at(i, "%Y-%m-%dT%H:%M:%S.%f") + "+00:00 stdout F ",  # a CRI log file
    lambda i, pid: _at(i, "%b %d %H:%M:%S") + f" gpu-host vllm[{pid}]: ",  # journalctl
    lambda i, pid: _at(i, "%Y-%m-%dT%H:%M:%S.%f") + f"+0000 gpu-host vllm[{pid}]: ",  # -o short-iso-precise
    lambda i, pid: f"{1795153310 + i}.{i:06d} gpu-host vllm[{pid}]: ",  # journalctl -o short-unix
    lambda i, pid: _at(i, "%b ") + f"{int(_at(i, '%d')):>2}" + _at(i, " %H:%M:%S")
    + f" gpu-host vllm[{pid}]: ",  # syslog
    lambda i, pid: "[pod/vllm-0/vllm] " + _at(i, "%Y-%m-%dT%H:%M:%S.%fZ "),
    lambda i, pid: "vllm-1  | " + _at(i, "%Y-%m-%dT%H:%M:%S.%fZ "),
    lambda i, pid: _at(i, "%Y-%m-%d %H:%M:%S,") + f"{i % 1000:03d} ",  # Python's logging
], ids=["kubectl-timestamps", "cri", "journald", "journald-iso-precise", "journald-unix", "syslog", "kubectl-prefix-timestamps",
        "compose-timestamps", "python-logging"])
def test_one_source_whose_wrapper_holds_times_and_a_pid_is_one_server_restarted(wrap):
    """What changes in one source's wrapper from line to line (its times)
    or at a restart (journald's process id) does not make it two sources:
    a crash, then a protected restart, reads protected."""
    a, b = lines_of(CRASH), lines_of(PROTECTED)
    lines = ([wrap(i, 111) + l for i, l in enumerate(a)]
             + [wrap(len(a) + i, 222) + l for i, l in enumerate(b)])
    d = judged(("\n".join(lines) + "\n").encode())
    assert d.exit_code == 0 and d.starts == 2, d.summary


def test_a_restart_cut_early_is_judged_by_the_start_before_it():
    # (the same vLLM as the crash's start: another version's start says
    # nothing of this one, test_diagnose_deployments)
    restart = [
        "(APIServer pid=30) INFO 11-30 11:00:00 [api_server.py:1] vLLM API server version 0.26.0",
        "(APIServer pid=30) INFO 11-30 11:00:00 [utils.py:1] non-default args: {'model': '/tmp/x/model'}",
    ]
    d = judged((CRASH.read_text() + "\n".join(restart) + "\n").encode())
    assert d.exit_code == 1 and "had not reached its warmup" in d.summary, d.summary


# --- the property: any wrapper, never the wrong side -----------------------------------------


def _wrap(lines, export, reverse, prefix, gz, encoding, cut):
    if cut is not None:
        lines = lines[:cut]
    if prefix:
        lines = [l.replace(") INFO ", ") [p] INFO ").replace(") ERROR ", ") [p] ERROR ") for l in lines]
    if reverse:
        lines = list(reversed(lines))
    text = EXPORTS[export](lines) if export else "\n".join(lines) + "\n"
    data = text.encode("utf-16") if encoding == "utf-16" else text.encode()
    if encoding == "latin-1-byte":
        data = data.replace(b"INFO", b"INFO\xe9", 1)
    return gzip.compress(data) if gz else data


@settings(max_examples=60, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(
    crash=st.booleans(),
    export=st.sampled_from([None, *sorted(EXPORTS)]),
    reverse=st.booleans(),
    prefix=st.booleans(),
    gz=st.booleans(),
    encoding=st.sampled_from(["utf-8", "utf-16", "latin-1-byte"]),
    cut=st.one_of(st.none(), st.integers(1, 400)),
)
def test_any_wrapper_never_puts_the_crash_on_the_safe_side(crash, export, reverse, prefix, gz,
                                                           encoding, cut):
    lines = lines_of(CRASH if crash else PROTECTED)
    d = judged(_wrap(lines, export, reverse, prefix, gz, encoding, cut))
    allowed = {1, 2} if crash else {0, 2}
    assert d.exit_code in allowed, d.summary


@pytest.mark.parametrize("stamped", [False, True], ids=["plain", "kubectl-timestamps"])
def test_an_in_process_llm_log_without_process_prefixes_shows_the_crash(stamped):
    """``vllm.LLM(...)`` in one process: no ``(EngineCore pid=N)`` prefixes."""
    import re

    lines = [re.sub(r"^\([A-Za-z_][\w.-]* pid=\d+\) ", "", l) for l in lines_of(CRASH)]
    if stamped:
        lines = [f"{stamp(i)} {l}" for i, l in enumerate(lines)]
    d = judged(("\n".join(lines) + "\n").encode())
    assert d.exit_code == 1, d.summary


def test_vllm_logging_prefix_does_not_hide_the_order_of_the_log():
    """The times come from vLLM's head: behind VLLM_LOGGING_PREFIX it must
    still be found, or a log written newest first reads as in order."""
    lines = [l.replace(") INFO ", ") [gpu-7] INFO ").replace(") WARNING ", ") [gpu-7] WARNING ")
             for l in lines_of(PROTECTED)]
    d = judged(("\n".join(reversed(lines)) + "\n").encode())
    assert d.exit_code == 2 and "newest first" in d.summary, d.summary


def _died_before_the_model(pid: int = 3436) -> list[str]:
    return lines_of(CRASH)[:12] + [
        f"(APIServer pid={pid}) Traceback (most recent call last):",
        f'(APIServer pid={pid})   File "/v/vllm/engine/arg_utils.py", line 9, in create_engine_config',
        f"(APIServer pid={pid})     raise ValueError(msg)",
        f"(APIServer pid={pid}) ValueError: max_model_len 99999 is greater than the derived "
        "max_model_len 4096",
    ]


def test_a_restart_is_not_judged_by_a_start_that_died_before_loading_the_model():
    """Start 1 died of a bad argument before any process loaded the model;
    the restart (fixed argument?) is cut early: nothing is known of it."""
    restart = [
        "(APIServer pid=30) INFO 11-30 11:00:00 [api_server.py:1] vLLM API server version 0.26.0",
        "(APIServer pid=30) INFO 11-30 11:00:00 [utils.py:1] non-default args: {'model': '/tmp/x/model'}",
    ]
    d = judged(("\n".join(_died_before_the_model() + restart) + "\n").encode())
    assert (d.exit_code, d.starts) == (2, 2), d.summary
    assert "different crash" not in d.summary, d.summary


def test_the_last_start_s_own_crash_is_its_verdict_whatever_came_before():
    """The #50615 crash, then a restart that died of a bad argument: the
    report is the restart's crash, not the one before it."""
    d = judged(("\n".join(lines_of(CRASH) + _died_before_the_model(pid=30)) + "\n").encode())
    assert (d.exit_code, d.verdict, d.starts) == (3, "other-crash", 2), d.summary
    assert "ValueError" in d.summary and "had not reached" not in d.summary, d.summary


def test_the_sources_told_apart_are_bounded():
    """A wrapper whose text changes on every line (a counter) is many
    sources, and what is kept of them stays bounded."""
    reader = LogReader()
    for i in range(5 * log_reader.MAX_SOURCES):
        reader.feed(f"line-{i:05d} | (APIServer pid=1) INFO 12-04 10:00:00 [api_server.py:1] text")
    assert reader.interleaved_sources == log_reader.MAX_SOURCES
    assert len(reader.source_lines) == log_reader.MAX_SOURCES


# --- several servers in one log, however they are told apart ---------------------------


def _two(crash_lines, protected_lines) -> diagnose.Diagnosis:
    return judged(("\n".join(crash_lines + protected_lines) + "\n").encode())


def test_two_pods_with_the_last_start_cut_are_not_judged_by_the_one_before():
    """Pod 1's protected start, then its restart cut early: the verdict
    falls back to the start before, which says nothing of pod 0."""
    a = ["[pod/vllm-0/vllm] " + l for l in lines_of(CRASH)]
    b = ["[pod/vllm-1/vllm] " + l for l in lines_of(PROTECTED)]
    d = _two(a, b + b[:20])
    assert d.exit_code == 2 and "holds the lines of 2 sources" in d.summary, d.summary


@pytest.mark.parametrize("wrapped", ["crash", "protected"])
def test_one_pod_with_a_prefix_and_one_without_are_two_sources(wrapped):
    prefix = "[pod/vllm-0/vllm] "
    a = [(prefix if wrapped == "crash" else "") + l for l in lines_of(CRASH)]
    b = [(prefix if wrapped == "protected" else "") + l for l in lines_of(PROTECTED)]
    d = _two(a, b)
    assert d.exit_code == 2 and "holds the lines of 2 sources" in d.summary, d.summary


def test_a_wrapper_longer_than_a_line_head_is_still_learnt():
    """Loki's default output puts every label before the line: hundreds of
    characters before vLLM's."""
    long = ('2026-11-30T05:43:47Z {app="vllm", filename="/var/log/pods/default_vllm-0_'
            + "x" * 300 + '/vllm/0.log", pod="vllm-0"} ')
    assert judged(("\n".join(long + l for l in lines_of(CRASH)) + "\n").encode()).exit_code == 1
    d = _two([long + l for l in lines_of(CRASH)],
             ['2026-11-30T06:21:50Z {app="vllm", pod="vllm-1"} ' + l for l in lines_of(PROTECTED)])
    assert d.exit_code == 2, d.summary


@pytest.mark.parametrize("prefixes", [("gpu[0]: ", "gpu[1]: "),
                                      ("[pod/vllm-2026-11-29/vllm] ", "[pod/vllm-2026-11-30/vllm] "),
                                      ("vllm-run-05:43:47 ", "vllm-run-06:21:50 ")],
                         ids=["index-in-brackets", "date-in-a-name", "time-in-a-name"])
def test_names_that_hold_digits_like_a_time_or_pid_are_still_two_sources(prefixes):
    d = _two([prefixes[0] + l for l in lines_of(CRASH)], [prefixes[1] + l for l in lines_of(PROTECTED)])
    assert d.exit_code == 2, d.summary


def _record(fmt: str, pod: str, line: str) -> dict:
    return {
        "loki": {"labels": {"app": "vllm", "pod": pod}, "line": line,
                 "timestamp": "2026-11-30T05:43:47Z"},
        "stern": {"message": line, "nodeName": "gpu-node-0", "namespace": "default",
                  "podName": pod, "containerName": "vllm"},
        "fluent-bit": {"log": line, "stream": "stdout",
                       "kubernetes": {"pod_name": pod, "container_name": "vllm"}},
        "gcp": {"textPayload": line, "resource": {"type": "k8s_container",
                                                  "labels": {"pod_name": pod, "container_name": "vllm"}}},
    }[fmt]


@pytest.mark.parametrize("fmt", ["loki", "stern", "fluent-bit", "gcp"])
@pytest.mark.parametrize("layout", ["lines", "array"])
def test_an_export_that_names_each_records_pod_is_two_sources(fmt, layout):
    records = ([_record(fmt, "vllm-0", l) for l in lines_of(CRASH)]
               + [_record(fmt, "vllm-1", l) for l in lines_of(PROTECTED)])
    text = ("\n".join(json.dumps(r) for r in records) + "\n" if layout == "lines"
            else json.dumps(records, indent=1))
    d = judged(text.encode())
    assert d.exit_code == 2 and "holds the lines of 2 sources" in d.summary, d.summary
    # One pod, restarted: crash, then protected.
    same = ([_record(fmt, "vllm-0", l) for l in lines_of(CRASH)]
            + [_record(fmt, "vllm-0", l) for l in lines_of(PROTECTED)])
    text = ("\n".join(json.dumps(r) for r in same) + "\n" if layout == "lines"
            else json.dumps(same, indent=1))
    assert judged(text.encode()).exit_code == 0


def test_a_cloudwatch_export_of_two_log_streams_is_two_sources():
    rows = ([("2026-11-30 05:43:47.000", "vllm/vllm/aaa", l) for l in lines_of(CRASH)]
            + [("2026-11-30 06:21:50.000", "vllm/vllm/bbb", l) for l in lines_of(PROTECTED)])
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["@timestamp", "@logStream", "@message"])
    writer.writerows(rows)
    d = judged(out.getvalue().encode())
    assert d.exit_code == 2 and "holds the lines of 2 sources" in d.summary, d.summary


def test_a_start_timed_before_the_lines_above_it_is_another_servers():
    """Two units of one host logging under one name (journald): only the
    pid tells them apart, as at a restart; but the second began before the
    first ended, which a restart cannot do."""
    crash = lines_of(CRASH)
    last = max(i for i, l in enumerate(crash) if " 11-30 " in l)
    early = [l.replace(l[l.index(" 11-30 ") + 7:l.index(" 11-30 ") + 15], "05:43:50")
             if " 11-30 " in l else l for l in lines_of(PROTECTED)]
    d = _two(["Nov 30 05:43:47 gpu-node-0 vllm[3436]: " + l for l in crash],
             ["Nov 30 05:43:50 gpu-node-0 vllm[790]: " + l for l in early])
    assert crash[last].split(" 11-30 ")[1][:8] > "05:43:50"
    assert d.exit_code == 2 and "begins at a time before the lines above it" in d.summary, d.summary
    # The same restart at its own later time reads as one: protected.
    d = _two(["Nov 30 05:43:47 gpu-node-0 vllm[3436]: " + l for l in crash],
             ["Nov 30 06:21:50 gpu-node-0 vllm[790]: " + l for l in lines_of(PROTECTED)])
    assert d.exit_code == 0, d.summary


@pytest.mark.parametrize("make", [
    # A plain log of a TP=2 server: torch's [rankN]: lines are no source.
    lambda ls: ls + [f"[rank{i % 2}]:[W1130 06:23:12.{i} ProcessGroupNCCL.cpp:4561] using GPU {i % 2} "
                     "to perform barrier" for i in range(24)],
    # A CRI log file: one container's stdout and stderr.
    lambda ls: [f"2026-11-30T06:21:50.{i:09d}Z {'stdout' if i % 3 else 'stderr'} F {l}"
                for i, l in enumerate(ls)],
    # Epoch seconds (journalctl -o short-unix) and a syslog priority.
    lambda ls: [f"{1795153310 + i}.{i:06d} gpu-node-0 vllm[790]: {l}" for i, l in enumerate(ls)],
    lambda ls: [f"<{30 if i % 2 else 27}>Nov 30 06:21:50 gpu-node-0 vllm[790]: {l}"
                for i, l in enumerate(ls)],
    # A progress bar a terminal overwrote before vLLM's line.
    lambda ls: ls[:50] + ["\rLoading: 50%|#####     | 1/2 [00:01<00:01]\r" + l for l in ls[50:70]]
    + ls[70:],
], ids=["tp2-rank-lines", "cri-streams", "epoch", "syslog-priority", "progress-bar"])
def test_what_changes_within_one_source_keeps_it_one(make):
    d = judged(("\n".join(make(lines_of(PROTECTED))) + "\n").encode())
    assert d.exit_code == 0, d.summary


@pytest.mark.parametrize("stray", [15, 16, 40])
def test_torch_s_rank_lines_stay_no_source_after_many_stray_wrappers(stray):
    """A terminal's log where other programs' output ran into vLLM's lines
    (``stepN: (APIServer pid=...) ...``, each text once), then a Ctrl-C
    whose tracebacks torch prefixed with ``[rank0]:`` and ``[rank1]:``:
    however many stray wrappers were met, torch's prefix is no source, and
    the log still reads protected."""
    lines = lines_of(PROTECTED)
    strays = [f"step{chr(97 + k % 26) * (1 + k // 26)}: " + lines[k] for k in range(stray)]
    frames = ["Traceback (most recent call last):"] + [
        f'  File "/v/vllm/v1/executor/multiproc_executor.py", line {600 + k}, in worker_busy_loop'
        if k % 2 == 0 else "    method(*args)" for k in range(10)] + ["KeyboardInterrupt"]
    ranks = [f"[rank{r}]: {l}" for r in (0, 1) for l in frames]
    d = judged(("\n".join(strays + lines[stray:] + ["Received SIGINT, shutting down"] + ranks)
                + "\n").encode())
    assert d.exit_code == 0, d.summary


# Held-out mutations of the source rules (2026-12-04) that no test noticed.


def test_two_journald_units_of_one_host_are_two_sources():
    """journald's ``host ident[pid]:`` masks the pid, not the ident."""
    a = [f"Nov 30 06:20:{i % 60:02d} host vllm-a[{100 + i}]: {l}" for i, l in enumerate(lines_of(CRASH))]
    b = [f"Nov 30 06:21:{i % 60:02d} host vllm-b[{900 + i}]: {l}" for i, l in enumerate(lines_of(PROTECTED))]
    d = _two(a, b)
    assert d.exit_code == 2 and "holds the lines of 2 sources" in d.summary, d.summary


def test_a_tagged_name_after_journald_s_pid_still_names_the_source():
    """journald masks its own ``ident[pid]:``, the first after the time; a
    wrapper's ``gpu[0]:`` after it is a name, and ``gpu[1]:`` another source."""
    a = [f"Nov 30 06:20:{i % 60:02d} host vllm[100]: gpu[0]: {l}" for i, l in enumerate(lines_of(CRASH))]
    b = [f"Nov 30 06:21:{i % 60:02d} host vllm[900]: gpu[1]: {l}" for i, l in enumerate(lines_of(PROTECTED))]
    d = _two(a, b)
    assert d.exit_code == 2 and "holds the lines of 2 sources" in d.summary, d.summary
    # One tag, restarted under a new pid: one source, crash then protected.
    b = [f"Nov 30 06:21:{i % 60:02d} host vllm[900]: gpu[0]: {l}" for i, l in enumerate(lines_of(PROTECTED))]
    assert _two(a, b).exit_code == 0


def test_a_tag_after_a_syslog_ident_without_a_pid_names_the_source():
    """``logger -t vllm`` writes ``host vllm: `` with no pid: a wrapper's
    ``gpu[0]:`` after it is no process id, and ``gpu[1]:`` another source."""
    a = [f"Nov 30 06:20:{i % 60:02d} host vllm: gpu[0]: {l}" for i, l in enumerate(lines_of(CRASH))]
    b = [f"Nov 30 06:21:{i % 60:02d} host vllm: gpu[1]: {l}" for i, l in enumerate(lines_of(PROTECTED))]
    d = _two(a, b)
    assert d.exit_code == 2 and "holds the lines of 2 sources" in d.summary, d.summary


@pytest.mark.parametrize("wrap", [
    lambda i, pid: f"[{1000 + i:5d}.{i:06d}] gpu-host vllm[{pid}]: ",  # journalctl -o short-monotonic
    lambda i, pid: f"node[0]: Nov 30 06:21:{i % 60:02d} gpu-host vllm[{pid}]: ",  # a tag before the time
], ids=["monotonic", "tag-before-the-time"])
def test_a_restart_under_a_new_pid_is_one_source_whatever_comes_before_the_time(wrap):
    """journald's ``ident[pid]:`` after a monotonic time, or after a time
    that a tag precedes: a restart's new pid is the same source."""
    crash, protected = lines_of(CRASH), lines_of(PROTECTED)
    d = _two([wrap(i, 3436) + l for i, l in enumerate(crash)],
             [wrap(len(crash) + i, 790) + l for i, l in enumerate(protected)])
    assert d.exit_code == 0, d.summary


@pytest.mark.parametrize("wrap", [
    lambda i, pid: f"Nov 30 06:21:{i % 60:02d} vllm[{pid}]: ",  # journalctl --no-hostname
    lambda i, pid: f"Mon 2026-11-30 06:21:{i % 60:02d} UTC gpu-host vllm[{pid}]: ",  # -o short-full
    lambda i, pid: f"[{1000 + i:5d}.{i:06d} <{0.0:12.6f}>] gpu-host vllm[{pid}]: ",  # -o short-delta
    lambda i, pid: f"Mon 2026-11-30 06:21:{i % 60:02d} +04 gpu-host vllm[{pid}]: ",  # a zone with no letters
], ids=["no-hostname", "short-full", "short-delta", "short-full-numeric-zone"])
def test_journald_s_other_shapes_keep_a_restart_one_source(wrap):
    """journald without the host, with a weekday and a zone, with the delta
    between lines: a restart under a new pid is the same source."""
    crash, protected = lines_of(CRASH), lines_of(PROTECTED)
    d = _two([wrap(i, 3436) + l for i, l in enumerate(crash)],
             [wrap(len(crash) + i, 790) + l for i, l in enumerate(protected)])
    assert d.exit_code == 0, d.summary


def test_a_tag_after_journald_s_ident_without_a_host_still_names_the_source():
    """``journalctl --no-hostname`` of a launcher tagging its servers:
    ``launch.sh[4001]: gpu[1]:`` then ``gpu[0]:`` are two servers."""
    a = [f"Nov 30 06:20:{i % 60:02d} launch.sh[4001]: gpu[1]: {l}" for i, l in enumerate(lines_of(CRASH))]
    b = [f"Nov 30 06:21:{i % 60:02d} launch.sh[4001]: gpu[0]: {l}" for i, l in enumerate(lines_of(PROTECTED))]
    d = _two(a, b)
    assert d.exit_code == 2 and "holds the lines of 2 sources" in d.summary, d.summary


def test_a_weekday_that_turns_at_midnight_is_the_same_source():
    """``journalctl -o short-full`` over midnight: ``Mon`` then ``Tue``."""
    protected = lines_of(PROTECTED)
    half = len(protected) // 2
    lines = ([f"Mon 2026-11-30 23:59:{i % 60:02d} UTC gpu-host vllm[790]: {l}"
              for i, l in enumerate(protected[:half])]
             + [f"Tue 2026-12-01 00:00:{i % 60:02d} UTC gpu-host vllm[790]: {l}"
                for i, l in enumerate(protected[half:])])
    assert judged(("\n".join(lines) + "\n").encode()).exit_code == 0


@pytest.mark.parametrize("wrap", [
    lambda i, tag: f"Nov 30 06:21:{i % 60:02d} gpu[{tag}]: ",
    lambda i, tag: f"Nov 30 06:21:{i % 60:02d} node1 gpu[{tag}]: ",
    lambda i, tag: f"Nov 30 06:21:{i % 60:02d} gpu-host vllm[{4000 + tag}]: ",
], ids=["tag-after-the-time", "tag-after-a-host", "two-units-one-name"])
def test_two_ids_that_take_turns_are_two_sources_not_a_restart(wrap):
    """What reads as journald's ``ident[pid]:`` changing is a restart only
    when the old id does not come back: two that take turns line by line
    are two servers (a protected one and one with no plugin, the same inner
    pids)."""
    protected = lines_of(PROTECTED)
    stock = [l for l in protected if "dspark-attn-plugin" not in l]  # the same start, no plugin
    mixed = [wrap(i, i % 2) + (protected if i % 2 else stock)[i // 2]
             for i in range(2 * min(len(stock), len(protected)))]
    d = judged(("\n".join(mixed) + "\n").encode())
    assert d.exit_code == 2 and "holds the lines of 2 sources" in d.summary, d.summary


def test_an_old_pid_that_comes_back_for_a_few_lines_is_still_another_server():
    """Unit A (no plugin) got past its warmup; unit B of the same name
    started, patched; then A wrote five more lines under its pid. What A
    wrote before is in B's source: the log is two servers, however few
    lines came back."""
    stock = [l for l in lines_of(PROTECTED) if "dspark-attn-plugin" not in l]
    a = [f"Nov 30 06:20:{i % 60:02d} gpu-host vllm[1000]: {l}" for i, l in enumerate(stock)]
    b = [f"Nov 30 06:21:{i % 60:02d} gpu-host vllm[2000]: {l}"
         for i, l in enumerate(lines_of(PROTECTED))]
    back = [f"Nov 30 06:22:0{i} gpu-host vllm[1000]: (APIServer pid=1190) INFO:     "
            "127.0.0.1:40000 - \"GET /health HTTP/1.1\" 200 OK" for i in range(5)]
    d = _two(a, b + back)
    assert d.exit_code == 2 and "sources" in d.summary, d.summary


def test_a_start_weeks_before_the_lines_above_it_is_another_servers():
    """Only a step back of most of a year is the turn of the year."""
    protected = lines_of(PROTECTED)
    d = _two(protected, [l.replace(" 11-30 ", " 10-15 ") for l in protected])
    assert d.exit_code == 2 and "begins at a time before the lines above it" in d.summary, d.summary


def test_a_restart_whose_first_line_has_no_time_is_not_timed_by_the_line_before():
    """After ``exited with code``, the new start's first line has no time of
    its own: it is not given the (old) time of the line before it."""
    protected = lines_of(PROTECTED)
    lines = (protected + ["(APIServer pid=790) INFO 11-30 05:00:00 [x.py:1] a late line of an old time",
                          "vllm-1 exited with code 0", "(APIServer pid=2000) starting again"]
             + [l.replace(" 11-30 06:", " 11-30 08:") for l in protected])
    d = judged(("\n".join(lines) + "\n").encode())
    assert d.exit_code == 0 and d.starts == 2, d.summary


def test_a_crash_in_a_log_of_several_sources_is_still_the_crash():
    """Several sources make a protected verdict inconclusive, never a crash:
    the crash of the last server read stays exit 1."""
    records = ([{"pod": "vllm-0", "log": l} for l in lines_of(PROTECTED)]
               + [{"pod": "vllm-1", "log": l} for l in lines_of(CRASH)])
    d = judged("".join(json.dumps(r) + "\n" for r in records).encode())
    assert d.exit_code == 1 and d.verdict == "crash-50615", d.summary


# Survivors of the mutation tool over log_reader.py (2026-12-05).


def test_three_pods_in_one_log_are_three_sources():
    """Beyond two, every source is counted: three pods' lines read as three
    servers (inconclusive), not as one protected server."""
    protected = lines_of(PROTECTED)
    lines = [f"[pod/vllm-{k}/vllm] {l}" for k in range(3) for l in protected]
    d = judged(("\n".join(lines) + "\n").encode())
    assert d.exit_code == 2 and "holds the lines of 3 sources" in d.summary, d.summary


def test_a_log_of_a_hundred_pods_names_the_sixty_four_it_told_apart():
    """The reader tells at most 64 sources apart (what it keeps stays
    bounded); a log of more says 64, and is inconclusive all the same."""
    protected = lines_of(PROTECTED)
    lines = ([f"[pod/vllm-{k}/vllm] {l}" for k in range(99) for l in protected[:12]]
             + [f"[pod/vllm-99/vllm] {l}" for l in protected])
    d = judged(("\n".join(lines) + "\n").encode())
    assert d.exit_code == 2 and "holds the lines of 64 sources" in d.summary, d.summary


def test_a_restart_across_the_new_year_is_the_same_servers():
    """vLLM's times have no year: a restart on 1 January after lines of 31
    December steps back most of a year, which is the turn of the year, not
    another server's log."""
    protected = lines_of(PROTECTED)
    assert any(" 11-30 " in l for l in protected)
    d = _two([l.replace(" 11-30 ", " 12-31 ") for l in protected],
             [l.replace(" 11-30 ", " 01-01 ") for l in protected])
    assert d.exit_code == 0 and d.starts == 2, d.summary
