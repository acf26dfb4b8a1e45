"""Run a question's snippet ONCE in the sandbox, as its suite means it, and decide each option on the host.

A suite's section usually only defines the code under test (``def code_under_test(): ...``) and uses names
imported at the top of its file. So the snippet runs with its module context (the file's imports and
top-level definitions outside the section, :func:`~retrieval_pipeline.core.datasets.suite.reader.snippet_context`),
and the function the section defines (``code_under_test``, else its only function) is called, and awaited
when it returns a coroutine. The run (:mod:`..sandbox_side.observe_snippet`) records what happened: the
exception (type, MRO, message, pydantic's line errors) or the returned value, what was printed, and the
values of the expressions the options name. Each option's ``snippet`` claim is then decided against that
one observation (:func:`decide_option`):

* ``raises`` with a quoted message (``ValueError: Agent name cannot be `user`.``): the type must match (the
  class or a base of it; a pydantic ``ValidationError`` counts as a ``ValueError``/``AssertionError`` only
  when a validator raised one) and the message must match after normalising case, quotes, backticks,
  ``[type=..., input_value=...]`` details, a parenthesised comment and a trailing ellipsis (word for word, or
  every key term). A message that differs in substance (under half of its key terms are in the raised one) makes
  the option false: same type, other message is another outcome. One that partly matches (half or more) is false
  when another option quotes the raised message word for word, and otherwise undecided (neither consistent nor
  false: it may be a paraphrase);
* ``raises`` with a description (``A ValidationError indicating the name is reserved``): the type must
  match; true when every key term of the description is in the message, else ``consistent``;
* ``raises`` with something more (``RuntimeError on initialization``): false when the type does not match,
  else ``consistent``; a bare type (``TypeError.``) is decided by the type alone;
* ``runs`` (``No error.``): true when nothing was raised; what follows (``No error, but the second agent
  will be ignored``) is a claim of its own: false when something was raised, else ``consistent``;
* ``prints`` and ``value``: false when the snippet raised (the state is never reached), else compared;
* ``output`` (a plain text option of a question about what the code returns, prints, which message or
  substring comes out or which error it gives): true when the text is part of what the called function returned
  (a string) or printed, word for word or every key term, and false when it is not; when the snippet raised, true
  when the text is in the exception's message or one of its per-field errors, false when it holds under half of
  their key terms and another option quotes one word for word, else undecided (the question may mean the
  message);
* ``field_error`` ("The `type` field is missing"): against the per-field errors
  (:mod:`~retrieval_pipeline.core.verifier.observation.snippet_errors`).

``consistent`` is what a passing necessary check gives elsewhere: it never makes the option true, and the
verdict can only reach Valid by elimination (every other option false).

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
from retrieval_pipeline.core.verifier.claims.claims import Claim
from retrieval_pipeline.core.verifier.observation.abridged import abridged
from retrieval_pipeline.core.verifier.observation.printed_output import PART_OF_OUTPUT, WHOLE_OUTPUT, decide_printed, decide_rest
from retrieval_pipeline.core.verifier.observation.snippet_errors import decide_field_error
from retrieval_pipeline.core.verifier.sandbox_side import source
from retrieval_pipeline.core.verifier.sandbox_side.guard import GUARD_EXIT
from retrieval_pipeline.core.verifier.verdicts.verdict import EVIDENCE_CHARS, OUTPUT_TAIL_CHARS, OptionEvidence, OptionState, safe_record

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
#: Words that carry no meaning of their own in a message.
_STOP = frozenset(
    "the and for with that this these those are was were has have had been being its into from then than "
    "when will would should shows show".split()
)
#: What a run raises because of the sandbox (no network, no credentials, read-only files), not the library.
_SANDBOX_ERRORS = frozenset({"OSError", "ConnectionError", "TimeoutError", "PermissionError"})
_SANDBOX_TYPE = re.compile(r"Credential|Auth|Connect|Network|Timeout|HTTP|Http|Transport|APIError|ServerError|ClientError")
_SANDBOX_MESSAGE = re.compile(r"api[_ ]?key|credential|GOOGLE_CLOUD_PROJECT|network|connection refused|name resolution", re.I)
#: pydantic line-error type -> the exception a validator raised to cause it.
_WRAPPED = {"value_error": "ValueError", "assertion_error": "AssertionError"}
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


def what_happened(observation: Mapping[str, Any]) -> str:
    """One line: what the run did."""
    raised = observation.get("raised")
    if raised:
        message = " ".join(str(raised["message"]).split())
        return f"raises {raised['type']}: {message if len(message) <= 240 else message[:237] + '...'}"
    returned = observation.get("returned")
    called = f"{observation['called']}() " if observation.get("called") else ""
    return f"{called}runs without an exception" + (f" and returns {returned['repr']}" if returned else "")


def type_matches(name: str, raised: Mapping[str, Any]) -> bool:
    """Whether the exception named in an option is what was raised (its class or a base of it; see the module docstring)."""
    short = name.rsplit(".", 1)[-1]
    if short == raised.get("type"):
        return True
    names = set(raised.get("mro") or [])
    errors = raised.get("errors") or []
    if "ValidationError" in names and errors:
        names.discard("ValueError")
        names |= {_WRAPPED[e["type"]] for e in errors if e.get("type") in _WRAPPED}
    return short in names


def _normal(text: str) -> str:
    text = re.sub(r"\[[^\]]*(?:\]|$)", " ", str(text))  # pydantic's [type=..., input_value=...] details, cut or whole
    text = re.sub(r"for further information visit\s+\S+", " ", text, flags=re.I)  # pydantic's link, versioned
    text = re.sub(r"[`'\"\u2018\u2019\u201c\u201d]", "", text.lower())
    text = re.sub(r"(?:\.\.\.|\u2026)", " ", text)
    return re.sub(r"\s+", " ", text).strip(" .:;,!")


def _terms(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9_]+", _normal(text)) if len(w) >= 3 and w not in _STOP]


def _messages(raised: Mapping[str, Any]) -> list[str]:
    """The texts an option may quote: the message, and each line error's (with pydantic's "Value error, " cut), alone
    and with its field before or after it (``author Field required``, ``Field required: author``)."""
    texts = [str(raised.get("message", ""))]
    for error in raised.get("errors") or []:
        msg = re.sub(r"^(?:value error|assertion failed),\s*", "", str(error.get("msg", "")), flags=re.I)
        parts = [str(part) for part in error.get("loc", [])]
        texts += [msg, " ".join([*parts, msg]), f"{msg}: {'.'.join(parts)}"] if parts else [msg]
    return texts


def message_match(option: str, raised: Mapping[str, Any]) -> tuple[str, float]:
    """``("quoted" | "match" | "differs" | "partial", coverage)``: how the option's message compares with what was
    raised (``quoted``: it is part of a raised message, word for word after normalising; ``match``: every key term
    is in one; ``differs``: fewer than half are)."""
    quoted = re.sub(r"\([^)]*\)", " ", option)  # "(shows the provided name)": a comment on the message
    wanted = _normal(quoted)
    texts = [_normal(t) for t in _messages(raised)]
    if wanted and any(wanted in t for t in texts):
        return "quoted", 1.0
    terms = _terms(quoted)
    have = set(_terms(" ".join(texts)))
    coverage = sum(t in have for t in terms) / len(terms) if terms else 0.0
    if terms and coverage == 1.0:
        return "match", coverage
    return ("differs" if coverage < 0.5 else "partial"), coverage


#: A claim's state against the observation, and why.
Decision = tuple[OptionState, str]


def decide_option(details: Mapping[str, Any], observation: Mapping[str, Any]) -> Decision:
    """The state of one claim against a trusted observation, and why (see the module docstring).

    ``consistent``: what the observation can check holds (nothing was raised; the type matches) and the rest of the
    option is not checked. A quoted message that differs comes back ``undecided`` with a note starting
    ``"message differs"`` (or ``"message partly"``): :func:`decide_options` settles it against the other options.
    """
    raised, happened = observation.get("raised"), what_happened(observation)
    outcome = details["outcome"]
    rest = details.get("rest")
    if outcome == "field_error":
        return decide_field_error(details, raised, happened)  # type: ignore[return-value]
    if outcome == "runs":
        if raised:
            return "false", f"the snippet {happened}"
        said = decide_rest(rest, observation) if rest else None
        if said is not None:
            return said  # type: ignore[return-value]
        if rest:
            return "consistent", f"the snippet {happened}; the rest of the option ({rest!r}) is a claim of its own, not checked"
        return "true", f"the snippet {happened}"
    if outcome == "raises":
        if not raised:
            return "false", f"the snippet {happened}"
        if not type_matches(str(details["exception"]), raised):
            if rest and re.search(r"(?:Error|Exception|Warning)\b", rest):  # "KeyError or ValueError": another one offered
                return "undecided", f"undecided: the snippet {happened}; the option offers another exception too ({rest!r})"
            return "false", f"the snippet {happened}; not {details['exception']}"
        if details.get("message"):
            found, coverage = message_match(str(details["message"]), raised)
            if found in ("quoted", "match"):
                return "true", f"the snippet {happened}"
            if found == "differs":
                return "undecided", f"message differs: the snippet {happened} ({coverage:.0%} of the option's key terms)"
            return "undecided", f"message partly: the type matches, {coverage:.0%} of the message's key terms: the snippet {happened}"
        if details.get("describes"):
            terms = _terms(str(details["describes"]))
            have = set(_terms(" ".join(_messages(raised))))
            if terms and all(t in have for t in terms):
                return "true", f"the snippet {happened}"
            missing = [t for t in terms if t not in have]
            return "consistent", f"the type matches; the message does not name {missing}: the snippet {happened}"
        if rest:
            return "consistent", f"the type matches; the rest of the option ({rest!r}) is not checked: the snippet {happened}"
        return "true", f"the snippet {happened}"
    if raised and outcome == "output":  # the message may be the text the question asks about
        found, coverage = message_match(str(details["output_text"]), raised)
        if found == "match" and details.get("substring"):
            return "consistent", f"terms only: every key term is in the message, not as one substring: the snippet {happened}"
        if found in ("quoted", "match"):
            return "true", f"the snippet {happened}"
        if found == "differs" and details.get("asks_error"):
            return "undecided", f"text differs: the snippet {happened} ({coverage:.0%} of the option's key terms are in its message)"
        return "undecided", f"undecided: the snippet {happened} ({coverage:.0%} of the option's key terms are in its message)"
    if raised:
        return "false", f"the snippet {happened} before that state is reached"
    if outcome == "output":
        returned = observation.get("returned") or {}
        texts = [str(observation.get("stdout") or "")]
        if returned.get("type") == "str" and returned.get("literal"):
            texts.append(str(ast.literal_eval(returned["repr"])))
        if not any(t.strip() for t in texts):
            return "undecided", f"the snippet {happened}, with no text to compare"
        printed = decide_printed(details, observation)  # values written out, the whole output, no key term
        if printed is not None:
            return printed  # type: ignore[return-value]
        found, coverage = message_match(str(details["output_text"]), {"message": " ".join(texts)})
        shown = " | ".join(t.strip() for t in texts if t.strip())
        if found == "match" and details.get("substring"):
            return "consistent", f"terms only: every key term is in the output, not as one substring: {shown!r}"
        if found == "quoted" and details.get("substring"):
            return "true", f"the snippet's output holds it word for word: {shown!r}"
        if found in ("quoted", "match"):
            return "consistent", f"{PART_OF_OUTPUT}: {shown!r}"
        return "false", f"the snippet's output does not hold it ({coverage:.0%} of its key terms): {shown!r}"
    if outcome == "prints":
        printed = str(observation.get("stdout", "")).strip()
        return ("true" if printed == str(details["printed"]).strip() else "false"), f"the snippet prints {printed!r}"
    value = (observation.get("expressions") or {}).get(str(details["expr"])) or {}
    if "error" in value:
        return "false", f"{details['expr']} raises {value['error']} after the snippet"
    if not value.get("literal"):
        return "undecided", f"{details['expr']} is {value.get('repr')!r} after the snippet, not a literal to compare"
    actual, expected = ast.literal_eval(value["repr"]), ast.literal_eval(str(details["expected"]))
    same = type(actual) is type(expected) and actual == expected
    return ("true" if same else "false"), f"{details['expr']} is {value['repr']} after the snippet"


def _quotes(details: Mapping[str, Any], observation: Mapping[str, Any]) -> bool:
    """Whether an option's message or text is, word for word, in what was raised (else what was printed or returned)."""
    text = details.get("message") or details.get("output_text")
    if not text:
        return False
    raised = observation.get("raised")
    if not raised:
        returned = observation.get("returned") or {}
        printed = [str(observation.get("stdout") or "")]
        if returned.get("type") == "str" and returned.get("literal"):
            printed.append(str(ast.literal_eval(returned["repr"])))
        raised = {"message": " ".join(printed)}
    return message_match(str(text), raised)[0] == "quoted"


def decide_options(claims: Sequence[Claim], observation: Mapping[str, Any]) -> list[Decision]:
    """Each claim decided (:func:`decide_option`). A quoted message that differs in substance from what was raised
    (under half of its key terms in it, quotes, backticks and spaces aside) is false: "same type, other message" is
    another outcome, not a consistent one. One that only partly matches it (half of its key terms or more) is false
    when another option quotes the raised message word for word, and otherwise undecided (never consistent: it may
    be a paraphrase or another message).
    A text option (``output``) holding under half the key terms of every raised message and per-field error is
    false on the same condition, and otherwise undecided (no type was checked). In a question about a substring, a
    text whose key terms are all there but not as one substring is consistent, and false when another option is one."""
    decided = [decide_option(c.details, observation) for c in claims]
    quoting = [i for i, c in enumerate(claims) if decided[i][0] == "true" and _quotes(c.details, observation)]
    whole = [i for i, (state, note) in enumerate(decided) if state == "true" and note.startswith(WHOLE_OUTPUT)]
    out: list[Decision] = []
    for i, (state, note) in enumerate(decided):
        others = [claims[j].letter for j in quoting if j != i]
        if state == "undecided" and note.startswith("message differs"):  # same type, another message: not consistent
            out.append(("false", f"the option quotes another message than the one raised; {note}"))
        elif state == "undecided" and note.startswith("message partly"):
            if others:
                out.append(("false", f"{note}; option(s) {', '.join(others)} quote the message raised"))
            else:
                out.append(("undecided", f"undecided: {note} (part of a message is neither that message nor another)"))
        elif state == "consistent" and note.startswith(PART_OF_OUTPUT) and whole:
            out.append(("false", f"{note}; option(s) {', '.join(claims[j].letter for j in whole)} are the whole output"))
        elif state == "consistent" and note.startswith("terms only") and others:
            out.append(("false", f"{note}; option(s) {', '.join(others)} quote it word for word"))
        elif state == "undecided" and note.startswith("text differs"):
            out.append(
                ("false", f"{note}; option(s) {', '.join(others)} quote the message raised")
                if others
                else ("undecided", f"undecided: {note}")
            )
        else:
            out.append((state, note))
    return out


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


def _is_literal(text: str) -> bool:
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


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
        if not _is_literal(value):
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
