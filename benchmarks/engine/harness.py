"""The engine cases: which vLLM, with or without the plugin, and what each
must show; and the cost run (stock against plugin, no speculative decoding)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from engine import metrics
from engine.server import Server, free_port, serve_command

PLUGIN_ENTRY_POINT = "dspark_attn_plugin"
HARNESS_MODULE = "dspark_e2e_dummy_weights"
DSPARK = {"method": "dspark", "num_speculative_tokens": 5}
PROMPTS = [
    "The quick brown fox",
    "DeepSeek-V4 with a DSpark drafter",
    "Once upon a time",
    "vLLM serves",
    "Speculative decoding drafts",
]
# Lines the plugin writes (vLLM's logger, so in vLLM's format).
PATCHED = "dspark-attn-plugin patched"
RESCUED = "warmed up without topk_indices_buffer"
NOT_AFFECTED = "is not affected by vllm-project/vllm#50615"
DISABLED = "is disabled by DSPARK_ATTN_PLUGIN=off"


@dataclass(frozen=True)
class Case:
    name: str
    standin: bool  # the affected stand-in instead of vLLM as installed
    plugin: bool  # the plugin (from its wheel) on the server's path
    plugin_off: bool  # DSPARK_ATTN_PLUGIN=off
    expect: str  # "crash" (never healthy, the #50298 assertion) or "serve"
    about: str


CASES = {
    c.name: c
    for c in (
        Case("standin-stock", True, False, False, "crash",
             "affected stand-in, no plugin: the regression in a real engine"),
        Case("standin-plugin", True, True, False, "serve",
             "affected stand-in + plugin: starts, serves, DSpark drafts"),
        Case("released-plugin", False, True, False, "serve",
             "vLLM as installed (0.26.0: not affected) + plugin: left alone"),
        Case("standin-plugin-off", True, True, True, "crash",
             "affected stand-in + plugin + DSPARK_ATTN_PLUGIN=off: the crash again"),
    )
}


@dataclass
class Settings:
    # On an H200 a machine's first start (kernels compiled) took 7 min 39 s and
    # 10 min 21 s; later ones 1.5 to 4 min.
    start_timeout_s: float = 900.0
    max_model_len: int = 1024
    gpu_memory_utilization: float = 0.3
    requests: int = 5
    max_tokens: int = 32
    cost_rounds: int = 3
    throughput_runs: int = 3
    tensor_parallel_size: int = 1
    # None: vLLM's choice (multiprocessing on one node); "ray": Ray actors run
    # the model (one RayWorkerWrapper per GPU), as across nodes.
    distributed_executor_backend: str | None = None
    enforce_eager: bool = False  # vLLM's default: CUDA graphs on
    # None: vLLM's own list of CUDA graph sizes.
    cudagraph_capture_sizes: tuple | None = None
    paired_rounds: int = 6
    aa_rounds: int = 1
    throughput_batch: int = 8
    throughput_max_tokens: int = 256
    # None: from the memory free while profiling (the evidence run sets its own).
    kv_cache_memory_bytes: int | None = None
    # None: vLLM's default. At or under the largest CUDA graph size (plus
    # the drafter's slots with DSpark), every step runs at a captured size:
    # no kernel meets a new token count while serving.
    max_num_batched_tokens: int | None = None
    # The evidence run (engine/evidence.py). DSpark first: its first server,
    # started alone, compiles the target's kernels and the drafter's.
    evidence_phases: tuple = ("dspark", "target")
    # At least 20 per phase: fewer leave the interval wider than the effect sought.
    evidence_rounds: int = 20
    # None: no time limit; else no round starts that would end after it.
    evidence_seconds: float | None = None
    evidence_batch: int = 64
    evidence_max_tokens: int = 512
    evidence_max_num_seqs: int = 64
    evidence_token_max_tokens: int = 64
    # Each timed round: "bench-serve" (vLLM's `vllm bench serve`, random
    # prompts of evidence_input_len tokens) or "completions" (one batched
    # /v1/completions call, the harness's own clock).
    evidence_client: str = "bench-serve"
    evidence_input_len: int = 128
    # 2: the first server alone (it compiles the kernels, the others then
    # find them cached), then the rest at once; 1: every server at once (a
    # cold machine's compiles overlap: one cold start instead of two).
    evidence_waves: int = 2
    # The checkpoint's config: "tiny" or "gpu-bound" (engine/checkpoint.py).
    model_size: str = "tiny"
    # "shared": the kernel places every process; "split": each evidence
    # server on whole cores of its own, the client on the rest (engine/cpus.py).
    evidence_cpus: str = "shared"


@dataclass
class Layout:
    """Folders the harness builds under ``work``."""

    work: Path
    model: Path = field(init=False)
    standin: Path = field(init=False)
    plugin: Path = field(init=False)
    harness: Path = field(init=False)
    logs: Path = field(init=False)

    def __post_init__(self) -> None:
        self.work = Path(self.work)
        self.model = self.work / "model"
        self.standin = self.work / "standin"
        self.plugin = self.work / "plugin"
        self.harness = self.work / "harness"
        self.logs = self.work / "logs"


# --- set-up ------------------------------------------------------------------


def installed_vllm() -> dict:
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.origin:
        return {"version": None, "path": None}
    try:
        version = importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        version = None
    return {"version": version, "path": str(Path(spec.origin).parent)}


def plugin_in_base_env() -> bool:
    """Whether vLLM would load the plugin without the harness adding it."""
    eps = importlib.metadata.entry_points(group="vllm.general_plugins")
    return any(ep.name == PLUGIN_ENTRY_POINT for ep in eps)


def probe_gpu() -> dict:
    """torch's view of the GPU, asked in a child process (CUDA is never
    initialised in the harness)."""
    code = (
        "import json, torch\n"
        "ok = torch.cuda.is_available()\n"
        "print(json.dumps({'torch': torch.__version__, 'cuda': ok,\n"
        "  'name': torch.cuda.get_device_name(0) if ok else None,\n"
        "  'count': torch.cuda.device_count() if ok else 0,\n"
        "  'capability': list(torch.cuda.get_device_capability(0)) if ok else None}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        return {"cuda": False, "error": proc.stderr.strip().splitlines()[-1:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def install_plugin_wheel(wheel: Path, dest: Path) -> str:
    """``pip install --no-deps --target dest wheel``; the plugin's version."""
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
         "--no-compile", "--disable-pip-version-check", "--target", str(dest), str(wheel)],
        check=True, capture_output=True, text=True,
    )
    found = sorted(dest.glob("dspark_attn_plugin-*.dist-info"))
    return found[0].name[len("dspark_attn_plugin-"): -len(".dist-info")] if found else "?"


def install_plugin_dist(dest: Path) -> None:
    """The harness's own dummy-weights plugin (``dummy_weights_plugin.py``)
    as an installed distribution with a ``vllm.general_plugins`` entry point."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(__file__).with_name("dummy_weights_plugin.py"), dest / f"{HARNESS_MODULE}.py")
    info = dest / f"{HARNESS_MODULE}-0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {HARNESS_MODULE}\nVersion: 0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        f"[vllm.general_plugins]\n{HARNESS_MODULE} = {HARNESS_MODULE}:register\n",
        encoding="utf-8",
    )


def server_env(case_standin: bool, plugin: bool, plugin_off: bool, layout: Layout,
               base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of one server: the harness's, with the stand-in
    first on ``PYTHONPATH`` when asked, the plugin's folder when asked, and
    offline settings (nothing is downloaded)."""
    env = dict(os.environ if base is None else base)
    env.pop("VLLM_PLUGINS", None)  # every plugin on the path loads
    env.pop("DSPARK_ATTN_PLUGIN", None)
    paths = [str(layout.standin)] if case_standin else []
    paths.append(str(layout.harness))
    if plugin:
        paths.append(str(layout.plugin))
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    if plugin_off:
        env["DSPARK_ATTN_PLUGIN"] = "off"
    env.update(
        HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1", VLLM_DEEP_GEMM_WARMUP="skip",
        VLLM_LOGGING_COLOR="0", PYTHONUNBUFFERED="1",
    )
    return env


# --- the cases ---------------------------------------------------------------


def case_command(layout: Layout, settings: Settings, port: int) -> list[str]:
    """The ``vllm serve`` command of every case (DSpark on)."""
    return serve_command(
        layout.model, port, speculative=DSPARK,
        max_model_len=settings.max_model_len,
        gpu_memory_utilization=settings.gpu_memory_utilization,
        tensor_parallel_size=settings.tensor_parallel_size,
        enforce_eager=settings.enforce_eager,
        distributed_executor_backend=settings.distributed_executor_backend,
        cudagraph_capture_sizes=settings.cudagraph_capture_sizes,
        kv_cache_memory_bytes=settings.kv_cache_memory_bytes,
        max_num_batched_tokens=settings.max_num_batched_tokens,
    )


def run_case(case: Case, layout: Layout, settings: Settings, assertion_line: int) -> dict:
    log_path = layout.logs / f"{case.name}.log"
    port = free_port()
    command = case_command(layout, settings, port)
    env = server_env(case.standin, case.plugin, case.plugin_off, layout)
    result: dict = {"about": case.about, "expect": case.expect, "log": str(log_path)}
    with Server(command, env, log_path, port) as server:
        result.update(observe_start(server, settings.start_timeout_s))
        if result["healthy"]:
            result.update(_serve_requests(server, settings))
    result["diagnosis"] = read_log(log_path)
    result["problems"] = check_case(case, result, layout, assertion_line,
                                    settings.tensor_parallel_size,
                                    settings.distributed_executor_backend)
    result["ok"] = not result["problems"]
    return result


def read_log(log_path: Path) -> dict:
    """The server's log as ``dspark-attn-plugin diagnose`` reads it (the
    plugin's own log reader, from the wheel under test: engine_e2e.py puts
    it on the path)."""
    from dspark_attn_plugin.diagnose import diagnose, read_paths

    return diagnose(read_paths([str(log_path)])).to_dict()


def observe_start(server: Server, timeout_s: float) -> dict:
    """How ``server``'s start ended: healthy (and after how long), exited
    (its exit code), or still starting when ``timeout_s`` ran out
    (``timed_out``: returns then, without waiting for an exit)."""
    start_s = server.wait_healthy(timeout_s)
    if start_s is not None:
        return {"healthy": True, "start_s": round(start_s, 1), "timed_out": False}
    exit_code = server.proc.poll()
    return {
        "healthy": False, "start_s": None, "timed_out": exit_code is None,
        "exit_code": exit_code, "last_health_error": server.last_health_error,
    }


def _timed_out(r: dict) -> bool:
    # (Reports written before ``timed_out`` existed: still running = no exit code.)
    return r.get("timed_out", r.get("exit_code") is None)


def _not_healthy(r: dict) -> str:
    if _timed_out(r):
        return ("not healthy and still starting when --start-timeout ran out (a machine's "
                "first start compiles kernels: 8 to 11 min on an H200)")
    return f"server exited (code {r.get('exit_code')}) before it became healthy"


def _serve_requests(server: Server, settings: Settings) -> dict:
    answered, tokens, errors = 0, 0, []
    for prompt in (PROMPTS * settings.requests)[: settings.requests]:
        try:
            reply = server.complete([prompt], settings.max_tokens)
            answered += 1
            tokens += reply["usage"]["completion_tokens"]
        except Exception as exc:  # reported, not raised: the case fails
            errors.append(repr(exc))
    time.sleep(1.0)  # let the last step's stats reach the API server's counters
    try:
        counters = metrics.spec_decode_counters(server.metrics_text())
    except Exception as exc:
        counters, errors = {}, [*errors, f"/metrics: {exc!r}"]
    return {
        "requests_sent": settings.requests,
        "requests_answered": answered,
        "completion_tokens": tokens,
        "spec_decode": counters,
        "request_errors": errors,
    }


def model_processes(diagnosis: dict) -> list[dict]:
    """The processes that ran the model: the engine core at TP 1, each
    worker above; with Ray, each RayWorkerWrapper actor."""
    return [p for p in diagnosis["processes"] if p["runs_model"]]


def model_worker_name(tensor_parallel_size: int, backend: str | None) -> str:
    """How the log names a process that runs the model."""
    if backend == "ray":
        return "RayWorkerWrapper"  # one actor per GPU, at TP 1 too
    return "Worker" if tensor_parallel_size > 1 else "EngineCore"


def check_case(case: Case, r: dict, layout: Layout, assertion_line: int,
               tensor_parallel_size: int = 1, backend: str | None = None) -> list[str]:
    """What ``r`` lacks of what ``case`` must show (empty: as expected),
    checked in every process that runs the model."""
    problems = []
    d = r["diagnosis"]
    model = model_processes(d)
    names = [p["process"] for p in model]
    want = model_worker_name(tensor_parallel_size, backend)
    if len(model) != tensor_parallel_size or not all(n.startswith(want) for n in names):
        problems.append(f"expected {tensor_parallel_size} {want} process(es) running the model, "
                        f"the log shows {names or 'none'}")

    def states(p):
        return [x["state"] for x in p["plugin"]]

    patched_anywhere = [p["process"] for p in d["processes"] if "patched" in states(p)]
    if case.expect == "crash":
        if r["healthy"]:
            problems.append("server became healthy; expected the #50298 assertion")
        elif _timed_out(r):
            problems.append(_not_healthy(r))
        if d["verdict"] != "crash-50615":
            problems.append(f"diagnose says {d['verdict']}, not the #50615 crash: {d['summary']}")
        for p in model:
            crash = p["crash_50615"]
            if crash is None:
                problems.append(f"{p['process']}: no #50615 AssertionError")
                continue
            if not crash["file"].startswith(str(layout.standin)):
                problems.append(f"{p['process']}: assertion raised in {crash['file']}, "
                                "not the stand-in's flashmla.py")
            if crash["line"] != assertion_line:
                problems.append(f"{p['process']}: assertion at line {crash['line']}, "
                                f"inserted at {assertion_line}")
        if patched_anywhere:
            problems.append(f"the plugin patched in {patched_anywhere} although it should not run")
        if case.plugin_off:
            for p in model:
                if "disabled" not in states(p):
                    problems.append(f"{p['process']}: no 'disabled by DSPARK_ATTN_PLUGIN=off' line")
        return problems
    if not r["healthy"]:
        problems.append(_not_healthy(r))
        return problems
    if r["requests_answered"] != r["requests_sent"]:
        problems.append(f"{r['requests_answered']}/{r['requests_sent']} requests answered")
    spec = r.get("spec_decode", {})
    for name in ("num_drafts", "num_accepted_tokens"):
        if not spec.get(name, 0) > 0:
            problems.append(f"vllm:spec_decode_{name} is {spec.get(name)}")
    if case.standin:
        if d["verdict"] != "protected":
            problems.append(f"diagnose says {d['verdict']}: {d['summary']}")
        for p in model:
            if "patched" not in states(p):
                problems.append(f"{p['process']}: no 'patched' line")
            if not p["rescued"]:
                problems.append(f"{p['process']}: no '{RESCUED}' line")
    else:
        if d["verdict"] != "not-needed":
            problems.append(f"diagnose says {d['verdict']}: {d['summary']}")
        for p in model:
            if "not-affected" not in states(p):
                problems.append(f"{p['process']}: no 'not affected' line from the plugin")
        if patched_anywhere:
            problems.append(f"the plugin patched a build it should leave alone ({patched_anywhere})")
    return problems


# --- the cost run --------------------------------------------------------------


def run_cost(layout: Layout, settings: Settings, save=lambda result: None) -> dict:
    """Stock and plugin alternately on the affected stand-in, without
    speculative decoding (the target model gives every layer its buffer, so
    stock starts too): start time, and greedy decode throughput. ``save`` is
    called with the result at once and again after each server; the result
    is filled in place, so a stop keeps each measurement already made."""
    prompts = (PROMPTS * settings.throughput_batch)[: settings.throughput_batch]
    result: dict = {
        "workload": {
            "prompts": len(prompts), "max_tokens": settings.throughput_max_tokens,
            "temperature": 0.0, "ignore_eos": True, "speculative": None,
        },
        "rounds": settings.cost_rounds,
        "stock": {"start_s": [], "tokens_per_s": []},
        "plugin": {"start_s": [], "tokens_per_s": []},
        "summary": None,
        "problems": [],
    }
    save(result)
    for round_no in range(settings.cost_rounds):
        for side in ("stock", "plugin"):
            _cost_server(side, round_no, prompts, layout, settings, result)
            summarize_cost(result)
            save(result)
    return result


def summarize_cost(result: dict) -> None:
    """Set ``result["summary"]``: plugin/stock for start time and throughput."""
    result["summary"] = {
        key: ratio(result["plugin"][key], result["stock"][key])
        for key in ("start_s", "tokens_per_s")
    }


def _cost_server(side: str, round_no: int, prompts: list[str], layout: Layout,
                 settings: Settings, result: dict) -> None:
    port = free_port()
    command = serve_command(
        layout.model, port, speculative=None,
        max_model_len=settings.max_model_len,
        gpu_memory_utilization=settings.gpu_memory_utilization,
        enforce_eager=settings.enforce_eager,
    )
    env = server_env(True, side == "plugin", False, layout)
    log_path = layout.logs / f"cost-{side}-{round_no}.log"
    with Server(command, env, log_path, port) as server:
        start = observe_start(server, settings.start_timeout_s)
        if not start["healthy"]:
            result["problems"].append(f"{side} round {round_no}: {_not_healthy(start)} ({log_path})")
            return
        result[side]["start_s"].append(start["start_s"])
        try:
            # Not measured: the workload's prompts, 16 tokens each (the first
            # measured run on the H200 ran at a quarter of the later ones'
            # speed when warmed with one short prompt).
            server.complete(prompts, 16)
            for _ in range(settings.throughput_runs):
                t0 = time.perf_counter()
                reply = server.complete(prompts, settings.throughput_max_tokens)
                elapsed = time.perf_counter() - t0
                tokens = reply["usage"]["completion_tokens"]
                result[side]["tokens_per_s"].append(round(tokens / elapsed, 1))
        except Exception as exc:  # reported, not raised: the other servers still run
            result["problems"].append(f"{side} round {round_no}: {exc!r} ({log_path})")


def ratio(plugin: list[float], stock: list[float]) -> dict | None:
    """plugin/stock of the medians, with the spread: the lowest and highest
    ratio any plugin sample makes with any stock sample."""
    if not plugin or not stock:
        return None
    return {
        "plugin_median": statistics.median(plugin),
        "stock_median": statistics.median(stock),
        "ratio": round(statistics.median(plugin) / statistics.median(stock), 4),
        "ratio_min": round(min(plugin) / max(stock), 4),
        "ratio_max": round(max(plugin) / min(stock), 4),
        "n": [len(plugin), len(stock)],
    }


# --- the paired cost run ---------------------------------------------------------

# Two-sided 95 % quantiles of Student's t, by degrees of freedom.
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
         9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131}


def interval95(ratios: list[float]) -> dict | None:
    """Median and a 95 % confidence interval of the mean log-ratio (t), as
    ratios."""
    import math

    if not ratios:
        return None
    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    out = {"n": len(ratios), "median": round(statistics.median(ratios), 4),
           "geomean": round(math.exp(mean), 4), "low": None, "high": None, "half_width_pct": None}
    if len(ratios) > 1:
        half = _T975.get(len(ratios) - 1, 1.96) * statistics.stdev(logs) / math.sqrt(len(ratios))
        out.update(low=round(math.exp(mean - half), 4), high=round(math.exp(mean + half), 4),
                   half_width_pct=round(100 * (math.exp(half) - 1), 2))
    return out


def run_paired_cost(layout: Layout, settings: Settings, gpus: int, save=lambda r: None) -> dict:
    """Stock and plugin at once, the same greedy batch sent to both at the
    same moment, ``paired_rounds`` rounds (the GPUs swapped every round where
    there are two; both servers on GPU 0 where there is one), then
    ``aa_rounds`` rounds of stock against stock: the method's own noise.
    Each round starts its two servers together. The ratio of a batch is
    plugin tokens/s over stock tokens/s; a round's is the median of its
    batches'."""
    prompts = (PROMPTS * settings.throughput_batch)[: settings.throughput_batch]
    result: dict = {
        "workload": {"prompts": len(prompts), "max_tokens": settings.throughput_max_tokens,
                     "batches_per_round": settings.throughput_runs, "temperature": 0.0,
                     "ignore_eos": True, "speculative": None,
                     "enforce_eager": settings.enforce_eager},
        "gpus": gpus, "rounds": [], "aa_rounds": [], "summary": None, "aa_summary": None,
        "problems": [],
    }
    save(result)
    if gpus < 2:
        result["method"] = ("one GPU: stock, plugin and a second stock server started on it "
                            "one after the other, each round one batch sent to all three at "
                            "the same moment")
        _one_gpu_session(prompts, layout, settings, result, save)
        return result
    result["method"] = ("two GPUs: each round starts stock and plugin together, one on each "
                        "GPU, swapped every round; then stock against stock the same way")
    plan = [("plugin", r) for r in range(settings.paired_rounds)]
    plan += [("aa", r) for r in range(settings.aa_rounds)]
    for kind, round_no in plan:
        one = _paired_round(kind, round_no, prompts, layout, settings, gpus, result)
        result["rounds" if kind == "plugin" else "aa_rounds"].append(one)
        summarize_paired(result)
        save(result)
    return result


def _one_gpu_session(prompts: list[str], layout: Layout, settings: Settings, result: dict,
                     save) -> None:
    """One GPU: swapping GPUs means nothing there, so the three servers are
    started once (one after the other: see ``_start_together``), and every
    round sends one batch to all three at the same moment: plugin/stock and
    stock-b/stock come from the same moment of the same GPU."""
    names = ("stock", "plugin", "stock-b") if settings.aa_rounds else ("stock", "plugin")
    servers, sides = _start_together(names, {n: "0" for n in names}, "session", 0, layout,
                                     settings)
    result["sides"] = sides
    try:
        if all(sides[n]["healthy"] for n in names):
            _both(servers, names, prompts, 16)  # warm-up, not measured
            for round_no in range(settings.paired_rounds):
                rates = _both(servers, names, prompts, settings.throughput_max_tokens)
                result["rounds"].append({"round": round_no, "batches": [rates], "sides": {},
                                         "ratio": round(rates["plugin"] / rates["stock"], 4)})
                if "stock-b" in names:
                    result["aa_rounds"].append({"round": round_no, "batches": [rates], "sides": {},
                                                "ratio": round(rates["stock-b"] / rates["stock"], 4)})
                summarize_paired(result)
                save(result)
        else:
            result["problems"].append("; ".join(
                f"{n}: {_not_healthy(sides[n])}" for n in names if not sides[n]["healthy"]))
    except Exception as exc:  # reported, not raised
        result["problems"].append(f"one-GPU session: {exc!r}")
    finally:
        for server in servers.values():
            server.stop()
    _read_kv(sides)
    starts = {n: [sides[n]["start_s"]] if sides[n].get("start_s") else [] for n in names}
    summarize_paired(result)
    result["start_s"] = ratio(starts["plugin"], starts["stock"])
    save(result)


def _start_together(names, devices: dict, kind: str, round_no: int, layout: Layout,
                    settings: Settings) -> tuple[dict, dict]:
    """Start one server per name at once (CUDA_VISIBLE_DEVICES from
    ``devices``); wait until each is healthy or has failed. The servers are
    returned running: the caller stops them."""
    import threading

    servers, sides = {}, {}
    # Servers that share a GPU start one after the other: vLLM sizes its KV
    # cache from the memory it sees used while it profiles, and a neighbour
    # starting at the same moment takes that memory away ("No available
    # memory for the cache blocks", seen on one H200 on 2026-12-01).
    one_by_one = len(set(devices.values())) < len(names)
    starts: dict = {}
    for name in names:
        port = free_port()
        command = serve_command(
            layout.model, port, speculative=None, max_model_len=settings.max_model_len,
            gpu_memory_utilization=settings.gpu_memory_utilization,
            enforce_eager=settings.enforce_eager,
        )
        env = server_env(True, name == "plugin", False, layout)
        env["CUDA_VISIBLE_DEVICES"] = devices[name]
        log_path = layout.logs / f"paired-{kind}-{round_no}-{name}.log"
        servers[name] = Server(command, env, log_path, port).__enter__()
        sides[name] = {"log": str(log_path), "device": devices[name]}
        if one_by_one:
            try:
                starts[name] = observe_start(servers[name], settings.start_timeout_s)
            except BaseException:
                for server in servers.values():
                    server.stop()
                raise
    threads = [threading.Thread(target=lambda n=n: starts.__setitem__(
        n, observe_start(servers[n], settings.start_timeout_s))) for n in names
        if n not in starts]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    except BaseException:  # a stop signal: no server is left running
        for server in servers.values():
            server.stop()
        raise
    for name in names:
        sides[name].update(starts[name])
    return servers, sides


def _read_kv(sides: dict) -> None:
    """Each stopped server's KV cache size and maximum concurrency, from its log."""
    for side in sides.values():
        d = read_log(Path(side["log"]))
        engine = next(iter(model_processes(d)), {})
        side.update(kv_cache_tokens=engine.get("kv_cache_tokens"),
                    max_concurrency=engine.get("max_concurrency"))


def summarize_paired(result: dict) -> None:
    def ratios(rounds):
        return [r["ratio"] for r in rounds if r.get("ratio")]

    result["summary"] = interval95(ratios(result["rounds"]))
    result["aa_summary"] = interval95(ratios(result["aa_rounds"]))
    starts = {"stock": [], "plugin": []}
    for r in result["rounds"]:
        for side in ("stock", "plugin"):
            if r["sides"].get(side, {}).get("start_s") is not None:
                starts[side].append(r["sides"][side]["start_s"])
    result["start_s"] = ratio(starts["plugin"], starts["stock"])


def _paired_round(kind: str, round_no: int, prompts: list[str], layout: Layout,
                  settings: Settings, gpus: int, result: dict) -> dict:
    names = ("stock", "plugin") if kind == "plugin" else ("stock", "stock-b")
    devices = {names[0]: str(round_no % 2), names[1]: str((round_no + 1) % 2)}
    one: dict = {"kind": kind, "round": round_no, "batches": []}
    servers, one["sides"] = _start_together(names, devices, kind, round_no, layout, settings)
    try:
        if not all(one["sides"][n]["healthy"] for n in names):
            result["problems"].append(f"{kind} round {round_no}: " + "; ".join(
                f"{n}: {_not_healthy(one['sides'][n])}" for n in names
                if not one["sides"][n]["healthy"]))
        else:
            _both(servers, names, prompts, 16)  # warm-up, not measured
            for _ in range(settings.throughput_runs):
                one["batches"].append(_both(servers, names, prompts, settings.throughput_max_tokens))
    except Exception as exc:  # reported, not raised: the next round still runs
        result["problems"].append(f"{kind} round {round_no}: {exc!r}")
    finally:
        for server in servers.values():
            server.stop()
    _read_kv(one["sides"])
    batch_ratios = [b[names[1]] / b[names[0]] for b in one["batches"] if b.get(names[0])]
    one["ratio"] = round(statistics.median(batch_ratios), 4) if batch_ratios else None
    return one


def _both(servers: dict, names: tuple, prompts: list[str], max_tokens: int) -> dict:
    """Send the same batch to both servers at the same moment; tokens/s each."""
    import threading

    barrier = threading.Barrier(len(names))
    rates: dict = {}
    errors: list = []

    def send(name: str) -> None:
        try:
            barrier.wait(timeout=60)
            t0 = time.perf_counter()
            reply = servers[name].complete(prompts, max_tokens)
            elapsed = time.perf_counter() - t0
            rates[name] = round(reply["usage"]["completion_tokens"] / elapsed, 1)
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=send, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return rates
