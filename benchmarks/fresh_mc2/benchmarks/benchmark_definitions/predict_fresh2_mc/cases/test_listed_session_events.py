import asyncio

from google.adk.events import Event
from google.adk.sessions import InMemorySessionService
from google.genai import types


# --8<-- [start:listed_session_events]
async def code_under_test():
    service = InMemorySessionService()
    session = await service.create_session(app_name="helpdesk", user_id="user_42")
    for text in ("My printer is offline.", "It is a LaserJet 400."):
        event = Event(
            author="user",
            invocation_id="inv-1",
            content=types.Content(role="user", parts=[types.Part(text=text)]),
        )
        await service.append_event(session, event)

    response = await service.list_sessions(app_name="helpdesk", user_id="user_42")
    print(len(response.sessions), len(response.sessions[0].events))
    return response


# --8<-- [end:listed_session_events]


def test_listed_session_events(capsys):
    """Expected: one session is listed, without its events."""
    asyncio.run(code_under_test())
    assert capsys.readouterr().out.strip() == "1 0"
