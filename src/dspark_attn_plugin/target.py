"""Names of the vLLM code the plugin looks at and patches."""

FLASHMLA_MODULE = "vllm.models.deepseek_v4.nvidia.flashmla"
CLASS_NAME = "DeepseekV4FlashMLAAttention"
METHOD_NAME = "forward_mqa"
TARGET = f"{FLASHMLA_MODULE}.{CLASS_NAME}.{METHOD_NAME}"

# Source file of FLASHMLA_MODULE inside the vllm distribution.
FLASHMLA_PATH = FLASHMLA_MODULE.replace(".", "/") + ".py"
