"""The engine evidence on one GPU: the same tokens with and without the
plugin, start times that compare like with like, and the cost beside its
own noise.

Two phases (DSpark first: its first server compiles the kernels of both),
each with three servers kept running side by side on the GPU (each with its
share of memory), started one after the other:

- ``target`` (no speculative decoding; every layer has its buffer, so stock
  starts too): ``stock`` (the stand-in without the plugin), ``plugin`` (the
  stand-in with it) and ``stock-b`` (a second stock: the control);
- ``dspark`` (DSpark on): ``released`` (vLLM as installed, no plugin),
  ``standin-plugin`` (the stand-in with the plugin: the fix a user runs) and
  ``released-b`` (the control).

Per server, first the token batch (fixed prompts, greedy, ``ignore_eos``,
the token ids asked back), untimed; then a short warm-up batch; then the
rounds: each round sends the workload batch to one server at a time, in an
order rotated every round, so no server is always first or last. A round's
ratios are second/first and control/first, from the client's clock and from
the servers' own time-per-output-token histograms. Starts are reported in
the order they happened; the first start on the machine (kernels compiled)
and the first of each phase are never compared.
"""

from __future__ import annotations

import math
import time

from engine import metrics
from engine.server import Server, free_port, serve_command

PHASES = {
    # phase: speculative, [(server, stand-in, plugin)], (base, other, control)
    "target": (None, [("stock", True, False), ("plugin", True, True), ("stock-b", True, False)]),
    "dspark": ("dspark", [("released", False, False), ("standin-plugin", True, True),
                          ("released-b", False, False)]),
}
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


def _outputs(server, settings) -> dict:
    """The greedy outputs of the fixed prompts: token ids, or the texts
    where the server will not return ids (then compared character by
    character)."""
    try:
        reply = server.complete(TOKEN_PROMPTS, settings.evidence_token_max_tokens,
                                token_ids=True)
        return {"token_ids": token_ids(reply)}
    except Exception as exc:
        reply = server.complete(TOKEN_PROMPTS, settings.evidence_token_max_tokens)
        texts = [c["text"] for c in sorted(reply["choices"], key=lambda c: c["index"])]
        return {"texts": texts, "token_ids_error": repr(exc)[:300]}


def compare_outputs(base: dict, other: dict) -> dict:
    """``compare_tokens`` of two servers' outputs, on token ids where both
    have them, else on texts."""
    if "token_ids" in base and "token_ids" in other:
        return {"unit": "token ids", **compare_tokens(base["token_ids"], other["token_ids"])}
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
    """Both phases; the result is filled in place and ``save``d as it grows."""
    prompts = (TOKEN_PROMPTS * settings.evidence_batch)[: settings.evidence_batch]
    result: dict = {
        "method": ("one GPU; per phase three servers started one after the other and kept "
                   "running; per round the batch goes to one server at a time, in an order "
                   "rotated every round"),
        "workload": {"prompts": len(prompts), "max_tokens": settings.evidence_max_tokens,
                     "max_num_seqs": settings.evidence_max_num_seqs, "temperature": 0.0,
                     "ignore_eos": True, "rounds": settings.evidence_rounds,
                     "token_prompts": len(TOKEN_PROMPTS),
                     "token_max_tokens": settings.evidence_token_max_tokens,
                     "enforce_eager": settings.enforce_eager,
                     "cudagraph_capture_sizes": settings.cudagraph_capture_sizes},
        "starts": [], "phases": {}, "problems": [],
    }
    save(result)
    for phase in settings.evidence_phases:
        _run_phase(phase, prompts, layout, settings, result, save)
    return result


def _run_phase(phase: str, prompts, layout, settings, result: dict, save) -> None:
    from engine.harness import DSPARK, _not_healthy, _read_kv, observe_start, server_env

    speculative, members = PHASES[phase]
    names = [m[0] for m in members]
    base, other, control = names
    out: dict = {"servers": {}, "rounds": [], "tokens": {}, "throughput": None,
                 "server_tpot": None}
    result["phases"][phase] = out
    servers: dict = {}
    try:
        for name, standin, plugin in members:
            port = free_port()
            command = serve_command(
                layout.model, port, speculative=DSPARK if speculative else None,
                max_model_len=settings.max_model_len,
                gpu_memory_utilization=settings.gpu_memory_utilization,
                enforce_eager=settings.enforce_eager,
                max_num_seqs=settings.evidence_max_num_seqs,
                cudagraph_capture_sizes=settings.cudagraph_capture_sizes,
            )
            env = server_env(standin, plugin, False, layout)
            log_path = layout.logs / f"evidence-{phase}-{name}.log"
            servers[name] = Server(command, env, log_path, port).__enter__()
            start = observe_start(servers[name], settings.start_timeout_s)
            order = len(result["starts"])
            result["starts"].append({
                "order": order, "phase": phase, "server": name, **start,
                "first_on_machine": order == 0, "first_of_phase": name == base,
            })
            out["servers"][name] = {"log": str(log_path), "healthy": start["healthy"]}
            save(result)
            if not start["healthy"]:
                result["problems"].append(f"{phase}/{name}: {_not_healthy(start)}")
                return
        for name in names:  # untimed: the outputs compared
            out["servers"][name].update(_outputs(servers[name], settings))
            servers[name].complete(prompts, 16)  # warm-up, not measured
        out["tokens"] = {f"{n} vs {base}": compare_outputs(out["servers"][base],
                                                           out["servers"][n])
                         for n in (other, control)}
        save(result)
        for round_no in range(settings.evidence_rounds):
            one: dict = {"round": round_no, "order": rotated(names, round_no)}
            for name in one["order"]:
                before = metrics.histogram(servers[name].metrics_text(), metrics.TPOT)
                t0 = time.perf_counter()
                reply = servers[name].complete(prompts, settings.evidence_max_tokens)
                elapsed = time.perf_counter() - t0
                after = metrics.histogram(servers[name].metrics_text(), metrics.TPOT)
                tokens = reply["usage"]["completion_tokens"]
                one[name] = {"tokens": tokens, "seconds": round(elapsed, 4),
                             "tokens_per_s": round(tokens / elapsed, 1),
                             "server_tokens_per_s_per_request": _round(_server_rate(before, after))}
            out["rounds"].append(one)
            _summarize_phase(out, base, other, control)
            save(result)
    except Exception as exc:  # reported, not raised: the next phase still runs
        result["problems"].append(f"{phase}: {exc!r}")
    finally:
        for server in servers.values():
            server.stop()
        sides = {n: s for n, s in out["servers"].items()}
        _read_kv(sides)
        save(result)


def _round(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) else round(x, 3)


def _summarize_phase(out: dict, base: str, other: str, control: str) -> None:
    rounds = out["rounds"]
    out["throughput"] = phase_ratios(rounds, base, other, control, "tokens_per_s")
    out["throughput"]["reading"] = relative_to_aa(out["throughput"], other, control, base)
    out["server_tpot"] = phase_ratios(rounds, base, other, control,
                                      "server_tokens_per_s_per_request")
    out["server_tpot"]["reading"] = relative_to_aa(out["server_tpot"], other, control, base)


def start_comparisons(starts: list[dict]) -> dict:
    """Warm starts only (not the machine's first, not a phase's first),
    other/control within each phase: like with like."""
    out = {}
    for phase, (_, members) in PHASES.items():
        warm = {s["server"]: s["start_s"] for s in starts
                if s["phase"] == phase and not s["first_on_machine"] and not s["first_of_phase"]
                and s.get("start_s")}
        names = [m[0] for m in members]
        if names[1] in warm and names[2] in warm:
            out[phase] = {"servers": f"{names[1]}/{names[2]}",
                          "ratio": round(warm[names[1]] / warm[names[2]], 4),
                          names[1]: warm[names[1]], names[2]: warm[names[2]]}
    return out
