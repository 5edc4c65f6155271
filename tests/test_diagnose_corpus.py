"""``diagnose`` on logs as operators have them: the shapes of public reports
(``tests/logs``, ``SOURCES.md``), and the real #50615 runs of
``benchmarks/results`` wrapped the way log pipelines deliver them
(timestamps, journald, docker compose, ``[rank0]:``, quotes, JSON lines, Ray
workers and drivers, a cut-off header), restarted, stopped, piped."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import subprocess
from pathlib import Path

import pytest

from dspark_attn_plugin import diagnose

from test_diagnose import CLI, RESULTS, read_repeated

LOGS = Path(__file__).resolve().parent / "logs"

# Every log of the corpus and its exit status (SOURCES.md says why).
CORPUS = {
    "01-ray-driver-raytaskerror.log": 3,
    "02-offline-old-format-ray.log": 2,  # a model path alone proves no other model
    "03-ray-worker-cpp-terminate.log": 3,  # a worker died of SIGABRT: a crash
    "04-ray-multinode-nccl.log": 2,
    "05-ray-worker-c10-error.log": 3,  # "terminate called after throwing": the worker aborted
    "06-traceback-without-header.log": 2,  # only the report of a failure elsewhere
    "07-journald-apiserver-traceback.log": 2,  # only the API server's report
    "08-journald-qwen-startup.log": 0,
    "09-enginecore-hit-an-exception.log": 3,
    "10-flashinfer-assertion.log": 3,
    "11-workerproc-initialization-failed.log": 2,  # only the report, cause not in the log
    "12-failed-core-procs.log": 2,  # only the API server's report
    "13-cli-traceback-qwen3-vl.log": 3,
    "14-sigsegv-c-frames.log": 3,
    "15-crash-on-a-request.log": 3,
    "16-healthy-start-without-the-plugin.log": 2,
    "17-old-format-ray-workers.log": 2,  # a model path alone proves no other model
    "18-rank0-prefix.log": 3,
    "19-rank0-cut-traceback.log": 3,
    "20-vllmworker-rank-prefix.log": 3,
}

CRASH, PROTECTED = "run-C-standin-stock.log", "run-D-standin-plugin.log"


def text_of(name: str) -> str:
    return (RESULTS / name).read_text(encoding="utf-8")


def diagnosed(text: str) -> diagnose.Diagnosis:
    return diagnose.diagnose(diagnose.read_paths(["-"], stdin=io.BytesIO(text.encode())))


def _clock(i: int) -> str:
    """A time of day that goes forward a second a line, as a log's does."""
    return f"{19 + i // 3600 % 5:02d}:{i // 60 % 60:02d}:{i % 60:02d}"


def each_line(text: str, wrap) -> str:
    return "".join(wrap(i, line) + "\n" for i, line in enumerate(text.splitlines()))


# --- the corpus -------------------------------------------------------------------


def test_every_corpus_log_is_listed_with_its_source():
    assert sorted(p.name for p in LOGS.glob("*.log")) == sorted(CORPUS)
    sources = (LOGS / "SOURCES.md").read_text(encoding="utf-8")
    for name in CORPUS:
        assert f"| {name} |" in sources, name


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_log(name):
    proc = subprocess.run([CLI, "diagnose", "--json", str(LOGS / name)], capture_output=True,
                          timeout=120)
    report = json.loads(proc.stdout)
    assert proc.returncode == report["exit_code"] == CORPUS[name], report["summary"]
    assert proc.stderr == b""


def test_ray_worker_prefixes_are_processes_per_node():
    d = diagnosed((LOGS / "04-ray-multinode-nccl.log").read_text())
    labels = sorted(p["process"] for p in d.processes)
    assert labels == ["RayWorkerWrapper pid=584", "RayWorkerWrapper pid=586",
                      "RayWorkerWrapper pid=650", "RayWorkerWrapper pid=652"]


def test_a_model_that_is_not_deepseek_v4_is_not_applicable():
    d = diagnosed((LOGS / "08-journald-qwen-startup.log").read_text())
    assert (d.verdict, d.exit_code) == ("not-applicable", 0)
    assert "Qwen2ForCausalLM" in d.summary and "cannot happen" in d.summary


# --- a real #50615 crash and a protected start, wrapped --------------------------------

WRAPPERS = {
    "kubectl --timestamps": lambda i, l: f"2026-08-18T{_clock(i)}.{i:09d}Z {l}",
    "journalctl -o short-iso": lambda i, l: f"2026-08-18T{_clock(i)}+0200 gpu-7 vllm[67097]: {l}",
    "journalctl short": lambda i, l: f"Aug 18 {_clock(i)} gpu-7 vllm[67097]: {l}",
    "docker compose logs": lambda i, l: f"vllm-1  | {l}",
    "compose and timestamps": lambda i, l: f"vllm-1  | 2026-08-18T{_clock(i)}.5Z {l}",
    "[rank0]:": lambda i, l: f"[rank0]: {l}",
    "quoted": lambda i, l: f'"{l}"',
}


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
@pytest.mark.parametrize("name, expected", [(CRASH, 1), (PROTECTED, 0)])
def test_wrapped_logs_keep_their_verdict(wrapper, name, expected):
    d = diagnosed(each_line(text_of(name), WRAPPERS[wrapper]))
    assert d.exit_code == expected, d.summary
    if expected == 1:
        assert d.crash["statement"] == "assert self.topk_indices_buffer is not None"
        assert d.crash["processes"][0].startswith("EngineCore pid=")


def _json_records(text: str, docker: bool) -> str:
    """One JSON object a line: docker's json-file driver (the raw line in
    ``log``), or a JSON formatter (the message without vLLM's prefix and
    head, a traceback in ``exc_info``)."""
    if docker:
        return "".join(json.dumps({"log": l + "\n", "stream": "stderr",
                                   "time": "2026-08-18T19:04:31Z"}) + "\n"
                       for l in text.splitlines())
    out, trace = [], []
    for line in text.splitlines():
        line = re.sub(r"^\(\w+ pid=\d+\) ", "", line)
        line = re.sub(r"^(INFO|WARNING|ERROR|DEBUG) \d\d-\d\d [\d:]+ \[[^\]]+\] ", "", line)
        if line.startswith("Traceback") or trace:
            trace.append(line)
            if re.match(r"^[A-Za-z_][\w.]*(: .*)?$", line) and not line.startswith("Traceback"):
                out.append({"message": "EngineCore failed to start.", "levelname": "ERROR",
                            "exc_info": "\n".join(trace)})
                trace = []
            continue
        out.append({"message": line, "levelname": "INFO"})
    return "".join(json.dumps(r) + "\n" for r in out)


@pytest.mark.parametrize("docker", [True, False], ids=["docker-json-file", "json-formatter"])
@pytest.mark.parametrize("name, expected", [(CRASH, 1), (PROTECTED, 0)])
def test_json_lines(docker, name, expected):
    assert diagnosed(_json_records(text_of(name), docker)).exit_code == expected


def test_ray_workers_carry_the_crash():
    text = re.sub(r"^\(EngineCore pid=(\d+)\) ", r"(RayWorkerWrapper pid=\1, ip=10.1.0.7) ",
                  text_of(CRASH), flags=re.M)
    d = diagnosed(text)
    assert d.exit_code == 1
    assert d.crash["processes"] == ["RayWorkerWrapper pid=3549"]


def test_the_ray_driver_s_raytaskerror_carries_the_remote_traceback():
    lines = text_of(CRASH).splitlines()
    start = next(i for i, l in enumerate(lines) if l.endswith("Traceback (most recent call last):"))
    prefix = lines[start][: -len("Traceback (most recent call last):")]
    lines[start] = (prefix + "ray.exceptions.RayTaskError(AssertionError): ray::RayWorkerWrapper"
                    ".execute_method() (pid=67451, ip=10.1.0.7, actor_id=ab12)")
    d = diagnosed("\n".join(lines) + "\n")
    assert d.exit_code == 1


def test_a_traceback_without_its_header_still_counts():
    text = "".join(l for l in text_of(CRASH).splitlines(keepends=True)
                   if not l.rstrip().endswith("Traceback (most recent call last):"))
    assert diagnosed(text).exit_code == 1


# --- starts, stops ------------------------------------------------------------------------


def test_a_crash_then_a_protected_restart_is_judged_by_the_restart():
    text = text_of(CRASH) + "vllm-1 exited with code 1 (restarting)\n" + text_of(PROTECTED)
    d = diagnosed(text)
    assert (d.exit_code, d.starts) == (0, 2)
    assert [e["verdict"] for e in d.earlier] == ["crash-50615"]
    assert "last of 2 starts" in d.summary
    assert "Earlier starts" in diagnose.render(d)


def test_restarts_without_a_marker_are_found_by_the_new_start():
    d = diagnosed(text_of(PROTECTED) + text_of(CRASH))
    assert (d.exit_code, d.starts) == (1, 2)
    assert [e["exit_code"] for e in d.earlier] == [0]


def test_an_engine_error_after_a_stop_is_a_consequence():
    text = text_of(PROTECTED) + (
        "(APIServer pid=3517) INFO 11-30 06:40:00 [launcher.py:110] Shutting down FastAPI HTTP server.\n"
        "(APIServer pid=3517) ERROR 11-30 06:40:01 [async_llm.py:480] AsyncLLM output_handler failed.\n"
        "(APIServer pid=3517) Traceback (most recent call last):\n"
        '(APIServer pid=3517)   File "/v/vllm/v1/engine/async_llm.py", line 440, in output_handler\n'
        "(APIServer pid=3517)     outputs = await engine_core.get_output_async()\n"
        "(APIServer pid=3517) vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.\n"
    )
    d = diagnosed(text)
    assert d.exit_code == 0, d.summary
    assert "stopped" in d.summary


def test_an_engine_error_before_any_stop_is_a_crash():
    lines = text_of(PROTECTED).splitlines(keepends=True)
    stop = next(i for i, l in enumerate(lines) if "received signal" in l)
    error = [
        "(APIServer pid=790) Traceback (most recent call last):\n",
        '(APIServer pid=790)   File "/v/vllm/v1/engine/async_llm.py", line 440, in output_handler\n',
        "(APIServer pid=790) vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.\n",
    ]
    assert diagnosed("".join(lines[:stop] + error + lines[stop:])).exit_code == 3
    assert diagnosed("".join(lines[:stop + 1] + error + lines[stop + 1:])).exit_code == 0


# --- memory, pipes, terminals -----------------------------------------------------------------


def test_memory_stays_bounded_on_a_log_of_crashes(tmp_path):
    log, peak = read_repeated(tmp_path, text_of(CRASH).encode(), 8_000_000)
    assert log.runs > 20
    assert peak < 2 * 1024 * 1024, peak


def test_a_closed_pipe_keeps_the_verdict_s_exit_status():
    proc = subprocess.Popen([CLI, "diagnose", str(RESULTS / CRASH)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # as `| head -0` does, before anything is written
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert b"BrokenPipe" not in err and b"Traceback" not in err


def test_no_file_on_a_terminal_prints_the_usage():
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run([CLI, "diagnose"], stdin=follower, capture_output=True, timeout=60)
    finally:
        os.close(leader)
        os.close(follower)
    assert proc.returncode == 2
    assert b"usage: dspark-attn-plugin diagnose" in proc.stderr


def test_the_remedy_says_how_to_install_the_plugin_today():
    d = diagnosed(text_of(CRASH))
    assert "pip install dspark_attn_plugin-" in d.remedy and "make wheel" in d.remedy


# --- each condition of the #50615 crash ------------------------------------------------


@pytest.mark.parametrize(
    "old, new, expected",
    [
        ("] AssertionError\n", "] ValueError\n", 3),  # another exception
        (", in forward_mqa\n", ", in forward_mqa_v2\n", 3),  # another function
        ("deepseek_v4/nvidia/flashmla.py", "deepseek_v4/nvidia/flashmla_sparse.py", 3),  # another file
        ("assert self.topk_indices_buffer is not None", "assert swa_metadata is not None", 3),  # another statement
        (", in profile_run\n", ", in execute_model\n", 2),  # not under profile_run
    ],
    ids=["exception", "function", "file", "statement", "profile-run"],
)
def test_each_condition_of_the_50615_crash_is_needed(old, new, expected):
    """Without each condition it is not the crash (exit 1); the assertion
    itself outside profile_run is still no other crash (exit 2)."""
    text = text_of(CRASH)
    assert diagnosed(text).exit_code == 1
    changed = text.replace(old, new).replace(old.replace("] ", ""), new.replace("] ", ""))
    assert changed != text
    assert diagnosed(changed).exit_code == expected


def test_tracebacks_kept_per_process_are_bounded():
    one = ("Traceback (most recent call last):\n"
           '  File "/v/x.py", line 1, in f\n'
           "ValueError: again\n")
    log = diagnose.read_paths(["-"], stdin=io.BytesIO((one * 5000).encode()))
    [proc] = log.processes.values()
    assert proc.traceback_count == 5000 and len(proc.tracebacks) <= 8


def test_a_ray_task_error_is_read_as_the_exception_it_carries():
    d = diagnosed((LOGS / "01-ray-driver-raytaskerror.log").read_text())
    assert d.exit_code == 3
    assert d.crash["exception"] == "ModuleNotFoundError"
