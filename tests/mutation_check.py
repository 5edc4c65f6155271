"""Mutation check: break the plugin on purpose and watch the offline tests go red.

    make mutants                       # every mutation
    python tests/mutation_check.py --only guard-never-fires --json out.json

Each mutation is a text replacement in a copy of ``src/dspark_attn_plugin``
(the replaced text must occur exactly once, so a mutation that no longer
fits the code is reported, not silently skipped). The offline tests
(``-m "not network"``) then run against that copy, put first on
``PYTHONPATH``; a mutation is *killed* when at least one test fails. The
unmutated copy runs first and must pass. Exit status: 0 every mutation
killed; 1 one survived or the baseline failed; 2 a mutation did not apply.
Not part of ``.ci/run``: one run takes several minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "dspark_attn_plugin"
# The one test that checks the plugin comes from the installed wheel: a copy
# on PYTHONPATH is, by design, not that.
DESELECT = ["tests/test_packaging.py::test_plugin_is_imported_from_an_installed_wheel"]

# name -> (what the mutation breaks, [(file, old, new), ...])
MUTATIONS: dict[str, tuple[str, list[tuple[str, str, str]]]] = {
    "guard-never-fires": (
        "the edit's SWA-only test is never true",
        [("warmup_edit.py", 'f"if {layer}.{RATIO_ATTR} <= 1:', 'f"if {layer}.{RATIO_ATTR} < 0:')],
    ),
    "no-reservation": (
        "SWA-only layers return before vLLM's reservation",
        [("warmup_edit.py", '\\n    {swa_arm}\\nelse:', '\\n    {swa_arm}\\n    return\\nelse:')],
    ),
    "output-not-zeroed": (
        "the edit drops the warmup's zeroing of the output",
        [(
            "warmup_edit.py",
            "    branch.body[index] = _conditional(assertion, layer, note=True)\n",
            "    branch.body[index] = _conditional(assertion, layer, note=True)\n"
            "    branch.body[:] = [s for s in branch.body if 'zero_' not in ast.unparse(s)]\n",
        )],
    ),
    "classifier-says-affected-for-everything": (
        "fixed and not-affected code read as affected",
        [
            ("warmup_shape/classify.py", "            Verdict.FIXED, f\"SWA-only", "            Verdict.AFFECTED, f\"SWA-only"),
            ("warmup_shape/classify.py", "    return Classification(Verdict.NOT_AFFECTED, f\"the warmup", "    return Classification(Verdict.AFFECTED, f\"the warmup"),
        ],
    ),
    "fixed-and-not-affected-patched-too": (
        "the runtime patches code that is not affected",
        [
            (
                "instrumentation.py",
                "    if result.verdict is Verdict.AFFECTED:\n",
                "    if result.verdict in (Verdict.AFFECTED, Verdict.FIXED, Verdict.NOT_AFFECTED):\n",
            ),
            (
                "warmup_edit.py",
                "    if classification.verdict is not Verdict.AFFECTED:\n",
                "    if False:\n",
            ),
        ],
    ),
    "bytecode-check-skipped": (
        "a source that is not the loaded code gets patched",
        [("patch.py", "    if not method_code.same_code(\n", "    if False and method_code.same_code(\n")],
    ),
    "guard-on-steady-path": (
        "SWA-only layers return at the top of forward_mqa, steady steps too",
        [(
            "warmup_edit.py",
            "    return EditPlan(classification, tree, function, edited)\n",
            "    edited.body.insert(0, ast.parse(f'if {layer}.compress_ratio <= 1:\\n    return').body[0])\n"
            "    return EditPlan(classification, tree, function, edited)\n",
        )],
    ),
    "decode-dispatch-dropped": (
        "the patched steady path never calls _forward_decode",
        [(
            "warmup_edit.py",
            "    return EditPlan(classification, tree, function, edited)\n",
            "    edited.body[:] = [s for s in edited.body if 'num_decodes > 0' not in ast.unparse(s)]\n"
            "    return EditPlan(classification, tree, function, edited)\n",
        )],
    ),
    "prefill-dispatch-dropped": (
        "the patched steady path never calls _forward_prefill",
        [(
            "warmup_edit.py",
            "    return EditPlan(classification, tree, function, edited)\n",
            "    edited.body[:] = [s for s in edited.body if 'num_prefills > 0' not in ast.unparse(s)]\n"
            "    return EditPlan(classification, tree, function, edited)\n",
        )],
    ),
    "sparse-layers-through-the-fix": (
        "the assertion is dropped for sparse layers too",
        [("warmup_edit.py", "    node.orelse = [assertion]\n", "    node.orelse = [ast.Pass()]\n")],
    ),
    "rescue-note-silent": (
        "the once-per-process rescue line is never logged",
        [("rescue_note.py", "    global _said\n    if _said:\n", "    global _said\n    if True:\n")],
    ),
    "wrapper-taken-for-ours": (
        "ownership read from an attribute a functools.wraps wrapper copies",
        [(
            "patch.py",
            "    return isinstance(func, types.FunctionType) and func in _ours\n",
            "    return isinstance(func, types.FunctionType) and (\n"
            "        func in _ours or '__wrapped__' in func.__dict__)\n",
        )],
    ),
    "status-ignores-the-patch-plan": (
        "status says protected where the patch would be refused",
        [("status.py", "        if refusal:\n", "        if False:\n")],
    ),
    "classifier-accepts-any-buffer-use": (
        "a buffer-derived value handed to outside code read as safe (fails open)",
        [("warmup_shape/statements.py", "        if v.derived:\n            self.doubt(node, f\"hands a value derived", "        if False:\n            self.doubt(node, f\"hands a value derived")],
    ),
    # --- the five that survived 0.3.0's suite (issue "fail closed by construction")
    "switch-case-sensitive": (
        "DSPARK_ATTN_PLUGIN=OFF (upper case) no longer honoured",
        [("settings.py", "    value = raw.strip().lower()\n", "    value = raw.strip()\n")],
    ),
    "allow-list-by-substring": (
        "VLLM_PLUGINS naming a plugin whose name contains ours read as 'will load'",
        [("status.py", "    if ENTRY_POINT_NAME in allowed:\n", "    if any(ENTRY_POINT_NAME in n for n in allowed):\n")],
    ),
    "ifexp-one-arm": (
        "an undecided conditional expression walks only its first arm",
        [("warmup_shape/expressions.py", "        for arm in (e.body, e.orelse):\n", "        for arm in (e.body,):\n")],
    ),
    "merge-keeps-first-arm": (
        "the merge of two arms keeps the first arm's facts",
        [("warmup_shape/state.py", "        for v in values[1:]:\n            value = _join(value, v)\n        env[name] = value\n", "        env[name] = value\n")],
    ),
    "edit-accepted-when-unknown": (
        "the edit is accepted when the edited method reads unknown",
        [("warmup_edit.py", "    if check.verdict is not Verdict.FIXED:\n", "    if check.verdict is Verdict.AFFECTED:\n")],
    ),
    # --- one per rule of warmup_shape's docstring
    "R1-buffer-not-derived": (
        "the buffer itself is not marked derived",
        [("warmup_shape/expressions.py", "            return _const(None, derived=True)\n", "            return _const(None)\n")],
    ),
    "R1-aliases-ignored": (
        "an attribute the module stores the buffer in is read as unrelated",
        [("warmup_shape/module.py", "                            self.aliases.add(t.attr)\n", "                            pass\n")],
    ),
    "R1-one-ratio": (
        "only compress_ratio 1 is walked (0 forgotten)",
        [("warmup_shape/verdict.py", "SWA_RATIOS = (0, 1)\n", "SWA_RATIOS = (1,)\n")],
    ),
    "R2-if-one-arm": (
        "an undecided if walks only its body",
        [("warmup_shape/statements.py", "        ends = [self.block(arm, st.copy(MAYBE), scope) for arm in arms]\n", "        ends = [self.block(arm, st.copy(MAYBE), scope) for arm in arms[:1]]\n")],
    ),
    "R3-raise-passes": (
        "a reached raise is taken to end the run cleanly",
        [("warmup_shape/statements.py", '            self.crash(s, st, exc or "?", "raises")\n', "            pass\n")],
    ),
    "R3-failing-assert-passes": (
        "an assertion known false is taken to pass",
        [("warmup_shape/statements.py", '            self.crash(node, st, "AssertionError", "fails an assertion")\n', "            pass\n")],
    ),
    "R3-maybe-crash-ignored": (
        "a crash reached only maybe is dropped",
        [("warmup_shape/statements.py", '        self.doubt(node, f"may fail: {what}")\n', "        raise _Unreachable\n")],
    ),
    "R3-any-handler-catches": (
        "a handler that names another exception class is taken to catch the crash",
        [("warmup_shape/statements.py", "            if names is None or any(_is_a(exc, n) for n in names):\n", "            if True:\n")],
    ),
    "R3-unbound-read-passes": (
        "reading a local before it is bound is taken to pass",
        [("warmup_shape/expressions.py", '                self.crash(e, st, "UnboundLocalError", f"reads {e.id} before it is bound")\n', "                pass\n")],
    ),
    "R4-layer-handed-out": (
        "the layer handed to outside code read as safe",
        [("warmup_shape/statements.py", "        if v.kind in (LAYER, CLS, FUNC, FWD_CONTEXT):\n", "        if False:\n")],
    ),
    "R4-undefined-method": (
        "a method the class does not define read as safe",
        [("warmup_shape/expressions.py", '            self.doubt(e, f"calls {e.func.attr}, which {CLASS_NAME} does not define")\n', "            pass\n")],
    ),
    "R4-super": (
        "super() read as safe",
        [("warmup_shape/expressions.py", '            self.doubt(e, "calls into a base class (super())")\n', "            pass\n")],
    ),
    "R4-undecided-derived-test": (
        "an undecided test on a derived value walked as if it were not derived",
        [("warmup_shape/statements.py", "        if value is None and test.derived:\n            self.doubt(node, f\"tests an undecided", "        if False:\n            self.doubt(node, f\"tests an undecided")],
    ),
    "R4-unmodelled-statement": (
        "a statement kind the walk does not model is skipped",
        [("warmup_shape/statements.py", '        self.doubt(s, f"reaches a statement the walk does not model ({type(s).__name__})")\n        return None\n', "        return st\n")],
    ),
    "R5-decorated-method": (
        "a decorated forward_mqa is walked as if it were not",
        [("warmup_shape/classify.py", "    if not isinstance(method, ast.FunctionDef) or method.decorator_list:\n", "    if not isinstance(method, ast.FunctionDef):\n")],
    ),
    "R5-rebinding-ignored": (
        "a module that changes the class after defining it is trusted",
        [("warmup_shape/module.py", "                type(node.ctx) is not ast.Load\n                and type(node.value) is ast.Name\n", "                False\n                and type(node.value) is ast.Name\n")],
    ),
    "R5-class-twice": (
        "a class defined twice is trusted",
        [("warmup_shape/module.py", "            if definitions > 1:\n", "            if definitions > 2:\n")],
    ),
    "R6-fixed-is-not-affected": (
        "fixed code read as not-affected",
        [("warmup_shape/classify.py", "    if mentions:\n        return Classification(\n            Verdict.FIXED", "    if not mentions:\n        return Classification(\n            Verdict.FIXED")],
    ),
    # --- status = runtime
    "rebuild-without-imports": (
        "the rebuilt method is compiled without the module's imports",
        [("method_code.py", "    if imports:  # seen by the compiler, never run\n", "    if False:  # seen by the compiler, never run\n")],
    ),
    "super-cell-not-repointed": (
        "the rebuilt method's super() sees the replica class",
        [("method_code.py", "            cell.cell_contents = real_class\n", "            pass\n")],
    ),
    "rebuild-outside-the-class": (
        "the rebuilt method is compiled outside a class (mangling, super())",
        [("method_code.py", "    cls.body = [copy.deepcopy(function)]\n", "    cls.body = [ast.Pass()]\n    module.body.append(copy.deepcopy(function))\n")],
    ),
    # --- the log reader (diagnose)
    "reader-no-wrappers": (
        "a wrapper before vLLM's line shape is not stripped",
        [("log_reader.py", "        if anchor is None or anchor.start() == 0 or anchor.start() > 200:\n", "        if True:\n")],
    ),
    "reader-headerless-ignored": (
        "frames without a Traceback header are ignored",
        [("log_reader.py", "            if frame is None:\n                return False\n", "            if True:\n                return False\n")],
    ),
    "reader-ray-outer-type": (
        "RayTaskError(X) is read as RayTaskError, not X",
        [("log_reader.py", '            exc_type = exc["inner"] or exc["type"]', '            exc_type = exc["type"]')],
    ),
    "reader-one-run": (
        "a restarted server's starts are read as one run",
        [("log_reader.py", "        if (api or engine) and self.log.started and self._progressed():\n", "        if False:\n")],
    ),
    "reader-stop-ignored": (
        "errors after 'Shutting down' count as crashes",
        [("log_reader.py", "        if self.log.stopping_at is None and any(m in stripped for m in _STOPPING):\n", "        if False:\n")],
    ),
    "reader-tracebacks-unbounded": (
        "every traceback of a process is kept",
        [("log_reader.py", "            del self.tracebacks[2]  # keep the first two and the latest\n", "            pass\n")],
    ),
    "50615-any-exception": (
        "any exception at the statement is taken for #50615",
        [("log_reader.py", '            self.exc_type == "AssertionError"\n', '            True\n')],
    ),
    "50615-any-function": (
        "any function is taken for forward_mqa",
        [("log_reader.py", '            and frame.func == "forward_mqa"\n', "")],
    ),
    "50615-any-statement": (
        "any statement is taken for the buffer's assertion",
        [("log_reader.py", '            and "topk_indices_buffer" in frame.statement\n', "")],
    ),
    "50615-outside-profile-run": (
        "the assertion outside profile_run is taken for #50615",
        [("log_reader.py", '            and "profile_run" in self.functions\n', "")],
    ),
    "diagnose-not-applicable-ignored": (
        "a log of another model is judged as a DeepSeek-V4 one",
        [("diagnose.py", "    if applies is False:\n", "    if False:\n")],
    ),
    "broken-pipe-raises": (
        "a closed output pipe ends in an error",
        [("cli.py", "    except BrokenPipeError:\n", "    except ZeroDivisionError:\n")],
    ),
    # --- Ray: the settings that travel, and status --ray ---------------------------
    "ray-carry-only-when-on": (
        "an off switch is not carried to the Ray workers",
        [("instrumentation.py", "        stopped = ray_settings.carry_to_ray_workers()\n",
          "        stopped = (None if settings.read_mode()[0] == settings.OFF\n"
          "                   else ray_settings.carry_to_ray_workers())\n")],
    ),
    "ray-carry-with-nothing-set": (
        "an installed plugin changes vLLM's environment (and compile cache key)",
        [("ray_settings.py", "    if not any(name.startswith(PREFIX) for name in environ):\n",
          "    if False:\n")],
    ),
    "ray-carry-replaces-the-users-prefixes": (
        "the operator's own prefixes are dropped",
        [("ray_settings.py", '    return f"{kept},{prefix}" if kept else prefix',
          "    return prefix")],
    ),
    "ray-cache-not-refreshed": (
        "a cache vLLM took before the plugin never sees the prefix",
        [("ray_settings.py", "    disable()\n    enable()\n", "    enable()\n")],
    ),
    "ray-cache-refreshed-despite-changes": (
        "vLLM's cache is refreshed although other values changed",
        [("ray_settings.py", "    if changed:\n", "    if False:\n")],
    ),
    "cluster-worst-is-the-highest-code": (
        "a node that cannot be judged outranks one that crashes",
        [("cluster_status.py", "    for code in (status.EXIT_UNPROTECTED, status.EXIT_ERROR):",
          "    for code in (status.EXIT_ERROR, status.EXIT_UNPROTECTED):")],
    ),
    "cluster-settings-here-ignored": (
        "nodes judged with their own settings only",
        [("cluster_status.py", "        if name in here:\n", "        if False:\n")],
    ),
    "cluster-other-plugin-version-promised": (
        "a node with another plugin version is called protected",
        [("cluster_status.py", "            and theirs != __version__):", "            and False):")],
    ),
    "status-snapshot-drops-the-source": (
        "status reads no flashmla source (calls every vLLM safe)",
        [("installation.py", '                out["flashmla_source"] = f.read()',
          '                f.read()')],
    ),
}


# The tests each mutation runs (the whole offline suite where not named):
# a mutation is killed when one of them fails.
_CORE = ["tests/test_small_rules.py", "tests/test_warmup_shape.py", "tests/test_variants.py"]
FOCUS: dict[str, list[str]] = {name: _CORE for name in MUTATIONS if name.startswith(("R", "switch", "allow", "ifexp", "merge", "edit-", "rebuild", "super-cell", "status-"))}
FOCUS.update({name: ["tests/test_diagnose.py", "tests/test_diagnose_corpus.py"]
              for name in MUTATIONS if name.startswith(("reader-", "50615-", "diagnose-", "broken-"))})
FOCUS.update({name: ["tests/test_ray_settings.py"] for name in MUTATIONS if name.startswith("ray-")})
FOCUS.update({name: ["tests/test_cluster_status.py"]
              for name in MUTATIONS if name.startswith("cluster-")})


def _apply(copy: Path, changes: list[tuple[str, str, str]]) -> str | None:
    for name, old, new in changes:
        path = copy / name
        text = path.read_text(encoding="utf-8")
        if text.count(old) != 1:
            return f"{name}: expected the text once, found it {text.count(old)} times: {old!r}"
        path.write_text(text.replace(old, new), encoding="utf-8")
    return None


def _run_tests(copy_root: Path, timeout: int, tests=("tests",)) -> tuple[int, float, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(copy_root), env.get("PYTHONPATH")]))
    cmd = [
        sys.executable, "-m", "pytest", "--forked", "-x", "-q", "-p", "no:cacheprovider",
        # The Ray cluster tests run the installed wheel in every node (a node
        # starts from its own environment, not from this PYTHONPATH): they
        # cannot see a mutated copy.
        "-m", "not network and not ray", *(f"--deselect={d}" for d in DESELECT), *tests,
    ]
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=timeout)
        rc, out = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, out = 124, f"timed out after {timeout} s\n{exc.stdout or ''}"
    failed = [l for l in out.splitlines() if l.startswith(("FAILED", "ERROR"))]
    return rc, time.monotonic() - start, failed[0] if failed else out.strip().splitlines()[-1:][0] if out.strip() else ""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", choices=sorted(MUTATIONS),
                        help="run this mutation only (repeatable)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per test run")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    names = args.only or list(MUTATIONS)

    results = []
    code = 0
    with tempfile.TemporaryDirectory(prefix="dspark-mutants-") as tmp:
        for name in ["(baseline)", *names]:
            root = Path(tmp) / name.strip("()")
            shutil.copytree(PACKAGE, root / "dspark_attn_plugin")
            what, changes = ("no change", []) if name == "(baseline)" else MUTATIONS[name]
            problem = _apply(root / "dspark_attn_plugin", changes)
            if problem:
                results.append({"mutation": name, "outcome": "did not apply", "detail": problem})
                print(f"{name:<42} DID NOT APPLY  {problem}", flush=True)
                code = max(code, 2)
                continue
            rc, seconds, first = _run_tests(root, args.timeout, FOCUS.get(name, ["tests"]))
            if name == "(baseline)":
                outcome = "passes" if rc == 0 else "FAILS"
                if rc != 0:
                    code = 1
            else:
                outcome = "killed" if rc != 0 else "SURVIVED"
                if rc == 0:
                    code = max(code, 1)
            results.append({"mutation": name, "breaks": what, "outcome": outcome,
                            "pytest_exit": rc, "seconds": round(seconds, 1), "first_failure": first})
            print(f"{name:<42} {outcome:<9} {seconds:6.1f} s  {first}", flush=True)
            if name == "(baseline)" and rc != 0:
                break
    killed = sum(r["outcome"] == "killed" for r in results)
    print(f"{killed} of {len(names)} mutations killed", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return code


if __name__ == "__main__":
    sys.exit(main())
