"""The plugin in a real engine: ``vllm serve`` DeepSeek-V4 with a DSpark
drafter, without and with the plugin, on a GPU.

Needs a Hopper or Blackwell GPU and a vLLM with DeepSeek-V4 (``vllm serve``
builds the model for real: FlashMLA sparse, MoE, DeepGEMM, tilelang kernels).
Nothing is downloaded: the checkpoint is a tiny config + an offline-built
tokenizer, weights come from ``--load-format dummy``. Run it with the Python
that has vLLM, in an environment where the plugin is *not* installed (the
harness adds it, from its wheel, to the servers that should have it):

    python benchmarks/engine_e2e.py --plugin-wheel dist/dspark_attn_plugin-*.whl \\
        --work /tmp/e2e [--cases standin-stock,standin-plugin,...] [--cost]

Each case is a fresh ``vllm serve`` on a loopback port (cases in
``engine/harness.py``): the *affected stand-in* (the installed vLLM with
vllm-project/vllm#50298's assertion inserted into a linked copy,
``engine/standin.py``) without the plugin, with it, and with
``DSPARK_ATTN_PLUGIN=off``; and vLLM as installed with the plugin. Servers
run with CUDA graphs (vLLM's default) unless ``--enforce-eager``, at
``--tensor-parallel-size`` (each case's checks then hold in every worker).
``--cost`` adds stock against plugin on the stand-in without speculative
decoding, one server after the other; ``--paired-cost`` starts stock and
plugin together and sends them the same greedy batch at the same moment,
round after round (GPUs swapped each round where there are two, both on one
GPU otherwise), then stock against stock for the method's own noise.
``--evidence`` runs each timed round with vLLM's own serving benchmark,
``vllm bench serve`` (``engine/bench_serve.py``; the report's
``bench_command`` is the line to type against one server), and compares
the servers' greedy token ids and top-5 log-probabilities exactly;
``--model-size gpu-bound`` gives the model a size at which a decode step is
the GPU's time rather than the host's (``engine/checkpoint.py``).
Needs Python 3.11 or newer (the plugin itself: 3.10).

The last line of standard output is one JSON object with every figure
(progress goes to standard error); ``--out FILE`` writes it there too.
Logs stay under ``WORK/logs``.

Exit status: 0 every case as expected; 1 a case was not; 2 bad arguments;
3 this machine cannot run it (no suitable GPU, no vLLM with DeepSeek-V4, or
the plugin already installed where the harness runs); 128 + N stopped by
signal N (SIGTERM: 143, SIGINT: 130): the running server is stopped and the
JSON keeps what was measured, with ``stopped`` saying during what. ``--dry-run``
builds everything and reports the plan and the environment without starting
a server, and exits 0.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine import harness  # noqa: E402
from engine.checkpoint import SIZES, write_checkpoint  # noqa: E402
from engine.evidence import (  # noqa: E402
    EVIDENCE_KV_CACHE_BYTES, PHASES, run_evidence, start_comparisons)
from engine.standin import FLASHMLA_RELPATH, StandinError, make_standin  # noqa: E402

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CANNOT_RUN = 0, 1, 2, 3
MIN_CAPABILITY = (9, 0)  # FlashMLA sparse: Hopper and newer


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="engine_e2e.py",
        description="vllm serve DeepSeek-V4 + DSpark without and with dspark-attn-plugin.",
        epilog="Exit status: 0 as expected, 1 a case was not, 2 bad arguments, "
        "3 cannot run on this machine, 128+N stopped by signal N (the JSON keeps "
        "what was measured).",
    )
    parser.add_argument("--plugin-wheel", type=Path, required=True,
                        help="the plugin's wheel (python -m build)")
    parser.add_argument("--work", type=Path, required=True,
                        help="a new or empty folder for the checkpoint, stand-in and logs")
    parser.add_argument("--cases", default=",".join(harness.CASES),
                        help=f"comma-separated, from: {', '.join(harness.CASES)} (default all); "
                        "'none' for --cost alone")
    parser.add_argument("--cost", action="store_true",
                        help="also measure stock against plugin without speculative decoding")
    parser.add_argument("--cost-rounds", type=int, default=harness.Settings.cost_rounds,
                        help="rounds of one stock and one plugin server each (default %(default)s)")
    parser.add_argument("--throughput-runs", type=int, default=harness.Settings.throughput_runs)
    parser.add_argument("--start-timeout", type=float, default=harness.Settings.start_timeout_s,
                        help="seconds a server may take to become healthy")
    parser.add_argument("--paired-cost", action="store_true",
                        help="stock and plugin started together, the same batch sent to both "
                        "at once (GPUs swapped every round where there are two), then stock "
                        "against stock")
    parser.add_argument("--paired-rounds", type=int, default=harness.Settings.paired_rounds,
                        help="rounds of the paired cost (default %(default)s)")
    parser.add_argument("--aa-rounds", type=int, default=harness.Settings.aa_rounds,
                        help="rounds of stock against stock after them (default %(default)s)")
    parser.add_argument("--evidence", action="store_true",
                        help="the one-GPU evidence (engine/evidence.py): the same tokens with "
                        "and without the plugin, warm starts compared, and the cost beside "
                        "stock against stock, without and with DSpark")
    parser.add_argument("--evidence-seconds", type=float, default=None,
                        help="time limit of --evidence from its first start: no round begins "
                        "that would end after it (default: none; every round runs)")
    parser.add_argument("--kv-cache-memory-bytes", type=int, default=None,
                        help="a fixed KV cache for every case's and evidence server (default: "
                        "vLLM sizes it from free memory; --evidence's servers get "
                        f"{EVIDENCE_KV_CACHE_BYTES} B)")
    parser.add_argument("--max-num-batched-tokens", type=int, default=None,
                        help="every server's scheduler step budget (default: vLLM's). Seen on "
                        "one H200 with vLLM 0.26.0: 640 with --cudagraph-capture-sizes 64,384 "
                        "and DSpark kills the engine core at its first 130-token prefill "
                        "(FlashMLA sparse prefill: TMA descriptor), stock and plugin alike")
    parser.add_argument("--evidence-rounds", type=int, default=harness.Settings.evidence_rounds,
                        help="rounds per phase of --evidence (default %(default)s)")
    parser.add_argument("--evidence-client", choices=("bench-serve", "completions"),
                        default=harness.Settings.evidence_client,
                        help="each timed round of --evidence: `vllm bench serve` (random "
                        "prompts, one fixed seed for every round, --ignore-eos, servers without "
                        "prefix caching; default) or one batched "
                        "completions request")
    parser.add_argument("--evidence-input-len", type=int,
                        default=harness.Settings.evidence_input_len,
                        help="prompt tokens per request of `vllm bench serve` (default %(default)s)")
    parser.add_argument("--evidence-max-tokens", type=int,
                        default=harness.Settings.evidence_max_tokens,
                        help="output tokens per request of each round (default %(default)s)")
    parser.add_argument("--model-size", choices=SIZES, default=harness.Settings.model_size,
                        help="the checkpoint's config (engine/checkpoint.py): tiny, or gpu-bound "
                        "(a decode step the GPU's time, not the host's; default %(default)s)")
    parser.add_argument("--evidence-waves", type=int, choices=(1, 2),
                        default=harness.Settings.evidence_waves,
                        help="--evidence's starts: 2 = the first server alone (it compiles the "
                        "kernels), then the others at once; 1 = every server at once (on a "
                        "machine whose kernel caches are cold, one cold start instead of two; "
                        "default %(default)s)")
    parser.add_argument("--evidence-cpus", choices=("shared", "split"),
                        default=harness.Settings.evidence_cpus,
                        help="--evidence's host CPUs: shared (the kernel places every process; "
                        "default) or split (each server's processes on whole cores of their "
                        "own, the benchmark client on the rest; a first start on a machine "
                        "then compiles its kernels on those cores only: one H200 host's "
                        "three servers on 4 cores each were still compiling after 640 s)")
    parser.add_argument("--evidence-phases", default=",".join(harness.Settings.evidence_phases),
                        help="comma-separated, of: target, dspark (default %(default)s)")
    parser.add_argument("--tensor-parallel-size", type=int, default=1,
                        help="for every case's server (default %(default)s; the cost runs at 1)")
    parser.add_argument("--distributed-executor-backend", choices=("mp", "ray"), default=None,
                        help="for every case's server (default: vLLM's choice; ray: the "
                        "model runs in Ray actors, as on several nodes; needs Ray installed)")
    parser.add_argument("--cudagraph-capture-sizes", default=None, metavar="N,N,...",
                        help="CUDA graph sizes to capture, for every case's and evidence "
                        "server (default: vLLM's list; fewer sizes start faster)")
    parser.add_argument("--enforce-eager", action="store_true",
                        help="no CUDA graphs (default: vLLM's default, graphs captured)")
    parser.add_argument("--gpu-memory-utilization", type=float,
                        default=harness.Settings.gpu_memory_utilization,
                        help="per server (default %(default)s: two fit on one GPU)")
    parser.add_argument("--out", type=Path, help="also write the JSON report here")
    parser.add_argument("--dry-run", action="store_true",
                        help="build everything, start no server, report the plan")
    args = parser.parse_args(argv)
    names = [] if args.cases == "none" else [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [n for n in names if n not in harness.CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(harness.CASES)}")
    if sys.version_info < (3, 11):
        parser.error("needs Python 3.11 or newer (it starts servers with "
                     "subprocess's process_group); the plugin itself needs 3.10")
    if not names and not (args.cost or args.paired_cost or args.evidence):
        parser.error("nothing to run: name cases or give --cost, --paired-cost or --evidence")
    phases = [p for p in args.evidence_phases.split(",") if p]
    if args.evidence and (not phases or any(p not in PHASES for p in phases)):
        parser.error(f"--evidence-phases {args.evidence_phases!r}: choose from {', '.join(PHASES)}")
    try:
        args.capture_sizes = (tuple(int(n) for n in args.cudagraph_capture_sizes.split(","))
                              if args.cudagraph_capture_sizes else None)
    except ValueError:
        parser.error(f"--cudagraph-capture-sizes {args.cudagraph_capture_sizes!r}: "
                     "whole numbers separated by commas")
    if args.capture_sizes is not None and (min(args.capture_sizes) < 1 or args.enforce_eager):
        parser.error("--cudagraph-capture-sizes takes positive sizes, and not with --enforce-eager")
    if args.evidence_seconds is not None and args.evidence_seconds <= 0:
        parser.error("--evidence-seconds must be positive")
    if args.max_num_batched_tokens is not None and args.max_num_batched_tokens < 1:
        parser.error("--max-num-batched-tokens must be positive")
    if args.kv_cache_memory_bytes is not None and args.kv_cache_memory_bytes < 1:
        parser.error("--kv-cache-memory-bytes must be positive")
    if min(args.evidence_input_len, args.evidence_max_tokens) < 1:
        parser.error("--evidence-input-len and --evidence-max-tokens must be positive")
    if args.evidence_rounds < 2:
        parser.error("--evidence-rounds must be at least 2 (an interval needs two rounds)")
    if not args.plugin_wheel.is_file() or args.plugin_wheel.suffix != ".whl":
        parser.error(f"--plugin-wheel {args.plugin_wheel}: not a wheel file")
    if args.work.exists() and any(args.work.iterdir()):
        parser.error(f"--work {args.work} is not empty")
    if min(args.cost_rounds, args.throughput_runs, args.paired_rounds,
           args.tensor_parallel_size) < 1 or args.aa_rounds < 0 or args.start_timeout <= 0:
        parser.error("--cost-rounds, --throughput-runs, --paired-rounds, "
                     "--tensor-parallel-size and --start-timeout must be positive")
    args.case_names = names
    return args


def environment_problems(vllm: dict, gpu: dict, plugin_installed: bool) -> list[str]:
    problems = []
    if vllm["path"] is None:
        problems.append("no vLLM importable by this Python")
    elif not (Path(vllm["path"]) / FLASHMLA_RELPATH).is_file():
        problems.append(f"vLLM {vllm['version']} at {vllm['path']} has no DeepSeek-V4 FlashMLA module")
    if not gpu.get("cuda"):
        problems.append("no CUDA GPU visible to torch: this needs a Hopper or Blackwell GPU")
    elif tuple(gpu["capability"]) < MIN_CAPABILITY:
        problems.append(f"{gpu['name']} (sm_{''.join(map(str, gpu['capability']))}) cannot run "
                        "FlashMLA sparse kernels: this needs a Hopper or Blackwell GPU")
    if plugin_installed:
        problems.append("dspark-attn-plugin is installed in this environment: the no-plugin "
                        "cases need one without it (the harness adds it from --plugin-wheel)")
    return problems


def progress(message: str) -> None:
    print(f"[engine_e2e] {message}", file=sys.stderr, flush=True)


class Stopped(BaseException):
    """A stop signal arrived. A BaseException, so that the harness's
    ``except Exception`` around requests does not swallow it; it unwinds
    through ``with Server``, which stops the running server."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_stopped(signum, frame) -> None:
    raise Stopped(signum)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = harness.Settings(
        start_timeout_s=args.start_timeout, cost_rounds=args.cost_rounds,
        throughput_runs=args.throughput_runs, tensor_parallel_size=args.tensor_parallel_size,
        distributed_executor_backend=args.distributed_executor_backend,
        evidence_rounds=args.evidence_rounds, evidence_seconds=args.evidence_seconds,
        evidence_client=args.evidence_client, evidence_input_len=args.evidence_input_len,
        evidence_max_tokens=args.evidence_max_tokens, model_size=args.model_size,
        evidence_waves=args.evidence_waves, evidence_cpus=args.evidence_cpus,
        kv_cache_memory_bytes=args.kv_cache_memory_bytes,
        max_num_batched_tokens=args.max_num_batched_tokens,
        cudagraph_capture_sizes=args.capture_sizes,
        evidence_phases=tuple(p for p in args.evidence_phases.split(",") if p),
        enforce_eager=args.enforce_eager, paired_rounds=args.paired_rounds,
        aa_rounds=args.aa_rounds, gpu_memory_utilization=args.gpu_memory_utilization,
    )
    layout = harness.Layout(args.work)
    vllm = harness.installed_vllm()
    plugin_installed = harness.plugin_in_base_env()
    gpu = harness.probe_gpu()
    report: dict = {
        "tool": "benchmarks/engine_e2e.py",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"gpu": gpu, "python": platform.python_version(), "host": platform.node()},
        "vllm": vllm,
        "plugin_wheel": args.plugin_wheel.name,
        "settings": vars(settings),
        "speculative_config": harness.DSPARK,
    }
    problems = environment_problems(vllm, gpu, plugin_installed)
    report["environment_problems"] = problems
    if problems and not args.dry_run:
        for problem in problems:
            progress(f"cannot run here: {problem}")
        return _finish(report, args, EXIT_CANNOT_RUN)

    layout.work.mkdir(parents=True, exist_ok=True)
    report["plugin_version"] = harness.install_plugin_wheel(args.plugin_wheel, layout.plugin)
    if not plugin_installed:
        sys.path.append(str(layout.plugin))  # the stand-in uses its warmup locator
    harness.install_plugin_dist(layout.harness)
    write_checkpoint(layout.model, settings.model_size)
    report["model"] = str(layout.model)
    if vllm["path"] is None:
        return _finish(report, args, EXIT_OK if args.dry_run else EXIT_CANNOT_RUN)
    try:
        report["standin"] = standin = make_standin(Path(vllm["path"]), layout.standin)
    except StandinError as exc:
        progress(f"cannot run here: {exc}")
        problems.append(str(exc))
        return _finish(report, args, EXIT_OK if args.dry_run else EXIT_CANNOT_RUN)
    if args.dry_run:
        command = harness.case_command(layout, settings, port=0)
        report["plan"] = {name: {**vars(harness.CASES[name]), "command": command}
                          for name in args.case_names}
        report["cost"] = "planned" if args.cost else None
        report["paired_cost"] = "planned" if args.paired_cost else None
        report["evidence"] = "planned" if args.evidence else None
        return _finish(report, args, EXIT_OK)

    report["cases"], report["cost"], report["paired_cost"] = {}, None, None
    report["evidence"] = None
    running = "the start of the run"
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _raise_stopped)
    try:
        for name in args.case_names:
            running = f"case {name}"
            progress(f"case {name}: {harness.CASES[name].about}")
            result = harness.run_case(harness.CASES[name], layout, settings,
                                      standin["assertion_line"])
            report["cases"][name] = result
            progress(f"case {name}: {'as expected' if result['ok'] else result['problems']}")
            _write(report, args.out)  # what is done survives a stop
        if args.cost:
            running = "cost"
            progress(f"cost: {settings.cost_rounds} rounds of stock and plugin, "
                     "no speculative decoding")

            def save(cost: dict) -> None:
                report["cost"] = cost
                _write(report, args.out)

            harness.run_cost(layout, settings, save)
        if args.paired_cost:
            running = "paired cost"
            progress(f"paired cost: {settings.paired_rounds} rounds of stock and plugin at once, "
                     f"{settings.aa_rounds} of stock and stock, on {gpu.get('count', 1)} GPU(s)")

            def save_paired(paired: dict) -> None:
                report["paired_cost"] = paired
                _write(report, args.out)

            harness.run_paired_cost(layout, settings, gpu.get("count") or 1, save_paired)
        if args.evidence:
            running = "evidence"
            progress(f"evidence: phases {', '.join(settings.evidence_phases)}, "
                     f"{settings.evidence_rounds} rounds each, one server at a time"
                     + (f", within {settings.evidence_seconds:g} s"
                        if settings.evidence_seconds else ""))

            def save_evidence(evidence: dict) -> None:
                evidence["start_comparisons"] = start_comparisons(evidence["starts"])
                report["evidence"] = evidence
                _write(report, args.out)

            run_evidence(layout, settings, save_evidence)
    except Stopped as stop:
        progress(f"stopped by {stop} during {running}; the report keeps what was measured")
        report["stopped"] = {"signal": str(stop), "during": running}
        if report["cost"]:
            harness.summarize_cost(report["cost"])  # with the stopped server's samples
        report["ok"] = False
        return _finish(report, args, 128 + stop.signum)
    failed = [n for n, r in report["cases"].items() if not r["ok"]]
    if report.get("cost") and report["cost"]["problems"]:
        failed.append("cost")
    if report.get("paired_cost") and report["paired_cost"]["problems"]:
        failed.append("paired cost")
    if report.get("evidence") and report["evidence"]["problems"]:
        failed.append("evidence")
    report["ok"] = not failed
    return _finish(report, args, EXIT_FAILED if failed else EXIT_OK)


def _write(report: dict, out: Path | None) -> None:
    if out:
        out.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")


def _finish(report: dict, args: argparse.Namespace, code: int) -> int:
    report["exit_code"] = code
    _write(report, args.out)
    print(json.dumps(report, default=str), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
