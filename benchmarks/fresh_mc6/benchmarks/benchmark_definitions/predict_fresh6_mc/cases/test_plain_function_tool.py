import asyncio

from google.adk.agents import LlmAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.sessions import InMemorySessionService


async def make_context(agent):
    """A ReadonlyContext on a new empty session, built as the runner builds it."""
    service = InMemorySessionService()
    session = await service.create_session(app_name="app", user_id="user_42")
    ctx = InvocationContext(session_service=service, invocation_id="inv-1", agent=agent, session=session)
    return ReadonlyContext(ctx)


# --8<-- [start:plain_function_tool]
def lookup_order(order_id: str) -> dict:
    """Looks up an order by its id."""
    return {"order_id": order_id, "status": "shipped"}


async def code_under_test():
    agent = LlmAgent(name="support", model="gemini-2.0-flash", tools=[lookup_order])
    tools = await agent.canonical_tools(await make_context(agent))
    print([type(tool).__name__ for tool in tools], [tool.name for tool in tools])


# --8<-- [end:plain_function_tool]


def test_plain_function_tool(capsys):
    asyncio.run(code_under_test())
    assert capsys.readouterr().out == "['FunctionTool'] ['lookup_order']\n"
