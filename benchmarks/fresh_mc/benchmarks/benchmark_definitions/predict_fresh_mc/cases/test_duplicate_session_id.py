import asyncio

from google.adk.sessions import InMemorySessionService


# --8<-- [start:duplicate_session_id]
async def code_under_test():
    service = InMemorySessionService()
    await service.create_session(app_name="shop", user_id="user_42", session_id="order-123")
    await service.create_session(app_name="shop", user_id="user_42", session_id="order-123")


# --8<-- [end:duplicate_session_id]


def test_duplicate_session_id():
    """Expected: a second session with the same id is refused."""
    import pytest
    from google.adk.errors.already_exists_error import AlreadyExistsError

    with pytest.raises(AlreadyExistsError, match="Session with id order-123 already exists."):
        asyncio.run(code_under_test())
