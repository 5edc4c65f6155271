"""The engine evidence on one GPU: the same tokens with and without the
plugin, start times that compare like with like, and the cost beside its
own noise.

Two phases, each with three servers:

- ``target`` (no speculative decoding; every layer has its buffer, so stock
  starts too): ``stock`` (the stand-in without the plugin), ``plugin`` (the
  stand-in with it) and ``stock-b`` (a second stock: the control);
- ``dspark`` (DSpark on): ``released`` (vLLM as installed, no plugin),
  ``standin-plugin`` (the stand-in with the plugin: the fix a user runs) and
  ``released-b`` (the control).

The first server starts alone: on a fresh machine it compiles the kernels,
so its start is never compared. Then every other server starts at once
(the same moment, the same compiled kernels, the same competition for the
machine: like with like), each with the same fixed KV cache. All stay
running, each with its share of the GPU's memory.

Per server, first the token batch (fixed prompts, greedy, ``ignore_eos``,
the token ids asked back), untimed; then a short warm-up batch; then the
rounds: each round sends the workload batch to one server at a time, in an
order rotated every round, so no server is always first or last; the
phases take turns round by round, so a time limit leaves both with as many
rounds. A round's ratios are second/first and control/first, from the
client's clock and from the servers' own time-per-output-token histograms.
"""

from __future__ import annotations

import datetime
import math
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from engine import bench_serve, cpus, jit_log, metrics, probes
from engine.server import MODEL_NAME, Server, free_port, serve_command

PHASES = {
    # phase: speculative, [(server, stand-in, plugin)], (base, other, control)
    "target": (None, [("stock", True, False), ("plugin", True, True), ("stock-b", True, False)]),
    "dspark": ("dspark", [("released", False, False), ("standin-plugin", True, True),
                          ("released-b", False, False)]),
}
# Servers started together must not size their KV cache from the memory
# left free while the others allocate theirs: each gets the same fixed size
# (enough for 64 sequences of 1,024 tokens with room to spare).
EVIDENCE_KV_CACHE_BYTES = 4 << 30
# Time left for stopping every server after the last round.
STOP_MARGIN_S = 60.0
TOKEN_PROMPTS = [
    "The quick brown fox", "DeepSeek-V4 with a DSpark drafter", "Once upon a time",
    "vLLM serves", "Speculative decoding drafts", "A tiny model with random weights",
    "Sparse attention and a sliding window", "Profile run, then warm-up",
]


def rotated(names: list[str], round_no: int) -> list[str]:
    """``names`` rotated by ``round_no``: each server takes each place in turn."""
    k = round_no % len(names)
    return names[k:] + names[:k]


def compare_tokens(base: list[list[int]] | None, other: list[list[int]] | None) -> dict:
    """Whether two servers gave the same token ids for each prompt; where
    not, the first prompt and position that differ."""
    if base is None or other is None:
        return {"compared": False}
    out = {"compared": True, "prompts": len(base), "tokens": sum(map(len, base)),
           "identical": base == other, "differing_prompts": 0, "first_difference": None}
    for i, (a, b) in enumerate(zip(base, other)):
        if a == b:
            continue
        out["differing_prompts"] += 1
        if out["first_difference"] is None:
            j = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            out["first_difference"] = {"prompt": i, "position": j,
                                       "base": a[j] if j < len(a) else None,
                                       "other": b[j] if j < len(b) else None}
    if len(base) != len(other):
        out["identical"] = False
        out["differing_prompts"] += abs(len(base) - len(other))
    return out


TOP_LOGPROBS = 5


def _outputs(server, settings) -> dict:
    """The greedy outputs of the fixed prompts: token ids with the top-5
    log-probabilities at each position, or the texts where the server will
    not return ids (then compared character by character)."""
    try:
        reply = server.complete(TOKEN_PROMPTS, settings.evidence_token_max_tokens,
                                token_ids=True, top_logprobs=TOP_LOGPROBS)
        ids = token_ids(reply)
        return {"token_ids": ids, "top_logprobs": top_logprobs(reply),
                "cycles": [shortest_cycle(t) for t in ids]}
    except Exception as exc:
        reply = server.complete(TOKEN_PROMPTS, settings.evidence_token_max_tokens)
        texts = [c["text"] for c in sorted(reply["choices"], key=lambda c: c["index"])]
        return {"texts": texts, "token_ids_error": repr(exc)[:300]}


def compare_outputs(base: dict, other: dict) -> dict:
    """``compare_tokens`` of two servers' outputs, on token ids where both
    have them (and their top-5 log-probabilities, to the bit), else on texts."""
    if "token_ids" in base and "token_ids" in other:
        out = {"unit": "token ids", **compare_tokens(base["token_ids"], other["token_ids"])}
        if "top_logprobs" in base or "top_logprobs" in other:
            out["logprobs"] = compare_logprobs(base.get("top_logprobs"),
                                               other.get("top_logprobs"))
        return out
    texts = (base.get("texts"), other.get("texts"))
    if None in texts:
        return {"unit": None, "compared": False}
    return {"unit": "characters", **compare_tokens(list(map(list, texts[0])),
                                                   list(map(list, texts[1])))}


def token_ids(reply: dict) -> list[list[int]]:
    """Token ids per prompt from a completions reply asked with
    ``logprobs: 0`` and ``return_tokens_as_token_ids`` (``token_id:N``)."""
    choices = sorted(reply["choices"], key=lambda c: c["index"])
    return [[int(t.rsplit(":", 1)[1]) for t in c["logprobs"]["tokens"]] for c in choices]


def top_logprobs(reply: dict) -> list[list[list]]:
    """Per prompt, per position: the top ids and their log-probabilities as
    ``[id, logprob]`` pairs, most likely first (ties by id), the floats as
    the server sent them; from a reply asked with ``logprobs: N`` and
    ``return_tokens_as_token_ids``."""
    choices = sorted(reply["choices"], key=lambda c: c["index"])
    out = []
    for c in choices:
        positions = []
        for top in c["logprobs"]["top_logprobs"] or []:
            pairs = [[int(k.rsplit(":", 1)[1]), float(v)] for k, v in (top or {}).items()]
            positions.append(sorted(pairs, key=lambda p: (-p[1], p[0])))
        out.append(positions)
    return out


def compare_logprobs(base: list | None, other: list | None) -> dict:
    """Whether two servers gave the same top ids with the same
    log-probabilities, exactly (float equality), at every position; where
    not, the first prompt and position that differ, with both sides."""
    if base is None or other is None:
        return {"compared": False}
    out = {"compared": True, "positions": sum(map(len, base)), "identical": True,
           "differing_positions": 0, "first_difference": None}
    if len(base) != len(other):
        out["identical"] = False
    for i, (a, b) in enumerate(zip(base, other)):
        if len(a) != len(b):
            out["identical"] = False
        for j, (x, y) in enumerate(zip(a, b)):
            if x == y:
                continue
            out["identical"] = False
            out["differing_positions"] += 1
            if out["first_difference"] is None:
                out["first_difference"] = {"prompt": i, "position": j, "base": x, "other": y}
    return out


def shortest_cycle(tokens: list[int]) -> int | None:
    """The period of the repeating end of ``tokens``: the smallest p with
    ``tokens[k] == tokens[k - p]`` over the last half of them (p at most a
    quarter of their number, so that the cycle shows at least twice), or
    None where the end does not repeat. Greedy outputs of a random-weight
    model often end in a short cycle; then equal ids say little and the
    log-probabilities carry the comparison."""
    n = len(tokens)
    window = n // 2
    for p in range(1, window // 2 + 1):
        if all(tokens[k] == tokens[k - p] for k in range(n - window, n)):
            return p
    return None


def phase_ratios(rounds: list[dict], base: str, other: str, control: str, key: str) -> dict:
    """Per-round other/base and control/base of ``key`` (higher is faster),
    each with its 95 % interval."""
    from engine.harness import interval95

    def series(name: str) -> list[float]:
        return [r[name][key] / r[base][key] for r in rounds
                if r.get(name, {}).get(key) and r.get(base, {}).get(key)]

    mine, aa = series(other), series(control)
    return {"key": key, f"{other}/{base}": interval95(mine),
            f"{control}/{base}": interval95(aa),
            "per_round": {f"{other}/{base}": [round(x, 4) for x in mine],
                          f"{control}/{base}": [round(x, 4) for x in aa]}}


def relative_to_aa(ratios: dict, other: str, control: str, base: str) -> str | None:
    """One sentence: where the plugin's interval lies against the A/A one."""
    mine, aa = ratios.get(f"{other}/{base}"), ratios.get(f"{control}/{base}")
    if not mine or not aa or mine.get("low") is None or aa.get("low") is None:
        return None
    overlap = mine["low"] <= aa["high"] and aa["low"] <= mine["high"]
    return (f"{other}/{base} {mine['geomean']} ({mine['low']}-{mine['high']}, "
            f"±{mine['half_width_pct']} %) against {control}/{base} {aa['geomean']} "
            f"({aa['low']}-{aa['high']}, ±{aa['half_width_pct']} %): "
            + ("the intervals overlap" if overlap else "the intervals do not overlap"))


def _server_rate(before: dict, after: dict) -> float | None:
    """Output tokens per second per request, from the change in the
    server's time-per-output-token histogram over one batch."""
    count = after.get("count", 0) - before.get("count", 0)
    total = after.get("sum", 0.0) - before.get("sum", 0.0)
    if count <= 0 or total <= 0:
        return None
    return count / total


def run_evidence(layout, settings, save=lambda r: None) -> dict:
    """Every phase's servers, started in two waves and kept running, then
    the outputs and the rounds; the result is filled in place and
    ``save``d as it grows."""
    prompts = (TOKEN_PROMPTS * settings.evidence_batch)[: settings.evidence_batch]
    members = [(phase, name, standin, plugin) for phase in settings.evidence_phases
               for name, standin, plugin in PHASES[phase][1]]
    kv_bytes = settings.kv_cache_memory_bytes or EVIDENCE_KV_CACHE_BYTES
    result: dict = {
        "method": (("one GPU; the first server started alone (it compiles the kernels), then "
                    "every other server at once" if settings.evidence_waves == 2 else
                    "one GPU; every server started at once (their kernel compiles overlap)")
                   + ", all kept running, each with the same fixed KV cache; per round the "
                   "batch goes to one server at a time, in an order rotated every round, the "
                   "phases' rounds taking turns"),
        "workload": {"prompts": len(prompts), "max_tokens": settings.evidence_max_tokens,
                     "max_num_seqs": settings.evidence_max_num_seqs, "temperature": 0.0,
                     "ignore_eos": True, "rounds": settings.evidence_rounds,
                     "seconds": settings.evidence_seconds,
                     "token_prompts": len(TOKEN_PROMPTS),
                     "token_max_tokens": settings.evidence_token_max_tokens,
                     "enforce_eager": settings.enforce_eager,
                     "cudagraph_capture_sizes": settings.cudagraph_capture_sizes,
                     "kv_cache_memory_bytes": kv_bytes,
                     "client": settings.evidence_client,
                     "input_len": settings.evidence_input_len,
                     "bench_seed": BENCH_SEED,
                     "prefix_caching": settings.evidence_client != "bench-serve",
                     "waves": settings.evidence_waves,
                     "max_num_batched_tokens": settings.max_num_batched_tokens,
                     "top_logprobs": TOP_LOGPROBS,
                     "cpus": _cpu_plan(members, settings),
                     "probes": None},
        "starts": [], "phases": {}, "problems": [], "rounds_stopped": None,
    }
    if settings.evidence_client == "bench-serve":
        # What a user types for one round against one server (PORT: its port).
        result["bench_command"] = bench_serve.shell_line(
            _bench_argv("http://127.0.0.1:PORT", layout, settings, seed=BENCH_SEED))
    for phase in settings.evidence_phases:
        result["phases"][phase] = {"servers": {}, "rounds": [], "tokens": {},
                                   "throughput": None, "server_tpot": None}
    save(result)
    began = time.monotonic()
    servers: dict = {}
    probe = None
    try:
        waves = (members,) if settings.evidence_waves == 1 else (members[:1], members[1:])
        for wave, group in enumerate(waves):
            if group and not _start_wave(group, wave, kv_bytes, layout, settings, result,
                                         servers, save, began):
                break
        ready = [p for p in settings.evidence_phases
                 if all(result["phases"][p]["servers"].get(m[0], {}).get("healthy")
                        for m in PHASES[p][1])]
        for phase in ready:
            _collect_outputs(phase, result["phases"][phase], servers, prompts, settings, layout)
            save(result)
        if ready:
            # Clocks, power and CPU time around each timed batch (engine/probes.py).
            probe = probes.Probe(probes.GpuSampler())
            result["workload"]["probes"] = probe.gpu.problem or (
                f"nvidia-smi every {probes.SAMPLE_MS} ms; CPU time of each server's process "
                "group and of the client")
        _run_rounds(ready, result, servers, prompts, settings, began, save, layout, probe)
    except Exception as exc:  # reported, not raised
        result["problems"].append(f"evidence: {exc!r}")
    finally:
        from engine.harness import _read_kv

        if probe is not None and probe.gpu.stop():
            # Said where the readings are described, not only before the rounds.
            result["workload"]["probes"] = probe.gpu.problem
        _stop_all(servers.values())
        for phase, out in result["phases"].items():
            _read_kv(out["servers"])
            mark_jit(phase, out)
        save(result)
    return result


def _cpu_plan(members, settings) -> dict:
    """Where the servers and the client run: ``shared`` (the kernel's
    choice) or ``split`` (each server on whole cores of its own, the client
    on the rest: engine/cpus.py). A machine with too few cores to split runs
    shared, and the plan says why."""
    if settings.evidence_cpus != "split":
        return {"mode": "shared"}
    names = [f"{phase}/{name}" for phase, name, _s, _p in members]
    try:
        return {"mode": "split", **cpus.split(cpus.cores(cpus.available()), names)}
    except ValueError as exc:
        return {"mode": "shared", "not_split": str(exc)}


def _start_wave(group, wave: int, kv_bytes: int, layout, settings, result: dict,
                servers: dict, save, began: float) -> bool:
    """Starts ``group``'s servers at once and waits for each; True when
    every one became healthy."""
    from engine.harness import DSPARK, _not_healthy, observe_start, server_env

    launched, standins = [], {}
    for phase, name, standin, plugin in group:
        standins[(phase, name)] = standin
        port = free_port()
        command = serve_command(
            layout.model, port, speculative=DSPARK if PHASES[phase][0] else None,
            max_model_len=settings.max_model_len,
            gpu_memory_utilization=settings.gpu_memory_utilization,
            enforce_eager=settings.enforce_eager,
            max_num_seqs=settings.evidence_max_num_seqs,
            cudagraph_capture_sizes=settings.cudagraph_capture_sizes,
            kv_cache_memory_bytes=kv_bytes,
            max_num_batched_tokens=settings.max_num_batched_tokens,
            # The same prompts every round (one seed): with prefix caching a
            # round after the first would skip its prefill.
            prefix_caching=settings.evidence_client != "bench-serve",
        )
        plan = result["workload"]["cpus"]
        if plan.get("servers"):
            command = cpus.pinned(command, plan["servers"][f"{phase}/{name}"])
        env = server_env(standin, plugin, False, layout)
        log_path = layout.logs / f"evidence-{phase}-{name}.log"
        servers[(phase, name)] = Server(command, env, log_path, port).__enter__()
        result["phases"][phase]["servers"][name] = {"log": str(log_path), "healthy": False}
        launched.append((phase, name))
    if result["workload"]["cpus"].get("client"):
        cpus.pin_self(result["workload"]["cpus"]["client"])  # the client's thread runs here
    with ThreadPoolExecutor(max_workers=len(launched)) as pool:
        starts = list(pool.map(lambda key: observe_start(servers[key], settings.start_timeout_s),
                               launched))
    for (phase, name), start in zip(launched, starts):
        standin = standins[(phase, name)]
        result["starts"].append({
            "order": len(result["starts"]), "wave": wave, "started_together": len(launched),
            "phase": phase, "server": name, "vllm": "stand-in" if standin else "as installed",
            "launched_at_s": round(servers[(phase, name)].started_at - began, 1),
            **start, "first_on_machine": wave == 0,
        })
        result["phases"][phase]["servers"][name]["healthy"] = start["healthy"]
        if not start["healthy"]:
            result["problems"].append(f"{phase}/{name}: {_not_healthy(start)}")
    save(result)
    return all(s["healthy"] for s in starts)


# Warm-up ends after WARMUP_CLEAN rounds in a row with no kernel compiled
# (one is not enough: on one H200, TileLang's prefill kernels are built per
# token count, and a round after a clean one still met new counts), or after
# WARMUP_TRIES rounds.
WARMUP_TRIES, WARMUP_CLEAN = 6, 2
# Every round of `vllm bench serve`, warm-up and timed, sends the same random
# prompts (this seed): the rounds run the same steps, with the same token
# counts, that the warm-up compiled kernels for.
BENCH_SEED = 0


def _collect_outputs(phase: str, out: dict, servers: dict, prompts, settings,
                     layout=None) -> None:
    """Untimed: each server's outputs of the fixed prompts, compared, and
    warm-up at the workload itself (its shapes' kernels compiled before the
    rounds): with ``vllm bench serve``, rounds of it until one runs with no
    kernel compiled or first loaded in that server's log ``WARMUP_CLEAN``
    times in a row (at most ``WARMUP_TRIES``); else one batch."""
    base, other, control = (m[0] for m in PHASES[phase][1])
    for name in (base, other, control):
        out["servers"][name].update(_outputs(servers[(phase, name)], settings))
        if settings.evidence_client == "bench-serve":
            out["servers"][name]["warmup"] = _warm_up(servers[(phase, name)], out["servers"][name],
                                                      layout, settings)
        else:
            servers[(phase, name)].complete(prompts, settings.evidence_max_tokens)
    out["tokens"] = {f"{n} vs {base}": compare_outputs(out["servers"][base], out["servers"][n])
                     for n in (other, control)}


def _bench_argv(base_url: str, layout, settings, seed: int) -> list[str]:
    return bench_serve.command(
        base_url, str(layout.model), layout.model, served_model_name=MODEL_NAME,
        num_prompts=settings.evidence_batch, input_len=settings.evidence_input_len,
        output_len=settings.evidence_max_tokens, seed=seed)


class RoundFailed(RuntimeError):
    """A ``vllm bench serve`` round in which not every request completed."""


def _bench_round(server, layout, settings, seed: int, probe=None) -> dict:
    """One ``vllm bench serve`` against ``server``, with the server's own
    time-per-output-token histogram read before and after (and, given a
    ``probe``, what the machine did meanwhile)."""
    before = metrics.histogram(server.metrics_text(), metrics.TPOT)
    pgid = _pgid(server)
    start = probe.before(pgid) if probe else None
    began = time.time()
    figures, _printed = bench_serve.run(_bench_argv(f"http://127.0.0.1:{server.port}", layout,
                                                    settings, seed))
    ended = time.time()
    machine = probe.after(start, pgid) if probe else None
    failed, completed = figures.get("failed") or 0, figures.get("completed")
    if failed or (completed is not None and completed < settings.evidence_batch):
        # A round whose requests failed is no measurement, nor a clean
        # warm-up: its TPOT is of the requests that came back, if any.
        raise RoundFailed(f"vllm bench serve on port {server.port}: {failed} of "
                          f"{settings.evidence_batch} requests failed, {completed} completed "
                          "(the server's log says why)")
    after = metrics.histogram(server.metrics_text(), metrics.TPOT)
    tpot = figures.get("mean_tpot_ms")
    return {**{k: _round(v) if isinstance(v, float) else v for k, v in figures.items()},
            "bench_tokens_per_s_per_request": _round(1000.0 / tpot) if tpot else None,
            "tokens_per_s": _round(figures.get("output_throughput")),
            "server_tokens_per_s_per_request": _round(_server_rate(before, after)),
            "seconds": round(ended - began, 4),
            "began_unix": round(began, 3), "ended_unix": round(ended, 3),
            **({"machine": machine} if machine else {})}


def _pgid(server) -> int | None:
    """The process group of ``server``'s processes (it starts in a group
    of its own), None for a server without a process."""
    proc = getattr(server, "proc", None)
    return getattr(proc, "pid", None)


def _warm_up(server, side: dict, layout, settings) -> list[dict]:
    """Rounds of the workload until ``WARMUP_CLEAN`` in a row show no
    kernel compiled or first loaded in the server's log while they ran."""
    tries = []
    for _ in range(WARMUP_TRIES):
        one = _bench_round(server, layout, settings, seed=BENCH_SEED)
        tries.append({"seconds": one["seconds"], "mean_tpot_ms": one.get("mean_tpot_ms"),
                      "jit": _batch_jit(side, one)})
        if len(tries) >= WARMUP_CLEAN and all(t["jit"] == [] for t in tries[-WARMUP_CLEAN:]):
            break
    return tries


def _run_rounds(phases: list[str], result: dict, servers: dict, prompts, settings,
                began: float, save, layout=None, probe=None) -> None:
    """Rounds until each phase has ``evidence_rounds`` clean ones (no
    server's log showing a kernel compiled or first loaded during its
    batch; the others are kept, counted and left out of the clean reading),
    at most ``ROUNDS_CAP`` times that many; the phases still short of their
    clean rounds take turns, so a time limit leaves them with as many
    rounds. No round starts that would end past ``evidence_seconds``
    (estimated from that phase's last round), leaving time to stop every
    server."""
    last: dict = {}
    cap = ROUNDS_CAP * settings.evidence_rounds
    for round_no in range(cap):
        due = [p for p in phases if _clean_rounds(p, result["phases"][p]) < settings.evidence_rounds]
        if not due:
            return
        if settings.evidence_seconds is not None:
            # One decision for the round of every phase, so that a stop
            # leaves each phase with as many rounds.
            ends = (time.monotonic() + 1.25 * sum(last.get(p, 0.0) for p in due)
                    + STOP_MARGIN_S)
            if ends > began + settings.evidence_seconds:
                result["rounds_stopped"] = (
                    f"after {round_no} round(s) ({_clean_summary(result, phases)}): another "
                    f"would end past --evidence-seconds {settings.evidence_seconds:g}")
                return
        for phase in due:
            t0 = time.monotonic()
            _one_round(phase, result["phases"][phase], servers, prompts, settings, round_no,
                       layout, probe=probe)
            last[phase] = time.monotonic() - t0
            save(result)
    if any(_clean_rounds(p, result["phases"][p]) < settings.evidence_rounds for p in phases):
        result["rounds_stopped"] = (f"after {cap} round(s) ({_clean_summary(result, phases)}): "
                                    f"the cap of {ROUNDS_CAP} x --evidence-rounds")


# A phase runs at most this many times --evidence-rounds rounds while
# looking for its clean ones.
ROUNDS_CAP = 2


def is_clean(one: dict, names) -> bool:
    """A round in which every server's batch was read against its log and
    none showed a kernel compiled or first loaded (a batch not read, or
    missing, is not clean)."""
    return all(isinstance(one.get(n), dict) and one[n].get("jit") == [] for n in names)


def _clean_rounds(phase: str, out: dict) -> int:
    names = [m[0] for m in PHASES[phase][1]]
    return sum(1 for r in out["rounds"] if is_clean(r, names))


def _clean_summary(result: dict, phases: list[str]) -> str:
    return ", ".join(f"{p}: {_clean_rounds(p, result['phases'][p])} without a kernel compiled"
                     for p in phases)


def _batch_jit(side: dict, batch: dict) -> list[str] | None:
    """The kernels ``side``'s server log shows compiled or first loaded
    while ``batch`` ran; None when the log cannot be read."""
    try:
        text = Path(side["log"]).read_text(encoding="utf-8", errors="replace")
    except (KeyError, OSError):
        return None
    year = datetime.datetime.fromtimestamp(batch["began_unix"]).year  # the monitor's lines have none
    return jit_log.during(jit_log.events(text, year), batch["began_unix"], batch["ended_unix"])


def _one_round(phase: str, out: dict, servers: dict, prompts, settings, round_no: int,
               layout=None, probe=None) -> None:
    names = [m[0] for m in PHASES[phase][1]]
    one: dict = {"round": round_no, "order": rotated(names, round_no)}
    for name in one["order"]:
        server = servers[(phase, name)]
        if settings.evidence_client == "bench-serve":
            # The same prompts for every server and every round.
            one[name] = _bench_round(server, layout, settings, seed=BENCH_SEED, probe=probe)
            continue
        before = metrics.histogram(server.metrics_text(), metrics.TPOT)
        began = time.time()
        t0 = time.perf_counter()
        reply = server.complete(prompts, settings.evidence_max_tokens)
        elapsed = time.perf_counter() - t0
        ended = time.time()
        after = metrics.histogram(server.metrics_text(), metrics.TPOT)
        tokens = reply["usage"]["completion_tokens"]
        one[name] = {"tokens": tokens, "seconds": round(elapsed, 4),
                     "tokens_per_s": round(tokens / elapsed, 1),
                     "server_tokens_per_s_per_request": _round(_server_rate(before, after)),
                     "began_unix": round(began, 3), "ended_unix": round(ended, 3)}
    for name in one["order"]:
        # Marked now, so that the rounds go on until enough are clean.
        one[name]["jit"] = _batch_jit(out["servers"].get(name, {}), one[name])
    out["rounds"].append(one)
    _summarize_phase(out, *names)


def mark_jit(phase: str, out: dict) -> None:
    """Each timed batch's ``jit``: the kernels its server's log says were
    compiled or first loaded while it ran; then the phase's summaries again,
    with and without the rounds that had any."""
    names = [m[0] for m in PHASES[phase][1]]
    times = [b["began_unix"] for r in out["rounds"] for b in r.values()
             if isinstance(b, dict) and "began_unix" in b]
    if not times:
        return
    year = datetime.datetime.fromtimestamp(times[0]).year  # the JIT monitor's lines have none
    found = {}
    for name, side in out["servers"].items():
        try:
            text = Path(side["log"]).read_text(encoding="utf-8", errors="replace")
        except (KeyError, OSError):
            continue
        found[name] = jit_log.events(text, year)
    for one in out["rounds"]:
        for name in names:
            batch = one.get(name)
            if batch and "began_unix" in batch and name in found:
                batch["jit"] = jit_log.during(found[name], batch["began_unix"],
                                              batch["ended_unix"])
    _summarize_phase(out, *names)


def _stop_all(servers) -> None:
    """Every server at once (each waits for its own process group)."""
    servers = list(servers)
    if servers:
        with ThreadPoolExecutor(max_workers=len(servers)) as pool:
            list(pool.map(lambda s: s.stop(), servers))


def _round(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) else round(x, 3)


def _summarize_phase(out: dict, base: str, other: str, control: str) -> None:
    """Both cost readings over every round, and over the rounds in which no
    server's log showed a kernel compiled or first loaded during its batch."""
    clean = [r for r in out["rounds"] if is_clean(r, (base, other, control))]
    out["rounds_with_jit"] = len(out["rounds"]) - len(clean)
    for suffix, rounds in (("", out["rounds"]), ("_without_jit", clean)):
        for name, key in (("throughput", "tokens_per_s"),
                          ("server_tpot", "server_tokens_per_s_per_request"),
                          ("bench_tpot", "bench_tokens_per_s_per_request")):
            ratios = phase_ratios(rounds, base, other, control, key)
            ratios["reading"] = relative_to_aa(ratios, other, control, base)
            out[name + suffix] = ratios
    # What moves with a batch's TPOT on each server, over the clean rounds.
    out["tpot_against"] = {n: probes.against_tpot([r[n] for r in clean if isinstance(r.get(n), dict)])
                           for n in (base, other, control)}


def start_comparisons(starts: list[dict]) -> dict:
    """Within each phase, ratios of starts that ran under the same
    conditions: started in the same wave (the machine's first start, which
    compiles the kernels, is a wave of its own) and on the same vLLM code
    (the stand-in is another copy of vLLM, whose model code vLLM inspects and
    caches anew: its first start is slower for that alone). Per phase:
    other/base and control/base where the base is among them, else
    other/control. Starts from before waves existed (one server at a time)
    each count as a wave of their own."""
    out = {}
    for phase, (_, members) in PHASES.items():
        base, other, control = (m[0] for m in members)
        groups: dict = {}
        for s in starts:
            if s["phase"] == phase and s.get("start_s"):
                key = (str(s.get("wave", ("alone", s["order"]))), s.get("vllm"))
                groups.setdefault(key, {})[s["server"]] = s["start_s"]
        for (wave, code), got in sorted(groups.items(), key=lambda kv: str(kv[0])):
            if other not in got or control not in got:
                continue
            if base in got:
                ratios = {f"{other}/{base}": round(got[other] / got[base], 4),
                          f"{control}/{base}": round(got[control] / got[base], 4)}
            else:
                ratios = {f"{other}/{control}": round(got[other] / got[control], 4)}
            out[phase] = {"wave": int(wave) if wave.isdigit() else wave, "vllm": code,
                          "start_s": got, "ratios": ratios}
            break
    return out
