"""The affected stand-in: the installed vLLM with vllm-project/vllm#50298's
assertion in ``forward_mqa``'s warmup branch.

Why a stand-in: the affected builds that crash in-tree (the 0.26.1rc1
nightlies, from dev77 on) are gone from the nightly index, and 0.27.x's
compiled ops need torch 2.13, which a given GPU machine may not have. vLLM
0.26.0's drafter gives its SWA-only layers no ``topk_indices_buffer``, as the
nightlies' did; inserting ``assert self.topk_indices_buffer is not None`` as
the first statement of its warmup branch reproduces what #50298 did to them.

The stand-in is made on the machine where it runs, from whatever vLLM is
installed there: a folder ``vllm/`` whose files are symbolic links to the
installed package's, except ``flashmla.py``, which is a copy with that one
statement inserted (no vLLM code lives in this repository). Put the folder
first on ``PYTHONPATH`` and ``import vllm`` loads the stand-in.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path

FLASHMLA_RELPATH = Path("models/deepseek_v4/nvidia/flashmla.py")
CLASS_NAME = "DeepseekV4FlashMLAAttention"
METHOD_NAME = "forward_mqa"
ASSERTION = "assert self.topk_indices_buffer is not None"


class StandinError(Exception):
    """The installed vLLM cannot be turned into the stand-in."""


@dataclass(frozen=True)
class Insertion:
    source: str  # the new flashmla.py
    line: int  # 1-based line of the inserted assertion in it
    inserted: bool  # False when the branch already began with the assertion


def _warmup_branch(source: str) -> ast.If:
    # The plugin's own locator of the warmup branch (pure ``ast``).
    from dspark_attn_plugin.warmup_shape import find_warmup_branch

    tree = ast.parse(source)
    cls = next(
        (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == CLASS_NAME),
        None,
    )
    method = next(
        (
            n
            for n in (cls.body if cls else [])
            if isinstance(n, ast.FunctionDef) and n.name == METHOD_NAME
        ),
        None,
    )
    if method is None:
        raise StandinError(f"no {CLASS_NAME}.{METHOD_NAME} in flashmla.py")
    branch = find_warmup_branch(method)
    if branch is None:
        raise StandinError(f"no warmup branch ('if attn_metadata is None:') in {METHOD_NAME}")
    return branch


def insert_assertion(source: str) -> Insertion:
    """``source`` with the assertion as the warmup branch's first statement."""
    first = _warmup_branch(source).body[0]
    lines = source.splitlines(keepends=True)
    # A docstring-less branch body starts at its first statement's line; any
    # comment lines above it stay where they are.
    if lines[first.lineno - 1].strip() == ASSERTION:
        return Insertion(source, first.lineno, inserted=False)
    indent = " " * first.col_offset
    lines.insert(first.lineno - 1, f"{indent}{ASSERTION}\n")
    return Insertion("".join(lines), first.lineno, inserted=True)


def make_standin(vllm_dir: Path, dest: Path) -> dict:
    """Build the stand-in under ``dest`` (``dest/vllm``, and the
    distribution's metadata beside it when found) from the installed vLLM
    package ``vllm_dir``. Returns what was done, for the report."""
    vllm_dir, dest = Path(vllm_dir), Path(dest)
    original = vllm_dir / FLASHMLA_RELPATH
    if not original.is_file():
        raise StandinError(f"{original} not found: this vLLM has no DeepSeek-V4 FlashMLA module")
    insertion = insert_assertion(original.read_text(encoding="utf-8"))
    if (dest / "vllm").exists():
        raise StandinError(f"{dest / 'vllm'} exists already: give a fresh folder")
    _link_tree(vllm_dir, dest / "vllm", skip={FLASHMLA_RELPATH})
    target = dest / "vllm" / FLASHMLA_RELPATH
    target.write_text(insertion.source, encoding="utf-8")
    metadata = sorted(vllm_dir.parent.glob("vllm-*.dist-info"))
    for dist_info in metadata:
        _link_tree(dist_info, dest / dist_info.name, skip=set())
    return {
        "from": str(vllm_dir),
        "path": str(dest),
        "flashmla": str(target),
        "assertion_line": insertion.line,
        "inserted": insertion.inserted,
        "metadata": [m.name for m in metadata],
    }


def _link_tree(src: Path, dest: Path, skip: set[Path]) -> None:
    """Real folders, files linked; ``skip`` (paths relative to ``src``) and
    the cached byte-code of skipped modules left out."""
    for root, _dirs, files in os.walk(src):
        rel = Path(root).relative_to(src)
        (dest / rel).mkdir(parents=True, exist_ok=True)
        for name in files:
            if rel / name in skip or _is_bytecode_of(rel / name, skip):
                continue
            os.symlink(Path(root) / name, dest / rel / name)


def _is_bytecode_of(path: Path, modules: set[Path]) -> bool:
    return path.parent.name == "__pycache__" and any(
        path.parent.parent == m.parent and path.name.startswith(m.stem + ".")
        for m in modules
    )
