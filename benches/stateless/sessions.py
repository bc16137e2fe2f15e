"""Abandoned sessions (issue 33): opens N 2025-11-25 sessions at a gateway and never closes them;
prints the gateway's RSS before, with them, and after its idle limit has passed, and checks that
the first session's id then answers 404.

    python3 benches/stateless/sessions.py GATEWAY DEMO [N] [IDLE_SECONDS]
"""
import http.client, json, os, re, subprocess, sys, tempfile, threading, time

gateway, demo = sys.argv[1], sys.argv[2]
count = int(sys.argv[3]) if len(sys.argv) > 3 else 20_000
idle = int(sys.argv[4]) if len(sys.argv) > 4 else 10

work = tempfile.mkdtemp()
config = os.path.join(work, "mcp.json")
with open(config, "w") as f:
    json.dump({"mcpServers": {"demo": {"command": demo}}}, f)
proc = subprocess.Popen(
    [gateway, "--config", config, "--listen", "127.0.0.1:0", "--session-idle", str(idle),
     "--max-sessions", str(count + 10)],
    stderr=subprocess.PIPE, text=True)
for line in proc.stderr:
    found = re.search(r"listening on http://([^/]+)/mcp", line)
    if found:
        host, port = found.group(1).split(":")
        break
threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()

def rss_mb():
    with open(f"/proc/{proc.pid}/status") as f:
        kb = next(int(l.split()[1]) for l in f if l.startswith("VmRSS"))
    return kb / 1024

INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "abandon", "version": "1"}}})
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}

def post(conn, body, session=None):
    headers = dict(HEADERS)
    if session:
        headers["mcp-session-id"] = session
    conn.request("POST", "/mcp", body, headers)
    response = conn.getresponse()
    response.read()
    return response.status, response.getheader("mcp-session-id")

ids, lock = [], threading.Lock()
def opener(n):
    conn = http.client.HTTPConnection(host, int(port))
    for _ in range(n):
        status, session = post(conn, INIT)
        assert status == 200, status
        with lock:
            ids.append(session)

warm = http.client.HTTPConnection(host, int(port))
post(warm, INIT)
before = rss_mb()
start = time.time()
threads = [threading.Thread(target=opener, args=(count // 16,)) for _ in range(16)]
[t.start() for t in threads]
[t.join() for t in threads]
took = time.time() - start
held = rss_mb()
print(f"{len(ids)} sessions opened in {took:.1f} s; RSS {before:.1f} MB before, {held:.1f} MB with "
      f"them ({(held - before) * 1024 / len(ids):.2f} KB a session)")
# Nothing touches the sessions meanwhile (a probe is activity): the idle limit and a sweep.
time.sleep(idle * 1.5 + 2)
probe = http.client.HTTPConnection(host, int(port))
status, _ = post(probe, json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}), ids[0])
print(f"after the idle limit: the first session answers {status}; RSS {rss_mb():.1f} MB")
again_start = rss_mb()
ids.clear()
threads = [threading.Thread(target=opener, args=(count // 16,)) for _ in range(16)]
[t.start() for t in threads]
[t.join() for t in threads]
print(f"{len(ids)} more sessions: RSS {rss_mb():.1f} MB (memory reused, not grown: "
      f"{rss_mb() - again_start:+.1f} MB)")
proc.terminate()
proc.wait()
