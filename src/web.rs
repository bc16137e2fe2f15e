//! actix-web integration (feature `actix-web`): when the HTTP client of a request goes away, the
//! request's handler future is dropped, which cancels the MCP calls it was awaiting, on the MCP
//! server.
//!
//! actix-web itself keeps running a handler whose client disconnected until it tries to write
//! the response. Two pieces close that gap:
//!
//! ```no_run
//! # async fn f(client: actix_web::web::Data<actix_mcp::Client>) -> std::io::Result<()> {
//! use actix_web::{middleware::from_fn, App, HttpServer};
//!
//! HttpServer::new(move || {
//!     App::new()
//!         .app_data(client.clone())
//!         .wrap(from_fn(actix_mcp::web::cancel_on_disconnect))
//! })
//! .on_connect(actix_mcp::web::watch_connection)
//! .bind(("127.0.0.1", 8080))?
//! .run()
//! .await
//! # }
//! ```
//!
//! How it knows: `watch_connection` keeps a duplicate of each TCP connection's socket; the
//! middleware waits for it to become readable and peeks: end of stream or a reset means the client
//! is gone. If the client already sent more bytes (a pipelined request), it cannot tell and stops
//! watching for that request. A client that half-closes its side while waiting for the answer is
//! taken as gone.

use std::any::Any;

use actix_web::{
    body::MessageBody,
    dev::{Extensions, ServiceRequest, ServiceResponse},
    http::StatusCode,
    middleware::Next,
};

/// A duplicate of the client's socket, kept with the connection.
#[cfg(unix)]
struct ClientSocket(std::net::TcpStream);

/// For `HttpServer::on_connect`: remembers each TCP connection's socket so
/// [`cancel_on_disconnect`] can watch it. Does nothing on platforms other than unix.
pub fn watch_connection(connection: &dyn Any, data: &mut Extensions) {
    #[cfg(unix)]
    if let Some(tcp) = connection.downcast_ref::<actix_web::rt::net::TcpStream>() {
        use std::os::fd::AsFd;
        if let Ok(fd) = tcp.as_fd().try_clone_to_owned() {
            data.insert(ClientSocket(std::net::TcpStream::from(fd)));
        }
    }
    #[cfg(not(unix))]
    let _ = (connection, data);
}

/// Middleware (for `actix_web::middleware::from_fn`): drops the request's handler when its client
/// goes away, so the MCP calls it awaits are cancelled on the server. Requests on connections
/// that [`watch_connection`] did not see (and every request on platforms other than unix) are
/// passed through untouched.
pub async fn cancel_on_disconnect<B: MessageBody>(
    request: ServiceRequest,
    next: Next<B>,
) -> Result<ServiceResponse<B>, actix_web::Error> {
    #[cfg(unix)]
    let socket = request
        .conn_data::<ClientSocket>()
        .and_then(|s| s.0.try_clone().ok());
    #[cfg(not(unix))]
    let socket: Option<std::convert::Infallible> = None;
    let Some(socket) = socket else {
        return next.call(request).await;
    };
    tokio::select! {
        biased;
        response = next.call(request) => response,
        () = client_gone(socket) => {
            tracing::debug!("HTTP client went away; dropping its handler");
            let status = StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST);
            Err(actix_web::error::InternalError::new("client disconnected", status).into())
        }
    }
}

/// Resolves when the peer closed or reset the connection; never, if that cannot be known.
#[cfg(unix)]
async fn client_gone(socket: std::net::TcpStream) {
    use std::io::ErrorKind;
    // The duplicate shares the connection's open file description, already non-blocking; setting
    // it again is harmless and makes `from_std`'s requirement explicit.
    let socket = match socket.set_nonblocking(true) {
        Ok(()) => tokio::net::TcpStream::from_std(socket),
        Err(e) => Err(e),
    };
    let Ok(socket) = socket else {
        return std::future::pending().await;
    };
    let mut byte = [0u8; 1];
    loop {
        match socket.peek(&mut byte).await {
            Ok(0) => return,                              // orderly shutdown by the client
            Ok(_) => return std::future::pending().await, // a pipelined request: cannot tell
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return, // reset, or the socket is gone
        }
    }
}

#[cfg(not(unix))]
async fn client_gone(socket: std::convert::Infallible) {
    match socket {}
}
