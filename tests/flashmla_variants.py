"""Variants of the installed vLLM's flashmla module, derived from its source.

Each function takes the real vLLM 0.27.1 ``flashmla.py`` text and returns it
with one change of the kind a release or a fork makes, so that the tests
exercise the plugin on code shaped like the real thing rather than on text
written by hand. ``load`` executes a variant as a module (from a file, so it
has source and a loader, as vLLM's own does).
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

from dspark_attn_plugin.target import FLASHMLA_MODULE

# The #50298 assertion in the warmup branch, with the line after it: the
# same assertion text also stands in _forward_prefill.
WARMUP_ASSERT = (
    "            assert self.topk_indices_buffer is not None\n"
    "            top_k = 0 if swa_only else self.topk_indices_buffer.shape[-1]\n"
)
WARMUP_M = "            M = N + self.window_size + self.max_num_batched_tokens\n"
SIGNATURE_END = (
    "        positions: torch.Tensor,\n        output: torch.Tensor,\n    ) -> None:\n"
)


def _replace_once(source: str, old: str, new: str) -> str:
    assert source.count(old) == 1, f"expected one {old!r} in vLLM's flashmla.py"
    return source.replace(old, new)


# --- shapes a release has ------------------------------------------------------


def upstream_fix(source: str) -> str:
    """vLLM #50693's change (0.28.0): the assertion only for sparse layers."""
    return _replace_once(
        source,
        WARMUP_ASSERT,
        "            if swa_only:\n"
        "                top_k = 0\n"
        "            else:\n"
        "                assert self.topk_indices_buffer is not None\n"
        "                top_k = self.topk_indices_buffer.shape[-1]\n",
    )


def without_buffer_use(source: str) -> str:
    """The assertion removed and top-k not read from the buffer (no use of
    it in the warmup at all, as in 0.26.0)."""
    return _replace_once(source, WARMUP_ASSERT, "            top_k = 0\n")


# --- what forks do around the affected shape ------------------------------------


def extra_parameter(source: str) -> str:
    """An added optional keyword parameter."""
    return _replace_once(
        source,
        SIGNATURE_END,
        "        positions: torch.Tensor,\n"
        "        output: torch.Tensor,\n"
        "        layer_name: str | None = None,\n"
        "    ) -> None:\n",
    )


def renamed_parameter(source: str) -> str:
    """``positions`` renamed ``pos`` and one annotation changed."""
    source = _replace_once(source, "        positions: torch.Tensor,\n        output", "        pos: \"torch.Tensor\",\n        output")
    return _replace_once(
        source,
        "                positions=positions[num_decode_tokens:],\n",
        "                positions=pos[num_decode_tokens:],\n",
    )


def larger_gather(source: str) -> str:
    """A fork that sizes its warmup's gather buffer differently."""
    return _replace_once(
        source,
        WARMUP_M,
        "            M = N + 2 * self.window_size + self.max_num_batched_tokens\n",
    )


_STEADY = "        assert isinstance(attn_metadata, dict)\n"


def steady_torch_check(source: str) -> str:
    """The steady path checks ``q`` with ``torch._check`` (a call on a module
    attribute, a lambda for the message)."""
    return _replace_once(
        source, _STEADY, _STEADY + "        torch._check(q.dim() == 3, lambda: 'q must be 3-d')\n"
    )


def steady_super(source: str) -> str:
    """The steady path can call the base class through ``super()``."""
    return _replace_once(
        source,
        _STEADY,
        _STEADY + "        if q.dim() < 0:\n            super().forward_mqa(q, kv, positions, output)\n",
    )


def steady_mangled(source: str) -> str:
    """The steady path sets a name-mangled attribute."""
    return _replace_once(
        source, _STEADY, _STEADY + "        if q.dim() < 0:\n            self.__scratch = None\n"
    )


def assert_then_unseen_check(source: str) -> str:
    """After the known assertion, the buffer's None test is handed to
    ``torch._assert``: with the assertion made conditional the warmup still
    cannot be shown to start (the edited method reads ``unknown``)."""
    return _replace_once(
        source,
        WARMUP_ASSERT,
        WARMUP_ASSERT.replace(
            "            top_k",
            "            torch._assert(self.topk_indices_buffer is not None, 'top-k')\n"
            "            top_k",
        ),
    )


def alias_assertion(source: str) -> str:
    """The warmup asserts the buffer through another name for the layer: it
    crashes as stock does, but the assertion is not the upstream shape the
    edit replaces."""
    return _replace_once(source, WARMUP_ASSERT, WARMUP_ASSERT.replace(
        "            assert self.topk", "            layer = self\n            assert layer.topk", 1))


def alias_assertion_after_self(source: str) -> str:
    """As ``alias_assertion``, the other name sorting after ``self``
    (``this``): whether the edit takes it must not hang on the spelling."""
    return _replace_once(source, WARMUP_ASSERT, WARMUP_ASSERT.replace(
        "            assert self.topk", "            this = self\n            assert this.topk", 1))


def nested_assertion_first(source: str) -> str:
    """An assertion of the buffer nested in an ``if`` the SWA-only layer
    takes, before the known one: the crash is the nested line, which is not
    the statement the edit replaces."""
    return _replace_once(source, WARMUP_ASSERT,
                         "            if swa_only:\n"
                         "                assert self.topk_indices_buffer is not None\n"
                         + WARMUP_ASSERT)


def buffer_read_first(source: str) -> str:
    """The buffer's ``.shape`` read before the known assertion: the crash is
    that read (an AttributeError on None), not the assertion."""
    return _replace_once(source, WARMUP_ASSERT,
                         "            _rows = self.topk_indices_buffer.shape[0]\n" + WARMUP_ASSERT)


def annotated_inner_helper(source: str) -> str:
    """``forward_mqa`` defines a small helper with annotations: the method's
    code evaluates them when it defines the helper (under future
    annotations, they are string constants of the method)."""
    return _replace_once(
        source, SIGNATURE_END,
        SIGNATURE_END + "        def _width(t: torch.Tensor) -> int:\n"
                        "            return t.shape[-1]\n\n"
                        "        assert _width(q) == _width(output)\n")


def future_annotations_inner_helper(source: str) -> str:
    """Both: the helper's annotations are strings in the method's code."""
    return future_annotations(annotated_inner_helper(source))


def far_down(source: str) -> str:
    """A longer module: the warmup's assertion past line 256 (line numbers
    there are no longer Python's cached small ints)."""
    return "# a fork's notes\n" * 300 + source


def code_after_the_method(source: str) -> str:
    """A fork that adds a method after ``forward_mqa`` and a module function
    after the class, named to sort after both."""
    head, sep, tail = source.partition("    def forward_mqa(")
    assert sep, "expected forward_mqa in vLLM's flashmla.py"
    after = tail.index("\n    def ") + 1
    tail = (tail[:after] + "    def warm_extra(self) -> None:\n        return None\n\n"
            + tail[after:])
    return head + sep + tail + "\n\ndef zz_after_the_class() -> None:\n    return None\n"


def double_assertion(source: str) -> str:
    """The warmup asserts the buffer twice: with the known assertion made
    conditional, the second still stops an SWA-only layer."""
    return _replace_once(source, WARMUP_ASSERT,
                         "            assert self.topk_indices_buffer is not None\n" + WARMUP_ASSERT)


def reversed_assertion(source: str) -> str:
    """The warmup's assertion written the other way round:
    ``assert None is not self.topk_indices_buffer``."""
    return _replace_once(source, WARMUP_ASSERT, WARMUP_ASSERT.replace(
        "assert self.topk_indices_buffer is not None",
        "assert None is not self.topk_indices_buffer", 1))


def relative_import(source: str) -> str:
    """A fork's module that imports a sibling relatively (``from . import``:
    an ``ImportFrom`` without a module name)."""
    return _replace_once(source, "from typing import TYPE_CHECKING, cast\n",
                         "from typing import TYPE_CHECKING, cast\n\nfrom . import ops as _nvidia_ops\n")


def future_annotations(source: str) -> str:
    """A fork's module under ``from __future__ import annotations``: the
    method's annotations are strings."""
    return "from __future__ import annotations\n" + source


def validator_method(source: str) -> str:
    """The assertion replaced by a method of the class that raises when the
    buffer is missing."""
    source = _replace_once(
        source,
        WARMUP_ASSERT,
        "            self._validate_topk()\n"
        "            top_k = 0 if swa_only else self.topk_indices_buffer.shape[-1]\n",
    )
    return _replace_once(
        source,
        "    def forward_mqa(\n",
        "    def _validate_topk(self) -> None:\n"
        "        if self.topk_indices_buffer is None:\n"
        "            raise ValueError('no top-k buffer')\n\n"
        "    def forward_mqa(\n",
    )


def assert_in_helper_method(source: str) -> str:
    """The assertion moved into a method of the class: affected, but not the
    statement upstream's edit applies to."""
    source = _replace_once(
        source,
        WARMUP_ASSERT,
        "            self._require_topk()\n"
        "            top_k = 0 if swa_only else self.topk_indices_buffer.shape[-1]\n",
    )
    return _replace_once(
        source,
        "    def forward_mqa(\n",
        "    def _require_topk(self) -> None:\n"
        "        assert self.topk_indices_buffer is not None\n\n"
        "    def forward_mqa(\n",
    )


# --- shapes that crash but that a lax classifier would call fixed ---------------

FAIL_OPEN = {
    "alias-then-assert": (
        "            buf = self.topk_indices_buffer\n"
        "            assert buf is not None\n"
        "            top_k = 0 if swa_only else self.topk_indices_buffer.shape[-1]\n"
    ),
    "truth-test": (
        "            assert self.topk_indices_buffer\n"
        "            top_k = 0 if swa_only else self.topk_indices_buffer.shape[-1]\n"
    ),
    "module-helper": (
        "            _require(self.topk_indices_buffer)\n"
        "            top_k = 0 if swa_only else self.topk_indices_buffer.shape[-1]\n"
    ),
    "getattr": (
        '            assert getattr(self, "topk_indices_buffer") is not None\n'
        "            top_k = 0 if swa_only else self.topk_indices_buffer.shape[-1]\n"
    ),
}

_MODULE_HELPER = "\n\ndef _require(buffer):\n    assert buffer is not None\n"


def fail_open(source: str, name: str) -> str:
    source = _replace_once(source, WARMUP_ASSERT, FAIL_OPEN[name])
    return source + _MODULE_HELPER if name == "module-helper" else source


# --- loading ---------------------------------------------------------------------


def load(source: str, folder: Path, install: bool = False) -> types.ModuleType:
    """Execute ``source`` as a module from ``folder/flashmla.py``; with
    ``install``, it takes vLLM's flashmla module's place in ``sys.modules``
    (forked tests only)."""
    path = folder / "flashmla.py"
    path.write_text(source)
    name = FLASHMLA_MODULE if install else "flashmla_variant"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    if install:
        sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
