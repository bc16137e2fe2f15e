"""A downstream client on the official Python SDK (v1, `mcp` 1.x, or v2, `mcp` 2.x), for
gateway/tests/clients.rs.

    python python_client.py URL ERA

ERA is the protocol era to speak: `2025-11-25` (the `initialize` handshake and a session) or
`2026-07-28` (v2 only: `server/discover`, then a self-describing POST per request). Prints one
JSON line per step: the protocol version the SDK agreed, the tool names the gateway lists, a
routed call's answer, how many progress updates a call of `a__progress` brought, the name its
elicitation handler answered `b__ask_client`'s `elicitation/create` with (as the upstream
server got it), a task's result and whether the session lists it (v1's experimental tasks; null
for v2, which has none), `calling` once a call to `a__sleep` is started; a line on stdin then
cancels that call in the SDK's own way (an anyio cancel scope), and the script prints
`abandoned`; a second line on stdin ends the session.
"""

import json
import sys
from contextlib import asynccontextmanager

import anyio
import mcp.types as types

LEGACY, MODERN = "2025-11-25", "2026-07-28"

# What `b__ask_client` asks the client.
ELICITATION = {
    "method": "elicitation/create",
    "params": {
        "message": "Your name?",
        "requestedSchema": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        },
    },
}


async def answer_elicitation(context, params) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "python"})


def step(**fields) -> None:
    print(json.dumps(fields), flush=True)


async def next_line() -> None:
    await anyio.to_thread.run_sync(sys.stdin.readline)


@asynccontextmanager
async def connect(url: str, era: str):
    """The SDK's client in `era`, and the protocol version it agreed."""
    try:
        from mcp import Client
    except ImportError:  # v1: a session over the transport's streams; the 2025 era only.
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        if era != LEGACY:
            raise SystemExit(f"the v1 SDK speaks no {era}")
        async with streamable_http_client(url) as (read, write, _):
            async with ClientSession(read, write, elicitation_callback=answer_elicitation) as session:
                initialized = await session.initialize()
                yield session, initialized.protocolVersion
        return
    # v2: `auto` asks `server/discover` and falls back to `initialize` when the server has no
    # 2026-07-28; `legacy` goes straight to `initialize`.
    mode = "auto" if era == MODERN else "legacy"
    async with Client(url, mode=mode, elicitation_callback=answer_elicitation) as client:
        yield client, client.protocol_version


async def run_a_task(client, era: str) -> None:
    """v1's experimental tasks (2025-11-25): a call of `a__task_sleep` as a task, its result,
    and the task in the session's list; `task: null` for an SDK without them."""
    experimental = getattr(client, "experimental", None)
    if era != LEGACY or not hasattr(experimental, "call_tool_as_task"):
        step(task=None)
        return
    made = await experimental.call_tool_as_task("a__task_sleep", {"ms": 200, "steps": 2})
    task_id = made.task.taskId
    result = await experimental.get_task_result(task_id, types.CallToolResult)
    listed = await experimental.list_tasks()
    step(task=result.content[0].text, listed=any(t.taskId == task_id for t in listed.tasks))


async def main(url: str, era: str) -> None:
    async with connect(url, era) as (client, version):
        step(version=version)
        tools = await client.list_tools()
        step(tools=[tool.name for tool in tools.tools])
        answer = await client.call_tool("b__echo", {"text": f"from python at {era}"})
        step(echo=answer.content[0].text)
        updates = []

        async def progressed(progress, total, message) -> None:
            updates.append(progress)

        steps = {"steps": 3, "interval_ms": 10}
        await client.call_tool("a__progress", steps, progress_callback=progressed)
        step(progress=len(updates))
        asked = await client.call_tool("b__ask_client", ELICITATION)
        step(elicited=json.loads(asked.content[0].text)["result"]["content"]["name"])
        await run_a_task(client, era)
        scope = anyio.CancelScope()

        async def sleep() -> None:
            with scope:
                await client.call_tool("a__sleep", {"ms": 60000})

        async with anyio.create_task_group() as calls:
            calls.start_soon(sleep)
            step(calling=True)
            await next_line()
            scope.cancel()
        step(abandoned=scope.cancelled_caught)
        await next_line()


anyio.run(main, *sys.argv[1:3])
