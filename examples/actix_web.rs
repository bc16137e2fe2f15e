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

#[path = "../src/bin/mcp-demo-server/server.rs"]
mod demo_server;

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
    if std::env::args_os().nth(1).is_some_and(|a| a == "serve") {
        let mut args = std::env::args_os();
        let program = args.next().unwrap_or_default();
        demo_server::main_from(std::iter::once(program).chain(args.skip(1)));
        return Ok(());
    }
    actix_web::rt::System::new().block_on(async {
        let me = std::env::current_exe()?;
        // One connection for the whole service, made before the workers start.
        let client = Client::connect(StdioTransport::new(me).arg("serve"))
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
