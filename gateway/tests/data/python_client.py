"""A downstream client on the official Python SDK, for gateway/tests/http.rs.

    python python_client.py URL

Prints one JSON line per step: the tool names the gateway lists, a routed call's answer, then
a call to `a__sleep` abandoned after 2 s (the SDK then sends `notifications/cancelled`).
"""

import json
import sys

import anyio
from mcp import Client


async def main(url: str) -> None:
    async with Client(url) as client:
        tools = await client.list_tools()
        print(json.dumps({"tools": [tool.name for tool in tools.tools]}), flush=True)
        answer = await client.call_tool("b__echo", {"text": "from python"})
        print(json.dumps({"echo": answer.content[0].text}), flush=True)
        with anyio.move_on_after(2):
            await client.call_tool("a__sleep", {"ms": 60000})
        print(json.dumps({"abandoned": True}), flush=True)


anyio.run(main, sys.argv[1])
