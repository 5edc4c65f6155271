"""benchmarks/engine_e2e.py, the parts that run without a GPU: the stand-in
on real vLLM sources, the checkpoint through vLLM's own config class, the
harness's HTTP client, log and metrics reading, arguments and the report."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import vllm_releases
from conftest import run_python
from dspark_attn_plugin.warmup_shape import Verdict, classify_source, find_warmup_branch

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "engine_e2e.py"
RESULTS = REPO / "benchmarks" / "results" / "engine-e2e-2026-11-30"
START_DETACHED = REPO / "benchmarks" / "engine" / "start_detached.sh"
COLLECT_DETACHED = REPO / "benchmarks" / "engine" / "collect_detached.sh"
sys.path.insert(0, str(REPO / "benchmarks"))

from engine import harness, metrics  # noqa: E402
from engine.checkpoint import tiny_config, write_checkpoint  # noqa: E402
from engine.server import Server, free_port  # noqa: E402
from engine.standin import ASSERTION, insert_assertion, make_standin  # noqa: E402


def _wheel() -> Path:
    wheels = sorted((REPO / "dist").glob("dspark_attn_plugin-*.whl"))
    assert wheels, "make test builds dist/ first"
    return wheels[-1]


# --- the affected stand-in ----------------------------------------------------


def _first_statement_of_warmup(source: str) -> str:
    import ast

    tree = ast.parse(source)
    cls = next(n for n in tree.body if getattr(n, "name", "") == "DeepseekV4FlashMLAAttention")
    method = next(n for n in cls.body if getattr(n, "name", "") == "forward_mqa")
    return ast.unparse(find_warmup_branch(method).body[0])


def test_standin_on_installed_0_27_1_puts_the_assertion_first(flashmla):
    source = Path(flashmla.__file__).read_text(encoding="utf-8")
    assert classify_source(source).verdict is Verdict.AFFECTED
    assert _first_statement_of_warmup(source) != ASSERTION

    result = insert_assertion(source)
    assert result.inserted
    assert _first_statement_of_warmup(result.source) == ASSERTION
    assert result.source.splitlines()[result.line - 1].strip() == ASSERTION
    assert classify_source(result.source).verdict is Verdict.AFFECTED
    # One line added, nothing else changed; a second pass changes nothing.
    assert result.source.splitlines()[: result.line - 1] == source.splitlines()[: result.line - 1]
    assert result.source.splitlines()[result.line:] == source.splitlines()[result.line - 1:]
    again = insert_assertion(result.source)
    assert (again.inserted, again.source, again.line) == (False, result.source, result.line)


@pytest.mark.network
def test_standin_makes_released_0_26_0_affected_and_the_plugin_patches_it(tmp_path):
    wheel = vllm_releases.wheel("0.26.0")
    assert classify_source(vllm_releases.flashmla_source(wheel)).verdict is Verdict.NOT_AFFECTED
    installed = vllm_releases.install_target(wheel, tmp_path / "site")
    info = make_standin(installed / "vllm", tmp_path / "standin")
    standin_source = Path(info["flashmla"]).read_text(encoding="utf-8")
    assert classify_source(standin_source).verdict is Verdict.AFFECTED
    assert info["metadata"] == ["vllm-0.26.0.dist-info"]
    # The installed release itself is untouched.
    assert classify_source(
        (installed / "vllm/models/deepseek_v4/nvidia/flashmla.py").read_text()
    ).verdict is Verdict.NOT_AFFECTED

    probe = """
        import json, sys, torch
        torch.accelerator.empty_cache = lambda: None   # test stub: no accelerator
        import vllm, vllm.plugins
        vllm.plugins.load_general_plugins()
        from vllm.models.deepseek_v4.nvidia import flashmla
        from vllm.v1.worker import workspace
        from dspark_attn_plugin import patch, synthetic
        workspace.init_workspace_manager(torch.device("cpu"))
        layer = synthetic.make_layer(flashmla.DeepseekV4FlashMLAAttention, synthetic.SWA_ONLY_NO_BUFFER)
        q, kv, positions, output = synthetic.qkv()
        try:
            with synthetic.warmup_context():
                layer.forward_mqa(q, kv, positions, output)
            failed = None
        except AssertionError as exc:
            import traceback
            failed = traceback.extract_tb(exc.__traceback__)[-1].lineno
        print(json.dumps({"version": vllm.__version__, "file": flashmla.__file__,
                          "patched": patch.is_patched(flashmla),
                          "failed_at": failed}))
    """
    env = {"PYTHONPATH": info["path"]}
    plugin = json.loads(run_python(probe, env=env).stdout.strip().splitlines()[-1])
    assert plugin == {"version": "0.26.0", "file": info["flashmla"], "patched": True,
                      "failed_at": None}
    stock = json.loads(
        run_python(probe, env={**env, "DSPARK_ATTN_PLUGIN": "off"}).stdout.strip().splitlines()[-1]
    )
    assert (stock["patched"], stock["failed_at"]) == (False, info["assertion_line"])


# --- the checkpoint -------------------------------------------------------------


def test_checkpoint_loads_through_vllms_config_and_an_offline_tokenizer(tmp_path):
    folder = write_checkpoint(tmp_path / "model")
    proc = run_python(
        f"""
        import json
        from transformers import AutoTokenizer
        from vllm.transformers_utils.config import get_config
        from vllm.transformers_utils.configs.deepseek_v4 import DeepseekV4Config
        config = get_config({str(folder)!r}, trust_remote_code=False)
        tok = AutoTokenizer.from_pretrained({str(folder)!r})
        ids = tok("DeepSeek-V4 with a DSpark drafter")["input_ids"]
        print(json.dumps({{
            "config_class": type(config).__name__,
            "is_vllm_class": isinstance(config, DeepseekV4Config),
            "compress_ratios": config.compress_ratios,
            "vocab": len(tok),
            "specials": [tok.bos_token_id, tok.eos_token_id, tok.pad_token_id,
                         tok.convert_tokens_to_ids("<|dspark_noise|>")],
            "round_trip": tok.decode(ids),
            "every_id_decodes": all(tok.convert_ids_to_tokens(i) is not None for i in range(len(tok))),
        }}))
        """,
        env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    config = tiny_config()
    assert report["config_class"] == "DeepseekV4Config" and report["is_vllm_class"]
    assert report["compress_ratios"] == config["compress_ratios"]
    assert report["vocab"] == config["vocab_size"]
    assert report["specials"] == [0, 1, 2, config["dspark_noise_token_id"]]
    assert report["round_trip"] == "DeepSeek-V4 with a DSpark drafter"
    assert report["every_id_decodes"]


# --- the harness's own pieces ------------------------------------------------------


def test_server_reaches_loopback_health_despite_a_proxy_and_stops_its_group(tmp_path):
    (tmp_path / "health").write_text("ok")
    port = free_port()
    env = {**os.environ, "http_proxy": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
    command = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1",
               "--directory", str(tmp_path), str(port)]
    with Server(command, env, tmp_path / "server.log", port) as server:
        assert server.wait_healthy(30) is not None, server.last_health_error
        pgid = server.proc.pid
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)


def test_two_servers_started_together_never_get_one_port_even_when_the_kernel_repeats_it(
        monkeypatch):
    """The kernel hands out the same free port twice in a row now and then;
    two servers on one port answer for each other (the second dies on bind
    while the first answers its /health): the harness never gives a port twice."""
    import socket

    from engine import server as server_module

    ports = iter([47001, 47001, 47001, 47002])

    class Repeating:
        def __init__(self, *a):
            self.port = next(ports)

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

        def bind(self, address):
            pass

        def getsockname(self):
            return ("127.0.0.1", self.port)

    monkeypatch.setattr(server_module, "_GIVEN", set())
    monkeypatch.setattr(socket, "socket", Repeating)
    assert [free_port(), free_port()] == [47001, 47002]


def test_a_server_that_died_is_not_healthy_though_another_process_answers_on_its_port(tmp_path):
    """Its process exited (a bind error, say) while some other server holds
    the port and answers /health: not healthy, with its exit code."""
    (tmp_path / "health").write_text("ok")
    port = free_port()
    other = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1",
             "--directory", str(tmp_path), str(port)]
    with Server(other, dict(os.environ), tmp_path / "other.log", port) as holder:
        assert holder.wait_healthy(30) is not None, holder.last_health_error
        dead = Server([sys.executable, "-c", "raise SystemExit(3)"],
                      dict(os.environ), tmp_path / "dead.log", port)
        with dead:
            dead.proc.wait()
            real = dead.proc

            class LookedBeforeItDied:
                """Its first poll() ran while it still started: the race."""
                calls = 0

                def poll(self):
                    self.calls += 1
                    return None if self.calls == 1 else real.poll()

                def __getattr__(self, name):
                    return getattr(real, name)

            dead.proc = LookedBeforeItDied()
            assert dead.wait_healthy(30) is None
            assert real.poll() == 3


def _sleeper(tmp_path, code: str) -> Server:
    """A server that never answers /health: it runs ``code`` instead."""
    return Server([sys.executable, "-c", code], dict(os.environ), tmp_path / "s.log", free_port())


def test_a_start_still_running_at_the_timeout_is_reported_as_timed_out_not_waited_for(tmp_path):
    with _sleeper(tmp_path, "import time; time.sleep(120)") as server:
        start = harness.observe_start(server, 2)
        assert server.proc.poll() is None, "returned while the server still runs"
    assert start["healthy"] is False and start["timed_out"] is True
    assert start["exit_code"] is None and start["start_s"] is None
    problems = harness.check_case(harness.CASES["standin-plugin"],
                                  {**start, "diagnosis": harness.read_log(server.log_path)},
                                  harness.Layout(tmp_path), 90)
    assert any("still starting when --start-timeout ran out" in p for p in problems)


def test_a_start_that_exits_is_reported_with_its_exit_code(tmp_path):
    with _sleeper(tmp_path, "raise SystemExit(7)") as server:
        start = harness.observe_start(server, 60)
    assert start == {**start, "healthy": False, "timed_out": False, "exit_code": 7}
    problems = harness.check_case(harness.CASES["released-plugin"],
                                  {**start, "diagnosis": harness.read_log(server.log_path)},
                                  harness.Layout(tmp_path), 90)
    assert "server exited (code 7) before it became healthy" in problems


def test_a_stop_interrupted_by_a_second_signal_still_kills_the_server_group(tmp_path):
    import signal

    class Interrupted(BaseException):
        pass

    def interrupt(signum, frame):
        raise Interrupted

    # A server that ignores SIGINT, so that stop() waits out its grace time.
    server = _sleeper(tmp_path, "import signal, time; signal.signal(signal.SIGINT, "
                                "signal.SIG_IGN); print('ready', flush=True); time.sleep(120)")
    with server:
        while "ready" not in (tmp_path / "s.log").read_text():
            time.sleep(0.1)
        pgid = server.proc.pid
        previous = signal.signal(signal.SIGALRM, interrupt)
        signal.alarm(2)
        try:
            with pytest.raises(Interrupted):
                server.stop(grace_s=60)
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
        server.proc.wait(timeout=30)
        with pytest.raises(ProcessLookupError):
            os.killpg(pgid, 0)


def with_log(measured: dict, log_name: str) -> dict:
    """A committed case result, its log read as the harness reads it now."""
    return {**measured, "diagnosis": harness.read_log(RESULTS / log_name)}


def test_crash_is_read_from_a_real_vllm_serve_log():
    d = harness.read_log(RESULTS / "run-A-standin-stock.log")
    [engine] = harness.model_processes(d)
    crash = engine["crash_50615"]
    assert engine["process"].startswith("EngineCore")
    assert crash["file"].endswith("/standin/vllm/models/deepseek_v4/nvidia/flashmla.py")
    assert crash["statement"] == ASSERTION and crash["line"] == 90
    assert crash["under_profile_run"]


def test_plugin_lines_name_their_process_in_a_real_log():
    d = harness.read_log(RESULTS / "run-0-standin-plugin.log")
    patched = {p["process"].split()[0] for p in d["processes"]
               if "patched" in [x["state"] for x in p["plugin"]]}
    assert patched == {"APIServer", "EngineCore"}
    rescued = [(p["process"].split()[0], p["rescued"]) for p in d["processes"] if p["rescued"]]
    assert rescued == [("EngineCore", ["model.layers.4.attn"])]


def test_spec_decode_counters_sum_labels_and_skip_created():
    page = "\n".join([
        "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.",
        "# TYPE vllm:spec_decode_num_drafts_total counter",
        'vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny-dsv4"} 95.0',
        'vllm:spec_decode_num_drafts_created{engine="0",model_name="tiny-dsv4"} 1.7e9',
        'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="tiny-dsv4"} 475.0',
        'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="tiny-dsv4"} 40.0',
        'vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="tiny-dsv4"} 24.0',
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 30.0',
    ])
    assert metrics.spec_decode_counters(page) == {
        "num_drafts": 95.0, "num_draft_tokens": 475.0, "num_accepted_tokens": 64.0,
    }
    assert metrics.spec_decode_counters("") == {}


def test_case_checks_accept_the_measured_crash_and_reject_a_served_crash_case():
    run = json.loads((RESULTS / "run-A.json").read_text(encoding="utf-8"))
    measured = with_log(run["cases"]["standin-stock"], "run-A-standin-stock.log")
    layout = harness.Layout(Path(run["standin"]["path"]).parent)
    case = harness.CASES["standin-stock"]
    line = run["standin"]["assertion_line"]
    assert harness.check_case(case, measured, layout, line) == []
    assert harness.check_case(case, measured, layout, line + 1)
    served = with_log({**measured, "healthy": True}, "run-D-standin-plugin.log")
    problems = harness.check_case(case, served, layout, line)
    assert any("healthy" in p for p in problems)
    assert any("no #50615 AssertionError" in p for p in problems)


def test_the_second_h200_run_passes_the_checks_it_passed_there():
    run = json.loads((RESULTS / "run-C.json").read_text(encoding="utf-8"))
    layout = harness.Layout(Path(run["standin"]["path"]).parent)
    line = run["standin"]["assertion_line"]
    for name in ("standin-stock", "standin-plugin-off", "released-plugin"):
        measured = with_log(run["cases"][name], f"run-C-{name}.log")
        assert harness.check_case(harness.CASES[name], measured, layout, line) == [], name
    # Its standin-plugin came up 1-2 s after the 600 s start timeout (a JSON
    # from before ``timed_out`` was reported: still running is exit_code null).
    measured = with_log(run["cases"]["standin-plugin"], "run-C-standin-plugin.log")
    problems = harness.check_case(harness.CASES["standin-plugin"], measured, layout, line)
    assert len(problems) == 1 and "still starting when --start-timeout ran out" in problems[0]


def test_the_third_h200_run_served_with_the_plugin_and_its_cost_summary_follows_from_its_samples():
    run = json.loads((RESULTS / "run-D.json").read_text(encoding="utf-8"))
    layout = harness.Layout(Path(run["standin"]["path"]).parent)
    measured = with_log(run["cases"]["standin-plugin"], "run-D-standin-plugin.log")
    assert harness.check_case(harness.CASES["standin-plugin"], measured, layout,
                              run["standin"]["assertion_line"]) == []
    assert measured["spec_decode"]["num_accepted_tokens"] > 0
    cost = run["cost"]
    assert len(cost["stock"]["tokens_per_s"]) == len(cost["plugin"]["tokens_per_s"]) == 9
    recorded = cost.pop("summary")
    harness.summarize_cost(cost)
    assert cost["summary"] == recorded


def test_plugin_off_case_needs_the_disabled_line_from_every_model_process():
    run = json.loads((RESULTS / "run-C.json").read_text(encoding="utf-8"))
    layout = harness.Layout(Path(run["standin"]["path"]).parent)
    measured = with_log(run["cases"]["standin-plugin-off"], "run-C-standin-plugin-off.log")
    case = harness.CASES["standin-plugin-off"]
    assert harness.check_case(case, measured, layout, 90) == []
    d = copy.deepcopy(measured["diagnosis"])
    for p in harness.model_processes(d):
        p["plugin"] = []
    engine = harness.model_processes(d)[0]["process"]
    assert harness.check_case(case, {**measured, "diagnosis": d}, layout, 90) == [
        f"{engine}: no 'disabled by DSPARK_ATTN_PLUGIN=off' line"
    ]
    # The stock case never has the plugin, so it needs no such line.
    assert harness.check_case(harness.CASES["standin-stock"], {**measured, "diagnosis": d},
                              layout, 90) == []


def _run_d_with_model_in(names: list[str]):
    """Run D's served stand-in, its engine core's lines given to processes
    named ``names`` instead: (case, measured, altered, workers, layout)."""
    run = json.loads((RESULTS / "run-D.json").read_text(encoding="utf-8"))
    measured = with_log(run["cases"]["standin-plugin"], "run-D-standin-plugin.log")
    d = copy.deepcopy(measured["diagnosis"])
    engine = harness.model_processes(d)[0]
    engine["runs_model"] = False
    workers = [{**copy.deepcopy(engine), "process": name, "runs_model": True} for name in names]
    d["processes"] += workers
    layout = harness.Layout(Path(run["standin"]["path"]).parent)
    return (harness.CASES["standin-plugin"], measured, {**measured, "diagnosis": d}, workers,
            layout)


def test_checks_hold_per_worker_at_tensor_parallel_2():
    """A worker that did not say 'patched' fails the case, though the other did."""
    case, measured, tp2, workers, layout = _run_d_with_model_in(
        [f"Worker_TP{i} pid={900 + i}" for i in range(2)])
    assert harness.check_case(case, tp2, layout, 90, tensor_parallel_size=2) == []
    assert harness.check_case(case, tp2, layout, 90, tensor_parallel_size=1)  # 2 workers, not 1
    workers[1]["plugin"] = []
    assert harness.check_case(case, tp2, layout, 90, tensor_parallel_size=2) == [
        "Worker_TP1 pid=901: no 'patched' line"
    ]


def test_serve_case_needs_drafts_accepted():
    run = json.loads((RESULTS / "run-D.json").read_text(encoding="utf-8"))
    case = harness.CASES["standin-plugin"]
    good = with_log(run["cases"]["standin-plugin"], "run-D-standin-plugin.log")
    layout = harness.Layout(Path(run["standin"]["path"]).parent)
    assert harness.check_case(case, good, layout, 90) == []
    no_accept = {**good, "spec_decode": {"num_drafts": 95.0, "num_accepted_tokens": 0.0}}
    assert harness.check_case(case, no_accept, layout, 90) == [
        "vllm:spec_decode_num_accepted_tokens is 0.0"
    ]


def test_ratio_reports_medians_and_the_spread():
    r = harness.ratio([99.0, 101.0, 100.0], [100.0, 98.0, 102.0])
    assert r["ratio"] == 1.0 and r["n"] == [3, 3]
    assert r["ratio_min"] == round(99 / 102, 4) and r["ratio_max"] == round(101 / 98, 4)
    assert harness.ratio([], [1.0]) is None


# --- the command ---------------------------------------------------------------------


def _script(*args, **env):
    full_env = {**os.environ, **env}
    full_env.pop("VLLM_PLUGINS", None)
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                          text=True, timeout=600, env=full_env)


@pytest.mark.parametrize(
    "args, says",
    [
        (["--cases", "standin-stock,bogus"], "unknown case(s) bogus"),
        (["--cases", "none"], "nothing to run"),
        (["--cost-rounds", "0", "--cost"], "must be positive"),
    ],
    ids=["unknown-case", "nothing", "zero-rounds"],
)
def test_bad_arguments_exit_2(tmp_path, args, says):
    proc = _script("--plugin-wheel", str(_wheel()), "--work", str(tmp_path / "w"), *args)
    assert proc.returncode == 2 and says in proc.stderr
    assert "Traceback" not in proc.stderr


def test_not_a_wheel_and_a_used_work_folder_exit_2(tmp_path):
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("")
    proc = _script("--plugin-wheel", str(tmp_path / "nope.whl"), "--work", str(tmp_path / "w"))
    assert proc.returncode == 2 and "not a wheel file" in proc.stderr
    proc = _script("--plugin-wheel", str(_wheel()), "--work", str(tmp_path / "used"))
    assert proc.returncode == 2 and "is not empty" in proc.stderr


def test_without_a_gpu_it_exits_3_and_says_why(tmp_path):
    proc = _script("--plugin-wheel", str(_wheel()), "--work", str(tmp_path / "w"))
    assert proc.returncode == 3
    assert "cannot run here: no CUDA GPU visible to torch" in proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["exit_code"] == 3 and report["machine"]["gpu"]["cuda"] is False
    assert not (tmp_path / "w").exists(), "nothing is built when it cannot run"


def test_dry_run_builds_everything_and_reports_the_plan(tmp_path):
    out = tmp_path / "report.json"
    proc = _script("--plugin-wheel", str(_wheel()), "--work", str(tmp_path / "w"),
                   "--dry-run", "--cost", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report == json.loads(out.read_text())
    assert {"tool", "date", "machine", "vllm", "plugin_wheel", "plugin_version", "settings",
            "speculative_config", "environment_problems", "model", "standin", "plan",
            "cost", "exit_code"} <= set(report)
    import dspark_attn_plugin

    assert report["plugin_version"] == dspark_attn_plugin.__version__
    assert report["vllm"]["version"] == "0.27.1"
    assert list(report["plan"]) == list(harness.CASES)
    assert report["speculative_config"] == {"method": "dspark", "num_speculative_tokens": 5}
    work = tmp_path / "w"
    assert (work / "model" / "config.json").is_file() and (work / "model" / "tokenizer.json").is_file()
    assert (work / "plugin" / "dspark_attn_plugin" / "__init__.py").is_file()
    entry_points = next((work / "harness").glob("*.dist-info")) / "entry_points.txt"
    assert "[vllm.general_plugins]" in entry_points.read_text()
    standin = Path(report["standin"]["flashmla"])
    assert not standin.is_symlink() and (work / "standin" / "vllm" / "__init__.py").is_symlink()
    assert standin.read_text().splitlines()[report["standin"]["assertion_line"] - 1].strip() == ASSERTION


def test_dummy_weights_plugin_finalises_after_vllms_own_dummy_loader():
    proc = run_python(
        f"""
        import sys, torch
        sys.path.insert(0, {str(REPO / "benchmarks" / "engine")!r})
        import dummy_weights_plugin
        from vllm.config import LoadConfig
        from vllm.model_executor.model_loader.dummy_loader import DummyModelLoader

        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = torch.nn.Linear(4, 4)
                self.inner.finalize_mhc_broadcast_weights = self.finalize
                self.finalized_with = None
            def finalize(self):
                self.finalized_with = self.inner.weight.detach().clone()

        dummy_weights_plugin.register()
        dummy_weights_plugin.register()   # idempotent: one wrapper
        model = Model()
        torch.nn.init.zeros_(model.inner.weight)
        DummyModelLoader(LoadConfig(load_format="dummy")).load_weights(model, None)
        # Called once, after vLLM's loader filled the weights.
        assert model.finalized_with is not None
        assert bool(model.finalized_with.abs().sum() > 0)
        assert torch.equal(model.finalized_with, model.inner.weight)
        wrapped = DummyModelLoader.load_weights
        assert getattr(wrapped, "_dspark_e2e_finalizes_mhc") is True
        print("OK")
        """
    )
    assert proc.stdout.strip().endswith("OK")


def _as_if_on_a_gpu(monkeypatch) -> None:
    # This machine has no GPU and the test venv has the plugin: the script
    # would stop before the cases. Stand those two probes in.
    monkeypatch.setattr(harness, "probe_gpu", lambda: {
        "torch": "x", "cuda": True, "name": "GPU", "capability": [9, 0]})
    monkeypatch.setattr(harness, "plugin_in_base_env", lambda: False)


def test_a_stop_signal_keeps_the_cases_done_and_exits_128_plus_the_signal(tmp_path, monkeypatch):
    import signal

    import engine_e2e

    _as_if_on_a_gpu(monkeypatch)
    ran = []

    def run_case(case, layout, settings, line):
        ran.append(case.name)
        if len(ran) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)  # the signal interrupts this
            pytest.fail("SIGTERM did not stop the run")
        return {"ok": True, "problems": []}

    monkeypatch.setattr(harness, "run_case", run_case)
    out = tmp_path / "report.json"
    code = engine_e2e.main(["--plugin-wheel", str(_wheel()), "--work", str(tmp_path / "w"),
                            "--cases", "standin-stock,standin-plugin,released-plugin",
                            "--cost", "--out", str(out)])
    report = json.loads(out.read_text())
    assert code == 128 + signal.SIGTERM == report["exit_code"]
    assert ran == ["standin-stock", "standin-plugin"]
    assert list(report["cases"]) == ["standin-stock"] and report["cost"] is None
    assert report["stopped"] == {"signal": "SIGTERM", "during": "case standin-plugin"}
    assert report["ok"] is False


def test_a_stop_during_the_cost_keeps_the_stopped_servers_samples_in_the_summary(
        tmp_path, monkeypatch):
    import signal

    import engine_e2e

    _as_if_on_a_gpu(monkeypatch)

    def cost_server(side, round_no, prompts, layout, settings, result):
        result[side]["start_s"].append(100.0)
        result[side]["tokens_per_s"].append(300.0 if side == "stock" else 330.0)
        if side == "plugin":  # stopped while this server still runs
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)
            pytest.fail("SIGTERM did not stop the run")

    monkeypatch.setattr(harness, "_cost_server", cost_server)
    out = tmp_path / "report.json"
    code = engine_e2e.main(["--plugin-wheel", str(_wheel()), "--work", str(tmp_path / "w"),
                            "--cases", "none", "--cost", "--out", str(out)])
    report = json.loads(out.read_text())
    assert code == 143 and report["stopped"] == {"signal": "SIGTERM", "during": "cost"}
    assert report["cost"]["plugin"]["tokens_per_s"] == [330.0]
    assert report["cost"]["summary"]["tokens_per_s"]["ratio"] == 1.1


def test_detached_run_is_started_and_collected(tmp_path):
    job, dest = tmp_path / "job", tmp_path / "dest"
    env = {**os.environ, "PYTHON": sys.executable}
    env.pop("VLLM_PLUGINS", None)
    start = subprocess.run(
        ["bash", str(START_DETACHED), "300", str(job),
         "--plugin-wheel", str(_wheel()), "--work", str(tmp_path / "w")],
        capture_output=True, text=True, timeout=60, env=env,
    )
    assert start.returncode == 0, start.stderr
    assert (job / "benchmarks" / "engine_e2e.py").is_file()
    collect = subprocess.run(
        ["bash", str(COLLECT_DETACHED), str(job),
         str(tmp_path / "w"), "300", str(dest)],
        capture_output=True, text=True, timeout=360,
    )
    # No GPU here: the run ends with the script's own exit 3, and its report.
    assert collect.returncode == 0 and "over: exit 3" in collect.stdout, collect.stdout
    assert (dest / "rc").read_text().strip() == "3" and (dest / "done").is_file()
    assert json.loads((dest / "report.json").read_text())["exit_code"] == 3
    again = subprocess.run(["bash", str(START_DETACHED),
                            "300", str(job), "--cases", "none"], capture_output=True, text=True)
    assert again.returncode == 2 and "is not empty" in again.stderr


def test_detached_run_is_stopped_at_its_deadline_with_the_scripts_own_status(tmp_path):
    # A stand-in "python" that outlives the deadline: SIGTERM reaches it, and
    # rc keeps its status (143), not timeout's own 124.
    slow = tmp_path / "slow-python"
    slow.write_text("#!/bin/sh\nexec sleep 120\n")
    slow.chmod(0o755)
    job = tmp_path / "job"
    start = subprocess.run(
        ["bash", str(START_DETACHED), "2", str(job),
         "--cases", "none"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHON": str(slow)},
    )
    assert start.returncode == 0, start.stderr
    collect = subprocess.run(
        ["bash", str(COLLECT_DETACHED), str(job),
         str(tmp_path / "w"), "60", str(tmp_path / "dest")],
        capture_output=True, text=True, timeout=120,
    )
    assert collect.returncode == 0, collect.stdout
    assert (tmp_path / "dest" / "rc").read_text().strip() == "143"


def test_interval95_of_round_ratios():
    r = harness.interval95([1.0, 1.02, 0.98, 1.01, 0.99, 1.0])
    assert r["n"] == 6 and r["median"] == 1.0
    assert r["low"] < 1.0 < r["high"] and 0 < r["half_width_pct"] < 2
    assert harness.interval95([1.1])["low"] is None
    assert harness.interval95([]) is None


def test_paired_summary_reads_rounds_and_aa_rounds_apart():
    result = {
        "rounds": [{"ratio": x, "sides": {"stock": {"start_s": 80.0}, "plugin": {"start_s": 81.0}}}
                   for x in (0.99, 1.0, 1.01)],
        "aa_rounds": [{"ratio": 1.03, "sides": {}}],
    }
    harness.summarize_paired(result)
    assert result["summary"]["n"] == 3 and result["summary"]["median"] == 1.0
    assert result["aa_summary"]["median"] == 1.03
    assert result["start_s"]["ratio"] == round(81 / 80, 4)


FAKE_SERVER = r'''
import json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
port = int(sys.argv[sys.argv.index("--port") + 1])
print("(EngineCore pid=4242) INFO 12-01 00:00:00 [model_runner.py:1] Model loading took 0.5 GiB", flush=True)
print("(EngineCore pid=4242) INFO 12-01 00:00:00 [kv_cache_utils.py:1] GPU KV cache size: 1,000 tokens", flush=True)
print("(EngineCore pid=4242) INFO 12-01 00:00:00 [kv_cache_utils.py:2] Maximum concurrency for 1,024 tokens per request: 0.98x", flush=True)
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(200); self.end_headers()
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        time.sleep(0.01)
        out = json.dumps({"usage": {"completion_tokens": body["max_tokens"] * len(body["prompt"])}}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(out))); self.end_headers()
        self.wfile.write(out)
ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
'''


@pytest.mark.parametrize("gpus", [1, 2])
def test_paired_cost_runs_its_rounds_against_servers_that_answer(tmp_path, monkeypatch, gpus):
    """The paired cost's plumbing, with stand-in servers that answer like
    vllm serve (no GPU): every round measured, ratios summarised, KV read
    from each server's log, every server stopped."""
    script = tmp_path / "fake_server.py"
    script.write_text(FAKE_SERVER)
    devices = []

    def fake_command(model, port, **kwargs):
        return [sys.executable, str(script), "--port", str(port)]

    monkeypatch.setattr(harness, "serve_command", fake_command)
    real_start = harness._start_together

    def start(names, devs, *a, **k):
        devices.append(dict(devs))
        return real_start(names, devs, *a, **k)

    monkeypatch.setattr(harness, "_start_together", start)
    settings = harness.Settings(start_timeout_s=60, paired_rounds=3, aa_rounds=1,
                                throughput_runs=2, throughput_max_tokens=4)
    layout = harness.Layout(tmp_path / "work")
    saved = []
    result = harness.run_paired_cost(layout, settings, gpus, saved.append)
    assert result["problems"] == []
    assert len(result["rounds"]) == 3 and all(r["ratio"] for r in result["rounds"])
    assert result["summary"]["n"] == 3 and result["aa_summary"]["n"] >= 1
    assert result["start_s"] is not None
    if gpus == 2:
        # stock and plugin on different GPUs, swapped every round
        assert [d["stock"] for d in devices[:3]] == ["0", "1", "0"]
        assert all(d["stock"] != d.get("plugin", d.get("stock-b")) for d in devices)
        sides = result["rounds"][0]["sides"]
    else:
        assert devices == [{"stock": "0", "plugin": "0", "stock-b": "0"}]
        sides = result["sides"]
    assert {s["kv_cache_tokens"] for s in sides.values()} == {1000}
    assert {s["max_concurrency"] for s in sides.values()} == {0.98}


def test_the_cuda_graph_run_passes_its_checks():
    """2026-12-01, CUDA graphs on (vLLM's default): the stand-in crashes at
    the inserted assertion without the plugin and serves with it."""
    run = json.loads((RESULTS.parent / "engine-e2e-2026-12-01" / "run-E.json").read_text())
    assert run["settings"]["enforce_eager"] is False
    layout = harness.Layout(Path(run["standin"]["path"]).parent)
    line = run["standin"]["assertion_line"]
    for name in ("standin-stock", "standin-plugin"):
        measured = {**run["cases"][name], "diagnosis": harness.read_log(
            RESULTS.parent / "engine-e2e-2026-12-01" / f"run-E-{name}.log")}
        assert harness.check_case(harness.CASES[name], measured, layout, line) == [], name
    # The graphs were captured in the plugin's server.
    log = (RESULTS.parent / "engine-e2e-2026-12-01" / "run-E-standin-plugin.log").read_text()
    assert "Graph capturing finished" in log and "--enforce-eager" not in log


def test_the_tensor_parallel_2_run_passes_its_checks_in_both_workers():
    """2026-12-01, two H200s, --tensor-parallel-size 2: every worker crashes
    at the inserted assertion (and says the plugin is off, where it is)."""
    folder = RESULTS.parent / "engine-e2e-2026-12-01"
    run = json.loads((folder / "run-F.json").read_text())
    assert run["settings"]["tensor_parallel_size"] == 2
    layout = harness.Layout(Path(run["standin"]["path"]).parent)
    line = run["standin"]["assertion_line"]
    for name in ("standin-stock", "standin-plugin-off"):
        measured = {**run["cases"][name],
                    "diagnosis": harness.read_log(folder / f"run-F-tp2-{name}.log")}
        assert harness.check_case(harness.CASES[name], measured, layout, line,
                                  tensor_parallel_size=2) == [], name
        # One worker without its crash fails the case.
        d = copy.deepcopy(measured["diagnosis"])
        harness.model_processes(d)[1]["crash_50615"] = None
        assert harness.check_case(harness.CASES[name], {**measured, "diagnosis": d}, layout,
                                  line, tensor_parallel_size=2)


def test_dry_run_with_the_ray_backend_serves_every_case_through_ray(tmp_path):
    proc = _script("--plugin-wheel", str(_wheel()), "--work", str(tmp_path / "w"),
                   "--dry-run", "--distributed-executor-backend", "ray")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["settings"]["distributed_executor_backend"] == "ray"
    for name, plan in report["plan"].items():
        command = plan["command"]
        at = command.index("--distributed-executor-backend")
        assert command[at + 1] == "ray", name
    plain = _script("--plugin-wheel", str(_wheel()), "--work", str(tmp_path / "v"), "--dry-run")
    for plan in json.loads(plain.stdout.strip().splitlines()[-1])["plan"].values():
        assert "--distributed-executor-backend" not in plan["command"]


def test_with_ray_the_checks_want_every_ray_worker_and_not_the_engine_core():
    """With Ray the model runs in RayWorkerWrapper actors (the log's
    ``(RayWorkerWrapper pid=N, ip=A)`` lines), one per GPU, at TP 1 too."""
    case, measured, ray_run, actors, layout = _run_d_with_model_in(
        [f"RayWorkerWrapper pid={700 + i}, ip=10.0.0.{i}" for i in range(2)])
    assert harness.check_case(case, ray_run, layout, 90, 2, "ray") == []
    assert harness.check_case(case, ray_run, layout, 90, 2, None)  # not Worker_TPn
    assert harness.check_case(case, measured, layout, 90, 1, "ray")  # the engine core ran it
    actors[0]["plugin"] = []
    assert harness.check_case(case, ray_run, layout, 90, 2, "ray") == [
        "RayWorkerWrapper pid=700, ip=10.0.0.0: no 'patched' line"
    ]


def test_dry_run_passes_fewer_cuda_graph_sizes_to_vllm(tmp_path):
    proc = _script("--plugin-wheel", str(_wheel()), "--work", str(tmp_path / "w"),
                   "--dry-run", "--cudagraph-capture-sizes", "1,8,64")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    command = report["plan"]["standin-plugin"]["command"]
    at = command.index("--cudagraph-capture-sizes")
    assert command[at + 1:at + 4] == ["1", "8", "64"]
    for bad in ("1,x", "0,8"):
        proc = _script("--plugin-wheel", str(_wheel()), "--work", str(tmp_path / "v"),
                       "--dry-run", "--cudagraph-capture-sizes", bad)
        assert proc.returncode == 2 and "--cudagraph-capture-sizes" in proc.stderr
