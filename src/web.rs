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
//! waiting on it is told. If the client already sent more bytes (a pipelined request), it cannot
//! tell and stops watching. A client that half-closes its side while waiting for the answer is
//! taken as gone. The watcher ends with the connection.
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

/// One connection's watch: its socket's duplicate while no watcher holds it, and the signal the
/// watcher fires when the client is gone. Dropped with the connection, it stops the watcher.
#[cfg(unix)]
struct ConnectionWatch(std::rc::Rc<Watch>);

#[cfg(unix)]
#[derive(Default)]
struct Watch {
    socket: std::cell::RefCell<Option<std::net::TcpStream>>,
    gone: CancellationToken,
    watcher: std::cell::RefCell<Option<actix_web::rt::task::JoinHandle<()>>>,
}

#[cfg(unix)]
impl ConnectionWatch {
    /// Resolves when the client of this connection is gone. Starts the watcher unless one runs;
    /// a watcher that sees the client's next request (it cannot tell) hands the socket back, for
    /// the next request to watch again.
    fn gone(&self) -> impl std::future::Future<Output = ()> + 'static {
        let taken = self.0.socket.borrow_mut().take();
        if let Some(socket) = taken {
            let watch = std::rc::Rc::downgrade(&self.0);
            let watcher = actix_web::rt::spawn(async move {
                let returned = client_gone(socket).await;
                let Some(watch) = watch.upgrade() else {
                    return;
                };
                match returned {
                    None => watch.gone.cancel(),
                    Some(socket) => *watch.socket.borrow_mut() = Some(socket),
                }
            });
            *self.0.watcher.borrow_mut() = Some(watcher);
        }
        self.0.gone.clone().cancelled_owned()
    }
}

#[cfg(unix)]
impl Drop for ConnectionWatch {
    fn drop(&mut self) {
        if let Some(watcher) = self.0.watcher.borrow_mut().take() {
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
            let watch = Watch::default();
            *watch.socket.borrow_mut() = Some(std::net::TcpStream::from(fd));
            data.insert(ConnectionWatch(std::rc::Rc::new(watch)));
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

/// Resolves when the peer closed or reset the connection (`None`), or with the socket given back
/// when the client sent more bytes (its next request: it cannot tell); never, if the socket
/// cannot be watched.
#[cfg(unix)]
async fn client_gone(socket: std::net::TcpStream) -> Option<std::net::TcpStream> {
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
            Ok(0) => return None,                   // orderly shutdown by the client
            Ok(_) => return socket.into_std().ok(), // its next request: cannot tell
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return None, // reset, or the socket is gone
        }
    }
}
