"""N sequential 2026-07-28 tools/call echo POSTs to the gateway on HOST:PORT, one keep-alive
connection (benches/stateless/callgrind.sh).

    python3 drive.py HOST PORT N
"""
import http.client, json, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
conn = http.client.HTTPConnection(host, port)
body = json.dumps({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"demo__echo","arguments":{"text":"hi"},
  "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}})
headers = {"content-type":"application/json","accept":"application/json, text/event-stream","mcp-protocol-version":"2026-07-28","mcp-method":"tools/call","mcp-name":"demo__echo"}
for i in range(n):
    conn.request("POST", "/mcp", body, headers)
    r = conn.getresponse(); data = r.read()
    if r.status != 200: print("bad", r.status, data[:200]); sys.exit(1)
print("ok", n)
