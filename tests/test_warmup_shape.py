"""The classifier on code shapes no vLLM release has (releases: test_compat_matrix)."""

from __future__ import annotations

import textwrap

import pytest

from dspark_attn_plugin.warmup_shape import Verdict, classify_source


def classify(body: str, helpers: str = "") -> Verdict:
    """Classify a class whose warmup branch holds ``body``."""
    source = (
        "from vllm.models.deepseek_v4.attention import DeepseekV4Attention\n\n"
        "class DeepseekV4FlashMLAAttention(DeepseekV4Attention):\n"
        + textwrap.indent(textwrap.dedent(helpers), " " * 4)
        + "    def forward_mqa(self, q, kv, positions, output):\n"
        + "        attn_metadata = get_forward_context().attn_metadata\n"
        + "        if attn_metadata is None:\n"
        + textwrap.indent(textwrap.dedent(body), " " * 12)
        + "            output.zero_()\n"
        + "            return\n"
        + "        self.steady(q, output)\n"
    )
    return classify_source(source).verdict


# Shaped like vLLM main today: the warmup branch delegates to classmethods
# that bound top-k at 0 for SWA-only layers before looking at the buffer.
MAIN_LIKE_HELPERS = """
    @classmethod
    def _topk_bound(cls, layer):
        if layer.compress_ratio <= 1:
            return 0
        if layer.topk_indices_buffer is not None and layer.topk_indices_buffer.ndim > 0:
            return int(layer.topk_indices_buffer.shape[-1])
        return 2048

    @classmethod
    def _specs(cls, layer):
        return ((layer.PREFILL_CHUNK_SIZE, cls._topk_bound(layer)),)

    @classmethod
    def _reserve(cls, layer):
        try:
            manager = current_workspace_manager()
        except AssertionError:
            return
        manager.get_simultaneous(*cls._specs(layer))
"""


def test_warmup_delegating_to_guarded_helpers_is_fixed():
    assert classify("self._reserve(self)\n", MAIN_LIKE_HELPERS) is Verdict.FIXED


def test_helper_without_the_swa_guard_is_not_safe():
    helpers = MAIN_LIKE_HELPERS.replace(
        "        if layer.compress_ratio <= 1:\n            return 0\n", ""
    ).replace("layer.topk_indices_buffer is not None and ", "")
    # After the try whose handler returns, the dereference is reached maybe.
    assert classify("self._reserve(self)\n", helpers) is Verdict.UNKNOWN


@pytest.mark.parametrize(
    "body, verdict",
    [
        # Unconditional dereference, no assertion: SWA-only layers crash too.
        ("top_k = self.topk_indices_buffer.shape[-1]\n", Verdict.AFFECTED),
        # Assertion only where compress_ratio says sparse.
        (
            "if self.compress_ratio == 4:\n"
            "    assert self.topk_indices_buffer is not None\n",
            Verdict.FIXED,
        ),
        # Early return for SWA-only layers before the sparse code.
        (
            "if self.compress_ratio <= 1:\n"
            "    return\n"
            "assert self.topk_indices_buffer is not None\n",
            Verdict.FIXED,
        ),
        # A None check guards the dereference.
        (
            "top_k = self.topk_indices_buffer.shape[-1] "
            "if self.topk_indices_buffer is not None else 0\n",
            Verdict.FIXED,
        ),
        # Negated sparse test assigned to a name, then used.
        (
            "sparse = self.compress_ratio > 1\n"
            "if not sparse:\n"
            "    top_k = 0\n"
            "else:\n"
            "    top_k = self.topk_indices_buffer.shape[-1]\n",
            Verdict.FIXED,
        ),
        # Assertion inside a loop body still counts (reached maybe).
        (
            "for _ in range(1):\n"
            "    assert self.topk_indices_buffer is not None\n",
            Verdict.UNKNOWN,
        ),
        ("reserve(self.window_size)\n", Verdict.NOT_AFFECTED),
        # The layer handed to a function outside the class: cannot be shown safe.
        ("reserve(self)\n", Verdict.UNKNOWN),
    ],
    ids=[
        "bare-dereference",
        "assert-under-ratio-4",
        "early-return",
        "none-guard",
        "named-sparse-test",
        "assert-in-loop",
        "no-buffer-use",
        "layer-escapes",
    ],
)
def test_warmup_shapes(body, verdict):
    assert classify(body) is verdict


def test_no_warmup_branch_is_unknown():
    source = (
        "class DeepseekV4FlashMLAAttention:\n"
        "    def forward_mqa(self, q, kv, positions, output):\n"
        "        self.run(q)\n"
    )
    assert classify_source(source).verdict is Verdict.UNKNOWN


def test_no_forward_mqa_is_unknown():
    source = "class DeepseekV4FlashMLAAttention:\n    pass\n"
    assert classify_source(source).verdict is Verdict.UNKNOWN


def test_no_class_is_absent():
    assert classify_source("class Other:\n    pass\n").verdict is Verdict.ABSENT


@pytest.mark.parametrize("name", ["Attention", "DeepseekV4FlashMLAAttentionBase"])
def test_other_classes_are_not_the_layer_class_whatever_their_names_sort_as(name):
    assert classify_source(f"class {name}:\n    pass\n").verdict is Verdict.ABSENT


def test_unparsable_source_is_unknown():
    assert classify_source("class (:\n").verdict is Verdict.UNKNOWN


def test_method_line_includes_decorators():
    source = (
        "class DeepseekV4FlashMLAAttention:\n"
        "    @some_decorator\n"
        "    def forward_mqa(self, q, kv, positions, output):\n"
        "        if attn_metadata is None:\n"
        "            return\n"
    )
    assert classify_source(source).method_line == 2


@pytest.mark.parametrize(
    "body, helpers, verdict",
    [
        # An early return when the buffer is missing guards what follows.
        (
            "if self.topk_indices_buffer is None:\n"
            "    return\n"
            "top_k = self.topk_indices_buffer.shape[-1]\n",
            "",
            Verdict.FIXED,
        ),
        # The ratio test written the other way round.
        (
            "if 1 >= self.compress_ratio:\n"
            "    top_k = 0\n"
            "else:\n"
            "    top_k = self.topk_indices_buffer.shape[-1]\n",
            "",
            Verdict.FIXED,
        ),
        # compress_ratio == 1 does not cover an SWA-only ratio of 0: both arms.
        (
            "if self.compress_ratio == 1:\n"
            "    top_k = 0\n"
            "else:\n"
            "    top_k = self.topk_indices_buffer.shape[-1]\n",
            "",
            Verdict.AFFECTED,
        ),
        # A name re-bound on the way no longer carries the ratio test.
        (
            "swa_only = self.compress_ratio <= 1\n"
            "swa_only = self.flag\n"
            "top_k = 0 if swa_only else self.topk_indices_buffer.shape[-1]\n",
            "",
            Verdict.UNKNOWN,
        ),
        # A property of the class runs code: followed.
        (
            "top_k = self.top_k_width\n",
            "@property\ndef top_k_width(self):\n    return self.topk_indices_buffer.shape[-1]\n",
            Verdict.AFFECTED,
        ),
        # A method the class does not define, or the base class: unknown.
        ("self.reserve_inherited()\n", "", Verdict.UNKNOWN),
        ("super().forward_mqa(q, kv, positions, output)\n", "", Verdict.UNKNOWN),
        # The four shapes a lax classifier called fixed: they crash for sure
        # (followed through the alias, the truth test and getattr), or hand
        # the buffer to code the walk cannot see.
        (
            "buf = self.topk_indices_buffer\nassert buf is not None\n",
            "",
            Verdict.AFFECTED,
        ),
        ("assert self.topk_indices_buffer\n", "", Verdict.AFFECTED),
        ("require(self.topk_indices_buffer)\n", "", Verdict.UNKNOWN),
        ("assert getattr(self, 'topk_indices_buffer') is not None\n", "", Verdict.AFFECTED),
    ],
    ids=[
        "none-early-return", "ratio-reversed", "ratio-eq-1", "rebound-name",
        "property", "undefined-method", "super", "alias", "truth-test",
        "helper", "getattr",
    ],
)
def test_fail_closed_shapes(body, helpers, verdict):
    assert classify(body, helpers) is verdict
