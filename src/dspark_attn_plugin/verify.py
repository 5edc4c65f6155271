"""``dspark-attn-plugin verify``: the proof on this machine's vLLM.

Builds synthetic ``DeepseekV4FlashMLAAttention`` layers (no weights, no GPU
needed), runs vLLM's own warmup on them, then the warmup with the plugin, and
reports the workspace each reserves. The checks that decide the exit status,
all with the plugin:

- an SWA-only layer without a top-k buffer warms up, zeroes its output, and
  reserves what this build reserves for an SWA-only layer that has a buffer;
- a sparse layer (compress_ratio 4) reserves what stock vLLM reserves;
- a sparse layer without a buffer still fails at vLLM's own assertion.

Where an accelerator is available the reservation is real, through vLLM's
``WorkspaceManager`` on that device. On a CPU-only machine the figures come
from vLLM's own ``WorkspaceManager.get_simultaneous`` sizing, with the memory
taken from the CPU (a WorkspaceManager on a CPU cannot grow by itself).

Exit status: 0 every check passes; 1 a check fails; 2 the proof could not run
(vLLM or torch not installed, no DeepSeek-V4 FlashMLA layer in this vLLM, or
vLLM does not import). The report goes to standard output; errors, the FAIL
line and vLLM's own log lines to standard error.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from dspark_attn_plugin.target import CLASS_NAME, FLASHMLA_MODULE, FLASHMLA_PATH

EXIT_PASS, EXIT_FAIL, EXIT_ERROR = 0, 1, 2

EXIT_CODES_HELP = (
    "Exit status: 0 every check passes with the plugin; 1 a check fails; 2 the "
    "proof could not run (vLLM or torch not installed, no DeepSeek-V4 FlashMLA "
    "layer in this vLLM, or vLLM does not import). The report goes to standard "
    "output; errors and vLLM's own log lines to standard error."
)

NO_GPU_NOTE = (
    "No GPU here: vLLM's warnings on standard error about its compiled ops "
    '("Failed to import from vllm._C ...") and Triton ("Triton is installed but 0 '
    'active driver(s) found ...", "Triton not installed or not compatible ...") are '
    "expected; the proof runs without them."
)


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _describe_failure(exc: BaseException) -> str:
    """One line for an exception raised by a warmup, naming its place."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else "?"
    line = frames[-1].line if frames else ""
    if isinstance(exc, AssertionError) and "topk_indices_buffer" in (line or ""):
        return f"AssertionError at {where}: `{line}`"
    return f"{type(exc).__name__} at {where}: {exc}"


def _failure_site(exc: BaseException) -> tuple[str, int] | None:
    frames = traceback.extract_tb(exc.__traceback__)
    return (frames[-1].filename, frames[-1].lineno) if frames else None


def missing_requirement() -> str | None:
    """Why the proof cannot run here before anything is imported, or None."""
    for name, what in (("vllm", "vLLM"), ("torch", "torch")):
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return (
                f"{what} is not installed for this Python ({sys.executable}): "
                "run verify with the Python that runs vLLM"
            )
    return None


def _quiet_vllm_logging() -> None:
    """vLLM logs to standard output unless told otherwise: send it to
    standard error, so that standard output is the report alone, where the
    user has not chosen a stream or a logging configuration."""
    if "VLLM_LOGGING_STREAM" not in os.environ and "VLLM_LOGGING_CONFIG_PATH" not in os.environ:
        os.environ["VLLM_LOGGING_STREAM"] = "ext://sys.stderr"


class _Workspace:
    """vLLM's WorkspaceManager on the accelerator; on a CPU, one that sizes
    with vLLM's own code and takes its memory from the CPU."""

    def __init__(self) -> None:
        import torch
        from vllm.v1.worker import workspace

        self._ws = workspace
        self.device = (
            torch.accelerator.current_accelerator()
            if torch.accelerator.is_available()
            else None
        )
        self._cpu_manager = None

    def fresh(self) -> None:
        self._ws.reset_workspace_manager()
        if self.device is not None:
            self._ws.init_workspace_manager(self.device)
        else:
            self._cpu_manager = _cpu_manager(self._ws)
            self._ws._manager = self._cpu_manager

    def reserved_bytes(self) -> int:
        if self.device is None:
            return self._cpu_manager.requested
        from dspark_attn_plugin.workspace_bytes import held_bytes

        return held_bytes()


def _cpu_manager(workspace_module):
    import torch

    class CpuWorkspaceManager(workspace_module.WorkspaceManager):
        """vLLM's sizing (``get_simultaneous``); memory from the CPU."""

        requested = 0

        def _ensure_workspace_size(self, required_bytes: int):
            self.requested = max(self.requested, required_bytes)
            return torch.empty((required_bytes,), dtype=torch.uint8)

    return CpuWorkspaceManager(torch.device("cpu"))


@dataclass
class _Run:
    error: BaseException | None
    reserved: int | None


def run(
    emit: Callable[[str], None] = print, error: Callable[[str], None] = _to_stderr
) -> int:
    """Run the proof, writing the report through ``emit`` and errors through
    ``error``; return the exit code."""
    missing = missing_requirement()
    if missing:
        error(f"dspark-attn-plugin verify: {missing}")
        return EXIT_ERROR
    _quiet_vllm_logging()
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

    cls = getattr(module, CLASS_NAME, None)
    if cls is None:
        error(f"dspark-attn-plugin verify: {FLASHMLA_MODULE} has no {CLASS_NAME}: nothing to verify.")
        return EXIT_ERROR
    if patch.is_patched(module):  # loaded through vLLM's plugins already
        instrumentation.uninstrument()
        if patch.is_patched(module):
            error("dspark-attn-plugin verify: another plugin wraps the patched "
                  "forward_mqa; cannot run vLLM's own warmup for comparison.")
            return EXIT_ERROR
    result = classify_loaded(module)
    emit(f"vLLM {vllm.__version__}: forward_mqa is '{result.verdict}' ({result.reason})")

    workspace = _Workspace()
    where = (
        f"vLLM's WorkspaceManager on {workspace.device}"
        if workspace.device is not None
        else "CPU only: vLLM's WorkspaceManager sizing, memory from the CPU"
    )
    emit(f"Workspace: {where}")

    def warmup(kind) -> _Run:
        workspace.fresh()
        device = workspace.device or "cpu"
        layer = synthetic.make_layer(cls, kind, device=device)
        q, kv, positions, output = synthetic.qkv(device=device)
        try:
            with synthetic.warmup_context():
                layer.forward_mqa(q, kv, positions, output)
        except Exception as exc:
            return _Run(exc, None)
        if bool(output.any()):
            return _Run(AssertionError("warmup did not zero the output"), None)
        return _Run(None, workspace.reserved_bytes())

    def show(label: str, run: _Run) -> None:
        if run.error is None:
            emit(f"  {label:<52} passes, reserves {run.reserved:,} B")
        else:
            emit(f"  {label:<52} fails: {_describe_failure(run.error)}")

    swa, swa_buf = synthetic.SWA_ONLY_NO_BUFFER, synthetic.SWA_ONLY_WITH_BUFFER
    sparse = synthetic.SPARSE_C4
    sparse_nobuf = synthetic.LayerKind("sparse_no_buffer", 4, False)
    emit("Warmup (profile_run dummy run) of synthetic layers:")
    stock = {kind.name: warmup(kind) for kind in (swa, swa_buf, sparse, sparse_nobuf)}
    show("stock vLLM, SWA-only layer without buffer", stock[swa.name])

    instrumentation.instrument()
    try:
        patched = patch.is_patched(module)
        label = "with the plugin" if patched else "with the plugin (left untouched)"
        mine = {kind.name: warmup(kind) for kind in (swa, swa_buf, sparse, sparse_nobuf)}
    finally:
        instrumentation.uninstrument()
        workspace.fresh()
    show(f"{label}, SWA-only without buffer", mine[swa.name])
    show(f"{label}, SWA-only with buffer", mine[swa_buf.name])
    show(f"{label}, sparse (compress_ratio 4)", mine[sparse.name])
    show(f"{label}, sparse without buffer", mine[sparse_nobuf.name])

    failures = _check(stock, mine, swa, swa_buf, sparse, sparse_nobuf)
    _report_kernels(emit)
    if not failures:
        emit(
            "PASS: DeepSeek-V4 with an SWA-only drafter gets through profile_run "
            "warmup; every other layer warms up as stock vLLM does."
        )
        return EXIT_PASS
    for failure in failures:
        error(f"FAIL: {failure}")
    return EXIT_FAIL


def _check(stock, mine, swa, swa_buf, sparse, sparse_nobuf) -> list[str]:
    """What is wrong with the plugin's warmups, as sentences."""
    failures = []
    for kind in (swa, swa_buf, sparse):
        if mine[kind.name].error is not None:
            failures.append(
                f"with the plugin, the {kind.name} warmup fails: "
                f"{_describe_failure(mine[kind.name].error)}"
            )
    if not failures:
        if mine[swa.name].reserved != mine[swa_buf.name].reserved:
            failures.append(
                f"an SWA-only layer without a buffer reserves {mine[swa.name].reserved:,} B, "
                f"one with a buffer {mine[swa_buf.name].reserved:,} B: they must match"
            )
        if stock[sparse.name].error is None and (
            mine[sparse.name].reserved != stock[sparse.name].reserved
        ):
            failures.append(
                f"a sparse layer reserves {mine[sparse.name].reserved:,} B with the "
                f"plugin, {stock[sparse.name].reserved:,} B without"
            )
    kept = mine[sparse_nobuf.name].error
    stock_site = _failure_site(stock[sparse_nobuf.name].error) if stock[
        sparse_nobuf.name
    ].error else None
    if stock_site is not None and (
        not isinstance(kept, AssertionError)
        or _failure_site(kept) != stock_site
        or os.path.basename(stock_site[0]) != os.path.basename(FLASHMLA_PATH)
    ):
        failures.append(
            "a sparse layer without a buffer must fail at vLLM's own assertion "
            f"({os.path.basename(stock_site[0])}:{stock_site[1]}), as without the "
            f"plugin; it {'passes' if kept is None else 'fails elsewhere: ' + _describe_failure(kept)}"
        )
    return failures


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
