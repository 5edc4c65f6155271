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
Not part of ``.ci/run``: a run of every mutation takes hours on two cores
(each runs the tests until the first failure, and a mutant that only a
late test catches runs most of the suite).
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
        [("warmup_shape/aliases.py", "                        self._add(self.aliases, first)\n",
          "                        pass\n")],
    ),
    "R1-tests-on-the-buffer-ignored": (
        "a store chosen by an if/while on the buffer is read as unrelated",
        [("warmup_shape/aliases.py", "            inner = tainted or self.carries(s.test)\n",
          "            inner = tainted\n")],
    ),
    "R1-calls-not-followed": (
        "the buffer handed to a method or a nested def is not followed into it",
        [("warmup_shape/aliases.py",
          "            self.hand(c, fn, offset, tainted)  # what its parameters may be, always\n",
          "            pass\n")],
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
        [("warmup_shape/statements.py", '            self.crash(s, st, exc or ANY_CLASS, "raises")\n', "            pass\n")],
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
        [("warmup_shape/statements.py", "            if names is None or any(n != ANY_CLASS and _is_a(exc, n) for n in names):\n",
          "            if True:\n")],
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
    # --- the module as loaded (as_loaded.py: M1-M6), one per rule
    "M1-other-statements-allowed": (
        "a module-level statement outside the allow-list is trusted",
        [("warmup_shape/as_loaded.py", '            raise NotAllowed(\n                f"{_line(stmt)}: a module-level', '            str(\n                f"{_line(stmt)}: a module-level')],
    ),
    "M1-any-value-allowed": (
        "a module-level alias or call of this module's code is trusted",
        [("warmup_shape/as_loaded.py", "            r.require(r.simple(stmt.value), stmt,", "            r.require(True, stmt,")],
    ),
    "M1-names-bound-again": (
        "a module-level name bound twice is trusted (the walk reads the last, the class the first)",
        [("warmup_shape/as_loaded.py", "            r.require(name not in bound, stmt,", "            r.require(True, stmt,")],
    ),
    "M1-type-checking-anything": (
        "an if TYPE_CHECKING: block may hold anything",
        [("warmup_shape/as_loaded.py", "            r.require(not stmt.orelse and all(", "            r.require(True or all(")],
    ),
    "M2-class-decorated": (
        "a decorated class is trusted",
        [("warmup_shape/as_loaded.py", "        self.require(not cls.decorator_list, cls,", "        self.require(True, cls,")],
    ),
    "M2-any-base": (
        "a base made by code of this module is trusted",
        [("warmup_shape/as_loaded.py", "                self.require(self.imported_ref(base), base,", "                self.require(True, base,")],
    ),
    "M2-mro-ignored": (
        "a member an imported base may define first is taken from this module",
        [("warmup_shape/as_loaded.py", "                if past_import:\n", "                if False:\n")],
    ),
    "M3-class-body-bound-twice": (
        "a class body that binds a name twice is trusted",
        [("warmup_shape/as_loaded.py", "            self.require(name not in seen, stmt,", "            self.require(True, stmt,")],
    ),
    "M3-class-value-anything": (
        "a class attribute bound to code of this module is trusted",
        [("warmup_shape/as_loaded.py", "                self.require(self.simple(stmt.value), stmt,\n                             f\"{cls.name}.{stmt.targets[0].id}", "                self.require(True, stmt,\n                             f\"{cls.name}.{stmt.targets[0].id}")],
    ),
    "M3-buffer-at-class-level": (
        "a class-level member named as the buffer is trusted",
        [("warmup_shape/as_loaded.py", "                self.require(name not in (BUFFER_ATTR, RATIO_ATTR), stmt,", "                self.require(True, stmt,")],
    ),
    "M3-special-methods": (
        "__getattr__, __init_subclass__, ... in the class or a mixin are trusted",
        [("warmup_shape/as_loaded.py", "                self.require(not _special(name) or name in SPECIAL_METHODS, stmt,", "                self.require(True, stmt,")],
    ),
    "M4-global": (
        "a global statement is trusted",
        [("warmup_shape/as_loaded.py", '            raise NotAllowed(f"{_line(node)}: declares global', '            str(f"{_line(node)}: declares global')],
    ),
    "M4-stores-anywhere": (
        "stores into the class or another object are trusted",
        [("warmup_shape/as_loaded.py", "    if not own:\n", "    if False:\n")],
    ),
    "M4-stores-into-members": (
        "an instance attribute that shadows a method is trusted",
        [("warmup_shape/as_loaded.py", "    if attr in members or _special(attr):\n", "    if False:\n")],
    ),
    "M4-computed-setattr": (
        "setattr with a computed name is trusted",
        [("warmup_shape/as_loaded.py", "            r.require(isinstance(name, ast.Constant) and isinstance(name.value, str), node,", "            r.require(True, node,")],
    ),
    "M5-reflection": (
        "eval, exec, vars, globals, ... are trusted",
        [("warmup_shape/as_loaded.py", "        if isinstance(node, ast.Name) and node.id in REFLECTIVE and node.id not in shadowed:", "        if False:")],
    ),
    "M5-special-attributes": (
        "__dict__ and other special attributes are trusted",
        [("warmup_shape/as_loaded.py", "        if isinstance(node, ast.Attribute) and _special(node.attr) and (", "        if False and (")],
    ),
    "M6-defaults-run-code": (
        "a default argument that calls this module's code is trusted",
        [("warmup_shape/as_loaded.py", "            self.require(self.inert(d), d, f\"a default argument", "            self.require(True, d, f\"a default argument")],
    ),
    "M1-builtin-names": (
        "a module that binds a builtin's name (AssertionError, property) is trusted",
        [("warmup_shape/as_loaded.py", "            r.require(name not in BUILTIN_NAMES, stmt,", "            r.require(True, stmt,")],
    ),
    # --- Python's semantics in the walk
    "walk-private-names-unmangled": (
        "a private name is read as written, not as Python mangles it",
        [("warmup_shape/expressions.py", "        if private(e.id) and e.id not in scope.locals:\n", "        if False:\n"),
         ("warmup_shape/expressions.py", "        if base.kind in (LAYER, CLS) and private(attr):\n", "        if False:\n")],
    ),
    "walk-handler-names-shadowed": (
        "an except clause naming a local called AssertionError is taken for the builtin",
        [("warmup_shape/statements.py", "                not _is_local(t.id, scope) and t.id not in self.module.module_names\n", "                True\n")],
    ),
    "walk-walrus-in-comprehension": (
        "a walrus in a comprehension is taken not to bind the function's name",
        [("warmup_shape/expressions.py", "        if any(isinstance(n, ast.NamedExpr) for n in _own_nodes(e)):\n", "        if False:\n")],
    ),
    "walk-loops-not-unrolled": (
        "a for over a short constant is walked as any loop (plain for-else reads unknown)",
        [("warmup_shape/statements.py", "                return self.unrolled(s, it, st, scope)\n", "                pass\n")],
    ),
    "edit-no-warmup-branch": (
        "affected code without the warmup branch's shape makes plan_edit raise",
        [("warmup_edit.py", "    if branch is None:\n        return refuse(", "    if False:\n        return refuse(")],
    ),
    "runtime-unreadable-source": (
        "a source that cannot be read raises instead of reading unknown",
        [("loaded_code.py", "    except (ImportError, OSError, UnicodeDecodeError) as exc:\n", "    except ZeroDivisionError as exc:\n")],
    ),
    "walk-defaults-ignored": (
        "a default argument that carries the buffer is not looked at",
        [("warmup_shape/expressions.py", "            if v.derived or v.kind not in (CONST, OPAQUE):\n", "            if False:\n")],
    ),
    "walk-closures-read-early": (
        "a closure is taken to read its cell's value when it was made",
        [("warmup_shape/expressions.py", "                if not bound_once(s.outer.function, e.id):\n", "                if False:\n")],
    ),
    "walk-generators-run": (
        "a generator function's body is walked as if the call ran it",
        [("warmup_shape/statements.py", "        if is_generator(function):\n", "        if False:\n")],
    ),
    "walk-set-literal-opaque": (
        "a set display of constants is not a constant (plain spellings read unknown)",
        [("warmup_shape/expressions.py", "                return _const(frozenset(value.data), value.derived)\n", "                return _Val(OPAQUE, derived=value.derived)\n")],
    ),
    "walk-module-constants-opaque": (
        "module constants are not known (plain spellings read unknown)",
        [("warmup_shape/expressions.py", "        if e.id in self.module.constants:\n", "        if False:\n")],
    ),
    # --- the runtime checks the walk's assumptions on the loaded objects
    "runtime-check-skipped": (
        "the loaded objects are not compared with the source",
        [("loaded_code.py", "        problem = check_assumptions(module, cls, source, code.co_filename, result.assumes)\n", "        problem = None\n")],
    ),
    "runtime-member-code": (
        "a class member replaced after import is trusted",
        [("loaded_code.py", '            return f"{owner}.{name} is not the function its source defines"\n', "            pass\n")],
    ),
    "runtime-module-function": (
        "a module function rebound after import is trusted",
        [("loaded_code.py", '                return f"the module function {name} is not the one its source defines"\n', "                pass\n")],
    ),
    "runtime-module-constant": (
        "a module constant changed after import is trusted",
        [("loaded_code.py", '                return f"the module constant {name} is {loaded!r}, not {value!r} as its source says"\n', "                pass\n")],
    ),
    "runtime-class-constant": (
        "a class constant changed after import is trusted",
        [("loaded_code.py", '                return f"{owner}.{name} is {obj!r}, not the constant {value!r} of its source"\n', "                pass\n")],
    ),
    "runtime-data-descriptor": (
        "a data descriptor for the buffer or the ratio is trusted",
        [("loaded_code.py", '            return f"{CLASS_NAME}.{attr} is a data descriptor ({type(found).__name__})"\n', "            pass\n")],
    ),
    "runtime-getattribute": (
        "a class-level __getattribute__ is trusted",
        [("loaded_code.py", '        return f"{CLASS_NAME} defines its own __getattribute__"\n', "        pass\n")],
    ),
    "runtime-metaclass": (
        "a metaclass of the class's own is trusted",
        [("loaded_code.py", '        return f"{CLASS_NAME}\'s metaclass is {type(cls).__name__}"\n', "        pass\n")],
    ),
    "R6-fixed-is-not-affected": (
        "fixed code read as not-affected",
        [("warmup_shape/classify.py", "    if mentions:\n        return Classification(\n            Verdict.FIXED", "    if not mentions:\n        return Classification(\n            Verdict.FIXED")],
    ),
    "diagnose-any-earlier-start-vouches": (
        "a protected earlier start vouches for a cut restart with the plugin off",
        [("diagnose.py", "        if earlier.exit_code == EXIT_OK and not _plugin_in_effect_so_far(log):\n", "        if False:\n")],
    ),
    "diagnose-two-pods-as-one": (
        "two pods' lines in one log read as one server",
        [("diagnose.py", "    if log.interleaved_sources:\n", "    if False:\n")],
    ),
    "diagnose-cut-assertion-another-crash": (
        "the #50615 assertion cut off from profile_run reads as another crash",
        [("diagnose.py", "    near = [(n, p, t) for n, p, t in errors if t.at_the_assertion() or _maybe_the_assertion(p, t)]\n", "    near = []\n")],
    ),
    "diagnose-report-is-a-cause": (
        "the API server's \"See root cause above\" reads as the crash itself",
        [("diagnose.py", "    causes = [(n, p, t) for n, p, t in errors if not _a_report_of_another(t)]\n", "    causes = errors\n")],
    ),
    "diagnose-death-is-a-stop": (
        "a process that died is read as the operator stopping the server",
        [("log_reader.py", "        if self.log.death is None and _DEATH.search(stripped) and not _DEATH_NOT.search(stripped):\n", "        if False:\n")],
    ),
    "diagnose-drafter-proves-another-model": (
        "a start cut before its target's architecture line is taken for another model by its drafter's",
        [("diagnose.py", "and (log.api_start or log.no_drafter):\n", "and True:\n")],
    ),
    "diagnose-plugin-lines-prove-nothing": (
        "the plugin's verdict on DeepSeek-V4's attention is not taken for DeepSeek-V4",
        [("diagnose.py", "    if any(p.rescued or p.plugin_states() & {\"patched\", \"not-affected\", \"fixed\"}\n", "    if False and any(p.rescued or p.plugin_states() & {\"patched\", \"not-affected\", \"fixed\"}\n")],
    ),
    "diagnose-another-model-vouches": (
        "another model's start stands for a later DeepSeek-V4 start cut before its warmup",
        [("diagnose.py", "        if earlier.verdict == \"not-applicable\" or (its_model is False and _deepseek_v4(log)):\n", "        if False:\n")],
    ),
    "diagnose-another-models-crash-vouches": (
        "another model's crash stands for a later DeepSeek-V4 start cut before its warmup",
        [("diagnose.py", "        if earlier.verdict == \"not-applicable\" or (its_model is False and _deepseek_v4(log)):\n", "        if earlier.verdict == \"not-applicable\":\n")],
    ),
    "diagnose-stale-crash-vouches": (
        "a crash without the plugin stands for a later cut start that shows it in effect",
        [("diagnose.py", "        if earlier.verdict == \"crash-50615\" and _plugin_in_effect_so_far(log):\n", "        if False:\n")],
    ),
    "diagnose-failed-start-taken-for-cut": (
        "a start that reported a failure is judged by the protected start before it",
        [("diagnose.py", "            stop_note=False, reached=False, ended=True,\n", "            stop_note=False, reached=False,\n")],
    ),
    "diagnose-report-before-death": (
        "a failure report hides the process death before it",
        [("diagnose.py", "    if death is None and errors and not causes:\n", "    if errors and not causes:\n")],
    ),
    "diagnose-relayed-failure-is-cause": (
        "the engine's 'Worker failed ... check the stack trace above' is read as the crash",
        [("diagnose.py", "_REPORTS = (\"root cause above\", \"initialization failed\", \"stack trace above\",\n", "_REPORTS = (\"root cause above\", \"initialization failed\",\n")],
    ),
    "diagnose-world-size-ignored": (
        "a log with some of the model's ranks reads protected",
        [("diagnose.py", "    if ranks > in_effect and len(covered) == len(model) and all(\n", "    if False and all(\n")],
    ),
    "reader-folded-plugin-counts-one": (
        "Ray's folded plugin line counts one process",
        [("log_reader.py", "            proc.in_effect_for = max(proc.in_effect_for, self._repeats or 1)\n", "            proc.in_effect_for = 1\n")],
    ),
    "reader-start-repeated-unseen": (
        "two replicas' mixed lines read as one server",
        [("log_reader.py", "            if mark in self._started_here and not self.start_repeated:\n", "            if False:\n")],
    ),
    "reader-supervisor-exit-no-death": (
        "docker's 'exited with code 137' is no process death",
        [("log_reader.py", "    r\"|exited with code (?!0\\b|130\\b|143\\b)\\d+\"\n", "    r\"|(?!)\"\n")],
    ),
    "reader-systemd-kill-no-death": (
        "systemd's 'Main process exited, code=killed' is no process death",
        [("log_reader.py", "    r\"|Main process exited, code=(?:killed|dumped), status=(?!2/|15/)\"\n", "    r\"|(?!)\"\n")],
    ),
    "reader-cancel-is-crash": (
        "a client's CancelledError is read as a crash",
        [("log_reader.py", "        return self.exc_type.split(\".\")[-1] == _CANCELLED\n", "        return False\n")],
    ),
    "reader-json-after-prefix-unread": (
        "a JSON logging config's record behind vLLM's prefix is not opened",
        [("log_reader.py", "            if line[:1] == \"{\" and line.rstrip().endswith(\"}\"):\n", "            if False:\n")],
    ),
    "reader-stop-anywhere": (
        "stop words anywhere in a line (a logged prompt) stop the server",
        [("log_reader.py", "    return _STOPPING.match(text) is not None\n", "    return _STOPPING.search(text) is not None\n")],
    ),
    "reader-stop-without-head": (
        "a line without a logger's head (a prompt's next line) can say the server stops",
        [("log_reader.py", "        if uvicorn is None:\n            return False\n", "        if uvicorn is None:\n            return _STOPPING.match(text) is not None\n")],
    ),
    "reader-profiler-stops": (
        "vLLM's 'Shutting down profiler' stops the server",
        [("log_reader.py", "    r\"(?:[Ss]hutting down\\b(?! profiler)\"\n", "    r\"(?:[Ss]hutting down\\b\"\n")],
    ),
    "reader-any-unit-stops": (
        "systemd stopping any unit stops the server",
        [("log_reader.py", "_STOPPING_LINE = re.compile(r\"^Aborted!$\")\n", "_STOPPING_LINE = re.compile(r\"^Aborted!$|\\bsystemd\\[\\d+\\]: (?:Stopping|Stopped) \\S\")\n")],
    ),
    "reader-anyones-ctrl-c-stops": (
        "a client's KeyboardInterrupt in the same log stops the server",
        [("log_reader.py", " and self.log.stopping_at is None and self._serves(proc):\n", " and self.log.stopping_at is None:\n")],
    ),
    "reader-shell-kill-no-death": (
        "a shell's 'line 14: 100 Killed' job notice is no death",
        [("log_reader.py", "    r\"|\\bline \\d+: +\\d+ +(?:Killed|Segmentation fault|Aborted|Bus error|Illegal instruction)\\b\"\n", "    r\"|(?!)\"\n")],
    ),
    "reader-supervisord-no-death": (
        "supervisord's 'exited: vllm (exit status 1; not expected)' is no death",
        [("log_reader.py", "    r\"|exited: \\S+ \\((?:exit status \\d+|terminated by \\w+); not expected\\)|entered FATAL state\"\n", "    r\"|(?!)\"\n")],
    ),
    "reader-slurm-no-death": (
        "slurm's 'task 0: Exited with exit code 1' is no death",
        [("log_reader.py", "    r\"|srun: error: .*: tasks? [\\d,-]+: (?:Exited with exit code [1-9]|Killed|Segmentation fault|Aborted)\"\n", "    r\"|(?!)\"\n")],
    ),
    "reader-other-api-same-start": (
        "another API server's start after one that died early is the same start",
        [("log_reader.py", "        other_api = api and pid is not None and self._api_pid not in (None, pid)\n", "        other_api = False\n")],
    ),
    "reader-systemd-exit-same-start": (
        "systemd's 'Main process exited' does not end a start",
        [("log_reader.py", "_RUN_END = re.compile(r\"exited with code \\d+|Main process exited, code=\")\n", "_RUN_END = re.compile(r\"exited with code \\d+\")\n")],
    ),
    "reader-short-started-source-ignored": (
        "a replica caught at its start, with few lines, is no source",
        [("log_reader.py", "(n >= MIN_STARTED_LINES and s in self._started_sources)", "False")],
    ),
    "reader-statement-needs-indent": (
        "a traceback whose lines lost their indentation is misread",
        [("log_reader.py", "                text.startswith(\"    \") or not _raised(stripped)):\n", "                text.startswith(\"    \")):\n")],
    ),
    "reader-markers-end-traceback": (
        "a marker line (^^^) without indentation ends the traceback",
        [("log_reader.py", "        if not stripped or text.startswith((\" \", \"\\t\")) or not stripped.strip(\"^~ \"):\n", "        if not stripped or text.startswith((\" \", \"\\t\")):\n")],
    ),
    "reader-ray-notice-hides-fold": (
        "Ray's notice after its first folded line hides the count",
        [("log_reader.py", "    r\"(?:\\s*\\(Ray deduplicates logs by default\\.[^()]*(?:\\([^()]*\\)[^()]*)*\\))?\\s*$\")", "    r\"\\s*$\")")],
    ),
    "reader-abort-no-death": (
        "a process aborted ('Fatal Python error', 'terminate called') is no death",
        [("log_reader.py", "    r\"|Fatal Python error|terminate called after throwing\"\n", "    r\"|(?!)\"\n")],
    ),
    "diagnose-wrapped-assertion-another-crash": (
        "#50615's traceback wrapped by a terminal reads as another crash",
        [("diagnose.py", "    return (p.wrote_the_assertion and tb.exc_type == \"AssertionError\"\n", "    return (False and tb.exc_type == \"AssertionError\"\n")],
    ),
    "reader-ranks-one-process": (
        "torch's [rankN]: lines of several processes read as one",
        [("log_reader.py", "            name = f\"rank{self._rank}\"\n", "            pass\n")],
    ),
    "reader-syslog-tag-as-pid": (
        "any [digits]: after a syslog time is masked as journald's pid",
        [("log_reader.py", "    r\"(?: +[^\\s\\[\\]]+)? +[^\\s\\[\\]]+\\[(?P<pid>\\d+)\\](?=: )\"\n", "    r\".*?[^\\s\\[\\]]+\\[(?P<pid>\\d+)\\](?=: )\"\n")],
    ),
    "reader-pending-carried-over": (
        "an in-process run's own plugin line is carried to the next start",
        [("log_reader.py", "            if unprefixed and self._pending:\n", "            if False:\n")],
    ),
    "diagnose-left-alone-proves-nothing": (
        "the plugin leaving DeepSeek-V4's attention alone is not taken for DeepSeek-V4",
        [("diagnose.py", "           or any(_JUDGED_ON_LOAD.search(detail)", "           or False and any(_JUDGED_ON_LOAD.search(detail)")],
    ),
    "reader-pids-taking-turns-one-source": (
        "two journald ids that take turns read as one server restarted",
        [("log_reader.py", "            if pid in before:\n", "            if False:\n")],
    ),
    "diagnose-patched-and-off-covered": (
        "a process whose lines say both patched and off counts as covered",
        [("diagnose.py", "    covered = [p for p in model if not p.plugin_states() & {\"disabled\", \"left-alone\"}]\n", "    covered = model\n")],
    ),
    "diagnose-dspark-drafter-another-model": (
        "the DSpark drafter's architecture is taken for another model",
        [("diagnose.py", " or a in _DEEPSEEK_V4_DRAFTERS for a in log.architectures", " for a in log.architectures")],
    ),
    "reader-few-lines-back-one-source": (
        "an old journald pid that comes back for fewer lines than a source needs leaves one server",
        [("log_reader.py", "                self.pids_took_turns = True\n", "                pass\n")],
    ),
    "reader-rank-lines-to-anyone": (
        "a rank's plugin lines written before a new start go to the process with no prefix",
        [("log_reader.py", "            holder = self._process(_rank_of(proc), None)\n", "            holder = self._process(None, None)\n")],
    ),
    "diagnose-ray-folded-workers-ignored": (
        "workers Ray folded into another's model lines are not counted",
        [("diagnose.py", "    if log.folded_model > log.folded_plugin:\n", "    if False:\n")],
    ),
    "reader-silent-worker-runs-nothing": (
        "a worker that never logs loading the model is not counted as running it",
        [("log_reader.py", "            if _RUNS_MODEL_BY_NAME.match(name):\n", "            if False:\n")],
    ),
    "reader-assertion-needs-its-statement": (
        "an AssertionError in forward_mqa without its statement in the log is another crash",
        [("log_reader.py", "                 or not frame.statement.startswith((\"assert \", \"raise \")))\n", "                 or False)\n")],
    ),
    "diagnose-newest-first-read-anyway": (
        "a log written newest first is judged as if in order",
        [("diagnose.py", "    if log.newest_first:\n", "    if False:\n")],
    ),
    "reader-vllm-logging-prefix": (
        "text between the process prefix and the level hides vLLM's lines",
        [("log_reader.py", "        if head is None and prefixes and (inside := _HEAD_INSIDE.search(line, 0, 300)) is not None:\n", "        if False and (inside := _HEAD_INSIDE.search(line, 0, 300)) is not None:\n")],
    ),
    "input-gzip-by-name-only": (
        "gzip is not recognised by its magic bytes",
        [("log_input.py", "        if magic.startswith(_GZIP):\n", "        if False:\n")],
    ),
    "input-nul-padding-refused": (
        "logrotate's NUL padding makes the file binary",
        [("log_input.py", "            if k - j < NUL_PADDING and not (j == 0 and self._padding_open):\n", "            if True:\n")],
    ),
    "exports-message-at-top-only": (
        "the message of a record is looked for at its top level only",
        [("log_exports.py", "    for value in record.values():\n        if isinstance(value, dict):\n            found = find_message(value, depth + 1)\n", "    for value in ():\n        if isinstance(value, dict):\n            found = find_message(value, depth + 1)\n")],
    ),
    "exports-csv-ignored": (
        "a CSV export is read as plain lines",
        [("log_exports.py", "    header = _csv_header(first.rstrip(\"\\r\\n\")) if first.endswith(\"\\n\") else None\n", "    header = None\n")],
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
        [("log_reader.py", "        if anchor is None or anchor.start() == 0 or anchor.start() > MAX_WRAPPER:\n", "        if True:\n")],
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
        [("log_reader.py", "        if (api or engine) and (self.log.started or self._progressed()) and (\n", "        if False and (\n")],
    ),
    "reader-stop-ignored": (
        "errors after 'Shutting down' count as crashes",
        [("log_reader.py", "        elif self.log.stopping_at is None and _stops(stripped, file):\n", "        elif False:\n")],
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
        [("log_reader.py", '        return (self.at_the_assertion() and "topk_indices_buffer" in self.innermost.statement\n', "        return (self.at_the_assertion()\n")],
    ),
    "50615-outside-profile-run": (
        "the assertion outside profile_run is taken for #50615",
        [("log_reader.py", '                and "profile_run" in self.functions)\n', "                )\n")],
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
    # The ninth held-out review of diagnose (2026-12-06): deployments and
    # what log collection does to the lines.
    # Survivors of the mutation tool over warmup_shape/aliases.py that were
    # bugs (2026-12-06): the classifier read these crashing forks as fixed.
    "R1-torch-in-place-on-a-name": (
        "an in-place function (torch.fill_(x, v), torch.nn.init.constant_(x, v)) leaves x as it was",
        [("warmup_shape/aliases.py", "            )) or in_place):\n", "            ))):\n")],
    ),
    "R1-from-imported-object-unchanged": (
        "PENDING.pop() on a from-imported object changes nothing imported",
        [("warmup_shape/aliases.py",
          "                        or isinstance(n.func.value, ast.Name) and n.func.value.id in self.from_imported)\n",
          "                        or False)\n")],
    ),
    # A held-out reviewer's mutation of the classifier (2026-12-06) that no
    # test killed until the fork it was shown on became one.
    "R1-call-default-not-shared": (
        "a default argument made by a call (OrderedDict()) is no object every call shares",
        [("warmup_shape/statements.py",
          "            if isinstance(n, (ast.List, ast.Dict, ast.Set, ast.Call, ast.ListComp, ast.DictComp,\n",
          "            if isinstance(n, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp,\n")],
    ),
    # The eleventh held-out review of diagnose: Kubernetes, starts cut at
    # their top, restarts that changed.
    "reader-kubernetes-kill-no-death": (
        "a container a probe killed, or that exited 137 in kubectl describe, did not die",
        [("log_reader.py", '''    r"|failed (?:liveness|startup) probe"
    r"|Exit Code: +(?!0\\b|130\\b|143\\b)\\d+|exitCode: (?!0\\b|130\\b|143\\b)\\d+"
    r"|terminated with exit code (?!0\\b|130\\b|143\\b)\\d+"
''', "")],
    ),
    "reader-cut-start-merged": (
        "a start whose first lines were cut off merges with the next start",
        [("log_reader.py", "        if (api or engine) and (self.log.started or self._progressed()) and (\n",
          "        if (api or engine) and self.log.started and (\n")],
    ),
    "diagnose-changed-start-vouches": (
        "an earlier start of another vLLM or layout stands for a cut start",
        [("diagnose.py", "        if changed:\n", "        if False:\n")],
    ),
    "reader-logo-no-start": (
        "vLLM 0.27's logo and 'vLLM server version' begin no start",
        [("log_reader.py", '''              "vLLM server version", "\\u2588  version ")''', "              )")],
    ),
    "reader-engine-version-unread": (
        "the engine's 'Initializing a V1 LLM engine (vX)' names no version",
        [("log_reader.py", '''        if ("version" in stripped or "engine (v" in stripped) and''',
          '''        if "version" in stripped and''')],
    ),
    # The tenth held-out review of diagnose: the plugin's states, the remedy.
    "diagnose-mixed-builds-unprotected": (
        "processes patched on one build and fixed on another read unprotected",
        [("diagnose.py", "    if len(covered) == len(model) and all(in_effect_in(p) for p in model):\n",
          "    if False:\n")],
    ),
    "diagnose-own-fault-as-build": (
        "the plugin's own failure reads as a build that cannot be patched",
        [("diagnose.py", '    if any(s == "left-alone" and _ITS_OWN_FAULT.search(d) for p in crashed for s, d in p.plugin):\n',
          "    if False:\n")],
    ),
    "diagnose-misjudged-build-install": (
        "a crash where the plugin found the build not affected asks to install it",
        [("diagnose.py", '    if states & {"patched", "not-affected", "fixed"}:\n', '    if "patched" in states:\n')],
    ),
    "reader-engine-exit-no-death": (
        "an engine core that exited unexpectedly is no death",
        [("log_reader.py", '(?:died|exited|exits) unexpectedly|', 'died unexpectedly|')],
    ),
    # The mutation tool's aliases.py survivors (2026-12-06 late evening):
    # torch's in-place function called by the name a from-import binds.
    "walk-from-imported-in-place-ignored": (
        "fill_(x, v) after `from torch import fill_` leaves x as it was",
        [("warmup_shape/aliases.py", "            self.took_in(args[0])  # fill_(x, v) after ``from torch import fill_``\n",
          "            pass\n")],
    ),
    "walk-from-imported-view-ignored": (
        "narrow(x, ...) after `from torch import narrow` is no view of x",
        [("warmup_shape/aliases.py", "                    todo.append((n.args[0], None))  # narrow(x, ...) after ``from torch import narrow``\n",
          "                    pass\n")],
    ),
    # The twelfth held-out review of diagnose: deaths in Ray clusters,
    # multi-node data parallel and pods.
    "reader-ray-death-no-death": (
        "a node Ray marked dead, a worker the raylet killed, a ray job that failed: no death",
        [("log_reader.py", '''    r"|has been marked dead|died or was killed|killed due to"
    r"|failed with exit code (?!0\\b)-?\\d+|found [1-9]\\d* exited DP Servers"
''', "")],
    ),
    "reader-pod-crash-loop-no-death": (
        "a pod in a crash loop or on a node not ready: no death",
        [("log_reader.py", '''    r"|\\bCrashLoopBackOff\\b|Back-off restarting failed container|\\bNodeNotReady\\b"
''', "")],
    ),
    "reader-escaped-cr-kept": (
        "rsyslog's #015 and cat -v's ^M stay on the frame's function",
        [("log_reader.py", '_LINE_END = re.compile(r"(?:\\r|#015|\\^M)+$")', '_LINE_END = re.compile(r"\\r+$")')],
    ),
    "reader-jq-quotes-kept": (
        "a line quoted by jq keeps its escapes (no frame read)",
        [("log_reader.py", '    if "\\\\" in body:\n', '    if False:\n')],
    ),
    "reader-unread-traceback-ignored": (
        "a traceback that could not be read leaves no trace",
        [("log_reader.py", "        if proc._in_traceback and proc._header is not None and self.log.unread is None:\n",
          "        if False:\n")],
    ),
    "reader-open-traceback-ignored": (
        "a log that ends inside a traceback reads as one that ended well",
        [("log_reader.py", "                  if p._in_traceback and p._header is not None]\n",
          "                  if False]\n")],
    ),
    "diagnose-unread-traceback-safe": (
        "an unread traceback before the stop does not stop exit 0",
        [("diagnose.py", "        if code == EXIT_OK and unread is not None and (stopped_at is None or unread[0] < stopped_at):\n",
          "        if False:\n")],
    ),
    "diagnose-cut-architecture-another-model": (
        "an architecture's name cut at a width reads as another model",
        [("diagnose.py", "    if any(name.startswith(a) for a in log.architectures for name in _MAY_BE_CUT_FROM):\n",
          "    if False:\n")],
    ),
    "reader-parallel-sizes-ignored": (
        "the engine's tensor x pipeline parallel size asks for no processes",
        [("log_reader.py", '        if "_parallel_size" in stripped:\n', '        if False:\n')],
    ),
    "reader-tail-headers-ignored": (
        "tail's ==> file <== headers name no source",
        [("log_reader.py", "            source = f\"{self._file}\\0{source}\"\n", "            pass\n")],
    ),
    "reader-rotated-files-two-sources": (
        "a rotated file of the same log is another source",
        [("log_reader.py", '            name = _ROTATED.sub("", header.group("name"))\n',
          '            name = header.group("name")\n')],
    ),
    "exports-source-objects-ignored": (
        "a pod named as an object ({\"pod\": {\"name\": ...}}) is no source",
        [("log_exports.py", '            elif key in SOURCE_KEYS and isinstance(inner, dict) and isinstance(\n',
          '            elif False and isinstance(\n')],
    ),
    "exports-dotted-source-ignored": (
        "a dotted source name (kubernetes.pod.name) is no source",
        [("log_exports.py", '    return len(parts) >= 2 and parts[-1] == "name" and parts[-2] in SOURCE_KEYS\n',
          '    return False\n')],
    ),
    # The thirteenth held-out review of diagnose (Triton, cloud consoles'
    # exports, replicas with the same pids), and the survivors of
    # aliases.py that forks told apart (2026-12-06, late).
    "reader-triton-death-no-death": (
        "a Triton stub found unhealthy, tritonserver's own fault: no death",
        [("log_reader.py", '''    r"|\\bStub process (?:'[^']*' )?is (?:not healthy|unhealthy)\\b|\\bSignal \\((?!2\\)|15\\))\\d+\\) received\\b"
''', "")],
    ),
    "reader-tail-columns-kept": (
        "columns after the message stay on it (the frame's function reads forward_mqa\\t1796...)",
        [("log_reader.py", "        line, tail = _cut_tail(line, self._head, markdown)\n",
          "        tail = \"\"\n")],
    ),
    "reader-once-a-life-ignored": (
        "a process that starts to load the model twice in one start is one process",
        [("log_reader.py", "        if once is None and not self._repeats and (",
          "        if False and (")],
    ),
    "reader-triton-models-one-server": (
        "a Triton server that loads two models is judged by the last one's start",
        [("log_reader.py", "                self.served_models.add(served.group(\"model\"))\n", "                pass\n")],
    ),
    "exports-labels-no-source": (
        "a record's labels (a Vertex replica, a VM) name no source",
        [("log_exports.py", "            elif key in LABEL_KEYS and isinstance(inner, dict):\n",
          "            elif False:\n")],
    ),
    "walk-swallowed-raise-ends-the-path": (
        "what follows a raise hasattr or a for may swallow is not chosen by the buffer",
        [("warmup_shape/aliases.py", "            raises = swallowed and not (tainted or left) and self.may_raise([stmt])\n",
          "            raises = False\n")],
    ),
    "walk-layer-kept-in-another-object-ignored": (
        "an object that keeps the layer (self.layer = layer) changes nothing of it",
        [("warmup_shape/aliases.py", '            if other in (attr, BUFFER_ATTR) or attr == "*":\n',
          '            if other in (attr, BUFFER_ATTR, "*"):\n')],
    ),
    "walk-chained-comparison-not-an-and": (
        "a chained comparison's later comparands are not chosen by the earlier",
        [("warmup_shape/aliases.py", "                if isinstance(n, ast.Compare) and len(n.ops) > 1:\n",
          "                if False:\n")],
    ),
    "walk-yield-ends-nothing": (
        "a generator's code after a yield runs whatever its consumer decides",
        [("warmup_shape/aliases.py", "            if generator and not left and any(isinstance(n, (ast.Yield, ast.YieldFrom))\n",
          "            if False and any(isinstance(n, (ast.Yield, ast.YieldFrom))\n")],
    ),
    "walk-derived-index-store-ignored": (
        "a store or del whose index the buffer decides changes nothing",
        [("warmup_shape/aliases.py", "            isinstance(n, ast.Subscript) and self.carries(n.slice)\n",
          "            False\n")],
    ),
    "walk-swallowed-statement-not-chosen": (
        "the parts of a statement after what may raise in a swallowed function are not chosen",
        [("warmup_shape/aliases.py", "            if self.statement(stmt, tainted or left or raises, fn) or raises:\n",
          "            if self.statement(stmt, tainted or left, fn) or raises:\n")],
    ),
    "walk-layer-given-back-by-a-call-ignored": (
        "get()._ids, where get() may give the layer back, is no attribute of the layer",
        [("warmup_shape/aliases.py", '                    "*" in self.returned(n.value)):\n', "                    False):\n")],
    ),
    "walk-inplace-keyword-ignored": (
        "F.threshold(x, t, v, inplace=True) does not change x",
        [("warmup_shape/aliases.py", "                self.took_in(args[0])  # F.threshold(x, t, v, inplace=True)\n",
          "                pass\n")],
    ),
    "walk-python-consumers-ignored": (
        "zip([0] * (b is None), self._ids) does not advance self._ids",
        [("warmup_shape/aliases.py", "        if of_python and not self._only_reads(f, args) and (\n",
          "        if False and of_python and not self._only_reads(f, args) and (\n")],
    ),
    "walk-iterator-builders-opaque": (
        "m = map(next, [self._ids]) is not an iterator over self._ids",
        [("warmup_shape/aliases.py", '                          "map", "islice", "chain", "from_iterable", "cycle", "tee",\n',
          '                          "cycle", "tee",\n')],
    ),
    "walk-sequence-repetition-opaque": (
        "[self._seen] * n holds nothing of the layer's",
        [("warmup_shape/aliases.py", "                todo += [(x, None) for x in (n.left, n.right)\n",
          "                todo += [(x, None) for x in ()\n")],
    ),
    "walk-whole-consumers-take-everything": (
        "dict.fromkeys(self._names, b) changes self._names",
        [("warmup_shape/aliases.py", "                if derived or not whole and not self.only_displays(a):\n",
          "                if True:\n")],
    ),
    "walk-number-readers-iterate": (
        "max(self.compress_ratio, width) and math.ceil(...) may advance what they are handed",
        [("warmup_shape/aliases.py", "            return f.id in READERS or f.id in NUMBER_READERS or (\n",
          "            return f.id in READERS or (\n"),
         ("warmup_shape/aliases.py", "            root.id in self.math_names) and f.attr not in ITERATING_MATH\n",
          "            root.id in ()) and f.attr not in ITERATING_MATH\n")],
    ),
    "walk-kernels-as-python": (
        "vLLM's kernels handed the buffer may advance what they are handed",
        [("warmup_shape/aliases.py", "            root.id not in self.kernel_names) and (\n",
          "            True) and (\n")],
    ),
    "walk-loop-exit-not-a-choice": (
        "for x in self._ids: if b: break (a round the buffer ends) leaves the iteration unchosen",
        [("warmup_shape/aliases.py", "            if left and not inner:\n                inner = True\n",
          "            if False:\n                inner = True\n")],
    ),
    "walk-loop-head-not-touched": (
        "a loop's iterator advanced as many times as the buffer decides is unchanged",
        [("warmup_shape/aliases.py", "                self.touched_all(head, iterated=not isinstance(s, ast.While))\n",
          "                pass\n")],
    ),
    "walk-in-operator-ignored": (
        "derived in self._ids advances nothing",
        [("warmup_shape/aliases.py", "                if isinstance(n, ast.Compare) and not t and any(\n",
          "                if False and isinstance(n, ast.Compare) and not t and any(\n")],
    ),
    "walk-derived-key-read-ignored": (
        "self._dd[b is None] (a defaultdict) changes nothing",
        [("warmup_shape/aliases.py", "                if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and not t and (\n",
          "                if False and isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and not t and (\n")],
    ),
    "walk-keepers-keep-nothing": (
        "stack.callback(next, self._ids) keeps nothing of the layer's",
        [("warmup_shape/aliases.py", "            self.keeps(f.value, values)  # x.append(self._ids), stack.callback(next, self._ids)\n",
          "            pass\n")],
    ),
    "walk-other-classes-never-called-back": (
        "print(v, file=self._w) never runs the module's W.write",
        [("warmup_shape/aliases.py", "        if self.implicit_elsewhere and (tainted and any(self.may_run_elsewhere(n) for n in nodes)\n",
          "        if False and (tainted and any(self.may_run_elsewhere(n) for n in nodes)\n")],
    ),
    "walk-layer-properties-never-called-back": (
        "hasattr(self, 'a' if b is None else 'b') runs no property",
        [("warmup_shape/aliases.py", "                self._taint(f)  # str(self), f\"{self}\" with a value the buffer decides\n",
          "                pass\n")],
    ),
    "walk-redirected-stdout-ignored": (
        "print(b is None) under redirect_stdout(self._w) writes nowhere of the module's",
        [("warmup_shape/aliases.py", "                            self.stdout_held = True\n",
          "                            pass\n")],
    ),
    "walk-lists-taken-for-iterators": (
        "zip(self._names, flags) advances a list the module writes out",
        [("warmup_shape/aliases.py", "            e.value.id in self.layer_names) and e.attr in self.displays\n",
          "            e.value.id in self.layer_names) and e.attr in ()\n"),
         ("warmup_shape/aliases.py", "            if displays_kept and attr in self.displays and isinstance(n, ast.Name) and (\n",
          "            if False and isinstance(n, ast.Name) and (\n")],
    ),
    "walk-parameter-attribute-dropped": (
        "def _get(): return layer._ids (layer handed the layer) returns nothing of it",
        [("warmup_shape/aliases.py", "                    found.add(attr)  # layer._ids, where layer is the layer: its _ids\n",
          "                    pass\n")],
    ),
    "walk-returned-attribute-untouched": (
        "for x in get(): ... (get returns self._ids) under a choice leaves self._ids",
        [("warmup_shape/aliases.py", "                    self.touched_attribute(view)  # next(get()), where get() returns self._ids\n",
          "                    pass\n")],
    ),
    "walk-subclasses-not-makers": (
        "class W2(W): pass makes no instance whose W methods Python may call",
        [("warmup_shape/aliases.py", "            makers |= more\n", "            break\n")],
    ),
    "walk-chainmap-opaque": (
        "ChainMap(self._d)['x'] = v does not change self._d",
        [("warmup_shape/aliases.py", '"memoryview", "defaultdict", "ChainMap", "new_child"})',
          '"memoryview", "defaultdict"})')],
    ),
    "walk-class-made-on-the-spot-opaque": (
        "namedtuple('Box', 'l')(self._l), SimpleNamespace(l=self._l) keep nothing of self._l",
        [("warmup_shape/aliases.py", "        return not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and (\n",
          "        return False and not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and (\n")],
    ),
    "walk-outside-code-allowed-anything": (
        "np.copyto(self._a, v), torch.rand(n), warnings.simplefilter(v) in __init__ change nothing the warmup reads",
        [("warmup_shape/aliases.py", "        if (carried or receiver) and self.builds(c) and not self.understood(c):\n",
          "        if False and (carried or receiver) and self.builds(c) and not self.understood(c):\n")],
    ),
    "walk-understood-methods-emptied": (
        "a list's append or a string's method beside a test on the buffer is outside code not understood",
        [("warmup_shape/aliases.py", "            elif f.attr in UNDERSTOOD_METHODS:\n                name = f.attr  # a method of an object: x.append(v), t.fill_(v)\n",
          "            elif False:\n                name = f.attr  # a method of an object: x.append(v), t.fill_(v)\n")],
    ),
    "walk-torch-factories-not-understood": (
        "torch.zeros(n) with n the buffer decides is outside code not understood",
        [("warmup_shape/aliases.py", "                        f.attr in TORCH_FACTORIES or f.attr in TORCH_VIEWS)\n",
          "                        f.attr in TORCH_VIEWS)\n")],
    ),
    "walk-base-methods-are-vllms": (
        "self.train(b is None), self.to(dtype) in __init__: nn.Module's methods taken as vLLM's own code",
        [("warmup_shape/aliases.py", "                if self.builds(c) and (\n                        tainted or any(self.carries(a, layer_as_holder=False) for a in values)):\n                    self._add(self.aliases, \"*\")\n                return\n",
          "                return\n")],
    ),
    "walk-forward-paths-strict-too": (
        "the forward paths' kernel calls with the buffer are held to the allow-list (every release reads unknown)",
        [("warmup_shape/aliases.py", "        return fn is None or id(fn) in self.building\n",
          "        return True\n")],
    ),
    "walk-kernels-not-understood": (
        "vLLM's functions handed the buffer in the forward paths are outside code not understood",
        [("warmup_shape/aliases.py", "        return root.id not in self.torch_names and root.id not in self.numpy_names\n",
          "        return False\n")],
    ),
    "walk-attribute-stored-on-one-side-exists": (
        "if b is not None: self._k = ...: the warmup's self._k is taken to exist",
        [("warmup_shape/aliases.py", "                return self.aliases | {DELETED + a for a in self.chosen_stores - self.always_stored}\n",
          "                return self.aliases\n")],
    ),
    "walk-always-stored-by-both-arms-missed": (
        "an attribute stored on both sides of a test on the buffer is taken to be missing on one",
        [("warmup_shape/aliases.py", "                    out |= b if a is universe else a if b is universe else a & b\n",
          "                    out |= set()\n")],
    ),
    "walk-del-by-the-buffer-ignored": (
        "if b is None: del self._f: the warmup's self._f is taken to exist",
        [("warmup_shape/aliases.py", "                            self.deleted(ast.Constant(x.attr))\n",
          "                            pass\n")],
    ),
    "walk-dropped-generators-run-nothing": (
        "self._gen = None on a path the buffer chose runs no generator's finally",
        [("warmup_shape/aliases.py", "            if tainted and self.finalizers:\n                self._add(self.aliases, \"*\")  # what it drops may run code (a generator's finally)\n            self.expression(s.value, tainted, fn)\n",
          "            self.expression(s.value, tainted, fn)\n")],
    ),
    "walk-skipped-arm-changes-nothing": (
        "_d = {}; if b is not None: _d['k'] = 1; _d['k'] in the warmup reads as if the store ran",
        [("warmup_shape/statements.py", "            self.skip_changes(skipped, node, st, scope)\n            if _can_leave(skipped):\n",
          "            if _can_leave(skipped):\n")],
    ),
    "walk-annotation-alone-stores": (
        "self._k: int in __init__ counts as a store of _k",
        [("warmup_shape/aliases.py", "                if isinstance(s, ast.AnnAssign) and s.value is None:\n                    continue  # (an annotation alone stores nothing)\n",
          "")],
    ),
    "walk-self-rebound-trusted": (
        "self = other in __init__: later stores are counted as the layer's",
        [("warmup_shape/aliases.py", "                    return out  # me rebound: nothing more is counted\n",
          "                    pass\n")],
    ),
    "walk-deleted-after-store-kept": (
        "self._k = 1; del self._k: _k counted as stored",
        [("warmup_shape/aliases.py", "                if gone:  # del self.x, delattr(self, \"x\"): not stored any more; nothing more counted\n",
          "                if False:\n")],
    ),
    "walk-building-misses-getattr": (
        "getattr(self, 'm')() in __init__: m's code is held to the forward paths' rules",
        [("warmup_shape/aliases.py", "                    todo += self.methods[n.value]  # getattr(self, \"m\")()\n",
          "                    pass\n")],
    ),
    "walk-chosen-property-read-runs-nothing": (
        "self._p if b is None else 0 does not run the getter by the buffer's choice",
        [("warmup_shape/aliases.py", "                self._taint(fn)  # read where the buffer chose: its getter runs by that choice\n",
          "                pass\n")],
    ),
    "walk-process-settings-ignored": (
        "torch.set_grad_enabled(b is not None) changes nothing the warmup reads",
        [("warmup_shape/aliases.py", "            self._add(self.aliases, \"*\")\n        if isinstance(f, ast.Attribute) and f.attr in KEEPERS",
          "            pass\n        if isinstance(f, ast.Attribute) and f.attr in KEEPERS")],
    ),
    "walk-starred-reaches-self": (
        "super().__init__(*args) hands the buffer to self",
        [("warmup_shape/aliases.py", "        every = [p.arg for p in _params(fn) if p.arg not in bound]\n",
          "        every = [p.arg for p in _params(fn)]\n")],
    ),
    "walk-str-methods-unnamed": (
        "' '.join(...) is a callee the walk cannot name",
        [("warmup_shape/aliases.py", "                isinstance(f.value, ast.Constant) and isinstance(f.value.value, (str, bytes))))\n",
          "                False))\n")],
    ),
    "walk-skipped-names-kept-plain": (
        "_i = 5; if b is not None: _i = 0; (0,)[_i] reads _i as if no buffer chose it",
        [("warmup_shape/statements.py", "        for name in _local_names(nodes) & set(st.env):\n            st.env[name] = st.env[name].mark(True)\n",
          "        for name in _local_names(nodes) & set(st.env):\n            pass\n")],
    ),
    "walk-derived-index-looked-up": (
        "(0,)[self._i] with _i set by the buffer reads as a lookup that cannot fail",
        [("warmup_shape/expressions.py", "        if index.kind != CONST and index.derived:  # a key or index that may be missing\n",
          "        if False:  # a key or index that may be missing\n")],
    ),
    "walk-skipped-call-changes-nothing": (
        "a closure that fills _d, called only with the buffer, changes nothing",
        [("warmup_shape/syntax.py", "                elif not (isinstance(n.func, ast.Name) and n.func.id in _CHANGE_NOTHING):\n",
          "                elif False:\n")],
    ),
    "walk-skipped-unnamed-store-ignored": (
        "(_e := _d)['k'] = 1 in the skipped arm changes nothing",
        [("warmup_shape/syntax.py", "        found.add(key if key is not None else (\"*\", None))\n",
          "        found.add(key) if key is not None else None\n")],
    ),
    "walk-skipped-ifexp-plain": (
        "(_i := 0) if b is not None else 1: _i keeps a plain value without the buffer",
        [("warmup_shape/expressions.py", "            if test.derived:\n                self.skipped([e.orelse if value else e.body], st)\n",
          "")],
    ),
    "walk-skipped-boolop-plain": (
        "b is not None and (_i := 0): _i keeps a plain value without the buffer",
        [("warmup_shape/expressions.py", "                    if v.derived:  # the rest did not run for lack of the buffer\n",
          "                    if False:  # the rest did not run for lack of the buffer\n")],
    ),
    "walk-unrolled-derived-plain": (
        "a for loop over a constant the buffer chose leaves its names plain",
        [("warmup_shape/statements.py", "        if it.derived:  # the buffer decides the items, so how often the body runs\n",
          "        if False:  # the buffer decides the items, so how often the body runs\n")],
    ),
    "walk-chosen-reads-plain": (
        "_g = iter((5,)); if b is None: 5 in _g; _a, = _g: a read the missing buffer chose changes nothing",
        [("warmup_shape/expressions.py", "        if self.steered(scope) and self.may_hold_an_object(e.id, st, scope):\n            self.chosen_read(e, e.id)\n", "")],
    ),
    "walk-steered-callee-not-chosen": (
        "a function called where the missing buffer steers runs as plain code",
        [("warmup_shape/expressions.py", "            steer = 1 if self.steered(scope) else 0\n            self.chosen += steer\n",
          "            steer = 0\n            self.chosen += steer\n")],
    ),
    "walk-chosen-getattr-plain": (
        "if b is None: 5 in getattr(self, '_ids'): a read by getattr the missing buffer chose changes nothing",
        [("warmup_shape/expressions.py", "                    self.chosen_member(e, args[0], args[1].data, st)\n", "                    pass\n")],
    ),
    "walk-chosen-forward-context-plain": (
        "if b is None: 5 in _fc.slot_mapping['ids']: the forward context's containers hold nothing a read changes",
        [("warmup_shape/expressions.py", "                or base.kind == FWD_CONTEXT and attr != \"attn_metadata\"):\n", "                ):\n")],
    ),
    "walk-skipped-forward-context-plain": (
        "if b is not None: 5 in _fc.slot_mapping['ids'] skipped: the forward context's containers hold nothing a read changes",
        [("warmup_shape/expressions.py", "                    if owner == FWD_CONTEXT and n.attr != \"attn_metadata\":\n", "                    if False:\n")],
    ),
    "walk-nested-annotations-skipped": (
        "def _z(x: self.topk_indices_buffer.shape): the annotation does not run",
        [("warmup_shape/statements.py", "            if not self.module.future_annotations:\n                self.annotations(s, st, scope)\n", "")],
    ),
    "walk-chosen-layer-reads-plain": (
        "if b is None: 5 in self._ids: a read of the layer's object the missing buffer chose changes nothing",
        [("warmup_shape/expressions.py", "        if (base.kind in (LAYER, CLS) and self._member_may_hold_an_object(attr, st)\n",
          "        if (False\n")],
    ),
    "walk-skipped-operand-changes-nothing": (
        "b is None or _l.pop(): the skipped operand's call changes nothing",
        [("warmup_shape/expressions.py", "                        self.skip_changes(e.values[len(results):], e, cur, scope)\n", "")],
    ),
    "walk-skipped-ifexp-arm-changes-nothing": (
        "_m.update(k=1) if b is not None else 0: the skipped arm changes nothing",
        [("warmup_shape/expressions.py", "            if test.derived:\n                self.skip_changes([e.orelse if value else e.body], e, st, scope)\n", "")],
    ),
    "walk-skipped-filter-rest-plain": (
        "[.. for _ in (1,) if b is not None if 5 in _g]: the rest of the filters ran",
        [("warmup_shape/expressions.py", "                        self.skip_changes(rest, cond, inner, scope)\n                        self.skipped(rest, st)\n", "")],
    ),
    "walk-skipped-decorator-ignored": (
        "@self._reg on a def the buffer skips changes nothing",
        [("warmup_shape/syntax.py", "            if isinstance(n, (ast.Import, ast.ImportFrom)) or getattr(n, \"decorator_list\", None):\n",
          "            if isinstance(n, (ast.Import, ast.ImportFrom)):\n")],
    ),
    "walk-def-defaults-not-run": (
        "def _f(a=_m['k']) in __init__ under a test on the buffer runs nothing",
        [("warmup_shape/aliases.py", "                for d in [*s.args.defaults, *(k for k in s.args.kw_defaults if k is not None)]:\n",
          "                for d in []:\n")],
    ),
    "walk-match-case-not-chosen": (
        "match self.topk_indices_buffer: case None: outside() runs the call as if the buffer had no say",
        [("warmup_shape/statements.py", "        chosen = 1 if subject.derived else 0\n", "        chosen = 0\n")],
    ),
    "walk-match-leaving-case-not-steering": (
        "match self.topk_indices_buffer: case 1: return; then outside(): the call reads as run either way",
        [("warmup_shape/statements.py", "            if _can_leave(s.cases):\n", "            if False:\n")],
    ),
    "walk-for-else-leaving-ignored": (
        "for ...: pass; else: if q.dim() == 3: return; then raise: the raise read as certain",
        [("warmup_shape/statements.py", " and after.total\n", "\n")],
    ),
    "walk-skipped-reads-change-nothing": (
        "e = d; if b is not None: None in d; then next(e): the skipped read of the iterator changes nothing",
        [("warmup_shape/statements.py", "        if _changed_objects(nodes) or self.reads_objects(nodes, st, scope):\n",
          "        if _changed_objects(nodes):\n")],
    ),
    "walk-skipped-attribute-reads-change-nothing": (
        "self._o = d; if b is not None: None in self._o; then next(d): the layer's attribute read changes nothing",
        [("warmup_shape/expressions.py", "    def _member_may_hold_an_object(self, attr: str, st) -> bool:\n",
          "    def _member_may_hold_an_object(self, attr: str, st) -> bool:\n        return False\n")],
    ),
    "walk-early-leave-rest-not-skipped": (
        "a helper that returns when the buffer is None: what follows the return reads as changing nothing",
        [("warmup_shape/statements.py", "                        self.skip_changes(rest, stmt, before, scope)\n",
          "                        pass\n")],
    ),
    "walk-chained-comparands-not-skipped": (
        "b is not None is not [*self.it]: the comparand the buffer skips reads as changing nothing",
        [("warmup_shape/expressions.py", "                if r.derived and rest:", "                if False:")],
    ),
    "walk-attribute-of-an-expression-plain": (
        "None in (self,)[0].it in a skipped arm: an attribute of an expression reads as no object",
        [("warmup_shape/expressions.py", "                    return True  # an attribute of what an expression gives: any object\n",
          "                    pass\n")],
    ),
    "walk-try-else-not-skipped": (
        "try: <fails without the buffer> except: pass else: None in it: the else reads as changing nothing",
        [("warmup_shape/statements.py", "            self.skip_changes(s.orelse, s, st, scope)\n", "            pass\n")],
    ),
    "walk-loop-else-not-skipped": (
        "try: for _ in (1,): <fails without the buffer> else: next(g) except: pass: the else reads as changing nothing",
        [("warmup_shape/statements.py", "        if not (s.orelse and some_path_skips and self.turns != turns):\n",
          "        if True:\n")],
    ),
    "walk-handlers-not-chosen": (
        "try: <fails without the buffer> except: k = 1: k reads as a constant no buffer chose",
        [("warmup_shape/statements.py", "        self.chosen += took\n", "        self.chosen += False\n"),
         ("warmup_shape/statements.py", "            self.chosen -= took\n", "            self.chosen -= False\n")],
    ),
    "walk-cut-short-leave-not-steering": (
        "try: return <fails without the buffer> except: pass; return 1: the return after reads as plain",
        [("warmup_shape/statements.py", "                    if jump or _can_leave(rest):\n",
          "                    if False:\n")],
    ),
    "walk-try-else-names-plain": (
        "try: <fails without the buffer> except: pass else: k = 1: k after reads as the constant before",
        [("warmup_shape/statements.py", "            if else_skipped:  # what it binds is what the buffer's absence left\n",
          "            if False:\n")],
    ),
    "walk-escaped-nested-blocks-run": (
        "try: for x in <fails without the buffer>: lst.append(1) except: pass: the loop's body reads as run",
        [("warmup_shape/statements.py", "            if escaped and _nested_blocks(stmt):\n", "            if False:\n")],
    ),
    "walk-escaped-rest-not-skipped": (
        "try: try: <fails> except KeyError: pass; lst.append(1) except AttributeError: pass: the rest reads as run",
        [("warmup_shape/statements.py",
          "            left = escaped or self.cut != cut or st is None and self.turns != turns\n",
          "            left = st is None and self.turns != turns\n")],
    ),
    "walk-handler-leaving-not-cut": (
        "try: try: <fails> except KeyError: pass except AttributeError: return; next(g): next(g) reads as run",
        [("warmup_shape/statements.py", "                if took and end is None:  # the failure's path left here\n",
          "                if False:  # the failure's path left here\n")],
    ),
    "walk-jump-names-plain": (
        "for _ in (0,): if b is None: continue; r = 'a': r after the loop reads as the constant before",
        [("warmup_shape/statements.py", "                                self.skipped(rest, path)\n",
          "                                pass\n")],
    ),
    "walk-caught-here-else-runs": (
        "try: try: <fails> except KeyError: pass except AttributeError: pass else: lst.append(1): the else reads as run",
        [("warmup_shape/statements.py",
          "        else_skipped = bool(s.orelse) and (took or end is None and self.turns != turns)\n",
          "        else_skipped = bool(s.orelse) and (end is None and self.turns != turns)\n")],
    ),
    "module-class-body-builtin-names": (
        "a class body may bind property: its decorators after it still mean Python's",
        [("warmup_shape/as_loaded.py", "            self.require(name not in BUILTIN_NAMES, stmt,\n                         f\"{cls.name} binds {name}, the name of a builtin\")\n", "")],
    ),
    "module-class-body-module-names": (
        "a class body may bind cached_property: the module's import still decides",
        [("warmup_shape/as_loaded.py", "            self.require(name not in self.bound, stmt,\n", "            self.require(True, stmt,\n")],
    ),
    "module-special-bindings-by-assignment-only": (
        "class __builtins__ binds nothing special: only `NAME = ...` does",
        [("warmup_shape/as_loaded.py", "            r.require(not _special(name) or name == \"__all__\", stmt,  # class __builtins__: ...\n", "            r.require(True, stmt,\n")],
    ),
    "module-chains-not-resolved": (
        "enum.bltns, collections._sys, a re-exported attrgetter are what their names say",
        [("warmup_shape/as_loaded.py", "    _check_chains(tree, r)\n", "")],
    ),
    "module-reflection-by-name-only-bare": (
        "x.eval, import_module, attrgetter by name are plain attributes",
        [("warmup_shape/as_loaded.py", "        r.require(name not in REFLECTION_NAMES, node,\n", "        r.require(True, node,\n")],
    ),
    "module-stdlib-by-name-ignored": (
        "torch.sys, from typing import sys: an allowed package's attributes are its own",
        [("warmup_shape/as_loaded.py", "        r.require(name not in OUTSIDE_MODULES, node,\n", "        r.require(True, node,\n")],
    ),
    "module-frame-attributes-plain": (
        "f_locals, f_back are plain attributes",
        [("warmup_shape/as_loaded.py", "        r.require(not INTERNALS.match(name), node,\n", "        r.require(True, node,\n")],
    ),
    "module-format-strings-plain": (
        "'{0.f_locals[self]}'.format(...) reads nothing",
        [("warmup_shape/as_loaded.py", "    r.require(not any(\".\" in f or \"[\" in f for f in fields), node,\n", "    r.require(True, node,\n")],
    ),
    "module-annotation-strings-unread": (
        "a string annotation is never evaluated",
        [("warmup_shape/as_loaded.py", "            found += _annotation_code(parsed)\n", "            pass\n")],
    ),
    "module-made-values-callable-at-import": (
        "_ex = resolve(...); _x = _ex('...'): a value an import-time call made is an imported name",
        [("warmup_shape/as_loaded.py", "            else:  # what a call (or an item) gave: not called at import in turn\n                r.made |= {t.id for t in targets}\n",
          "            else:\n                r.imported |= {t.id for t in targets}\n")],
    ),
    "module-stdlib-submodules-allowed": (
        "logging.config is logging's: an allowed package's submodules are allowed",
        [("warmup_shape/as_loaded.py", "        r.require(root in IMPORT_ROOTS and (root not in sys.stdlib_module_names\n                                            or name in STDLIB_MODULES), node,\n                  f\"the module imports {name}",
          "        r.require(root in IMPORT_ROOTS, node,\n                  f\"the module imports {name}"),
         ("warmup_shape/as_loaded.py", "        r.require(root in IMPORT_ROOTS and (root not in sys.stdlib_module_names\n                                            or name in STDLIB_MODULES), node,\n                  f\"{spelled}",
          "        r.require(root in IMPORT_ROOTS, node,\n                  f\"{spelled}")],
    ),
    "module-computed-format-plain": (
        "('{0' + '...}').format(x): a format string built at run time reads nothing",
        [("warmup_shape/as_loaded.py", "        r.require(node.attr != \"format\" or isinstance(node.value, ast.Constant), node,\n",
          "        r.require(True, node,\n")],
    ),
    "module-private-of-call-results-plain": (
        "get_args(...)[0]._evaluate: a private name of a call's result is its API",
        [("warmup_shape/as_loaded.py", "                  or _root(node) is not None or not isinstance(node.ctx, ast.Load), node,\n",
          "                  or True, node,\n")],
    ),
    "module-staticmethod-not-unwrapped": (
        "staticmethod(__import__) kept in a class is not __import__",
        [("warmup_shape/as_loaded.py", "    if isinstance(obj, (staticmethod, classmethod)):  # as stored in a class: what it gives\n        obj = obj.__func__\n", "")],
    ),
    "module-private-modules-allowed": (
        "torch._utils, torch._jit_internal are torch's API",
        [("warmup_shape/as_loaded.py", "        r.require(not any(_private_part(p) for p in name.split(\".\")), node,\n                  f\"{spelled} is the private module {name}\")\n", ""),
         ("warmup_shape/as_loaded.py", "        r.require(not any(_private_part(p) for p in name.split(\".\")), node,\n                  f\"imports the private module {name}\")\n", "")],
    ),
    "module-module-makers-plain": (
        "LazyLoader(name, {}, 'pydoc') makes an object like any class",
        [("warmup_shape/as_loaded.py", "        r.require(False, node, f\"{spelled} makes modules (a lazy loader imports what a string names)\")\n",
          "        pass\n")],
    ),
    "module-format-by-getattr-plain": (
        "getattr(s, 'format') of a built string reads nothing",
        [("warmup_shape/as_loaded.py", "        r.require(names[0] != \"format\" or isinstance(node.args[0], ast.Constant), node,\n",
          "        r.require(True, node,\n")],
    ),
    "walk-buffer-off-any-object": (
        "no_compile_layers[self.prefix].topk_indices_buffer is some other object's",
        [("warmup_shape/expressions.py", "        if attr == BUFFER_ATTR:  # (the layer's own is read above)\n", "        if False:\n")],
    ),
    "exports-raw-unread": (
        "Splunk's _raw and GELF's short_message are no message",
        [("log_exports.py", '"text", "content", "body", "_raw", "short_message")', '"text", "content", "body")')],
    ),
}


# The tests each mutation runs (the whole offline suite where not named):
# a mutation is killed when one of them fails.
# Mutations taken off the list, with why: no test fails on them since
# later rules made what they break unreachable (kept here so they are not
# written again).
RETIRED = {
    "M1-any-import-allowed": (
        "M1's in-order check of module-level imports: since 2026-12-07 every "
        "import anywhere in the module is held to the same check (_check_import, "
        "called from _check_reach), so dropping the first call only moves the reason"),
    "M1-special-names": (
        "the check of special names in module-level assignments: since 2026-12-07 "
        "a special name bound by any module-level statement is refused in the "
        "bindings loop, which covers assignments; the check was removed"),
    "walk-skipped-reads-plain": (
        "names read by code the buffer skips stay plain: wherever that code "
        "is skipped, skip_changes already refuses any read of an object in it, "
        "and code the buffer's absence ran is held by the chosen-read rule "
        "(2026-12-07: survived the named run on 8e72657)"),
    "walk-comprehension-marks-stay-inside": (
        "what a comprehension decided of an outer name stays inside: only its "
        "own targets can be derived there (a walrus in a comprehension is "
        "refused), and those do not leak in Python 3 "
        "(2026-12-07: survived the named run on 8e72657)"),
}

_CORE = ["tests/test_small_rules.py", "tests/test_warmup_shape.py", "tests/test_variants.py",
         "tests/test_module_as_loaded.py", "tests/test_layer_state_flows.py",
         "tests/test_walk_survivors.py", "tests/test_skipped_reads.py"]
FOCUS: dict[str, list[str]] = {name: _CORE for name in MUTATIONS if name.startswith(("R", "M", "walk-", "runtime-", "switch", "allow", "ifexp", "merge", "edit-", "rebuild", "super-cell", "status-"))}
FOCUS.update({name: ["tests/test_diagnose.py", "tests/test_diagnose_corpus.py",
                     "tests/test_log_formats.py", "tests/test_log_reader_details.py",
                     "tests/test_log_exports.py", "tests/test_diagnose_deployments.py",
                     "tests/test_diagnose_collection.py", "tests/test_diagnose_platforms.py",
                     "tests/test_diagnose_survivors.py"]
              for name in MUTATIONS if name.startswith(("reader-", "50615-", "diagnose-", "broken-",
                                                        "input-", "exports-"))})
FOCUS.update({name: ["tests/test_ray_settings.py"] for name in MUTATIONS if name.startswith("ray-")})
FOCUS.update({name: ["tests/test_cluster_status.py"]
              for name in MUTATIONS if name.startswith("cluster-")})
# Mutations of the patch, the edit and the runtime that only a late file of
# the suite catches (whole-suite runs of 20 minutes until it is reached):
# the files that kill them.
FOCUS.update({
    "bytecode-check-skipped": ["tests/test_register.py"],
    "wrapper-taken-for-ours": ["tests/test_register.py"],
    "decode-dispatch-dropped": ["tests/test_warmup.py"],
    "prefill-dispatch-dropped": ["tests/test_warmup.py"],
    "rescue-note-silent": ["tests/test_warmup.py"],
    "classifier-accepts-any-buffer-use": [*_CORE, "tests/test_generated_variants.py"],
})


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
            if name == "(baseline)":  # the tests the chosen mutations run, unmutated
                tests = sorted({t for n in names for t in FOCUS.get(n, ["tests"])})
                tests = ["tests"] if "tests" in tests else tests
            else:
                tests = FOCUS.get(name, ["tests"])
            rc, seconds, first = _run_tests(root, args.timeout, tests)
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
