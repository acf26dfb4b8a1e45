import asyncio

from google.adk.events import Event, EventActions
from google.adk.sessions import InMemorySessionService
from google.genai import types


# --8<-- [start:partial_event_append]
async def code_under_test():
    service = InMemorySessionService()
    session = await service.create_session(app_name="writer", user_id="user_42")
    chunk = Event(
        author="drafter",
        invocation_id="inv-1",
        partial=True,
        content=types.Content(role="model", parts=[types.Part(text="Dear customer, ")]),
        actions=EventActions(state_delta={"draft": "v1"}),
    )
    await service.append_event(session, chunk)

    stored = await service.get_session(app_name="writer", user_id="user_42", session_id=session.id)
    print(len(stored.events), stored.state)
    return stored


# --8<-- [end:partial_event_append]


def test_partial_event_append(capsys):
    """Expected: a partial (streaming) event is neither stored nor applied to the state."""
    asyncio.run(code_under_test())
    assert capsys.readouterr().out.strip() == "0 {}"
