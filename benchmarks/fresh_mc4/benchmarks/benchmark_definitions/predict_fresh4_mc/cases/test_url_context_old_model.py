import asyncio

from google.adk.agents import LlmAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.models import LlmRequest
from google.adk.sessions import InMemorySessionService
from google.adk.tools import ToolContext, url_context


# --8<-- [start:url_context_old_model]
async def code_under_test(tool_context: ToolContext):
    llm_request = LlmRequest(model="gemini-1.5-flash")
    await url_context.process_llm_request(tool_context=tool_context, llm_request=llm_request)
    print(len(llm_request.config.tools), llm_request.config.tools[0].url_context is not None)


# --8<-- [end:url_context_old_model]


async def tool_context() -> ToolContext:
    """The context of a tool call, as the runner builds it."""
    service = InMemorySessionService()
    session = await service.create_session(app_name="app", user_id="user_42")
    agent = LlmAgent(name="reader", model="gemini-1.5-flash", tools=[url_context])
    return ToolContext(InvocationContext(session_service=service, invocation_id="inv-1", agent=agent, session=session))


def test_url_context_old_model(capsys):
    """Expected on 2.13: the URL-context tool is added to the request whatever the Gemini version (1.20 refuses 1.x)."""

    async def go():
        await code_under_test(await tool_context())

    asyncio.run(go())
    assert capsys.readouterr().out.strip() == "1 True"
