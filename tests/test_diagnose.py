"""``dspark-attn-plugin diagnose`` on the real server logs of the H200 runs
(``benchmarks/results/``), and on edge cases made by transforming them."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from dspark_attn_plugin import diagnose

ROOT = Path(__file__).resolve().parents[1]
ALL_RESULTS = ROOT / "benchmarks" / "results"
RESULTS = ALL_RESULTS / "engine-e2e-2026-11-30"
CLI = shutil.which("dspark-attn-plugin", path=os.path.dirname(sys.executable))

# Every committed log and what diagnose must say of it.
EXPECTED = {
    # the affected stand-in, stock or with the plugin off: the #50615 crash
    "engine-e2e-2026-11-30/run-A-standin-stock.log": 1,
    "engine-e2e-2026-11-30/run-C-standin-stock.log": 1,
    "engine-e2e-2026-11-30/run-C-standin-plugin-off.log": 1,
    # the stand-in with the plugin: patched, rescued (A was stopped once past
    # profile_run, before it became healthy)
    "engine-e2e-2026-11-30/run-0-standin-plugin.log": 0,
    "engine-e2e-2026-11-30/run-A-standin-plugin.log": 0,
    "engine-e2e-2026-11-30/run-C-standin-plugin.log": 0,
    "engine-e2e-2026-11-30/run-D-standin-plugin.log": 0,
    # released 0.26.0 with the plugin: not affected
    "engine-e2e-2026-11-30/run-B-released-plugin.log": 0,
    "engine-e2e-2026-11-30/run-C-released-plugin.log": 0,
    # cost servers (no speculative decoding): with the plugin, patched ...
    "engine-e2e-2026-11-30/run-C-cost-plugin-0.log": 0,
    "engine-e2e-2026-11-30/run-C-cost-plugin-1.log": 0,
    "engine-e2e-2026-11-30/run-D-cost-plugin-0.log": 0,
    "engine-e2e-2026-11-30/run-D-cost-plugin-1.log": 0,
    "engine-e2e-2026-11-30/run-D-cost-plugin-2.log": 0,
    # ... without it, started but not shown protected
    "engine-e2e-2026-11-30/run-C-cost-stock-0.log": 2,
    "engine-e2e-2026-11-30/run-C-cost-stock-1.log": 2,
    "engine-e2e-2026-11-30/run-D-cost-stock-0.log": 2,
    "engine-e2e-2026-11-30/run-D-cost-stock-1.log": 2,
    "engine-e2e-2026-11-30/run-D-cost-stock-2.log": 2,
    # a DeepGEMM RuntimeError in the first run's stock cost server
    "engine-e2e-2026-11-30/run-B-cost-stock-0.log": 3,
    # 2026-12-01, CUDA graphs on: the stand-in crashes without the plugin and
    # serves with it; three cost servers started at once on one GPU: the
    # plugin's and one stock server came up, the other stock server died of
    # vLLM's own "No available memory for the cache blocks" (ValueError)
    "engine-e2e-2026-12-01/run-E-standin-stock.log": 1,
    "engine-e2e-2026-12-01/run-E-standin-plugin.log": 0,
    "engine-e2e-2026-12-01/run-E-paired-plugin.log": 0,
    "engine-e2e-2026-12-01/run-E-paired-stock-b.log": 2,
    "engine-e2e-2026-12-01/run-E-paired-stock.log": 3,
    # tensor parallel 2 on two H200s: both workers raise the AssertionError
    "engine-e2e-2026-12-01/run-F-tp2-standin-stock.log": 1,
    "engine-e2e-2026-12-01/run-F-tp2-standin-plugin-off.log": 1,
    # the evidence run, stopped by its deadline: 0.26.0 as released served
    # (no plugin: not shown protected), the stand-in with the plugin served
    # patched, the third server was stopped while starting (not a crash)
    "engine-e2e-2026-12-01/run-G-evidence-dspark-released.log": 2,
    "engine-e2e-2026-12-01/run-G-evidence-dspark-standin-plugin.log": 0,
    "engine-e2e-2026-12-01/run-G-evidence-dspark-released-b.log": 2,
    # Run H: no plugin line in the stock and released servers (not shown
    # protected), the plugin patched in the two with it.
    "engine-e2e-2026-12-01/run-H-evidence-dspark-released.log": 2,
    "engine-e2e-2026-12-01/run-H-evidence-dspark-standin-plugin.log": 0,
    "engine-e2e-2026-12-01/run-H-evidence-dspark-released-b.log": 2,
    "engine-e2e-2026-12-01/run-H-evidence-target-stock.log": 2,
    "engine-e2e-2026-12-01/run-H-evidence-target-plugin.log": 0,
    "engine-e2e-2026-12-01/run-H-evidence-target-stock-b.log": 2,
    # Run I (2026-12-02, the gpu-bound model): both released servers without
    # the plugin (not shown protected), the stand-in with it patched and
    # rescued; all three stopped by the run's deadline.
    "engine-e2e-2026-12-02/run-I-dspark-released.log": 2,
    "engine-e2e-2026-12-02/run-I-dspark-released-b.log": 2,
    "engine-e2e-2026-12-02/run-I-dspark-standin-plugin.log": 0,
    # Run J (the same model, the three servers started at once): the same
    # verdicts, all three stopped at the run's end.
    "engine-e2e-2026-12-02/run-J-dspark-released.log": 2,
    "engine-e2e-2026-12-02/run-J-dspark-released-b.log": 2,
    "engine-e2e-2026-12-02/run-J-dspark-standin-plugin.log": 0,
    # Run K (--max-num-batched-tokens 640): every engine core died of vLLM's
    # own RuntimeError in FlashMLA's sparse prefill, the stand-in with the
    # plugin too (patched and rescued first): a different crash in each.
    "engine-e2e-2026-12-02/run-K-dspark-released.log": 3,
    "engine-e2e-2026-12-02/run-K-dspark-released-b.log": 3,
    "engine-e2e-2026-12-02/run-K-dspark-standin-plugin.log": 3,
    # Run L (warm kernel caches): as run J.
    "engine-e2e-2026-12-02/run-L-dspark-released.log": 2,
    "engine-e2e-2026-12-02/run-L-dspark-released-b.log": 2,
    "engine-e2e-2026-12-02/run-L-dspark-standin-plugin.log": 0,
    # Runs M (DSpark) and N (target, no speculative decoding), 2026-12-03:
    # the servers without the plugin are not shown protected; the stand-in
    # with it is, rescued in M (the drafter's SWA-only layer) and not in N
    # (no drafter: every layer has its buffer).
    "engine-e2e-2026-12-03/run-M-dspark-released.log": 2,
    "engine-e2e-2026-12-03/run-M-dspark-released-b.log": 2,
    "engine-e2e-2026-12-03/run-M-dspark-standin-plugin.log": 0,
    "engine-e2e-2026-12-03/run-N-target-stock.log": 2,
    "engine-e2e-2026-12-03/run-N-target-stock-b.log": 2,
    "engine-e2e-2026-12-03/run-N-target-plugin.log": 0,
    # Run P (DSpark, 4-token prompts): as in run M.
    "engine-e2e-2026-12-03/run-P-dspark-released.log": 2,
    "engine-e2e-2026-12-03/run-P-dspark-released-b.log": 2,
    "engine-e2e-2026-12-03/run-P-dspark-standin-plugin.log": 0,
    # Runs Q (target) and R (DSpark), 4-token prompts: as N and M.
    "engine-e2e-2026-12-03/run-Q-target-stock.log": 2,
    "engine-e2e-2026-12-03/run-Q-target-stock-b.log": 2,
    "engine-e2e-2026-12-03/run-Q-target-plugin.log": 0,
    "engine-e2e-2026-12-03/run-R-dspark-released.log": 2,
    "engine-e2e-2026-12-03/run-R-dspark-released-b.log": 2,
    "engine-e2e-2026-12-03/run-R-dspark-standin-plugin.log": 0,
    # Run S: the harness stopped servers still compiling at its start limit
    # (DeepGEMM's nvcc interrupted): a different crash, not #50615.
    "engine-e2e-2026-12-03/run-S-target-stock.log.gz": 3,
    "engine-e2e-2026-12-03/run-S-target-stock-b.log.gz": 3,
    "engine-e2e-2026-12-03/run-S-target-plugin.log.gz": 3,
    "engine-e2e-2026-12-03/run-T-target-stock.log.gz": 2,
    "engine-e2e-2026-12-03/run-T-target-stock-b.log.gz": 2,
    "engine-e2e-2026-12-03/run-T-target-plugin.log.gz": 0,
    "engine-e2e-2026-12-03/run-U-target-stock.log.gz": 2,
    "engine-e2e-2026-12-03/run-U-target-stock-b.log.gz": 2,
    "engine-e2e-2026-12-03/run-U-target-plugin.log.gz": 0,
    "engine-e2e-2026-12-04/run-V-target-stock.log.gz": 2,
    "engine-e2e-2026-12-04/run-V-target-stock-b.log.gz": 2,
    "engine-e2e-2026-12-04/run-V-target-plugin.log.gz": 0,
}


def run(*args, stdin: bytes | None = None):
    return subprocess.run([CLI, "diagnose", *map(str, args)], input=stdin,
                          capture_output=True, timeout=120)


def lines_of(name: str) -> list[str]:
    return (RESULTS / name).read_text(encoding="utf-8").splitlines(keepends=True)


def diagnosed(text: str) -> diagnose.Diagnosis:
    import io

    return diagnose.diagnose(diagnose.read_paths(["-"], stdin=io.BytesIO(text.encode())))


def test_every_committed_log_is_listed():
    found = [str(p.relative_to(ALL_RESULTS)) for pattern in ("*/*.log", "*/*.log.gz")
             for p in ALL_RESULTS.glob(pattern)]
    assert sorted(found) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_committed_logs(name):
    proc = run(ALL_RESULTS / name, "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == report["exit_code"] == EXPECTED[name], report["summary"]
    assert proc.stderr == b""


def test_stock_crash_names_the_process_file_line_and_remedy():
    d = diagnosed("".join(lines_of("run-C-standin-stock.log")))
    assert d.verdict == "crash-50615"
    [process] = d.crash["processes"]
    assert process.startswith("EngineCore pid=")
    assert d.crash["file"].endswith("deepseek_v4/nvidia/flashmla.py")
    assert d.crash["statement"] == "assert self.topk_indices_buffer is not None"
    assert d.crash["under_profile_run"]
    assert d.remedy.startswith("Install dspark-attn-plugin into the image")


def test_plugin_off_remedy_says_remove_the_switch():
    d = diagnosed("".join(lines_of("run-C-standin-plugin-off.log")))
    assert d.exit_code == 1 and "DSPARK_ATTN_PLUGIN=off" in d.remedy
    # The API server's first line had no prefix: it is still its line.
    api = next(p for p in d.processes if p["process"].startswith("APIServer"))
    assert [x["state"] for x in api["plugin"]] == ["disabled"]


def test_vllm_plugins_allowlist_remedy():
    lines = lines_of("run-C-standin-stock.log")
    debug = [
        "DEBUG 11-30 05:40:01 [__init__.py:52] Available plugins for group vllm.general_plugins:\n",
        "DEBUG 11-30 05:40:01 [__init__.py:54] - dspark_attn_plugin -> dspark_attn_plugin:register\n",
        "DEBUG 11-30 05:40:01 [__init__.py:54] - other -> other:register\n",
        "DEBUG 11-30 05:40:01 [__init__.py:66] Loading plugin other\n",
    ]
    d = diagnosed("".join(debug + lines))
    assert d.exit_code == 1 and "add dspark_attn_plugin to VLLM_PLUGINS" in d.remedy


# --- transformations of real logs ----------------------------------------------


def test_cut_before_the_warmup_is_inconclusive():
    lines = lines_of("run-C-standin-stock.log")
    cut = next(i for i, l in enumerate(lines) if "Model loading took" in l)
    assert diagnosed("".join(lines[:cut])).exit_code == 2
    assert diagnosed("".join(lines[: cut + 1])).exit_code == 2  # loaded, warmup not over
    plugin = lines_of("run-D-standin-plugin.log")
    cut = next(i for i, l in enumerate(plugin) if "warmed up without" in l)
    assert diagnosed("".join(plugin[:cut])).exit_code == 2


def test_two_logs_joined_keep_the_crash():
    crash, ok = "run-C-standin-stock.log", "run-D-standin-plugin.log"
    assert diagnosed("".join(lines_of(ok) + lines_of(crash))).exit_code == 1
    proc = run(RESULTS / ok, RESULTS / crash)
    assert proc.returncode == 1


def test_colours_and_crlf_do_not_change_the_verdict():
    for name in ("run-C-standin-stock.log", "run-D-standin-plugin.log", "run-C-released-plugin.log"):
        text = "".join(lines_of(name))
        coloured = re.sub(r"^\((\w+ pid=\d+)\)", "\x1b[36m(\\1)\x1b[0m", text, flags=re.M)
        coloured = re.sub(r"\b(INFO|WARNING|ERROR)\b", "\x1b[32m\\1\x1b[0m", coloured)
        assert coloured != text
        crlf = text.replace("\n", "\r\n")
        expected = EXPECTED[f"engine-e2e-2026-11-30/{name}"]
        assert diagnosed(coloured).exit_code == expected, name
        assert diagnosed(crlf).exit_code == expected, name


def test_an_in_process_llm_log_without_prefixes():
    for name in ("run-C-standin-stock.log", "run-D-standin-plugin.log"):
        text = re.sub(r"^\(\w+ pid=\d+\) ", "", "".join(lines_of(name)), flags=re.M)
        d = diagnosed(text)
        assert d.exit_code == EXPECTED[f"engine-e2e-2026-11-30/{name}"]
        assert [p["process"] for p in d.processes] == ["(no prefix)"]


def as_tensor_parallel(name: str, workers: int = 2) -> str:
    """A real TP 1 log rewritten the way vLLM writes TP > 1: the engine core's
    model lines move to workers, each of which first logs without a prefix
    (the plugin's line among them), then as ``Worker``, then as
    ``Worker_TP<n>``; their error lines carry the executor's log head and
    end in ``\\r``."""
    lines = lines_of(name)
    engine = re.compile(r"^\(EngineCore pid=(\d+)\) ")
    out: list[str] = []
    started = False
    for line in lines:
        m = engine.match(line)
        body = line[m.end():] if m else None
        if m and ("patched" in body or "disabled" in body) and not started:
            out.append(line)  # the engine core's own plugin line
            for _ in range(workers):
                out.append(body)  # each worker's, before its prefix
            for w in range(workers):
                out.append(f"(Worker pid={9000 + w}) INFO 11-30 23:20:00 [parallel_state.py:1] rank {w}\n")
            started = True
            continue
        if m and started and ("Model loading" in body or "warmed up" in body
                              or "Available KV" in body or body.startswith(("ERROR", " ", "Traceback", "Assertion"))):
            text = body.rstrip("\n")
            for w in range(workers):
                if not text.startswith(("ERROR", "INFO", "WARNING")):
                    text_w = f"ERROR 11-30 23:24:14 [multiproc_executor.py:1007] {text}"
                else:
                    text_w = text
                out.append(f"(Worker_TP{w} pid={9000 + w}) {text_w}\r\n")
            continue
        out.append(line)
    return "".join(out)


@pytest.mark.parametrize(
    "name", ["run-C-standin-stock.log", "run-C-standin-plugin-off.log", "run-D-standin-plugin.log"]
)
def test_tensor_parallel_workers_are_judged_per_process(name):
    d = diagnosed(as_tensor_parallel(name))
    assert d.exit_code == EXPECTED[f"engine-e2e-2026-11-30/{name}"], d.summary
    workers = [p for p in d.processes if p["process"].startswith("Worker_TP")]
    assert [p["process"] for p in workers] == ["Worker_TP0 pid=9000", "Worker_TP1 pid=9001"]
    for w in workers:
        assert w["runs_model"]
        # its own unprefixed plugin line, given back to it (stock has none)
        assert len(w["plugin"]) == (0 if name == "run-C-standin-stock.log" else 1)
        if EXPECTED[f"engine-e2e-2026-11-30/{name}"] == 1:
            assert w["crash_50615"] is not None
    if EXPECTED[f"engine-e2e-2026-11-30/{name}"] == 1:
        assert {"Worker_TP0 pid=9000", "Worker_TP1 pid=9001"} <= set(d.crash["processes"])


def test_a_worker_without_the_plugin_is_not_protected():
    text = as_tensor_parallel("run-D-standin-plugin.log")
    # The second worker's own plugin line is gone: it ran without the plugin.
    first = text.index("dspark-attn-plugin patched")
    second_unprefixed = text.index("\nINFO", first)
    line_end = text.index("\n", second_unprefixed + 1)
    third = text.index("dspark-attn-plugin patched", line_end)
    start = text.rindex("\n", 0, third) + 1
    end = text.index("\n", third) + 1
    d = diagnosed(text[:start] + text[end:])
    assert d.exit_code == 2
    assert "Worker_TP1 pid=9001" in d.summary


# --- bad input -------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: p / "missing.log", "cannot read"),
        (lambda p: p, "is a folder"),
        (lambda p: _write(p / "bin.log", b"vLLM\x00\x01\x02"), "binary data"),
        (lambda p: _write(p / "cut.log.gz", __import__("gzip").compress(b"INFO x\n" * 999)[:6]),
         "cannot read it"),
    ],
    ids=["missing", "folder", "binary", "truncated-gzip"],
)
def test_bad_input_is_one_line_and_exit_4(tmp_path, make, message):
    proc = run(make(tmp_path))
    err = proc.stderr.decode()
    assert proc.returncode == 4
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert proc.stdout == b""


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    "data", [b"", b"hello\nthis is not a server log\n"], ids=["empty", "not-vllm"]
)
def test_empty_or_foreign_input_is_inconclusive(data):
    proc = run("-", stdin=data)
    assert proc.returncode == 2 and b"Nothing conclusive" in proc.stdout


def test_standard_input_is_read_without_an_argument():
    proc = run(stdin=(RESULTS / "run-C-standin-stock.log").read_bytes())
    assert proc.returncode == 1
    assert b"Remedy: Install dspark-attn-plugin" in proc.stdout


def read_repeated(folder: Path, block: bytes, size: int):
    """``block`` repeated to ``size`` bytes in a file, read by diagnose:
    (the log, the peak of Python memory while reading it)."""
    big = folder / "big.log"
    with big.open("wb") as f:
        for _ in range(size // len(block) + 1):
            f.write(block)
    tracemalloc.start()
    try:
        log = diagnose.read_paths([str(big)])
        return log, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_log(tmp_path):
    """A log of ~20 MB is read in well under 1 MB of Python memory."""
    block = (RESULTS / "run-D-cost-plugin-0.log").read_bytes()
    log, peak = read_repeated(tmp_path, block, 20 * 1024 * 1024)
    assert log.total_lines > 100_000
    assert peak < 1024 * 1024, peak


def test_help_lists_the_exit_codes():
    proc = subprocess.run([CLI, "diagnose", "--help"], capture_output=True, text=True)
    text = " ".join(proc.stdout.split())
    for code in range(5):
        assert f" {code} " in text or f"Exit status: {code}" in text


@pytest.mark.parametrize("case", ["standin-stock", "standin-plugin-off"])
def test_a_real_tensor_parallel_2_log_is_read_per_worker(case):
    """Two H200s, --tensor-parallel-size 2: the workers' lines interleave,
    some carry two prefixes and some none; each worker's own traceback and
    its own plugin line are found."""
    d = diagnosed((ALL_RESULTS / f"engine-e2e-2026-12-01/run-F-tp2-{case}.log").read_text())
    assert d.verdict == "crash-50615"
    model = [p for p in d.processes if p["runs_model"]]
    assert [p["process"].split()[0] for p in model] == ["Worker_TP0", "Worker_TP1"]
    assert sorted(d.crash["processes"]) == sorted(p["process"] for p in model)
    for p in model:
        assert p["crash_50615"]["statement"] == "assert self.topk_indices_buffer is not None"
        assert p["crash_50615"]["under_profile_run"]
    states = {p["process"].split()[0]: [x["state"] for x in p["plugin"]] for p in d.processes}
    if case == "standin-plugin-off":
        assert states == {"APIServer": ["disabled"], "EngineCore": ["disabled"],
                          "Worker_TP0": ["disabled"], "Worker_TP1": ["disabled"]}
        assert "DSPARK_ATTN_PLUGIN=off" in d.remedy
    else:
        assert all(s == [] for s in states.values())


def test_dangling_prefixes_do_not_grow_with_the_log():
    """A log full of lines with two prefixes and no line to give the first
    one to keeps a bounded queue."""
    from dspark_attn_plugin.log_reader import MAX_PENDING, LogReader

    reader = LogReader()
    for i in range(10 * MAX_PENDING):
        reader.feed(f"(Worker_TP1 pid=2) (Worker_TP0 pid=1) INFO 12-01 00:00:00 [x.py:1] line {i}\n")
    assert len(reader._dangling) == MAX_PENDING
    assert [p.label for p in reader.log.ordered()] == ["Worker_TP0 pid=1"]
