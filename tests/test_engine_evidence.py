"""The one-GPU evidence run (benchmarks/engine/evidence.py): its plumbing
against stand-in servers that answer like ``vllm serve`` (no GPU), and the
report fields it computes."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from engine import cpus, evidence, harness, metrics  # noqa: E402

FAKE_SERVER = r'''
import json, os, sys, time, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
port = int(sys.argv[sys.argv.index("--port") + 1])
print("fake affinity", ",".join(map(str, sorted(os.sched_getaffinity(0)))), flush=True)
with_plugin = any(p.endswith("/plugin") for p in os.environ.get("PYTHONPATH", "").split(os.pathsep))
differs = with_plugin and os.environ.get("FAKE_PLUGIN_DIFFERS") == "1"
print("(EngineCore pid=4242) INFO 12-01 00:00:00 [model_runner.py:1] Model loading took 0.5 GiB", flush=True)
print("(EngineCore pid=4242) INFO 12-01 00:00:00 [kv_cache_utils.py:1] GPU KV cache size: 1,000 tokens", flush=True)
print("(EngineCore pid=4242) INFO 12-01 00:00:00 [kv_cache_utils.py:2] Maximum concurrency for 1,024 tokens per request: 0.98x", flush=True)
lock = threading.Lock()
tpot = {"sum": 0.0, "count": 0}
posts = {"n": 0}
jit_post = int(os.environ.get("FAKE_JIT_POST", "0")) if with_plugin else 0
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def _send(self, out):
        self.send_response(200); self.send_header("Content-Length", str(len(out))); self.end_headers()
        self.wfile.write(out)
    def do_GET(self):
        if self.path == "/metrics":
            with lock:
                text = ("vllm:request_time_per_output_token_seconds_sum{engine=\"0\"} %f\n"
                        "vllm:request_time_per_output_token_seconds_count{engine=\"0\"} %d\n"
                        "vllm:request_time_per_output_token_seconds_created{engine=\"0\"} 1.0\n"
                        % (tpot["sum"], tpot["count"]))
            return self._send(text.encode())
        self._send(b"")
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        n, k = len(body["prompt"]), body["max_tokens"]
        with lock:
            posts["n"] += 1
            print(f"fake POST max_tokens={k} prompts={n}", flush=True)
            if posts["n"] == jit_post:
                # Stamped as Python's logging does, from time.time(): a bare
                # strftime() reads C time(), whose coarse clock lags the
                # second boundary by a few ms and would stamp the second before.
                print("(EngineCore pid=4242) WARNING " + time.strftime("%m-%d %H:%M:%S", time.localtime(time.time()))
                      + " [jit_monitor.py:135] Triton kernel JIT compilation during inference:"
                      " fake_kernel. This causes a latency spike", flush=True)
        time.sleep(float(os.environ.get("FAKE_BATCH_S", 0)) if k == 8 else 0.002 * k)
        with lock:
            tpot["sum"] += n * 0.002
            tpot["count"] += n
        reply = {"usage": {"completion_tokens": n * k}, "choices": []}
        for i, prompt in enumerate(body["prompt"]):
            ids = [(len(prompt) * 31 + j * 7) % 1000 for j in range(k)]
            if differs and i == 2 and k > 5:
                ids[5] += 1
            choice = {"index": i, "text": " ".join(map(str, ids))}
            if body.get("logprobs") is not None and os.environ.get("FAKE_NO_LOGPROBS") == "1":
                self.send_response(400); self.send_header("Content-Length", "0"); self.end_headers()
                return
            if body.get("logprobs") is not None and body.get("return_tokens_as_token_ids"):
                choice["logprobs"] = {"tokens": [f"token_id:{t}" for t in ids]}
                if body["logprobs"]:
                    top = [{f"token_id:{t}": -0.5, f"token_id:{(t + 1) % 1000}": -1.25}
                           for t in ids]
                    if with_plugin and os.environ.get("FAKE_LOGPROB_DIFFERS") == "1" and i == 1:
                        top[3][f"token_id:{ids[3]}"] = -0.5000000000000001
                    choice["logprobs"]["top_logprobs"] = top
            reply["choices"].append(choice)
        self._send(json.dumps(reply).encode())
ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
'''


@pytest.fixture
def fake_servers(tmp_path, monkeypatch):
    script = tmp_path / "fake_server.py"
    script.write_text(FAKE_SERVER)
    commands = []

    def fake_command(model, port, **kwargs):
        commands.append(kwargs)
        return [sys.executable, str(script), "--port", str(port)]

    monkeypatch.setattr(evidence, "serve_command", fake_command)
    return commands


def _settings(**kw) -> harness.Settings:
    defaults = dict(start_timeout_s=60, evidence_rounds=3, evidence_batch=4,
                    evidence_max_tokens=8, evidence_token_max_tokens=12,
                    evidence_client="completions")
    return harness.Settings(**{**defaults, **kw})


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def test_evidence_starts_one_server_then_the_rest_together_and_measures_one_at_a_time(
        tmp_path, fake_servers):
    layout = harness.Layout(tmp_path / "work")
    saved = []
    result = evidence.run_evidence(layout, _settings(), saved.append)
    assert result["problems"] == [] and result["rounds_stopped"] is None
    assert [(s["phase"], s["server"]) for s in result["starts"]] == [
        ("dspark", "released"), ("dspark", "standin-plugin"), ("dspark", "released-b"),
        ("target", "stock"), ("target", "plugin"), ("target", "stock-b")]
    assert [s["order"] for s in result["starts"]] == list(range(6))
    assert [s["wave"] for s in result["starts"]] == [0] + [1] * 5
    assert [s["started_together"] for s in result["starts"]] == [1] + [5] * 5
    assert [s["first_on_machine"] for s in result["starts"]] == [True] + [False] * 5
    # DSpark only in the dspark phase; the workload's max_num_seqs and one
    # fixed KV cache everywhere.
    assert [c["speculative"] is not None for c in fake_servers] == [True] * 3 + [False] * 3
    assert {c["max_num_seqs"] for c in fake_servers} == {64}
    assert {c["kv_cache_memory_bytes"] for c in fake_servers} == {evidence.EVIDENCE_KV_CACHE_BYTES}
    assert result["workload"]["kv_cache_memory_bytes"] == evidence.EVIDENCE_KV_CACHE_BYTES
    target = result["phases"]["target"]
    assert [r["order"] for r in target["rounds"]] == [
        ["stock", "plugin", "stock-b"], ["plugin", "stock-b", "stock"],
        ["stock-b", "stock", "plugin"]]
    for r in target["rounds"]:
        for name in ("stock", "plugin", "stock-b"):
            assert r[name]["tokens"] == 4 * 8 and r[name]["tokens_per_s"] > 0
            assert r[name]["server_tokens_per_s_per_request"] == pytest.approx(500, rel=0.01)
    for key in ("throughput", "server_tpot"):
        summary = target[key]
        assert summary["plugin/stock"]["n"] == 3 and summary["stock-b/stock"]["n"] == 3
        assert summary["plugin/stock"]["half_width_pct"] is not None
        assert "intervals" in summary["reading"]
    assert result["phases"]["dspark"]["throughput"]["standin-plugin/released"]["n"] == 3
    assert target["tokens"]["plugin vs stock"]["identical"] is True
    assert target["tokens"]["plugin vs stock"]["tokens"] == len(evidence.TOKEN_PROMPTS) * 12
    assert result["phases"]["dspark"]["tokens"]["standin-plugin vs released"]["identical"]
    assert {s["kv_cache_tokens"] for s in target["servers"].values()} == {1000}
    assert saved and saved[-1] is result
    assert [s["vllm"] for s in result["starts"]] == [
        "as installed", "stand-in", "as installed", "stand-in", "stand-in", "stand-in"]
    comparisons = evidence.start_comparisons(result["starts"])
    assert set(comparisons["target"]["ratios"]) == {"plugin/stock", "stock-b/stock"}
    # DSpark: the stand-in with the plugin and the released control run
    # different vLLM code; no start of the wave compares like with like.
    assert "dspark" not in comparisons
    for r in target["rounds"]:
        for name in ("stock", "plugin", "stock-b"):
            assert r[name]["jit"] == [] and r[name]["began_unix"] <= r[name]["ended_unix"]
    assert target["rounds_with_jit"] == 0
    assert target["throughput_without_jit"]["plugin/stock"]["n"] == 3
    # Each server: the token batch, one warm-up batch of the workload itself
    # (its shapes' kernels compile before the rounds), then one per round.
    log = Path(target["servers"]["plugin"]["log"]).read_text()
    assert [line.split(" ", 2)[2] for line in log.splitlines() if line.startswith("fake POST")] == [
        f"max_tokens=12 prompts={len(evidence.TOKEN_PROMPTS)}"] + ["max_tokens=8 prompts=4"] * 4


def test_the_second_wave_starts_at_once(tmp_path, monkeypatch):
    """Five servers that each take 3 s to answer /health: together, the
    wave is healthy in far less than the 15 s one after the other would take."""
    script = tmp_path / "slow_server.py"
    script.write_text("import time; time.sleep(3)\n" + FAKE_SERVER)
    monkeypatch.setattr(evidence, "serve_command",
                        lambda model, port, **kw: [sys.executable, str(script), "--port", str(port)])
    layout = harness.Layout(tmp_path / "work")
    result = evidence.run_evidence(layout, _settings(evidence_rounds=2))
    assert result["problems"] == []
    first, *wave = result["starts"]
    assert first["launched_at_s"] < 1 and len(wave) == 5
    # all launched the moment the first was healthy, none waiting for another
    assert all(first["start_s"] <= s["launched_at_s"] < first["start_s"] + 1 for s in wave), wave
    assert all(3 <= s["start_s"] < 9 for s in wave), wave


def test_one_wave_starts_every_server_at_once(tmp_path, monkeypatch):
    """--evidence-waves 1: all six servers launched together (none waits for
    another to be healthy), all in wave 0, and the method says so."""
    script = tmp_path / "slow_server.py"
    script.write_text("import time; time.sleep(3)\n" + FAKE_SERVER)
    monkeypatch.setattr(evidence, "serve_command",
                        lambda model, port, **kw: [sys.executable, str(script), "--port", str(port)])
    layout = harness.Layout(tmp_path / "work")
    result = evidence.run_evidence(layout, _settings(evidence_rounds=2, evidence_waves=1))
    assert result["problems"] == []
    starts = result["starts"]
    assert len(starts) == 6 and {s["wave"] for s in starts} == {0}
    assert {s["started_together"] for s in starts} == {6}
    assert all(s["launched_at_s"] < 1 and 3 <= s["start_s"] < 9 for s in starts), starts
    assert "every server started at once" in result["method"]
    assert result["workload"]["waves"] == 1


def test_rounds_take_turns_and_stop_before_the_time_limit(tmp_path, fake_servers, monkeypatch):
    """With a limit the rounds cannot all fit in, both phases get the same
    number of rounds, and the stop is said."""
    monkeypatch.setattr(evidence, "STOP_MARGIN_S", 0.0)
    layout = harness.Layout(tmp_path / "work")
    clock = {"now": 0.0}

    def fake_round(phase, out, servers, prompts, settings, round_no, layout=None, probe=None):
        clock["now"] += 10.0  # every round takes 10 s
        out["rounds"].append({"round": round_no, "phase": phase})

    monkeypatch.setattr(evidence, "_one_round", fake_round)
    real = evidence.time.monotonic
    monkeypatch.setattr(evidence.time, "monotonic", lambda: real() + clock["now"])
    result = evidence.run_evidence(layout, _settings(evidence_rounds=10, evidence_seconds=65))
    rounds = {p: len(out["rounds"]) for p, out in result["phases"].items()}
    assert rounds["dspark"] == rounds["target"] and 2 <= rounds["dspark"] < 10, rounds
    assert "--evidence-seconds 65" in result["rounds_stopped"]
    assert result["problems"] == []


def test_a_differing_token_is_shown_with_the_control_beside_it(tmp_path, fake_servers,
                                                               monkeypatch):
    monkeypatch.setenv("FAKE_PLUGIN_DIFFERS", "1")
    layout = harness.Layout(tmp_path / "work")
    result = evidence.run_evidence(layout, _settings(evidence_phases=("target",)))
    tokens = result["phases"]["target"]["tokens"]
    mine = tokens["plugin vs stock"]
    assert mine["identical"] is False and mine["differing_prompts"] == 1
    assert mine["first_difference"]["prompt"] == 2 and mine["first_difference"]["position"] == 5
    assert mine["first_difference"]["other"] == mine["first_difference"]["base"] + 1
    assert tokens["stock-b vs stock"]["identical"] is True


def test_without_token_ids_the_texts_are_compared(tmp_path, fake_servers, monkeypatch):
    monkeypatch.setenv("FAKE_NO_LOGPROBS", "1")
    monkeypatch.setenv("FAKE_PLUGIN_DIFFERS", "1")
    layout = harness.Layout(tmp_path / "work")
    result = evidence.run_evidence(layout, _settings(evidence_phases=("target",)))
    assert result["problems"] == []
    phase = result["phases"]["target"]
    assert "400" in phase["servers"]["stock"]["token_ids_error"]
    mine = phase["tokens"]["plugin vs stock"]
    assert mine["unit"] == "characters" and mine["identical"] is False
    assert mine["first_difference"]["prompt"] == 2
    assert phase["tokens"]["stock-b vs stock"]["identical"] is True
    assert len(phase["rounds"]) == 3


def test_a_first_server_that_does_not_start_is_reported_and_nothing_else_starts(
        tmp_path, monkeypatch):
    def dead_command(model, port, **kwargs):
        return [sys.executable, "-c", "raise SystemExit(3)"]

    monkeypatch.setattr(evidence, "serve_command", dead_command)
    layout = harness.Layout(tmp_path / "work")
    result = evidence.run_evidence(layout, _settings(evidence_phases=("target",)))
    assert len(result["starts"]) == 1 and result["starts"][0]["exit_code"] == 3
    assert result["problems"] == ["target/stock: server exited (code 3) before it became healthy"]
    assert result["phases"]["target"]["rounds"] == []


def test_start_comparisons_take_one_wave_and_never_the_cold_start():
    def start(order, phase, server, s, wave):
        return {"order": order, "phase": phase, "server": server, "start_s": s,
                "wave": wave, "first_on_machine": wave == 0}

    starts = [start(0, "dspark", "released", 700.0, 0),
              start(1, "dspark", "standin-plugin", 300.0, 1),
              start(2, "dspark", "released-b", 310.0, 1),
              start(3, "target", "stock", 250.0, 1), start(4, "target", "plugin", 240.0, 1),
              start(5, "target", "stock-b", 260.0, 1)]
    for s in starts:
        s["vllm"] = "stand-in"
    out = evidence.start_comparisons(starts)
    assert out["dspark"] == {"wave": 1, "vllm": "stand-in",
                             "start_s": {"standin-plugin": 300.0, "released-b": 310.0},
                             "ratios": {"standin-plugin/released-b": round(300 / 310, 4)}}
    assert out["target"]["ratios"] == {"plugin/stock": round(240 / 250, 4),
                                       "stock-b/stock": round(260 / 250, 4)}
    # The same wave on different vLLM code: not compared.
    starts[2]["vllm"] = "as installed"
    assert "dspark" not in evidence.start_comparisons(starts)
    # Starts one at a time (no wave): never two under the same conditions.
    for s in starts:
        del s["wave"]
    assert evidence.start_comparisons(starts) == {}
    # A server that did not start leaves its phase without a comparison.
    starts = [start(0, "target", "stock", 400.0, 0), start(1, "target", "plugin", None, 1),
              start(2, "target", "stock-b", 90.0, 1)]
    for s in starts:
        s["vllm"] = "stand-in"
    assert evidence.start_comparisons(starts) == {}


def test_rotation_puts_each_server_in_each_place():
    names = ["a", "b", "c"]
    orders = [evidence.rotated(names, r) for r in range(3)]
    for place in range(3):
        assert sorted(o[place] for o in orders) == names
    assert evidence.rotated(names, 3) == names


@pytest.mark.parametrize("base, other, identical, first", [
    ([[1, 2, 3]], [[1, 2, 3]], True, None),
    ([[1, 2, 3]], [[1, 9, 3]], False, {"prompt": 0, "position": 1, "base": 2, "other": 9}),
    ([[1, 2], [4, 5, 6]], [[1, 2], [4, 5]], False,
     {"prompt": 1, "position": 2, "base": 6, "other": None}),
    ([[1]], [[1], [2]], False, None),
])
def test_compare_tokens(base, other, identical, first):
    out = evidence.compare_tokens(base, other)
    assert out["identical"] is identical
    assert out["first_difference"] == first
    assert evidence.compare_tokens(None, other) == {"compared": False}


def test_token_ids_are_read_in_prompt_order():
    reply = {"choices": [{"index": 1, "logprobs": {"tokens": ["token_id:7", "token_id:8"]}},
                         {"index": 0, "logprobs": {"tokens": ["token_id:5"]}}]}
    assert evidence.token_ids(reply) == [[5], [7, 8]]


def test_histogram_sums_labels_and_skips_created():
    page = "\n".join([
        "# HELP vllm:request_time_per_output_token_seconds x",
        'vllm:request_time_per_output_token_seconds_bucket{le="0.1"} 3',
        'vllm:request_time_per_output_token_seconds_sum{engine="0"} 0.5',
        'vllm:request_time_per_output_token_seconds_sum{engine="1"} 0.25',
        'vllm:request_time_per_output_token_seconds_count{engine="0"} 4',
        'vllm:request_time_per_output_token_seconds_created{engine="0"} 17e8',
    ])
    assert metrics.histogram(page, metrics.TPOT) == {"sum": 0.75, "count": 4.0}
    assert metrics.histogram("", metrics.TPOT) == {}


def test_reading_states_the_plugin_interval_against_the_aa_one():
    ratios = {"plugin/stock": {"geomean": 0.99, "low": 0.97, "high": 1.01, "half_width_pct": 2.0},
              "stock-b/stock": {"geomean": 1.0, "low": 0.98, "high": 1.02, "half_width_pct": 2.0}}
    assert evidence.relative_to_aa(ratios, "plugin", "stock-b", "stock").endswith(
        "the intervals overlap")
    ratios["plugin/stock"].update(low=0.90, high=0.95)
    assert evidence.relative_to_aa(ratios, "plugin", "stock-b", "stock").endswith(
        "do not overlap")
    assert evidence.relative_to_aa({}, "plugin", "stock-b", "stock") is None


def test_the_cli_checks_the_evidence_arguments(tmp_path):
    import subprocess

    script = REPO / "benchmarks" / "engine_e2e.py"
    wheel = tmp_path / "x-0-py3-none-any.whl"
    wheel.write_bytes(b"")
    for args, says in ((["--evidence-phases", "bogus"], "--evidence-phases"),
                       (["--evidence-rounds", "1"], "at least 2"),
                       (["--evidence-seconds", "0"], "--evidence-seconds must be positive"),
                       (["--kv-cache-memory-bytes", "0"], "must be positive"),
                       (["--max-num-batched-tokens", "0"], "--max-num-batched-tokens must be"),
                       (["--evidence-waves", "3"], "--evidence-waves"),
                       (["--evidence-cpus", "pinned"], "--evidence-cpus")):
        proc = subprocess.run([sys.executable, str(script), "--plugin-wheel", str(wheel),
                               "--work", str(tmp_path / "w"), "--cases", "none", "--evidence",
                               *args], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and says in proc.stderr, proc.stderr


def test_the_stopped_h200_evidence_run_compares_no_start_it_should_not():
    """Run G (2026-12-01, one H200): two DSpark starts, the machine's first
    (kernels compiled) and one with compiled kernels, then stopped: no pair
    of warm starts, so no start ratio; the stand-in with the plugin patched
    and rescued in its engine core."""
    folder = REPO / "benchmarks" / "results" / "engine-e2e-2026-12-01"
    run = json.loads((folder / "run-G.json").read_text(encoding="utf-8"))
    starts = run["evidence"]["starts"]
    assert [(s["server"], s["first_on_machine"]) for s in starts] == [
        ("released", True), ("standin-plugin", False)]
    assert evidence.start_comparisons(starts) == {}
    assert run["stopped"]["signal"] == "SIGTERM" and run["exit_code"] == 143
    log = folder / "run-G-evidence-dspark-standin-plugin.log"
    engine = harness.model_processes(harness.read_log(log))
    assert [p["process"].split()[0] for p in engine] == ["EngineCore"]
    assert [x["state"] for x in engine[0]["plugin"]] == ["patched"]
    assert engine[0]["rescued"] == ["model.layers.4.attn"]
    assert engine[0]["kv_cache_tokens"] == 1282068


def test_a_batch_during_which_a_kernel_compiled_is_marked_and_left_out_of_the_clean_reading(
        tmp_path, fake_servers, monkeypatch):
    """The plugin's server logs a JIT compile during its fourth request (the
    token batch, the warm-up, round 0, then round 1): round 1 is marked,
    counted and left out of the readings without JIT rounds, and one more
    round runs, so that three are clean. Batches of 2.5 s: the log's whole
    seconds cannot reach a neighbouring batch."""
    monkeypatch.setenv("FAKE_JIT_POST", "4")
    monkeypatch.setenv("FAKE_BATCH_S", "2.5")
    layout = harness.Layout(tmp_path / "work")
    result = evidence.run_evidence(layout, _settings(evidence_rounds=3,
                                                     evidence_phases=("target",)))
    assert result["problems"] == []
    out = result["phases"]["target"]
    marks = [{n: r[n]["jit"] for n in out["servers"]} for r in out["rounds"]]
    # What a failure needs to be read: the plugin server's own log (its
    # requests and the JIT line, with their times) and each batch's window.
    seen = [line for line in Path(out["servers"]["plugin"]["log"]).read_text().splitlines()
            if "fake POST" in line or "jit_monitor" in line]
    windows = [(r["plugin"]["began_unix"], r["plugin"]["ended_unix"]) for r in out["rounds"]]
    assert marks == [{"stock": [], "plugin": [], "stock-b": []},
                     {"stock": [], "plugin": ["fake_kernel"], "stock-b": []},
                     {"stock": [], "plugin": [], "stock-b": []},
                     {"stock": [], "plugin": [], "stock-b": []}], (marks, seen, windows)
    assert out["rounds_with_jit"] == 1 and result["rounds_stopped"] is None
    for reading in ("throughput", "server_tpot"):
        assert [out[reading][k]["n"] for k in ("plugin/stock", "stock-b/stock")] == [4, 4]
        without = out[reading + "_without_jit"]
        assert [without[k]["n"] for k in ("plugin/stock", "stock-b/stock")] == [3, 3]
        assert without["per_round"]["plugin/stock"] == [
            out[reading]["per_round"]["plugin/stock"][i] for i in (0, 2, 3)]


def test_jit_lines_are_read_with_their_times():
    from engine import jit_log

    text = "\n".join([
        "(EngineCore pid=4201) WARNING 12-01 18:39:35 [jit_monitor.py:135] Triton kernel JIT "
        "compilation during inference: _compute_slot_mapping_kernel. This causes a latency "
        "spike; consider extending warmup to cover this shape/config.",
        "(EngineCore pid=4201) 2026-12-01 18:44:32  [TileLang:tilelang.jit.kernel:INFO] "
        "(kernel.py:133): TileLang begins to compile kernel `mhc_pre_big_fuse_with_norm_tilelang`"
        " with `out_idx=None`",
        "(EngineCore pid=4201) 2026-12-01 18:44:43  [TileLang:tilelang.jit.kernel:INFO] "
        "(kernel.py:141): TileLang completes to compile kernel `mhc_pre_big_fuse_with_norm_"
        "tilelang`",
        "(EngineCore pid=4201) INFO 12-01 18:37:23 [jit_monitor.py:79] Kernel JIT monitor "
        "activated; monitored JIT compilations during inference will use mode=warn.",
    ])
    found = jit_log.events(text, 2026)
    import datetime
    at = [datetime.datetime(2026, 12, 1, 18, 39, 35).timestamp(),
          datetime.datetime(2026, 12, 1, 18, 44, 32).timestamp()]
    assert found == [(at[0], "_compute_slot_mapping_kernel"),
                     (at[1], "mhc_pre_big_fuse_with_norm_tilelang")]
    assert jit_log.during(found, at[1] - 30, at[1] - 1.5) == []
    assert jit_log.during(found, at[1] - 30, at[1] - 0.5) == ["mhc_pre_big_fuse_with_norm_tilelang"]
    assert jit_log.during(found, at[1] + 0.5, at[1] + 20) == ["mhc_pre_big_fuse_with_norm_tilelang"]
    assert jit_log.during(found, at[1] + 1.5, at[1] + 20) == []
    assert jit_log.during(found, at[0] - 1, at[1] + 1) == [
        "_compute_slot_mapping_kernel", "mhc_pre_big_fuse_with_norm_tilelang"]


def test_the_h200_evidence_run_h_reads_as_the_readme_says():
    """Run H (2026-12-01, one H200, vLLM 0.26.0): every server healthy, the
    same 512 token ids in all four comparisons, start ratios only among the
    three stand-in servers of the target phase (the DSpark pair it printed,
    a stand-in against released code, is not like with like), 7 and 6
    rounds, the fixed KV cache on every server."""
    folder = REPO / "benchmarks" / "results" / "engine-e2e-2026-12-01"
    run = json.loads((folder / "run-H.json").read_text(encoding="utf-8"))
    ev = run["evidence"]
    assert run["exit_code"] == 0 and ev["problems"] == []
    assert [(s["server"], s["wave"], s["healthy"]) for s in ev["starts"]] == [
        ("released", 0, True), ("standin-plugin", 1, True), ("released-b", 1, True),
        ("stock", 1, True), ("plugin", 1, True), ("stock-b", 1, True)]
    for phase, pairs in (("dspark", ("standin-plugin vs released", "released-b vs released")),
                         ("target", ("plugin vs stock", "stock-b vs stock"))):
        for pair in pairs:
            tokens = ev["phases"][phase]["tokens"][pair]
            assert tokens["unit"] == "token ids" and tokens["tokens"] == 512
            assert tokens["identical"] is True
    for s in ev["starts"]:  # the report predates the field: the harness's layout
        s["vllm"] = "as installed" if s["server"].startswith("released") else "stand-in"
    out = evidence.start_comparisons(ev["starts"])
    assert out == {"target": {"wave": 1, "vllm": "stand-in",
                              "start_s": {"stock": 230.2, "plugin": 231.2, "stock-b": 230.2},
                              "ratios": {"plugin/stock": 1.0043, "stock-b/stock": 1.0}}}
    assert [len(ev["phases"][p]["rounds"]) for p in ("dspark", "target")] == [7, 6]
    kv = {p: {s["kv_cache_tokens"] for s in ev["phases"][p]["servers"].values()}
          for p in ("dspark", "target")}
    assert kv == {"dspark": {131581}, "target": {139829}}
    log = folder / "run-H-evidence-dspark-standin-plugin.log"
    engine = harness.model_processes(harness.read_log(log))
    assert [x["state"] for x in engine[0]["plugin"]] == ["patched"]
    assert engine[0]["rescued"] == ["model.layers.4.attn"]


def test_a_fixed_kv_cache_reaches_the_case_servers_command(tmp_path):
    layout = harness.Layout(tmp_path / "work")
    fixed = harness.case_command(layout, harness.Settings(kv_cache_memory_bytes=123), port=1)
    assert fixed[fixed.index("--kv-cache-memory-bytes") + 1] == "123"
    assert "--kv-cache-memory-bytes" not in harness.case_command(layout, harness.Settings(), 1)


def test_prefix_caching_is_off_only_where_asked(tmp_path):
    """`vllm serve`'s own flag (vLLM 0.26.0 and 0.27.1 both take
    --no-enable-prefix-caching); left to vLLM's default otherwise."""
    from engine.server import serve_command

    common = dict(speculative=None, max_model_len=1024, gpu_memory_utilization=0.2)
    off = serve_command(tmp_path, 1, prefix_caching=False, **common)
    assert "--no-enable-prefix-caching" in off
    assert not any("prefix-caching" in a for a in serve_command(tmp_path, 1, **common))


def test_a_step_budget_reaches_every_servers_command(tmp_path, fake_servers):
    """--max-num-batched-tokens: in the case servers' command and in every
    evidence server's (the step budget that keeps each step at a captured
    CUDA graph size), absent when not given."""
    layout = harness.Layout(tmp_path / "work")
    case = harness.case_command(layout, harness.Settings(max_num_batched_tokens=640), port=1)
    assert case[case.index("--max-num-batched-tokens") + 1] == "640"
    assert "--max-num-batched-tokens" not in harness.case_command(layout, harness.Settings(), 1)
    result = evidence.run_evidence(layout, _settings(evidence_rounds=2, max_num_batched_tokens=640))
    assert result["problems"] == []
    assert [c["max_num_batched_tokens"] for c in fake_servers] == [640] * 6
    assert result["workload"]["max_num_batched_tokens"] == 640


# --- vLLM's own benchmark client, the logprobs, the GPU-bound model (issue: 3 %) ---------

from engine import bench_serve, checkpoint  # noqa: E402

# What `vllm bench serve` (vLLM 0.26.0) prints at the end of a run.
PRINTED = """\
============ Serving Benchmark Result ============
Successful requests:                     64        
Failed requests:                         0         
Benchmark duration (s):                  3.21      
Total input tokens:                      8192      
Total generated tokens:                  8192      
Request throughput (req/s):              19.94     
Output token throughput (tok/s):         2552.18   
Peak output token throughput (tok/s):    3008.00   
Peak concurrent requests:                64.00     
Total token throughput (tok/s):          5104.36   
---------------Time to First Token----------------
Mean TTFT (ms):                          210.40    
Median TTFT (ms):                        208.90    
P99 TTFT (ms):                           230.12    
-----Time per Output Token (excl. 1st token)------
Mean TPOT (ms):                          23.55     
Median TPOT (ms):                        23.49     
P99 TPOT (ms):                           24.01     
---------------Inter-token Latency----------------
Mean ITL (ms):                           23.55     
Median ITL (ms):                         22.87     
P99 ITL (ms):                            41.30     
==================================================
"""


def test_the_numbers_vllm_bench_serve_prints_are_read():
    got = bench_serve.parse_printed(PRINTED)
    assert got == {"completed": 64, "failed": 0, "duration": 3.21, "total_output_tokens": 8192,
                   "output_throughput": 2552.18, "mean_ttft_ms": 210.40, "median_ttft_ms": 208.90,
                   "mean_tpot_ms": 23.55, "median_tpot_ms": 23.49, "mean_itl_ms": 23.55,
                   "median_itl_ms": 22.87}
    # The saved JSON gives the same figures, by the same keys.
    saved = {**got, "p99_tpot_ms": 24.01, "date": "20261202-120000", "itls": [[0.02]]}
    assert bench_serve.figures(saved) == got


def test_the_round_command_is_one_vllm_bench_serve_accepts(tmp_path):
    """The arguments parsed by vLLM's own `vllm bench serve` parser (the
    installed vLLM's): random prompts of fixed lengths, one seed, every
    request at once, exactly output_len tokens each, greedy."""
    from vllm.benchmarks import serve

    argv = bench_serve.command("http://127.0.0.1:8000", "/m", tmp_path, served_model_name="tiny-dsv4",
                               num_prompts=64, input_len=128, output_len=256, seed=7,
                               result_dir=tmp_path, result_filename="r.json")
    assert argv[:2] == ["bench", "serve"]
    parser = bench_serve._parser()
    serve.add_cli_args(parser)
    args = parser.parse_args(argv[2:])
    assert (args.dataset_name, args.random_input_len, args.random_output_len) == ("random", 128, 256)
    assert (args.num_prompts, args.seed, args.request_rate, args.ignore_eos) == (64, 7, float("inf"), True)
    assert args.temperature == 0 and args.save_result and args.result_filename == "r.json"
    assert args.served_model_name == "tiny-dsv4" and args.base_url == "http://127.0.0.1:8000"
    line = bench_serve.shell_line(argv)
    assert line.startswith("vllm bench serve --backend vllm --base-url http://127.0.0.1:8000 ")


def test_logprobs_are_compared_to_the_bit():
    a = [[[[5, -0.5], [6, -1.25]], [[7, -0.25], [1, -2.0]]]]
    assert evidence.compare_logprobs(a, json.loads(json.dumps(a)))["identical"] is True
    b = json.loads(json.dumps(a))
    b[0][1][0][1] = -0.25000000000000006  # one ulp away
    got = evidence.compare_logprobs(a, b)
    assert got["identical"] is False and got["differing_positions"] == 1
    assert got["first_difference"] == {"prompt": 0, "position": 1,
                                       "base": [[7, -0.25], [1, -2.0]],
                                       "other": [[7, -0.25000000000000006], [1, -2.0]]}
    c = json.loads(json.dumps(a))
    c[0][0] = [[6, -1.25], [5, -0.5]]  # another order is another answer
    assert evidence.compare_logprobs(a, c)["identical"] is False
    assert evidence.compare_logprobs(a, a[:0])["identical"] is False
    assert evidence.compare_logprobs(None, a) == {"compared": False}


def test_top_logprobs_are_read_most_likely_first():
    reply = {"choices": [{"index": 0, "logprobs": {
        "tokens": ["token_id:5"], "top_logprobs": [
            {"token_id:9": -3.0, "token_id:5": -0.1, "token_id:2": -3.0}]}}]}
    assert evidence.top_logprobs(reply) == [[[[5, -0.1], [2, -3.0], [9, -3.0]]]]


@pytest.mark.parametrize("tokens, period", [
    ([584, 687, 712, 687, 712, 687, 712, 687, 712, 687, 712, 687, 712, 687, 712, 687, 712], 2),
    ([3] * 20, 1),
    (list(range(40)), None),
    ([1, 2, 3] * 10, 3),
    ([9, 8] + [1, 2, 3, 4, 5] * 6, 5),
    ([], None),
])
def test_a_short_cycle_at_the_end_of_an_output_is_found(tokens, period):
    assert evidence.shortest_cycle(tokens) == period


def test_the_logprobs_differ_and_the_report_says_where(tmp_path, fake_servers, monkeypatch):
    monkeypatch.setenv("FAKE_LOGPROB_DIFFERS", "1")
    result = evidence.run_evidence(harness.Layout(tmp_path / "work"),
                                   _settings(evidence_phases=("target",)))
    tokens = result["phases"]["target"]["tokens"]
    mine, aa = tokens["plugin vs stock"], tokens["stock-b vs stock"]
    assert mine["identical"] is True  # the ids are the same ...
    assert mine["logprobs"]["identical"] is False  # ... one log-probability is not
    assert mine["logprobs"]["first_difference"]["prompt"] == 1
    assert mine["logprobs"]["first_difference"]["position"] == 3
    assert aa["logprobs"]["identical"] is True
    assert aa["logprobs"]["positions"] == len(evidence.TOKEN_PROMPTS) * 12


def test_bench_serve_rounds_feed_the_intervals(tmp_path, fake_servers, monkeypatch):
    """Each round runs `vllm bench serve` once per server, every round and
    warm-up with the same seed (the same prompts, so the same steps the
    warm-up compiled for) on servers without prefix caching (a repeated
    prompt is prefilled in full), its TPOT read beside the server's
    histogram; warm-up ends after two rounds in a row with no kernel
    compiled."""
    calls = []
    tpot = {"stock": 20.0, "plugin": 20.2, "stock-b": 19.9}

    def fake_run(argv):
        port = int(argv[argv.index("--base-url") + 1].rsplit(":", 1)[1])
        seed = int(argv[argv.index("--seed") + 1])
        calls.append((port, seed))
        return {"mean_tpot_ms": 20.0 + (seed % 3) * 0.1, "median_tpot_ms": 20.0,
                "output_throughput": 1000.0, "completed": 4, "failed": 0}, PRINTED

    monkeypatch.setattr(evidence.bench_serve, "run", fake_run)
    result = evidence.run_evidence(harness.Layout(tmp_path / "work"),
                                   _settings(evidence_phases=("target",), evidence_client="bench-serve",
                                             evidence_rounds=4))
    assert result["problems"] == [], result["problems"]
    assert result["bench_command"].startswith("vllm bench serve --backend vllm --base-url "
                                              "http://127.0.0.1:PORT")
    out = result["phases"]["target"]
    for name in tpot:
        assert [t["jit"] for t in out["servers"][name]["warmup"]] == [[], []]
    # 3 servers x (2 warm-up + 4 rounds), every one with the one seed.
    assert len(calls) == 3 * 6
    assert {seed for _, seed in calls} == {evidence.BENCH_SEED}
    assert result["workload"]["bench_seed"] == evidence.BENCH_SEED
    assert len(fake_servers) == 3 and all(c["prefix_caching"] is False for c in fake_servers)
    assert result["workload"]["prefix_caching"] is False
    for r in out["rounds"]:
        seeds = {calls_seed for calls_seed in [r[n]["mean_tpot_ms"] for n in tpot]}
        assert len(seeds) == 1
        for n in tpot:
            assert r[n]["bench_tokens_per_s_per_request"] == pytest.approx(1000 / r[n]["mean_tpot_ms"], rel=1e-3)
    summary = out["bench_tpot"]
    assert summary["plugin/stock"]["n"] == 4 and summary["stock-b/stock"]["geomean"] == pytest.approx(1.0)
    assert "intervals" in summary["reading"]
    # What the machine did during each timed batch, and what moved with its TPOT.
    assert result["workload"]["probes"].startswith("no nvidia-smi on PATH")
    for r in out["rounds"]:
        for n in tpot:
            machine = r[n]["machine"]
            assert machine["gpu"] is None and machine["server_cpu_s"] >= 0
            assert machine["client_cpu_s"] >= 0 and machine["seconds"] >= 0
    for n in tpot:
        against = out["tpot_against"][n]
        assert against["server_cpu_s"]["batches"] == 4 and "gpu_sm_mhz" not in against


def test_an_nvidia_smi_without_samples_is_said_in_the_workload(tmp_path, fake_servers, monkeypatch):
    """nvidia-smi that starts but never prints a sample (a driver mismatch):
    the workload says the GPU was not sampled, not that it was every 100 ms."""
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\necho 'Failed to initialize NVML: Driver/library version mismatch'\nexit 18\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(evidence.bench_serve, "run", lambda argv: (
        {"mean_tpot_ms": 20.0, "median_tpot_ms": 20.0, "output_throughput": 1000.0,
         "completed": 4, "failed": 0}, PRINTED))
    result = evidence.run_evidence(harness.Layout(tmp_path / "work"),
                                   _settings(evidence_phases=("target",), evidence_client="bench-serve",
                                             evidence_rounds=2))
    assert result["problems"] == [], result["problems"]
    assert result["workload"]["probes"] == ("nvidia-smi gave no readable sample (exit code 18): "
                                            "GPU clocks not sampled")


def test_a_round_whose_requests_failed_stops_the_evidence_and_says_so(
        tmp_path, fake_servers, monkeypatch):
    """As on the H200 with --max-num-batched-tokens 640: every request of the
    first warm-up round came back 500 (the engine core had died). Such a
    round is neither a clean warm-up nor a timed round: the evidence stops
    with the failed count as its problem, and no interval is computed."""
    calls = []

    def fake_run(argv):
        calls.append(argv)
        return {"mean_tpot_ms": 0.0, "median_tpot_ms": 0.0, "output_throughput": 0.0,
                "completed": 0, "failed": 4}, PRINTED

    monkeypatch.setattr(evidence.bench_serve, "run", fake_run)
    result = evidence.run_evidence(harness.Layout(tmp_path / "work"),
                                   _settings(evidence_phases=("target",), evidence_client="bench-serve",
                                             evidence_rounds=4))
    assert len(calls) == 1  # the first warm-up round, and nothing after it
    assert len(result["problems"]) == 1
    assert "4 of 4 requests failed, 0 completed" in result["problems"][0]
    out = result["phases"]["target"]
    assert out["rounds"] == []
    assert all("warmup" not in side for side in out["servers"].values())


def test_a_round_with_fewer_completed_than_sent_fails_too(tmp_path, monkeypatch):
    class FakeServer:
        port = 7

        def metrics_text(self):
            return ""

    monkeypatch.setattr(evidence.bench_serve, "run",
                        lambda argv: ({"mean_tpot_ms": 9.0, "completed": 3}, ""))
    with pytest.raises(evidence.RoundFailed, match="port 7: 0 of 4 requests failed, 3 completed"):
        evidence._bench_round(FakeServer(), harness.Layout(tmp_path / "w"),
                              _settings(evidence_client="bench-serve"), seed=0)


def test_warm_up_repeats_while_kernels_compile(tmp_path, monkeypatch):
    log = tmp_path / "server.log"
    log.write_text("")
    compiled = {"left": 2}

    class FakeServer:
        port = 1

        def metrics_text(self):
            return ""

    def fake_run(argv):
        import time as _t
        if compiled["left"]:
            compiled["left"] -= 1
            with open(log, "a") as fh:  # stamped from time.time(), as logging does
                fh.write("(EngineCore pid=1) WARNING " + _t.strftime("%m-%d %H:%M:%S", _t.localtime(_t.time()))
                         + " [jit_monitor.py:135] Triton kernel JIT compilation during inference:"
                         " k. This causes a latency spike\n")
            _t.sleep(2.1)  # the log has whole seconds: the next round starts past this one's
        return {"mean_tpot_ms": 10.0}, ""

    monkeypatch.setattr(evidence.bench_serve, "run", fake_run)
    tries = evidence._warm_up(FakeServer(), {"log": str(log)}, harness.Layout(tmp_path / "w"),
                              _settings(evidence_client="bench-serve"))
    assert [bool(t["jit"]) for t in tries] == [True, True, False, False]


def test_warm_up_counts_clean_rounds_in_a_row_and_gives_up_after_its_tries(tmp_path, monkeypatch):
    """As on the H200: a round with no compile, then one that met new token
    counts. Warm-up ends only after two clean rounds in a row; a server that
    keeps compiling is warmed up at most WARMUP_TRIES times."""
    log = tmp_path / "server.log"
    log.write_text("")

    class FakeServer:
        port = 1

        def metrics_text(self):
            return ""

    def run_with(pattern):
        rounds = iter(pattern)

        def fake_run(argv):
            import time as _t
            if next(rounds):
                with open(log, "a") as fh:  # stamped from time.time(), as logging does
                    fh.write("(EngineCore pid=1) " + _t.strftime("%Y-%m-%d %H:%M:%S", _t.localtime(_t.time()))
                             + "  [TileLang:tilelang.jit.kernel:INFO] (kernel.py:141): TileLang "
                             "begins to compile kernel `mhc_pre_big_fuse_with_norm_tilelang`\n")
            _t.sleep(2.1)  # whole seconds in the log: the next round starts past it
            return {"mean_tpot_ms": 10.0}, ""

        monkeypatch.setattr(evidence.bench_serve, "run", fake_run)
        return [bool(t["jit"]) for t in evidence._warm_up(
            FakeServer(), {"log": str(log)}, harness.Layout(tmp_path / "w"),
            _settings(evidence_client="bench-serve"))]

    assert run_with([False, True, False, False, True]) == [False, True, False, False]
    assert run_with([True] * 10) == [True] * evidence.WARMUP_TRIES


def test_the_gpu_bound_config_keeps_every_constraint_of_the_tiny_one(tmp_path):
    tiny, big = checkpoint.config_for("tiny"), checkpoint.config_for("gpu-bound")
    for config in (tiny, big):
        layers = config["num_hidden_layers"]
        ratios = config["compress_ratios"]
        assert config["hidden_size"] % 2048 == 0 and config["hc_mult"] == 4
        assert len(ratios) == layers + 1 and set(ratios) <= {0, 1, 4, 128}
        assert any(r > 1 for r in ratios[:layers]) and any(r <= 1 for r in ratios)
        targets = config["dspark_target_layer_ids"]
        assert len(set(targets)) == len(targets) and max(targets) == layers - 1 and min(targets) >= 0
        assert config["moe_intermediate_size"] % 128 == 0
        e = config["n_routed_experts"]
        assert e & (e - 1) == 0 and config["num_experts_per_tok"] <= e
        assert config["dspark_noise_token_id"] == config["vocab_size"] - 1
        assert config["num_attention_heads"] % config["o_groups"] == 0
    assert big["hidden_size"] * big["num_hidden_layers"] * big["n_routed_experts"] * \
        big["moe_intermediate_size"] >= 100 * tiny["hidden_size"] * tiny["num_hidden_layers"] * \
        tiny["n_routed_experts"] * tiny["moe_intermediate_size"]
    folder = checkpoint.write_checkpoint(tmp_path / "m", "gpu-bound")
    assert json.loads((folder / "config.json").read_text()) == big
    with pytest.raises(ValueError, match="unknown model size"):
        checkpoint.config_for("huge")


def test_run_j_outputs_are_identical_to_the_bit_and_its_one_round_is_marked():
    """Run J (2026-12-02, one H200, gpu-bound, DSpark; the three servers
    started at once): token ids and top-5 logprobs identical at all 512
    positions for plugin/stock and for the control pair; every output a
    2-cycle; one timed round, its released batch slow (a 40 s stall the JIT
    monitor did not report), released-b's marked with a Triton compile."""
    report = json.loads((REPO / "benchmarks" / "results" / "engine-e2e-2026-12-02"
                         / "run-J.json").read_text())
    ev = report["evidence"]
    assert report["exit_code"] == 0 and ev["problems"] == []
    assert [(s["server"], s["wave"], s["started_together"], s["healthy"]) for s in ev["starts"]] == [
        ("released", 0, 3, True), ("standin-plugin", 0, 3, True), ("released-b", 0, 3, True)]
    assert all(740 < s["start_s"] < 760 for s in ev["starts"])
    phase = ev["phases"]["dspark"]
    for pair in ("standin-plugin vs released", "released-b vs released"):
        got = phase["tokens"][pair]
        assert got["identical"] and got["tokens"] == 512
        assert got["logprobs"]["identical"] and got["logprobs"]["positions"] == 512
    assert {c for s in phase["servers"].values() for c in s["cycles"]} == {2}
    assert len(phase["rounds"]) == 1 and phase["rounds_with_jit"] == 1
    one = phase["rounds"][0]
    assert one["released"]["jit"] == [] and one["released"]["mean_tpot_ms"] > 150
    assert one["released-b"]["jit"] == ["_prepare_dflash_inputs_kernel"]
    assert phase["bench_tpot_without_jit"]["standin-plugin/released"] is None


def _rounds_with(monkeypatch, patterns: dict, rounds: int, seconds=None):
    """``_run_rounds`` with a fake round per phase: ``patterns[phase]`` says,
    round by round, whether a kernel compiled during its plugin batch."""
    result = {"phases": {p: {"rounds": [], "servers": {}} for p in patterns},
              "rounds_stopped": None}
    left = {p: iter(pat) for p, pat in patterns.items()}

    def fake_round(phase, out, servers, prompts, settings, round_no, layout=None, probe=None):
        names = [m[0] for m in evidence.PHASES[phase][1]]
        compiled = next(left[phase])
        out["rounds"].append({"round": round_no, **{
            n: {"jit": ["k"] if compiled and i == 1 else []} for i, n in enumerate(names)}})

    monkeypatch.setattr(evidence, "_one_round", fake_round)
    evidence._run_rounds(list(patterns), result, {}, [], _settings(evidence_rounds=rounds,
                         evidence_seconds=seconds), evidence.time.monotonic(), lambda r: None)
    return result


def test_rounds_go_on_until_enough_are_clean_and_each_phase_stops_at_its_own(monkeypatch):
    """A round with a compile does not count towards --evidence-rounds: the
    phase gets another; a phase with its clean rounds gets no more while the
    other is still short."""
    result = _rounds_with(monkeypatch, {"target": [True, False, True, False, False] + [False] * 9,
                                        "dspark": [False] * 14}, rounds=3)
    target, dspark = (result["phases"][p]["rounds"] for p in ("target", "dspark"))
    assert len(target) == 5 and len(dspark) == 3
    assert [evidence.is_clean(r, ("stock", "plugin", "stock-b")) for r in target] == [
        False, True, False, True, True]
    assert result["rounds_stopped"] is None


def test_rounds_stop_at_the_cap_and_say_how_many_were_clean(monkeypatch):
    result = _rounds_with(monkeypatch, {"target": [True] * 10}, rounds=3)
    assert len(result["phases"]["target"]["rounds"]) == evidence.ROUNDS_CAP * 3
    assert result["rounds_stopped"] == (
        "after 6 round(s) (target: 0 without a kernel compiled): the cap of 2 x --evidence-rounds")


def test_a_batch_not_read_against_its_log_is_not_clean(tmp_path):
    """Fail closed: no log to read, a batch missing or never marked, is no
    evidence that nothing compiled."""
    names = ("stock", "plugin", "stock-b")
    clean = {n: {"jit": []} for n in names}
    assert evidence.is_clean(clean, names)
    assert not evidence.is_clean({**clean, "plugin": {"jit": None}}, names)
    assert not evidence.is_clean({**clean, "plugin": {}}, names)
    assert not evidence.is_clean({k: v for k, v in clean.items() if k != "plugin"}, names)
    batch = {"began_unix": 1.0e9, "ended_unix": 1.0e9 + 1}
    assert evidence._batch_jit({"log": str(tmp_path / "gone.log")}, batch) is None
    assert evidence._batch_jit({}, batch) is None
    (tmp_path / "s.log").write_text("")
    assert evidence._batch_jit({"log": str(tmp_path / "s.log")}, batch) == []


def test_warm_up_does_not_end_on_rounds_whose_log_was_not_read(tmp_path, monkeypatch):
    class FakeServer:
        port = 1

        def metrics_text(self):
            return ""

    monkeypatch.setattr(evidence.bench_serve, "run", lambda argv: ({"mean_tpot_ms": 10.0}, ""))
    tries = evidence._warm_up(FakeServer(), {"log": str(tmp_path / "never-written.log")},
                              harness.Layout(tmp_path / "w"), _settings(evidence_client="bench-serve"))
    assert [t["jit"] for t in tries] == [None] * evidence.WARMUP_TRIES


def test_run_p_reads_as_the_readme_says():
    """Run P (2026-12-03, one H200, gpu-bound, DSpark, 4-token prompts):
    18 timed rounds, none with a kernel compiled; tokens and top-5 logprobs
    identical; the figures the README quotes, recomputed from the rounds."""
    report = json.loads((REPO / "benchmarks" / "results" / "engine-e2e-2026-12-03"
                         / "run-P.json").read_text())
    ev = report["evidence"]
    assert report["exit_code"] == 0 and ev["problems"] == []
    assert ev["workload"]["input_len"] == 4 and "--random-input-len 4" in ev["bench_command"]
    assert [s["start_s"] for s in ev["starts"]] == [386.3, 385.3, 386.3]
    phase = ev["phases"]["dspark"]
    for pair in ("standin-plugin vs released", "released-b vs released"):
        got = phase["tokens"][pair]
        assert got["identical"] and got["logprobs"]["identical"] and got["tokens"] == 512
    names = ("released", "standin-plugin", "released-b")
    assert len(phase["rounds"]) == 18 and phase["rounds_with_jit"] == 0
    assert all(evidence.is_clean(r, names) for r in phase["rounds"])
    for side in phase["servers"].values():
        assert [bool(t["jit"]) for t in side["warmup"]] == [True, False, False]
    from engine.harness import interval95
    again = evidence.phase_ratios(phase["rounds"], *names, "bench_tokens_per_s_per_request")
    mine, aa = again["standin-plugin/released"], again["released-b/released"]
    assert (mine["geomean"], mine["half_width_pct"]) == (1.1151, 7.15)
    assert (aa["geomean"], aa["half_width_pct"]) == (1.1103, 7.33)
    assert again["standin-plugin/released"] == phase["bench_tpot"]["standin-plugin/released"]
    vs_b = interval95([r["standin-plugin"]["bench_tokens_per_s_per_request"]
                       / r["released-b"]["bench_tokens_per_s_per_request"] for r in phase["rounds"]])
    assert (vs_b["geomean"], vs_b["low"], vs_b["high"]) == (1.0044, 0.9103, 1.1082)


def test_runs_q_and_r_read_as_the_readme_says():
    """Runs Q (target) and R (DSpark; its report as written after round 28,
    the machine gone before the run ended), 2026-12-03, one H200, gpu-bound,
    4-token prompts: every timed batch clean, tokens and top-5 logprobs
    identical in both phases, and the figures the README quotes."""
    from engine.harness import interval95

    base = REPO / "benchmarks" / "results" / "engine-e2e-2026-12-03"
    quoted = {
        "run-Q.json": ("target", ("stock", "plugin", "stock-b"), 40, [262.2, 260.2, 261.2],
                       (0.9732, 8.31), (1.0251, 8.19), (0.9495, 0.8805, 1.0238)),
        "run-R.json": ("dspark", ("released", "standin-plugin", "released-b"), 28,
                       [120.1, 241.2, 120.1],
                       (0.9245, 9.38), (0.9412, 7.10), (0.9822, 0.8943, 1.0789)),
    }
    for name, (phase_name, names, rounds, starts, mine_q, aa_q, vs_b_q) in quoted.items():
        report = json.loads((base / name).read_text())
        ev = report["evidence"]
        assert ev["problems"] == [] and ev["workload"]["input_len"] == 4
        assert [s["start_s"] for s in ev["starts"]] == starts
        phase = ev["phases"][phase_name]
        for pair in (f"{names[1]} vs {names[0]}", f"{names[2]} vs {names[0]}"):
            got = phase["tokens"][pair]
            assert got["identical"] and got["logprobs"]["identical"] and got["tokens"] == 512
        assert len(phase["rounds"]) == rounds and phase["rounds_with_jit"] == 0
        assert all(evidence.is_clean(r, names) for r in phase["rounds"])
        for side in phase["servers"].values():
            assert [bool(t["jit"]) for t in side["warmup"]][-2:] == [False, False]
        again = evidence.phase_ratios(phase["rounds"], *names, "bench_tokens_per_s_per_request")
        mine, aa = again[f"{names[1]}/{names[0]}"], again[f"{names[2]}/{names[0]}"]
        assert (mine["geomean"], mine["half_width_pct"]) == mine_q
        assert (aa["geomean"], aa["half_width_pct"]) == aa_q
        assert mine == phase["bench_tpot"][f"{names[1]}/{names[0]}"]
        vs_b = interval95([r[names[1]]["bench_tokens_per_s_per_request"]
                           / r[names[2]]["bench_tokens_per_s_per_request"] for r in phase["rounds"]])
        assert (vs_b["geomean"], vs_b["low"], vs_b["high"]) == vs_b_q
    assert json.loads((base / "run-Q.json").read_text())["exit_code"] == 0
    assert "exit_code" not in json.loads((base / "run-R.json").read_text())


def test_runs_s_t_and_u_read_as_the_readme_says():
    """Runs S, T and U, 2026-12-03, one H200, gpu-bound, target phase,
    4-token prompts: S (each server on 4 cores of its own, cold kernel
    caches) still compiling when its 640 s start limit ran out; T (shared
    CPUs, 60 rounds) and U (split CPUs, 37 rounds) clean, tokens and top-5
    logprobs identical, and a server's TPOT as spread out with the CPUs
    split as without: the figures the README quotes."""
    import statistics

    base = REPO / "benchmarks" / "results" / "engine-e2e-2026-12-03"
    s_run = json.loads((base / "run-S.json").read_text())
    assert s_run["exit_code"] == 1 and s_run["settings"]["start_timeout_s"] == 640
    assert s_run["evidence"]["workload"]["cpus"]["cores_per_server"] == 4
    assert [(st["healthy"], st["timed_out"]) for st in s_run["evidence"]["starts"]] == [
        (False, True)] * 3
    names = ("stock", "plugin", "stock-b")
    quoted = {  # run: cpus, rounds, starts, plugin/stock, stock-b/stock, per-server TPOT CV %
        "run-T.json": ("shared", 60, [217.2, 219.2, 217.2], (1.0069, 0.9512, 1.0657, 5.85),
                       (0.9618, 0.9061, 1.021, 6.15), (20.2, 18.8, 19.3)),
        "run-U.json": ("split", 37, [181.2, 180.2, 182.2], (1.0202, 0.964, 1.0798, 5.84),
                       (0.9963, 0.9368, 1.0595, 6.34), (16.6, 15.9, 21.4)),
    }
    for name, (mode, rounds, starts, mine_q, aa_q, cv_q) in quoted.items():
        report = json.loads((base / name).read_text())
        ev = report["evidence"]
        assert report["exit_code"] == 0 and ev["problems"] == []
        assert ev["workload"]["cpus"]["mode"] == mode and ev["workload"]["input_len"] == 4
        assert [st["start_s"] for st in ev["starts"]] == starts
        phase = ev["phases"]["target"]
        for pair in ("plugin vs stock", "stock-b vs stock"):
            got = phase["tokens"][pair]
            assert got["identical"] and got["logprobs"]["identical"] and got["tokens"] == 512
        assert len(phase["rounds"]) == rounds and phase["rounds_with_jit"] == 0
        assert all(evidence.is_clean(r, names) for r in phase["rounds"])
        again = evidence.phase_ratios(phase["rounds"], *names, "bench_tokens_per_s_per_request")
        for pair, q in (("plugin/stock", mine_q), ("stock-b/stock", aa_q)):
            got = again[pair]
            assert (got["geomean"], got["low"], got["high"], got["half_width_pct"]) == q
            assert got == phase["bench_tpot"][pair]
        cv = tuple(round(100 * statistics.pstdev(t) / statistics.mean(t), 1)
                   for t in ([r[n]["mean_tpot_ms"] for r in phase["rounds"]] for n in names))
        assert cv == cv_q
    split = json.loads((base / "run-U.json").read_text())["evidence"]["workload"]["cpus"]
    assert split["servers"] == {"target/stock": [0, 1, 2, 3], "target/plugin": [4, 5, 6, 7],
                                "target/stock-b": [8, 9, 10, 11]}
    assert split["client"] == [12, 13, 14, 15]


def test_run_v_reads_as_the_readme_says():
    """Run V, 2026-12-04, one H200, gpu-bound, target phase, 4-token prompts,
    shared CPUs, cold kernel caches: 240 clean rounds put the A/A interval
    under ±3 %, tokens and top-5 logprobs identical, the SM clock at 1980 MHz
    in every batch and the GPU idler in slow batches than in fast ones: the
    figures the READMEs quote."""
    import statistics

    report = json.loads((REPO / "benchmarks" / "results" / "engine-e2e-2026-12-04"
                         / "run-V.json").read_text())
    ev = report["evidence"]
    names = ("stock", "plugin", "stock-b")
    assert report["exit_code"] == 0 and ev["problems"] == []
    assert ev["workload"]["cpus"]["mode"] == "shared" and ev["workload"]["input_len"] == 4
    assert [st["start_s"] for st in ev["starts"]] == [504.4, 504.4, 503.3]
    phase = ev["phases"]["target"]
    for pair in ("plugin vs stock", "stock-b vs stock"):
        got = phase["tokens"][pair]
        assert got["identical"] and got["logprobs"]["identical"] and got["tokens"] == 512
    assert len(phase["rounds"]) == 240 and phase["rounds_with_jit"] == 0
    assert all(evidence.is_clean(r, names) for r in phase["rounds"])
    for key, quoted in (("bench_tokens_per_s_per_request",
                         {"plugin/stock": (1.017, 0.99, 1.0447, 2.73),
                          "stock-b/stock": (1.023, 0.9971, 1.0496, 2.6)}),
                        ("server_tokens_per_s_per_request",
                         {"plugin/stock": (1.017, 0.9899, 1.0449, 2.74),
                          "stock-b/stock": (1.0232, 0.9972, 1.0498, 2.61)})):
        again = evidence.phase_ratios(phase["rounds"], *names, key)
        for pair, q in quoted.items():
            got = again[pair]
            assert (got["geomean"], got["low"], got["high"], got["half_width_pct"]) == q
    for n in names:
        batches = [r[n] for r in phase["rounds"]]
        assert {b["machine"]["gpu"]["sm_mhz_min"] for b in batches} == {1980.0}
        tpot = [b["mean_tpot_ms"] for b in batches]
        assert 17.0 <= round(100 * statistics.pstdev(tpot) / statistics.mean(tpot), 1) <= 18.0
        util = {speed: statistics.mean(b["machine"]["gpu"]["util_pct_mean"] for b in batches
                                       if (b["mean_tpot_ms"] < 5.8) == (speed == "fast")
                                       and (b["mean_tpot_ms"] > 7.3 or speed == "fast"))
                for speed in ("fast", "slow")}
        assert 46 <= round(util["fast"]) <= 48 and 34 <= round(util["slow"]) <= 35
        assert round(statistics.mean(b["machine"]["gpu"]["util_pct_mean"] for b in batches)) in (40, 41)


def _topology(root: Path, siblings: dict[int, str]) -> Path:
    for cpu, text in siblings.items():
        folder = root / f"cpu{cpu}" / "topology"
        folder.mkdir(parents=True)
        (folder / "thread_siblings_list").write_text(text + "\n")
    return root


def test_cpus_are_grouped_by_physical_core_and_unknown_ones_stand_alone(tmp_path):
    # Two threads per core, siblings 8 apart (as many x86 hosts number them),
    # CPU 7 without a readable topology, CPU 9 outside the allowed set.
    root = _topology(tmp_path, {0: "0,8", 8: "0,8", 1: "1,9", 2: "2-3", 3: "2-3", 6: "6,14",
                                14: "6,14"})
    assert cpus.cores([0, 1, 2, 3, 6, 7, 8, 14], root) == [[0, 8], [1], [2, 3], [6, 14], [7]]


def test_split_gives_each_server_whole_cores_of_its_own_and_the_client_the_rest():
    groups = [[c, c + 8] for c in range(8)]  # 16 CPUs: 8 cores of 2 threads
    plan = cpus.split(groups, ["target/stock", "target/plugin", "target/stock-b"])
    assert plan["servers"] == {"target/stock": [0, 1, 8, 9], "target/plugin": [2, 3, 10, 11],
                               "target/stock-b": [4, 5, 12, 13]}
    assert plan["client"] == [6, 7, 14, 15]
    assert (plan["cores_per_server"], plan["threads_per_core"]) == (2, 2)
    every = [c for block in [*plan["servers"].values(), plan["client"]] for c in block]
    assert sorted(every) == list(range(16))  # each CPU in exactly one block
    # Six servers on 8 cores: one core each, the client the two left over.
    six = cpus.split(groups, [f"s{k}" for k in range(6)])
    assert six["client"] == [6, 7, 14, 15] and six["servers"]["s5"] == [5, 13]
    with pytest.raises(ValueError, match="3 physical core"):
        cpus.split(groups[:3], ["a", "b", "c"])


def test_a_pinned_command_runs_in_place_on_its_cpus(tmp_path):
    """The wrapper becomes the server (same pid: the harness stops its
    group, signals reach it) and the server runs where it was put."""
    import subprocess

    cpu = max(os.sched_getaffinity(0))
    probe = "import os; print(os.getpid(), sorted(os.sched_getaffinity(0)))"
    proc = subprocess.Popen(cpus.pinned([sys.executable, "-c", probe], [cpu]),
                            stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert out.split(None, 1) == [str(proc.pid), f"[{cpu}]\n"]


def test_split_cpus_put_each_server_and_the_client_apart(tmp_path, monkeypatch):
    """--evidence-cpus split: every server of the run on its own block, the
    harness (whose thread runs the client) on the last; the plan is in the
    report. Four single-thread 'cores' made of this machine's CPUs."""
    script = tmp_path / "fake_server.py"
    script.write_text(FAKE_SERVER)
    monkeypatch.setattr(evidence, "serve_command",
                        lambda model, port, **kw: [sys.executable, str(script), "--port", str(port)])
    mine = sorted(os.sched_getaffinity(0))
    a, b = mine[0], mine[-1]
    monkeypatch.setattr(cpus, "cores", lambda allowed: [[a], [b], [a], [b]])
    layout = harness.Layout(tmp_path / "work")
    try:
        result = evidence.run_evidence(layout, _settings(evidence_rounds=2, evidence_waves=1,
                                                         evidence_phases=("target",),
                                                         evidence_cpus="split"))
        client = sorted(os.sched_getaffinity(0))
    finally:
        os.sched_setaffinity(0, mine)
    assert result["problems"] == []
    plan = result["workload"]["cpus"]
    assert plan["mode"] == "split"
    assert plan["servers"] == {"target/stock": [a], "target/plugin": [b], "target/stock-b": [a]}
    assert plan["client"] == [b] and client == [b]
    for name, where in (("stock", a), ("plugin", b), ("stock-b", a)):
        log = Path(result["phases"]["target"]["servers"][name]["log"]).read_text()
        assert f"fake affinity {where}\n" in log, (name, log[:200])


def test_too_few_cores_to_split_run_shared_and_say_why(tmp_path, fake_servers, monkeypatch):
    monkeypatch.setattr(cpus, "cores", lambda allowed: [[0], [1]])
    mine = sorted(os.sched_getaffinity(0))
    layout = harness.Layout(tmp_path / "work")
    result = evidence.run_evidence(layout, _settings(evidence_rounds=2, evidence_waves=1,
                                                     evidence_phases=("target",),
                                                     evidence_cpus="split"))
    assert result["problems"] == []
    assert result["workload"]["cpus"] == {
        "mode": "shared",
        "not_split": "2 physical core(s) cannot give 3 servers and the client one each"}
    assert sorted(os.sched_getaffinity(0)) == mine  # the client was left where it was
    log = Path(result["phases"]["target"]["servers"]["plugin"]["log"]).read_text()
    assert f"fake affinity {','.join(map(str, mine))}\n" in log


def test_run_w_reads_as_the_readme_says():
    """Run W, 2026-12-05, one H200, gpu-bound, DSpark phase, 4-token prompts,
    cold kernel caches, cut after 15 rounds (no exit code: the report as last
    written): tokens and top-5 logprobs identical, the SM clock at 1980 MHz,
    the GPU's load falling as TPOT rises; and the DSpark figures of runs P, R
    and W pooled: the figures the READMEs quote."""
    import math
    import statistics

    base = REPO / "benchmarks" / "results"
    report = json.loads((base / "engine-e2e-2026-12-05" / "run-W.json").read_text())
    ev = report["evidence"]
    names = ("released", "standin-plugin", "released-b")
    assert "exit_code" not in report and ev["problems"] == []
    assert [st["start_s"] for st in ev["starts"]] == [790.6, 790.6, 790.5]
    phase = ev["phases"]["dspark"]
    for pair in ("standin-plugin vs released", "released-b vs released"):
        got = phase["tokens"][pair]
        assert got["identical"] and got["logprobs"]["identical"] and got["tokens"] == 512
    assert len(phase["rounds"]) == 15 and phase["rounds_with_jit"] == 0
    assert all(evidence.is_clean(r, names) for r in phase["rounds"])
    again = evidence.phase_ratios(phase["rounds"], *names, "bench_tokens_per_s_per_request")
    assert (again["standin-plugin/released"]["geomean"],
            again["standin-plugin/released"]["half_width_pct"]) == (1.0135, 12.96)
    assert (again["released-b/released"]["geomean"],
            again["released-b/released"]["half_width_pct"]) == (1.0359, 8.85)
    for n in names:
        batches = [r[n] for r in phase["rounds"]]
        assert {b["machine"]["gpu"]["sm_mhz_min"] for b in batches} == {1980.0}
        assert phase["tpot_against"][n]["gpu_util_pct"]["r_with_tpot"] <= -0.9
        assert 46 <= round(statistics.mean(b["machine"]["gpu"]["util_pct_mean"] for b in batches)) <= 48
    # Runs P, R and W pooled (61 rounds), each round's ratio in logs.
    pooled: dict[str, list[float]] = {}
    for path in (base / "engine-e2e-2026-12-03" / "run-P.json", base / "engine-e2e-2026-12-03" / "run-R.json",
                 base / "engine-e2e-2026-12-05" / "run-W.json"):
        per_round = json.loads(path.read_text())["evidence"]["phases"]["dspark"]["bench_tpot"]["per_round"]
        for pair, values in per_round.items():
            pooled.setdefault(pair, []).extend(math.log(v) for v in values)
    quoted = {"standin-plugin/released": (0.999, 0.945, 1.057, 5.80),
              "released-b/released": (1.012, 0.967, 1.059, 4.64)}
    for pair, (ratio, low, high, half) in quoted.items():
        logs = pooled[pair]
        assert len(logs) == 61
        mean, width = statistics.mean(logs), 1.96 * statistics.stdev(logs) / math.sqrt(len(logs))
        assert (round(math.exp(mean), 3), round(math.exp(mean - width), 3),
                round(math.exp(mean + width), 3), round(100 * (math.exp(width) - 1), 2)) == (ratio, low, high, half)
