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
//! How it knows: `watch_connection` keeps one duplicate of each TCP connection's socket (the
//! connection holds two descriptors in all, whatever its requests). The first request that needs
//! it starts one watcher for the connection, which waits for the socket to become readable and
//! peeks: end of stream or a reset means the client is gone, and every request of the connection
//! waiting on it is told. Bytes of the client's (a body that comes after its headers, the next
//! request) cannot be told from the end while they wait unread: it looks again a little later,
//! once the connection has read them. A client that half-closes its side while waiting for the
//! answer is taken as gone. The watcher ends with the connection.
//!
//! A handler whose response outlives it (an event stream that waits for what to send) asks
//! [`disconnected`] for the same signal, so its stream ends when the client goes away even while
//! nothing is written.

use std::any::Any;

use actix_web::{
    body::MessageBody,
    dev::{Extensions, ServiceRequest, ServiceResponse},
    http::StatusCode,
    middleware::Next,
};
use tokio_util::sync::CancellationToken;

/// One connection's watch: its socket's duplicate until its watcher takes it, and the signal the
/// watcher fires when the client is gone. Dropped with the connection, it stops the watcher.
#[cfg(unix)]
struct ConnectionWatch {
    socket: std::cell::RefCell<Option<std::net::TcpStream>>,
    gone: CancellationToken,
    watcher: std::cell::RefCell<Option<actix_web::rt::task::JoinHandle<()>>>,
}

#[cfg(unix)]
impl ConnectionWatch {
    /// Resolves when the client of this connection is gone; the connection's one watcher is
    /// started by the first request that asks.
    fn gone(&self) -> impl std::future::Future<Output = ()> + 'static {
        let taken = self.socket.borrow_mut().take();
        if let Some(socket) = taken {
            let gone = self.gone.clone();
            let watcher = actix_web::rt::spawn(async move {
                client_gone(socket).await;
                gone.cancel();
            });
            *self.watcher.borrow_mut() = Some(watcher);
        }
        self.gone.clone().cancelled_owned()
    }
}

#[cfg(unix)]
impl Drop for ConnectionWatch {
    fn drop(&mut self) {
        if let Some(watcher) = self.watcher.get_mut().take() {
            watcher.abort();
        }
    }
}

/// For `HttpServer::on_connect`: remembers each TCP connection's socket so
/// [`cancel_on_disconnect`] and [`disconnected`] can watch it. Does nothing on platforms other
/// than unix.
pub fn watch_connection(connection: &dyn Any, data: &mut Extensions) {
    #[cfg(unix)]
    if let Some(tcp) = connection.downcast_ref::<actix_web::rt::net::TcpStream>() {
        use std::os::fd::AsFd;
        if let Ok(fd) = tcp.as_fd().try_clone_to_owned() {
            data.insert(ConnectionWatch {
                socket: std::cell::RefCell::new(Some(std::net::TcpStream::from(fd))),
                gone: CancellationToken::new(),
                watcher: std::cell::RefCell::default(),
            });
        }
    }
    #[cfg(not(unix))]
    let _ = (connection, data);
}

/// Resolves when the client of `request`'s connection is gone; `None` on connections that
/// [`watch_connection`] did not see (and on platforms other than unix). For a response that
/// outlives its handler: an event stream ended on it drops what it holds.
pub fn disconnected(
    request: &actix_web::HttpRequest,
) -> Option<impl std::future::Future<Output = ()> + 'static> {
    #[cfg(unix)]
    return request
        .conn_data::<ConnectionWatch>()
        .map(ConnectionWatch::gone);
    #[cfg(not(unix))]
    {
        let _ = request;
        None::<std::future::Pending<()>>
    }
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
    let gone = request
        .conn_data::<ConnectionWatch>()
        .map(ConnectionWatch::gone);
    #[cfg(not(unix))]
    let gone: Option<std::future::Pending<()>> = None;
    let Some(gone) = gone else {
        return next.call(request).await;
    };
    tokio::select! {
        biased;
        response = next.call(request) => response,
        () = gone => {
            tracing::debug!("HTTP client went away; dropping its handler");
            let status = StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST);
            Err(actix_web::error::InternalError::new("client disconnected", status).into())
        }
    }
}

/// Resolves when the peer closed or reset the connection; never, if the socket cannot be
/// watched. While the client's bytes wait unread (a body still coming after its headers, the next
/// request), the end cannot be told from them: it looks again once the connection has had time to
/// read them, less often the longer they stay.
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
    let mut unread_for = UNREAD_FIRST_LOOK;
    loop {
        let asked = std::time::Instant::now();
        match socket.peek(&mut byte).await {
            Ok(0) => return, // orderly shutdown by the client
            Ok(_) => {
                // Bytes that came after a wait are new ones (the next request): looked at again
                // soon; bytes that stay unread, less and less often.
                if asked.elapsed() > std::time::Duration::from_millis(1) {
                    unread_for = UNREAD_FIRST_LOOK;
                }
                actix_web::rt::time::sleep(unread_for).await;
                unread_for = (unread_for * 2).min(UNREAD_LOOK_AT_MOST);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return, // reset, or the socket is gone
        }
    }
}

/// How soon the watch looks again at a connection whose client's bytes wait unread, at first and
/// at most.
#[cfg(unix)]
const UNREAD_FIRST_LOOK: std::time::Duration = std::time::Duration::from_millis(20);
#[cfg(unix)]
const UNREAD_LOOK_AT_MOST: std::time::Duration = std::time::Duration::from_secs(1);
