"""Classify ``DeepseekV4FlashMLAAttention.forward_mqa`` for the #50615 run.

A pure function over source text: it never imports vLLM, so the plugin runs
it on the loaded module and ``status`` on a file on disk.

The rules, all of them
----------------------
R1 *The run.* ``forward_mqa`` is interpreted from its first statement as the
   warmup dummy run of vLLM #50615: ``get_forward_context().attn_metadata``
   is None (``get_forward_context`` imported from ``vllm.forward_context``;
   one of that name from elsewhere is opaque), ``self.compress_ratio`` is 0
   (one walk) or 1 (a second walk), and ``self.topk_indices_buffer`` is
   None. Values are known constants, the layer, its class, functions of this
   module (the class's methods and properties, module functions, nested
   defs, lambdas, all followed when called), or *opaque* (anything else:
   imports, other attributes, results of outside code). Every value carries
   a mark, *derived*: the buffer is
   derived, so is whatever is computed from a derived value, whatever code
   chosen by a decided test on a derived value stores or returns (and the
   rest of the function, when the arm not taken could have left it (for a
   ``match`` on a derived subject: any of its cases), or
   after a ``with`` whose manager the buffer may steer, since its exit may
   swallow what the body raises; a ``try`` whose body may raise by it,
   through this module's code handed to outside code too, as ``map`` or a
   sort key; what a comprehension keeps by a filter on a derived value);
   what a ``try``'s handlers do that a failure reaches for sure (it may be
   for lack of the buffer: they run as a chosen arm, and where the body or
   ``else`` could have left, the rest of the function runs for lack of
   the buffer too); such chosen code reading an object a read may change
   (a name or a layer attribute, by ``.`` or ``getattr``, holding anything
   but a constant, the layer, its class, a function, the forward context
   or a builtin; any attribute of the forward context but
   ``attn_metadata``: an iterator ``in`` advances, the caller's as well
   as its own) is refused, and so is skipped code reading the forward
   context's containers: what follows may read that object under any
   name; a function called where the buffer steers (the rest after a
   return it could have taken) runs as chosen code; a nested ``def``'s
   annotations run where it does (but under ``from __future__ import
   annotations``), and one that binds a name, yields or awaits is
   refused;
   what code such a test skipped (an ``if``'s arm, an operand of a
   conditional expression or of ``and``/``or``, a comprehension's filters
   and parts after it, a loop's body, ``match`` cases, a ``try``'s or a
   loop's ``else`` that a path left without after such a turn; on the
   path of a failure a handler around it takes, the rest of each block it
   leaves and the blocks of the statement that failed, whatever other
   paths the walk goes on by) may bind or read:
   the names (but constants, the layer, its class and functions: reading
   an object may change it, an iterator by ``in``, a defaultdict by a
   missing key; the layer's attributes it reads are ``aliases``'s); and
   any attribute (or module-level object) that the module's other code
   (``__init__``, helpers, methods, other classes) may fill from the
   buffer, or change on a path a test on it chose, or fill with its own
   code: followed through locals, containers, objects shared by names and
   attributes, calls, parameters, closures, defaults, nn.Module's
   registries and tests on the buffer (``aliases``; ``*``: every attribute,
   and every module-level object). *Module-level state* is derived
   whatever the rest does: a module-level name bound to data that is not an
   immutable constant (a list, a dict, an object a call made), another
   class of the module, and a default argument that is such a name or a
   mutable object every call shares; an attribute of the layer stored one
   of them; and every imported name once one imported object (or an
   attribute of an imported module) may have taken a derived value in.
   An attribute or item read off a derived value that may be None is a
   crash reached maybe; the ratio is unknown where the module may set it by
   the buffer.
R2 *Tests.* An ``if``, ``while``, ``assert``, conditional expression,
   ``and``/``or``, ``match`` case or comprehension filter whose value is
   known takes its one arm. Otherwise it takes every arm, and what is under
   it is reached only *maybe*.
R3 *Crashes.* A reached ``raise``; an ``assert`` whose test is false; an
   attribute, subscript, call, iteration (also ``*x``, ``**x``), unpacking
   or arithmetic on None (or any known value that raises: unpacking a known
   tuple into too many or too few names is a ValueError); a local read
   before it is bound (a comprehension's loop variables are its own: unbound
   until their loop binds them, and not the function's after it; an
   ``except ... as e`` name is unbound after its handler). Reached on every
   path and certain: the verdict is ``affected``. Reached maybe, or inside a
   ``with`` whose context manager may swallow it (all but ``torch.no_grad``
   and the like, named through torch or contextlib; from the item that
   enters it on): ``unknown``. An enclosing ``try`` whose handler names the
   exception's class (or a base of it, or catches all), or whose finally
   block returns or leaves the loop, takes the crash instead; an exception
   of a class the walk does not know under a handler, or a handler naming a
   class it cannot read (a local, a name bound in an enclosing function),
   is ``unknown``; a handler's class is read only when an exception reaches
   it. This module's code handed out is walked outside the try and with
   blocks around.
R4 *Cannot see.* ``unknown`` when the run reaches: an undecided test on a
   derived value; the buffer read off anything but the layer (vLLM's
   registry of layers by prefix holds the layer itself); a derived value,
   the layer or its class handed to code
   outside this module (a call, an operator or a format on an opaque
   value; this module's functions handed out are walked as if called
   there); a key or index that is derived and not a known constant, looked
   up in anything; code that a decided test on a derived value skips and
   that may change an object (a store into an attribute or an item, one
   through an expression that is not a name, a method call, a call of
   anything but a few builtins, an object handed to a call, a decorator,
   an import, or a read of anything but a constant, the layer, its class,
   a function, a builtin, the buffer or the ratio: a read may run the
   object's code, and another name may hold it); outside code
   called on a path a derived test chose; a method
   the class does not define, ``super()``, a decorated function, a class
   attribute that is not a plain constant, a store into the buffer or the
   ratio; a statement or expression kind not listed here (``await``,
   ``global``, ``async``, nested classes, a comprehension binding an
   attribute or an item, a call of this module's code with ``*`` or ``**``
   arguments, a property read by ``getattr`` with a default, ...); a
   generator expression kept to run later that reads a local of the
   function (only ``list``, ``sum`` and the like consume one at once); a
   call deeper than
   ``MAX_CALL_DEPTH`` or recursive; a loop whose state does not settle.
R5 *The module as loaded.* ``unknown`` unless the whole module passes the
   allow-list M1-M6 of ``as_loaded`` (module statements, the class and its
   bases, class bodies, stores anywhere, no reflection, nothing run at
   definition), and ``forward_mqa`` is a plain ``def``. The class's members
   are those its module classes define, in Python's MRO; one that an
   imported base may define first is not known. Defaults are evaluated at
   definition; a closure reads its cell when it runs (one binding, outside
   loops, or ``unknown``); calling a generator function is ``unknown``. The
   runtime checks what this reading assumed on the loaded objects
   (``loaded_code.check_assumptions``).
R6 *Verdict.* ``affected`` if R3 is certain on either walk; else
   ``unknown`` if R3-maybe or R4 happened; else ``fixed`` if the warmup
   branch (``if attn_metadata is None:``; all of ``forward_mqa`` if it has
   none) or a function the run called names the buffer; else
   ``not-affected``. ``absent``: no such class.

Assumed, not proven: code outside the module that is handed none of the
above does not reach the layer by itself (through frames, the garbage
collector, the interpreter's builtins: R5 refuses the names and the
objects that reach them; where torch and vLLM are not imported, as in
``status``, which reads files, their re-exports are judged by name only)
and does not raise for lack of the buffer (it may raise for other reasons:
``affected`` can then be wrong, never ``fixed``); attributes of the layer
other than the buffer and the R1 aliases are not derived from it: what
vLLM's imported bases' methods store, and what vLLM's and the kernel
packages' functions (flashinfer, triton, deep_gemm, einops; not torch's,
not numpy's) put into the objects they are handed, in the forward paths
too; code run while the module is imported or the layer is built
(``__init__`` and what it calls) may hand a value the buffer decides, or
run on a path a test on it chose, only to what ``aliases`` understands
(Python's builtins and ``itertools``/``collections``/``math``, containers',
strings' and tensors' own methods, torch's factories, views and
deterministic in-place functions, vLLM's code): anything else there (numpy,
torch's random numbers and switches, ``warnings``, files, logging,
nn.Module's own methods) may change what the warmup reads; outside code in
the forward paths changes no state the warmup reads later but for the forms
``aliases`` names; values the walk keeps opaque (a list or dict it built, a
comprehension's loop variable, a name nothing binds) raise nothing when
read, unless code that a test on the buffer skipped changes or reads
them: a crash
there does not depend on the buffer (it would stop those layers with a
buffer too). A context
manager other than ``torch.no_grad``-like ones may swallow an exception, so
the code after its ``with`` is walked as maybe reached. Imported bases are
outside code too: what they define is not known (R5), and their metaclass
and what they put on the class are checked on the loaded class only, by the
runtime (``status`` reads files and cannot see them).

Not judged: whether the layer can be built without the buffer. An
``__init__`` that itself fails for lack of it (an assert on it, a read off
None) stops the engine while the model is built, before any warmup runs; no
change to ``forward_mqa`` could help such a build, and the verdict speaks of
the warmup only.

Checked by execution: ``tests/test_generated_variants.py`` and ``make
fuzz`` run thousands of generated variants of the real warmup branch, in
modules that do what forks do around the class (aliases, mixins, rebinding,
defaults, closures, generators, reflection, plain constants), on synthetic
layers against these verdicts.
"""

from __future__ import annotations


from dspark_attn_plugin.warmup_shape.classify import classify_method, classify_source
from dspark_attn_plugin.warmup_shape.syntax import (
    buffer_none_test,
    class_methods,
    find_class,
    find_warmup_branch,
    is_buffer,
    names_buffer,
)
from dspark_attn_plugin.warmup_shape.verdict import (
    BUFFER_ATTR,
    RATIO_ATTR,
    Classification,
    Verdict,
)

__all__ = [
    "BUFFER_ATTR",
    "RATIO_ATTR",
    "Classification",
    "Verdict",
    "buffer_none_test",
    "class_methods",
    "classify_method",
    "classify_source",
    "find_class",
    "find_warmup_branch",
    "is_buffer",
    "names_buffer",
]
