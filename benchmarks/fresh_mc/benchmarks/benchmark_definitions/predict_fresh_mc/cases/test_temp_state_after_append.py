import asyncio

from google.adk.events import Event, EventActions
from google.adk.sessions import InMemorySessionService


# --8<-- [start:temp_state_after_append]
async def code_under_test():
    service = InMemorySessionService()
    session = await service.create_session(app_name="shop", user_id="user_42")
    event = Event(
        author="checkout_agent",
        invocation_id="inv-1",
        actions=EventActions(state_delta={"temp:step": 2, "cart_total": 40}),
    )
    await service.append_event(session, event)
    stored = await service.get_session(app_name="shop", user_id="user_42", session_id=session.id)
    print(session.state)
    print(stored.state)
    return session.state, stored.state


# --8<-- [end:temp_state_after_append]


def test_temp_state_after_append():
    """Expected on google-adk 2.13: the live session keeps the temp: key for the invocation, the stored one does not."""
    live, stored = asyncio.run(code_under_test())
    assert live == {"temp:step": 2, "cart_total": 40}
    assert stored == {"cart_total": 40}
