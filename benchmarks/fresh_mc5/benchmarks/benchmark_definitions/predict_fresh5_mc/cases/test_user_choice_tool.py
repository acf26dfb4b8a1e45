import asyncio

from google.adk.agents import LlmAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.sessions import InMemorySessionService
from google.adk.tools import get_user_choice
from google.adk.tools.tool_context import ToolContext


async def make_tool_context():
    """A ToolContext for one call, built as the runner builds it."""
    agent = LlmAgent(name="shop", model="gemini-2.0-flash")
    service = InMemorySessionService()
    session = await service.create_session(app_name="app", user_id="user_42")
    ctx = InvocationContext(session_service=service, invocation_id="inv-1", agent=agent, session=session)
    return ToolContext(ctx, function_call_id="call-1")


# --8<-- [start:user_choice_tool]
async def code_under_test():
    tool_context = await make_tool_context()
    result = await get_user_choice.run_async(args={"options": ["red", "blue"]}, tool_context=tool_context)
    print(result, tool_context.actions.skip_summarization, get_user_choice.is_long_running)


# --8<-- [end:user_choice_tool]


def test_user_choice_tool(capsys):
    """Expected: the tool returns nothing (the user answers later) and asks not to summarise its result."""
    asyncio.run(code_under_test())
    assert capsys.readouterr().out.strip() == "None True True"
