import asyncio

from fastapi.openapi.models import APIKey, APIKeyIn
from google.adk.agents import LlmAgent
from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.invocation_context import InvocationContext
from google.adk.auth.auth_credential import AuthCredential, AuthCredentialTypes
from google.adk.auth.auth_tool import AuthConfig
from google.adk.auth.credential_service.in_memory_credential_service import InMemoryCredentialService
from google.adk.sessions import InMemorySessionService


async def context_for(user_id: str) -> CallbackContext:
    """A callback context on a new session of app "crm" for ``user_id``, as the runner builds it."""
    sessions = InMemorySessionService()
    session = await sessions.create_session(app_name="crm", user_id=user_id)
    agent = LlmAgent(name="assistant", model="gemini-2.0-flash")
    return CallbackContext(InvocationContext(session_service=sessions, invocation_id="inv-1", agent=agent, session=session))


# --8<-- [start:credential_raw_only]
async def code_under_test():
    config = AuthConfig(
        auth_scheme=APIKey(**{"in": APIKeyIn.header, "name": "X-API-Key"}),
        raw_auth_credential=AuthCredential(auth_type=AuthCredentialTypes.API_KEY, api_key="s3cr3t"),
    )
    service = InMemoryCredentialService()
    ana, ben = await context_for("ana"), await context_for("ben")
    await service.save_credential(config, ana)
    mine = await service.load_credential(config, ana)
    theirs = await service.load_credential(config, ben)
    print(mine and mine.api_key, theirs and theirs.api_key)


# --8<-- [end:credential_raw_only]


def test_credential_raw_only(capsys):
    asyncio.run(code_under_test())
    assert capsys.readouterr().out == "None None\n"
