"""The tools, prompts and resources the official conformance suite's server scenarios call by
name (`test_simple_text`, `test://static-text`, ...), served over stdio by the official Python
SDK, for gateway/tests/conformance.rs: the gateway (`--names plain`) in front of it must pass
those scenarios as the server would alone."""

import asyncio
import base64

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import (
    AudioContent,
    EmptyResult,
    SubscribeRequestParams,
    UnsubscribeRequestParams,
    EmbeddedResource,
    ImageContent,
    SamplingMessage,
    TextContent,
    TextResourceContents,
)

server = MCPServer("conformance-fixtures")

# A 1x1 PNG and a tiny WAV header: the scenarios look for the kind, the data and the type.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV = b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00D\xac\x00\x00\x88X\x01\x00\x02\x00\x10\x00data\x00\x00\x00\x00"


def image() -> ImageContent:
    return ImageContent(type="image", data=base64.b64encode(PNG).decode(), mimeType="image/png")


def embedded(uri: str, text: str) -> EmbeddedResource:
    contents = TextResourceContents(uri=uri, mimeType="text/plain", text=text)
    return EmbeddedResource(type="resource", resource=contents)


@server.tool()
def test_simple_text() -> str:
    """A plain text answer."""
    return "This is a simple text response for testing."


@server.tool()
def test_image_content() -> list:
    """An image."""
    return [image()]


@server.tool()
def test_audio_content() -> list:
    """A sound."""
    return [AudioContent(type="audio", data=base64.b64encode(WAV).decode(), mimeType="audio/wav")]


@server.tool()
def test_embedded_resource() -> list:
    """An embedded resource."""
    return [embedded("test://embedded-resource", "This is an embedded resource content.")]


@server.tool()
def test_multiple_content_types() -> list:
    """Text, an image and a resource."""
    text = TextContent(type="text", text="Multiple content types test:")
    return [text, image(), embedded("test://mixed-content-resource", '{"test": "data"}')]


@server.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Three log messages while it runs."""
    for message in ["Tool execution started", "Tool processing data", "Tool execution completed"]:
        await ctx.info(message)
        await asyncio.sleep(0.05)
    return "Tool with logging executed successfully"


@server.tool()
def test_error_handling() -> str:
    """Always fails."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@server.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Progress 0, 50, 100 of 100."""
    for progress in [0, 50, 100]:
        await ctx.report_progress(progress, 100)
        await asyncio.sleep(0.05)
    return "Tool with progress executed successfully"


@server.tool()
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Asks the client's model."""
    message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
    answer = await ctx.session.create_message(messages=[message], max_tokens=100)
    text = getattr(answer.content, "text", str(answer.content))
    return f"LLM response: {text}"


async def elicit(ctx: Context, message: str, schema: dict) -> str:
    answer = await ctx.session.elicit_form(message=message, requested_schema=schema)
    return f"action={answer.action}, content={answer.content}"


@server.tool()
async def test_elicitation(message: str, ctx: Context) -> str:
    """Asks the user for a name and an address."""
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    return "User response: " + await elicit(ctx, message, schema)


@server.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Asks with a default for every primitive type."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": True},
        },
    }
    return "Elicitation completed: " + await elicit(ctx, "Defaults", schema)


@server.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Asks with the five kinds of enum."""
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ]},
            "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                           "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "items": {"anyOf": [
                {"const": "value1", "title": "First Choice"},
                {"const": "value2", "title": "Second Choice"},
                {"const": "value3", "title": "Third Choice"},
            ]}},
        },
    }
    return "Elicitation completed: " + await elicit(ctx, "Enums", schema)


# The 2026-07-28 multi-round-trip scenarios: these tools ask their client the 2025-11-25 way (the
# fixture server speaks that era over stdio); the gateway asks a 2026-07-28 client for the same
# input through `input_required` answers, and carries the answers back.


def name_schema(field: str) -> dict:
    return {"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}


@server.tool()
async def test_input_required_result_elicitation(ctx: Context) -> str:
    """Asks the user's name."""
    answer = await ctx.session.elicit_form(message="What is your name?", requested_schema=name_schema("name"))
    return f"Hello, {(answer.content or {}).get('name')}!"


@server.tool()
async def test_input_required_result_sampling(ctx: Context) -> str:
    """Asks the client's model a question."""
    question = SamplingMessage(role="user", content=TextContent(type="text", text="What is the capital of France?"))
    answer = await ctx.session.create_message(messages=[question], max_tokens=100)
    return getattr(answer.content, "text", str(answer.content))


@server.tool()
async def test_input_required_result_list_roots(ctx: Context) -> str:
    """Asks the client's roots."""
    roots = await ctx.session.list_roots()
    return "Roots: " + ", ".join(str(root.uri) for root in roots.roots)


@server.tool()
async def test_input_required_result_request_state(ctx: Context) -> str:
    """Asks for a confirmation."""
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    answer = await ctx.session.elicit_form(message="Please confirm", requested_schema=schema)
    return f"Confirmed with the request state: {answer.content}"


@server.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> str:
    """Asks for a confirmation; a tampered retry never reaches it."""
    return await test_input_required_result_request_state(ctx)


@server.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """Asks three things at once."""
    question = SamplingMessage(role="user", content=TextContent(type="text", text="Generate a greeting"))
    name, greeting, roots = await asyncio.gather(
        ctx.session.elicit_form(message="What is your name?", requested_schema=name_schema("name")),
        ctx.session.create_message(messages=[question], max_tokens=50),
        ctx.session.list_roots(),
    )
    return f"{getattr(greeting.content, 'text', '')} {(name.content or {}).get('name')} ({len(roots.roots)} roots)"


@server.tool()
async def test_input_required_result_multi_round(ctx: Context) -> str:
    """Asks twice, one after the other."""
    name = await ctx.session.elicit_form(message="Step 1: What is your name?", requested_schema=name_schema("name"))
    color = await ctx.session.elicit_form(
        message="Step 2: What is your favorite color?", requested_schema=name_schema("color")
    )
    return f"{(name.content or {}).get('name')} likes {(color.content or {}).get('color')}"


@server.tool()
async def test_input_required_result_capabilities(ctx: Context) -> str:
    """Asks for sampling and elicitation at once; the gateway asks only what the client declared."""
    question = SamplingMessage(role="user", content=TextContent(type="text", text="Say hi"))
    sampled, elicited = await asyncio.gather(
        ctx.session.create_message(messages=[question], max_tokens=10),
        ctx.session.elicit_form(message="Your name?", requested_schema=name_schema("name")),
        return_exceptions=True,
    )
    return f"sampled: {not isinstance(sampled, Exception)}, elicited: {not isinstance(elicited, Exception)}"


@server.tool()
async def test_streaming_elicitation(ctx: Context) -> str:
    """Asks the user, while the answer streams."""
    answer = await ctx.session.elicit_form(message="Your name?", requested_schema=name_schema("name"))
    return f"Hello, {(answer.content or {}).get('name')}!"


@server.tool()
async def test_logging_tool(ctx: Context) -> str:
    """Logs: a client that set no log level must not see it."""
    await ctx.info("a log line")
    return "logged"


@server.tool()
async def test_missing_capability(ctx: Context) -> str:
    """Needs sampling."""
    question = SamplingMessage(role="user", content=TextContent(type="text", text="Say hi"))
    answer = await ctx.session.create_message(messages=[question], max_tokens=10)
    return getattr(answer.content, "text", "")


@server.tool()
async def test_trigger_tool_change(ctx: Context) -> str:
    """Says the tool list changed (to its 2025-11-25 client: the gateway)."""
    await ctx.session.send_tool_list_changed()
    return "tools changed"


@server.tool()
async def test_trigger_prompt_change(ctx: Context) -> str:
    """Says the prompt list changed (to its 2025-11-25 client: the gateway)."""
    await ctx.session.send_prompt_list_changed()
    return "prompts changed"


@server.prompt()
async def test_input_required_result_prompt(ctx: Context) -> str:
    """A prompt that asks the user for its context."""
    schema = name_schema("context")
    answer = await ctx.session.elicit_form(message="What context should the prompt use?", requested_schema=schema)
    return f"Use this context: {(answer.content or {}).get('context')}"


@server.resource("test://static-text", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@server.resource("test://static-binary", mime_type="image/png")
def static_binary() -> bytes:
    return PNG


@server.resource("test://template/{id}/data", mime_type="application/json")
def template(id: str) -> str:
    return '{"id": "%s", "templateTest": true, "data": "Data for ID: %s"}' % (id, id)


@server.resource("test://watched-resource", mime_type="text/plain")
def watched() -> str:
    return "Watched resource content"


@server.prompt()
def test_simple_prompt() -> str:
    """A prompt without arguments."""
    return "This is a simple prompt for testing."


@server.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with two arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@server.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list:
    """A prompt embedding a resource."""
    return [
        {"role": "user", "content": embedded(resourceUri, "Embedded resource content for testing.")},
        {"role": "user", "content": TextContent(type="text", text="Please process the embedded resource above.")},
    ]


@server.prompt()
def test_prompt_with_image() -> list:
    """A prompt with an image."""
    return [
        {"role": "user", "content": image()},
        {"role": "user", "content": TextContent(type="text", text="Please analyze the image above.")},
    ]


@server.completion()
async def complete(ref, argument, context):
    from mcp.types import Completion
    return Completion(values=[], total=0, hasMore=False)


SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@server.tool(description="Tool with JSON Schema 2020-12 features")
def json_schema_2020_12_tool(name: str = "") -> str:
    return f"Hello, {name}"


# Its input schema as the scenario gives it, every keyword kept (the SDK would derive one).
server._tool_manager.get_tool("json_schema_2020_12_tool").parameters = SCHEMA_2020_12


async def subscribed(ctx, params) -> EmptyResult:
    return EmptyResult()


# The 2025-11-25 subscriptions: MCPServer serves only 2026-07-28's subscriptions/listen, so the
# handlers go on the low-level server it wraps.
server._lowlevel_server.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribed)
server._lowlevel_server.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, subscribed)

if __name__ == "__main__":
    server.run()
