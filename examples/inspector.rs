//! The live inspector of a many-server manager: a web page showing each server's state, the
//! routed calls in flight with their progress, and a button per call that cancels it.
//!
//! ```text
//! cargo run --features actix-web --example inspector
//! # open http://127.0.0.1:8080/inspector/
//! curl -X POST 'http://127.0.0.1:8080/start?steps=30'   # a call with progress, 30 s long
//! ```
//!
//! Two demo servers (`demo` and `spare`, the same program) are managed by one `Servers`; the
//! inspector is `actix_mcp::inspector::scope`. `POST /start` starts a routed `progress` call that
//! runs until it ends or is cancelled from the page (its server then gets the cancel).

#[path = "../tests/support/workspace_bins.rs"]
mod workspace_bins;

use actix_mcp::{ConnectOptions, Servers, StdioTransport};
use actix_web::{post, web, App, HttpResponse, HttpServer};
use serde_json::json;

#[derive(serde::Deserialize)]
struct Start {
    steps: Option<u64>,
}

/// Starts a `progress` call (one step a second) in the background; answers with its outcome
/// only in the log.
#[post("/start")]
async fn start(servers: web::Data<Servers>, query: web::Query<Start>) -> HttpResponse {
    let steps = query.steps.unwrap_or(30).min(1_000);
    let call = servers
        .call(
            "demo/progress",
            json!({ "steps": steps, "interval_ms": 1000 }),
        )
        .timeout(std::time::Duration::from_secs(steps + 60));
    actix_web::rt::spawn(async move {
        match call.await {
            Ok(_) => println!("a progress call ended"),
            Err(e) => println!("a progress call ended: {e}"),
        }
    });
    HttpResponse::Accepted().body("started\n")
}

fn main() -> std::io::Result<()> {
    let server = workspace_bins::try_program(
        &[workspace_bins::DEMO_SERVER],
        workspace_bins::DEMO_SERVER,
        false,
    )
    .map_err(std::io::Error::other)?;
    actix_web::rt::System::new().block_on(async {
        let servers = Servers::new(ConnectOptions::default());
        let demo = server.clone();
        servers.add("demo", move || StdioTransport::new(demo.clone()));
        servers.add("spare", move || StdioTransport::new(server.clone()));
        servers.start_all().await;
        println!("inspector on http://127.0.0.1:8080/inspector/");
        let data = web::Data::new(servers.clone());
        HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .service(start)
                .service(actix_mcp::inspector::scope("/inspector", servers.clone()))
        })
        .bind(("127.0.0.1", 8080))?
        .run()
        .await
    })
}
