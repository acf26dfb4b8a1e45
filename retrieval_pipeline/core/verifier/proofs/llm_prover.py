"""A prover whose proofs an LLM writes, behind the same :class:`~retrieval_pipeline.core.verifier.proofs.provers.Prover`
protocol as the offline prover.

For each option the LLM (through :class:`~retrieval_pipeline.core.services.llm.client.LLMClient`: cache, retries, JSON
re-asks) writes a function ``check()`` whose ``assert`` statements hold exactly when the option is true. It sees
the question, the option and the library's name and version; never the marked answer or the other options.
The function is screened (:func:`screen_check`), wrapped (:func:`wrap_check`) in a pytest file with the offline
prover's evidence protocol, and runs in the same sandbox as every other proof.

**Two independent answers must agree.** In a second request, made apart from the first, the LLM writes a
refutation: a ``check()`` whose assertions hold exactly when the option is false. The option is true only when the
check holds and the refutation fails, false only when the check fails and the refutation holds; otherwise it stays
undecided. A small model's wrong but plausible test (a wrong expected value, a misread API) then disagrees with the
refutation, and cannot make a true option false (``refute=False`` restores one-check decisions).

**Errors decide nothing.** The option is false only when an ``assert`` statement *of the generated check*
fails: the wrapper reads the traceback, and an ``AssertionError`` raised anywhere else (inside the library, by
``raise``), any other exception, a timeout or a crash leaves the option undecided. A check with no ``assert``
proves nothing and is refused before it runs.

**Vacuous answers decide nothing.** A check (or refutation) whose every assertion only says that something exists
(``X is not None``, ``hasattr``, ``isinstance(X, type)``) is refused: the offline prover already decides whether names
exist, and such a refutation holds whether the option is true or not: paired with a check that has a wrong expected
value (a small model writes both), it would make a true option false.

**One model may be hostile** (docs/verifier.md, "Threat model"). Its check and its refutation come from the same model,
so they are not independent: a model that wants an option true writes a check that holds and a refutation that fails.
So a check of this prover decides no option alone: one that holds (with its refutation failing) makes the option
``consistent`` only, never ``true``, and its "false" stands only beside an option proven true by the offline prover or
the snippet's observation (:func:`~retrieval_pipeline.core.verifier.verify.second_opinion`). Against one hostile model
the two answers then only keep an honest small model's wrong test from deciding; what decides a verdict is always
an offline proof or the observation. Its checks run as every proof does: in the sandbox, under the guard (they
cannot write the evidence file; :mod:`..sandbox_side.guard`).

**Screening** (a filter of the obvious; the sandbox and the guard are the boundary): a script whose ``assert``
statements are at top level becomes the body of ``check()`` (:func:`as_check`); then a check that does not parse,
defines no ``check()``, imports network, process or FFI modules, reads the environment, calls ``os.system``/``exec``/
``eval``/``__import__``, names the evidence file or the wrapper's helpers, or exits the interpreter is refused; and
so is one that reaches a name the screen cannot read: ``getattr``/``setattr``/``vars``/``globals`` with a computed
name, ``chr``, introspection attributes (``__dict__``, ``__globals__``, ``__subclasses__``, frames), or a string
built from literal parts (``'ki' + 'll'``, ``'/pr' + 'oc'``, ``''.join(...)``, a reversed slice). The option stays
undecided, with the reason. A screen of source text cannot be complete (a check can compute a string in ways no
rule lists): what a check that passes it can do is bounded by the sandbox and the guard, and it decides nothing
alone.

**Budget.** ``max_calls`` caps how many options one prover asks about (the client caps retries per call); past
it, options stay undecided ("the LLM budget is spent").
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import threading
from typing import Any

import pydantic

from retrieval_pipeline.core.common.astutil import dotted_name
from retrieval_pipeline.core.services.llm.client import LLMClient
from retrieval_pipeline.core.verifier.claims.claims import Claim
from retrieval_pipeline.core.verifier.proofs.library_index import LibraryIndex
from retrieval_pipeline.core.verifier.proofs.proof_source import compose, proof_test, safe_letter
from retrieval_pipeline.core.verifier.proofs.provers import Proof
from retrieval_pipeline.core.verifier.sandbox_side import llm_check, source

#: The file name the generated code is compiled under; the wrapper trusts only assert statements from it.
GENERATED_FILE: str = llm_check.GENERATED_FILE
#: The wrapper that runs a generated check and decides the option by its assert statements.
WRAPPER_SOURCE = source("llm_check.py")
#: Modules a generated check may not import (network, processes, FFI, the host's users).
FORBIDDEN_MODULES = frozenset(
    "socket ssl subprocess multiprocessing ctypes cffi urllib http requests httpx aiohttp urllib3 ftplib smtplib poplib imaplib "
    "telnetlib xmlrpc socketserver asyncio.subprocess pty pwd grp spwd crypt resource signal shutil webbrowser".split()
)
#: Calls a generated check may not make.
FORBIDDEN_CALLS = frozenset(
    "exec eval compile __import__ open_code breakpoint exit quit os.system os.popen os.exec os.execv os.execve os.execl os.execlp "
    "os.spawnl os.spawnv os.fork os.forkpty os.kill os.killpg os._exit os.getenv os.putenv os.unsetenv os.setuid os.chmod os.chown "
    "os.remove os.unlink os.rmdir os.removedirs os.rename os.replace os.symlink os.link sys.exit importlib.import_module".split()
)
#: Names of the wrapper (and of the evidence protocol) a generated check may not touch.
WRAPPER_NAMES = frozenset(
    "_record _true _false _undecided _from_generated_assert _run_generated _assert_lines _prove_generated _outcome EVIDENCE GENERATED_FILE "
    "REFUTATION_FILE PROOF _rp_guard_install _RP_GUARDED GUARD_EXIT "
    "environ environb".split()
)

_SYSTEM = """You write one Python check that decides whether an answer option of a multiple-choice question about a \
Python library is TRUE for the library installed here.

Reply with one JSON object: {"test_code": "<python source>", "rationale": "<one sentence>"}.

Rules for test_code:
- Define `def check():` (no arguments). Its `assert` statements must ALL hold if and only if the option is true; \
an option that is false must make one of them fail. Use plain `assert` statements, with a message.
- Import what you need inside check(): the library under test and the Python standard library only.
- Exercise the real library: construct objects, call functions, inspect signatures, fields, defaults, exceptions.
- No network, no subprocesses, no environment variables, no files outside the current directory.
- Do not catch AssertionError, do not call sys.exit, do not write pytest tests or fixtures.
- If something needed does not exist, let the exception propagate (that is not an answer).
- `where_the_library_defines` (when given) says where the installed library defines the names the question and the \
option use: import them from there.
"""

#: What the second, independent request asks for: a check that holds exactly when the option is FALSE.
_REFUTE = (
    "This time write the REFUTATION: `check()`'s assert statements must ALL hold if and only if the option is FALSE; "
    "an option that is true must make one of them fail. Decide it from the library itself, not from the wording."
)


#: A name as the question or the option writes it (``RunConfig``, ``runner.run_async``, ``types.Part``).
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
#: The most names located for one prompt.
MAX_LOCATED = 8


def located_names(text: str, index: LibraryIndex) -> dict[str, str]:
    """The names in ``text`` the probed library defines, with where (``RunConfig`` -> its fully qualified name).

    A name counts when it is capitalised (a class) or written in backticks (``runner.run_async`` -> ``Runner``);
    only the first part of a dotted name is looked up. At most :data:`MAX_LOCATED`, in order of appearance.
    """
    quoted = {m.split(".")[0] for span in re.findall(r"`([^`]+)`", text) for m in _NAME.findall(span)}
    found: dict[str, str] = {}
    for match in _NAME.finditer(text):
        head = match.group(0).split(".")[0]
        if head in found or not (head[:1].isupper() or head in quoted):
            continue
        resolved = index.resolve(head)
        if resolved is not None:
            found[head] = resolved[1]
        if len(found) >= MAX_LOCATED:
            break
    return found


class GeneratedCheck(pydantic.BaseModel):
    """The LLM's answer: the source of ``check()`` and why it decides the option."""

    test_code: str = pydantic.Field(min_length=1, max_length=20000)
    rationale: str = ""


def _import_problem(node: ast.AST) -> str | None:
    modules: list[str] = []
    if isinstance(node, ast.Import):
        modules = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module:
        modules = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    for module in modules:
        parts = module.split(".")
        if any(".".join(parts[: i + 1]) in FORBIDDEN_MODULES for i in range(len(parts))):
            return f"imports {module}"
    return None


#: Calls that reach an attribute, a namespace or a character by a computed name or number.
DYNAMIC_CALLS = frozenset(
    "getattr setattr delattr hasattr globals locals vars chr operator.attrgetter operator.methodcaller attrgetter "
    "methodcaller bytes.fromhex codecs.decode codecs.encode".split()
)
#: Attributes that lead from an object to namespaces, frames or every class (the ways out of a screened name).
INTROSPECTION_ATTRS = frozenset(
    "__dict__ __getattribute__ __getattr__ __globals__ __builtins__ __subclasses__ __bases__ __base__ __mro__ __code__ "
    "__closure__ __import__ __loader__ __spec__ __self__ __func__ __reduce__ __reduce_ex__ f_globals f_locals f_back "
    "f_builtins tb_frame gi_frame cr_frame ag_frame _getframe".split()
)


def _is_text(node: ast.AST) -> bool:
    """A string or bytes literal, an f-string of literals only, or a concatenation/format of such."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str | bytes)
    if isinstance(node, ast.JoinedStr):
        return all(isinstance(v, ast.Constant) for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod | ast.Mult):
        return _is_text(node.left) or _is_text(node.right)
    return False


def _dynamic_problem(node: ast.AST) -> str | None:
    """Why a node reaches something by a name the screen cannot read (a computed attribute, a string built from parts)."""
    if isinstance(node, ast.Call):
        called = dotted_name(node.func)
        if called in DYNAMIC_CALLS:
            literal_name = called in ("getattr", "hasattr") and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
            if not literal_name:
                return f"calls {called} (an attribute, a namespace or a character reached by a computed name)"
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("join", "format", "decode", "translate", "replace"):
            if _is_text(node.func.value):
                return f"builds a string from parts with .{node.func.attr}(), which could spell a name the screen refuses"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod | ast.Mult) and _is_text(node.left) and _is_text(node.right):
        return "builds a string from literal parts, which could spell a name or a path the screen refuses"
    if (
        isinstance(node, ast.JoinedStr)
        and len(node.values) > 1
        and all(isinstance(v, ast.Constant | ast.FormattedValue) for v in node.values)
    ):
        if all(isinstance(v, ast.Constant) or isinstance(v.value, ast.Constant) for v in node.values):
            return "builds a string from literal parts in an f-string"
    if isinstance(node, ast.Subscript) and _is_text(node.value) and isinstance(node.slice, ast.Slice) and node.slice.step is not None:
        return "reorders a string literal with a slice step"
    if isinstance(node, ast.Attribute) and node.attr in INTROSPECTION_ATTRS:
        return f"uses the attribute {node.attr} (a way to namespaces, frames or every class)"
    if isinstance(node, ast.Name) and node.id in ("__builtins__", "__import__", "__loader__", "__spec__"):
        return f"uses the name {node.id}"
    return None


def _node_problem(node: ast.AST) -> str | None:
    """Why one node of a generated check is refused, or None."""
    problem = _import_problem(node) or _dynamic_problem(node)
    if problem:
        return problem
    if isinstance(node, ast.Call):
        called = dotted_name(node.func)
        if called and (called in FORBIDDEN_CALLS or called.split(".")[-1] in {"system", "popen", "_exit", "getenv"}):
            return f"calls {called}"
    if isinstance(node, ast.Name) and node.id in WRAPPER_NAMES:
        return f"uses the name {node.id}"
    if isinstance(node, ast.Attribute) and node.attr in WRAPPER_NAMES | {"environ", "environb", "_exit", "modules"}:
        return f"uses the attribute {node.attr}"
    if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
        text = node.value.decode("latin-1") if isinstance(node.value, bytes) else node.value
        if "evidence" in text.lower() or text.startswith("/proc") or "/.ssh" in text or "shadow" in text:
            return f"holds the string {text[:60]!r}"
    return None


#: Calls that only say a thing exists (``callable(X)``, ``hasattr(m, "X")``, ``inspect.isclass(X)``).
EXISTENCE_CALLS = frozenset("callable hasattr inspect.isclass inspect.isfunction inspect.ismodule inspect.ismethod".split())


def existence_only(test: ast.expr) -> bool:
    """Whether an assert's test only says that something exists: ``X``, ``m.X``, ``X is not None``, ``callable(X)``,
    ``hasattr(m, "X")``, ``isinstance(X, type)`` (or an ``and`` of such tests)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return all(existence_only(v) for v in test.values)
    if isinstance(test, ast.Name | ast.Attribute):
        return True
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot):
        right = test.comparators[0]
        return isinstance(right, ast.Constant) and right.value is None
    if isinstance(test, ast.Call):
        called = dotted_name(test.func)
        if called in EXISTENCE_CALLS:
            return True
        if called == "isinstance" and len(test.args) == 2:
            return isinstance(test.args[1], ast.Name) and test.args[1].id == "type"
    return False


def screen_check(source: str) -> str | None:
    """Why a generated check is refused before it runs, or None when it may run (see the module docstring).

    Args:
        source: The generated Python source.

    Returns:
        A one-line reason, or None.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        return f"it does not parse: {exc}"
    checks = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == "check"]
    if not checks:
        return "it defines no top-level check()"
    asserts = [n for n in ast.walk(checks[0]) if isinstance(n, ast.Assert)]
    if not asserts:
        return "check() has no assert statement, so it would prove nothing"
    for node in ast.walk(tree):
        problem = _node_problem(node)
        if problem:
            return problem
    if all(existence_only(a.test) for a in asserts):
        return "check() only asserts that names exist, which decides no option the offline proofs left open"
    return None


def as_check(source: str) -> str:
    """``source`` with its top-level statements made the body of ``check()``, when it is a script that asserts at top
    level and defines no ``check()`` (a small model often writes the asserts so, whatever the prompt says); otherwise
    ``source`` unchanged. The statements are moved in the syntax tree (string literals keep their exact text) and the
    result is screened like any other check.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return source
    defines_check = any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == "check" for n in tree.body)
    if defines_check or not any(isinstance(n, ast.Assert) for n in tree.body):
        return source
    wrapped = ast.parse("def check():\n    pass\n")
    wrapped.body[0].body = tree.body  # type: ignore[attr-defined]
    return ast.unparse(wrapped) + "\n"


def wrap_check(claim: Claim, code: str, prover: str, refutation: str | None = None) -> str:
    """The pytest file for a generated check (and its refutation): the offline prover's prelude, the wrapper
    (``sandbox_side/llm_check.py``) and a test that runs them, given as literals."""
    doc = f"LLM proof ({prover}) for case {claim.case_id!r}, option {claim.letter!r}: {claim.hypothesis}"
    data = {"generated": code} if refutation is None else {"generated": code, "refutation": refutation}
    return compose(doc, WRAPPER_SOURCE, proof_test(safe_letter(claim.letter), "_prove_generated", data))


class LLMProver:
    """Proofs written by an LLM (see the module docstring); ``name`` is ``llm:<model>``.

    Args:
        client: The LLM layer's client (cache, retries, JSON re-asks).
        library: The library under test, as the prompt names it (``google-adk 2.13.0``).
        import_name: Its module (``google.adk``).
        max_calls: The most options this prover asks the LLM about; None: no cap.
        refute: Ask a second time, independently, for a refutation (a check that holds exactly when the option is
            false), and decide only when the check and the refutation agree. On by default: a small model's wrong
            test then cannot make a true option false on its own. Off: one check decides (half the calls).
        index: The probed library: the prompt then says where the library defines the names the question and the
            option use (:func:`located_names`), so that a model that does not know the library imports them from
            where they are.
    """

    def __init__(
        self,
        client: LLMClient,
        *,
        library: str | None = None,
        import_name: str | None = None,
        max_calls: int | None = None,
        refute: bool = True,
        index: LibraryIndex | None = None,
    ) -> None:
        self.client = client
        self.library = library
        self.import_name = import_name
        self.max_calls = max_calls
        self.refute = refute
        self.index = index
        self.name = f"llm:{client.settings.model}"
        self._asked = 0
        self._lock = threading.Lock()

    def messages(self, claim: Claim, write: str = "check") -> list[dict[str, Any]]:
        """The chat messages for one option's check (``write="refutation"``: its refutation): the question, the option
        and the library; never the marked answer."""
        task = {
            "library": self.library or "the Python standard library",
            "import_name": self.import_name,
            "question": claim.question,
            "option": claim.option_text,
            "what_the_option_claims": claim.hypothesis if claim.kind != "unknown" else None,
            "write": write,
        }
        located = located_names(f"{claim.question}\n{claim.option_text}", self.index) if self.index is not None else {}
        if located:
            task["where_the_library_defines"] = located
        system = _SYSTEM if write == "check" else _SYSTEM + "\n" + _REFUTE
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": json.dumps(task, ensure_ascii=False, indent=1)},
        ]

    def _generate(self, claim: Claim, write: str) -> tuple[str | None, str | None]:
        """``(code, None)``, or ``(None, why there is none)``: the LLM's answer, screened."""
        call = self.client.complete_json(self.messages(claim, write), GeneratedCheck)
        if not call.ok or call.value is None:
            return None, f"the LLM gave no usable {write}: {call.error}"
        code = as_check(str(call.value["test_code"]))
        problem = screen_check(code)
        return (None, f"the generated {write} was refused: {problem}") if problem else (code, None)

    def prove(self, claim: Claim) -> Proof:
        """A pytest file for the option, or no proof with the reason (the option then stays undecided)."""
        if claim.kind == "none_of_the_above":
            return Proof(claim, None, "unverifiable_offline", None, "derived from the other options", prover=self.name)
        # the generated check tests the whole option, not a necessary condition of it, nor one of its alternatives
        claim = dataclasses.replace(claim, details={**claim.details, "decides": "truth", "disjunctive": False})
        with self._lock:
            spent = self.max_calls is not None and self._asked >= self.max_calls
            self._asked += 0 if spent else 1
        if spent:
            return Proof(claim, None, "unverifiable_offline", None, f"the LLM budget is spent ({self.max_calls} options)", prover=self.name)
        code, why = self._generate(claim, "check")
        refutation = None
        if code is not None and self.refute:
            refutation, why = self._generate(claim, "refutation")
        if code is None or (self.refute and refutation is None):
            return Proof(claim, None, "unverifiable_offline", None, str(why), prover=self.name)
        source = wrap_check(claim, code, self.name, refutation)
        return Proof(claim, source, "proof", f"test_option_{safe_letter(claim.letter)}.py", prover=self.name)
