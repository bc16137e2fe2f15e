//! A live inspector for a [`Servers`] manager (feature `actix-web`): a web page showing each
//! server's state, the routed calls in flight with their progress, and a button per call that
//! cancels it (on its server too).
//!
//! ```no_run
//! # async fn f(servers: actix_mcp::Servers) -> std::io::Result<()> {
//! use actix_web::{App, HttpServer};
//!
//! HttpServer::new(move || App::new().service(actix_mcp::inspector::scope("/inspector", servers.clone())))
//!     .bind(("127.0.0.1", 8080))?
//!     .run()
//!     .await
//! # }
//! ```
//!
//! `GET {path}/` is the page; it polls `GET {path}/state` (JSON) twice a second and cancels with
//! `POST {path}/calls/{id}/cancel`. With the `skills` feature, `GET {path}/skills` lists every
//! server's skills (SEP-2640; asked when the page opens, nothing of them fetched). Anyone who reaches it can cancel calls: mount it where only
//! you can (loopback, or behind your own authorization).

use actix_web::{http::StatusCode, web, HttpResponse};
use serde_json::{json, Value};

use crate::servers::{Servers, Status};

/// The inspector's routes under `path`. Turns on [`Servers::track_calls`].
pub fn scope(path: &str, servers: Servers) -> actix_web::Scope {
    servers.track_calls();
    web::scope(path)
        .app_data(web::Data::new(servers))
        .route("", web::get().to(page))
        .route("/", web::get().to(page))
        .route("/state", web::get().to(state))
        .route("/calls/{id}/cancel", web::post().to(cancel))
        .route("/skills", web::get().to(skills))
}

/// Every server's skills: name, description and file count, each with its server; the servers
/// that could not say, with why. Their text is shown to a person: control characters visible.
#[cfg(feature = "skills")]
async fn skills(servers: web::Data<Servers>) -> HttpResponse {
    use crate::visible::visible;
    let catalogue = servers.skills().await;
    let text = |value: Option<&Value>| visible(value.and_then(Value::as_str).unwrap_or_default());
    let skills: Vec<Value> = catalogue
        .skills
        .iter()
        .map(|(server, skill)| {
            let entry = skill.entry();
            json!({
                "server": server,
                "name": text(entry.frontmatter.get("name")),
                "description": text(entry.frontmatter.get("description")),
                "files": entry.resources.len(),
            })
        })
        .collect();
    let unavailable: Vec<Value> = catalogue
        .unavailable
        .iter()
        .map(|(server, error)| json!({"server": server, "error": visible(&error.to_string())}))
        .collect();
    HttpResponse::Ok()
        .content_type("application/json")
        .insert_header(("cache-control", "no-store"))
        .body(json!({"skills": skills, "unavailable": unavailable}).to_string())
}

/// Without the `skills` feature there are none to list.
#[cfg(not(feature = "skills"))]
async fn skills() -> HttpResponse {
    HttpResponse::NotFound().body("built without the skills feature")
}

async fn page() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body(PAGE)
}

async fn state(servers: web::Data<Servers>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .insert_header(("cache-control", "no-store"))
        .body(snapshot(&servers).to_string())
}

async fn cancel(servers: web::Data<Servers>, id: web::Path<u64>) -> HttpResponse {
    if servers.cancel_call(id.into_inner(), "cancelled from the inspector") {
        HttpResponse::NoContent().finish()
    } else {
        HttpResponse::build(StatusCode::NOT_FOUND).body("no such call in flight")
    }
}

/// What the page shows, as JSON.
pub fn snapshot(servers: &Servers) -> Value {
    let servers_json: Vec<Value> = servers
        .status()
        .into_iter()
        .map(|s| {
            let (state, error) = describe(&s.status);
            json!({"name": s.name, "status": state, "error": error, "starts": s.starts})
        })
        .collect();
    let calls: Vec<Value> = servers
        .calls_in_flight()
        .into_iter()
        .map(|c| {
            json!({
                "id": c.id,
                "tool": c.tool,
                "server": c.server,
                "elapsed_ms": c.elapsed.as_millis() as u64,
                "progress": c.progress.as_ref().map(|p| p.progress),
                "total": c.progress.as_ref().and_then(|p| p.total),
                "message": c.progress.as_ref().and_then(|p| p.message.clone()),
            })
        })
        .collect();
    let tools: Vec<Value> = servers
        .tool_stats()
        .into_iter()
        .map(|t| {
            json!({
                "server": t.server,
                "tool": t.tool,
                "calls": t.calls,
                "errors": t.errors,
                "cancels": t.cancels,
                "p50_ms": t.p50.as_secs_f64() * 1e3,
                "p99_ms": t.p99.as_secs_f64() * 1e3,
            })
        })
        .collect();
    json!({"servers": servers_json, "calls": calls, "tools": tools})
}

fn describe(status: &Status) -> (&'static str, Option<String>) {
    match status {
        Status::Idle => ("idle", None),
        Status::Starting => ("starting", None),
        Status::Ready => ("ready", None),
        Status::BackingOff { error, .. } => ("backing off", Some(error.to_string())),
        Status::Failed {
            restarts,
            window,
            last,
        } => (
            "failed",
            Some(format!(
                "failed {restarts} times within {window:?}; last error: {last}"
            )),
        ),
        Status::Stopped => ("stopped", None),
        Status::Disabled => ("disabled", None),
    }
}

/// The page: plain HTML and a script; every server-provided text goes in with `textContent`.
const PAGE: &str = r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>MCP inspector</title>
<style>
body { font: 14px system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin-bottom: 1.5em; }
th, td { text-align: left; padding: .3em .8em; border-bottom: 1px solid #ddd; }
.ready { color: #176f2c; } .failed, .backing { color: #a31515; }
#error { color: #a31515; }
</style>
</head>
<body>
<h1>MCP servers</h1>
<p id="error"></p>
<table id="servers">
<thead><tr><th>server</th><th>status</th><th>starts</th><th>last error</th></tr></thead>
<tbody></tbody>
</table>
<h2>Calls in flight</h2>
<table id="calls">
<thead><tr><th>#</th><th>server</th><th>tool</th><th>running</th><th>progress</th><th></th></tr></thead>
<tbody></tbody>
</table>
<p id="none">No calls in flight.</p>
<h2>Calls by tool</h2>
<table id="tools">
<thead><tr><th>server</th><th>tool</th><th>calls</th><th>errors</th><th>cancels</th><th>p50</th><th>p99</th></tr></thead>
<tbody></tbody>
</table>
<section id="skills-section" hidden>
<h2>Skills</h2>
<table id="skills">
<thead><tr><th>server</th><th>skill</th><th>description</th><th>files</th></tr></thead>
<tbody></tbody>
</table>
</section>
<script>
const base = location.pathname.replace(/\/$/, '');
function cell(row, text) {
  const td = document.createElement('td');
  td.textContent = text;
  row.appendChild(td);
  return td;
}
function progressCell(td, c) {
  if (c.progress === null) { td.textContent = '–'; return; }
  if (c.total !== null) {
    const bar = document.createElement('progress');
    bar.max = c.total; bar.value = c.progress;
    td.appendChild(bar);
  }
  const label = document.createElement('span');
  label.className = 'progress-text';
  label.textContent = ' ' + c.progress + (c.total !== null ? ' / ' + c.total : '') +
    (c.message ? ' ' + c.message : '');
  td.appendChild(label);
}
async function cancelCall(id, button) {
  button.disabled = true;
  button.textContent = 'cancelling…';
  await fetch(base + '/calls/' + id + '/cancel', { method: 'POST' });
  refresh();
}
function render(state) {
  const servers = document.querySelector('#servers tbody');
  servers.replaceChildren();
  for (const s of state.servers) {
    const row = document.createElement('tr');
    row.id = 'server-' + s.name;
    cell(row, s.name);
    cell(row, s.status).className = s.status.split(' ')[0];
    cell(row, String(s.starts));
    cell(row, s.error || '');
    servers.appendChild(row);
  }
  // Rows are kept and updated in place, so a button is never swapped under the pointer.
  const calls = document.querySelector('#calls tbody');
  const live = new Set();
  for (const c of state.calls) {
    live.add('call-' + c.id);
    let row = document.getElementById('call-' + c.id);
    if (!row) {
      row = document.createElement('tr');
      row.id = 'call-' + c.id;
      row.className = 'call';
      for (let i = 0; i < 5; i++) cell(row, '');
      row.cells[0].textContent = String(c.id);
      row.cells[2].textContent = c.tool;
      const button = document.createElement('button');
      button.id = 'cancel-' + c.id;
      button.className = 'cancel';
      button.textContent = 'Cancel';
      button.onclick = () => cancelCall(c.id, button);
      row.appendChild(document.createElement('td')).appendChild(button);
      calls.appendChild(row);
    }
    row.cells[1].textContent = c.server || '(finding its server)';
    row.cells[3].textContent = (c.elapsed_ms / 1000).toFixed(1) + ' s';
    const progress = row.cells[4];
    progress.replaceChildren();
    progressCell(progress, c);
  }
  for (const row of [...calls.rows]) {
    if (!live.has(row.id)) row.remove();
  }
  document.getElementById('none').hidden = state.calls.length > 0;
  const tools = document.querySelector('#tools tbody');
  tools.replaceChildren();
  for (const t of state.tools) {
    const row = document.createElement('tr');
    row.className = 'tool';
    cell(row, t.server);
    cell(row, t.tool);
    cell(row, String(t.calls));
    cell(row, String(t.errors));
    cell(row, String(t.cancels));
    cell(row, t.p50_ms.toFixed(1) + ' ms');
    cell(row, t.p99_ms.toFixed(1) + ' ms');
    tools.appendChild(row);
  }
}
// How many times the page has shown the state: what a test (or a person) can tell a slow page
// from a stuck one by.
let refreshes = 0;
async function refresh() {
  try {
    const response = await fetch(base + '/state', { cache: 'no-store' });
    render(await response.json());
    document.body.dataset.refreshes = String(++refreshes);
    document.getElementById('error').textContent = '';
  } catch (e) {
    document.getElementById('error').textContent = 'The inspector cannot be reached: ' + e;
  }
}
async function listSkills() {
  const response = await fetch(base + '/skills', { cache: 'no-store' });
  if (!response.ok) return;
  const listed = await response.json();
  const skills = document.querySelector('#skills tbody');
  for (const s of listed.skills) {
    const row = document.createElement('tr');
    row.className = 'skill';
    cell(row, s.server);
    cell(row, s.name);
    cell(row, s.description);
    cell(row, String(s.files));
    skills.appendChild(row);
  }
  document.getElementById('skills-section').hidden = listed.skills.length === 0;
}
refresh();
setInterval(refresh, 500);
listSkills();
</script>
</body>
</html>
"#;
