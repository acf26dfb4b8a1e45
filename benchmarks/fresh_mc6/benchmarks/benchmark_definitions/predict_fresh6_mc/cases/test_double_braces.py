import asyncio

from google.adk.agents import LlmAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.sessions import InMemorySessionService
from google.adk.utils.instructions_utils import inject_session_state


async def make_context(agent, state):
    """A ReadonlyContext on a new session holding ``state``, built as the runner builds it."""
    service = InMemorySessionService()
    session = await service.create_session(app_name="app", user_id="user_42", state=state)
    ctx = InvocationContext(session_service=service, invocation_id="inv-1", agent=agent, session=session)
    return ReadonlyContext(ctx)


# --8<-- [start:double_braces]
async def code_under_test():
    agent = LlmAgent(name="formatter", model="gemini-2.0-flash")
    context = await make_context(agent, {"name": "Ana"})
    print(await inject_session_state("Write {{name}} and {{city}} literally.", context))


# --8<-- [end:double_braces]


def test_double_braces():
    import pytest

    with pytest.raises(KeyError) as caught:
        asyncio.run(code_under_test())
    assert caught.value.args[0] == "Context variable not found: `city` in agent 'formatter'."
