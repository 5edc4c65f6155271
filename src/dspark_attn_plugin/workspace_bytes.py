"""How many bytes vLLM's ``WorkspaceManager`` holds (verify, tests, benchmarks).

Imports torch and vLLM: never imported by ``register()``.
"""

from __future__ import annotations

from vllm.v1.worker import workspace as vllm_workspace


def held_bytes() -> int:
    """Bytes vLLM's WorkspaceManager holds now, over its ubatch slots (0
    without a manager). Reads the manager's own bookkeeping."""
    if not vllm_workspace.is_workspace_manager_initialized():
        return 0
    manager = vllm_workspace.current_workspace_manager()
    return sum(manager._workspace_size_bytes(ws) for ws in manager._current_workspaces)
