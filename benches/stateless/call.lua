-- wrk: one MCP tools/call per request, in the era and to the tool the environment names.
-- ERA=modern: 2026-07-28 POSTs without a session (each request says who it is);
-- ERA=legacy: 2025-11-25 POSTs in the session SESSION.
local era = os.getenv("ERA") or "modern"
local tool = os.getenv("TOOL") or "echo"
local session = os.getenv("SESSION")
id = 0
local threads = 0

-- Each thread's ids are its own (ids in flight in one session are unique).
setup = function(thread)
  threads = threads + 1
  thread:set("id", threads * 1000000000)
end

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
if era == "modern" then
  wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
  wrk.headers["Mcp-Method"] = "tools/call"
  wrk.headers["Mcp-Name"] = tool
else
  wrk.headers["MCP-Protocol-Version"] = "2025-11-25"
  wrk.headers["Mcp-Session-Id"] = session
end

local meta = ""
if era == "modern" then
  meta = ',"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",' ..
         '"io.modelcontextprotocol/clientCapabilities":{}}'
end

request = function()
  id = id + 1
  local body = '{"jsonrpc":"2.0","id":' .. id .. ',"method":"tools/call","params":{"name":"' ..
               tool .. '","arguments":{"text":"hi"}' .. meta .. '}}'
  return wrk.format(nil, nil, nil, body)
end

response = function(status, headers, body)
  if status ~= 200 or not string.find(body, '"hi"', 1, true) then
    wrk.thread:stop()
    io.stderr:write("unexpected answer " .. status .. ": " .. body .. "\n")
  end
end
