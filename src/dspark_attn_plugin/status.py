"""``dspark-attn-plugin status``: is this machine's vLLM protected?

Reads the installed vLLM without importing it (``installation.read``: the
package located the way ``import vllm`` would find it, its version and entry
points from ``importlib.metadata``, the flashmla source as text), then judges
that snapshot (``judge``): the same judgement for this machine and, with
``status --ray``, for each node of a Ray cluster.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

from dspark_attn_plugin import __version__, installation, method_code, settings
from dspark_attn_plugin.target import FLASHMLA_PATH, METHOD_NAME
from dspark_attn_plugin.warmup_edit import NOTE_NAME, plan_edit
from dspark_attn_plugin.warmup_shape import Verdict

ENTRY_POINT_GROUP = installation.ENTRY_POINT_GROUP
ENTRY_POINT_NAME = "dspark_attn_plugin"
DIST_NAME = "dspark-attn-plugin"
# The variables that decide whether the plugin runs.
SETTING_NAMES = ("VLLM_PLUGINS", settings.ENV_VAR)

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


def _plugin_load(environ, entry_points=None) -> tuple[bool, str]:
    """Whether vLLM will load the plugin, given the entry point names in
    ``vllm.general_plugins`` (this environment's where not given)."""
    if entry_points is None:
        entry_points = installation.read(FLASHMLA_PATH, DIST_NAME, ())["entry_points"]
    if ENTRY_POINT_NAME not in entry_points:
        return False, f"no '{ENTRY_POINT_NAME}' entry point in {ENTRY_POINT_GROUP}"
    allowed = parse_vllm_plugins(environ)
    if allowed is None:
        return True, "entry point registered, VLLM_PLUGINS unset"
    if ENTRY_POINT_NAME in allowed:
        return True, "entry point registered and named in VLLM_PLUGINS"
    return False, f"VLLM_PLUGINS does not name {ENTRY_POINT_NAME}"


def snapshot(environ=os.environ) -> dict:
    """This environment, as ``judge`` takes it."""
    return installation.read(FLASHMLA_PATH, DIST_NAME, SETTING_NAMES, environ)


def collect(environ=os.environ) -> Status:
    """Everything ``status`` reports. Raises StatusError where vLLM is
    installed but cannot be read."""
    return judge(snapshot(environ))


def judge(snap: dict) -> Status:
    """The verdict on a snapshot (``installation.read``), taken here or on
    another node. Raises StatusError where vLLM is there but unreadable."""
    environ = snap["settings"]
    if snap["locate_error"]:
        raise StatusError(snap["locate_error"])
    version, package_dir = snap["vllm_version"], snap["vllm_path"]
    will_load, load_reason = _plugin_load(environ, snap["entry_points"])
    mode, problem = settings.read_mode(environ)
    enabled = mode != settings.OFF
    enabled_reason = problem or (
        f"{settings.ENV_VAR}={mode}" if environ.get(settings.ENV_VAR) else
        f"{settings.ENV_VAR} unset"
    )

    flashmla_path = snap["flashmla_path"]
    if package_dir is None:
        verdict, reason = Verdict.ABSENT, "vLLM is not installed"
    else:
        verdict, reason = _classify_snapshot(snap)

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
    """Verdict for the flashmla module at ``flashmla_path``, read as text."""
    return _classify_snapshot({"vllm_path": package_dir,
                               **installation.read_module(package_dir, flashmla_path)})


def _classify_snapshot(snap: dict) -> tuple[Verdict, str]:
    """Verdict for the snapshot's flashmla module.

    A module present only as byte-code (or a package that cannot be listed)
    cannot be judged: ``unknown``, never ``absent``, so that an install the
    plugin cannot read is not called safe.
    """
    package_dir, flashmla_path = snap["vllm_path"], snap["flashmla_path"]
    source = snap["flashmla_source"]
    if snap["read_error"]:
        raise StatusError(snap["read_error"])
    if source is None:
        if snap["listing_error"]:
            return Verdict.UNKNOWN, snap["listing_error"]
        compiled = snap["compiled_forms"]
        if compiled:
            return Verdict.UNKNOWN, (
                f"{FLASHMLA_PATH} is installed without its source (only "
                f"{', '.join(os.path.basename(c) for c in compiled)}): the plugin cannot "
                "read or patch it"
            )
        if not snap["package_readable"]:
            return Verdict.UNKNOWN, f"cannot read {package_dir}"
        return Verdict.ABSENT, "this vLLM has no DeepSeek-V4 FlashMLA module"
    # The runtime's own plan and checks: protected only where the runtime
    # builds the patch. The runtime compares the rebuilt method with the
    # loaded function; here, with the file compiled whole (what an import of
    # it runs).
    try:
        plan = plan_edit(source)
    except Exception as exc:  # the runtime leaves such code alone too
        return Verdict.UNKNOWN, f"the plugin could not read {FLASHMLA_PATH}: {exc!r}"
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
