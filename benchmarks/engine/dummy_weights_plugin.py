"""Test-only vLLM general plugin of the engine harness: never shipped.

With ``--load-format dummy``, vLLM 0.26.0 (and 0.27.x) never calls
``DeepseekV4Model.finalize_mhc_broadcast_weights()``: only the model's own
``load_weights`` does, and the dummy loader skips it, so the first decoder
layer's forward then asserts ``hc_attn_fn_broadcast`` (fixed upstream by
vllm-project/vllm#51368). The model is built in the engine-core process, so
the harness makes that call there, through this plugin: after the dummy
loader has filled a model, every module that has the method finalises.

``harness.install_plugin_dist`` copies this file into a folder with an entry
point in ``vllm.general_plugins``; the harness puts that folder on the
server's ``PYTHONPATH``.
"""

_MARK = "_dspark_e2e_finalizes_mhc"


def register() -> None:
    from vllm.model_executor.model_loader import dummy_loader

    loader = dummy_loader.DummyModelLoader
    stock = loader.load_weights
    if getattr(stock, _MARK, False):
        return

    def load_weights(self, model, model_config):
        stock(self, model, model_config)
        for module in model.modules():
            finalize = getattr(module, "finalize_mhc_broadcast_weights", None)
            if callable(finalize):
                finalize()

    setattr(load_weights, _MARK, True)
    loader.load_weights = load_weights
