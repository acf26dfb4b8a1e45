import asyncio

from google.adk.agents import LiveRequestQueue
from google.genai import types


# --8<-- [start:live_queue_close]
async def code_under_test():
    queue = LiveRequestQueue()
    queue.send_content(types.Content(role="user", parts=[types.Part(text="Hello")]))
    queue.close()
    first = await queue.get()
    second = await queue.get()
    print(first.content.parts[0].text, first.close)
    print(second.content, second.close)


# --8<-- [end:live_queue_close]


def test_live_queue_close(capsys):
    """Expected: close() queues a request of its own, after the content already queued."""
    asyncio.run(asyncio.wait_for(code_under_test(), timeout=10))
    assert capsys.readouterr().out.splitlines() == ["Hello False", "None True"]
