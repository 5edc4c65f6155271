"""The mutation score's own rules (tests/mutation_score.py): which mutants
are equivalent by construction, and which tests a mutant is run against."""

from __future__ import annotations

import textwrap

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


def test_a_mutant_runs_the_tests_of_its_lines_else_of_its_function(tmp_path, monkeypatch):
    pristine = tmp_path / "pristine"
    (pristine / "dspark_attn_plugin").mkdir(parents=True)
    (pristine / "dspark_attn_plugin" / "m.py").write_text(SOURCE)
    monkeypatch.setattr(ms, "PRISTINE", pristine)
    mapping = {
        "sources": {"m.py": SOURCE},
        "tests": {"k1": {"nodeid": "t.py::slow", "seconds": 2.0},
                  "k2": {"nodeid": "t.py::fast", "seconds": 0.1},
                  "k3": {"nodeid": "u.py::other", "seconds": 0.5}},
        "lines": {"m.py": {"5": ["k1", "k2"], "6": ["k1"], "13": ["k3"]}},
    }
    assert ms.select_tests(mapping, "m.py", [5]) == (["t.py::fast", "t.py::slow"], "lines")
    # Line 4 (the def line, run at import) has no test of its own: the function's.
    assert ms.select_tests(mapping, "m.py", [4]) == (["t.py::fast", "t.py::slow"], "scope")
    assert ms.select_tests(mapping, "m.py", [12]) == (["u.py::other"], "scope")
    assert ms._test_files(mapping, "m.py") == ["u.py", "t.py"]  # the fastest file first
