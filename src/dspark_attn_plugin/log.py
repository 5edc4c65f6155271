"""The plugin's logger.

It sits under vLLM's ``vllm`` logger, so its lines come out in vLLM's own
format and follow ``VLLM_LOGGING_LEVEL`` wherever vLLM has set up logging.
"""

import logging

LOGGER_NAME = "vllm.dspark_attn_plugin"

logger = logging.getLogger(LOGGER_NAME)
