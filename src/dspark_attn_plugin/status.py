"""``dspark-attn-plugin status``: is this machine's vLLM protected?

Reads the installed vLLM without importing it: the package is located the way
``import vllm`` would find it, its version and entry points come from
``importlib.metadata``, and the flashmla source is classified as text.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import asdict, dataclass
from importlib import metadata

from dspark_attn_plugin import __version__, method_code, settings
from dspark_attn_plugin.target import FLASHMLA_PATH, METHOD_NAME
from dspark_attn_plugin.warmup_edit import NOTE_NAME, plan_edit
from dspark_attn_plugin.warmup_shape import Verdict

ENTRY_POINT_GROUP = "vllm.general_plugins"
ENTRY_POINT_NAME = "dspark_attn_plugin"

EXIT_SAFE, EXIT_UNPROTECTED, EXIT_ERROR = 0, 1, 2


class StatusError(Exception):
    """vLLM is there but could not be read, or the environment is malformed."""


@dataclass
class Status:
    plugin_version: str
    vllm_version: str | None
    vllm_path: str | None
    flashmla_path: str | None
    verdict: str
    reason: str
    plugin_will_load: bool
    load_reason: str
    plugin_enabled: bool
    enabled_reason: str
    # None where there is nothing to protect (no vLLM installed).
    protected: bool | None
    advice: str
    exit_code: int

    def to_dict(self) -> dict:
        return asdict(self)


def parse_vllm_plugins(environ) -> list[str] | None:
    """``VLLM_PLUGINS`` as vLLM reads it (a comma-split list, None if unset).

    Raises StatusError for values vLLM would read in a way nobody means:
    names with blanks around them, or empty names in a list.
    """
    raw = environ.get("VLLM_PLUGINS")
    if raw is None:
        return None
    names = raw.split(",")
    bad = [n for n in names if n != n.strip() or (not n and len(names) > 1)]
    if bad:
        raise StatusError(
            f"VLLM_PLUGINS={raw!r} is malformed: vLLM splits it on ',' and matches "
            f"names exactly, so {bad!r} match no plugin; write it as "
            f"{','.join(n.strip() for n in names if n.strip())!r}"
        )
    return names


def _plugin_load(environ) -> tuple[bool, str]:
    eps = metadata.entry_points(group=ENTRY_POINT_GROUP)
    if not any(ep.name == ENTRY_POINT_NAME for ep in eps):
        return False, f"no '{ENTRY_POINT_NAME}' entry point in {ENTRY_POINT_GROUP}"
    allowed = parse_vllm_plugins(environ)
    if allowed is None:
        return True, "entry point registered, VLLM_PLUGINS unset"
    if ENTRY_POINT_NAME in allowed:
        return True, "entry point registered and named in VLLM_PLUGINS"
    return False, f"VLLM_PLUGINS does not name {ENTRY_POINT_NAME}"


def _locate_vllm() -> tuple[str | None, str | None]:
    """(version, package directory) of the vLLM ``import vllm`` would load."""
    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError) as exc:
        raise StatusError(f"cannot locate vLLM: {exc}") from exc
    if spec is None:
        return None, None
    locations = list(spec.submodule_search_locations or [])
    if not locations:
        raise StatusError(f"vllm at {spec.origin} is not a package")
    try:
        version = metadata.version("vllm")
    except metadata.PackageNotFoundError:
        version = "(no distribution metadata)"
    return version, locations[0]


def collect(environ=os.environ) -> Status:
    """Everything ``status`` reports. Raises StatusError where vLLM is
    installed but cannot be read."""
    version, package_dir = _locate_vllm()
    will_load, load_reason = _plugin_load(environ)
    mode, problem = settings.read_mode(environ)
    enabled = mode != settings.OFF
    enabled_reason = problem or (
        f"{settings.ENV_VAR}={mode}" if environ.get(settings.ENV_VAR) else
        f"{settings.ENV_VAR} unset"
    )

    flashmla_path = None
    if package_dir is None:
        verdict, reason = Verdict.ABSENT, "vLLM is not installed"
    else:
        flashmla_path = os.path.join(
            os.path.dirname(package_dir), FLASHMLA_PATH
        )
        verdict, reason = _classify_file(package_dir, flashmla_path)

    active = will_load and enabled
    protected = verdict.safe or (verdict is Verdict.AFFECTED and active)
    if package_dir is None:
        protected = None
        code = EXIT_SAFE
        advice = (
            "No vLLM is installed for this Python: there is nothing to protect. "
            "Run this with the Python that runs vLLM."
        )
    elif verdict is Verdict.UNKNOWN:
        code = EXIT_ERROR
        advice = (
            "This vLLM cannot be judged safe from its files, or cannot be patched: "
            "the plugin will leave it alone. Run `dspark-attn-plugin verify` on this "
            "build before rolling out."
        )
    elif verdict is Verdict.AFFECTED and not active:
        code = EXIT_UNPROTECTED
        why = load_reason if not will_load else enabled_reason
        advice = (
            f"This vLLM crashes DSpark drafters in profile_run and the plugin "
            f"will not run ({why}). Enable it, or upgrade vLLM to >= 0.28.0."
        )
    elif verdict is Verdict.AFFECTED:
        code = EXIT_SAFE
        advice = "Protected: the plugin patches this vLLM in every process."
    elif verdict is Verdict.FIXED:
        code = EXIT_SAFE
        advice = "This vLLM has the fix (vLLM #50693): you can uninstall the plugin."
    else:
        code = EXIT_SAFE
        advice = "Nothing to fix on this vLLM."
    return Status(
        plugin_version=__version__,
        vllm_version=version,
        vllm_path=package_dir,
        flashmla_path=flashmla_path,
        verdict=verdict.value,
        reason=reason,
        plugin_will_load=will_load,
        load_reason=load_reason,
        plugin_enabled=enabled,
        enabled_reason=enabled_reason,
        protected=protected,
        advice=advice,
        exit_code=code,
    )


def _classify_file(package_dir: str, flashmla_path: str) -> tuple[Verdict, str]:
    """Verdict for the installed flashmla module, read as text.

    A module present only as byte-code (or a package that cannot be listed)
    cannot be judged: ``unknown``, never ``absent``, so that an install the
    plugin cannot read is not called safe.
    """
    if not os.path.exists(flashmla_path):
        try:
            compiled = _compiled_forms(flashmla_path)
        except OSError as exc:
            return Verdict.UNKNOWN, f"cannot read {package_dir}: {exc}"
        if compiled:
            return Verdict.UNKNOWN, (
                f"{FLASHMLA_PATH} is installed without its source (only "
                f"{os.path.basename(compiled[0])}): the plugin cannot read or patch it"
            )
        if not os.access(package_dir, os.R_OK | os.X_OK):
            return Verdict.UNKNOWN, f"cannot read {package_dir}"
        return Verdict.ABSENT, "this vLLM has no DeepSeek-V4 FlashMLA module"
    try:
        with open(flashmla_path, encoding="utf-8") as f:
            source = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise StatusError(f"cannot read {flashmla_path}: {exc}") from exc
    # The runtime's own plan and checks: protected only where the runtime
    # builds the patch. The runtime compares the rebuilt method with the
    # loaded function; here, with the file compiled whole (what an import of
    # it runs).
    plan = plan_edit(source)
    result = plan.classification
    if result.verdict is Verdict.AFFECTED:
        refusal = plan.refusal if not plan.applies else _build_check(plan, source, flashmla_path)
        if refusal:
            return Verdict.UNKNOWN, (
                f"{result.reason}, but the plugin cannot patch it: {refusal}"
            )
    return result.verdict, result.reason


def _build_check(plan, source: str, path: str) -> str | None:
    """What the runtime's build would refuse, short of the import."""
    try:
        compiled = method_code.module_method_code(source, path)
        if compiled is None or not method_code.same_code(
            method_code.plain_code(plan.function, plan.tree, path), compiled
        ):
            return f"{METHOD_NAME} rebuilt from its source does not match the module's own"
        method_code.edited_factory(plan.edited, plan.tree, path, NOTE_NAME)
    except (SyntaxError, ValueError, TypeError) as exc:
        return f"the edited {METHOD_NAME} does not compile: {exc}"
    return None


def _compiled_forms(source_path: str) -> list[str]:
    """Files that can stand for ``source_path`` without it: a sourceless
    ``.pyc`` beside it, cached byte-code, or an extension module."""
    folder, name = os.path.split(source_path)
    stem = name[: -len(".py")]
    if not os.path.isdir(folder):
        return []
    found = [
        os.path.join(folder, entry)
        for entry in os.listdir(folder)
        if entry == stem + ".pyc"
        or (entry.startswith(stem + ".") and entry.endswith((".so", ".pyd")))
    ]
    cache = os.path.join(folder, "__pycache__")
    if os.path.isdir(cache):
        found += [
            os.path.join(cache, entry)
            for entry in os.listdir(cache)
            if entry.startswith(stem + ".") and entry.endswith(".pyc")
        ]
    return sorted(found)


def render(status: Status) -> str:
    def yes(flag: bool) -> str:
        return "yes" if flag else "no"

    protected = (
        "n/a  (no vLLM installed: nothing to protect)"
        if status.protected is None
        else yes(status.protected)
    )

    rows = [
        ("vLLM", f"{status.vllm_version or 'not installed'}"
         + (f"  ({status.vllm_path})" if status.vllm_path else "")),
        ("verdict", f"{status.verdict}  ({status.reason})"),
        ("plugin loads", f"{yes(status.plugin_will_load)}  ({status.load_reason})"),
        ("plugin enabled", f"{yes(status.plugin_enabled)}  ({status.enabled_reason})"),
        ("protected", protected),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    lines.append("")
    lines.append(status.advice)
    return "\n".join(lines)
