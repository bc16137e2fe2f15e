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

use std::{
    any::Any,
    io,
    os::fd::{AsFd, AsRawFd, OwnedFd},
};

use actix_web::{
    body::MessageBody,
    dev::{Extensions, ServiceRequest, ServiceResponse},
    http::StatusCode,
    middleware::Next,
};
use tokio::io::{unix::AsyncFd, Interest};

/// A duplicate of the client's socket, kept with the connection.
struct ClientSocket(OwnedFd);

/// For `HttpServer::on_connect`: remembers each TCP connection's socket so
/// [`cancel_on_disconnect`] can watch it.
pub fn watch_connection(connection: &dyn Any, data: &mut Extensions) {
    if let Some(tcp) = connection.downcast_ref::<actix_web::rt::net::TcpStream>() {
        if let Ok(fd) = tcp.as_fd().try_clone_to_owned() {
            data.insert(ClientSocket(fd));
        }
    }
}

/// Middleware (for `actix_web::middleware::from_fn`): drops the request's handler when its client
/// goes away, so the MCP calls it awaits are cancelled on the server. Requests on connections
/// that [`watch_connection`] did not see are passed through untouched.
pub async fn cancel_on_disconnect<B: MessageBody>(
    request: ServiceRequest,
    next: Next<B>,
) -> Result<ServiceResponse<B>, actix_web::Error> {
    let socket = request
        .conn_data::<ClientSocket>()
        .and_then(|s| s.0.try_clone().ok());
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
async fn client_gone(socket: OwnedFd) {
    // SAFETY: the `OwnedFd` is a valid open descriptor that the `AsyncFd` owns until it is
    // dropped, and `as_raw_fd` always returns that same descriptor.
    let registered = unsafe { AsyncFd::register_with_interest(socket, Interest::READABLE) };
    let Ok(socket) = registered else {
        return std::future::pending().await;
    };
    loop {
        let Ok(mut ready) = socket.readable().await else {
            return std::future::pending().await;
        };
        let mut byte = [0u8; 1];
        // SAFETY: a one-byte peek into a local buffer on a socket we own a duplicate of.
        let n = unsafe {
            libc::recv(
                socket.as_raw_fd(),
                byte.as_mut_ptr().cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        match n {
            0 => return,                                       // orderly shutdown by the client
            n if n > 0 => return std::future::pending().await, // a pipelined request: cannot tell
            _ => {
                let error = io::Error::last_os_error();
                match error.kind() {
                    io::ErrorKind::WouldBlock => ready.clear_ready(),
                    io::ErrorKind::Interrupted => {}
                    _ => return, // reset, or the socket is gone
                }
            }
        }
    }
}
