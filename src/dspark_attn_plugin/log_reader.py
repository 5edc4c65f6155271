"""Read a vLLM server log, as vLLM writes it, into what each process did.

Streamed line by line: memory stays bounded whatever the log's size. Handles
vLLM's process prefixes (``(APIServer pid=N)``, ``(EngineCore_DP0 pid=N)``,
``(Worker_TP1 pid=N)``, Ray's ``(RayWorkerWrapper pid=N, ip=A)`` and
``(pid=N, ip=A)``, none at all for an in-process ``vllm.LLM``), the logger's
``LEVEL MM-DD HH:MM:SS [file.py:N]`` head (also in front of traceback
lines), ``\\r\\n`` line ends, ANSI colours, tracebacks of several processes
interleaved, tracebacks whose header was cut off, and Ray's
``RayTaskError(Type)`` lines. A constant wrapper that a log pipeline puts
before vLLM's own line (timestamps, journald's ``host unit[pid]:``, docker
compose's ``service |``, ``[rank0]:``, quotes) is learnt from the first line
where vLLM's shape starts later in the line, and stripped from that line
and every later one it fits. JSON lines (one object a line, the message and
a traceback in fields) are read as the text they hold. A log may hold
several starts of the server (``vLLM API server version``, a container's
``exited with code``): ``runs`` counts them, and ``on_run_end`` is given
each finished one. A process is its pid: a worker that logs as
``Worker`` and then as ``Worker_TP0`` is one process. The lines a process
writes before vLLM prefixes its output (the plugin's own line among them)
have no prefix; a plugin line without one is given to the next process that
appears in the log without a plugin line of its own.

Pure Python: imports neither torch nor vLLM.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from dspark_attn_plugin.log_exports import record_lines, record_source, vllm_lines
from dspark_attn_plugin.log_input import MAX_LINE, LogError, TextLines

__all__ = ["Log", "LogError", "LogReader", "Process", "Traceback", "read_lines", "MAX_LINE"]

# Frames kept of one traceback (the innermost ones), besides their names.
MAX_FRAMES = 64
# Unprefixed plugin lines and dangling prefixes kept waiting for their process.
MAX_PENDING = 64

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_PREFIX = re.compile(
    r"^\((?:(?P<name>[A-Za-z_][\w.-]*)(?: rank=\d+)?(?: pid=(?P<pid>\d+))?|pid=(?P<rpid>\d+))"
    r"(?:, ip=(?P<ip>[^,)\s]+))?\) ?"
)
# Where vLLM's own line shape may start inside a wrapped line.
_ANCHOR = re.compile(
    r"\((?:[A-Za-z_][\w.-]* )?(?:rank=\d+ )?pid=\d+(?:, ip=[^,)\s]+)?\) "
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d"
    r"|Traceback \(most recent call last\)"
)
# torch's rank prefix (``[rank0]:``), before any other wrapper is learnt.
_RANK = re.compile(r"(?:\[(?:rank|default)(\d+)\]: ?)+")
_RANK_NAME = re.compile(r"rank\d+")  # a process only torch's rank names
# vLLM's names of processes that run the model whatever they log.
_RUNS_MODEL_BY_NAME = re.compile(r"(?:Vllm)?Worker(?:_|$)|RayWorkerWrapper$")
_RANK_AT_END = re.compile(r"(?:\[(?:rank|default)(\d+)\]: ?)+$")
# The longest wrapper learnt (Loki's labels, a log shipper's fields).
MAX_WRAPPER = 1000
_RAY_REPEATED = re.compile(
    r"\s*\[repeated (\d+)x across cluster\]"
    # the notice Ray adds after the first one
    r"(?:\s*\(Ray deduplicates logs by default\.[^()]*(?:\([^()]*\)[^()]*)*\))?\s*$")
# Wrappers learnt, runs of processes and tracebacks kept: all bounded.
MAX_WRAPPERS = 16
MAX_PROCESSES = 512
MAX_TRACEBACKS = 8
_JSON_TEXT = ("message", "msg", "log", "line", "text", "MESSAGE")
_JSON_TRACE = ("exc_info", "exc_text", "exception", "stack_trace", "traceback", "stack")
# A new start of the server (the API server's, or an offline engine's where
# the log has no API server), and the line after which one is expected.
_API_START = ("vLLM API server version", "non-default args:",
              # vLLM 0.27's, before its arguments: its logo's version line, or without the logo
              "vLLM server version", "\u2588  version ")
_ENGINE_START = ("Initializing a V1 LLM engine", "Initializing an LLM engine")
_RUN_END = re.compile(r"exited with code \d+|Main process exited, code=")
# What a process logs once in a start of the server.
_ONCE_A_START = ("vLLM API server version",) + _ENGINE_START
# ... and once in a process's life (vLLM logs each once per process): its
# rank, the model it starts to load, the end of its loading (the drafter's
# weights are loaded within it). Twice from one process in one start are
# two processes' lines (two replicas with the same pids, mixed).
_ONCE_A_LIFE = re.compile(r"\brank \d+ in world size \d+ is assigned\b|\bStarting to load model \S+"
                          r"|\bModel loading took\b")
_WORLD = re.compile(r"\brank \d+ in world size (\d+)\b")
# The vLLM version a start runs: its API server's, its engine's.
_VERSION = re.compile(r"(?:vLLM (?:API )?server version |Initializing a V1 LLM engine \(v|\u2588  version )"
                      r"(?P<v>[\w.+-]+)")
# The engine's configuration (``tensor_parallel_size=2``) or the API
# server's arguments (``'tensor_parallel_size': 2``): each rank of these is
# a process that runs the model.
_PARALLEL = re.compile(r"\b(tensor|pipeline)_parallel_size['\"]?\s*[=:]\s*(\d+)")
# Lines that say the server is being stopped: what it raises after is a
# consequence, not a crash. Only a logger's line whose message begins so
# (after a tag and a name: "[shutdown] API server: shutting down ...",
# "DPSupervisor received SIGTERM"), or uvicorn's ("INFO:     Shutting
# down"): a prompt or an output logged with these words in it is no stop.
_STOPPING = re.compile(
    r"(?:\[shutdown\] )?(?:[A-Za-z_][\w.]*(?: [A-Za-z_][\w.]*){0,3}:? )??"
    # (vLLM's "Shutting down profiler" stops a profile, not the server)
    r"(?:[Ss]hutting down\b(?! profiler)"
    r"|(?:trigger )?[Rr]eceived (?:SIGTERM|SIGINT|SIGQUIT|KeyboardInterrupt|signal)\b)"
)
_UVICORN = re.compile(r"(?:INFO|WARNING|ERROR):\s+")
# click's on a Ctrl-C. (Not systemd's "Stopping x.service": in a whole
# journal it is any unit's.)
_STOPPING_LINE = re.compile(r"^Aborted!$")
_STOPS = {"KeyboardInterrupt", "SystemExit"}
# An asyncio task cancelled: at a Ctrl-C, and at every client that
# disconnects (uvicorn's "Exception in ASGI application"). Neither a stop nor
# a crash: what follows it is judged on its own.
_CANCELLED = "CancelledError"
# Lines that say a process died: vLLM shuts down because of it, which is a
# crash, not a stop (what died and how is kept).
_DEATH = re.compile(
    r"(?:died|exited|exits) unexpectedly|exit code: -?\d+|exitcode=-?\d+|\bSIGKILL\b|\bSIGSEGV\b|\bSIGABRT\b"
    r"|[Oo]ut of memory|\bOOM[ -]?kill|oom-kill|Killed process|\bOOMKilled\b"
    r"|terminated by signal|core dumped|Failed core proc\(s\): \{[^}]*: -\d+"
    # docker (compose)'s container that ended, systemd's service that was
    # killed or failed; not one that ended well, nor a stop (SIGINT, SIGTERM).
    r"|exited with code (?!0\b|130\b|143\b)\d+"
    r"|Main process exited, code=(?:killed|dumped), status=(?!2/|15/)"
    r"|Main process exited, code=exited, status=[1-9]"
    r"|Fatal Python error|terminate called after throwing"
    # a shell's job notice (``script.sh: line 14:   100 Killed   vllm serve``),
    # supervisord's, slurm's, torchrun's
    r"|\bline \d+: +\d+ +(?:Killed|Segmentation fault|Aborted|Bus error|Illegal instruction)\b"
    r"|^\[\d+\][+-]? +(?:Killed|Segmentation fault|Aborted|Bus error|Illegal instruction)\b"
    r"|^Segmentation fault$"
    r"|exited: \S+ \((?:exit status \d+|terminated by \w+); not expected\)|entered FATAL state"
    r"|srun: error: .*: tasks? [\d,-]+: (?:Exited with exit code [1-9]|Killed|Segmentation fault|Aborted)"
    r"|Force Terminated StepId|exitcode: -?[1-9]\d*"
    # Kubernetes': a probe that kills the container, and the container's
    # exit as ``kubectl describe`` and the pod's YAML show it (not 0, nor
    # SIGINT's or SIGTERM's), ``kubectl exec``'s
    r"|failed (?:liveness|startup) probe"
    r"|Exit Code: +(?!0\b|130\b|143\b)\d+|exitCode: (?!0\b|130\b|143\b)\d+"
    r"|terminated with exit code (?!0\b|130\b|143\b)\d+"
    # a pod that keeps failing or was evicted, as ``kubectl get pods``,
    # ``describe`` and the events show it; a node that stopped answering
    r"|\bCrashLoopBackOff\b|Back-off restarting failed container|\bNodeNotReady\b"
    r"|The node was low on resource|Reason: +Evicted\b|\bWarning +Evicted\b|\d+/\d+ +Evicted\b"
    # Ray's: a node lost, a worker that died or that its memory monitor
    # killed, a job whose entrypoint failed; vLLM's supervisor of
    # data-parallel API servers that found one gone
    r"|has been marked dead|died or was killed|killed due to"
    r"|failed with exit code (?!0\b)-?\d+|found [1-9]\d* exited DP Servers"
    # Triton's: the Python backend's stub (the process that runs vLLM's
    # engine in it) gone, and tritonserver's own fault (not SIGINT, SIGTERM)
    r"|\bStub process (?:'[^']*' )?is (?:not healthy|unhealthy)\b|\bSignal \((?!2\)|15\))\d+\) received\b"
)
# How a line ends beyond its text: the carriage return vLLM's formatter puts
# at the end of each line but the last of a record, as it is, as rsyslog
# escapes it (``#015``) and as ``cat -v`` or an editor shows it (``^M``).
_LINE_END = re.compile(r"(?:\r|#015|\^M)+$")
# ``tail``'s and ``head``'s header before each file's lines (``==> a.log <==``),
# and what a rotated file's name ends with (``.1``, ``.2.gz``, ``-20261206``).
_FILE_HEADER = re.compile(r"^==> (?P<name>.+) <==$")
_ROTATED = re.compile(r"(?:\.\d{1,3}|\.gz|-\d{8}(?:\d{2,6})?)+$")
_DEATH_NOT = re.compile(r"exit code: 0\b|exitcode=0\b|CUDA out of memory")
# vLLM's head anywhere in the first characters of a line: what comes before
# it is VLLM_LOGGING_PREFIX (vLLM puts it between the process prefix and the
# level) or another prefix of the same kind.
_HEAD_INSIDE = re.compile(
    r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
    r"\[?[^\]:\s]+:\d+\] ?"
)
# What may change from line to line in the wrapper of one source: its
# timestamps (ISO dates, syslog's month and day before a time, clock times
# with fractions and zones, epoch seconds (milli-, micro-, nanoseconds;
# an export's record id), kernel-style monotonic seconds),
# the stream (stdout or stderr) and a syslog priority (and, in _source_of,
# journald's and syslog's process id after a time). Any other difference in a wrapper's text
# (``[pod/vllm-0/vllm]`` then ``[pod/vllm-1/vllm]``) is another source.
_SAME_SOURCE = re.compile(
    r"(?<![\w-])\d{4}-\d\d-\d\d(?=[T ]|$|[^\w-])"
    r"|(?<![\w-])(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +\d{1,2}(?= \d\d:\d\d:\d\d)"
    r"|(?:(?<=\dT)|(?<![\w:-]))\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
    r"|(?<![\w.-])\d{10,}(?:\.\d+)?(?![\w-])|^\[\s*\d+\.\d+(?: <\s*\d+\.\d+>)?\]"
    r"|(?<![\w-])(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)(?= \d{4}-\d\d-\d\d )"
    r"|\b(?:stdout|stderr)\b|^<\d{1,3}>"
)


# journald's and syslog's ``TIME HOST ident[pid]: ``: the pid changes at a
# restart. Only that one, the token right after the host: a wrapper's
# ``gpu[0]:`` elsewhere (after ``ident:`` with no pid, say) names a source.
_SYSLOG_PID = re.compile(
    r"(?:\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?(?: [A-Z]{3,5}| [+-]\d\d(?::?\d\d)?)?"
    r"|\d{10}(?:\.\d+)?"
    r"|^\[\s*\d+\.\d+(?: <\s*\d+\.\d+>)?\])"
    r"(?: +[^\s\[\]]+)? +[^\s\[\]]+\[(?P<pid>\d+)\](?=: )"
)


def _rank_of(proc: "Process") -> str | None:
    """The name torch's ``[rankN]:`` gave ``proc`` (LogReader._cut_rank), if any."""
    return next((n for n in proc.names if _RANK_NAME.fullmatch(n)), None)


def _source_of(head: str) -> tuple[str, str | None]:
    """A wrapper's text with what changes within one source masked, and
    journald's process id where it was masked."""
    pid = _SYSLOG_PID.search(head)
    if pid is not None:
        head = head[:pid.start("pid")] + "#" + head[pid.end("pid"):]
    return _SAME_SOURCE.sub("#", head), pid and pid.group("pid")


# Sources told apart in one log, at most (beyond two the count is only said),
# and the lines a source needs to count (a start of the server has hundreds).
MAX_SOURCES = 64
MIN_SOURCE_LINES = 10
# ... or these where they hold an API server's start (its first lines come
# together: a replica caught at its start; one line is a wrapper by chance).
MIN_STARTED_LINES = 3
# A step back in time this long is the turn of a year (vLLM's times have none).
YEAR_WRAP = 300 * 86400
# Steps between timestamps smaller than this are interleaving, not order.
ORDER_STEP = 2
_ARCH = re.compile(r"Resolved architecture: (?P<arch>\w+)")
_HEAD = re.compile(  # vLLM's, and the older one without the bracket before the file
    r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"(?P<mo>\d\d)-(?P<d>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:\.\d+)? "
    r"\[?(?P<file>[^\]:\s]+):\d+\] ?"
)
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+?)\s*$')
# The line that names a traceback's exception: ``Type`` or ``Type: message``.
_EXCEPTION = re.compile(
    r"^(?P<type>[A-Za-z_][\w.]*)(?:\((?P<inner>[A-Za-z_][\w.]*)\))?(?::\s?(?P<msg>.*))?$"
)

PATCHED = re.compile(r"dspark-attn-plugin patched \S+ on vLLM (?P<version>\S+?):")
NOT_AFFECTED = re.compile(r"vLLM (?P<version>\S+) is not affected by vllm-project/vllm#50615")
FIXED = re.compile(r"vLLM (?P<version>\S+) already has the fix for vllm-project/vllm#50615")
DISABLED = "dspark-attn-plugin is disabled by DSPARK_ATTN_PLUGIN=off"
LEFT_ALONE = re.compile(
    r"dspark-attn-plugin (?:cannot patch|does not recognise|failed on|could not register"
    r"|cannot put)"
)
RESCUED = re.compile(r"dspark-attn-plugin: (?P<layer>\S+) warmed up without topk_indices_buffer")

# A process that logs from these files of vLLM, or these messages, builds
# and runs the model (the engine core at TP 1, each worker above).
_MODEL_FILES = {
    "gpu_worker.py", "gpu_model_runner.py", "model_runner.py", "default_loader.py",
    "dummy_loader.py", "weight_utils.py", "kernel_warmup.py", "cuda_graph.py",
    "cudagraph_utils.py",
}
# Triton's model repository loading a model (``loading: NAME:VERSION``):
# each model it serves with its own vLLM engine is a server of its own.
_TRITON_LOADING = re.compile(r"\bloading: (?P<model>[^\s:\"']+):\d+\"?$")
_MODEL_MESSAGES = ("Model loading took", "Loading weights took", "Starting to load model")
# Lines that show the profile/warmup run is over (the engine got past it).
_PAST_WARMUP = (
    "Available KV cache memory", "GPU KV cache size", "init engine (profile",
    "Application startup complete", "Graph capturing finished",
)
_KV_TOKENS = re.compile(r"GPU KV cache size: ([\d,]+) tokens")
_CONCURRENCY = re.compile(r"Maximum concurrency for [\d,]+ tokens per request: ([\d.,]+)x")
_PLUGIN_LIST = re.compile(r"^- (?P<name>\S+) -> \S+")
_LOADING_PLUGIN = re.compile(r"^Loading plugin (?P<name>\S+)")


@dataclass
class Frame:
    file: str
    line: int
    func: str
    statement: str = ""


@dataclass
class Traceback:
    """One finished traceback: its exception and innermost frame."""

    exc_type: str
    message: str
    frames: list[Frame]
    functions: set[str]
    line_no: int  # line of the log where the exception was named

    @property
    def innermost(self) -> Frame | None:
        return self.frames[-1] if self.frames else None

    def is_cancellation(self) -> bool:
        """An asyncio task cancelled (``_CANCELLED``): no crash, no stop."""
        return self.exc_type.split(".")[-1] == _CANCELLED

    def is_interruption(self) -> bool:
        """A Ctrl-C or an exit (``_STOPS``): a stop where the server's own
        process raised it (``LogReader._serves``), never a crash."""
        return self.exc_type.split(".")[-1] in _STOPS

    def is_50615(self) -> bool:
        """The #50615 crash: AssertionError at the topk_indices_buffer
        assertion in forward_mqa of a deepseek_v4 flashmla.py, raised under
        profile_run."""
        return (self.at_the_assertion() and "topk_indices_buffer" in self.innermost.statement
                and "profile_run" in self.functions)

    def at_the_assertion(self) -> bool:
        """An AssertionError raised in forward_mqa of a deepseek_v4
        flashmla.py at the topk_indices_buffer assertion, whatever ran it (a
        traceback cut before ``profile_run`` shows may still be #50615), or
        where the log shows no statement that could raise it (none where
        the image has no source files, another process's line where two
        processes' lines mixed): maybe #50615, never "a different crash"."""
        frame = self.innermost
        return (
            self.exc_type == "AssertionError"
            and frame is not None
            and frame.func == "forward_mqa"
            and re.search(r"deepseek_v4/.*flashmla\.py$", frame.file.replace("\\", "/")) is not None
            # Another assertion shown raising it is another crash.
            and ("topk_indices_buffer" in frame.statement
                 or not frame.statement.startswith(("assert ", "raise ")))
        )


@dataclass
class Process:
    key: str
    pid: int | None
    names: list[str] = field(default_factory=list)
    first_line: int = 0
    plugin: list[tuple[str, str]] = field(default_factory=list)  # (state, detail)
    rescued: list[str] = field(default_factory=list)
    runs_model: bool = False
    past_warmup: bool = False
    # The first tracebacks and the last ones (MAX_TRACEBACKS in all), the
    # first #50615 one whatever its place, and how many there were.
    tracebacks: list[Traceback] = field(default_factory=list)
    crash_50615: Traceback | None = None
    traceback_count: int = 0
    kv_cache_tokens: int | None = None  # "GPU KV cache size: N tokens"
    max_concurrency: float | None = None  # "Maximum concurrency for ...: Nx"
    # The processes its line saying the plugin is in effect stands for: 1,
    # or N where Ray folded that line of N processes into it.
    in_effect_for: int = 0
    # It wrote #50615's assertion as a line of a traceback, whatever frame
    # it was read under (a terminal that wrapped the frame's line).
    wrote_the_assertion: bool = False
    server: bool = False  # it logged a start of the server (an API server's, an engine's)
    # a traceback being read: frames so far, function names, last frame
    _frames: deque = field(default_factory=lambda: deque(maxlen=MAX_FRAMES))
    _functions: set = field(default_factory=set)
    _in_traceback: bool = False
    _want_statement: bool = False
    # where the traceback being read had its header: (this run's count,
    # line of the input), or None (no header: cut off, or Ray's remote one)
    _header: tuple | None = None

    @property
    def name(self) -> str:
        """The most specific name the process logged under."""
        if not self.names:
            return "(no prefix)"
        return max(self.names, key=lambda n: (n.count("_"), len(n)))

    @property
    def label(self) -> str:
        return f"{self.name} pid={self.pid}" if self.pid is not None else self.name

    def plugin_states(self) -> set[str]:
        return {state for state, _ in self.plugin}

    def add_traceback(self, tb: Traceback) -> None:
        self.traceback_count += 1
        if self.crash_50615 is None and tb.is_50615():
            self.crash_50615 = tb
        self.tracebacks.append(tb)
        if len(self.tracebacks) > MAX_TRACEBACKS:
            del self.tracebacks[2]  # keep the first two and the latest


@dataclass
class Log:
    """What a log says, process by process, in order of first appearance."""

    processes: dict[str, Process] = field(default_factory=dict)
    lines: int = 0
    vllm_lines: int = 0  # lines that look like vLLM's (prefix or log head)
    listed_plugins: set[str] = field(default_factory=set)
    loading_plugins: set[str] = field(default_factory=set)
    vllm_plugins_env: str | None = None
    stopping_at: int | None = None  # first line that stops the server (this run's count)
    stopping_line: int | None = None  # the same, as a line of the whole input
    # The first line that says a process died (vLLM shuts down because of
    # it): (this run's count, line of the input, the line, the process).
    death: tuple | None = None
    architectures: set[str] = field(default_factory=set)  # the first 8 resolved
    more_architectures: bool = False  # and others, not kept
    started: bool = False  # saw a start of the server
    api_start: bool = False  # saw the API server's own start lines
    no_drafter: bool = False  # the engine's config says speculative_config=None
    # The most processes Ray folded into one model line, and into one of the
    # plugin's lines (``[repeated Nx across cluster]``): unnamed processes.
    folded_model: int = 0
    folded_plugin: int = 0
    first_line: int = 1  # the line of the whole input where this run starts
    # Filled in by the reader's user: the whole input's lines and starts,
    # and what earlier starts came to (bounded).
    total_lines: int = 0
    runs: int = 1
    earlier: list = field(default_factory=list)
    previous: tuple | None = None  # (start, its first line, its Diagnosis, DeepSeek-V4 or not, its Log)
    notes: list = field(default_factory=list)  # what reading the input took
    newest_first: int = 0  # > 0: the input reads newest first (the evidence's count)
    interleaved_sources: int = 0  # > 0: that many sources' lines take turns
    starts_back_in_time: int = 0  # > 0: the line of a start timed before the lines above it
    # vLLM's "rank R in world size W": the most ranks the model runs on.
    world_size: int = 0
    # The engine's tensor_parallel_size x pipeline_parallel_size: as many
    # processes run the model (of one data parallel rank).
    parallel_ranks: int = 0
    # The vLLM versions the start names (its start lines, the plugin's): at most 8.
    versions: set[str] = field(default_factory=set)
    # The first traceback whose lines could not be read as Python prints
    # them (a header, then no frame and exception): (this run's count, line
    # of the input, the process).
    unread: tuple | None = None
    # > 0: the line where a process logged its start a second time in one
    # start of the server: two servers' lines mixed with nothing naming each.
    start_repeated: int = 0
    served_models: int = 0  # models one Triton server loads (> 1: several engines)

    def ordered(self) -> list[Process]:
        return sorted(self.processes.values(), key=lambda p: p.first_line)

    def unread_traceback(self) -> tuple | None:
        """The first traceback that began with its header and was not read
        to its exception: ``(this run's count, line of the input, the
        process)``, or None. Its lines were not as Python prints them (a log
        pipeline's quotes and escapes, lines cut or wrapped at a width), or
        the log ends inside it: what it raised is not known."""
        found = [self.unread] if self.unread is not None else []
        found += [(*p._header, p.label) for p in self.processes.values()
                  if p._in_traceback and p._header is not None]
        return min(found, key=lambda u: u[0]) if found else None


class LogReader:
    """Feed lines with ``feed``; ``log`` holds what was read of the current
    run, ``runs`` how many starts there were."""

    def __init__(self, on_run_end=None) -> None:
        self.log = Log()
        self.runs = 1
        self.total_lines = 0
        self._on_run_end = on_run_end
        self._source: int | str = 0  # the namespace of process ids (a file's)
        self._paths = 0  # files given (next_source)
        # Wrappers learnt, newest first (torch's launcher's prefix of each
        # rank's lines, _RANK, is known without learning and kept apart).
        self._wrappers: deque = deque(maxlen=MAX_WRAPPERS)
        self._restart = False
        self._api_seen = False
        self._rank: str | None = None  # torch's rank on the line being read (_cut_rank)
        self._repeats = 0  # Ray's [repeated Nx across cluster] on that line
        # Both bounded, so that no log makes them grow: plugin lines with no
        # prefix yet, and prefixes whose text is on a later line.
        self._pending: deque = deque(maxlen=MAX_PENDING)
        self._dangling: deque = deque(maxlen=MAX_PENDING)
        # Order: timestamps that go back or forward (by ORDER_STEP s or
        # more), and traceback headers met after their frames.
        self._stamp: int | None = None
        self.steps_back = 0
        self.steps_forward = 0
        self.headers_after_frames = 0
        self.tracebacks_in_order = 0
        # The time of the line read, and the latest before it: a start timed
        # ORDER_STEP or more before the lines above it is another server's.
        self._line_stamp: int | None = None
        self._latest: int | None = None
        self._latest_before: int | None = None
        self.starts_back_in_time = 0
        self.source_lines: dict[str, int] = {}  # lines of each source (_wrapped_by)
        self._pids: dict[str, list] = {}  # journald's pid of each source now, and those left
        self.pids_took_turns = False  # a pid left came back: two processes, not a restart
        self.sources_overflow = False
        self._record_source: str | None = None
        self._started_here: set = set()  # (process, start line) of this run
        self.start_repeated = 0
        self.served_models: set[str] = set()  # Triton's models (_TRITON_LOADING), bounded
        self._api_pid: str | None = None  # the pid of the API server's start lines
        self._line_source: str | None = None  # the source of the line read (_wrapped_by)
        self._started_sources: set = set()  # sources with an API server's start line
        # The file ``tail``'s header named (its name as rotated files share
        # it), and the process namespace each has.
        self._file: str | None = None
        self._files: dict[str, str] = {}

    @property
    def newest_first(self) -> bool:
        """The input reads newest first (Loki's and most consoles' default)."""
        if self.steps_back >= 2 and self.steps_back > self.steps_forward:
            return True
        return self.headers_after_frames >= 2 and self.tracebacks_in_order == 0

    def _order(self, m) -> None:
        """One more time of day, from a vLLM head (``m``: its match)."""
        stamp = (int(m["mo"]) * 31 + int(m["d"])) * 86400 + (
            int(m["h"]) * 3600 + int(m["mi"]) * 60 + int(m["s"]))
        self._line_stamp = stamp
        self._latest_before = self._latest
        self._latest = stamp if self._latest is None else max(self._latest, stamp)
        # Against the last time that counted: slow steps add up.
        if self._stamp is None:
            self._stamp = stamp
        elif stamp <= self._stamp - ORDER_STEP:
            self.steps_back += 1
            self._stamp = stamp
        elif stamp >= self._stamp + ORDER_STEP:
            self.steps_forward += 1
            self._stamp = stamp

    def next_source(self) -> None:
        """The lines that follow come from another file (pids may repeat)."""
        self._paths += 1
        self._source = self._paths
        self._file = None

    def _runs(self, line: str, vllm_line: bool, pid: str | None = None) -> None:
        """Start a new run where the log shows a new start of the server: one
        after the current run got somewhere, or the start of another API
        server process (the one before died before it loaded the model)."""
        api = any(m in line for m in _API_START)
        engine = not self._api_seen and any(m in line for m in _ENGINE_START)
        if api and self._line_source is not None and len(self._started_sources) < MAX_SOURCES:
            self._started_sources.add(self._line_source)
        other_api = api and pid is not None and self._api_pid not in (None, pid)
        # (a run that got somewhere is one, whether or not the log holds its
        # first lines: ``kubectl logs --previous --tail``, ``--since``)
        if (api or engine) and (self.log.started or self._progressed()) and (
                self._progressed() or other_api):
            self._new_run()
        elif self._restart and vllm_line:
            self._new_run()
        if api and pid is not None:
            self._api_pid = pid
        if api or engine:
            self.log.started = True
            self.log.api_start = self.log.api_start or api
            self._api_seen = self._api_seen or api
        if _RUN_END.search(line):
            self._restart = True

    def _progressed(self) -> bool:
        """The current run got somewhere (a start repeated at once, as data
        parallel engines do, is the same start)."""
        return any(p.runs_model or p.traceback_count or p.past_warmup
                   for p in self.log.processes.values())

    def _new_run(self) -> None:
        self._restart = False
        self._started_here = set()
        if self._on_run_end is not None:
            self._on_run_end(self.log)
        # Plugin lines with no prefix yet were written by the new start's
        # processes before vLLM prefixed their output: they go with it.
        waiting = list(self._pending)
        for proc, state, detail in waiting:
            try:
                proc.plugin.remove((state, detail))
            except ValueError:
                pass
        self.runs += 1
        back = (self._latest_before - self._line_stamp
                if self._line_stamp is not None and self._latest_before is not None else 0)
        if ORDER_STEP <= back < YEAR_WRAP and not self.starts_back_in_time:
            self.starts_back_in_time = self.total_lines
        self.log = Log(first_line=self.total_lines)
        self.log.lines = 1  # the line that starts it
        self._pending.clear()
        self._dangling.clear()
        for proc, state, detail in waiting:
            # Each to the new start's process of the same name: the one with
            # no prefix, or the same rank (torch's names it, not vLLM's).
            holder = self._process(_rank_of(proc), None)
            holder.plugin.append((state, detail))
            self._pending.append((holder, state, detail))

    def _process(self, name: str | None, pid: str | None, ip: str | None = None) -> Process:
        if name is None:
            key = f"{self._source}:-"
        elif pid is not None:
            key = f"{self._source}:{ip or ''}:{pid}"
        else:
            key = f"{self._source}:{name}"
        proc = self.log.processes.get(key)
        if proc is None:
            if len(self.log.processes) >= MAX_PROCESSES:
                key = f"{self._source}:(more)"
                proc = self.log.processes.get(key)
            if proc is None:
                proc = Process(key, int(pid) if pid else None, first_line=self.log.lines)
                self.log.processes[key] = proc
                if name is not None and self._rank is None:
                    self._claim_pending(proc)  # (torch's rank is no prefix of vLLM's)
        if name is not None and name not in proc.names and len(proc.names) < 8:
            proc.names.append(name)
            if _RUNS_MODEL_BY_NAME.match(name):
                # vLLM logs a model's loading once per host (info_once,
                # local scope): a worker that says nothing of it still runs it.
                proc.runs_model = True
        return proc

    def _serves(self, proc: Process) -> bool:
        """``proc`` is the server's: a process vLLM (or torch) named, or the
        one with no prefix where it started the server or runs the model,
        or where no process has a prefix. Not a client or a script whose
        output ran into the log (``vllm bench serve`` stopped by Ctrl-C)."""
        return bool(proc.names) or proc.server or proc.runs_model or not any(
            p.names for p in self.log.processes.values())

    def _claim_pending(self, proc: Process) -> None:
        """A new prefixed process takes the oldest plugin line that had no
        prefix (its own, written before vLLM prefixed its output)."""
        ours = next((e for e in self._pending if _rank_of(e[0]) is None), None)
        if ours is not None and not proc.plugin:
            # (a line a rank wrote is that rank's: torch's prefix names it)
            self._pending.remove(ours)
            source_proc, state, detail = ours
            try:
                source_proc.plugin.remove((state, detail))
            except ValueError:
                pass
            proc.plugin.append((state, detail))

    def _wrapped_by(self, head: str) -> None:
        """Count the lines of each source: pods or containers
        (``kubectl logs -l ... --prefix``, ``stern``, ``docker compose logs``)
        told apart by their wrapper's text without what changes within one
        (``_source_of``), whether one wrapper shape fits them all (``vllm-0``,
        ``vllm-1``) or not; ``""`` for vLLM's lines with nothing before them.
        What a terminal overwrote (before a carriage return: a progress bar)
        is no wrapper."""
        source, pid = _source_of(head.rsplit("\r", 1)[-1]) if head else ("", None)
        if pid is not None and (source in self._pids or len(self._pids) < MAX_SOURCES):
            # A restart's new pid stands for the old one from then on; a pid
            # seen before and left coming back is another process taking
            # turns with it: a source of its own. (Bounded, as the sources.)
            now, before = self._pids.setdefault(source, [pid, set()])
            if pid in before:
                # However few its lines: what it wrote before is in the other's.
                self.pids_took_turns = True
                source = f"{source}\0{pid}"
            elif pid != now:
                if len(before) < MAX_SOURCES:
                    before.add(now)
                self._pids[source][0] = pid
        if self._record_source is not None:
            source = f"{self._record_source}\0{source}"
        if self._file is not None:
            source = f"{self._file}\0{source}"
        self._line_source = source
        if source in self.source_lines:
            self.source_lines[source] += 1
        elif len(self.source_lines) < MAX_SOURCES:
            self.source_lines[source] = 1
        else:
            self.sources_overflow = True

    @property
    def interleaved_sources(self) -> int:
        """How many sources' lines the input holds (0: one): those with at
        least ``MIN_SOURCE_LINES`` lines (fewer cannot hold a start of the
        server: a wrapper met by chance), or ``MAX_SOURCES`` where more
        wrappers were met than are counted."""
        sources = sum(1 for s, n in self.source_lines.items()
                      if n >= MIN_SOURCE_LINES or (n >= MIN_STARTED_LINES and s in self._started_sources))
        if sources >= 2:
            return sources
        if self.sources_overflow:
            return MAX_SOURCES
        return 2 if self.pids_took_turns else 0

    def _unwrap(self, line: str) -> str:
        """``line`` without the wrapper a log pipeline put before vLLM's."""
        for wrapper in self._wrappers:
            m = wrapper.match(line)
            if m:
                self._head = m.group(0)
                line = line[m.end():]
                line = self._cut_rank(line)  # torch's, after the pipeline's
                return _unquoted(line) if m.group(0).startswith('"') and line.endswith('"') else line
        if _RANK.match(line):
            # torch's own, in any one process's output: no source, and never
            # forgotten however many wrappers were learnt before it.
            return self._cut_rank(line)
        if _PREFIX.match(line) or _HEAD.match(line):
            # vLLM's line with nothing before it: a source too, beside wrapped ones
            # (one pod's log with ``--prefix`` and another's without).
            self._head = ""
            return line
        anchor = _ANCHOR.search(line)
        if anchor is None or anchor.start() == 0 or anchor.start() > MAX_WRAPPER:
            return line
        head = line[: anchor.start()]
        rank = _RANK_AT_END.search(head)
        if rank is not None:
            # torch's prefix after a pipeline's (``TIME [rank0]: ``): only
            # the pipeline's is a wrapper; torch's is cut after it, as above.
            head = head[:rank.start()]
        pattern = "".join(
            r"\d+" if part.isdigit() else re.escape(part) for part in re.split(r"(\d+)", head) if part
        )
        self._wrappers.appendleft(re.compile(pattern))
        self._head = head
        line = line[anchor.start():]
        if rank is not None:
            self._rank = rank.group(1)
        return _unquoted(line) if head.startswith('"') and line.endswith('"') else line

    def _cut_rank(self, line: str) -> str:
        """``line`` without torch's ``[rankN]:`` at its start; the rank kept
        for the line (it names the process where vLLM's prefix does not)."""
        m = _RANK.match(line)
        if m is None:
            return line
        self._rank = m.group(1)
        return line[m.end():]

    def feed(self, raw: str) -> None:
        # The source an export's record names (log_exports.record_source).
        self._record_source = getattr(raw, "source", None)
        text = _LINE_END.sub("", _ANSI.sub("", raw.rstrip("\r\n")))
        stripped = text.lstrip()
        if text.startswith("==> ") and (header := _FILE_HEADER.match(text)) is not None:
            # The lines that follow are another file's (``tail a.log b.log``):
            # another source, unless a rotated file of the same log (its
            # path but the rotation's suffix). Bounded.
            name = _ROTATED.sub("", header.group("name"))
            if name in self._files or len(self._files) < MAX_SOURCES:
                self._file = name
                self._source = self._files.setdefault(name, f"file{len(self._files)}")
            self.total_lines += 1
            self.log.lines += 1
            return
        if stripped.startswith("{") and stripped.rstrip().endswith("}"):
            record = _json_record(stripped)
            if record is not None and (lines := record_lines(record)) is not None:
                self._record_source = record_source(record)
                self.total_lines += 1
                for line in lines:
                    self._feed_line(line)
                return
        self.total_lines += 1
        self._feed_line(text)

    def _feed_line(self, line: str) -> None:
        self.log.lines += 1
        self._line_stamp = None  # until a head gives this line's time (_order)
        self._rank = None  # torch's rank on this line (_cut_rank)
        self._line_source = None  # until a wrapper names it (_wrapped_by)
        self._head = None  # the wrapper before vLLM's text (_unwrap), if any
        markdown = line.startswith("|") and line.rstrip().endswith("|")
        line = self._unwrap(line)
        line, tail = _cut_tail(line, self._head, markdown)
        if self._head is not None or tail:
            self._wrapped_by((self._head or "") + tail)
        self._feed_vllm(line)

    def _feed_vllm(self, line: str) -> None:
        """One line without its pipeline's wrapper: vLLM's prefixes, head
        and text."""
        self._repeats = 0  # more processes Ray folded into this line
        if "[repeated " in line and (folded := _RAY_REPEATED.search(line)) is not None:
            self._repeats = int(folded.group(1))
            line = line[:folded.start()]
        # Processes writing to one stream at once can leave a prefix without
        # its text: ``(Worker_TP1 pid=2) (Worker_TP0 pid=1) text`` is TP0's
        # line, and TP1's text comes later on a line of its own, without a
        # prefix. The last prefix owns the text; an earlier one is owed the
        # next line that has none.
        found = None
        prefixes = []
        while (m := _PREFIX.match(line)) is not None:
            found = m
            name = m.group("name") or ("ray" if m.group("rpid") else None)
            prefixes.append((name, m.group("pid") or m.group("rpid"), m.group("ip")))
            line = line[m.end():]
        name = pid = ip = None
        if prefixes:
            name, pid, ip = prefixes[-1]
            self._dangling.extend(prefixes[:-1])
            if line[:1] == "{" and line.rstrip().endswith("}"):
                # vLLM's process prefix before a JSON logging config's record
                # (written by the process, prefixed by vLLM): its message and
                # traceback are that process's lines.
                record = _json_record(line.strip())
                inner = record_lines(record) if record is not None else None
                if inner is not None:
                    for i, text in enumerate(inner):
                        if i:
                            self.log.lines += 1
                        self._feed_vllm(found.group(0).rstrip() + " " + text)
                    return
            line = self._cut_rank(line)  # torch's after vLLM's: the prefix names the process
        elif self._rank is not None:
            # torch's rank is all that tells this process from the others
            # (``torchrun``, vLLM's external launcher).
            name = f"rank{self._rank}"
        elif self._dangling:
            name, pid, ip = self._dangling.popleft()
            found = True
        head = _HEAD.match(line)
        if head is None and prefixes and (inside := _HEAD_INSIDE.search(line, 0, 300)) is not None:
            line = line[inside.start():]  # after VLLM_LOGGING_PREFIX
            head = _HEAD.match(line)
        file = None
        if head:
            self._order(head)
            file = head.group("file")
            line = line[head.end():]
        self._runs(line, found is not None or head is not None, pid)
        if found is not None or head:
            self.log.vllm_lines += 1
        proc = self._process(name, pid, ip)
        if any(m in line for m in _API_START + _ENGINE_START):
            proc.server = True
        once = next((m for m in _ONCE_A_START if m in line), None)
        if once is None and not self._repeats and ("world size" in line or "load" in line) and (
                # (a line Ray folded stands for other processes too)
                life := _ONCE_A_LIFE.search(line)) is not None:
            once = life.group(0)
        if once is not None:
            mark = (proc.key, once)
            if mark in self._started_here and not self.start_repeated:
                self.start_repeated = self.total_lines
            elif len(self._started_here) < MAX_PROCESSES:
                self._started_here.add(mark)
        self._read(proc, line, file, found is None)

    def _read(self, proc: Process, text: str, file: str | None, unprefixed: bool) -> None:
        stripped = text.strip()
        if self._traceback(proc, text, stripped):
            return
        if self.log.death is None and _DEATH.search(stripped) and not _DEATH_NOT.search(stripped):
            self.log.death = (self.log.lines, self.total_lines, stripped[:300], proc.label)
        elif self.log.stopping_at is None and _stops(stripped, file):
            self.log.stopping_at = self.log.lines
            self.log.stopping_line = self.total_lines
        if "loading: " in stripped and (served := _TRITON_LOADING.search(stripped)) is not None:
            if len(self.served_models) < MAX_SOURCES:
                self.served_models.add(served.group("model"))
        if "architecture" in stripped and (arch := _ARCH.search(stripped)):
            if len(self.log.architectures) < 8 or arch.group("arch") in self.log.architectures:
                self.log.architectures.add(arch.group("arch"))
            else:
                self.log.more_architectures = True
        if "speculative_config=None" in stripped:
            self.log.no_drafter = True
        if "world size" in stripped and (world := _WORLD.search(stripped)):
            self.log.world_size = max(self.log.world_size, int(world.group(1)))
        if ("version" in stripped or "engine (v" in stripped) and (version := _VERSION.search(stripped)):
            self._version(version.group("v"))
        if "_parallel_size" in stripped:
            sizes = dict(m.groups() for m in _PARALLEL.finditer(stripped))
            if sizes:
                ranks = int(sizes.get("tensor", 1)) * int(sizes.get("pipeline", 1))
                self.log.parallel_ranks = max(self.log.parallel_ranks, ranks)
        if (file and file.rsplit("/", 1)[-1] in _MODEL_FILES) or any(
            m in stripped for m in _MODEL_MESSAGES
        ):
            proc.runs_model = True
            # The same model line from processes Ray does not name.
            self.log.folded_model = max(self.log.folded_model, self._repeats)
            if unprefixed and self._pending:
                # A process with no prefix that runs the model (an engine in
                # the script's own process): its plugin lines are its own,
                # not a later prefixed process's, nor the next start's.
                self._pending = deque((e for e in self._pending if e[0] is not proc),
                                      maxlen=MAX_PENDING)
        if any(m in stripped for m in _PAST_WARMUP):
            proc.past_warmup = True
            if (kv := _KV_TOKENS.search(stripped)):
                proc.kv_cache_tokens = int(kv.group(1).replace(",", ""))
        if (conc := _CONCURRENCY.search(stripped)):
            proc.max_concurrency = float(conc.group(1).replace(",", ""))
        self._plugin(proc, stripped, unprefixed)
        listed = _PLUGIN_LIST.match(stripped)
        if listed:
            self.log.listed_plugins.add(listed.group("name"))
        loading = _LOADING_PLUGIN.match(stripped)
        if loading:
            self.log.loading_plugins.add(loading.group("name"))
        env = re.search(r"VLLM_PLUGINS['\"]?\s*[=:]\s*['\"]?(?P<v>[^'\",}\s]*(?:,[^'\",}\s]+)*)", stripped)
        if env:
            self.log.vllm_plugins_env = env.group("v")

    def _plugin(self, proc: Process, text: str, unprefixed: bool) -> None:
        state = detail = None
        if self._repeats and ("dspark-attn-plugin" in text or "#50615" in text):
            # The same plugin line from processes Ray does not name.
            self.log.folded_plugin = max(self.log.folded_plugin, self._repeats)
        if (m := PATCHED.search(text)):
            state, detail = "patched", m.group("version")
        elif (m := NOT_AFFECTED.search(text)):
            state, detail = "not-affected", m.group("version")
        elif (m := FIXED.search(text)):
            state, detail = "fixed", m.group("version")
        elif DISABLED in text:
            state, detail = "disabled", ""
        elif LEFT_ALONE.search(text):
            state, detail = "left-alone", text[text.index("dspark-attn-plugin"):][:300]
        elif (m := RESCUED.search(text)):
            proc.rescued.append(m.group("layer"))
            proc.runs_model = True
            proc.past_warmup = True
            return
        if state is None:
            return
        if state in ("patched", "not-affected", "fixed"):
            proc.in_effect_for = max(proc.in_effect_for, self._repeats or 1)
            self._version(detail)
        proc.plugin.append((state, detail))
        if unprefixed:
            self._pending.append((proc, state, detail))

    def _traceback(self, proc: Process, text: str, stripped: str) -> bool:
        """Track tracebacks; True when the line belonged to one."""
        if stripped == _THE_ASSERTION:
            proc.wrote_the_assertion = True
        if stripped.startswith("Traceback (most recent call last)"):
            if proc._in_traceback and proc._frames:
                self.headers_after_frames += 1  # read bottom up: newest first?
            self._not_read(proc)
            proc._header = (self.log.lines, self.total_lines)
            proc._in_traceback = True
            proc._frames.clear()
            proc._functions = set()
            proc._want_statement = False
            return True
        frame = _FRAME.match(text)
        if not proc._in_traceback:
            if frame is None:
                return False
            # A traceback whose header was cut off (or Ray's remote one,
            # after its RayTaskError line): its frames still count.
            proc._in_traceback = True
            proc._header = None
            proc._frames.clear()
            proc._functions = set()
        if frame:
            proc._frames.append(Frame(frame["file"], int(frame["line"]), frame["func"]))
            proc._functions.add(frame["func"])
            proc._want_statement = True
            if frame["func"] in ("load_model", "profile_run", "_dummy_run", "capture_model"):
                proc.runs_model = True
            return True
        if proc._want_statement and proc._frames and stripped and (
                text.startswith("    ") or not _raised(stripped)):
            # The line after a frame is its statement, also where a copy
            # lost the indentation (a web page, a log shipper that trims).
            proc._frames[-1].statement = stripped
            proc._want_statement = False
            return True
        proc._want_statement = False
        if not stripped or text.startswith((" ", "\t")) or not stripped.strip("^~ "):
            return True  # markers (^^^), code lines, blank lines
        exc = _EXCEPTION.match(stripped)
        if not (exc and proc._frames):
            self._not_read(proc)
        proc._in_traceback = False
        proc._header = None
        if exc and proc._frames:
            exc_type = exc["inner"] or exc["type"]  # RayTaskError(AssertionError)
            if exc_type.split(".")[-1] in _STOPS and self.log.stopping_at is None and self._serves(proc):
                self.log.stopping_at = self.log.lines
                self.log.stopping_line = self.total_lines
            self.tracebacks_in_order += 1
            proc.add_traceback(
                Traceback(exc_type, (exc["msg"] or "")[:300], list(proc._frames),
                          set(proc._functions), self.log.lines)
            )
            return True
        return False  # the traceback was cut off: this is an ordinary line

    def _version(self, version: str) -> None:
        if len(self.log.versions) < 8:
            self.log.versions.add(version)

    def _not_read(self, proc: Process) -> None:
        """The traceback ``proc`` was reading, if it had its header, ends
        here unread."""
        if proc._in_traceback and proc._header is not None and self.log.unread is None:
            self.log.unread = (*proc._header, proc.label)


def _stops(text: str, file: str | None) -> bool:
    """``text`` (a line after vLLM's prefix and head; ``file`` from the head,
    None where it had none) says the server is being stopped."""
    if _STOPPING_LINE.search(text):
        return True
    if file is None:
        uvicorn = _UVICORN.match(text)
        if uvicorn is None:
            return False
        text = text[uvicorn.end():]
    return _STOPPING.match(text) is not None


# #50615's statement (in forward_mqa's warmup; _forward_prefill has it too).
_THE_ASSERTION = "assert self.topk_indices_buffer is not None"
# How an exception's name ends (a statement such as ``f(x)`` reads as one).
_EXCEPTION_NAME = re.compile(r"(?:Error|Exception|Exit|Interrupt|Warning|Iteration|Fault|Failure)$")


_MARKDOWN_CELL_END = re.compile(r"(?<!\\)\|")


def _cut_tail(line: str, head: str | None, markdown: bool) -> tuple[str, str]:
    """``line`` (its wrapper cut) split where the message's column ends, and
    the columns after it: an export that writes the message, then more
    (``aws logs ... --output text``'s time after it, the stream's name,
    ``gcloud --format='value(...)'``, a Markdown table's row). The message
    is a column where its wrapper ended with a tab (or a Markdown cell), or
    where vLLM's own line ends in tab-separated words (vLLM writes no tab: a
    prompt's is escaped); other programs' lines are left whole."""
    if markdown and head is not None and head.lstrip().startswith("|"):
        end = _MARKDOWN_CELL_END.search(line)
        if end is not None:
            return line[:end.start()].rstrip().replace("\\|", "|"), line[end.start():]
    if "\t" in line and ((head or "").endswith("\t") or _PREFIX.match(line) or _HEAD.match(line)):
        # Columns after the message: each after a tab, none with a space in
        # it (a time, a stream's or a replica's name), so they begin at the
        # first tab after the last space; a Ray line's ``TIME\tLEVEL text``
        # behind vLLM's prefix is text.
        start = line.find("\t", line.rfind(" ") + 1)
        if start >= 0:
            return line[:start], line[start:]
    return line, ""


def _raised(text: str) -> bool:
    """``text`` names a traceback's exception: ``Type: message``, or a name
    that ends as exceptions' do (``AssertionError``, ``KeyboardInterrupt``,
    ``RayTaskError(AssertionError)``)."""
    exc = _EXCEPTION.match(text)
    if exc is None:
        return False
    return exc["msg"] is not None or _EXCEPTION_NAME.search(exc["inner"] or exc["type"]) is not None


def _unquoted(text: str) -> str:
    """The end of a line quoted as a JSON string (``jq`` without ``-r``;
    ``text`` runs to its closing quote) with its escapes read: ``File
    \\"x.py\\"`` is Python's ``File "x.py"``. One line only."""
    import json

    body = text[:-1]
    if "\\" in body:
        try:
            decoded = json.loads(f'"{body}"')
        except ValueError:
            return body
        decoded = _LINE_END.sub("", decoded.rstrip("\n"))
        if "\n" not in decoded and "\r" not in decoded:
            return decoded
    return body


def _json_record(text: str) -> dict | None:
    """``text`` as a JSON object, or None."""
    import json

    try:
        record = json.loads(text)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def read_lines(stream, name: str) -> Iterable[str]:
    """Decoded lines of a binary ``stream`` (``log_input``: gzip, UTF-16,
    NUL padding), read through any export (``log_exports``)."""
    return vllm_lines(TextLines(stream, name), name)
