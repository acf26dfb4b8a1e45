import asyncio

from google.adk.sessions import InMemorySessionService


# --8<-- [start:get_missing_session]
async def code_under_test():
    session_service = InMemorySessionService()
    session = await session_service.get_session(app_name="shop", user_id="user_42", session_id="does-not-exist")
    print(session)
    return session


# --8<-- [end:get_missing_session]


def test_get_missing_session():
    """Expected: no error; an unknown session id gives None."""
    assert asyncio.run(code_under_test()) is None
