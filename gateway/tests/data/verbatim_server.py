"""An MCP server over stdio (2025-11-25) that answers each method with a fixed JSON text, written
as it is given: the file named by its argument is a JSON object of method names and result texts
(a method not in it is answered `{}`). What a client reads of those texts through the gateway
tells whether the gateway passed them on or re-made them."""

import json
import sys

with open(sys.argv[1]) as given:
    RESULTS = json.load(given)

for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message or "method" not in message:
        continue
    result = RESULTS.get(message["method"], "{}")
    sys.stdout.write('{"jsonrpc":"2.0","id":%s,"result":%s}\n' % (json.dumps(message["id"]), result))
    sys.stdout.flush()
