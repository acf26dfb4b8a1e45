import asyncio

from google.adk.agents import LlmAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.sessions import InMemorySessionService
from google.adk.tools import FunctionTool, ToolContext


def get_weather(city: str, unit: str = "celsius") -> dict:
    """Returns today's weather in a city."""
    return {"city": city, "unit": unit}


# --8<-- [start:function_tool_args]
async def code_under_test(tool_context: ToolContext):
    tool = FunctionTool(get_weather)
    first = await tool.run_async(args={"unit": "kelvin"}, tool_context=tool_context)
    second = await tool.run_async(args={"city": "Oslo", "country": "NO"}, tool_context=tool_context)
    print(sorted(first), second)


# --8<-- [end:function_tool_args]


async def tool_context() -> ToolContext:
    """The context of a tool call, as the runner builds it."""
    service = InMemorySessionService()
    session = await service.create_session(app_name="app", user_id="user_42")
    agent = LlmAgent(name="weather_agent", model="gemini-2.5-flash", tools=[get_weather])
    return ToolContext(InvocationContext(session_service=service, invocation_id="inv-1", agent=agent, session=session))


def test_function_tool_args(capsys):
    """Expected: a missing mandatory argument comes back as an error dict; an unknown one is dropped."""

    async def go():
        await code_under_test(await tool_context())

    asyncio.run(go())
    assert capsys.readouterr().out.strip() == "['error'] {'city': 'Oslo', 'unit': 'celsius'}"
