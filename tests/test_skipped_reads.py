"""Code a test on the buffer skips may change an object by only reading it
(``None in it`` advances an iterator, ``d['k']`` fills a defaultdict, an
f-string, a property, ``not x`` or ``==`` run the object's own code), and
the warmup may then use that object under another name: a local alias, a
list or dict holding it, the layer's attribute, a tuple unpacked, a
walrus, a closure, a parameter of a helper function or method, or the
layer's construction. Without the buffer the read does not happen and the
warmup fails; with it the warmup runs.

Every combination below (object and read x how another name holds it x
what skips the read: ``if``, ``if``/``else``, ``while``, ``match``, a
``for`` over a constant the buffer chose, a conditional expression,
``and``, ``or``, comprehension filters) is run as Python on a stand-in
layer, once without the buffer and once with a tensor stand-in, to prove
it unsafe, and must never read ``fixed`` or ``not-affected``. Until
2026-12-07 the classifier read 350 of the first 1,140 ``fixed`` (the names a
skipped read touched were marked, but not the other names of the object).
"""

from __future__ import annotations

import pytest

from dspark_attn_plugin.warmup_shape import Verdict, classify_source

from test_layer_state_flows import fork
from test_module_as_loaded import stock  # noqa: F401  (the fixture: vLLM 0.27.1's source)

B = "self.topk_indices_buffer"

# A module class whose reads change it.
_CHANGED_BY_READS = (
    "class _Counter:\n"
    "    n = 0\n"
    "    def __format__(self, spec):\n        self.n = 1\n        return ''\n"
    "    @property\n    def p(self):\n        self.n = 1\n        return 0\n"
    "    def __bool__(self):\n        self.n = 1\n        return True\n"
    "    def __eq__(self, other):\n        self.n = 1\n        return False\n"
    "    __hash__ = object.__hash__\n\n\n"
)

# name -> (the object, the read of X (None: a for loop that breaks), the
# warmup's later use of Y, which fails unless the read happened)
OBJECTS = {
    "in-iterator": ("iter([None, 1])", "None in X", "next(Y).bit_length()"),
    "star-iterator": ("iter([None])", "[*X]", "next(Y, 5).bit_length()"),
    "call-star-iterator": ("iter([None, 2])", "(lambda *a: a)(*X)", "next(Y, 5).bit_length()"),
    "comprehension-iterator": ("iter([None])", "[z for z in X]", "next(Y, 5).bit_length()"),
    "defaultdict": ("collections.defaultdict(list)", "X['k']", "(1,)[1 - len(Y)]"),
    "format": ("_Counter()", "f'{X}'", "(1,)[1 - Y.n]"),
    "property": ("_Counter()", "X.p", "(1,)[1 - Y.n]"),
    "truth": ("_Counter()", "not X", "(1,)[1 - Y.n]"),
    "equality": ("_Counter()", "X == 1", "(1,)[1 - Y.n]"),
    "for-iterator": ("iter([None, 1])", None, "next(Y).bit_length()"),
}

# name -> (lines that bind the object (OBJ), the name the skipped code
# reads, what the warmup later uses); "@fn", "@method", "@init": the
# skipped code is in a module function or method handed the object, or in
# __init__; a line "INIT ..." is __init__'s.
HOLDERS = {
    "same-name": (["d = OBJ"], "d", "d"),
    "local-alias": (["d = OBJ", "e = d"], "d", "e"),
    "list": (["d = OBJ", "box = [d]"], "d", "box[0]"),
    "dict": (["d = OBJ", "box = {'o': d}"], "d", "box['o']"),
    "attribute-then-local": (["self._o = OBJ", "d = self._o"], "d", "self._o"),
    "local-then-attribute": (["d = OBJ", "self._o = d"], "self._o", "d"),
    "tuple-unpacked": (["d = OBJ", "(e, f) = (d, 0)"], "d", "e"),
    "walrus": (["(e := (d := OBJ))"], "d", "e"),
    "closure": (["d = OBJ", "g = lambda: d"], "d", "g()"),
    "module-function-parameter": (["d = OBJ"], "@fn", "d"),
    "method-parameter": (["d = OBJ"], "@method", "d"),
    "construction": ([], "@init", "self._o"),
    "attribute-set-in-construction": (["INIT self._o = OBJ", "d = self._o"], "self._o", "d"),
}


def _indent(lines, n=4):
    return [" " * n + line for line in lines]


def _skips(b: str, read: str | None, stmt: list[str]):
    yield "if", [f"if {b} is not None:", *_indent(stmt)]
    yield "if-else", [f"if {b} is None:", "    pass", "else:", *_indent(stmt)]
    yield "while", [f"while {b} is not None:", *_indent(stmt), "    break"]
    yield "match", [f"match {b}:", "    case None:", "        pass", "    case _:", *_indent(stmt, 8)]
    yield "for-over-a-chosen-constant", [f"for t in (() if {b} is None else (1,)):", *_indent(stmt)]
    if read is not None:
        yield "conditional-expression", [f"x = 0 if {b} is None else ({read})"]
        yield "and", [f"x = {b} is not None and ({read})"]
        yield "or", [f"x = {b} is None or ({read})"]
        yield "comprehension-filter", [f"x = [({read}) for t in ({b},) if t is not None]"]
        yield "comprehension-second-filter", [f"x = [({read}) for t in ({b},) if t is not None if True]"]


def _forks(holder: str):
    setup, name, later_name = HOLDERS[holder]
    for obj_name, (obj, read, use) in OBJECTS.items():
        top = _CHANGED_BY_READS if "_Counter" in obj else ""
        inner = name.startswith("@")
        x = "it" if inner else name
        r = None if read is None else read.replace("X", x)
        stmt = [f"for _ in {x}:", "    break"] if read is None else [r]
        lines_setup = [line.replace("OBJ", obj) for line in setup if not line.startswith("INIT ")]
        init = tuple(line[5:].replace("OBJ", obj) for line in setup if line.startswith("INIT "))
        later = [use.replace("Y", later_name)]
        for skip, lines in _skips("b" if inner else B, r, stmt):
            kw = {"top": top, "init": init}
            if name == "@fn":
                kw["top"] = top + "def _h(it, b):\n" + "".join(
                    line + "\n" for line in _indent(lines)) + "    return None\n\n\n"
                kw["warmup"] = (*lines_setup, f"_h(d, {B})", *later)
            elif name == "@method":
                kw["body"] = "    def _h(self, it, b):\n" + "".join(
                    line + "\n" for line in _indent(lines, 8)) + "        return None\n\n"
                kw["warmup"] = (*lines_setup, f"self._h(d, {B})", *later)
            elif name == "@init":
                kw["init"] = (f"self._o = {obj}", "it = self._o", f"b = {B}", *lines)
                kw["warmup"] = tuple(later)
            else:
                kw["warmup"] = (*lines_setup, *lines, *later)
            yield f"{obj_name}/{skip}", kw


class _Tensor:
    """The buffer's stand-in: truthy, with a shape."""
    shape = (4, 8)


def _warmup_runs(kw: dict, buffer) -> bool:
    """Run the fork's pieces as Python on a stand-in layer: its
    construction's lines, then the warmup's."""
    text = ["import collections", kw.get("top", ""), "class Layer:",
            kw.get("body", "") or "    pass",
            "    def __init__(self, buffer):", "        self.topk_indices_buffer = buffer",
            *_indent(kw.get("init", ()), 8),
            "    def warmup(self):", *_indent(kw["warmup"], 8), "        return True"]
    namespace: dict = {}
    exec(compile("\n".join(text), "<stand-in>", "exec"), namespace)
    try:
        return namespace["Layer"](buffer).warmup()
    except Exception:
        return False


@pytest.mark.parametrize("holder", sorted(HOLDERS))
def test_a_read_the_buffer_skips_is_never_safe(stock, holder):
    read_safe = []
    for case, kw in _forks(holder):
        assert not _warmup_runs(kw, None), f"{case}: runs without the buffer"
        assert _warmup_runs(kw, _Tensor()), f"{case}: fails with the buffer"
        c = classify_source(fork(stock, **kw))
        if c.verdict in (Verdict.FIXED, Verdict.NOT_AFFECTED):
            read_safe.append(case)
    assert not read_safe, read_safe
