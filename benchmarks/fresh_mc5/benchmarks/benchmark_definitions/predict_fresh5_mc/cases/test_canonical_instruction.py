import asyncio

from google.adk.agents import LlmAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.sessions import InMemorySessionService


async def make_context(agent, state):
    """A ReadonlyContext on a new session holding ``state``, built as the runner builds it."""
    service = InMemorySessionService()
    session = await service.create_session(app_name="app", user_id="user_42", state=state)
    ctx = InvocationContext(session_service=service, invocation_id="inv-1", agent=agent, session=session)
    return ReadonlyContext(ctx)


# --8<-- [start:canonical_instruction]
def greeting(context):
    return "Greet {name} by name."


async def code_under_test():
    fixed = LlmAgent(name="fixed", model="gemini-2.0-flash", instruction="Greet {name} by name.")
    provided = LlmAgent(name="provided", model="gemini-2.0-flash", instruction=greeting)
    for agent in (fixed, provided):
        context = await make_context(agent, {"name": "Ana"})
        print(await agent.canonical_instruction(context))


# --8<-- [end:canonical_instruction]


def test_canonical_instruction(capsys):
    """Expected: the text as written, with a flag that is True only for an instruction provider."""
    asyncio.run(code_under_test())
    assert capsys.readouterr().out.split("\n")[:2] == ["('Greet {name} by name.', False)", "('Greet {name} by name.', True)"]
