"""Run a question's snippet ONCE in the sandbox, as its suite means it, and decide each option on the host.

A suite's section usually only defines the code under test (``def code_under_test(): ...``) and uses names
imported at the top of its file. So the snippet runs with its module context (the file's imports and
top-level definitions outside the section, :func:`~retrieval_pipeline.core.datasets.suite.reader.snippet_context`),
and the function the section defines (``code_under_test``, else its only function) is called, and awaited
when it returns a coroutine. The run (:mod:`..sandbox_side.observe_snippet`) records what happened: the
exception (type, MRO, message, pydantic's line errors) or the returned value, what was printed, and the
values of the expressions the options name. Each option's ``snippet`` claim is then decided against that
one observation, on the host (:mod:`~retrieval_pipeline.core.verifier.observation.snippet_decisions`).

An observation that cannot be trusted decides nothing: one caused by the snippet being abridged
(:mod:`~retrieval_pipeline.core.verifier.observation.abridged`: a placeholder ``...`` used as a value, a required argument
the question does not mention, a name its suite defines elsewhere), the snippet does not compile, the run crashed, ran
out of time or hit any other limit (:func:`limit_hit`), the snippet tried to get round the observer's guard or left
before the observer wrote (:func:`observe`, :mod:`..sandbox_side.guard`), it raised a ``NameError`` for a name whose
context statement failed in this environment, or what it
raised comes from the sandbox (an ``OSError``, a connection, credentials or an API key: no network here). Nor does one of
a snippet that is not the code the question describes (:func:`question_mismatch`: the question names
``sys.maxsize`` and the snippet passes ``-1``), unless the question describes the one call it means ("initialize a
`RunConfig` with `max_llm_calls` equal to `sys.maxsize`"): that call is run instead, in the snippet's module
context (:func:`described_call`).
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from retrieval_pipeline.core.services.sandbox.bubblewrap import sandboxed
from retrieval_pipeline.core.services.sandbox.redaction import safe_text
from retrieval_pipeline.core.services.sandbox.results import Execution
from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
from retrieval_pipeline.core.verifier.claims.claims import Claim, is_literal
from retrieval_pipeline.core.verifier.observation.abridged import abridged
from retrieval_pipeline.core.verifier.observation.snippet_decisions import Decision, decide_options, what_happened
from retrieval_pipeline.core.verifier.sandbox_side import source
from retrieval_pipeline.core.verifier.sandbox_side.guard import GUARD_EXIT
from retrieval_pipeline.core.verifier.verdicts.verdict import EVIDENCE_CHARS, OUTPUT_TAIL_CHARS, OptionEvidence, safe_record

#: Put between a snippet file's module context and the section in the one string a question carries as its
#: snippet (:func:`compose`), so the context travels wherever the snippet does (the verdict cache key included).
SECTION_SEPARATOR = "# ---- retrieval_pipeline: the section under test starts below ----\n"
RUNNER_FILE = "observe_snippet.py"
#: The guard the observer imports (:mod:`..sandbox_side.guard`), beside it in the working directory.
GUARD_FILE = "rp_guard.py"
#: The most bytes of the observation channel read back.
CHANNEL_BYTES = 2**21
REQUEST_FILE = "snippet_request.json"
OBSERVATION_FILE = "snippet.observation.json"
#: A run stopped by the wall clock is run once more with this many times the limit (a busy machine).
TIMEOUT_RETRY_FACTOR = 3.0
#: What a run raises because of the sandbox (no network, no credentials, read-only files), not the library.
_SANDBOX_ERRORS = frozenset({"OSError", "ConnectionError", "TimeoutError", "PermissionError"})
_SANDBOX_TYPE = re.compile(r"Credential|Auth|Connect|Network|Timeout|HTTP|Http|Transport|APIError|ServerError|ClientError")
_SANDBOX_MESSAGE = re.compile(r"api[_ ]?key|credential|GOOGLE_CLOUD_PROJECT|network|connection refused|name resolution", re.I)
_CLASSLIKE = re.compile(r"^_?[A-Z]\w*$")


def compose(section: str, context: str | None) -> str:
    """The one snippet string of a question: the module context, the separator, the section."""
    return f"{context.rstrip()}\n\n{SECTION_SEPARATOR}{section}" if context and context.strip() else section


def split(snippet: str) -> tuple[str, str]:
    """``(context, section)`` of a snippet made by :func:`compose` (no context: ``""``)."""
    context, found, section = snippet.partition(SECTION_SEPARATOR)
    return (context, section) if found else ("", snippet)


def moved_names(question: str, context: str, index: Any) -> dict[str, str]:
    """Classes the question names and the context imports ``from`` a module: name -> where the library defines
    it (the observer binds them there when the context's import fails: the class moved since the suite was written)."""
    if index is None or not context:
        return {}
    try:
        tree = ast.parse(context)
    except SyntaxError:
        return {}
    found: dict[str, str] = {}
    for node in tree.body:
        for alias in node.names if isinstance(node, ast.ImportFrom) else []:
            name = alias.name
            if name[:1].isupper() and re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", question):
                resolved = index.resolve(name)
                if resolved is not None and resolved[0] == "path":
                    found[name] = resolved[1]
    return found


def observe(
    snippet: str, claims: Sequence[Claim], settings: SandboxSettings, index: Any = None, extra: Sequence[str] = ()
) -> tuple[dict[str, Any] | None, Execution]:
    """Run the snippet once in the sandbox; the observation (None when the run sent none) and the execution.

    The observation comes back on the run's result channel, in front of a nonce made for the run
    (:mod:`..sandbox_side.observe_snippet`, :mod:`..sandbox_side.guard`): a file of the working directory is never read.
    When it does not come back so, the observation is ``{"tampered": why}`` (something else wrote on the channel, or
    the snippet wrote the observation file itself) or None (the run ended before the observer wrote it).

    ``index`` (a :class:`~retrieval_pipeline.core.verifier.proofs.library_index.LibraryIndex`) says where a class the question
    names is defined now, should the context's import of it fail (:func:`moved_names`). ``extra``: expressions to
    evaluate after the run besides those the options name.
    """
    context, section = split(snippet)
    expressions = sorted({str(c.details["expr"]) for c in claims if c.details.get("outcome") == "value"} | set(extra))
    rebind = moved_names(claims[0].question if claims else "", context, index)
    request = {"context": context, "section": section, "module_name": "__snippet__", "expressions": expressions, "rebind": rebind}

    def run(limits: SandboxSettings) -> tuple[dict[str, Any] | None, Execution]:
        nonce = secrets.token_hex(16)
        files = {RUNNER_FILE: source(RUNNER_FILE), GUARD_FILE: source("guard.py"), REQUEST_FILE: json.dumps({**request, "nonce": nonce})}
        execution, channel = sandboxed(files, [str(limits.python), RUNNER_FILE], limits, collect_suffix=".observation.json",
                                       max_artifact_bytes=2**10, channel_bytes=CHANNEL_BYTES)  # fmt: skip
        return read_channel(channel, nonce, execution), execution

    observation, execution = run(settings)
    if execution.outcome == "timeout" and execution.limit == "wall_clock":
        observation, execution = run(dataclasses.replace(settings, timeout_s=settings.timeout_s * TIMEOUT_RETRY_FACTOR))
    return observation, execution


def read_channel(channel: bytes, nonce: str, execution: Execution) -> dict[str, Any] | None:
    """The observation the observer's guard sent (``RPOBS <nonce> <json>``), ``{"tampered": why}``, or None."""
    if OBSERVATION_FILE in execution.artifacts:
        return {"tampered": f"the snippet wrote {OBSERVATION_FILE} itself (the observer never writes it)"}
    lines = channel.decode("utf-8", errors="replace").splitlines()
    prefix = f"RPOBS {nonce} "
    if any(not line.startswith(prefix) for line in lines) or len(lines) > 1:
        return {"tampered": "something other than the observer's guard wrote on the observation channel"}
    if not lines:
        return None
    try:
        observation = json.loads(lines[0][len(prefix) :])
    except ValueError:
        return {"tampered": "the observation on the channel is not JSON"}
    return observation if isinstance(observation, dict) else {"tampered": "the observation on the channel is not an object"}


def untrusted(observation: Mapping[str, Any] | None, execution: Execution | None = None) -> str | None:
    """Why the observation decides nothing, or None when it can be trusted.

    Besides what the observation says: a run that hit a limit (wall clock, CPU, memory, processes, file size: what it
    did is not what it would do), a run the guard stopped (:mod:`..sandbox_side.guard`), a tampered observation, and a
    run that ended before the observer wrote one (``os._exit``, a signal, a crash) decide nothing.
    """
    limit = limit_hit(execution)
    if limit is not None:
        return f"the snippet's run hit a limit ({limit}), so what it did is not what it would do unlimited"
    refused = guard_refusal(execution)
    if refused is not None:
        return f"the snippet tried to get round the observer's guard ({refused}): its observation cannot be trusted"
    if observation is not None and observation.get("threads_running"):
        return (f"{observation['threads_running']} thread(s) of the snippet were still running when the observer described "
                "what it did, and could have changed the description")  # fmt: skip
    if observation is not None and "tampered" in observation:
        return f"the observation was tampered with: {observation['tampered']}"
    if observation is None:
        return (f"the snippet's run ended before the observer wrote its observation (outcome {getattr(execution, 'outcome', None)!r}, "
                f"exit code {getattr(execution, 'exit_code', None)!r}: os._exit, a signal or a crash)")  # fmt: skip
    if observation.get("stage") == "compile":
        return f"the snippet does not compile: {observation.get('compile_error')}"
    if observation.get("only_defines") and not observation.get("called") and not observation.get("raised"):
        return "the section only defines things and names no single function to call (code_under_test), so nothing it does was run"
    raised = observation.get("raised") or {}
    if raised and (set(raised.get("mro") or []) & _SANDBOX_ERRORS or _SANDBOX_TYPE.search(str(raised.get("type")))
                   or _SANDBOX_MESSAGE.search(str(raised.get("message")))):  # fmt: skip
        return (f"the snippet raised {raised.get('type')} ({str(raised.get('message'))[:160]}): the sandbox has no network, "
                "credentials or writable files, so this says nothing about the library")  # fmt: skip
    failed = {name for f in observation.get("context_failures") or [] for name in f.get("names", [])}
    if raised.get("type") == "NameError" and raised.get("name") in failed:
        errors = "; ".join(f["error"] for f in observation["context_failures"] if raised["name"] in f.get("names", []))
        return f"the snippet's module context does not run here ({errors}), so {raised['name']!r} is undefined"
    return None


def limit_hit(execution: Execution | None) -> str | None:
    """The limit a run hit (``wall_clock``, ``cpu``, ``memory``, ``processes``, ``file_size``), or None."""
    if execution is None:
        return None
    if execution.limit:
        return execution.limit
    if execution.memory_limit_hit:
        return "memory"
    return "processes" if execution.pids_limit_hit else None


def guard_refusal(execution: Execution | None) -> str | None:
    """What the guard refused, when it ended the run (exit status :data:`GUARD_EXIT`); None otherwise."""
    if execution is None or execution.exit_code != GUARD_EXIT:
        return None
    found = re.findall(r"\[rp-guard\] refused: ([^\n]*)", execution.stderr)
    return found[-1][:200] if found else "the guard ended the run"


def question_mismatch(question: str, snippet: str) -> str | None:
    """Why the snippet is not the code the question describes, or None.

    The question names code in backticks; a span that is an expression or a value (``sys.maxsize``,
    ``summarizer='x'``, ``max_llm_calls=0``) must appear in the snippet or its module context (spaces and quote
    style aside). A bare name (``ttl_seconds``, ``SequentialAgent``) need not: questions name parameters and
    classes to say they are left out or misused.
    """

    def squeeze(text: str) -> str:
        return re.sub(r"\s+", "", text).replace("'", '"')

    code = squeeze(snippet)
    for match in re.finditer(r"`([^`\n]+)`", question):
        span = match.group(1).strip()
        if not span or squeeze(span) in code:
            continue
        if re.fullmatch(r"[A-Za-z_]\w*", span):
            continue  # a name (a parameter, a class) is often named to say it is left out or misused
        return f"the question names `{span}`, which the snippet does not contain: the snippet is not the code it describes"
    return None


#: One argument a question describes: "`max_llm_calls` equal to `sys.maxsize`" (``as``, ``set to``, ``=`` alike).
_ARGUMENT = (r"`(?P<param>[A-Za-z_]\w*)`(?:\s+(?:argument|parameter|field))?\s+(?:equal\s+to|set\s+to|as|=)\s+"
             r"`(?P<value>[^`\n]+)`")  # fmt: skip
_ANY_ARGUMENT = re.sub(r"\(\?P<\w+>", "(?:", _ARGUMENT)
#: "You initialize a `RunConfig` with `max_llm_calls` equal to `sys.maxsize` (and `x` set to `1`)": the one call a
#: question describes, with each argument it names.
_DESCRIBED_CALL = re.compile(
    r"\b(?:initiali[sz]e|create|construct|instantiate|build)\s+(?:an?\s+|the\s+)?`(?P<callee>[A-Za-z_][\w.]*)`\s+with\s+(?:the\s+)?"
    rf"(?P<arguments>{_ANY_ARGUMENT}(?:\s*(?:,\s*(?:and\s+)?|and\s+)(?:the\s+)?{_ANY_ARGUMENT})*)",
    re.I,
)


def described_call(question: str, snippet: str) -> tuple[str, tuple[str, ...]] | None:
    """The code to run instead of a snippet that is not the code the question describes (:func:`question_mismatch`),
    when the question describes one call (``initialize a `C` with `p` equal to `v``` and any more ``and `q` set to `w```):
    the snippet's module context and a ``code_under_test`` making that call with every argument named, and the values'
    texts (``v``, ``w``); None when the question describes none, or the call is no Python."""
    match = _DESCRIBED_CALL.search(question)
    if match is None or not _CLASSLIKE.match(match.group("callee").rsplit(".", 1)[-1]):
        return None
    pairs = [(m.group("param"), m.group("value").strip()) for m in re.finditer(_ARGUMENT, match.group("arguments"), re.I)]
    call = f"{match.group('callee')}({', '.join(f'{param}={value}' for param, value in pairs)})"
    try:
        ast.parse(call, mode="eval")
    except SyntaxError:
        return None
    return compose(f"def code_under_test():\n    {call}\n", split(snippet)[0] or None), tuple(value for _, value in pairs)


def _valued(claim: Claim, text: str, value: Mapping[str, Any] | None) -> Claim:
    """The claim with ``text`` (an expression the question names, ``sys.maxsize``) replaced by its value in the texts it
    compares (a message states the value, not the expression); unchanged when the value is unknown."""
    if not value or "error" in value or not value.get("repr"):
        return claim
    keys = ("message", "describes", "output_text")
    changed = {k: str(claim.details[k]).replace(text, str(value["repr"])) for k in keys if isinstance(claim.details.get(k), str)}
    return dataclasses.replace(claim, details={**claim.details, **changed})


def snippet_evidence(
    claims: Sequence[Claim], snippet: str, settings: SandboxSettings, index: Any = None, options: Sequence[str] = ()
) -> list[OptionEvidence]:
    """One observation of the snippet, then an :class:`OptionEvidence` per ``snippet`` claim, in order. A snippet that is
    not the code the question describes is replaced by the call the question describes, if it describes one
    (:func:`described_call`). ``options``: every option's text (the claims' by default), for what the question
    mentions (:func:`~retrieval_pipeline.core.verifier.observation.abridged.abridged`)."""
    question = claims[0].question if claims else ""
    mismatch = question_mismatch(question, snippet) if claims else None
    found = described_call(question, snippet) if mismatch else None
    described, values = found if found is not None and question_mismatch(question, found[0]) is None else (None, ())
    if described is not None:
        snippet, mismatch = described, None
    observation, execution = observe(snippet, claims, settings, index, extra=list(values))
    for value in values if observation is not None else ():
        if not is_literal(value):
            claims = [_valued(c, value, (observation.get("expressions") or {}).get(value)) for c in claims]
    why = untrusted(observation, execution) or mismatch
    if not why and observation is not None:
        context, section = split(snippet)
        why = abridged(observation, section, context, question, list(options) or [c.option_text for c in claims])
    decided: list[Decision] = (
        [("undecided", f"undecided: {why}")] * len(claims) if why or observation is None else decide_options(claims, observation)
    )
    record = {} if observation is None or "tampered" in observation or "threads_running" in observation else {
        "observed": what_happened(observation),
        "ran": None if described is None else split(described)[1],
        "called": observation.get("called"),
        "stdout": observation.get("stdout"),
        "context_failures": observation.get("context_failures"),
        "rebound": {k: v for f in observation.get("context_failures") or [] for k, v in (f.get("rebound") or {}).items()},
        "errors": (observation.get("raised") or {}).get("errors"),
    }  # fmt: skip
    evidence = []
    for claim, (state, note) in zip(claims, decided):
        ok = {"true": True, "false": False}.get(state)
        evidence.append(
            OptionEvidence(
                letter=claim.letter, claim=claim, proof_status="proof", option_true=ok, state=state,
                note=safe_text(note if state != "undecided" or note.startswith("undecided") else f"undecided: {note}", EVIDENCE_CHARS),
                stdout=safe_text(execution.stdout, OUTPUT_TAIL_CHARS, keep="tail"),
                stderr=safe_text(execution.stderr, OUTPUT_TAIL_CHARS, keep="tail"),
                exit_code=execution.exit_code, outcome=execution.outcome, limit=limit_hit(execution), duration_s=execution.duration_s,
                record=safe_record(record), prover="offline",
            )
        )  # fmt: skip
    return evidence
