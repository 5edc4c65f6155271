"""Ground truth by execution: generated variants of the real warmup branch,
run on synthetic layers, against what the classifier, the edit, the runtime
and ``status`` say of them (``generated_variants``). A fixed seed and a few
hundred examples here; ``make fuzz`` runs thousands."""

from __future__ import annotations

import os

import pytest

from hypothesis import HealthCheck, given, settings

from dspark_attn_plugin import synthetic

import generated_variants as gen

EXAMPLES = int(os.environ.get("DSPARK_FUZZ_EXAMPLES", "300"))


@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(variant=gen.generated())
def test_generated_variant_is_read_right_or_unknown(variant, flashmla, cpu_workspace, tmp_path):
    source = flashmla.__loader__.get_source(flashmla.__name__)
    obs = gen.observe(variant, source, tmp_path, synthetic)
    assert gen.problems(obs) == [], variant.source(source)


@pytest.mark.parametrize("base", ["0.27.1", "0.28.0-shape"])
@pytest.mark.parametrize("module", sorted(gen.MODULE_SHAPES))
def test_every_module_shape_around_each_base_branch_is_read_right_or_unknown(
        module, base, flashmla, cpu_workspace, tmp_path):
    source = flashmla.__loader__.get_source(flashmla.__name__)
    variant = gen.Variant(base, "prefix", (), False, (), module)
    obs = gen.observe(variant, source, tmp_path, synthetic)
    assert gen.problems(obs) == [], variant.source(source)


def test_get_forward_context_from_a_fork_module_around_the_fixed_branch_crashes_and_reads_unknown(
        flashmla, cpu_workspace, tmp_path):
    source = flashmla.__loader__.get_source(flashmla.__name__)
    variant = gen.Variant("0.28.0-shape", "prefix", (), False, (), "foreign-forward-context")
    obs = gen.observe(variant, source, tmp_path, synthetic)
    assert obs.lacks_buffer(obs.runs) == ["swa0", "swa1"]
    assert (obs.verdict, obs.status_verdict, obs.runtime_patched) == ("unknown", "unknown", False)


@pytest.mark.parametrize("module", ["torch-fill-by-the-buffer",
                                    "from-imported-object-changed-by-the-buffer",
                                    "default-made-by-a-call-keeps-the-buffer",
                                    "from-imported-fill_-by-the-buffer",
                                    "from-imported-narrow-set-by-the-buffer",
                                    "property-read-by-hasattr",
                                    "next-with-a-default-over-a-module-iterator",
                                    "generator-stopped-by-any",
                                    "zip-advances-by-the-buffer",
                                    "lazy-map-advanced-by-the-buffer",
                                    "loop-left-by-the-buffer",
                                    "print-to-a-module-writer",
                                    "hasattr-runs-a-chosen-property"])
def test_state_the_buffer_changes_in_a_method_the_warmup_calls_crashes_and_reads_unknown(
        module, flashmla, cpu_workspace, tmp_path):
    """Around upstream's fixed branch, each of these shapes fails the
    SWA-only layers' warmup without the buffer, and none is read safe."""
    source = flashmla.__loader__.get_source(flashmla.__name__)
    variant = gen.Variant("0.28.0-shape", "prefix", (), False, (), module)
    obs = gen.observe(variant, source, tmp_path, synthetic)
    assert obs.lacks_buffer(obs.runs) == ["swa0", "swa1"]
    assert (obs.verdict, obs.status_verdict, obs.runtime_patched) == ("unknown", "unknown", False)


CONSTRUCTION_UNSAFE = ["init-annotation-alone-then-a-chosen-store",
                       "init-store-deleted-then-a-chosen-store",
                       "init-self-rebound-around-a-store",
                       "init-index-set-by-the-buffer",
                       "init-key-set-by-the-buffer",
                       "init-helper-by-getattr-advances-an-iterator",
                       "init-numpy-write-by-the-buffer",
                       "init-namespace-list-filled-by-the-buffer",
                       "closure-fills-by-the-buffer",
                       "walrus-fills-by-the-buffer",
                       "key-kept-by-the-buffer",
                       "iterator-advanced-in-a-skipped-operand",
                       "defaultdict-read-in-a-skipped-arm",
                       "while-on-the-buffer-fills-through-another-name",
                       "iterator-read-through-a-second-name-skipped",
                       "helper-returns-early-by-the-buffer",
                       "chained-comparand-skipped",
                       "try-else-skipped",
                       "try-body-rest-skipped",
                       "attribute-of-an-expression-skipped",
                       "unrolled-for-else-skipped-by-a-caught-failure",
                       "for-else-skipped-by-a-caught-failure",
                       "helper-for-else-skipped-by-a-return",
                       "try-else-binds-a-name-the-buffer-skips",
                       "handler-chosen-by-the-buffer-binds-a-name",
                       "handler-chosen-by-the-buffer-returns",
                       "return-cut-short-by-the-buffer-leaves-the-rest",
                       "finally-reads-what-a-chosen-handler-bound",
                       "raise-cut-short-by-the-buffer-reaches-an-outer-handler",
                       "return-after-a-failure-in-a-try-body",
                       "inner-try-of-another-class-leaves-the-outer-body-rest",
                       "inner-try-of-another-class-leaves-the-outer-else",
                       "inner-try-of-another-class-under-a-finally-that-returns",
                       "helper-loop-continued-by-the-buffer-returns-a-name",
                       "helper-loop-left-by-a-handler-returns-a-name",
                       "loop-header-fails-its-body-skipped",
                       "match-subject-fails-its-case-skipped",
                       "with-item-fails-its-body-skipped-in-a-module-function",
                       "outer-handler-leaves-after-an-inner-try-of-another-class",
                       "iterator-read-in-a-chosen-arm",
                       "helper-reads-the-callers-iterator-in-a-chosen-arm",
                       "helper-loops-over-the-callers-iterator-in-a-chosen-arm",
                       "helper-while-on-the-buffer-reads-the-callers-iterator",
                       "chosen-operand-reads-the-callers-iterator",
                       "chosen-arm-reads-the-layers-iterator",
                       "closure-called-after-an-early-return-by-the-buffer",
                       "lambda-called-after-an-early-return-by-the-buffer",
                       "chosen-arm-reads-the-layers-iterator-by-getattr",
                       "chosen-arm-reads-a-forward-context-container",
                       "skipped-arm-reads-a-forward-context-container",
                       "nested-def-annotation-reads-the-layers-iterator-in-a-chosen-arm"]


@pytest.mark.parametrize("module", CONSTRUCTION_UNSAFE)
@pytest.mark.parametrize("base", ["0.28.0-shape", "0.27.1"])
def test_what_the_layers_construction_or_a_skipped_arm_leaves_crashes_and_reads_unknown(
        module, base, flashmla, cpu_workspace, tmp_path):
    """The end of __init__ (or a warmup arm the missing buffer skips)
    leaves state the warmup reads: the SWA-only warmup fails without the
    buffer, and neither the classifier nor status calls it safe; the
    runtime does not patch what it cannot judge."""
    source = flashmla.__loader__.get_source(flashmla.__name__)
    variant = gen.Variant(base, "prefix", (), False, (), module)
    obs = gen.observe(variant, source, tmp_path, synthetic)
    assert obs.lacks_buffer(obs.runs) == ["swa0", "swa1"]
    assert (obs.verdict, obs.status_verdict, obs.runtime_patched) == ("unknown", "unknown", False)


MODULE_DECIDES_UNSAFE = ["class-body-shadows-property",
                         "class-body-shadows-cached-property",
                         "frame-through-a-name-imported-from-typing",
                         "locals-through-torch-builtins",
                         "frame-through-dataclasses-inspect-in-a-nested-function",
                         "frame-through-logging-currentframe",
                         "module-builtins-proxy-class",
                         "exec-through-torch-builtins-at-import",
                         "annotation-string-run-by-get-type-hints",
                         "format-string-follows-a-frame-into-the-layer",
                         "sys-under-a-private-name-of-collections",
                         "builtins-module-kept-by-enum-evaluates-in-the-caller",
                         "import-module-re-exported-by-vllm",
                         "attrgetter-re-exported-by-torch",
                         "forward-ref-evaluates-a-string",
                         "exec-through-enum-at-import-rebinds-len",
                         "eval-resolved-by-vllms-qualname-importer",
                         "eval-resolved-by-logging-config",
                         "logging-config-imported-in-the-warmup",
                         "format-string-built-at-run-time",
                         "forward-ref-reached-through-get-args",
                         "exec-through-a-name-an-import-time-call-made",
                         "eval-imported-by-torchs-dotted-name-importer",
                         "caller-frame-lookup-of-torchs-jit",
                         "a-module-made-by-vllms-lazy-loader",
                         "format-reached-by-getattr-on-a-built-string"]


@pytest.mark.parametrize("module", MODULE_DECIDES_UNSAFE)
def test_what_the_module_decides_around_the_method_crashes_and_reads_unknown(
        module, flashmla, cpu_workspace, tmp_path):
    """A class body's own ``property``, the standard library reached
    through an allowed package (a frame's locals hold the layer), a
    module-level ``__builtins__``, an annotation string ``typing`` runs,
    ``eval``, frames and ``attrgetter`` under names an allowed package
    gives them, importers that take a string, format strings built at
    run time: the SWA-only warmup fails without the buffer, and neither the
    classifier nor status calls it safe (each read fixed until
    2026-12-07); the runtime does not patch what it cannot judge."""
    source = flashmla.__loader__.get_source(flashmla.__name__)
    variant = gen.Variant("0.28.0-shape", "prefix", (), False, (), module)
    obs = gen.observe(variant, source, tmp_path, synthetic)
    assert obs.lacks_buffer(obs.runs) == ["swa0", "swa1"]
    assert (obs.verdict, obs.status_verdict, obs.runtime_patched) == ("unknown", "unknown", False)


@pytest.mark.parametrize("module", sorted(m for m in gen.MODULE_SHAPES
                                          if m.startswith("init-") and m.endswith("-plain")))
def test_plain_construction_beside_the_buffer_runs_and_the_fix_is_still_read(
        module, flashmla, cpu_workspace, tmp_path):
    source = flashmla.__loader__.get_source(flashmla.__name__)
    variant = gen.Variant("0.28.0-shape", "prefix", (), False, (), module)
    obs = gen.observe(variant, source, tmp_path, synthetic)
    assert obs.lacks_buffer(obs.runs) == [] and obs.runs["swa0"] is None
    assert (obs.verdict, obs.status_verdict) == ("fixed", "fixed")
