"""The mutation score's own rules (tests/mutation_score.py): which mutants
are equivalent by construction, and which tests a mutant is run against."""

from __future__ import annotations

import os
import textwrap

import pytest

import mutation_score as ms

SOURCE = textwrap.dedent('''\
    from __future__ import annotations


    def f(a: int | None = 1 | 2, *b: str, **c: dict[str, int]) -> list[int] | None:
        x: int | None = a | 4
        return [x]


    class C:
        y: str | None = None

        def g(self) -> bool:
            return self.y is None
    ''')


def _inside(spans, row, col):
    return any(lo <= (row, col) and (row, col) < hi for lo, hi in spans)


def test_annotations_are_spans_and_values_are_not():
    spans = ms._annotation_spans(SOURCE)
    lines = SOURCE.splitlines()
    row = 4  # def f(...)
    assert _inside(spans, row, lines[row - 1].index("int | None"))
    assert not _inside(spans, row, lines[row - 1].index("1 | 2"))  # a default: evaluated
    assert _inside(spans, row, lines[row - 1].index("list[int] | None"))
    assert _inside(spans, row, lines[row - 1].index("dict[str, int]"))
    assert _inside(spans, 5, lines[4].index("int | None"))
    assert not _inside(spans, 5, lines[4].index("a | 4"))  # the value is evaluated
    assert _inside(spans, 10, lines[9].index("str | None"))
    assert not _inside(spans, 13, lines[12].index("is None"))


def test_line_numbers_follow_the_source_across_edits():
    old = "a\nb\nc\nd\n"
    new = "a\nnew\nb\nc\nchanged\n"
    assert ms._line_translation(new, old) == {1: 1, 3: 2, 4: 3}


@pytest.fixture
def pristine_m(tmp_path, monkeypatch):
    """The tool's pristine copy of the package: one module, ``m.py``, of SOURCE."""
    pristine = tmp_path / "pristine"
    (pristine / "dspark_attn_plugin").mkdir(parents=True)
    (pristine / "dspark_attn_plugin" / "m.py").write_text(SOURCE)
    monkeypatch.setattr(ms, "PRISTINE", pristine)


def test_a_mutant_runs_the_tests_of_its_lines_else_of_its_function(pristine_m):
    mapping = {
        "sources": {"m.py": SOURCE},
        "tests": {"k1": {"nodeid": "t.py::slow", "seconds": 2.0},
                  "k2": {"nodeid": "t.py::fast", "seconds": 0.1},
                  "k3": {"nodeid": "u.py::other", "seconds": 0.5}},
        "lines": {"m.py": {"5": ["k1", "k2"], "6": ["k1"], "13": ["k3"]}},
    }
    assert ms.select_tests(mapping, "m.py", [5]) == (["t.py::fast", "t.py::slow"], "lines")
    # Line 4, a def line (its defaults), runs at import: every test of the function.
    assert ms.select_tests(mapping, "m.py", [4]) == (["t.py::fast", "t.py::slow"], "import")
    assert ms.select_tests(mapping, "m.py", [12]) == (["u.py::other"], "import")
    assert ms._test_files(mapping, "m.py") == ["u.py", "t.py"]  # the fastest file first


def test_a_mutant_of_a_function_new_since_the_map_runs_every_test_of_its_module(pristine_m):
    """No test of the map ran a function written after it was made; its
    mutants run every test that executes the module rather than none."""
    old = SOURCE.replace("    def g(self) -> bool:\n        return self.y is None\n", "")
    mapping = {
        "sources": {"m.py": old},
        "tests": {"k1": {"nodeid": "t.py::slow", "seconds": 2.0},
                  "k2": {"nodeid": "t.py::fast", "seconds": 0.1},
                  "k3": {"nodeid": "u.py::other", "seconds": 0.5}},
        "lines": {"m.py": {"5": ["k1", "k2"], "6": ["k1"], "10": ["k3"]}},
    }
    assert ms.select_tests(mapping, "m.py", [13]) == (
        ["t.py::fast", "u.py::other", "t.py::slow"], "module")


def test_a_mutant_of_a_line_run_at_import_runs_every_test_that_sees_it(pristine_m):
    """The map credits a module's import to the test that imported it first
    (one that starts the CLI in a child process, say); a constant, a class
    attribute's default or a def line's default is seen by every test of
    what uses it, not by that one."""
    mapping = {
        "sources": {"m.py": SOURCE},
        "tests": {"k1": {"nodeid": "t.py::slow", "seconds": 2.0},
                  "k2": {"nodeid": "t.py::fast", "seconds": 0.1},
                  "k3": {"nodeid": "u.py::other", "seconds": 0.5},
                  "k4": {"nodeid": "cli.py::imports_first", "seconds": 1.0}},
        "lines": {"m.py": {"1": ["k4"], "4": ["k4"], "10": ["k4"], "12": ["k4"],
                           "5": ["k1", "k2"], "6": ["k1"], "13": ["k3"]}},
    }
    every = ["t.py::fast", "u.py::other", "cli.py::imports_first", "t.py::slow"]
    assert ms.select_tests(mapping, "m.py", [10]) == (every, "import")  # a class attribute
    assert ms.select_tests(mapping, "m.py", [1]) == (every, "import")   # module level
    assert ms.select_tests(mapping, "m.py", [4]) == (
        ["t.py::fast", "cli.py::imports_first", "t.py::slow"], "import")
    assert ms.select_tests(mapping, "m.py", [12]) == (
        ["u.py::other", "cli.py::imports_first"], "import")
    # A line in a function's body runs when called: its own tests.
    assert ms.select_tests(mapping, "m.py", [13]) == (["u.py::other"], "lines")


def test_a_module_level_line_runs_the_tests_of_the_modules_that_import_it(pristine_m):
    """A constant read only by the modules that import it (``from .m import
    X``) is executed at import alone: its mutant runs the tests of those
    modules too; a line in a function's body does not."""
    package = ms.PRISTINE / "dspark_attn_plugin"
    (package / "n.py").write_text("from .m import X\n\ndef use():\n    return X\n")
    (package / "sub").mkdir()
    (package / "sub" / "o.py").write_text("from dspark_attn_plugin import m\n")
    (package / "sub" / "p.py").write_text("from .. import m\n")
    (package / "q.py").write_text("import dspark_attn_plugin.n\n")
    assert ms._importers("m.py") == ["n.py", "sub/o.py", "sub/p.py"]
    mapping = {
        "sources": {"m.py": SOURCE},
        "tests": {"k1": {"nodeid": "t.py::fast", "seconds": 0.1},
                  "k3": {"nodeid": "u.py::other", "seconds": 0.5},
                  "k5": {"nodeid": "n.py::reads_it", "seconds": 1.0},
                  "k6": {"nodeid": "q.py::not_m", "seconds": 0.2}},
        "lines": {"m.py": {"5": ["k1"], "13": ["k3"]}, "n.py": {"4": ["k5"]},
                  "q.py": {"1": ["k6"]}},
    }
    assert ms.select_tests(mapping, "m.py", [1]) == (
        ["t.py::fast", "u.py::other", "n.py::reads_it"], "import")
    assert ms.select_tests(mapping, "m.py", [13]) == (["u.py::other"], "lines")


def test_a_test_that_ran_the_plugin_unseen_runs_against_every_mutant(pristine_m):
    """A test the map marked unseen (it ran the plugin in a process coverage
    did not follow) is in every mutant's selection, of every module."""
    mapping = {
        "sources": {"m.py": SOURCE},
        "tests": {"k1": {"nodeid": "t.py::fast", "seconds": 0.1},
                  "k2": {"nodeid": "s.py::dash_capital_s", "seconds": 3.0}},
        "lines": {"m.py": {"5": ["k1"]}},
        "unseen": ["k2"],
    }
    assert ms.select_tests(mapping, "m.py", [5]) == (["t.py::fast", "s.py::dash_capital_s"],
                                                     "lines+unseen")
    assert ms.select_tests(mapping, "m.py", [12]) == (["s.py::dash_capital_s"], "import+unseen")
    del mapping["unseen"]  # a map made before unseen tests were marked
    assert ms.select_tests(mapping, "m.py", [5]) == (["t.py::fast"], "lines")


def _import_marker(tmp_path, *python_args, start_coverage=False, import_coverage=False):
    import subprocess
    import sys

    marks = tmp_path / "marks"
    marks.mkdir(exist_ok=True)
    (marks / "current").write_text("abc123\n")
    code = ms.UNSEEN.replace("MARKS", repr(str(marks)))
    if import_coverage:
        code = "import coverage\n" + code
    if start_coverage:
        code = ("import coverage\ncov = coverage.Coverage(data_file=None)\ncov.start()\n"
                + code + "\ncov.stop()\n")
    # A child of its own: not measured by the map this suite may itself run under.
    env = {k: v for k, v in os.environ.items() if not k.startswith("MUTATION_")}
    subprocess.run([sys.executable, *python_args, "-c", code], check=True, timeout=120, env=env)
    return sorted(p.name for p in marks.glob("unseen-*"))


def test_the_map_marks_a_test_whose_child_python_runs_the_plugin_without_coverage(tmp_path):
    assert _import_marker(tmp_path, "-S") == ["unseen-abc123"]  # no site: no sitecustomize
    (tmp_path / "marks" / "unseen-abc123").unlink()
    assert _import_marker(tmp_path) == ["unseen-abc123"]  # coverage not started
    (tmp_path / "marks" / "unseen-abc123").unlink()
    assert _import_marker(tmp_path, import_coverage=True) == ["unseen-abc123"]  # imported, not started
    (tmp_path / "marks" / "unseen-abc123").unlink()
    assert _import_marker(tmp_path, start_coverage=True) == []  # measured: not unseen


def test_jobs_share_out_the_modules_largest_first(tmp_path, monkeypatch):
    started = []

    class FakePopen:
        def __init__(self, argv, **kw):
            started.append((kw["env"]["MUTATION_WORKER"], argv[3:]))

        def wait(self):
            return 0

        def poll(self):
            return 0

    monkeypatch.setattr(ms, "WORK", tmp_path)
    monkeypatch.setattr(ms, "build_map", lambda python: None)
    monkeypatch.setattr(ms, "report", lambda modules: 0)
    monkeypatch.setattr(ms.subprocess, "Popen", FakePopen)
    package = tmp_path / "package"  # sizes fixed here, not the sources' of the day
    for module, size in [("warmup_shape/statements.py", 4000), ("warmup_shape/expressions.py", 3000),
                         ("patch.py", 2000), ("settings.py", 1000)]:
        (package / module).parent.mkdir(parents=True, exist_ok=True)
        (package / module).write_text("#" * size)
    monkeypatch.setattr(ms, "PACKAGE", package)
    assert ms.run_jobs(["settings.py", "warmup_shape/statements.py", "patch.py",
                        "warmup_shape/expressions.py"], "python", 2, whole_files=True) == 0
    assert started == [
        ("0", ["warmup_shape/statements.py", "patch.py", "--whole-files"]),
        ("1", ["warmup_shape/expressions.py", "settings.py", "--whole-files"]),
    ]


def test_a_session_begun_by_another_worker_mutates_this_workers_copy(tmp_path):
    """Cosmic Ray stores the mutated file's path in its session: resumed by
    another worker (another copy), it must mutate that worker's copy, or
    every mutant reads as unchanged and 'survives'."""
    import sqlite3

    session = tmp_path / "m.sqlite"
    with sqlite3.connect(session) as db:
        db.execute("CREATE TABLE mutation_specs (module_path VARCHAR, job_id VARCHAR)")
        db.executemany("INSERT INTO mutation_specs VALUES (?, ?)",
                       [("/elsewhere/tree/dspark_attn_plugin/m.py", "a"),
                        ("/elsewhere/tree/dspark_attn_plugin/m.py", "b")])
    here = tmp_path / "tree1" / "dspark_attn_plugin" / "m.py"
    ms._point_at(session, here)
    with sqlite3.connect(session) as db:
        assert db.execute("SELECT DISTINCT module_path FROM mutation_specs").fetchall() == [(str(here),)]


def test_a_map_older_than_a_test_file_is_brought_up_to_date(tmp_path, monkeypatch):
    """A changed or new test_*.py is measured again (its old entries
    dropped); a change to any other file of tests/ makes a new map; the
    engine harness's files, never measured, change nothing."""
    tests = tmp_path / "tests"
    tests.mkdir()
    for name, text in (("test_a.py", "a"), ("test_b.py", "b"), ("helpers.py", "h"),
                       ("test_engine_harness.py", "e")):
        (tests / name).write_text(text)
    monkeypatch.setattr(ms, "ROOT", tmp_path)
    mapping = {"test_files": ms._suite_files()}
    assert ms.stale_test_files(mapping) == ([], [])
    (tests / "test_a.py").write_text("a2")
    (tests / "test_c.py").write_text("c")
    (tests / "test_engine_harness.py").write_text("e2")
    assert ms.stale_test_files(mapping) == (["tests/test_a.py", "tests/test_c.py"], [])
    (tests / "helpers.py").write_text("h2")
    assert ms.stale_test_files(mapping)[1] == ["tests/helpers.py"]
    assert ms.stale_test_files({})[1] == sorted(ms._suite_files())  # a map that never recorded them

    mapping = {"tests": {"k1": {"nodeid": "tests/test_a.py::x", "seconds": 1},
                         "k2": {"nodeid": "tests/test_b.py::y", "seconds": 1}},
               "lines": {"m.py": {"3": ["k1", "k2"]}}, "unseen": ["k1"]}
    ms._forget_files(mapping, ["tests/test_a.py"])
    assert mapping == {"tests": {"k2": {"nodeid": "tests/test_b.py::y", "seconds": 1}},
                       "lines": {"m.py": {"3": ["k2"]}}, "unseen": []}


def test_each_listed_equivalent_stands_for_one_survivor():
    """Two survivors of one operator on one line take the two entries that
    list them, one each; a third finds none left (a survivor, not an
    equivalent), and an entry no survivor took stays unused (stale)."""
    entries = [{"module": "m.py", "operator": "op", "text": "x = 1", "reason": "first"},
               {"module": "m.py", "operator": "other", "text": "x = 1", "reason": "unused"},
               {"module": "m.py", "operator": "op", "text": "x = 1", "reason": "second"}]
    used: set = set()
    taken = [ms.equivalent_reason(entries, used, "m.py", "op", "x = 1") for _ in range(3)]
    assert taken == ["first", "second", None]
    assert used == {0, 2}
    assert ms.equivalent_reason(entries, used, "n.py", "other", "x = 1") is None


def test_an_equivalent_written_after_a_line_stands_only_for_the_line_after_it():
    """A bare ``continue`` appears in many places: an entry with ``after``
    explains only the one whose line before holds that text."""
    entries = [{"module": "m.py", "operator": "op", "text": "continue", "after": "seen.add(x)",
                "reason": "after the add"}]
    used: set = set()
    assert ms.equivalent_reason(entries, used, "m.py", "op", "continue", "if x in seen:") is None
    assert ms.equivalent_reason(entries, used, "m.py", "op", "continue", "seen.add(x)") == "after the add"


def test_a_retry_of_survivors_runs_again_only_those_no_listed_equivalent_explains():
    """After new tests, survivors run again; a listed equivalent does not
    (it is known to survive): of two survivors of one operator on a line
    listed once, the second runs again, as does one on an unlisted line."""
    source = "x = 1\nx = 1\ny = 2\n"
    entries = [{"module": "m.py", "operator": "op", "text": "x = 1", "reason": "listed"}]
    survivors = [("a", "op", 1), ("b", "op", 2), ("c", "op", 3), ("d", "other", 1)]
    assert ms.survivors_to_retry("m.py", source, survivors, entries) == ["b", "c", "d"]
    assert ms.survivors_to_retry("n.py", source, survivors, entries) == ["a", "b", "c", "d"]


def test_the_ledger_keeps_each_mutants_last_outcome_in_the_repository(tmp_path, monkeypatch):
    """Outcomes live in the committed ledger, not the cache: a later line of
    one mutant (a survivor run again after a new test) replaces its earlier."""
    monkeypatch.setattr(ms, "LEDGER", tmp_path / "mutants")
    ms._append("warmup_shape/module.py", {"mutant": "a", "outcome": "survived"})
    ms._append("warmup_shape/module.py", {"mutant": "b", "outcome": "killed"})
    ms._append("warmup_shape/module.py", {"mutant": "a", "outcome": "killed"})
    assert ms._ledger("warmup_shape/module.py") == tmp_path / "mutants" / "warmup_shape__module.jsonl"
    assert ms._records("warmup_shape/module.py") == {"a": {"mutant": "a", "outcome": "killed"},
                                                     "b": {"mutant": "b", "outcome": "killed"}}
    ms._add_time("warmup_shape/module.py", 1.25)
    ms._add_time("warmup_shape/module.py", 2.0)
    assert (tmp_path / "mutants" / "warmup_shape__module.seconds").read_text() == "3.2\n"


@pytest.mark.parametrize("rc, output, outcome", [
    (4, "ERROR: not found: /repo/tests/test_a.py::test_gone\n", "survived"),
    (1, "FAILED tests/test_a.py::test_b - AssertionError\n", "killed"),
    (0, "1 passed\n", "survived"),
])
def test_a_test_the_map_names_that_is_gone_is_no_kill(tmp_path, monkeypatch, rc, output, outcome):
    """A test moved or renamed after the map was measured makes pytest exit
    4 ("not found"): that says nothing of the mutant, so it is a survivor
    (run again after the map), never a kill."""
    for name in ("TREE", "PRISTINE"):
        (tmp_path / name / "dspark_attn_plugin").mkdir(parents=True)
        (tmp_path / name / "dspark_attn_plugin" / "m.py").write_text("x = 1\n")
        monkeypatch.setattr(ms, name, tmp_path / name)
    (tmp_path / "map.json").write_text("{}")
    monkeypatch.setenv("MUTATION_MAP", str(tmp_path / "map.json"))
    monkeypatch.setattr(ms, "LEDGER", tmp_path / "mutants")
    monkeypatch.setattr(ms, "_changed_lines", lambda module: ([1], "-x = 1\n+x = 2\n"))
    monkeypatch.setattr(ms, "select_tests", lambda mapping, module, changed: (["t"], "lines"))
    monkeypatch.setattr(ms, "_ask_server", lambda tests, *a: ({"rc": rc, "seconds": 1.0}, output))
    assert ms._test_mutant("m.py") == (1 if outcome == "killed" else 0)
    (record,) = ms._records("m.py").values()
    assert record["outcome"] == outcome


def test_a_mutants_time_budget_follows_what_its_tests_took_in_the_map():
    """A fixed budget called a survivor whose selection is long (1,500
    classifier tests) killed by time-out: the budget is twice what the map
    measured for its tests, at least ``TIMEOUT_S``, capped past
    ``MAX_BUDGET_S``; a test the map does not know counts ``TEST_SECONDS``."""
    mapping = {"tests": {"a": {"nodeid": "t::a", "seconds": 400.0},
                         "b": {"nodeid": "t::b", "seconds": 100.0},
                         "c": {"nodeid": "t::c", "seconds": 2000.0}}}
    assert ms.mutant_budget(mapping, ["t::a", "t::b"]) == 2 * 500.0 + 60
    assert ms.mutant_budget(mapping, ["t::b"]) == ms.TIMEOUT_S
    assert ms.mutant_budget(mapping, ["t::gone"]) == max(ms.TIMEOUT_S, 2 * ms.TEST_SECONDS + 60)
    assert ms.mutant_budget(mapping, ["t::c"]) > ms.MAX_BUDGET_S
    assert ms.mutant_budget({}, ["t::x"]) >= ms.TIMEOUT_S


@pytest.mark.parametrize("expected, output, outcome", [
    (100.0, "", "timed out"),           # twice what its tests took, and still running: a kill
    (5000.0, "", "survived"),           # the capped budget is less than they need: no kill
    (5000.0, "over 120 s (a mutant that loops?)", "timed out"),  # one test ran past its own limit
])
def test_a_time_out_is_a_kill_only_within_a_budget_its_tests_fit(tmp_path, monkeypatch, expected,
                                                                 output, outcome):
    for name in ("TREE", "PRISTINE"):
        (tmp_path / name / "dspark_attn_plugin").mkdir(parents=True)
        (tmp_path / name / "dspark_attn_plugin" / "m.py").write_text("x = 1\n")
        monkeypatch.setattr(ms, name, tmp_path / name)
    (tmp_path / "map.json").write_text(
        '{"tests": {"k": {"nodeid": "t::k", "seconds": %s}}}' % expected)
    monkeypatch.setenv("MUTATION_MAP", str(tmp_path / "map.json"))
    monkeypatch.setattr(ms, "LEDGER", tmp_path / "mutants")
    monkeypatch.setattr(ms, "_changed_lines", lambda module: ([1], "-x = 1\n+x = 2\n"))
    monkeypatch.setattr(ms, "select_tests", lambda mapping, module, changed: (["t::k"], "lines"))
    asked = []
    monkeypatch.setattr(ms, "_ask_server", lambda tests, budget: (
        asked.append(budget) or ({"rc": "timeout", "seconds": budget}, output)))
    assert ms._test_mutant("m.py") == (0 if outcome == "survived" else 1)
    (record,) = ms._records("m.py").values()
    assert record["outcome"] == outcome and record["budget"] == asked[0]
    assert asked[0] == min(max(ms.TIMEOUT_S, 2 * expected + 60), ms.MAX_BUDGET_S + 1)


def test_a_time_out_of_the_old_fixed_budget_is_run_again():
    """Ledger records of a time-out under the fixed 600-s budget (no
    ``budget`` recorded, no test past its own limit) are no evidence of a
    kill: a new session runs those mutants again; a time-out within a
    recorded budget is still a kill."""
    records = {"old": {"mutant": "old", "outcome": "timed out", "rc": "timeout", "seconds": 600.1},
               "new": {"mutant": "new", "outcome": "timed out", "rc": "timeout", "budget": 900.0},
               "loop": {"mutant": "loop", "outcome": "timed out", "rc": 1}}
    items = [("j1", "old", None), ("j2", "new", None), ("j3", "loop", None)]
    outcomes, keep = ms.resume_plan(records, items)
    assert outcomes == {"j2": "killed", "j3": "killed"}
    assert list(keep) == ["new", "loop"]


def test_a_new_session_takes_the_outcomes_of_its_own_mutants_only():
    """On a new machine the session starts empty: each mutant whose mutated
    file the ledger knows takes its outcome (a time-out is a kill), a record
    without a usable outcome is run again, and the records of mutants the
    source no longer has are dropped."""
    records = {"k1": {"mutant": "k1", "outcome": "killed"},
               "k2": {"mutant": "k2", "outcome": "timed out"},
               "k3": {"mutant": "k3", "outcome": "survived"},
               "k4": {"mutant": "k4"},
               "old": {"mutant": "old", "outcome": "killed"}}
    items = [("j1", "k1", None), ("j2", "k2", None), ("j3", "k3", None), ("j4", "k4", None),
             ("j5", "new", None)]
    outcomes, keep = ms.resume_plan(records, items)
    assert outcomes == {"j1": "killed", "j2": "killed", "j3": "survived"}
    assert list(keep) == ["k1", "k2", "k3", "k4"]
    assert ms.resume_plan({}, items) == ({}, {})


def test_an_edit_elsewhere_in_the_file_keeps_the_outcomes_of_an_unchanged_functions_mutants():
    """The file changed, so no mutant's file key matches; a mutant whose
    function (and change to it) is the same takes its outcome by scope key,
    re-keyed to the new file; one of the edited function runs again."""
    records = {"f1": {"mutant": "f1", "scope": "s1", "outcome": "killed"},
               "f2": {"mutant": "f2", "scope": "s2", "outcome": "survived"},
               "f3": {"mutant": "f3", "scope": "s3", "outcome": "killed"}}
    items = [("j1", "g1", "s1"), ("j2", "g2", "s2"), ("j3", "g3", "s3-edited")]
    outcomes, keep = ms.resume_plan(records, items)
    assert outcomes == {"j1": "killed", "j2": "survived"}
    assert keep == {"g1": {"mutant": "g1", "scope": "s1", "outcome": "killed", "carried_from": "f1"},
                    "g2": {"mutant": "g2", "scope": "s2", "outcome": "survived", "carried_from": "f2"}}
    # Carried again after a second edit, it still names the record it came from.
    again, _ = ms.resume_plan(keep, [("j1", "h1", "s1")])
    assert again == {"j1": "killed"} and _["h1"]["carried_from"] == "f1"


SCOPED = textwrap.dedent('''\
    from __future__ import annotations

    LIMIT = 3


    def f(a):
        return a > LIMIT


    class C:
        def g(self, b):
            return b + 1

        def h(self, b):
            return b + 1
    ''')


def _mutate(source, old, new, nth=0):
    parts = source.split(old)
    return old.join(parts[:nth + 1]) + new + old.join(parts[nth + 1:])


def test_a_mutants_scope_key_names_its_change_within_its_function_only():
    g_mutant = _mutate(SCOPED, "b + 1", "b - 1")
    key = ms.scope_key("m.py", SCOPED, g_mutant)
    # An edit to another function (or a line added above) keeps it.
    edited = SCOPED.replace("return a > LIMIT", "return a >= LIMIT").replace("LIMIT = 3", "\nLIMIT = 3")
    assert ms.scope_key("m.py", edited, _mutate(edited, "b + 1", "b - 1")) == key
    # So does an edit to another method of its class: the scope is the method.
    twin = _mutate(SCOPED, "b + 1", "b + 2", nth=1)
    assert ms.scope_key("m.py", twin, _mutate(twin, "b + 1", "b - 1")) == key
    # An edit to its own function does not; nor the same change to the twin method,
    # nor another change at the same place, nor the same change in another module.
    own = SCOPED.replace("def g(self, b):", "def g(self, b, c=0):")
    assert ms.scope_key("m.py", own, _mutate(own, "b + 1", "b - 1")) != key
    assert ms.scope_key("m.py", SCOPED, _mutate(SCOPED, "b + 1", "b - 1", nth=1)) != key
    assert ms.scope_key("m.py", SCOPED, _mutate(SCOPED, "b + 1", "b * 1")) != key
    assert ms.scope_key("n.py", SCOPED, g_mutant) != key
    # A module-level statement is its own scope; no change, no key.
    limit = ms.scope_key("m.py", SCOPED, SCOPED.replace("LIMIT = 3", "LIMIT = 4"))
    assert limit is not None and limit != key
    assert ms.scope_key("m.py", edited.replace("return a >= LIMIT", "return a > LIMIT"),
                        edited.replace("LIMIT = 3", "LIMIT = 4").replace("return a >= LIMIT",
                                                                         "return a > LIMIT")) == limit
    assert ms.scope_key("m.py", SCOPED, SCOPED) is None




def test_every_named_mutation_of_make_mutants_applies_to_the_source_as_it_is():
    """``make mutants`` (tests/mutation_check.py) reports a mutation whose
    text is no longer in the source as "did not apply", hours into its run:
    each one's text is found exactly once, and the mutated file compiles."""
    import ast

    import mutation_check

    problems = []
    for name, (_, changes) in mutation_check.MUTATIONS.items():
        texts: dict = {}
        for file, old, new in changes:
            text = texts.get(file) or (mutation_check.PACKAGE / file).read_text(encoding="utf-8")
            if text.count(old) != 1:
                problems.append(f"{name}: {file}: found {text.count(old)} times: {old!r}")
                continue
            texts[file] = text.replace(old, new)
        for file, text in texts.items():
            try:
                ast.parse(text)
            except SyntaxError as exc:
                problems.append(f"{name}: {file} does not compile: {exc}")
    assert not problems, "\n".join(problems)


def test_a_mutant_of_a_continuation_line_runs_the_tests_of_its_whole_statement(tmp_path, monkeypatch):
    """``a and \\n b`` mutated to ``a or \\n b`` changes what runs where ``a``
    is false, and there the line of ``b`` never ran: the tests of every line
    of the statement (of a compound one, its header) see the mutant."""
    source = textwrap.dedent('''\
        def f(a, b):
            ok = (a
                  and b)
            if (a
                    or b):
                return 1
            return ok
        ''')
    pristine = tmp_path / "pristine"
    (pristine / "dspark_attn_plugin").mkdir(parents=True)
    (pristine / "dspark_attn_plugin" / "m.py").write_text(source)
    monkeypatch.setattr(ms, "PRISTINE", pristine)
    mapping = {
        "sources": {"m.py": source},
        "tests": {"k1": {"nodeid": "t.py::a_false", "seconds": 0.1},
                  "k2": {"nodeid": "t.py::a_true", "seconds": 0.2},
                  "k3": {"nodeid": "t.py::body", "seconds": 0.3}},
        "lines": {"m.py": {"2": ["k1", "k2"], "3": ["k2"], "4": ["k1", "k2"], "6": ["k3"],
                           "7": ["k1"]}},
    }
    assert ms.select_tests(mapping, "m.py", [3]) == (["t.py::a_false", "t.py::a_true"], "lines")
    # The header of the `if`, not its body.
    assert ms.select_tests(mapping, "m.py", [5]) == (["t.py::a_false", "t.py::a_true"], "lines")
    assert ms.select_tests(mapping, "m.py", [6]) == (["t.py::body"], "lines")


def test_a_dotted_exception_in_a_tuple_is_mutated_not_a_crash():
    """Cosmic Ray 8.7 stops the whole run on ``except (csv.Error, X)``; the
    driver's patch replaces that exception by the testing exception's name
    and leaves the mutants Cosmic Ray already makes as they were."""
    pytest.importorskip("cosmic_ray")
    from cosmic_ray.mutating import mutate_code
    from cosmic_ray.plugins import get_operator

    ms._patch_exception_replacer()
    ms._patch_exception_replacer()  # idempotent
    source = ("import csv\ntry:\n    pass\nexcept (csv.Error, StopIteration):\n    pass\n"
              "try:\n    pass\nexcept csv.Error:\n    pass\n")
    made = [mutate_code(source, get_operator("core/ExceptionReplacer")(), k) for k in range(4)]
    assert "except (CosmicRayTestingException, StopIteration):" in made[0]
    assert "except (csv.Error, CosmicRayTestingException):" in made[1]
    assert "except csvCosmicRayTestingExceptionError:" in made[2]  # as Cosmic Ray makes it
    assert made[3] is None


def test_tests_that_killed_the_module_s_mutants_before_run_first():
    """The ledger's killers first, the most killing first; the rest keep
    their order (fastest first); survivors and other outcomes count for
    nothing."""
    tests = ["t.py::fast", "t.py::mid", "t.py::killer[a - b]", "t.py::slow", "t.py::big"]
    records = {
        "1": {"outcome": "killed", "first_failure": "FAILED t.py::slow - AssertionError: x"},
        "2": {"outcome": "killed", "first_failure": "FAILED t.py::big - AssertionError"},
        "3": {"outcome": "killed", "first_failure": "FAILED t.py::big"},
        "4": {"outcome": "survived", "first_failure": None},
        "5": {"outcome": "timed out", "first_failure": "FAILED t.py::mid - Timeout"},
        "6": {"outcome": "killed", "first_failure": "ERROR t.py::fast - setup"},
    }
    assert ms.killers_first(tests, records) == [
        "t.py::big", "t.py::slow", "t.py::fast", "t.py::mid", "t.py::killer[a - b]"]
    assert ms.killers_first(tests, {}) == tests
