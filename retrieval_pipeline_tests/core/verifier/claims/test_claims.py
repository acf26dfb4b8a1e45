"""Decomposition: one claim per option, from the question and options only."""

from __future__ import annotations

import inspect

import pytest

from retrieval_pipeline.core.verifier.decompose import decompose

OPTIONS_E = {"E": "None of the above"}


def kinds(claims):
    return {c.letter: c.kind for c in claims}


def test_signature_takes_question_and_options_not_the_case():
    params = inspect.signature(decompose).parameters
    # the snippet is part of the question, keyword-only; nothing carries the marked answer
    assert list(params) == ["case_id", "question", "options", "snippet"]
    assert params["snippet"].kind is inspect.Parameter.KEYWORD_ONLY and params["snippet"].default is None


def test_import_statements():
    claims = decompose(
        "c",
        "Which is the correct import statement for `ThreadPoolExecutor`?",
        {
            "A": "from threading import ThreadPoolExecutor",
            "B": "from concurrent.futures import ThreadPoolExecutor",
            "C": "import concurrent.futures",
            **OPTIONS_E,
        },
    )
    assert kinds(claims) == {"A": "import", "B": "import", "C": "import", "E": "none_of_the_above"}
    assert claims[1].details["module"] == "concurrent.futures" and claims[1].details["names"] == ["ThreadPoolExecutor"]
    assert claims[0].decides == "truth"


def test_parameter_names_of_a_named_callable():
    claims = decompose(
        "c",
        "Which keyword argument makes `json.dumps` emit dictionary keys in sorted order?",
        {"A": "sorted", "B": "sort_keys", "C": "delete=False", **OPTIONS_E},
    )
    assert [c.kind for c in claims[:3]] == ["signature_param"] * 3
    assert {c.subject for c in claims[:3]} == {"json.dumps"}
    assert claims[2].details["param"] == "delete" and claims[2].details["value"] == "False"
    assert claims[0].decides == "necessary"  # the name existing does not prove the behaviour


def test_which_class_parameter_and_negated_constructor_question():
    claims = decompose("c", "Which `LlmAgent` parameter is used for tools?", {"A": "tools", "B": "setup"})
    assert claims[0].kind == "constructor_kwarg" and claims[0].subject == "LlmAgent"
    negated = decompose(
        "c",
        "Which of these is NOT an accepted keyword argument of the `datetime.timedelta` constructor?",
        {"A": "weeks", "B": "months"},
    )
    assert negated[1].kind == "constructor_kwarg" and negated[1].details["expect_accepted"] is False
    assert negated[1].decides == "truth"


def test_expression_values_and_raises():
    claims = decompose(
        "c",
        "What does `statistics.median([1, 3, 2, 4])` return?",
        {"A": "2", "B": "2.5", "C": "It raises StatisticsError because the length is even", **OPTIONS_E},
    )
    assert [c.details.get("mode") for c in claims[:3]] == ["equals", "equals", "raises"]
    assert claims[0].details["expr"] == "statistics.median([1, 3, 2, 4])"
    assert claims[2].details["exception"] == "StatisticsError"
    assert claims[0].details["free_names"] == ["statistics"]


def test_expression_question_shapes():
    after = decompose("c", "After `h = [3, 1, 2]; heapq.heapify(h)`, what does `heapq.heappop(h)` return?", {"A": "1"})
    assert after[0].details["setup"] == "h = [3, 1, 2]; heapq.heapify(h)" and after[0].details["free_names"] == ["heapq"]
    length = decompose("c", "How many characters long is `uuid.uuid4().hex`?", {"A": "32"})
    assert length[0].details["expr"] == "len(uuid.uuid4().hex)"
    attr = decompose("c", "What is the `.name` of the logger returned by `logging.getLogger()`?", {"A": "'root'"})
    assert attr[0].details["expr"] == "(logging.getLogger()).name"
    exc = decompose("c", "What exception does `json.loads('{bad')` raise?", {"A": "json.JSONDecodeError"})
    assert exc[0].details["mode"] == "raises" and exc[0].details["exception"] == "json.JSONDecodeError"
    match = decompose("c", "What does `re.fullmatch(r'\\d+', '123')` return?", {"A": "A match object for '123'"})
    assert match[0].details["mode"] == "match"


def test_names_calls_and_placeholders():
    claims = decompose(
        "c",
        "A function is decorated with `functools.lru_cache`. Which call reports its hits and misses?",
        {"A": "func.cache_info()", "B": "shutil.copy2"},
    )
    assert claims[0].kind == "exists" and claims[0].details["bindings"]["func"] == {"decorated_with": "functools.lru_cache"}
    assert claims[1].details["path"] == "shutil.copy2"
    calls = decompose(
        "c",
        "Which expression creates an empty `collections.deque` that holds at most 3 items?",
        {"A": "deque(maxlen=3)", "B": "types.Content(parts=[types.Part(data=...)])", "C": "make(my_image)"},
    )
    assert calls[0].kind == "expression" and calls[0].details["mode"] == "evaluates"
    assert calls[0].details["bindings"]["deque"] == {"path": "collections.deque"}
    # sketches with ... / my_* are not run: a class-like callee is checked for its keywords only
    assert calls[1].kind == "compound" and "expr" not in calls[1].details
    assert calls[1].details["atoms"] == [
        {"check": "accepts", "callee": "types.Content", "keywords": ["parts"]},
        {"check": "accepts", "callee": "types.Part", "keywords": ["data"]},
    ]
    assert calls[2].kind == "unknown"  # a lower-case function of a placeholder: nothing to check


def test_library_symbols_methods_and_signatures():
    classes = decompose("c", "Which class should you inherit from?", {"A": "BaseArtifactService", "B": "storage"})
    assert classes[0].kind == "exists" and classes[0].details["library_symbol"] is True
    assert classes[1].kind == "unknown"  # a bare lower-case word with no subject is not guessed at
    methods = decompose("c", "You are inheriting from `BaseTool`. Which method must you override?", {"A": "run_async()", "B": "__call__()"})
    assert methods[0].details["path"] == "BaseTool.run_async"
    sig = decompose(
        "c",
        "In a `PluginManager`, what is the correct signature for `run_on_event_callback`?",
        {"A": "async def run_on_event_callback(self, *, invocation_context: InvocationContext, event: Event) -> Optional[Event]:"},
    )
    assert sig[0].kind == "signature_param" and sig[0].details["exact"] is True
    assert sig[0].subject == "PluginManager.run_on_event_callback" and sig[0].details["is_async"] is True
    assert sig[0].details["params"] == [
        ["self", "POSITIONAL_OR_KEYWORD"],
        ["invocation_context", "KEYWORD_ONLY"],
        ["event", "KEYWORD_ONLY"],
    ]


def test_a_signature_of_the_user_s_own_callback_is_not_looked_up_as_a_library_object():
    question = "What is the correct signature for a `before_agent_callback` on an `LlmAgent`?"
    options = {"A": "async def callback(callback_context: CallbackContext) -> Optional[types.Content]:", "B": "def callback(ctx):"}
    claims = decompose("c", question, options)
    assert [c.kind for c in claims] == ["unknown", "unknown"] and all(c.subject is None for c in claims)
    assert "the user writes" in claims[0].details["reason"]
    named = decompose(
        "c", "In an `LlmAgent`, what is the signature of `canonical_tools`?", {"A": "async def canonical_tools(self, ctx=None):"}
    )
    assert named[0].kind == "signature_param" and named[0].subject == "LlmAgent.canonical_tools"


def test_prose_is_unknown():
    claims = decompose(
        "c",
        "What is the primary purpose of `InvocationContext`?",
        {"A": "To configure the LLM's generation parameters.", "B": "To store the chat history of the session.", **OPTIONS_E},
    )
    assert kinds(claims) == {"A": "unknown", "B": "unknown", "E": "none_of_the_above"}
    storage = decompose(  # a storage the option names is checkable (test_storage_claims); the rest of the prose is not
        "c",
        "When using `InMemorySessionService`, how is session data persisted?",
        {"A": "It is stored in a SQLite database.", "B": "It is handled for you.", **OPTIONS_E},
    )
    assert kinds(storage) == {"A": "compound", "B": "unknown", "E": "none_of_the_above"}


def test_a_bare_name_is_looked_up_on_the_subject_only_when_the_question_asks_for_a_member_of_it():
    """Kind of claim: a name exists. "Which method of `Runner` ..." asks for a member of Runner, so `close` is looked up
    there (and its absence there is evidence); "Which built-in tool do you give a `LoopAgent`'s sub-agent?" asks for a
    tool, which the library defines wherever it likes: its absence from LoopAgent proves nothing, so no claim looks
    there (a false claim made a right key Incorrect)."""
    member = decompose("m", "Which method of `Runner` do you call to release its resources?", {"A": "close", "B": "shutdown"})
    assert [(c.kind, c.subject) for c in member] == [("exists", "Runner.close"), ("exists", "Runner.shutdown")]
    tool = decompose("t", "Which built-in tool do you give a sub-agent of a `LoopAgent` to stop it?", {"A": "halt_loop", "B": "stop_now"})
    assert all(not (c.subject or "").startswith("LoopAgent.") for c in tool)
    called = decompose("c", "What ends the loop of a `LoopAgent`?", {"A": "escalate()"})  # not a name question: a call on it
    assert called[0].subject == "LoopAgent.escalate"
    module = decompose("f", "Which function of `os.path` joins two paths?", {"A": "join"})  # a function of a module
    assert module[0].subject == "os.path.join"


@pytest.mark.parametrize(
    ("question", "subject"),
    [
        ("Which `Session` field holds the events so far?", "Session"),
        ("Which field of the `Session` holds the events so far?", "Session"),
        ("In a live session, which boolean field of `Session` (and so of what it yields) is set at the end?", "Session"),
        ("Which `Session` property gives the last event?", "Session"),
        ("Which class method of a `Session` subclass lists the supported names?", "Session"),
    ],
)  # fmt: skip
def test_a_question_that_asks_for_a_field_or_a_property_of_its_subject_looks_the_name_up_on_it(question, subject):
    """Kind of claim: a name exists, as a member of the question's subject. "Which field of `X`" and "which `X`
    property" ask for a member of X as "which method of `X`" does: a bare name is looked up there (an absence there is
    evidence; a name there passes a necessary check only). Before, no claim was made and every option stayed open."""
    claims = decompose("f", question, {"A": "events", "B": "`last_event`", "C": "None of the above"})
    assert [(c.kind, c.subject, c.decides) for c in claims[:2]] == [
        ("exists", f"{subject}.events", "necessary"),
        ("exists", f"{subject}.last_event", "necessary"),
    ]
    assert claims[2].kind == "none_of_the_above"


def test_a_lower_case_head_named_like_a_class_the_question_names_is_an_instance_of_it():
    """Kind of claim: a name exists. `event.get_function_responses()` in a question about `Event` is a method of an
    Event, not an attribute of the module ``google.adk.events.event`` (read that way, a right key was disproven)."""
    question = "Which `Event` method returns the function responses an event carries?"
    claims = decompose("e", question, {"A": "`event.get_function_responses()`", "B": "`event.content.parts`"})
    assert claims[0].kind == "exists" and claims[0].subject == "Event.get_function_responses"
    assert claims[0].details["instance"] == "event" and claims[0].details["free_names"] == ["Event"]
    assert claims[1].subject != "Event.content.parts"  # a member of a member: the class alone does not say
    other = decompose("o", "Which `Runner` method ...?", {"A": "`event.get_function_calls()`"})  # no class of its name
    assert "instance" not in other[0].details


def test_a_question_that_asks_for_a_method_and_mentions_parameters_after_asks_for_a_method():
    question = "You subclass `BaseTool`. Which method do you override to give the model the declaration (name, parameters)?"
    claims = decompose("m", question, {"A": "`_get_declaration`", "B": "`to_declaration`"})
    assert {c.kind for c in claims} == {"exists"} and claims[0].subject == "BaseTool._get_declaration"
    asks_param = decompose("p", "Which parameter of `Runner` takes the method to call?", {"A": "app_name"})
    assert asks_param[0].kind in ("signature_param", "constructor_kwarg")


def test_a_name_the_question_s_own_code_defines_is_not_looked_up_in_the_library():
    """Kind of claim: a name exists (in prose). `city` in "Only `city`." is a parameter of the question's own
    `def get_weather(city: str, ...)`, not an attribute of `FunctionTool`: looked up there, a right key was false."""
    question = 'You wrap `def get_weather(city: str, unit: str = "celsius") -> dict` in a `FunctionTool`. Which are required?'
    claims = decompose("q", question, {"A": "Only `city`.", "B": "Both `city` and `unit`.", "C": "Only `FunctionTool.name`."})
    assert claims[0].kind == "unknown" and claims[1].kind == "unknown"
    assert claims[2].kind == "compound"  # a library name in the same question is still read
    from retrieval_pipeline.core.verifier.claims.compound_claims import question_own_names

    assert question_own_names("What happens with `include_contents='none'`?") == set()  # setting a parameter defines nothing
    assert question_own_names("Pass `lambda q: q.upper()` as the callback.") == {"q"}
