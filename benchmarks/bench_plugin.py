"""What dspark-attn-plugin costs, measured side by side with stock vLLM.

Run where the plugin and vLLM 0.27.x are installed (``make bench`` does it in
the test venv):

    python benchmarks/bench_plugin.py [--json] [--device cpu|cuda]
                                      [--upstream DIR] [--repeats N]

Prints a table; with ``--json`` the last line is one JSON object:

- ``empty_call_ns``: one call of an empty method with ``forward_mqa``'s
  signature (self and four arguments): the unit for the dispatch figures;
- ``dispatch_added_sparse_ns`` / ``dispatch_added_swa_ns``: added cost per
  steady-state ``forward_mqa`` call, plugin minus stock, on real
  ``DeepseekV4FlashMLAAttention`` instances (compress_ratio 4 with buffer;
  SWA-only without buffer), in an idle step: real metadata with no prefill
  and no decode tokens, so vLLM's own body runs its bookkeeping, no kernels;
- ``register_us`` (and ``import_us``): ``register()`` (and importing the
  package) in fresh interpreter processes, vLLM not imported;
- ``register_heavy_imports``: torch or vLLM modules that importing the plugin
  and calling ``register()`` pulled in (should be none);
- ``patch_at_import_ms``: classifying the loaded code and building the patch,
  which the post-import hook does once per process;
- ``reserved_bytes``: per layer kind, the warmup reservation with the plugin
  on this vLLM, and vLLM 0.28.0's own (``upstream``), measured on a 0.28.0
  overlay in a subprocess (``--upstream DIR``; by default installed with
  ``pip install --no-deps --target`` into the cache on first use).

All figures are medians. Targets: dispatch_added_sparse_ns <= 2 x
empty_call_ns, dispatch_added_swa_ns <= 4 x empty_call_ns, register_us <= 500,
no heavy imports, plugin == upstream for every kind.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import textwrap
import timeit
from pathlib import Path

UPSTREAM_VERSION = "0.28.0"
CACHE = Path(
    os.environ.get("DSPARK_ATTN_PLUGIN_CACHE", "~/.cache/dspark-attn-plugin")
).expanduser()

# Runs in a fresh interpreter: what register() costs and imports there. The
# stdlib modules that every vLLM process has loaded before it loads plugins
# (vLLM imports them itself) are imported first, so import_us is the plugin's
# own cost; vLLM itself is not imported, so register() takes its slowest path
# (looking vLLM up on sys.path).
REGISTER_PROBE = """
import sys, time
import importlib.util, logging, threading
before = set(sys.modules)
t0 = time.perf_counter_ns()
import dspark_attn_plugin
t1 = time.perf_counter_ns()
dspark_attn_plugin.register()
t2 = time.perf_counter_ns()
new = sorted(set(sys.modules) - before)
heavy = [m for m in new if m.split(".")[0] in ("torch", "vllm")]
print((t1 - t0) / 1e3, (t2 - t1) / 1e3, ",".join(heavy))
"""

# Runs on the vLLM 0.28.0 overlay: its own warmup reservation per layer kind.
UPSTREAM_PROBE = """
import json, sys, torch
device = sys.argv[1]
if not torch.accelerator.is_available():
    # Benchmark harness stub: nothing to release without an accelerator.
    torch.accelerator.empty_cache = lambda: None
import vllm
from vllm.models.deepseek_v4.nvidia import flashmla
from vllm.v1.worker import workspace
from dspark_attn_plugin import synthetic
from dspark_attn_plugin.workspace_bytes import held_bytes
out = {"version": vllm.__version__, "bytes": {}}
for kind in synthetic.LAYER_KINDS:
    workspace.reset_workspace_manager()
    workspace.init_workspace_manager(torch.device(device))
    layer = synthetic.make_layer(flashmla.DeepseekV4FlashMLAAttention, kind, device=device)
    args = synthetic.qkv(device=device)
    with synthetic.warmup_context():
        layer.forward_mqa(*args)
    out["bytes"][kind.name] = held_bytes()
print(json.dumps(out))
"""


class _Empty:
    def forward_mqa(self, q, kv, positions, output):
        pass


def _per_call_ns(stmt: str, env: dict, number: int) -> float:
    return timeit.Timer(stmt, globals=env).timeit(number) * 1e9 / number


def time_calls(flashmla, layers: dict, args, number: int, repeats: int) -> dict:
    """Medians over ``repeats`` rounds; each round times, in rotating order,
    the empty call and, per layer, stock and patched ``forward_mqa``, so
    every series samples the same stretches of machine time. Added costs
    are medians of the per-round differences (plugin - stock). The patch is
    built once, as in a vLLM process; rounds switch the class attribute
    between the two functions, each warmed up before it is timed."""
    from dspark_attn_plugin import patch, synthetic

    cls = flashmla.DeepseekV4FlashMLAAttention
    stock = cls.__dict__["forward_mqa"]
    patch.apply(flashmla)
    patched = cls.__dict__["forward_mqa"]

    q, kv, positions, output = args
    env = {"obj": _Empty(), "q": q, "kv": kv, "positions": positions, "output": output}
    env.update(layers)
    call = "{}.forward_mqa(q, kv, positions, output)"
    jobs = [("empty", None, call.format("obj"))]
    for name in layers:
        jobs += [(f"{name}_stock", stock, call.format(name)),
                 (f"{name}_plugin", patched, call.format(name))]
    series: dict[str, list[float]] = {name: [] for name, _, _ in jobs}
    try:
        with synthetic.idle_step_context(layers.values()):
            for i in range(repeats):
                loop = _per_call_ns("pass", env, number)
                shift = i % len(jobs)
                for name, fn, stmt in jobs[shift:] + jobs[:shift]:
                    if fn is not None:
                        cls.forward_mqa = fn
                        _per_call_ns(stmt, env, 100)  # warm the call sites
                    series[name].append(_per_call_ns(stmt, env, number) - loop)
    finally:
        cls.forward_mqa = stock
    result = {"empty": statistics.median(series["empty"])}
    for name in layers:
        stock_t, plugin_t = series[f"{name}_stock"], series[f"{name}_plugin"]
        result[f"{name}_stock"] = statistics.median(stock_t)
        result[f"{name}_added"] = statistics.median(p - s for p, s in zip(plugin_t, stock_t))
    return result


def decide_ms(flashmla, runs: int = 7) -> float:
    """What the post-import hook does once per process when vLLM's flashmla
    module is imported: classify the loaded code and build the patch."""
    import time

    from dspark_attn_plugin import loaded_code, patch, warmup_edit
    from dspark_attn_plugin.loaded_code import classify_loaded
    from dspark_attn_plugin.warmup_shape import classify_source

    samples = []
    for _ in range(runs):
        # A fresh process has read nothing yet: no cached reading.
        for cached in (classify_source, warmup_edit.plan_edit, loaded_code._compiled):
            cached.cache_clear()
        t0 = time.perf_counter()
        classify_loaded(flashmla)
        patch.apply(flashmla)
        samples.append((time.perf_counter() - t0) * 1e3)
        patch.remove(flashmla)
    return statistics.median(samples)


def register_cost(runs: int) -> tuple[float, float, list[str]]:
    imports, registers, heavy = [], [], set()
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", REGISTER_PROBE], capture_output=True, text=True, check=True
        ).stdout.split()
        imports.append(float(out[0]))
        registers.append(float(out[1]))
        if len(out) > 2:
            heavy.update(out[2].split(","))
    return statistics.median(registers), statistics.median(imports), sorted(heavy)


def plugin_reserved_bytes(flashmla, device: str) -> dict[str, int]:
    import torch
    from vllm.v1.worker import workspace

    from dspark_attn_plugin import patch, synthetic
    from dspark_attn_plugin.workspace_bytes import held_bytes

    patch.apply(flashmla)
    result = {}
    try:
        for kind in synthetic.LAYER_KINDS:
            workspace.reset_workspace_manager()
            workspace.init_workspace_manager(torch.device(device))
            layer = synthetic.make_layer(flashmla.DeepseekV4FlashMLAAttention, kind, device=device)
            with synthetic.warmup_context():
                layer.forward_mqa(*synthetic.qkv(device=device))
            result[kind.name] = held_bytes()
    finally:
        patch.remove(flashmla)
        workspace.reset_workspace_manager()
    return result


def upstream_reserved_bytes(upstream_dir: Path | None, device: str) -> dict[str, int]:
    if upstream_dir is None:
        upstream_dir = CACHE / f"vllm-{UPSTREAM_VERSION}-target"
        if not (upstream_dir / "vllm").is_dir():
            subprocess.run(
                [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile",
                 "--target", str(upstream_dir), f"vllm=={UPSTREAM_VERSION}"],
                check=True,
            )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(upstream_dir), os.environ.get("PYTHONPATH", "")) if p
    ))
    proc = subprocess.run(
        [sys.executable, "-c", UPSTREAM_PROBE, device],
        capture_output=True, text=True, env=env,
    )
    if proc.returncode != 0:
        raise SystemExit(f"upstream probe failed:\n{proc.stderr[-3000:]}")
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    if report["version"].split("+")[0] != UPSTREAM_VERSION:
        raise SystemExit(f"{upstream_dir} holds vLLM {report['version']}, not {UPSTREAM_VERSION}")
    return report["bytes"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    parser.add_argument("--upstream", type=Path, default=None, help=f"vLLM {UPSTREAM_VERSION} overlay dir")
    parser.add_argument("--repeats", type=int, default=401)
    parser.add_argument("--number", type=int, default=1000, help="calls per timing sample")
    parser.add_argument("--register-runs", type=int, default=15)
    opts = parser.parse_args()

    import torch

    device = opts.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.accelerator.is_available():
        # Benchmark harness stub: WorkspaceManager releases the accelerator
        # cache before growing, and torch raises when there is none.
        torch.accelerator.empty_cache = lambda: None

    import vllm
    from vllm.models.deepseek_v4.nvidia import flashmla

    from dspark_attn_plugin import __version__, patch, synthetic
    from dspark_attn_plugin.loaded_code import classify_loaded

    verdict = classify_loaded(flashmla).verdict.value
    if verdict != "affected":
        raise SystemExit(f"vLLM {vllm.__version__} is '{verdict}': benchmark an affected vLLM")
    patch.remove(flashmla)  # start from stock, whatever loaded the plugin

    args = synthetic.qkv(device=device)
    cls = flashmla.DeepseekV4FlashMLAAttention
    sparse = synthetic.make_layer(cls, synthetic.SPARSE_C4, device=device)
    swa = synthetic.make_layer(cls, synthetic.SWA_ONLY_NO_BUFFER, device=device)

    timed = time_calls(flashmla, {"sparse": sparse, "swa": swa}, args, opts.number, opts.repeats)
    empty = timed["empty"]
    added_sparse, stock_sparse = timed["sparse_added"], timed["sparse_stock"]
    added_swa, stock_swa = timed["swa_added"], timed["swa_stock"]
    register_us, import_us, heavy = register_cost(opts.register_runs)
    patch_ms = decide_ms(flashmla)
    plugin_bytes = plugin_reserved_bytes(flashmla, device)
    upstream_bytes = upstream_reserved_bytes(opts.upstream, device)

    result = {
        "machine": f"{platform.node()} {platform.machine()} "
        + (torch.cuda.get_device_name() if device.startswith("cuda") else "CPU"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "vllm": vllm.__version__,
        "plugin": __version__,
        "device": device,
        "empty_call_ns": round(empty, 1),
        "stock_forward_mqa_sparse_ns": round(stock_sparse, 1),
        "stock_forward_mqa_swa_ns": round(stock_swa, 1),
        "dispatch_added_sparse_ns": round(added_sparse, 1),
        "dispatch_added_swa_ns": round(added_swa, 1),
        "register_us": round(register_us, 1),
        "import_us": round(import_us, 1),
        "register_heavy_imports": heavy,
        "patch_at_import_ms": round(patch_ms, 2),
        "reserved_bytes": {
            k: {"plugin": plugin_bytes[k], "upstream": upstream_bytes[k]}
            for k in plugin_bytes
        },
    }
    targets = {
        "dispatch_added_sparse_ns <= 2 x empty_call_ns": added_sparse <= 2 * empty,
        "dispatch_added_swa_ns <= 4 x empty_call_ns": added_swa <= 4 * empty,
        "register_us <= 500": register_us <= 500,
        "no heavy imports": not heavy,
        "plugin == upstream bytes": plugin_bytes == upstream_bytes,
    }
    result["targets_met"] = all(targets.values())

    print(textwrap.dedent(f"""\
        dspark-attn-plugin {__version__} on vLLM {vllm.__version__}, torch {torch.__version__}, device {device}
        {result['machine']}; medians of {opts.repeats} samples x {opts.number} calls

          empty call (self + 4 args)        {empty:8.1f} ns
          stock forward_mqa, sparse (c4)    {stock_sparse:8.1f} ns   plugin adds {added_sparse:6.1f} ns ({added_sparse / empty:4.2f} x empty)
          stock forward_mqa, SWA-only       {stock_swa:8.1f} ns   plugin adds {added_swa:6.1f} ns ({added_swa / empty:4.2f} x empty)
          import dspark_attn_plugin         {import_us:8.1f} us   (fresh interpreter, {opts.register_runs} runs)
          register()                        {register_us:8.1f} us   heavy imports: {', '.join(heavy) or 'none'}
          classify + patch at flashmla import {patch_ms:6.2f} ms   (once per process)
        """))
    print(f"  {'warmup reservation':<24} {'plugin':>14} {'upstream ' + UPSTREAM_VERSION:>16}")
    for kind, pair in result["reserved_bytes"].items():
        mark = "" if pair["plugin"] == pair["upstream"] else "   MISMATCH"
        print(f"  {kind:<24} {pair['plugin']:>14,} {pair['upstream']:>16,}{mark}")
    print()
    for name, ok in targets.items():
        print(f"  [{'met' if ok else 'MISSED'}] {name}")
    if opts.json:
        print(json.dumps(result))
    return 0 if result["targets_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
