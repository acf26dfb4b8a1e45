import asyncio

from google.adk.sessions import InMemorySessionService


# --8<-- [start:user_state_new_session]
async def code_under_test():
    service = InMemorySessionService()
    await service.create_session(app_name="shop", user_id="ana", state={"user:lang": "fr", "cart": ["mug"]})
    later = await service.create_session(app_name="shop", user_id="ana")
    other = await service.create_session(app_name="shop", user_id="ben")
    print(later.state, other.state)


# --8<-- [end:user_state_new_session]


def test_user_state_new_session(capsys):
    """Expected: a user: key is shared by the user's later sessions; plain keys and other users are not."""
    asyncio.run(code_under_test())
    assert capsys.readouterr().out.strip() == "{'user:lang': 'fr'} {}"
