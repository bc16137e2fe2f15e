// A downstream client on the official TypeScript SDK (v2, `@modelcontextprotocol/client`), for
// gateway/tests/http.rs.
//
//   node typescript_client.mjs URL
//
// Prints one JSON line per step: the tool names the gateway lists, a routed call's answer, then
// a call to `a__sleep` abandoned after 2 s through an AbortSignal.
//
// The SDK is imported from the path in TS_CLIENT_ENTRY, as this script lives outside its
// node_modules.

import { pathToFileURL } from 'node:url';

const { Client, StreamableHTTPClientTransport } = await import(
  pathToFileURL(process.env.TS_CLIENT_ENTRY).href
);

const client = new Client({ name: 'typescript-downstream', version: '1.0.0' });
await client.connect(new StreamableHTTPClientTransport(new URL(process.argv[2])));
const tools = await client.listTools();
console.log(JSON.stringify({ tools: tools.tools.map((tool) => tool.name) }));
const echo = await client.callTool({ name: 'b__echo', arguments: { text: 'from typescript' } });
console.log(JSON.stringify({ echo: echo.content[0].text }));
const abandon = new AbortController();
setTimeout(() => abandon.abort('the user left'), 2000);
try {
  await client.callTool(
    { name: 'a__sleep', arguments: { ms: 60000 } },
    { signal: abandon.signal },
  );
  console.log(JSON.stringify({ abandoned: false }));
} catch (error) {
  console.log(JSON.stringify({ abandoned: true }));
}
// The SDK sends its cancel on its own time: let it go out before closing.
await new Promise((resolve) => setTimeout(resolve, 500));
await client.close();
