import asyncio

from google.adk.agents import LlmAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.code_executors import UnsafeLocalCodeExecutor
from google.adk.code_executors.code_execution_utils import CodeExecutionInput
from google.adk.sessions import InMemorySessionService


async def make_invocation_context():
    """An InvocationContext on a new in-memory session, as the runner builds it."""
    agent = LlmAgent(name="analyst", model="gemini-2.0-flash")
    service = InMemorySessionService()
    session = await service.create_session(app_name="lab", user_id="user_42")
    return InvocationContext(session_service=service, invocation_id="inv-1", agent=agent, session=session)


# --8<-- [start:local_executor_error]
def code_under_test():
    ctx = asyncio.run(make_invocation_context())
    code = "print('loading')\nrate = 1 / 0\nprint(rate)"
    result = UnsafeLocalCodeExecutor().execute_code(ctx, CodeExecutionInput(code=code))
    print(repr(result.stdout), repr(result.stderr.strip().splitlines()[-1]))


# --8<-- [end:local_executor_error]


def test_local_executor_error(capsys):
    code_under_test()
    assert capsys.readouterr().out == "'loading\\n' 'ZeroDivisionError: division by zero'\n"
