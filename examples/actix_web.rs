//! An actix-web service sharing one MCP connection across its workers.
//!
//! ```text
//! cargo run --features actix-web --example actix_web
//! curl 'http://127.0.0.1:8080/echo?text=hi'
//! curl 'http://127.0.0.1:8080/sleep?ms=60000'   # press Ctrl-C: the MCP call is cancelled on the server
//! ```
//!
//! The connection is made once, in `main`, before `HttpServer::new`, and shared through
//! `web::Data`. A handler awaits the MCP call directly. With `watch_connection` and the
//! `cancel_on_disconnect` middleware, a handler whose HTTP client went away is dropped, which
//! cancels its MCP call on the MCP server.

#[path = "../tests/support/workspace_bins.rs"]
mod workspace_bins;

use actix_mcp::{Client, StdioTransport};
use actix_web::{get, middleware::from_fn, web, App, HttpResponse, HttpServer};
use serde_json::json;

#[derive(serde::Deserialize)]
struct Echo {
    text: String,
}

#[get("/echo")]
async fn echo(mcp: web::Data<Client>, query: web::Query<Echo>) -> HttpResponse {
    match mcp.call_tool("echo", json!({ "text": query.text })).await {
        Ok(result) => HttpResponse::Ok().body(result.text()),
        Err(e) => HttpResponse::BadGateway().body(e.to_string()),
    }
}

#[derive(serde::Deserialize)]
struct Sleep {
    ms: u64,
}

#[get("/sleep")]
async fn sleep(mcp: web::Data<Client>, query: web::Query<Sleep>) -> HttpResponse {
    match mcp
        .call_tool("sleep", json!({ "ms": query.ms }))
        .no_timeout()
        .await
    {
        Ok(result) => HttpResponse::Ok().body(result.text()),
        Err(e) => HttpResponse::BadGateway().body(e.to_string()),
    }
}

fn main() -> std::io::Result<()> {
    // The demo server (package `actix-mcp-demo-server`), built first if needed.
    let server = workspace_bins::try_program(
        &[workspace_bins::DEMO_SERVER],
        workspace_bins::DEMO_SERVER,
        false,
    )
    .map_err(std::io::Error::other)?;
    actix_web::rt::System::new().block_on(async {
        // One connection for the whole service, made before the workers start.
        let client = Client::connect(StdioTransport::new(server))
            .await
            .map_err(std::io::Error::other)?;
        let client = web::Data::new(client);
        println!("listening on http://127.0.0.1:8080");
        HttpServer::new(move || {
            App::new()
                .app_data(client.clone())
                .wrap(from_fn(actix_mcp::web::cancel_on_disconnect))
                .service(echo)
                .service(sleep)
        })
        .on_connect(actix_mcp::web::watch_connection)
        .bind(("127.0.0.1", 8080))?
        .run()
        .await
    })
}
