import asyncio

from google.adk.agents import LlmAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.sessions import InMemorySessionService
from google.adk.tools import ToolContext


# --8<-- [start:tool_state_write]
def remember_tier(tier: str, tool_context: ToolContext) -> dict:
    """Stores the customer's loyalty tier."""
    tool_context.state["user:tier"] = tier
    tool_context.state["temp:lookups"] = 1
    return {"saved": tier}


async def code_under_test(tool_context: ToolContext):
    remember_tier("gold", tool_context)
    print(tool_context.actions.state_delta)
    print(tool_context.session.state)


# --8<-- [end:tool_state_write]


async def tool_context_for_new_session() -> ToolContext:
    """The context of a tool call, as the runner builds it, in a new session whose state is {'tier': 'silver'}."""
    service = InMemorySessionService()
    session = await service.create_session(app_name="loyalty", user_id="user_42", state={"tier": "silver"})
    agent = LlmAgent(name="loyalty_agent", model="gemini-2.5-flash", tools=[remember_tier])
    return ToolContext(InvocationContext(session_service=service, invocation_id="inv-1", agent=agent, session=session))


def test_tool_state_write(capsys):
    """Expected: the writes are recorded in the delta and are visible in the in-memory session at once."""

    async def go():
        await code_under_test(await tool_context_for_new_session())

    asyncio.run(go())
    assert capsys.readouterr().out.splitlines() == [
        "{'user:tier': 'gold', 'temp:lookups': 1}",
        "{'tier': 'silver', 'user:tier': 'gold', 'temp:lookups': 1}",
    ]
