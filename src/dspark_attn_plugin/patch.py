"""The patch on ``DeepseekV4FlashMLAAttention.forward_mqa``.

Patch note
----------
Why
    vLLM #50298 made the warmup branch of ``forward_mqa`` (the profile/warmup
    dummy run, where the forward context has no attention metadata) assert
    ``self.topk_indices_buffer is not None`` for every layer. SWA-only layers
    (``compress_ratio <= 1``), such as a DSpark drafter's, need no sparse
    top-k buffer and may have none, so the engine dies in ``profile_run``
    after loading every weight (vLLM #50615).
How
    The loaded ``forward_mqa`` is compiled again from its own source file,
    with one statement added at the top of its warmup branch: SWA-only layers
    return through ``warmup_workspace.run_warmup``, which reserves what
    ``_forward_prefill`` will request with ``top_k = 0``, never touching
    ``topk_indices_buffer``, and zeroes the output, as stock does. Every
    other statement is vLLM's, compiled from vLLM's file with its line
    numbers: the steady path (real metadata) and the warmup of sparse layers
    (which keeps the assertion and uses the buffer's width, as upstream's fix
    does) run exactly vLLM's code, and the steady path costs nothing extra,
    not even a wrapper's call. Before that, the unmodified source is compiled
    the same way and must give the loaded function's bytecode, so the source
    is known to be the code that runs; otherwise nothing is patched. The new
    function replaces the old one on the class, so every instance gets it
    however it was built. ``remove()`` puts vLLM's own function back.
Upstream
    vLLM #50693 (in vLLM 0.28.0), fixing #50615, a regression from #50298.
    Affected: the 0.26.1rc1 nightlies from dev77 on, 0.27.0, 0.27.1 and forks
    built from them. Which code is patched is decided from the loaded code
    (``warmup_shape``), never from the version string.
Remove when
    vLLM < 0.28.0 is no longer supported by this plugin's users. On a fixed
    vLLM the plugin already leaves the code untouched and logs that it is no
    longer needed.
"""

from __future__ import annotations

import ast
import copy
import types

from dspark_attn_plugin.target import CLASS_NAME, METHOD_NAME

# Set on the patched function: vLLM's own forward_mqa, which remove() puts back.
STOCK_ATTR = "__dspark_attn_plugin_stock__"
# The closure variable through which the added statement reaches run_warmup.
_HOOK = "__dspark_attn_plugin_warmup__"
_FACTORY = "__dspark_attn_plugin_factory__"


class PatchError(Exception):
    """The loaded ``forward_mqa`` cannot be patched safely."""


def _target_class(module: types.ModuleType) -> type:
    return getattr(module, CLASS_NAME)


def is_patched(module: types.ModuleType) -> bool:
    current = _target_class(module).__dict__.get(METHOD_NAME)
    return getattr(current, STOCK_ATTR, None) is not None


def _same_code(a: types.CodeType, b: types.CodeType) -> bool:
    """Same bytecode, names and constants (nested code objects alike)."""
    if (a.co_code, a.co_names, a.co_varnames, a.co_freevars) != (
        b.co_code,
        b.co_names,
        b.co_varnames,
        b.co_freevars,
    ) or len(a.co_consts) != len(b.co_consts):
        return False
    for x, y in zip(a.co_consts, b.co_consts):
        if isinstance(x, types.CodeType) and isinstance(y, types.CodeType):
            if not _same_code(x, y):
                return False
        elif type(x) is not type(y) or x != y:
            return False
    return True


def _function_code(module_code: types.CodeType, name: str) -> types.CodeType:
    return next(
        c for c in module_code.co_consts if isinstance(c, types.CodeType) and c.co_name == name
    )


def _warmup_guard(branch: ast.If, self_name: str, q_name: str, output_name: str) -> ast.stmt:
    guard = ast.parse(
        f"if {self_name}.compress_ratio <= 1:\n"
        f"    return {_HOOK}({self_name}, {q_name}, {output_name})\n"
    ).body[0]
    for node in ast.walk(guard):
        ast.copy_location(node, branch)  # tracebacks name the branch's line
    return guard


def _build(module: types.ModuleType, stock: types.FunctionType, run_warmup):
    """vLLM's ``forward_mqa`` compiled again from its source, SWA-only warmup
    routed to ``run_warmup``. Raises PatchError where that is not safe."""
    from dspark_attn_plugin.warmup_shape import find_warmup_branch

    filename = stock.__code__.co_filename
    source = module.__loader__.get_source(module.__name__)
    if source is None:
        raise PatchError(f"no source for {module.__name__}")
    tree = ast.parse(source, filename)
    cls = next(
        (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == CLASS_NAME), None
    )
    fn = next(
        (
            n
            for n in (cls.body if cls else [])
            if isinstance(n, ast.FunctionDef) and n.name == METHOD_NAME
        ),
        None,
    )
    if fn is None or fn.decorator_list:
        raise PatchError(f"no undecorated {METHOD_NAME} in {CLASS_NAME}'s source")
    names = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
    if _HOOK in names or _FACTORY in names or len(fn.args.args) != 5:
        raise PatchError(f"unexpected signature or names in {METHOD_NAME}")
    futures = [
        n for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "__future__"
    ]

    # The source must be the loaded code: compiled as it is, same bytecode.
    plain = ast.Module(body=[*futures, copy.deepcopy(fn)], type_ignores=[])
    plain_code = _function_code(compile(plain, filename, "exec", dont_inherit=True), fn.name)
    if not _same_code(plain_code, stock.__code__):
        raise PatchError(f"loaded {METHOD_NAME} does not match {filename}")

    branch = find_warmup_branch(fn)
    if branch is None:
        raise PatchError(f"no warmup branch in {METHOD_NAME}")
    self_name, q_name, *_, output_name = (a.arg for a in fn.args.args)
    branch.body.insert(0, _warmup_guard(branch, self_name, q_name, output_name))

    # Compiled inside a factory, so the hook is a closure cell (no global added
    # to vLLM's module); globals are the flashmla module's, as for vLLM's own.
    factory = ast.parse(f"def {_FACTORY}({_HOOK}):\n    return {fn.name}\n").body[0]
    factory.body.insert(0, fn)
    patched_module = ast.Module(body=[*futures, factory], type_ignores=[])
    ast.fix_missing_locations(patched_module)
    namespace: dict = {}
    exec(compile(patched_module, filename, "exec", dont_inherit=True), module.__dict__, namespace)
    patched = namespace[_FACTORY](run_warmup)
    patched.__qualname__ = stock.__qualname__
    patched.__dict__.update(stock.__dict__)
    setattr(patched, STOCK_ATTR, stock)
    return patched


def apply(module: types.ModuleType) -> bool:
    """Patch the flashmla ``module``'s class; False if it already was.
    Raises PatchError, leaving vLLM's code as it is, where it cannot."""
    # Imported here: it loads torch and vLLM's workspace manager, which are
    # already in memory once the flashmla module is.
    from dspark_attn_plugin.warmup_workspace import run_warmup

    cls = _target_class(module)
    stock = cls.__dict__[METHOD_NAME]
    if getattr(stock, STOCK_ATTR, None) is not None:
        return False
    patched = _build(module, stock, run_warmup)
    setattr(cls, METHOD_NAME, patched)  # the only change, made last
    return True


def remove(module: types.ModuleType) -> bool:
    """Put vLLM's own ``forward_mqa`` back; False if it was not patched."""
    cls = _target_class(module)
    stock = getattr(cls.__dict__.get(METHOD_NAME), STOCK_ATTR, None)
    if stock is None:
        return False
    setattr(cls, METHOD_NAME, stock)
    return True
