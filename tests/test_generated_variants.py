"""Ground truth by execution: generated variants of the real warmup branch,
run on synthetic layers, against what the classifier, the edit, the runtime
and ``status`` say of them (``generated_variants``). A fixed seed and a few
hundred examples here; ``make fuzz`` runs thousands."""

from __future__ import annotations

import os

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
