"""``dspark-attn-plugin diagnose``: is this server log the #50615 crash, and
did the plugin cover every process that runs the model?

Exit status:

0  protected, or not needed: the plugin patched every process that ran the
   model's warmup, or it found the build not affected / fixed there, or the
   log names its model's architecture and it is not DeepSeek-V4 (#50615
   cannot happen there). Only on such evidence: a path, a cut log, a log
   whose order cannot be read are never 0;
1  the #50615 crash (the warmup's ``topk_indices_buffer`` assertion under
   ``profile_run``) with the plugin not in effect; a one-line remedy says
   what to change;
2  nothing conclusive: an empty log, not a vLLM log, a log that stops before
   the warmup (and no earlier start in it got there), a log written newest
   first, or a server that started with the plugin not in effect in every
   process that runs the model;
3  a different crash (a process that died, killed by the OOM killer say,
   is one): this plugin does not address it;
4  the input cannot be read (a missing file, a folder, binary data).

A log that holds several starts of the server is judged by its last one;
where that one is cut before its warmup, by the most recent start that
reached its warmup or crashed after loading the model (a start that died
before any process loaded it says nothing of the next); the report says
what the others came to. Files are read as they are on disk (gzip, UTF-16, NUL padding, bytes
that are not UTF-8: each noted) and through the exports operators download
(JSON lines or arrays, CSV; ``log_exports``).
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import asdict, dataclass, field

from dspark_attn_plugin.log_exports import vllm_lines
from dspark_attn_plugin.log_input import TextLines
from dspark_attn_plugin.log_reader import (
    _DEATH,
    _DEATH_NOT,
    _RANK_NAME,
    Log,
    LogError,
    LogReader,
    Process,
    Traceback,
)

EXIT_OK, EXIT_CRASH, EXIT_INCONCLUSIVE, EXIT_OTHER_CRASH, EXIT_UNREADABLE = 0, 1, 2, 3, 4
# Architectures that vLLM builds from DeepSeek-V4's module under a name that
# does not say so (vLLM 0.27's registry: the DSpark drafter).
_DEEPSEEK_V4_DRAFTERS = {"DSparkDraftModel"}
# A name these begin with may be one of them cut at a width (a terminal's,
# a log pipeline's): no other model.
_MAY_BE_CUT_FROM = ("DeepseekV4ForCausalLM", *_DEEPSEEK_V4_DRAFTERS)
# The plugin's words for leaving DeepSeek-V4's attention alone once that
# module is loaded (not at registration, nor when its patch is removed).
# The plugin's words for its own failure (its install, its code), not the build's.
_ITS_OWN_FAULT = re.compile(r"dspark-attn-plugin (?:could not register|failed on)")
_JUDGED_ON_LOAD = re.compile(r"dspark-attn-plugin (?:cannot patch|does not recognise|failed on)")

# What a process says when another one failed (the API server: "See root
# cause above"; the engine: "Worker failed with error '', please check the
# stack trace above for the root cause"; "EngineDeadError: ... See stack
# trace (above) for the root cause").
_REPORTS = ("root cause above", "initialization failed", "stack trace above",
            "stack trace (above)")

EXIT_CODES_HELP = (
    "Exit status: 0 protected or not needed (the plugin patched every process that "
    "ran the model's warmup, or the build is not affected / fixed, or the model is "
    "not DeepSeek-V4); 1 the #50615 "
    "crash with the plugin not in effect (a remedy follows); 2 nothing conclusive "
    "(empty, not a vLLM log, stops before the warmup, or the plugin not in effect "
    "in every process that runs the model); 3 a different crash, which this plugin "
    "does not address; 4 the input cannot be read. 0 only on positive evidence."
)

PLUGIN_NAME = "dspark_attn_plugin"
# How many earlier starts of the server a report names (first and last).
MAX_EARLIER = 6


@dataclass
class Diagnosis:
    # protected, not-needed, not-applicable, crash-50615, other-crash, inconclusive
    verdict: str
    exit_code: int
    summary: str
    remedy: str | None = None
    crash: dict | None = None
    processes: list[dict] = field(default_factory=list)
    lines_read: int = 0
    starts: int = 1  # starts of the server in the log; the last one is judged
    earlier: list[dict] = field(default_factory=list)  # what earlier starts came to
    notes: list[str] = field(default_factory=list)  # what reading the input took
    # The start judged got to its warmup (or crashed): a verdict of its own.
    reached: bool = True
    # The start judged ended (failed) before its warmup: not one cut there,
    # so no earlier start's verdict stands for it.
    ended: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def _where(tb: Traceback) -> dict:
    frame = tb.innermost
    return {
        "exception": tb.exc_type,
        "message": tb.message,
        "file": frame.file if frame else None,
        "line": frame.line if frame else None,
        "function": frame.func if frame else None,
        "statement": frame.statement if frame else None,
        "under_profile_run": "profile_run" in tb.functions,
    }


def _process_report(p: Process) -> dict:
    return {
        "process": p.label,
        "pid": p.pid,
        "names": p.names,
        "runs_model": p.runs_model,
        "plugin": [{"state": s, "detail": d} for s, d in p.plugin],
        "rescued": p.rescued,
        "crash_50615": _where(p.crash_50615) if p.crash_50615 else None,
        "errors": [_where(t) for t in p.tracebacks if not t.is_50615()][:3],
        "tracebacks": p.traceback_count,
        "kv_cache_tokens": p.kv_cache_tokens,
        "max_concurrency": p.max_concurrency,
    }


def _remedy(log: Log, crashed: list[Process]) -> str:
    states = set().union(*(p.plugin_states() for p in crashed))
    anywhere = set().union(*(p.plugin_states() for p in log.processes.values()))
    if "disabled" in states:
        return ("Remove DSPARK_ATTN_PLUGIN=off (or set it to auto) from the environment "
                "of the processes that run vLLM.")
    if states & {"patched", "not-affected", "fixed"}:
        # (not affected or fixed: its judgement of the build was wrong)
        return ("The plugin was in effect in this process (it patched the build, or found "
                "it not affected or fixed) and the warmup still failed at the assertion: run "
                "`dspark-attn-plugin verify` in the image and report it.")
    if any(s == "left-alone" and _ITS_OWN_FAULT.search(d) for p in crashed for s, d in p.plugin):
        return ("The plugin itself failed in this process (see its WARNING: it could not "
                "register, or failed on the target): reinstall it, run `dspark-attn-plugin "
                "verify` in the image, and report it.")
    if "left-alone" in states:
        return ("The plugin left this build's code alone (see its WARNING): run "
                "`dspark-attn-plugin status` in the image; the build cannot be patched.")
    names = ", ".join(p.label for p in crashed)
    if anywhere:
        return (f"The plugin is not in effect in {names}: install dspark-attn-plugin in "
                "the environment of every process that runs vLLM (and, if VLLM_PLUGINS "
                f"is set there, name {PLUGIN_NAME} in it).")
    excluded = (
        PLUGIN_NAME in log.listed_plugins and log.loading_plugins
        and PLUGIN_NAME not in log.loading_plugins
    ) or (log.vllm_plugins_env is not None and PLUGIN_NAME not in log.vllm_plugins_env.split(","))
    if excluded:
        return (f"VLLM_PLUGINS is set and leaves the plugin out: add {PLUGIN_NAME} to "
                "VLLM_PLUGINS.")
    return ("Install dspark-attn-plugin into the image that runs vLLM: build its wheel "
            "from the project (`make wheel`, or `pip wheel --no-deps -w dist .` in a "
            "clone) and `pip install dspark_attn_plugin-*.whl` there; if VLLM_PLUGINS "
            f"is set, name {PLUGIN_NAME} in it.")


def _state_text(p: Process) -> str:
    parts = []
    for state, detail in p.plugin:
        if state in ("patched", "not-affected", "fixed"):
            parts.append(f"{state} (vLLM {detail})")
        elif state == "left-alone":
            parts.append("left vLLM's code alone with a WARNING")
        else:
            parts.append("disabled by DSPARK_ATTN_PLUGIN=off")
    return "; ".join(parts) or "no line from the plugin"


CONCLUSIVE_EARLIER = ("crash-50615", "other-crash", "protected", "not-needed", "not-applicable")


def diagnose(log: Log) -> Diagnosis:
    """The verdict on ``log``: its last start, or, where that one is cut
    before its warmup (nothing conclusive of its own), the most recent start
    in the log that reached it."""
    if log.newest_first:
        return Diagnosis(
            "inconclusive", EXIT_INCONCLUSIVE,
            "Nothing conclusive: this log reads newest first (its timestamps go back "
            f"{log.newest_first} times), so its starts and tracebacks cannot be read in "
            "order. Export it oldest first (Loki: `logcli query --forward`; gcloud: "
            "`--order=asc`), or reverse it (`tac LOG | dspark-attn-plugin diagnose -`).",
            lines_read=log.total_lines or log.lines, starts=log.runs, notes=list(log.notes),
            reached=False,
        )
    d = _latest(log)
    if d.exit_code != EXIT_OK:
        return d
    if log.interleaved_sources:
        why = (
            f"this log holds the lines of {log.interleaved_sources} "
            "sources (pods or containers named before each line or in each record), so it "
            "cannot show each server protected. Diagnose each on its own (`kubectl logs "
            "POD`).")
    elif log.served_models >= 2:
        why = (
            f"this Triton server loads {log.served_models} models, each with a vLLM engine of "
            "its own: the start read last is one model's, and says nothing of the others' "
            "(one of them may have failed to load). Diagnose each model's lines on its own.")
    elif log.start_repeated:
        why = (
            f"at line {log.start_repeated:,} a process logs a second time what a process "
            "logs once in a start (the server's or engine's start, its rank, the model it "
            "loads): these are the lines "
            "of two servers mixed, with nothing on each line naming its own (`kubectl logs -l` "
            "without `--prefix`?), and one protected start says nothing of the other. "
            "Diagnose each on its own.")
    elif log.starts_back_in_time:
        why = (
            f"a start of the server in this log (line "
            f"{log.starts_back_in_time:,}) begins at a time before the lines above it, "
            "which a restart of one server does not do: these are the logs of several "
            "servers one after another, and one protected start says nothing of the others. "
            "Diagnose each on its own.")
    else:
        return d
    d.verdict, d.exit_code = "inconclusive", EXIT_INCONCLUSIVE
    d.summary = f"Nothing conclusive: {why} What the lines read as one server came to: {d.summary}"
    return d


def _latest(log: Log) -> Diagnosis:
    """The verdict of the last start, or of the most recent one that reached
    its warmup where the last was cut before it."""
    d = _judge(log)
    previous = log.previous
    if not d.reached and not d.ended and d.verdict == "inconclusive" and previous is not None:
        start, from_line, earlier, its_model, its_log = previous
        if earlier.verdict == "not-applicable" or (its_model is False and _deepseek_v4(log)):
            # Another model's start says nothing of this one's warmup.
            d.summary = (f"{d.summary} Start {start} before it (from line {from_line:,}) ran "
                         "another model: that is no verdict for this start.")
            return d
        if earlier.verdict == "crash-50615" and _plugin_in_effect_so_far(log):
            # That crash had the plugin not in effect; this start has it.
            d.summary = (f"{d.summary} Start {start} before it (from line {from_line:,}) came "
                         "to the #50615 crash with the plugin not in effect; this start shows "
                         "it in effect, so that is no verdict for it.")
            return d
        changed = _what_changed(its_log, log)
        if changed:
            # Another vLLM, or another parallel layout: that start's
            # verdict says nothing of this one's processes.
            d.summary = (f"{d.summary} Start {start} before it (from line {from_line:,}) ran "
                         f"{changed}: that is no verdict for this start.")
            return d
        if earlier.exit_code == EXIT_OK and not _plugin_in_effect_so_far(log):
            # An earlier start was protected, but this one shows no plugin in
            # effect yet: no evidence that it is.
            d.summary = (f"{d.summary} Start {start} before it (from line {from_line:,}) came "
                         f"to: {earlier.verdict}; this start does not show the plugin in "
                         "effect yet, so that is no verdict for it.")
            return d
        return Diagnosis(
            earlier.verdict, earlier.exit_code,
            f"The last start (from line {log.first_line:,}) had not reached its warmup; "
            f"start {start} (from line {from_line:,}) before it: {earlier.summary}",
            remedy=earlier.remedy, crash=earlier.crash, processes=earlier.processes,
            lines_read=d.lines_read, starts=d.starts, earlier=d.earlier, notes=d.notes,
        )
    return d


def _what_changed(before: Log, now: Log) -> str:
    """What differs between an earlier start and a later one that both
    name it: the vLLM version, or the ranks the model runs on ("" if
    nothing shown differs)."""
    if before.versions and now.versions and not before.versions & now.versions:
        return (f"vLLM {', '.join(sorted(before.versions))}, this one "
                f"{', '.join(sorted(now.versions))}")
    ranks = [max(log.world_size, log.parallel_ranks) for log in (before, now)]
    if all(ranks) and ranks[0] != ranks[1]:
        return f"the model on {ranks[0]} ranks, this one on {ranks[1]}"
    return ""


def _plugin_in_effect_so_far(log: Log) -> bool:
    """Every plugin line of the (cut) start says the plugin is in effect,
    and there is at least one."""
    states = [set(p.plugin_states()) for p in log.processes.values() if p.plugin]
    return bool(states) and all(s <= {"patched", "not-affected", "fixed"} for s in states)


def _judge(log: Log) -> Diagnosis:
    # Lines with no prefix, or only torch's rank (its own warnings), that
    # said nothing of interest are no process to report.
    procs = [
        p for p in log.ordered()
        if any(not _RANK_NAME.fullmatch(n) for n in p.names)
        or p.plugin or p.tracebacks or p.runs_model or p.rescued
    ]
    reports = [_process_report(p) for p in procs]

    def made(verdict: str, code: int, summary: str, stop_note: bool = True, **more) -> Diagnosis:
        unread = log.unread_traceback()
        if code == EXIT_OK and unread is not None and (stopped_at is None or unread[0] < stopped_at):
            # Positive evidence only: a traceback that could not be read
            # may be the crash.
            verdict, code = "inconclusive", EXIT_INCONCLUSIVE
            summary = (
                f"Nothing conclusive: a traceback at line {unread[1]:,} ({unread[2]}) could not "
                "be read: its lines are not as Python prints them (quoted or escaped by a log "
                "pipeline, cut or wrapped at a width), or the log ends inside it, so what it "
                "raised is not known. Give diagnose the log as vLLM wrote it (`jq -r`, not "
                f"`jq`). What the other lines came to: {summary}")
        if stop_note and stopped_at is not None:
            summary += f" (The server was stopped at line {log.stopping_line:,} of the log.)"
        if log.runs > 1:
            summary += (f" This is the last of {log.runs} starts of the server in the log "
                        f"(it begins at line {log.first_line:,}).")
        return Diagnosis(verdict, code, summary, processes=reports,
                         lines_read=log.total_lines or log.lines, starts=log.runs,
                         earlier=list(log.earlier), notes=list(log.notes), **more)

    # A stop asked for (Ctrl-C, SIGTERM, "Shutting down") is no crash, and
    # what processes raise after it follows from it; but vLLM shutting down
    # because a process died is the death's doing, not a stop.
    stopped_at = log.stopping_at
    if log.death is not None and stopped_at is not None and log.death[0] <= stopped_at:
        stopped_at = None
    crashed = [p for p in procs if p.crash_50615 is not None]
    if crashed:
        first = crashed[0].crash_50615
        where = _where(first)
        crash = {**where, "processes": [p.label for p in crashed]}
        return made(
            "crash-50615", EXIT_CRASH,
            f"vllm-project/vllm#50615: AssertionError at {where['file']}:{where['line']} "
            f"in forward_mqa under profile_run, in {', '.join(crash['processes'])}.",
            stop_note=stopped_at is not None and stopped_at < first.line_no,
            remedy=_remedy(log, crashed), crash=crash,
        )
    errors = [
        (t.line_no, p, t) for p in procs for t in p.tracebacks
        if (stopped_at is None or t.line_no < stopped_at)
        and not t.is_cancellation() and not t.is_interruption()
    ]
    # The assertion of #50615 in a traceback cut before it shows what ran it:
    # likely the crash, never "a different crash".
    near = [(n, p, t) for n, p, t in errors if t.at_the_assertion() or _maybe_the_assertion(p, t)]
    if near:
        _, proc, tb = near[0]
        where = _where(tb)
        missing = ("its frames were not read as written, though the process wrote that "
                   "assertion (lines wrapped by a terminal? `tmux capture-pane -J` joins them)"
                   if not tb.at_the_assertion() else
                   "the traceback is cut before it shows profile_run (a log cut by --tail "
                   "or --since?): run diagnose on the whole log"
                   if "topk_indices_buffer" in tb.innermost.statement else
                   "the log does not show that assertion's statement raising it (no source "
                   "files in the image, or two processes' lines mixed)")
        return made(
            "inconclusive", EXIT_INCONCLUSIVE,
            f"Probably vllm-project/vllm#50615: AssertionError at {where['file']}:{where['line']} "
            f"in forward_mqa, in {proc.label}, but {missing}.",
            stop_note=False, crash={**where, "processes": [proc.label]},
        )
    # What the API server says when the engine failed ("See root cause
    # above"): the cause is another process's traceback, not in this log.
    causes = [(n, p, t) for n, p, t in errors if not _a_report_of_another(t)]
    applies = _deepseek_v4(log)
    # A start that died before any process loaded the model says nothing of
    # the start after it (a changed argument, another image): it is no
    # verdict a cut restart can be judged by.
    loaded = any(p.runs_model for p in procs)
    death = log.death if log.death is not None and (
        stopped_at is None or log.death[0] < stopped_at) else None
    if death is None and errors and not causes:
        _, proc, tb = errors[0]
        # A start that failed is no start cut before its warmup: an earlier
        # one's verdict is none for it (ended=True).
        return made(
            "inconclusive", EXIT_INCONCLUSIVE,
            f"Nothing conclusive: the log shows {proc.label} reporting that the engine failed "
            f"({tb.exc_type}: {tb.message[:160]}), but not the failure itself (the log is cut?).",
            stop_note=False, reached=False, ended=True,
        )
    errors = causes
    if death is not None and (not errors or death[0] <= min(e[0] for e in errors)):
        _, line, text, label = death
        return made(
            "other-crash", EXIT_OTHER_CRASH,
            f"A different crash: a process died ({text}), at line {line:,} of the log, "
            f"seen by {label}. dspark-attn-plugin does not address it.",
            stop_note=False, crash={"death": text, "line": line, "processes": [label]},
            reached=loaded,
        )
    if errors:
        _, proc, tb = min(errors, key=lambda e: e[0])
        where = _where(tb)
        place = f"{where['file']}:{where['line']} in {where['function']}" if where["file"] else "?"
        died = (f" A process died: {tb.message[:200]}."
                if _DEATH.search(tb.message) and not _DEATH_NOT.search(tb.message) else "")
        return made(
            "other-crash", EXIT_OTHER_CRASH,
            f"A different crash: {tb.exc_type} at {place}, in {proc.label} (the first "
            f"traceback in the log).{died} dspark-attn-plugin does not address it.",
            stop_note=False, crash={**where, "processes": [proc.label]}, reached=loaded,
        )
    if log.vllm_lines == 0:
        what = "empty" if log.lines == 0 and not log.notes else (
            "not a vLLM log (no vLLM log line in it)")
        return made("inconclusive", EXIT_INCONCLUSIVE, f"Nothing conclusive: the input is {what}.",
                    reached=False)
    if applies is False:
        model = ", ".join(sorted(log.architectures))
        return made("not-applicable", EXIT_OK,
                    f"Not applicable: this server runs {model}, not DeepSeek-V4; "
                    "vllm-project/vllm#50615 cannot happen there.")
    model = [p for p in procs if p.runs_model]
    if not model:
        return made("inconclusive", EXIT_INCONCLUSIVE,
                    "Nothing conclusive: the log stops before any process loads the model.",
                    reached=False)
    if not any(p.past_warmup for p in procs):
        return made("inconclusive", EXIT_INCONCLUSIVE,
                    "Nothing conclusive: the log stops before the model's warmup "
                    "(profile_run) is over.", reached=False)
    # A process that also says the plugin is off or left vLLM alone is
    # several processes read as one (lines with no prefix): not covered.
    covered = [p for p in model if not p.plugin_states() & {"disabled", "left-alone"}]
    if log.folded_model > log.folded_plugin:
        return made(
            "inconclusive", EXIT_INCONCLUSIVE,
            f"Ray folded the model's lines of {log.folded_model} more process(es) into another's "
            f"([repeated {log.folded_model}x across cluster]) but the plugin's of "
            f"{log.folded_plugin}: this log does not show every process that runs the model "
            "covered (set RAY_DEDUP_LOGS=0 to see each).")
    def in_effect_in(p: Process) -> set[str]:
        return p.plugin_states() & {"patched", "not-affected", "fixed"}

    # Each process in effect, or the processes Ray folded into its line.
    in_effect = sum(max(1, p.in_effect_for) for p in model if in_effect_in(p))
    ranks, said = max((log.world_size, "vLLM's world size"), (
        log.parallel_ranks, "its tensor_parallel_size x pipeline_parallel_size"))
    if ranks > in_effect and len(covered) == len(model) and all(
            in_effect_in(p) for p in model):
        return made(
            "inconclusive", EXIT_INCONCLUSIVE,
            f"The model runs on {ranks} ranks ({said}), but this log shows "
            f"the plugin in effect in {in_effect} of them: the other ranks' processes are not "
            "in it (another node's log, or lines Ray folded: set RAY_DEDUP_LOGS=0), so it does "
            "not show the deployment protected. Diagnose each node's log.")
    if len(covered) == len(model) and all("patched" in p.plugin_states() for p in model):
        rescued = sum(1 for p in model if p.rescued)
        return made(
            "protected", EXIT_OK,
            f"Protected: the plugin patched every process that runs the model "
            f"({', '.join(p.label for p in model)}); {rescued} of them warmed up an "
            "SWA-only layer without topk_indices_buffer through the fix.",
        )
    if len(covered) == len(model) and all(p.plugin_states() & {"not-affected", "fixed"}
                                          for p in model):
        return made("not-needed", EXIT_OK,
                    "Not needed: the plugin found this vLLM not affected or fixed in every "
                    "process that runs the model, and left it untouched.")
    if len(covered) == len(model) and all(in_effect_in(p) for p in model):
        # Builds that differ from node to node (one affected, one fixed).
        patched = [p.label for p in model if "patched" in p.plugin_states()]
        rest = [p.label for p in model if "patched" not in p.plugin_states()]
        return made(
            "protected", EXIT_OK,
            f"Protected: the plugin is in effect in every process that runs the model: it "
            f"patched {', '.join(patched)} and found vLLM not affected or fixed in "
            f"{', '.join(rest)} (the processes run different vLLM builds).",
        )
    uncovered = [p for p in model if p not in covered
                 or not p.plugin_states() & {"patched", "not-affected", "fixed"}]
    return made(
        "inconclusive", EXIT_INCONCLUSIVE,
        "The server got past its warmup, but the plugin is not in effect in "
        + ", ".join(f"{p.label} ({_state_text(p)})" for p in uncovered)
        + ": this log does not show the deployment protected.",
    )


def _maybe_the_assertion(p: Process, tb: Traceback) -> bool:
    """An AssertionError whose innermost frame, as read, shows no assertion,
    in a process that wrote #50615's assertion in a traceback: its frames
    were not read as written (a terminal wrapped them): maybe #50615."""
    frame = tb.innermost
    return (p.wrote_the_assertion and tb.exc_type == "AssertionError"
            and not (frame is not None and frame.statement.startswith(("assert ", "raise "))))


def _a_report_of_another(tb: Traceback) -> bool:
    """A traceback that reports another process's failure (vLLM's "See root
    cause above", "Engine core initialization failed")."""
    report = any(m in tb.message for m in _REPORTS)
    return report and not (_DEATH.search(tb.message) and not _DEATH_NOT.search(tb.message))


def _deepseek_v4(log: Log) -> bool | None:
    """Whether the start's model is DeepSeek-V4 (None: the log does not say).
    DeepSeek-V4 where it names that architecture, or where the plugin judged
    or rescued DeepSeek-V4's attention (it does so only once that module is
    loaded). Another model only where every architecture the start resolved
    is kept, none is DeepSeek-V4, and the log holds the target's: the API
    server's start lines come before any architecture it resolves, and an
    engine configured without a drafter resolves none but the target's. A
    model's path or name proves nothing, and neither does a drafter's
    architecture in a start cut before its target's."""
    if any("deepseekv4" in a.lower() or a in _DEEPSEEK_V4_DRAFTERS for a in log.architectures):
        return True
    if any(p.rescued or p.plugin_states() & {"patched", "not-affected", "fixed"}
           or any(_JUDGED_ON_LOAD.search(detail) for state, detail in p.plugin if state == "left-alone")
           for p in log.processes.values()):
        return True
    if any(name.startswith(a) for a in log.architectures for name in _MAY_BE_CUT_FROM):
        return None
    if log.architectures and not log.more_architectures and (log.api_start or log.no_drafter):
        return False
    return None


def read_paths(paths: list[str], stdin=None) -> Log:
    """Read the logs named (``-`` is standard input) as one deployment's.
    Returns the last start of the server; earlier ones are summarised in
    its ``earlier`` (the first and last few), and the most recent one that
    reached its warmup is kept in ``previous``."""
    earlier: list[dict] = []
    count = [0]
    previous = [None]

    def finished(run: Log) -> None:
        count[0] += 1
        run.newest_first = 0
        d = _judge(run)
        entry = {"start": count[0], "from_line": run.first_line, "verdict": d.verdict,
                 "exit_code": d.exit_code, "summary": d.summary}
        if d.reached and d.verdict in CONCLUSIVE_EARLIER + ("inconclusive",):
            previous[0] = (count[0], run.first_line, d, _deepseek_v4(run), run)
        earlier.append(entry)
        if len(earlier) > MAX_EARLIER:
            del earlier[MAX_EARLIER // 2]  # keep the first and the latest

    reader = LogReader(on_run_end=finished)
    notes: list[str] = []
    for index, path in enumerate(paths or ["-"]):
        if index:
            reader.next_source()
        name = "standard input" if path == "-" else path
        if path != "-" and os.path.isdir(path):
            raise LogError(f"{path}: is a folder, not a log file")
        try:
            stream = (stdin if stdin is not None else sys.stdin.buffer) if path == "-" else open(path, "rb")
        except OSError as exc:
            raise LogError(f"cannot read {path}: {exc.strerror or exc}") from None
        try:
            text = TextLines(stream, name)
            for line in vllm_lines(text, name):
                reader.feed(line)
            notes += [f"{name}: {n}" if len(paths) > 1 else n for n in text.notes]
        except OSError as exc:
            raise LogError(f"cannot read {path}: {exc.strerror or exc}") from None
        finally:
            if path != "-":
                stream.close()
    log = reader.log
    log.total_lines, log.runs, log.earlier = reader.total_lines, reader.runs, earlier
    log.previous, log.notes = previous[0], notes
    log.newest_first = (reader.steps_back or reader.headers_after_frames) if reader.newest_first else 0
    log.interleaved_sources = reader.interleaved_sources
    log.starts_back_in_time = reader.starts_back_in_time
    log.start_repeated = reader.start_repeated
    log.served_models = len(reader.served_models)
    return log


def render(d: Diagnosis) -> str:
    lines = [d.summary]
    if d.crash and d.verdict == "crash-50615" and d.crash.get("statement"):
        lines.append(f"  the failing statement: {d.crash['statement']}")
    if d.remedy:
        lines.append(f"Remedy: {d.remedy}")
    if d.processes:
        lines.append("")
        lines.append("Processes (in order of appearance):")
        width = max(len(p["process"]) for p in d.processes)
        for p in d.processes:
            notes = []
            if p["runs_model"]:
                notes.append("runs the model")
            plugin = [
                f"{x['state']} (vLLM {x['detail']})" if x["state"] in ("patched", "not-affected", "fixed")
                else "left vLLM's code alone (WARNING)" if x["state"] == "left-alone"
                else "disabled by DSPARK_ATTN_PLUGIN=off"
                for x in p["plugin"]
            ]
            notes.append("plugin: " + ("; ".join(plugin) if plugin else "no line"))
            if p["rescued"]:
                notes.append(f"warmed up {p['rescued'][0]} through the fix")
            if p["crash_50615"]:
                notes.append("raised the #50615 AssertionError")
            elif p["errors"]:
                e = p["errors"][0]
                notes.append(f"raised {e['exception']}")
            lines.append(f"  {p['process']:<{width}}  " + "; ".join(notes))
    if d.earlier:
        lines.append("")
        lines.append(f"Earlier starts of the server in this log ({d.starts - 1}):")
        for e in d.earlier:
            lines.append(f"  start {e['start']} (from line {e['from_line']:,}): {e['verdict']}, "
                         f"exit {e['exit_code']}")
    for note in d.notes:
        lines.append(f"(input: {note})")
    lines.append(f"({d.lines_read:,} lines read; exit {d.exit_code})")
    return "\n".join(lines)
