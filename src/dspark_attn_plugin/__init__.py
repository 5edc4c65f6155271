"""dspark-attn-plugin: vLLM #50693 for vLLM builds that lack it.

vLLM loads ``register`` through the ``vllm.general_plugins`` entry point.
Importing this package imports neither torch nor vLLM.
"""

from dspark_attn_plugin.instrumentation import instrument, register, uninstrument

__version__ = "0.3.0"

__all__ = ["__version__", "instrument", "register", "uninstrument"]
