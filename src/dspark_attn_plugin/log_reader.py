"""Read a vLLM server log, as vLLM writes it, into what each process did.

Streamed line by line: memory stays bounded whatever the log's size. Handles
vLLM's process prefixes (``(APIServer pid=N)``, ``(EngineCore_DP0 pid=N)``,
``(Worker_TP1 pid=N)``, ..., none at all for an in-process ``vllm.LLM``), the
logger's ``LEVEL MM-DD HH:MM:SS [file.py:N]`` head (also in front of
traceback lines), ``\\r\\n`` line ends, ANSI colours, and tracebacks of
several processes interleaved. A process is its pid: a worker that logs as
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

# Longest line kept; the rest of a longer line is dropped.
MAX_LINE = 64 * 1024
# Frames kept of one traceback (the innermost ones), besides their names.
MAX_FRAMES = 64
# Unprefixed plugin lines and dangling prefixes kept waiting for their process.
MAX_PENDING = 64

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_PREFIX = re.compile(r"^\((?P<name>[A-Za-z_][\w.-]*)(?: pid=(?P<pid>\d+))?\) ?")
_HEAD = re.compile(
    r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
    r"\[(?P<file>[^\]:]+):\d+\] ?"
)
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+?)\s*$')
# The line that names a traceback's exception: ``Type`` or ``Type: message``.
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<msg>.*))?$")

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

    def is_50615(self) -> bool:
        """The #50615 crash: AssertionError at the topk_indices_buffer
        assertion in forward_mqa of a deepseek_v4 flashmla.py, raised under
        profile_run."""
        frame = self.innermost
        return (
            self.exc_type == "AssertionError"
            and frame is not None
            and frame.func == "forward_mqa"
            and re.search(r"deepseek_v4/.*flashmla\.py$", frame.file.replace("\\", "/")) is not None
            and "topk_indices_buffer" in frame.statement
            and "profile_run" in self.functions
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
    tracebacks: list[Traceback] = field(default_factory=list)
    kv_cache_tokens: int | None = None  # "GPU KV cache size: N tokens"
    max_concurrency: float | None = None  # "Maximum concurrency for ...: Nx"
    # a traceback being read: frames so far, function names, last frame
    _frames: deque = field(default_factory=lambda: deque(maxlen=MAX_FRAMES))
    _functions: set = field(default_factory=set)
    _in_traceback: bool = False
    _want_statement: bool = False

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


@dataclass
class Log:
    """What a log says, process by process, in order of first appearance."""

    processes: dict[str, Process] = field(default_factory=dict)
    lines: int = 0
    vllm_lines: int = 0  # lines that look like vLLM's (prefix or log head)
    listed_plugins: set[str] = field(default_factory=set)
    loading_plugins: set[str] = field(default_factory=set)
    vllm_plugins_env: str | None = None

    def ordered(self) -> list[Process]:
        return sorted(self.processes.values(), key=lambda p: p.first_line)


class LogReader:
    """Feed lines with ``feed``; ``log`` holds what was read."""

    def __init__(self) -> None:
        self.log = Log()
        self._source = 0
        # Both bounded, so that no log makes them grow: plugin lines with no
        # prefix yet, and prefixes whose text is on a later line.
        self._pending: deque = deque(maxlen=MAX_PENDING)
        self._dangling: deque = deque(maxlen=MAX_PENDING)

    def next_source(self) -> None:
        """The lines that follow come from another file (pids may repeat)."""
        self._source += 1

    def _process(self, name: str | None, pid: str | None) -> Process:
        if name is None:
            key = f"{self._source}:-"
        elif pid is not None:
            key = f"{self._source}:{pid}"
        else:
            key = f"{self._source}:{name}"
        proc = self.log.processes.get(key)
        if proc is None:
            proc = Process(key, int(pid) if pid else None, first_line=self.log.lines)
            self.log.processes[key] = proc
            if name is not None:
                self._claim_pending(proc)
        if name is not None and name not in proc.names:
            proc.names.append(name)
        return proc

    def _claim_pending(self, proc: Process) -> None:
        """A new prefixed process takes the oldest plugin line that had no
        prefix (its own, written before vLLM prefixed its output)."""
        if self._pending and not proc.plugin:
            source_proc, state, detail = self._pending.popleft()
            try:
                source_proc.plugin.remove((state, detail))
            except ValueError:
                pass
            proc.plugin.append((state, detail))

    def feed(self, raw: str) -> None:
        self.log.lines += 1
        line = _ANSI.sub("", raw.rstrip("\r\n")).rstrip("\r")
        # Processes writing to one stream at once can leave a prefix without
        # its text: ``(Worker_TP1 pid=2) (Worker_TP0 pid=1) text`` is TP0's
        # line, and TP1's text comes later on a line of its own, without a
        # prefix. The last prefix owns the text; an earlier one is owed the
        # next line that has none.
        found = None
        prefixes = []
        while (m := _PREFIX.match(line)) is not None:
            found = m
            prefixes.append((m.group("name"), m.group("pid")))
            line = line[m.end():]
        name = pid = None
        if prefixes:
            name, pid = prefixes[-1]
            self._dangling.extend(prefixes[:-1])
        elif self._dangling:
            name, pid = self._dangling.popleft()
            found = True
        head = _HEAD.match(line)
        file = None
        if head:
            file = head.group("file")
            line = line[head.end():]
        if found is not None or head:
            self.log.vllm_lines += 1
        proc = self._process(name, pid)
        self._read(proc, line, file, found is None)

    def _read(self, proc: Process, text: str, file: str | None, unprefixed: bool) -> None:
        stripped = text.strip()
        if self._traceback(proc, text, stripped):
            return
        if file in _MODEL_FILES or any(m in stripped for m in _MODEL_MESSAGES):
            proc.runs_model = True
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
        proc.plugin.append((state, detail))
        if unprefixed:
            self._pending.append((proc, state, detail))

    def _traceback(self, proc: Process, text: str, stripped: str) -> bool:
        """Track tracebacks; True when the line belonged to one."""
        if stripped.startswith("Traceback (most recent call last)"):
            proc._in_traceback = True
            proc._frames.clear()
            proc._functions = set()
            proc._want_statement = False
            return True
        if not proc._in_traceback:
            return False
        frame = _FRAME.match(text)
        if frame:
            proc._frames.append(Frame(frame["file"], int(frame["line"]), frame["func"]))
            proc._functions.add(frame["func"])
            proc._want_statement = True
            if frame["func"] in ("load_model", "profile_run", "_dummy_run", "capture_model"):
                proc.runs_model = True
            return True
        if proc._want_statement and text.startswith("    ") and proc._frames:
            proc._frames[-1].statement = stripped
            proc._want_statement = False
            return True
        proc._want_statement = False
        if not stripped or text.startswith((" ", "\t")):
            return True  # markers (^^^), code lines, blank lines
        exc = _EXCEPTION.match(stripped)
        proc._in_traceback = False
        if exc and proc._frames:
            proc.tracebacks.append(
                Traceback(exc["type"], (exc["msg"] or "")[:300], list(proc._frames),
                          set(proc._functions), self.log.lines)
            )
            return True
        return False  # the traceback was cut off: this is an ordinary line


class LogError(Exception):
    """The input cannot be read as a text log."""


def read_lines(stream, name: str) -> Iterable[str]:
    """Decoded lines of a binary ``stream``; raises LogError for binary data
    or text that is not UTF-8. Lines longer than MAX_LINE are cut."""
    number = 0
    while True:
        chunk = stream.readline(MAX_LINE)
        if not chunk:
            return
        number += 1
        if len(chunk) == MAX_LINE and not chunk.endswith(b"\n"):
            while True:  # drop the rest of an overlong line
                rest = stream.readline(MAX_LINE)
                if not rest or rest.endswith(b"\n"):
                    break
        if b"\x00" in chunk:
            raise LogError(f"{name}: line {number} holds binary data (a NUL byte): not a text log")
        try:
            yield chunk.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LogError(f"{name}: line {number} is not UTF-8 text ({exc.reason})") from None
