// A downstream client on the official TypeScript SDK, v1 (`@modelcontextprotocol/sdk` 1.x) or
// v2 (`@modelcontextprotocol/client` 2.x), for gateway/tests/clients.rs.
//
//   TS_SDK=<the SDK package's directory> node typescript_client.mjs URL ERA
//
// ERA is the protocol era to speak: `2025-11-25` (the `initialize` handshake and a session) or
// `2026-07-28` (v2 only: `server/discover`, then a self-describing POST per request). Prints one
// JSON line per step: the protocol version the SDK agreed, the tool names the gateway lists, a
// routed call's answer, how many progress updates a call of `a__progress` brought, the name its
// elicitation handler answered `b__ask_client`'s `elicitation/create` with (as the upstream
// server got it), a task's result and whether the session lists it (v1's experimental tasks;
// null for v2), `calling` once a call to `a__sleep` is started; a line on stdin then
// cancels that call in the SDK's own way (an AbortSignal), and the script prints `abandoned`; a
// second line on stdin closes the client.
//
// The SDK is imported from TS_SDK, as this script lives outside its node_modules.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';

const [url, era] = process.argv.slice(2);
const sdk = process.env.TS_SDK;
const v1 = JSON.parse(readFileSync(join(sdk, 'package.json'), 'utf8')).version.startsWith('1.');
const load = (file) => import(pathToFileURL(join(sdk, file)).href);
const { Client } = await load(v1 ? 'dist/esm/client/index.js' : 'dist/index.mjs');
const { StreamableHTTPClientTransport } = await load(
  v1 ? 'dist/esm/client/streamableHttp.js' : 'dist/index.mjs',
);
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const step = (fields) => console.log(JSON.stringify(fields));

// v2 speaks 2026-07-28 when asked to negotiate (`auto`: `server/discover`, falling back to
// `initialize` when the server has no 2026-07-28); by default it goes straight to `initialize`.
const options = era === '2026-07-28' ? { versionNegotiation: { mode: 'auto' } } : {};
if (v1 && era !== '2025-11-25') throw new Error(`the v1 SDK speaks no ${era}`);
const client = new Client(
  { name: 'typescript-downstream', version: '1.0.0' },
  { ...options, capabilities: { elicitation: {} } },
);
const answerElicitation = async () => ({ action: 'accept', content: { name: 'typescript' } });
if (v1) {
  const { ElicitRequestSchema } = await load('dist/esm/types.js');
  client.setRequestHandler(ElicitRequestSchema, answerElicitation);
} else {
  client.setRequestHandler('elicitation/create', answerElicitation);
}
const transport = new StreamableHTTPClientTransport(new URL(url));
await client.connect(transport);
step({ version: client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion });
// v1's callTool takes a result schema before its options.
const callTool = (params, options) =>
  v1 ? client.callTool(params, undefined, options) : client.callTool(params, options);
const tools = await client.listTools();
step({ tools: tools.tools.map((tool) => tool.name) });
const echo = await callTool({ name: 'b__echo', arguments: { text: `from typescript at ${era}` } });
step({ echo: echo.content[0].text });
let updates = 0;
await callTool(
  { name: 'a__progress', arguments: { steps: 3, interval_ms: 10 } },
  { onprogress: () => (updates += 1) },
);
step({ progress: updates });
const asked = await callTool({
  name: 'b__ask_client',
  arguments: {
    method: 'elicitation/create',
    params: {
      message: 'Your name?',
      requestedSchema: {
        type: 'object',
        properties: { name: { type: 'string' } },
        required: ['name'],
      },
    },
  },
});
step({ elicited: JSON.parse(asked.content[0].text).result.content.name });
// v1's experimental tasks (2025-11-25): a call of `a__task_sleep` as a task, its result, and the
// task in the session's list; `task: null` for an SDK without them.
const tasks = v1 && era === '2025-11-25' ? client.experimental?.tasks : undefined;
if (tasks) {
  let created;
  let text;
  const stream = tasks.callToolStream(
    { name: 'a__task_sleep', arguments: { ms: 200, steps: 2 } },
    undefined,
    { task: { ttl: 60000 } },
  );
  for await (const message of stream) {
    if (message.type === 'taskCreated') created = message.task.taskId;
    if (message.type === 'result') text = message.result.content[0].text;
    if (message.type === 'error') throw message.error;
  }
  const listed = await tasks.listTasks();
  step({ task: text, listed: listed.tasks.some((task) => task.taskId === created) });
} else {
  step({ task: null });
}
const abandon = new AbortController();
const sleeping = callTool(
  { name: 'a__sleep', arguments: { ms: 60000 } },
  { signal: abandon.signal },
).then(
  () => false,
  () => abandon.signal.aborted,
);
step({ calling: true });
await lines.next();
abandon.abort('the user left');
step({ abandoned: await sleeping });
await lines.next();
await client.close();
process.exit(0);
