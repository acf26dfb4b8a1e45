import asyncio

from google.adk.events import Event
from google.adk.memory import InMemoryMemoryService
from google.adk.sessions import Session
from google.genai import types


# --8<-- [start:memory_keyword_search]
async def code_under_test():
    memory = InMemoryMemoryService()
    session = Session(
        app_name="travel",
        user_id="user_42",
        id="trip-1",
        events=[Event(author="user", content=types.Content(role="user", parts=[types.Part(text="I moved to Lisbon last spring.")]))],
    )
    await memory.add_session_to_memory(session)

    counts = []
    for query in ("Lisbon", "Where does the user live now?", "Porto"):
        result = await memory.search_memory(app_name="travel", user_id="user_42", query=query)
        counts.append(len(result.memories))
    print(counts)
    return counts


# --8<-- [end:memory_keyword_search]


def test_memory_keyword_search():
    """Expected: the in-memory service matches words, not meaning."""
    assert asyncio.run(code_under_test()) == [1, 0, 0]
