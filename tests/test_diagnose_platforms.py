"""What ``diagnose`` reads of logs as serving platforms and their consoles
hand them over: NVIDIA Triton's vLLM backend (its own deaths, several
models in one server), exports that write more columns after the message
(``aws logs ... --output text``, a Logs Insights table copied as Markdown,
``gcloud --format='value(...)'``), and replicas of one image whose lines
carry the same process ids and nothing else naming them.

Each case is one a reviewer who had not read these tests wrote (13th
held-out review of ``diagnose``, 71 logs); each failed on the source
before its rule changed: a dead server read protected (exit 0), a #50615
crash read as another crash (exit 3), or two replicas read as one
protected server.
"""

from __future__ import annotations

import json

import pytest

from test_diagnose import diagnosed
from test_diagnose_deployments import (API, ENGINE, api_start, engine_start, loaded, protected_tp1,
                                       serving, text, warmed)
from test_log_reader_details import logged, traceback_50615

WHEN = "12-06 22:03:00"
HEAD = f"({ENGINE}) ERROR {WHEN} [core.py:1349] "

# The API server's client, collected at exit: a traceback of its own that
# is no crash of the server (an ``Exception ignored in ... __del__``).
DEL_TRACEBACK = [f"({API}) " + line for line in (
    "Exception ignored in: <function AsyncMPClient.__del__ at 0x7f>",
    "Traceback (most recent call last):",
    '  File "/v/vllm/v1/engine/core_client.py", line 412, in __del__',
    "    self.shutdown()",
    "AttributeError: 'AsyncMPClient' object has no attribute 'resources'",
)]


def crashed_tp1(when: str = "12-06 22:00:00") -> list[str]:
    """A DeepSeek-V4 start without the plugin that fails #50615, then the
    client's traceback at exit."""
    return (api_start(when) + engine_start(when) + loaded(ENGINE, when, patched=False)
            + traceback_50615(HEAD) + DEL_TRACEBACK)


# --- Triton ---------------------------------------------------------------------------


def triton(message: str, level: str = "I") -> str:
    """One line of tritonserver's own log (glog's head)."""
    return f'{level}1206 22:00:00.000123 1 model_lifecycle.cc:473] "{message}"'


@pytest.mark.parametrize("death", [
    'E1206 22:15:00.000123 1 python_be.cc:2405] "Stub process \'vllm_model_0_0\' is not healthy."',
    "E1025 09:40:38.075506 9121 python_be.cc:2066] Stub process is unhealthy and it will be restarted.",
    "Signal (11) received.",
    "Signal (6) received.",
], ids=["stub-not-healthy", "stub-unhealthy-restarted", "sigsegv", "sigabrt"])
def test_a_triton_stub_or_server_that_died_after_a_protected_warmup_is_another_crash(death):
    """Triton's Python backend runs vLLM's engine in its stub process: a
    stub Triton found unhealthy, or tritonserver's own fault, is a death of
    the server (it read protected, exit 0)."""
    d = diagnosed(text([triton("loading: vllm_model:1")] + protected_tp1("12-06 22:00:00") + [death]))
    assert (d.verdict, d.exit_code) == ("other-crash", 3), d.summary


@pytest.mark.parametrize("line", ["Signal (15) received.", "Signal (2) received."])
def test_triton_s_stop_signals_are_no_death(line):
    d = diagnosed(text(protected_tp1("12-06 22:00:00") + [line]))
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary


def test_a_triton_server_that_loads_two_models_is_not_shown_protected_by_the_last_one():
    """Each model Triton loads runs its own vLLM engine with no API server
    start between them: the first model's failure is hidden behind the
    second's start, so a protected second model says nothing of the
    first (it read protected, exit 0)."""
    first = ([triton("loading: dsv4_a:1")] + engine_start("12-06 22:00:00")
             + loaded(ENGINE, "12-06 22:00:00", patched=False) + traceback_50615(HEAD)
             + ["E1206 22:03:13.000123 1 model_lifecycle.cc:654] \"failed to load 'dsv4_a' version 1: "
                "Internal: RuntimeError: Engine core initialization failed.\""])
    other = "EngineCore pid=955"
    second = ([triton("loading: dsv4_b:1")] + engine_start("12-06 22:10:00", other)
              + loaded(other, "12-06 22:10:00") + warmed(other, "12-06 22:10:00"))
    d = diagnosed(text(first + second))
    assert (d.verdict, d.exit_code) == ("inconclusive", 2), d.summary
    assert "loads 2 models" in d.summary, d.summary
    # One model, loaded once: its start is the server's.
    d = diagnosed(text([triton("loading: dsv4_b:1")] + engine_start("12-06 22:10:00", other)
                       + loaded(other, "12-06 22:10:00") + warmed(other, "12-06 22:10:00")))
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary


# --- columns after the message ---------------------------------------------------------


def aws_text(lines: list[str], stream: str = "AllTraffic/i-0a1b2c3d4e5f60718") -> list[str]:
    """``aws logs filter-log-events --output text``: EVENTS, the event's id,
    its ingestion time, the stream, the message, its time (milliseconds)."""
    return [f"EVENTS\t{37930000000000000000000000000000 + i}\t{1796594581000 + i}\t{stream}\t{line}"
            f"\t{1796594580000 + i}" for i, line in enumerate(lines)]


def message_then_stream(lines: list[str], stream: str = "AllTraffic/i-0a1b2c3d4e5f60718") -> list[str]:
    """``--query 'events[].[message,logStreamName]' --output text``."""
    return [f"{line}\t{stream}" for line in lines]


def markdown_rows(lines: list[str]) -> list[str]:
    """A Logs Insights table copied as Markdown: | time | message | stream |."""
    return (["| @timestamp | @message | @logStream |", "| --- | --- | --- |"]
            + [f"| 2026-12-06 22:03:00.{i:03d} | {line.replace('|', chr(92) + '|')} | AllTraffic/i-0a1b |"
               for i, line in enumerate(lines)])


def gcloud_value(lines: list[str]) -> list[str]:
    """``gcloud logging read --format='value(timestamp,textPayload,labels.replica_id)'``."""
    return [f"2026-12-06T22:03:00.{i:06d}Z\t{line}\tdsv4-deploy-7c9d8f6b5-x2k4q" for i, line in enumerate(lines)]


EXPORTS = [aws_text, message_then_stream, markdown_rows, gcloud_value]


@pytest.mark.parametrize("export", EXPORTS, ids=lambda f: f.__name__)
def test_a_50615_crash_exported_with_columns_after_the_message_is_the_crash(export):
    """The message is one column of several: the frame's function read
    ``forward_mqa\\t1796...``, so the #50615 crash went unseen and the
    client's traceback at exit was judged instead (exit 3 or 2)."""
    d = diagnosed(text(export(crashed_tp1())))
    assert (d.verdict, d.exit_code) == ("crash-50615", 1), d.summary


@pytest.mark.parametrize("export", EXPORTS, ids=lambda f: f.__name__)
def test_a_protected_start_exported_with_columns_after_the_message_stays_protected(export):
    """The columns after the message (times, one stream's name) name one
    source: a protected server still reads protected."""
    d = diagnosed(text(export(protected_tp1("12-06 22:00:00"))))
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary


def test_two_streams_named_after_the_message_are_two_sources():
    """A stream's name in the column after the message names a source as
    one before it does: two instances, one protected, are not one server."""
    a = message_then_stream(protected_tp1("12-06 22:00:00"), "AllTraffic/i-0a")
    b = message_then_stream(api_start("12-06 22:00:01") + engine_start("12-06 22:00:01")
                            + loaded(ENGINE, "12-06 22:00:01", patched=False)
                            + warmed(ENGINE, "12-06 22:00:01"), "AllTraffic/i-0b")
    d = diagnosed(text([line for pair in zip(a, b) for line in pair] + a[len(b):] + b[len(a):]))
    assert d.exit_code == 2, d.summary


def test_another_program_s_tab_separated_lines_are_left_whole():
    """Only vLLM's own lines (or a message column after a wrapper ending in
    a tab) are cut at a tab: a Go service's tab-separated log lines around
    a protected start do not become sources or lose their words."""
    go = [f"2026-12-06T22:00:0{i}.000Z\tINFO\tepp/scheduler.go:{100 + i}\tpicked endpoint\t"
          f'{{"pod": "vllm-{i}", "score": 0.{i}}}' for i in range(9)]
    d = diagnosed(text(go[:4] + protected_tp1("12-06 22:00:00") + go[4:]))
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary


# --- replicas with the same process ids --------------------------------------------------


def test_a_second_replica_s_lines_that_repeat_a_process_s_once_a_life_lines_are_two_servers():
    """Two replicas of one image (the same pids, nothing naming either),
    the second starting while the first loads: the first's workers' lines
    land in the second's start. A process that starts to load the model
    twice in one start is two processes (it read protected, exit 0)."""
    a, b = "12-06 22:00:00", "12-06 22:00:25"
    worker = "Worker_TP0 pid=160"
    lines = (api_start(a) + engine_start(a) + [logged(worker, a, "parallel_state.py:1978",
                                                      "rank 0 in world size 1 is assigned as DP rank 0")]
             + api_start(b) + engine_start(b)
             + [logged(worker, "12-06 22:00:40", "gpu_model_runner.py:5309",
                       "Starting to load model deepseek-ai/DeepSeek-V4-Flash...")]
             + loaded(worker, "12-06 22:01:05", patched=True) + warmed(worker, "12-06 22:02:50"))
    d = diagnosed(text(lines))
    assert (d.verdict, d.exit_code) == ("inconclusive", 2), d.summary
    assert "a process logs a second time" in d.summary, d.summary


@pytest.mark.parametrize("labels", [
    lambda r: {"labels": {"deployed_model_id": "1234567890123456789", "replica_id": f"dsv4-{r}"}},
    lambda r: {"resource": {"type": "gce_instance", "labels": {"instance_id": f"71234567890123{r}",
                                                              "zone": "us-central1-a"}}},
    lambda r: {"host": f"gpu-node-{r}"},
    lambda r: {"labels": {"compute.googleapis.com/resource_name": f"vllm-mig-{r}"}},
], ids=["vertex-replica", "gce-instance", "host", "any-label"])
def test_records_naming_their_replica_or_host_in_labels_are_sources(labels):
    """Cloud Logging names a Vertex replica or a VM in the record's labels
    (``labels.replica_id``, ``resource.labels.instance_id``, any other
    label), a shipper the host: two replicas with the same pids are two sources, not one server
    read protected."""
    a = protected_tp1("12-06 22:00:00")
    # The second replica starts while the first loads (after its rank and
    # "Starting to load model"), and is cut before it loads, without the
    # plugin: read as one server, the first's plugin and warmup lines land
    # in the second's start.
    loading = len(api_start("12-06 22:00:00") + engine_start("12-06 22:00:00")) + 2
    b = api_start("12-06 22:00:01") + engine_start("12-06 22:00:01") + loaded(ENGINE, "12-06 22:01:00", patched=False)
    order = [("0", line) for line in a[:loading]] + [("1", line) for line in b[:5]] + [
        ("0", line) for line in a[loading:]] + [("1", b[5])]
    records = [dict(labels(r), textPayload=line, severity="INFO") for r, line in order]
    d = diagnosed(json.dumps(records, indent=1) + "\n")
    assert d.exit_code == 2, d.summary
    # One replica's records alone: protected.
    d = diagnosed(json.dumps([dict(labels("0"), textPayload=line) for line in a]) + "\n")
    assert (d.verdict, d.exit_code) == ("protected", 0), d.summary
