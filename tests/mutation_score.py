"""Mutation score: Cosmic Ray over the modules that judge, each mutant run
against the tests that execute its lines.

    make mutation-score                                  # every judging module (resumes)
    make mutation-score MUTATION_MODULES="patch.py status.py"
    make mutation-score MUTATION_ARGS="--jobs 2"         # two workers (one per core)
    python tests/mutation_score.py report                # the tables, from what ran

Why Cosmic Ray (8.7): it writes each mutant into the source file on disk, so
everything that runs the plugin sees it: the CLI the tests start as a
subprocess, vLLM's plugin loader in each forked test, ``python -m`` children.
mutmut 3 puts its mutants behind trampolines in the test process and maps
tests to functions by recording calls in that process; our tests run each
test in a forked process (``pytest --forked``) and the CLI in subprocesses,
where neither its switch nor its records reach. Cosmic Ray's session is a
SQLite file: ``cosmic-ray exec`` runs only what has no result yet, so an
interrupted run resumes where it stopped.

How one module is scored (the sessions live in ``$DSPARK_ATTN_PLUGIN_CACHE/mutation``):

1. *Map*, once per version of ``src/`` and ``tests/``: the offline suite runs
   under coverage, each test measured on its own, in its forked process and
   in the Python processes it starts (a ``sitecustomize`` on ``PYTHONPATH``):
   which tests execute which line. A test that runs the plugin in a process
   coverage does not follow (a ``python -S`` child, a copy of the package)
   is marked *unseen*: the map's copy of the package marks the running test
   when it is imported where no coverage runs.
2. A copy of ``src/`` that Cosmic Ray mutates, one mutant at a time. Its test
   command is ``mutation_score.py test``: it compares the copy with the
   pristine file, takes the tests that executed the changed lines (where no
   test did: those that executed the enclosing function, or the module) and
   every unseen test, and has them run, fastest first, stopping at the first
   failure, by a server that imported torch and vLLM once and forks a pytest
   for each mutant. A mutant is *killed* when one of them fails, when one
   test runs past ``TEST_SECONDS`` (it loops), or when they run past its
   budget (``mutant_budget``: twice what the map measured for them, capped;
   past the cap, no kill). ``--whole-files`` also runs, before a mutant counts as
   a survivor, every test file that executes its module (minutes per
   survivor; without it a survivor may still be one that an unmapped test
   kills: the score errs low, never high). ``--jobs N`` runs N workers at
   once, each with its own copy, server and modules.
3. Mutants inside annotations are equivalent by construction (every module
   has ``from __future__ import annotations``: annotations are never
   evaluated) and are marked so before the run. Every other survivor is
   either killed by a new test or listed in ``tests/mutation_equivalents.toml``
   with the reason.
4. ``report`` writes ``benchmarks/results/mutation-score/<module>.json`` and
   prints the table of the README's Development section.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import difflib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PACKAGE = SRC / "dspark_attn_plugin"
RESULTS = ROOT / "benchmarks" / "results" / "mutation-score"
EQUIVALENTS = ROOT / "tests" / "mutation_equivalents.toml"
LEDGER = RESULTS / "mutants"  # each mutant's outcome, committed (see _ledger)
CACHE = Path(os.environ.get("DSPARK_ATTN_PLUGIN_CACHE", Path.home() / ".cache" / "dspark-attn-plugin"))
WORK = CACHE / "mutation"
# One worker's files (``run --jobs N`` starts N workers, MUTATION_WORKER=0..N-1):
_WORKER = os.environ.get("MUTATION_WORKER", "")
TREE = WORK / f"tree{_WORKER}"          # the copy Cosmic Ray mutates (TREE/dspark_attn_plugin)
PRISTINE = WORK / f"pristine{_WORKER}"  # the same, never mutated
SOCKET = WORK / f"server{_WORKER}.sock"

# The modules that judge (issue: warmup_shape is a package: each file a module here).
JUDGING = [
    "settings.py", "patch.py", "instrumentation.py", "ray_settings.py", "installation.py",
    "warmup_edit.py", "cluster_status.py", "method_code.py", "status.py", "loaded_code.py",
    "warmup_shape/verdict.py", "warmup_shape/state.py", "warmup_shape/values.py",
    "warmup_shape/syntax.py", "warmup_shape/classify.py", "warmup_shape/module.py",
    "warmup_shape/as_loaded.py", "warmup_shape/expressions.py", "warmup_shape/statements.py",
    "warmup_shape/aliases.py",
    "diagnose.py", "log_reader.py", "log_exports.py",
]
TIMEOUT_S = 600   # one mutant's tests, at least; past its budget the mutant counts as killed (timed out)
BUDGET_FACTOR = 2  # the budget: this many times what its tests took when the map measured them
MAX_BUDGET_S = 2340  # the longest budget; a mutant whose budget this caps is not killed by time-out
TEST_SECONDS = 120  # one test under a mutant: past it, that test fails (the mutant loops)
FILES_TIMEOUT_S = 1800  # the whole-file check of a survivor; past it: undecided, not killed
PYTEST_ARGS = ["--forked", "-x", "-q", "-p", "no:cacheprovider", "-m", "not network and not ray",
               # The one test that checks the plugin comes from an installed wheel.
               "--deselect=tests/test_packaging.py::test_plugin_is_imported_from_an_installed_wheel"]
ANNOTATION = "equivalent: inside an annotation (from __future__ import annotations: never evaluated)"


def _digest(*folders: Path) -> str:
    h = hashlib.sha256()
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def _fresh_copy(dest: Path) -> None:
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(PACKAGE, dest / "dspark_attn_plugin",
                    ignore=shutil.ignore_patterns("__pycache__"))


# --- 1. the map: which tests execute which line ------------------------------------

SITECUSTOMIZE = '''\
import os
if os.environ.get("MUTATION_COVERAGE_DIR") and os.environ.get("MUTATION_TEST_ID"):
    try:
        import atexit, coverage
        _cov = coverage.Coverage(
            data_file=os.path.join(os.environ["MUTATION_COVERAGE_DIR"],
                                   "cov-" + os.environ["MUTATION_TEST_ID"]),
            data_suffix=True, config_file=False, include=[os.environ["MUTATION_COVERAGE_INCLUDE"]])
        _cov.start()
        def _save():
            _cov.stop()
            _cov.save()
        atexit.register(_save)
    except Exception:
        pass
'''


MAP = WORK / "map.json"

# Appended to the map's copy of the package (never to the mutated one): a
# process that imports the plugin while no coverage runs in it (a `python -S`
# child, a scrubbed environment, a copy of the package elsewhere) marks the
# test that is running. Such a test is run against every mutant of every
# module: the map cannot say which lines it executed.
UNSEEN = '''

def _mutation_map_unseen():  # added by tests/mutation_score.py, in the map's copy only
    import sys
    cov = sys.modules.get("coverage")
    if cov is not None and cov.Coverage.current() is not None:
        return
    try:
        with open(MARKS + "/current", encoding="utf-8") as fh:
            key = fh.read().strip()
        if key:
            open(MARKS + "/unseen-" + key, "a").close()
    except OSError:
        pass


_mutation_map_unseen()
del _mutation_map_unseen
'''


def _suite_files() -> dict[str, str]:
    """Every file of tests/ (helpers and conftest too), by its hash."""
    return {str(p.relative_to(ROOT)): hashlib.sha256(p.read_bytes()).hexdigest()[:16]
            for p in sorted((ROOT / "tests").rglob("*.py")) if "__pycache__" not in p.parts}


def stale_test_files(mapping: dict) -> tuple[list[str], list[str]]:
    """(test files to measure again, other changed files) since ``mapping``
    was made: a changed or new ``test_*.py`` is measured again on its own;
    any other change under tests/ (a helper, conftest) may move any test."""
    before, now = mapping.get("test_files"), _suite_files()
    if before is None:  # a map made before files were recorded
        return [], sorted(now)
    changed = sorted(f for f in set(now) | set(before) if now.get(f) != before.get(f))
    again = [f for f in changed if Path(f).name.startswith("test_") and f in now
             and f not in NOT_THE_COPY]
    return again, [f for f in changed if f not in again and f not in NOT_THE_COPY]


def build_map(python: str, tests: list[str] | None = None) -> Path:
    """Measure ``tests`` (all offline tests when None: a new map; else added
    to the map there is, their lines put in its numbering). A map whose
    test files changed since it was made is brought up to date first. One
    process at a time: workers started apart share the map and its
    coverage files (a second one waits, then finds the map made)."""
    import fcntl

    WORK.mkdir(parents=True, exist_ok=True)
    with open(WORK / "map.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_map(python, tests)


def _build_map(python: str, tests: list[str] | None = None) -> Path:
    if tests is None and MAP.exists():
        mapping = json.loads(MAP.read_text())
        again, other = stale_test_files(mapping)
        if other:
            print(f"map: made {mapping['made']}, before changes to {', '.join(other[:5])}"
                  f"{' ...' if len(other) > 5 else ''}: made again", flush=True)
            MAP.unlink()
        elif again:
            print(f"map: {', '.join(again)} changed since {mapping['made']}: measured again",
                  flush=True)
            return _build_map(python, again)
        else:
            print(f"map: {MAP} (made {mapping['made']}; "
                  "`mutation_score.py map --new` makes it again)", flush=True)
            return MAP
    measured_on = WORK / "measured"
    _fresh_copy(measured_on)
    data = WORK / "coverage"
    shutil.rmtree(data, ignore_errors=True)
    (data / "ids").mkdir(parents=True)
    site = WORK / "site"
    site.mkdir(parents=True, exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    env = dict(os.environ, MUTATION_COVERAGE_DIR=str(data),
               MUTATION_COVERAGE_INCLUDE=str(measured_on / "dspark_attn_plugin" / "*"),
               PYTHONPATH=os.pathsep.join([str(site), str(measured_on)]))
    with open(measured_on / "dspark_attn_plugin" / "__init__.py", "a", encoding="utf-8") as fh:
        fh.write(UNSEEN.replace("MARKS", repr(str(data))))
    started = time.monotonic()
    measured_files = _suite_files()  # as they ran: an edit made meanwhile makes the map stale
    print(f"map: {' '.join(tests) if tests else 'the offline suite'} under coverage, "
          "each test on its own ...", flush=True)
    # The engine harness's tests never run the copy (NOT_THE_COPY): not measured.
    ignore = [f"--ignore={name}" for name in NOT_THE_COPY]
    proc = subprocess.run([python, "-m", "pytest", *[a for a in PYTEST_ARGS if a != "-x"], *ignore,
                           *(tests or ["tests"])], cwd=ROOT, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"map: the unmutated tests failed (exit {proc.returncode}); fix them first")
    sources = {str(p.relative_to(PACKAGE)): p.read_text(encoding="utf-8")
               for p in PACKAGE.rglob("*.py")}  # the sources measured, less the map's addition
    found_tests, found_lines = _read_coverage(data, measured_on)
    unseen = sorted(p.name[len("unseen-"):] for p in data.glob("unseen-*"))
    if tests is None:
        mapping = {"made": datetime.datetime.now().isoformat(timespec="seconds"),
                   "seconds": round(time.monotonic() - started), "sources": sources,
                   "tests": found_tests, "unseen": unseen, "test_files": measured_files,
                   "lines": {rel: {ln: sorted(ks) for ln, ks in per.items()}
                             for rel, per in found_lines.items()}}
    else:
        mapping = json.loads(MAP.read_text(encoding="utf-8"))
        _forget_files(mapping, [t for t in tests if "::" not in t])
        mapping["tests"].update(found_tests)
        mapping["unseen"] = sorted(set(mapping.get("unseen", [])) | set(unseen))
        for rel, per in found_lines.items():
            if rel not in mapping["sources"]:
                continue
            into = _line_translation(sources[rel], mapping["sources"][rel])
            lines = mapping["lines"].setdefault(rel, {})
            for ln, ks in per.items():
                old = into.get(int(ln))
                if old is not None:
                    lines[str(old)] = sorted(set(lines.get(str(old), [])) | ks)
        mapping.setdefault("added", []).append(
            {"tests": tests, "at": datetime.datetime.now().isoformat(timespec="seconds")})
        recorded = mapping.setdefault("test_files", {})
        for t in tests:
            name = t.split("::")[0]
            if "::" not in t and name in measured_files:
                recorded[name] = measured_files[name]
    MAP.write_text(json.dumps(mapping), encoding="utf-8")
    print(f"map: {len(found_tests)} tests measured in {round(time.monotonic() - started)} s "
          f"({len(unseen)} ran the plugin where coverage could not follow), "
          f"{len(mapping['tests'])} in {MAP}", flush=True)
    return MAP


def _forget_files(mapping: dict, files: list[str]) -> None:
    """Drop the tests of ``files`` from ``mapping`` (before they are measured
    again): a test renamed or removed there must not stay selected."""
    gone = {k for k, t in mapping["tests"].items() if t["nodeid"].split("::")[0] in files}
    for k in gone:
        del mapping["tests"][k]
    for per in mapping["lines"].values():
        for ln in list(per):
            per[ln] = [k for k in per[ln] if k not in gone]
    mapping["unseen"] = [k for k in mapping.get("unseen", []) if k not in gone]


def _read_coverage(data: Path, measured_on: Path) -> tuple[dict, dict]:
    import coverage

    prefix = str(measured_on / "dspark_attn_plugin") + os.sep
    tests = {ident.stem: json.loads(ident.read_text(encoding="utf-8"))
             for ident in (data / "ids").iterdir()}
    lines: dict[str, dict[str, set]] = {}
    for path in data.glob("cov-*"):
        key = path.name.split(".")[0][len("cov-"):]
        cov = coverage.CoverageData(basename=str(path))
        cov.read()
        for measured in cov.measured_files():
            if measured.startswith(prefix):
                per_line = lines.setdefault(measured[len(prefix):], {})
                for line in cov.lines(measured) or ():
                    per_line.setdefault(str(line), set()).add(key)
    return tests, lines


def _line_translation(new: str, old: str) -> dict[int, int]:
    """Line numbers of ``new`` -> the same line's number in ``old``, for
    the lines the two have in common (unchanged blocks)."""
    out = {}
    matcher = difflib.SequenceMatcher(None, new.splitlines(), old.splitlines(), autojunk=False)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            out[block.a + k + 1] = block.b + k + 1
    return out


def _test_key(nodeid: str) -> str:
    return hashlib.sha1(nodeid.encode()).hexdigest()[:16]


# Called from tests/conftest.py, in the process that runs one test (the forked
# one under --forked), only while the map is being made.
class TestCoverage:
    def __init__(self, nodeid: str):
        import coverage

        self.key = _test_key(nodeid)
        self.nodeid = nodeid
        self.dir = Path(os.environ["MUTATION_COVERAGE_DIR"])
        os.environ["MUTATION_TEST_ID"] = self.key
        (self.dir / "current").write_text(self.key, encoding="utf-8")
        self.started = time.monotonic()
        self.cov = coverage.Coverage(data_file=str(self.dir / f"cov-{self.key}"), data_suffix=True,
                                     config_file=False,
                                     include=[os.environ["MUTATION_COVERAGE_INCLUDE"]])
        self.cov.start()

    def stop(self) -> None:
        self.cov.stop()
        self.cov.save()
        os.environ.pop("MUTATION_TEST_ID", None)
        (self.dir / "current").unlink(missing_ok=True)
        (self.dir / "ids" / f"{self.key}.json").write_text(json.dumps(
            {"nodeid": self.nodeid, "seconds": round(time.monotonic() - self.started, 3)}),
            encoding="utf-8")


# --- 2. the server that runs one mutant's tests -----------------------------------


def serve() -> None:
    """Import the heavy part once; fork a pytest per request."""
    sys.dont_write_bytecode = True
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    import pytest  # noqa: F401
    import torch  # noqa: F401
    import vllm  # noqa: F401
    import vllm.plugins  # noqa: F401
    from vllm.models.deepseek_v4.nvidia import flashmla  # noqa: F401
    from vllm.v1.worker import workspace  # noqa: F401

    assert "dspark_attn_plugin" not in sys.modules, "the server must not hold the plugin"
    SOCKET.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(SOCKET))
    server.listen(1)
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        with conn:
            request = json.loads(_receive(conn))
            if request.get("stop"):
                return
            conn.sendall(json.dumps(_run_forked(request)).encode() + b"\n")


def _receive(conn: socket.socket) -> str:
    chunks = []
    while not chunks or not chunks[-1].endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode()


def _run_forked(request: dict) -> dict:
    log = Path(request["log"])
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: one pytest run over the mutated copy
        os.setpgrp()
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.chdir(ROOT)
        code = 3
        try:
            import pytest

            code = int(pytest.main([*PYTEST_ARGS, *request["tests"]]))
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    deadline = started + request["timeout"]
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return {"rc": os.waitstatus_to_exitcode(status), "seconds": round(time.monotonic() - started, 2)}
        if time.monotonic() > deadline:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
            os.waitpid(pid, 0)
            return {"rc": "timeout", "seconds": round(time.monotonic() - started, 2)}
        time.sleep(0.05)


# --- the test command Cosmic Ray calls for each mutant -----------------------------


def _changed_lines(module: str) -> tuple[list[int], str]:
    before = (PRISTINE / "dspark_attn_plugin" / module).read_text(encoding="utf-8").splitlines()
    after = (TREE / "dspark_attn_plugin" / module).read_text(encoding="utf-8").splitlines()
    changed: list[int] = []
    for tag, i1, i2, _j1, _j2 in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        if tag != "equal":
            changed.extend(range(i1 + 1, max(i2, i1 + 1) + 1))
    diff = "\n".join(difflib.unified_diff(before, after, lineterm="", n=0))
    return changed, diff


def _enclosing(module: str, line: int) -> tuple[int, int] | None:
    tree = ast.parse((PRISTINE / "dspark_attn_plugin" / module).read_text(encoding="utf-8"))
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if first <= line <= node.end_lineno and (best is None or node.lineno > best[0]):
                best = (node.lineno, node.end_lineno)
    return best


def _statement_lines(module: str, line: int) -> range:
    """The lines of the smallest statement holding ``line`` (of a compound
    statement, its header): a mutant of ``a and \\n b`` changes what runs
    when ``a`` is false, where the line of ``b`` never runs; the tests of
    the statement's first line see it."""
    tree = ast.parse((PRISTINE / "dspark_attn_plugin" / module).read_text(encoding="utf-8"))
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno <= line <= node.end_lineno:
            lo, hi = node.lineno, node.end_lineno
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and line < body[0].lineno:
                hi = body[0].lineno - 1  # the header of an if/for/while/with/def
            if lo <= line <= hi and (best is None or hi - lo < best[1] - best[0]):
                best = (lo, hi)
    return range(best[0], best[1] + 1) if best else range(line, line + 1)


def _import_time_scope(module: str, line: int) -> tuple[int, int] | None:
    """Where a change to ``line`` shows when the line runs at import, not
    when it is called: a ``def`` line or decorator (default values) is seen
    by every call of its function, a line at module level or in a class
    body (constants, dataclass defaults, aliases) by anything that uses the
    module. The span whose tests are to run, or None for a line that runs
    in a function's body."""
    tree = ast.parse((PRISTINE / "dspark_attn_plugin" / module).read_text(encoding="utf-8"))
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
            if first <= line <= node.end_lineno and (best is None or first >= best[0]):
                best = (first, node)
    if best is None:
        return (1, 10**9)
    first, node = best
    body = node.body if isinstance(node.body, list) else [node.body]
    return (first, node.end_lineno) if line < body[0].lineno else None


def _importers(module: str) -> list[str]:
    """The package's modules that import ``module`` (``from .verdict import
    SWA_RATIOS``, ``from dspark_attn_plugin.warmup_shape import verdict``,
    ``import dspark_attn_plugin.x``): a name bound at import is read there
    too, by tests the map credits to those modules only."""
    root = PRISTINE / "dspark_attn_plugin"
    target = "dspark_attn_plugin." + module.removesuffix(".py").replace("/", ".")
    target = target.removesuffix(".__init__")
    found = []
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root).as_posix()
        if name == module:
            continue
        package = ("dspark_attn_plugin." + name.removesuffix(".py").replace("/", ".")).rsplit(".", 1)[0]
        if path.name == "__init__.py":
            package = "dspark_attn_plugin." + name.removesuffix("/__init__.py").replace("/", ".") \
                if "/" in name else "dspark_attn_plugin"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                full = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
                if full == target or any(f"{full}.{a.name}" == target for a in node.names):
                    found.append(name)
                    break
            elif isinstance(node, ast.Import) and any(a.name == target for a in node.names):
                found.append(name)
                break
    return found


def select_tests(mapping: dict, module: str, changed: list[int]) -> tuple[list[str], str]:
    """The tests that executed ``changed`` (line numbers of the current
    source, put in the map's numbering); where none did, or a line is new
    since the map, those that executed any line of the enclosing function
    or class (the module, at module level; every test of the module for a
    function or class new since the map). A line that runs at import
    (``_import_time_scope``) also takes the tests of what sees it: the
    map credits an import to whichever test imported the module first; at
    module level, those of every module that imports it (``_importers``)."""
    per_line = mapping["lines"].get(module, {})
    current = (PRISTINE / "dspark_attn_plugin" / module).read_text(encoding="utf-8")
    into = _line_translation(current, mapping["sources"].get(module, ""))

    def tests_within(lo: int, hi: int) -> set[str]:
        return {k for ln, ks in per_line.items()
                for cur, old in into.items() if old == int(ln) and lo <= cur <= hi
                for k in ks}

    lines = {ln for line in changed for ln in _statement_lines(module, line)}
    keys = {k for line in lines for k in per_line.get(str(into.get(line)), ())}
    how = "lines"
    if not keys or any(line not in into for line in changed):
        how = "scope"
        for line in changed:
            lo, hi = _enclosing(module, line) or (1, 10**9)
            found = tests_within(lo, hi)
            if not found and not any(lo <= cur <= hi for cur in into):
                # A function or class new since the map: no test of the map
                # could run it; every test of the module may.
                found, how = tests_within(1, 10**9), "module"
            keys |= found
    spans = [s for s in (_import_time_scope(module, line) for line in changed) if s]
    if spans:
        for span in spans:
            keys |= tests_within(*span)
        how = "import"
        if (1, 10**9) in spans:  # module level: what imports the module reads its names
            for other in _importers(module):
                keys |= {k for ks in mapping["lines"].get(other, {}).values() for k in ks}
    unseen = set(mapping.get("unseen", ())) - keys
    if unseen:
        keys |= unseen
        how += "+unseen"
    tests = sorted(keys, key=lambda k: (mapping["tests"][k]["seconds"], mapping["tests"][k]["nodeid"]))
    return [mapping["tests"][k]["nodeid"] for k in tests], how


def mutant_budget(mapping: dict, tests: list[str]) -> float:
    """How long one mutant's tests may run before it counts as killed by
    time-out: ``BUDGET_FACTOR`` times what they took when the map measured
    them (under coverage, slower than here), never under ``TIMEOUT_S``. A
    fixed budget would call a survivor whose selection is long (a line
    every classifier test runs: 1,500 tests, 19 minutes) killed; a mutant
    that loops is caught sooner, by the limit on each test (conftest).
    Above ``MAX_BUDGET_S`` the budget is capped, and running past it is
    no kill (``_test_mutant``)."""
    by_id = {t["nodeid"]: t["seconds"] for t in mapping.get("tests", {}).values()}
    expected = sum(by_id.get(t, TEST_SECONDS) for t in tests)
    return round(min(max(float(TIMEOUT_S), BUDGET_FACTOR * expected + 60.0), MAX_BUDGET_S + 1.0), 1)


def budget_time_out(record: dict) -> bool:
    """A record of a time-out of the whole selection under the fixed
    budget of before (no ``budget`` recorded, no test past its own
    limit): no evidence the mutant loops; it is run again."""
    return (record.get("outcome") == "timed out" and record.get("rc") == "timeout"
            and "budget" not in record)


def killers_first(tests: list[str], records: dict[str, dict]) -> list[str]:
    """``tests`` with those that killed the module's mutants before (the
    ledger's first failures) first, the most killing first; the rest as
    they were (fastest first). The outcome is the same (a survivor runs
    them all); a kill comes sooner."""
    kills: dict[str, int] = {}
    for r in records.values():
        failure = r.get("first_failure") or ""
        if r.get("outcome") == "killed" and failure.startswith("FAILED "):
            nodeid = failure[len("FAILED "):].split(" - ")[0]
            kills[nodeid] = kills.get(nodeid, 0) + 1
    order = {t: i for i, t in enumerate(tests)}
    return sorted(tests, key=lambda t: (-kills.get(t, 0), order[t]))


def test_command(module: str) -> int:
    started = time.monotonic()
    try:
        return _test_mutant(module)
    finally:
        _add_time(module, time.monotonic() - started)


def _test_mutant(module: str) -> int:
    mapping = json.loads(Path(os.environ["MUTATION_MAP"]).read_text(encoding="utf-8"))
    changed, diff = _changed_lines(module)
    tests, how = select_tests(mapping, module, changed)
    tests = killers_first(tests, _records(module))
    mutated = (TREE / "dspark_attn_plugin" / module).read_text(encoding="utf-8")
    pristine = (PRISTINE / "dspark_attn_plugin" / module).read_text(encoding="utf-8")
    record = {"module": module, "mutant": _code_key(mutated),
              "scope": scope_key(module, pristine, mutated), "diff": diff, "lines": changed,
              "selected_by": how,
              "tests": len(tests)}
    if not changed or not tests:
        record.update(outcome="survived", why="no test executes these lines" if changed else "no change")
        _append(module, record)
        return 0
    budget = mutant_budget(mapping, tests)
    record["budget"] = budget
    answer, text = _ask_server(tests, budget)
    if answer["rc"] == 0 and os.environ.get("MUTATION_WHOLE_FILES"):
        # (--whole-files) Survived the tests that ran its lines and those
        # that ran the plugin where coverage could not follow: before it
        # counts as a survivor, every test of each file that has a test
        # executing this module.
        files = _test_files(mapping, module)
        record.update(selected_by=how + "+files", tests=len(files))
        answer, text = _ask_server(files, FILES_TIMEOUT_S)
        if answer["rc"] == "timeout":  # slowness of whole files is no kill
            record.update(outcome="survived", why="its test files ran past the time limit",
                          seconds=answer["seconds"])
            _append(module, record)
            return 0
    failed = [l for l in text.splitlines() if l.startswith(("FAILED", "ERROR"))]
    if any(l.startswith("ERROR: not found:") for l in failed):
        # The map names a test that is gone (moved or renamed since it was
        # measured): pytest's usage error is no kill. A survivor until the
        # map is measured again and --retry-survivors runs it.
        record.update(outcome="survived", why="the map names tests that no longer exist",
                      first_failure=failed[0][:300])
        _append(module, record)
        return 0
    looped = "(a mutant that loops?)" in text  # a test ran past TEST_SECONDS
    if answer["rc"] == "timeout" and not looped and budget > MAX_BUDGET_S:
        # The capped budget is less than its tests need: undecided, no kill.
        record.update(outcome="survived", why="its tests ran past the longest budget",
                      seconds=answer["seconds"])
        _append(module, record)
        return 0
    outcome = ("timed out" if answer["rc"] == "timeout" or looped
               else "survived" if answer["rc"] == 0 else "killed")
    record.update(outcome=outcome, rc=answer["rc"], seconds=answer["seconds"],
                  first_failure=failed[0][:300] if failed else None)
    if outcome != "survived" and not failed and answer["rc"] not in (1, "timeout"):
        record["log_tail"] = text[-1500:]
    _append(module, record)
    return 0 if outcome == "survived" else 1


def _ask_server(tests: list[str], timeout: float = TIMEOUT_S) -> tuple[dict, str]:
    log = WORK / f"last-mutant{_WORKER}.log"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(str(SOCKET))
        conn.sendall(json.dumps({"tests": tests, "timeout": timeout, "log": str(log)}).encode() + b"\n")
        answer = json.loads(_receive(conn))
    return answer, log.read_text(encoding="utf-8", errors="replace")


# Test files of the engine harness (benchmarks/engine): it installs the
# plugin from the wheel it is given, never the copy under test.
NOT_THE_COPY = ("tests/test_engine_harness.py", "tests/test_engine_evidence.py")


def _test_files(mapping: dict, module: str) -> list[str]:
    """The test files with a test that executes any line of ``module``."""
    keys = {k for ks in mapping["lines"].get(module, {}).values() for k in ks}
    seconds: dict[str, float] = {}
    for k in keys:
        name = mapping["tests"][k]["nodeid"].split("::")[0]
        if name in NOT_THE_COPY:
            continue
        seconds[name] = seconds.get(name, 0.0) + mapping["tests"][k]["seconds"]
    return sorted(seconds, key=lambda name: (seconds[name], name))  # fastest file first


def _ledger(module: str) -> Path:
    """Each mutant's outcome, one JSON line per test run, in the repository:
    keyed by the hash of the mutated file (one mutant of one version of the
    module) and by its ``scope_key`` (the same change to an unchanged
    function). A run on another machine, after the cache was emptied or
    after an edit elsewhere in the module takes its outcomes from here
    (``_resume``)."""
    return LEDGER / (module.replace("/", "__").removesuffix(".py") + ".jsonl")


def _append(module: str, record: dict) -> None:
    path = _ledger(module)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")


def _records(module: str) -> dict[str, dict]:
    """The ledger's last record of each mutant."""
    path = _ledger(module)
    records: dict[str, dict] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rec = json.loads(line)
                records[rec["mutant"]] = rec
    return records


# --- running a module: Cosmic Ray's session -----------------------------------------


def _session(module: str) -> Path:
    return WORK / "sessions" / (module.replace("/", "__").removesuffix(".py") + ".sqlite")


def _annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    spans = []
    for node in ast.walk(ast.parse(source)):
        found = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append(node.returns)
            args = node.args
            found += [a.annotation for a in [*args.posonlyargs, *args.args, *args.kwonlyargs,
                                              args.vararg, args.kwarg] if a is not None]
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
        spans += [((n.lineno, n.col_offset), (n.end_lineno, n.end_col_offset)) for n in found if n]
    return spans


def _point_at(session: Path, target: Path) -> None:
    """Cosmic Ray keeps the path of the file it mutates in the session: a
    session begun by another worker (another copy) is pointed at this one's."""
    import sqlite3

    with sqlite3.connect(session) as db:
        db.execute("UPDATE mutation_specs SET module_path = ?", (str(target),))


def resume_plan(records: dict[str, dict], items: list[tuple[str, str, str | None]]
                ) -> tuple[dict[str, str], dict[str, dict]]:
    """``items``: (job id, mutant key, scope key) of a new session's pending
    mutants. Returns the outcome each job takes from the ledger ("killed"
    for a kill by failure or time-out, "survived") and the ledger's records
    to keep, by mutant key: those of mutants the session has, in the
    ledger's order. A mutant the ledger knows only by its scope key (its
    function unchanged, the file changed elsewhere) takes that record,
    re-keyed to the new file and marked ``carried_from`` its old key."""
    records = {k: r for k, r in records.items() if not budget_time_out(r)}
    by_scope = {r["scope"]: r for r in records.values() if r.get("scope")}
    found: dict[str, dict] = {}
    for _job, key, scope in items:
        if key in records:
            found[key] = records[key]
        elif scope is not None and scope in by_scope:
            old = by_scope[scope]
            found[key] = dict(old, mutant=key, carried_from=old.get("carried_from", old["mutant"]))
    outcomes = {job: ("survived" if found[key]["outcome"] == "survived" else "killed")
                for job, key, _scope in items
                if found.get(key, {}).get("outcome") in ("killed", "timed out", "survived")}
    order = {k: i for i, k in enumerate(records)}
    keep = sorted(found.items(), key=lambda kv: order.get(kv[1].get("carried_from", kv[0]),
                                                          order.get(kv[0], len(order))))
    return outcomes, dict(keep)


def _resume(module: str, source: str, db) -> int:
    """Fills a new session with the ledger's outcomes of its mutants (the
    same mutated file, or the same change to an unchanged function) and
    drops the ledger's lines of mutants this source no longer has. Returns
    how many outcomes it took."""
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

    records = _records(module)
    pending = list(db.pending_work_items)
    outcomes, keep = resume_plan(records, [(i.job_id, *_mutant_keys(module, source, i.mutations[0]))
                                           for i in pending])
    for job, outcome in outcomes.items():
        db.set_result(job, WorkResult(
            worker_outcome=WorkerOutcome.NORMAL,
            test_outcome=TestOutcome.SURVIVED if outcome == "survived" else TestOutcome.KILLED,
            output="outcome from the ledger"))
    if keep != records:
        _ledger(module).write_text("".join(json.dumps(r) + "\n" for r in keep.values()),
                                   encoding="utf-8")
    return len(outcomes)


def survivors_to_retry(module: str, source: str, survivors: list[tuple[str, str, int]],
                       equivalents: list[dict]) -> list[str]:
    """Of ``survivors`` (job id, operator, line), those no listed equivalent
    explains: what new tests may kill. A listed one is known to survive
    (re-running it, with ``--whole-files`` minutes each, tells nothing new)."""
    lines = source.splitlines()
    used: set = set()
    return [job for job, operator, row in survivors
            if equivalent_reason(equivalents, used, module, operator, _mutant_line(lines, row),
                                 _mutant_line(lines, row - 1)) is None]


def _forget_survivors(session: Path, module: str) -> int:
    """Survivors that are not listed equivalents back to pending (after new
    tests, or a wider selection)."""
    import sqlite3

    from cosmic_ray.work_db import WorkDB, use_db

    with use_db(str(session), WorkDB.Mode.open) as db:
        results = dict(db.results)
        survivors = [(item.job_id, item.mutations[0].operator_name, item.mutations[0].start_pos[0])
                     for item in db.work_items
                     if (r := results.get(item.job_id)) is not None and r.test_outcome == "survived"]
    source = (PACKAGE / module).read_text(encoding="utf-8")
    retry = survivors_to_retry(module, source, survivors, _equivalents())
    with sqlite3.connect(session) as db:
        for job in retry:
            db.execute("DELETE FROM work_results WHERE job_id = ?", (job,))
    return len(retry)


def run_module(module: str, python: str, mapping: Path, retry: bool = False) -> None:
    from cosmic_ray.commands import execute, init
    from cosmic_ray.config import ConfigDict
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    _patch_exception_replacer()
    source = (PACKAGE / module).read_text(encoding="utf-8")
    if "from __future__ import annotations" not in source:
        raise SystemExit(f"{module}: annotations would be evaluated; the annotation rule does not hold")
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    session = _session(module)
    session.parent.mkdir(parents=True, exist_ok=True)
    stamp = session.with_suffix(".source")
    target = TREE / "dspark_attn_plugin" / module
    config = ConfigDict({
        "module-path": str(target), "timeout": float(MAX_BUDGET_S + FILES_TIMEOUT_S + 120),
        "excluded-modules": [],
        "test-command": f"{python} {Path(__file__).resolve()} test {module}",
        "distributor": {"name": "local"},
    })
    if not session.exists() or not stamp.exists() or stamp.read_text() != digest:
        session.unlink(missing_ok=True)
        with use_db(str(session), WorkDB.Mode.create) as db:
            init([target], db, {})
            spans = _annotation_spans(source)
            for item in list(db.pending_work_items):
                m = item.mutations[0]
                if any(lo <= tuple(m.start_pos) and tuple(m.end_pos) <= hi for lo, hi in spans):
                    db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED,
                                                          output=ANNOTATION))
            resumed = _resume(module, source, db)
        if resumed:
            print(f"{module}: {resumed} outcome(s) taken from {_ledger(module).relative_to(ROOT)}",
                  flush=True)
        stamp.write_text(digest)
    _point_at(session, target)
    if retry:
        print(f"{module}: {_forget_survivors(session, module)} survivor(s) to run again "
              "(listed equivalents kept)", flush=True)
    with use_db(str(session), WorkDB.Mode.open) as db:
        pending = sum(1 for _ in db.pending_work_items)
        total = db.num_work_items
        print(f"{module}: {total} mutants, {pending} to run", flush=True)
        if pending:
            execute(db, config)  # each mutant's test command adds its time (_add_time)


def _add_time(module: str, seconds: float) -> None:
    """The time the tool ran on the module, kept beside its ledger."""
    path = _ledger(module).with_suffix(".seconds")
    path.parent.mkdir(parents=True, exist_ok=True)
    before = float(path.read_text()) if path.exists() else 0.0
    path.write_text(f"{before + seconds:.1f}\n")


def run_jobs(modules: list[str], python: str, jobs: int, retry: bool = False,
             whole_files: bool = False) -> int:
    """``jobs`` workers at once, each with its own copy, test server and
    share of the modules (the largest first, dealt out in turn); then the
    report of them all."""
    WORK.mkdir(parents=True, exist_ok=True)
    build_map(python)
    sizes = {m: len((PACKAGE / m).read_bytes()) for m in modules}
    ordered = sorted(modules, key=lambda m: -sizes[m])
    shares = [ordered[k::jobs] for k in range(jobs)]
    workers = []
    for k, share in enumerate(shares):
        if not share:
            continue
        argv = [python, str(Path(__file__).resolve()), "run", *share]
        argv += ["--retry-survivors"] if retry else []
        argv += ["--whole-files"] if whole_files else []
        with open(WORK / f"worker{k}.log", "w") as log:
            workers.append(subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                            env=dict(os.environ, MUTATION_WORKER=str(k))))
        print(f"worker {k}: {' '.join(share)} (log: {WORK / f'worker{k}.log'})", flush=True)
    try:
        for w in workers:
            w.wait()
    finally:
        for w in workers:
            if w.poll() is None:
                w.terminate()
    return report(modules)


def run(modules: list[str], python: str, retry: bool = False, whole_files: bool = False) -> int:
    WORK.mkdir(parents=True, exist_ok=True)
    mapping = build_map(python)
    _fresh_copy(PRISTINE)
    _fresh_copy(TREE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TREE), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
               PYTHONDONTWRITEBYTECODE="1", MUTATION_MAP=str(mapping),
               MUTATION_TEST_SECONDS=str(TEST_SECONDS))
    if whole_files:
        env["MUTATION_WHOLE_FILES"] = "1"
    os.environ.update(env)
    SOCKET.unlink(missing_ok=True)
    with open(WORK / f"server{_WORKER}.log", "w") as server_log:
        server = subprocess.Popen([python, str(Path(__file__).resolve()), "serve"], cwd=ROOT,
                                  env=env, stdout=server_log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while not SOCKET.exists():
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the test server did not start: see {WORK / f'server{_WORKER}.log'}")
            time.sleep(0.2)
        for module in modules:
            run_module(module, python, mapping, retry)
            (TREE / "dspark_attn_plugin" / module).write_bytes((PACKAGE / module).read_bytes())
    finally:
        server.terminate()
        server.wait(timeout=30)
    return report(modules)


# --- 3. report ---------------------------------------------------------------------


def _equivalents() -> list[dict]:
    import tomllib

    if not EQUIVALENTS.exists():
        return []
    return tomllib.loads(EQUIVALENTS.read_text(encoding="utf-8")).get("equivalent", [])


def equivalent_reason(equivalents: list[dict], used: set, module: str, operator: str,
                      text: str, previous: str = "") -> str | None:
    """The reason of the first listed equivalent for this survivor that no
    other survivor took (two mutants of one operator on one line need two
    entries), marking it taken; None where there is none left. An entry
    with ``after`` stands only for a line whose line before holds that text
    (a bare ``continue`` is written in many places)."""
    for i, e in enumerate(equivalents):
        if i not in used and (e["module"], e["operator"], e["text"]) == (module, operator, text) and (
            e.get("after", "") in previous
        ):
            used.add(i)
            return e["reason"]
    return None


def _mutant_line(source_lines: list[str], row: int) -> str:
    return source_lines[row - 1].strip() if 0 < row <= len(source_lines) else ""


def report(modules: list[str]) -> int:
    from cosmic_ray.work_db import WorkDB, use_db

    RESULTS.mkdir(parents=True, exist_ok=True)
    equivalents = _equivalents()
    used = set()
    earlier: set = set()
    rows = []
    code = 0
    for module in modules:
        session = _session(module)
        if not session.exists():
            print(f"{module}: not run", flush=True)
            code = 1
            continue
        source = (PACKAGE / module).read_text(encoding="utf-8")
        stamp = session.with_suffix(".source")
        if stamp.exists() and stamp.read_text() != hashlib.sha256(source.encode()).hexdigest()[:16]:
            # Its mutants' lines are an earlier file's: read against this one
            # they would name the wrong lines.
            print(f"{module}: scored on an earlier source; its results are kept as they were "
                  f"(run it again)", flush=True)
            earlier.add(module)
            code = 1
            continue
        source_lines = source.splitlines()
        records = _records(module)
        counts = {"mutants": 0, "equivalent (annotation)": 0, "killed": 0, "timed out": 0,
                  "equivalent (listed)": 0, "survived": 0, "not run": 0}
        survivors = []
        carried = 0  # outcomes of an earlier source of the module, their function unchanged
        with use_db(str(session), WorkDB.Mode.open) as db:
            results = dict(db.results)
            for item in db.work_items:
                counts["mutants"] += 1
                m = item.mutations[0]
                result = results.get(item.job_id)
                if result is None:
                    counts["not run"] += 1
                    continue
                if result.worker_outcome == "skipped":
                    counts["equivalent (annotation)"] += 1
                    continue
                rec = records.get(_mutant_keys(module, source, m)[0], {})
                if budget_time_out(rec):  # no evidence: not judged (a new session runs it again)
                    counts["not run"] += 1
                    continue
                carried += bool(rec.get("carried_from"))
                if result.test_outcome == "killed":
                    counts["timed out" if rec.get("outcome") == "timed out" else "killed"] += 1
                    continue
                line = _mutant_line(source_lines, m.start_pos[0])
                entry = {"operator": m.operator_name, "occurrence": m.occurrence, "line": m.start_pos[0],
                         "text": line, "diff": rec.get("diff") or result.diff,
                         "tests": rec.get("tests"), "why": rec.get("why")}
                reason = equivalent_reason(equivalents, used, module, m.operator_name, line,
                                           _mutant_line(source_lines, m.start_pos[0] - 1))
                if reason:
                    counts["equivalent (listed)"] += 1
                    entry["equivalent"] = reason
                else:
                    counts["survived"] += 1
                    code = 1
                survivors.append(entry)
        judged = counts["mutants"] - counts["equivalent (annotation)"] - counts["equivalent (listed)"] - counts["not run"]
        score = (counts["killed"] + counts["timed out"]) / judged if judged else None
        seconds_path = _ledger(module).with_suffix(".seconds")
        doc = {"module": module, "date": datetime.date.today().isoformat(), "tool": "cosmic-ray 8.7.0",
               "run_seconds": round(float(seconds_path.read_text())) if seconds_path.exists() else None,
               "counts": counts, "score": round(score, 4) if score is not None else None,
               "outcomes_of_an_earlier_source": carried, "survivors": survivors}
        (RESULTS / (module.replace("/", "__").removesuffix(".py") + ".json")).write_text(
            json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        rows.append((module, counts, score, doc["run_seconds"]))
        if counts["not run"]:
            code = 1
    print("| module | mutants | equivalent | killed (timed out) | survived | score | run |")
    print("|---|---|---|---|---|---|---|")
    for module, c, score, secs in rows:
        eq = c["equivalent (annotation)"] + c["equivalent (listed)"]
        print(f"| {module} | {c['mutants']} | {eq} | {c['killed'] + c['timed out']} ({c['timed out']}) | "
              f"{c['survived']} | {'%.1f %%' % (100 * score) if score is not None else '-'} | "
              f"{round(secs / 60) if secs else '-'} min |" + (f" ({c['not run']} not run)" if c["not run"] else ""))
    stale = [e for i, e in enumerate(equivalents)
             if i not in used and e["module"] in modules and e["module"] not in earlier]
    for e in stale:
        print(f"stale equivalent entry (no such survivor): {e['module']}: {e['text']!r} {e['operator']}")
    return code


def _code_key(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()[:20]


def _scope(source: str, lo: int, hi: int) -> tuple[str, int, int]:
    """The innermost function or class that holds lines ``lo``..``hi``
    (decorators included), else the module-level statements that do: its
    qualified name and first and last lines."""
    best = None

    def visit(nodes, prefix):
        nonlocal best
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                if first <= lo and hi <= node.end_lineno:
                    best = (prefix + node.name, first, node.end_lineno)
                    visit(node.body, prefix + node.name + ".")

    tree = ast.parse(source)
    visit(tree.body, "")
    if best is not None:
        return best
    spans = [(n.lineno, n.end_lineno) for n in tree.body if n.end_lineno >= lo and n.lineno <= hi]
    if not spans:
        return ("<module>", 1, len(source.splitlines()))
    return ("<module>", min(a for a, _ in spans), max(b for _, b in spans))


def scope_key(module: str, source: str, mutated: str) -> str | None:
    """A mutant named by what it changes within its scope (``_scope``): the
    scope's name and text before and after. It stays the same while that
    function (or class, or module-level statement) is unchanged, whatever
    changes elsewhere in the file, so an edit to one function keeps the
    outcomes of the others' mutants (as mutmut 3 keys its results by
    function). None when the mutant changes nothing."""
    before, after = source.splitlines(), mutated.splitlines()
    ops = [op for op in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()
           if op[0] != "equal"]
    if not ops:
        return None
    lo, hi = ops[0][1] + 1, max(ops[-1][2], ops[-1][1] + 1)
    name, first, last = _scope(source, lo, min(hi, len(before)))
    delta = len(after) - len(before)
    text = "\n".join(before[first - 1:last]) + "\0" + "\n".join(after[first - 1:last + delta])
    return _code_key(f"{module}\0{name}\0{text}")


def _patch_exception_replacer() -> None:
    """Cosmic Ray 8.7's ExceptionReplacer sets ``.value`` on each exception
    of a handler, taking each for a name leaf: in a tuple, a dotted one
    (``except (csv.Error, StopIteration)``) is a node, and making that
    mutant fails with AttributeError (the whole run stops). Here such a
    node is replaced by the name CosmicRayTestingException, as a plain
    name is; every other mutant is made as before (its key unchanged). A
    dotted exception alone (``except csv.Error``) it already mutates, at the
    dot (``csvCosmicRayTestingExceptionError``, unbound: that handler
    catches nothing either).
    Idempotent; this process makes the mutants (the local distributor)."""
    from cosmic_ray.exceptions import CosmicRayTestingException
    from cosmic_ray.operators.exception_replacer import ExceptionReplacer
    from parso.python.tree import Name, PythonNode

    original = ExceptionReplacer.mutate
    if getattr(original, "dotted_in_a_tuple", False):
        return

    def mutate(self, node, index):
        target = self._name_nodes(node)[index]
        if not isinstance(target, PythonNode):
            return original(self, node, index)
        first = target.get_first_leaf()
        leaf = Name(CosmicRayTestingException.__name__, first.start_pos, first.prefix)
        leaf.parent = target
        target.children = [leaf]
        return node

    mutate.dotted_in_a_tuple = True
    ExceptionReplacer.mutate = mutate


def _mutated(source: str, spec) -> str:
    from cosmic_ray.mutating import mutate_code
    from cosmic_ray.plugins import get_operator

    _patch_exception_replacer()
    return mutate_code(source, get_operator(spec.operator_name)(**spec.operator_args),
                       spec.occurrence) or ""


def _mutant_keys(module: str, source: str, spec) -> tuple[str, str | None]:
    """The key of the file Cosmic Ray writes for this mutant (the test
    command hashes it) and its ``scope_key``."""
    mutated = _mutated(source, spec)
    return _code_key(mutated), scope_key(module, source, mutated)


def rekey(module: str, rev: str) -> int:
    """Adds its scope key to each ledger record of ``module`` made on the
    source committed at ``rev`` (a record whose mutated file hashes to one
    of that source's mutants), so that a later source resumes from it.
    Returns how many records it keyed."""
    import tempfile

    from cosmic_ray.commands import init
    from cosmic_ray.work_db import WorkDB, use_db

    source = subprocess.run(["git", "show", f"{rev}:src/dspark_attn_plugin/{module}"], cwd=ROOT,
                            check=True, capture_output=True, text=True).stdout
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / Path(module).name
        target.write_text(source, encoding="utf-8")
        with use_db(str(Path(tmp) / "s.sqlite"), WorkDB.Mode.create) as db:
            init([target], db, {})
            keys = dict(_mutant_keys(module, source, i.mutations[0]) for i in db.pending_work_items)
    path = _ledger(module)
    lines = [json.loads(l) for l in path.read_text(encoding="utf-8").splitlines() if l.strip()]
    keyed = 0
    for rec in lines:
        if keys.get(rec["mutant"]) and "scope" not in rec:
            rec["scope"] = keys[rec["mutant"]]
            keyed += 1
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return keyed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="score modules (resumes)")
    p_run.add_argument("modules", nargs="*", default=JUDGING)
    p_run.add_argument("--retry-survivors", action="store_true",
                       help="run the survivors again (after adding tests)")
    p_run.add_argument("--whole-files", action="store_true",
                       help="before a mutant counts as a survivor, run every test file "
                       "that executes its module (slow: minutes per survivor)")
    p_run.add_argument("--jobs", type=int, default=1,
                       help="workers at once, each with its own copy and modules (default 1)")
    p_rep = sub.add_parser("report", help="write the JSON and print the table")
    p_rep.add_argument("modules", nargs="*", default=JUDGING)
    p_map = sub.add_parser("map", help="make the line-to-tests map only")
    p_map.add_argument("--new", action="store_true", help="make it again from nothing")
    p_map.add_argument("--add", nargs="+", metavar="TEST", help="measure these tests into the map")
    p_rekey = sub.add_parser("rekey", help="add scope keys to a module's ledger records "
                             "made on the source committed at REV")
    p_rekey.add_argument("module")
    p_rekey.add_argument("rev")
    sub.add_parser("serve", help="(internal) the test server")
    p_test = sub.add_parser("test", help="(internal) Cosmic Ray's test command")
    p_test.add_argument("module")
    args = parser.parse_args(argv)
    if args.command == "serve":
        serve()
        return 0
    if args.command == "test":
        return test_command(args.module)
    if args.command == "map":
        if args.new:
            MAP.unlink(missing_ok=True)
        build_map(sys.executable, args.add)
        return 0
    if args.command == "report":
        return report(args.modules)
    if args.command == "rekey":
        print(f"{args.module}: {rekey(args.module, args.rev)} record(s) keyed by scope")
        return 0
    unknown = [m for m in args.modules if not (PACKAGE / m).is_file()]
    if unknown:
        parser.error(f"no such module under src/dspark_attn_plugin: {', '.join(unknown)}")
    if args.jobs > 1:
        return run_jobs(args.modules, sys.executable, args.jobs, args.retry_survivors,
                        args.whole_files)
    return run(args.modules, sys.executable, args.retry_survivors, args.whole_files)


if __name__ == "__main__":
    sys.exit(main())
