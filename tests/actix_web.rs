//! Embedding in actix-web: one connection shared by every worker, and an HTTP client that goes
//! away cancels the MCP call its request started, on the MCP server.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

mod common;

use std::{
    io::{Read, Write},
    net::TcpStream,
};

use actix_mcp::Client;
use actix_web::{web, App, HttpResponse, HttpServer};
use common::*;
use serde_json::json;

async fn slow(mcp: web::Data<Client>) -> HttpResponse {
    match mcp.call_tool("sleep", json!({"ms": 60_000})).await {
        Ok(r) => HttpResponse::Ok().body(r.text()),
        Err(e) => HttpResponse::BadGateway().body(e.to_string()),
    }
}

async fn echo(mcp: web::Data<Client>, body: String) -> HttpResponse {
    match mcp.call_tool("echo", json!({"text": body})).await {
        Ok(r) => HttpResponse::Ok().body(r.text()),
        Err(e) => HttpResponse::BadGateway().body(e.to_string()),
    }
}

fn http(port: u16, request: &str) -> TcpStream {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream.write_all(request.as_bytes()).expect("write");
    stream
}

#[actix_web::test]
async fn every_worker_shares_the_one_connection() {
    let journal = Journal::new("actix-web");
    let client = web::Data::new(Client::connect(journal.server()).await.unwrap());
    let app_client = client.clone();
    let server = HttpServer::new(move || {
        App::new()
            .app_data(app_client.clone())
            .route("/slow", web::get().to(slow))
            .route("/echo", web::post().to(echo))
    })
    .workers(2)
    .bind(("127.0.0.1", 0))
    .unwrap();
    let port = server.addrs()[0].port();
    let server = server.run();
    let handle = server.handle();
    actix_rt::spawn(server);

    // Both workers share the one connection.
    let replies = actix_rt::task::spawn_blocking(move || {
        (0..4)
            .map(|i| {
                let body = format!("hello {i}");
                let mut s = http(
                    port,
                    &format!("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()),
                );
                let mut reply = String::new();
                s.read_to_string(&mut reply).unwrap();
                reply
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    for (i, reply) in replies.iter().enumerate() {
        assert!(reply.ends_with(&format!("hello {i}")), "{reply}");
    }

    let echoes = journal
        .frames()
        .iter()
        .filter(|f| f["params"]["name"] == "echo")
        .count();
    assert_eq!(echoes, 4, "every worker used the one server process");
    handle.stop(false).await;
}

/// actix-web keeps running a handler whose client is gone; with `watch_connection` and
/// `cancel_on_disconnect` the handler is dropped and its MCP call cancelled on the server.
#[cfg(feature = "actix-web")]
#[actix_web::test]
async fn a_departed_http_client_cancels_its_mcp_call_on_the_server() {
    use actix_web::middleware::from_fn;
    let journal = Journal::new("actix-web-gone");
    let client = web::Data::new(Client::connect(journal.server()).await.unwrap());
    let app_client = client.clone();
    let server = HttpServer::new(move || {
        App::new()
            .app_data(app_client.clone())
            .wrap(from_fn(actix_mcp::web::cancel_on_disconnect))
            .route("/slow", web::get().to(slow))
            .route("/echo", web::post().to(echo))
    })
    .on_connect(actix_mcp::web::watch_connection)
    .workers(2)
    .bind(("127.0.0.1", 0))
    .unwrap();
    let port = server.addrs()[0].port();
    let server = server.run();
    let handle = server.handle();
    actix_rt::spawn(server);

    // A normal request still works through the middleware.
    let reply = actix_rt::task::spawn_blocking(move || {
        let mut s = http(
            port,
            "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
        );
        let mut reply = String::new();
        s.read_to_string(&mut reply).unwrap();
        reply
    })
    .await
    .unwrap();
    assert!(
        reply.starts_with("HTTP/1.1 200") && reply.ends_with("ok"),
        "{reply}"
    );

    // A client that asks for something slow, then hangs up.
    let stream =
        actix_rt::task::spawn_blocking(move || http(port, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"))
            .await
            .unwrap();
    journal
        .wait_for("the sleep call at the MCP server", |l| {
            l.iter().any(|l| l.contains("\"sleep\""))
        })
        .await;
    drop(stream);
    journal
        .wait_for("the cancel at the MCP server", |l| {
            l.iter().any(|l| l.contains("notifications/cancelled"))
        })
        .await;
    journal.cancelled_call("sleep");
    assert_eq!(server_stats(&client).await["pending"], 0);
    handle.stop(false).await;
}
