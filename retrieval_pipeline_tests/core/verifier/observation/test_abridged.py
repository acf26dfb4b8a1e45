"""An observation caused by the snippet being abridged decides nothing (soundness: no Incorrect rests on it).

Hand-made observations, as the sandbox's observer writes them; the verdict goes through the same host-side steps
as a real run (:func:`decide_options`, :func:`verdict.decide`)."""

from __future__ import annotations

from pathlib import Path

from retrieval_pipeline.core.datasets.suite.reader import load_suite, suite_names
from retrieval_pipeline.core.verifier.observation.abridged import abridged, missing_arguments, refused_arguments, suite_names_line
from retrieval_pipeline.core.verifier.observation.snippet_observation import compose, split
from retrieval_pipeline.core.verifier.verify import case_snippet


def raised(kind: str, message: str, errors: list[dict] | None = None, name: str | None = None) -> dict:
    mro = {"TypeError": ["TypeError", "Exception"], "NameError": ["NameError", "Exception"]}.get(kind, [kind, "ValueError", "Exception"])
    return {"raised": {"type": kind, "mro": mro, "message": message, "errors": errors or [], "name": name}}


QUESTION = "You set `include_contents` to an invalid value. What error occurs?"
OPTIONS = ["ValueError: Invalid include_contents.", "No error.", "None of the above"]


def test_a_literal_ellipsis_used_as_a_value_decides_nothing_when_the_error_speaks_of_it():
    section = "def code_under_test():\n    LlmAgent(name='a', generate_content_config=...)\n"
    pydantic = raised("ValidationError", "1 validation error for LlmAgent\ngenerate_content_config\n  Input should be a valid "
                      "dictionary [type=model_type, input_value=Ellipsis, input_type=ellipsis]")  # fmt: skip
    why = abridged(pydantic, section, "", QUESTION, OPTIONS)
    assert why is not None and "`...`" in why
    # an error about something else is the question's own premise
    other = raised("ValueError", "Invalid include_contents: 'sometimes'")
    assert abridged(other, section, "", QUESTION, OPTIONS) is None
    # a `...` body is no value
    body = "def code_under_test():\n    def tool(x):\n        ...\n    tool(1)\n    raise ValueError('Ellipsis')\n"
    assert abridged(raised("ValueError", "Ellipsis"), body, "", QUESTION, OPTIONS) is None


def test_a_pass_stub_used_as_a_value_decides_nothing_when_the_error_speaks_of_none():
    section = "def make_config():\n    pass\n\ndef code_under_test():\n    LlmAgent(name='a', generate_content_config=make_config())\n"
    error = raised("AttributeError", "'NoneType' object has no attribute 'tools'")
    assert "stub make_config()" in str(abridged(error, section, "", QUESTION, OPTIONS))
    called_alone = "def setup():\n    pass\n\ndef code_under_test():\n    setup()\n    return None.tools\n"
    assert abridged(error, called_alone, "", QUESTION, OPTIONS) is None  # its result is not used as a value


def test_a_required_argument_the_question_does_not_mention_decides_nothing():
    section = "def code_under_test():\n    Runner(agent=agent, session_service=service)\n"
    missing = raised("TypeError", "Runner.__init__() missing 1 required keyword-only argument: 'app_name'")
    assert missing_arguments(missing["raised"]) == ["app_name"]
    why = abridged(missing, section, "", "What happens when the runner is created with a session service?", ["No error.", "ValueError: x"])
    assert why is not None and "app_name" in why
    # the question, or an option, is about that argument: it is the premise
    assert abridged(missing, section, "", "Which argument is missing in this `Runner` initialization?", ["`tools`", "`app_name`"]) is None
    assert abridged(missing, section, "", "What happens without an app name?", ["No error."]) is None
    two = raised("TypeError", "f() missing 2 required positional arguments: 'a' and 'b_c'")
    assert missing_arguments(two["raised"]) == ["a", "b_c"]
    pydantic = raised(
        "ValidationError",
        "1 validation error for App\nname\n  Field required",
        [{"type": "missing", "loc": ["name"], "msg": "Field required"}],
    )
    assert missing_arguments(pydantic["raised"]) == ["name"] and abridged(pydantic, section, "", "What does `App` raise?", ["No error."])


def test_an_argument_the_question_does_not_mention_refused_as_unknown_decides_nothing():
    """The question sets `ttl_seconds`; the snippet passes `ttl`, which the model refuses: that error is not about the
    question's premise. An argument the question or an option names is the premise."""
    section = "def code_under_test():\n    ContextCacheConfig(ttl='3600s')\n"
    extra = raised("ValidationError", "1 validation error for ContextCacheConfig\nttl\n  Extra inputs are not permitted",
                   [{"type": "extra_forbidden", "loc": ["ttl"], "msg": "Extra inputs are not permitted"}])  # fmt: skip
    question = "You initialize `ContextCacheConfig` with `ttl_seconds` as a non-numeric string. What error occurs?"
    options = ["TypeError.", "ValidationError: value is not a valid integer.", "No error.", "None of the above"]
    assert refused_arguments(extra["raised"]) == ["ttl"]
    assert "not the code the question describes" in str(abridged(extra, section, "", question, options))
    named = "You pass `response_schema` to `LlmAgent`. What error occurs?"
    schema = raised("ValidationError", "response_schema\n  Extra inputs are not permitted",
                    [{"type": "extra_forbidden", "loc": ["response_schema"], "msg": "Extra inputs are not permitted"}])  # fmt: skip
    assert abridged(schema, section, "", named, options) is None
    keyword = raised("TypeError", "Runner.__init__() got an unexpected keyword argument 'agents'")
    assert refused_arguments(keyword["raised"]) == ["agents"] and abridged(keyword, section, "", question, options)


def test_a_name_error_on_a_name_the_suite_defines_elsewhere_decides_nothing(tmp_path: Path):
    (tmp_path / "snippets.py").write_text(
        "from acme import LlmAgent\n\n"
        "def test_helpers():\n    shared_agent = LlmAgent(name='x')\n    return shared_agent\n\n"
        "# --8<-- [start:uses_shared]\ndef code_under_test():\n    return SequentialAgent(sub_agents=[shared_agent])\n# --8<-- [end:uses_shared]\n"
    )  # fmt: skip
    (tmp_path / "other_case.py").write_text("SequentialAgent = None\n")
    names = suite_names(tmp_path / "snippets.py", "from acme import LlmAgent\n")
    assert "shared_agent" in names and "SequentialAgent" in names and "LlmAgent" not in names  # the context's own is not elsewhere
    context = suite_names_line(names) + "from acme import LlmAgent\n"
    section = "def code_under_test():\n    return SequentialAgent(sub_agents=[shared_agent])\n"
    error = raised("NameError", "name 'shared_agent' is not defined", name="shared_agent")
    assert "defined elsewhere in its suite" in str(abridged(error, section, context, QUESTION, OPTIONS))
    # a name nobody defines is what the code does (a missing import can be the premise)
    nobody = raised("NameError", "name 'Runnner' is not defined", name="Runnner")
    assert abridged(nobody, section, context, QUESTION, OPTIONS) is None


def test_the_loader_carries_the_suite_names_into_the_composed_snippet(tmp_path: Path):
    (tmp_path / "snippets.py").write_text(
        "import os\n\ndef test_other():\n    helper = 1\n\n"
        "# --8<-- [start:s]\ndef code_under_test():\n    return helper\n# --8<-- [end:s]\n"
    )  # fmt: skip
    (tmp_path / "suite.yaml").write_text(
        "benchmarks:\n  - id: c1\n    benchmark_type: multiple_choice\n    question: What happens?\n"
        "    code_snippet_ref: {file: snippets.py, section: s}\n    correct_answer: A\n    options: {A: No error., B: None of the above}\n"
    )  # fmt: skip
    (case,) = load_suite(tmp_path / "suite.yaml", files_root=tmp_path).cases
    assert "helper" in case.extra["code_snippet_suite_names"] and "os" not in case.extra["code_snippet_suite_names"]
    context, section = split(str(case_snippet(case)))
    assert "helper" in context.splitlines()[0] and section.startswith("def code_under_test")
    assert case_snippet(case) == compose(section, context)


def test_an_abridged_observation_leaves_every_option_undecided_so_no_verdict_rests_on_it(monkeypatch):
    """Through :func:`snippet_evidence` with the run faked: the required argument nobody mentions makes the marked
    "No error." undecided (not false), and the question Unverifiable rather than Incorrect."""
    from retrieval_pipeline.core.services.sandbox.results import Execution
    from retrieval_pipeline.core.services.sandbox.settings import SandboxSettings
    from retrieval_pipeline.core.verifier.decompose import decompose
    from retrieval_pipeline.core.verifier.observation import snippet_observation
    from retrieval_pipeline.core.verifier.verdicts.verdict import decide

    missing = {"stage": "done", "called": "code_under_test", "stdout": "", "context_failures": [], "expressions": {},
               **raised("TypeError", "Runner.__init__() missing 1 required keyword-only argument: 'app_name'")}  # fmt: skip
    ran = Execution(0, True, "passed", "", "", 0.1, None, {})
    monkeypatch.setattr(snippet_observation, "observe", lambda *a, **k: (missing, ran))
    options = {"A": "No error.", "B": "ValueError: Agent must have a model.", "C": "None of the above"}
    snippet = "def code_under_test():\n    Runner(agent=agent)\n"
    claims = decompose("c", "What happens when this runner is created?", options, snippet=snippet)
    observed = snippet_observation.snippet_evidence([c for c in claims if c.kind == "snippet"], snippet, SandboxSettings())
    assert [e.state for e in observed] == ["undecided", "undecided"] and "abridged" in observed[0].note
    evidence = [
        *observed,
        *[snippet_observation.OptionEvidence(c.letter, c, "derived", None, "undecided") for c in claims if c.kind != "snippet"],
    ]
    assert decide("c", "A", evidence).verdict == "Unverifiable"


def test_a_function_run_without_the_arguments_it_takes_decides_nothing_even_when_the_question_mentions_them():
    """The section is a function the framework calls with a tool context; the observer calls it with none. The
    TypeError is that call's, whatever the question says (here it even names the tool context)."""
    section = "async def prepare_request(tool_context):\n    request = LlmRequest(model='m')\n    return request\n"
    question = "`prepare_request` is called with the tool context as the request is prepared. What happens?"
    observed = raised("TypeError", "prepare_request() missing 1 required positional argument: 'tool_context'")
    observed["called"] = "prepare_request"
    why = abridged(observed, section, "", question, OPTIONS)
    assert why is not None and "tool_context" in why and "says nothing about its code" in why
    # the same error from a call inside the function is the code's own
    inner = raised("TypeError", "LlmRequest() missing 1 required positional argument: 'model'")
    inner["called"] = "prepare_request"
    assert abridged(inner, section, "", "What happens with the `model` of the `LlmRequest`?", OPTIONS) is None
    # an argument with a default is not required: a TypeError naming it is not the observer's doing
    defaulted = raised("TypeError", "prepare_request() missing 1 required positional argument: 'tool_context'")
    defaulted["called"] = "prepare_request"
    assert abridged(defaulted, "def prepare_request(tool_context=None):\n    pass\n", "", question, OPTIONS) is None
