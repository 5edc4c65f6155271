"""``dspark-attn-plugin verify``: the proof on this machine's vLLM.

Builds a synthetic SWA-only ``DeepseekV4FlashMLAAttention`` without a sparse
top-k buffer (no weights, no GPU needed), runs vLLM's own warmup on it, then
the warmup with the plugin's fix, and reports the workspace each reserves.
Where an accelerator is available the reservation is real, through vLLM's
``WorkspaceManager`` on that device; on a CPU-only machine no workspace
manager can allocate, so the figure is what the fix asks vLLM for.

Exit status: 0 the warmup passes with the plugin; 1 it still fails with the
plugin; 2 the proof could not run (no DeepSeek-V4 FlashMLA layer in this vLLM,
or vLLM does not import). The report goes to standard output, errors and the
FAIL line to standard error.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Callable

from dspark_attn_plugin.target import FLASHMLA_MODULE

EXIT_PASS, EXIT_FAIL, EXIT_ERROR = 0, 1, 2

EXIT_CODES_HELP = (
    "Exit status: 0 the warmup passes with the plugin; 1 it still fails with the "
    "plugin; 2 the proof could not run (no DeepSeek-V4 FlashMLA layer in this "
    "vLLM, or vLLM does not import). Errors go to standard error."
)

NO_GPU_NOTE = (
    "No GPU here: vLLM's 'Failed to import from vllm._C' and 'Triton is installed "
    "but 0 active driver(s) found' messages below are expected; the proof runs "
    "without them."
)


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _describe_failure(exc: BaseException) -> str:
    """One line for an exception raised by a warmup, naming its place."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else "?"
    line = frames[-1].line if frames else ""
    if isinstance(exc, AssertionError) and "topk_indices_buffer" in (line or ""):
        return f"AssertionError at {where}: `{line}` (vLLM #50615)"
    return f"{type(exc).__name__} at {where}: {exc}"


def _no_manager_error(exc: BaseException) -> bool:
    return isinstance(exc, AssertionError) and "WorkspaceManager not initialized" in str(exc)


class _Workspace:
    """vLLM's real WorkspaceManager on the accelerator, or none on a CPU."""

    def __init__(self) -> None:
        import torch
        from vllm.v1.worker import workspace

        self._ws = workspace
        self.device = (
            torch.accelerator.current_accelerator()
            if torch.accelerator.is_available()
            else None
        )

    def fresh(self) -> None:
        self._ws.reset_workspace_manager()
        if self.device is not None:
            self._ws.init_workspace_manager(self.device)

    def reserved_bytes(self) -> int | None:
        from dspark_attn_plugin.warmup_workspace import held_bytes

        return None if self.device is None else held_bytes()


def run(
    emit: Callable[[str], None] = print, error: Callable[[str], None] = _to_stderr
) -> int:
    """Run the proof, writing the report through ``emit`` and errors through
    ``error``; return the exit code."""
    emit("Loading vLLM's DeepSeek-V4 FlashMLA attention (a few seconds) ...")
    import torch

    if not torch.accelerator.is_available():
        emit(NO_GPU_NOTE)
    try:
        module = importlib.import_module(FLASHMLA_MODULE)
    except ImportError as exc:
        error(f"dspark-attn-plugin verify: cannot import {FLASHMLA_MODULE}: {exc}")
        error("This vLLM has no DeepSeek-V4 FlashMLA layer, or does not import here.")
        return EXIT_ERROR

    import vllm
    from dspark_attn_plugin import instrumentation, patch, synthetic
    from dspark_attn_plugin.loaded_code import classify_loaded
    from dspark_attn_plugin.warmup_workspace import layout_bytes, prefill_workspace_specs

    cls = getattr(module, "DeepseekV4FlashMLAAttention", None)
    if cls is None:
        error(
            f"dspark-attn-plugin verify: {FLASHMLA_MODULE} has no "
            "DeepseekV4FlashMLAAttention: nothing to verify."
        )
        return EXIT_ERROR
    if patch.is_patched(module):  # loaded through vLLM's plugins already
        instrumentation.uninstrument()
    result = classify_loaded(module)
    emit(f"vLLM {vllm.__version__}: forward_mqa is '{result.verdict}' ({result.reason})")

    workspace = _Workspace()
    where = (
        f"vLLM's WorkspaceManager on {workspace.device}"
        if workspace.device is not None
        else "none (CPU only): figures are what the plugin's formula gives"
    )
    emit(f"Workspace: {where}")

    def warmup(kind) -> tuple[BaseException | None, int | None]:
        workspace.fresh()
        device = workspace.device or "cpu"
        layer = synthetic.make_layer(cls, kind, device=device)
        q, kv, positions, output = synthetic.qkv(device=device)
        try:
            with synthetic.warmup_context():
                layer.forward_mqa(q, kv, positions, output)
        except Exception as exc:
            if not (_no_manager_error(exc) and workspace.device is None):
                return exc, None
            # CPU only: the warmup got past the buffer check to the workspace.
        else:
            if bool(output.any()):
                return AssertionError("warmup did not zero the output"), None
        reserved = workspace.reserved_bytes()
        if reserved is None:
            reserved = layout_bytes(prefill_workspace_specs(layer, q.shape[-1]))
        return None, reserved

    def show(label: str, exc: BaseException | None, reserved: int | None) -> bool:
        if exc is None:
            verb = "reserved" if workspace.device is not None else "asks for"
            emit(f"  {label:<50} passes, {verb} {reserved:,} B")
            return True
        emit(f"  {label:<50} FAILS: {_describe_failure(exc)}")
        return False

    swa, sparse = synthetic.SWA_ONLY_NO_BUFFER, synthetic.SPARSE_C4
    emit("Warmup (profile_run dummy run) of a synthetic layer:")
    show("stock vLLM, SWA-only layer without buffer", *warmup(swa))

    instrumentation.instrument()
    try:
        patched = patch.is_patched(module)
        label = "with the plugin" if patched else "with the plugin (left untouched)"
        ok = show(f"{label}, SWA-only without buffer", *warmup(swa))
        show(f"{label}, sparse layer (compress_ratio 4)", *warmup(sparse))
    finally:
        instrumentation.uninstrument()
        workspace.fresh()

    _report_kernels(emit)
    if ok:
        emit("PASS: DeepSeek-V4 with an SWA-only drafter gets through profile_run warmup.")
        return EXIT_PASS
    error("FAIL: the warmup still fails with the plugin; see above.")
    return EXIT_FAIL


def _report_kernels(emit: Callable[[str], None]) -> None:
    try:
        from vllm.v1.attention.ops.flashmla import is_flashmla_sparse_supported

        supported, reason = is_flashmla_sparse_supported()
    except Exception as exc:
        supported, reason = False, f"could not ask vLLM: {exc!r}"
    if supported:
        emit("FlashMLA sparse kernels: supported on this machine.")
    else:
        emit(f"FlashMLA sparse kernels: not available here ({reason}).")
        emit("  This machine cannot serve DeepSeek-V4; the warmup proof above holds regardless.")
