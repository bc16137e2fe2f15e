//! Who approves an authorization request: the user's browser (with a loopback redirect listener,
//! for CLIs and desktop programs), or nobody interactive (an authorization server that approves
//! by itself, as test servers do), or the application itself (a web service: see
//! [`OAuth::begin`](super::OAuth::begin)).

use std::{future::Future, pin::Pin};

use url::Url;

use super::{fetch::Fetcher, AuthErrorKind};
use crate::error::Error;

/// What the authorization server sent back to the redirect URI.
#[derive(Clone, PartialEq, Eq)]
pub struct Callback {
    /// The authorization code, to exchange for tokens.
    pub code: String,
    /// The `state` echoed back; must match the one sent, else the flow fails.
    pub state: Option<String>,
    /// RFC 9207: who issued the response.
    pub iss: Option<String>,
}

impl std::fmt::Debug for Callback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Callback")
            .field("code", &"<redacted>")
            .field("state", &self.state.as_ref().map(|_| "<redacted>"))
            .field("iss", &self.iss)
            .finish()
    }
}

impl Callback {
    /// Reads `code`, `state` and `iss` from a redirect URL's query; an `error` there fails.
    pub fn from_redirect(url: &Url) -> Result<Self, Error> {
        let mut code = None;
        let mut state = None;
        let mut iss = None;
        let mut error = None;
        let mut description = None;
        for (name, value) in url.query_pairs() {
            match name.as_ref() {
                "code" => code = Some(value.into_owned()),
                "state" => state = Some(value.into_owned()),
                "iss" => iss = Some(value.into_owned()),
                "error" => error = Some(value.into_owned()),
                "error_description" => description = Some(value.into_owned()),
                _ => {}
            }
        }
        if let Some(error) = error {
            let description = description.map(|d| format!(": {d}")).unwrap_or_default();
            return Err(super::failure(
                AuthErrorKind::Denied,
                format!("the authorization server answered {error}{description}"),
            ));
        }
        let code = code.ok_or_else(|| {
            super::failure(AuthErrorKind::Denied, "the redirect carries no code".into())
        })?;
        Ok(Self { code, state, iss })
    }
}

/// What [`UserAgent::authorize`] returns: resolves to the redirect's [`Callback`].
pub type AgentFuture = Pin<Box<dyn Future<Output = Result<Callback, Error>> + Send>>;

/// Takes the user (or nobody) through the authorization URL and returns what came back to the
/// redirect URI.
pub trait UserAgent: Send + Sync + 'static {
    /// The redirect URI registered for this client.
    fn redirect_uri(&self) -> String;

    /// Runs the authorization request at `url`.
    fn authorize(&self, url: Url) -> AgentFuture;

    /// Another process sharing the credential store is signing in to the same server: this
    /// one waits for its token instead of asking for a sign-in of its own. Nothing by default.
    fn waiting_for_another(&self) {}
}

/// For authorization servers that approve without a user (test servers, trusted automation): GETs
/// the authorization URL without following the redirect and reads the answer from `Location`.
#[derive(Debug, Clone)]
pub struct Headless {
    redirect_uri: String,
}

impl Headless {
    /// `redirect_uri` is the redirect URI to register; nothing needs to listen there.
    pub fn new(redirect_uri: impl Into<String>) -> Self {
        Self {
            redirect_uri: redirect_uri.into(),
        }
    }
}

impl Default for Headless {
    fn default() -> Self {
        Self::new("http://127.0.0.1:33418/callback")
    }
}

impl UserAgent for Headless {
    fn redirect_uri(&self) -> String {
        self.redirect_uri.clone()
    }

    fn authorize(&self, url: Url) -> AgentFuture {
        Box::pin(async move {
            // It stands in for the person, whose wait the sign-in timeout bounds.
            let fetcher = Fetcher::new(super::DEFAULT_REQUEST_TIMEOUT)?;
            let response = fetcher
                .request(reqwest::Method::GET, url.clone())
                .send()
                .await
                .map_err(|e| fetcher.failure(AuthErrorKind::Denied, &url, &e))?;
            let location = response
                .headers()
                .get("location")
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| {
                    super::failure(
                        AuthErrorKind::Denied,
                        format!(
                            "the authorization server did not redirect (HTTP {})",
                            response.status()
                        ),
                    )
                })?;
            let location = url
                .join(location)
                .map_err(|e| super::failure(AuthErrorKind::Denied, format!("bad redirect: {e}")))?;
            Callback::from_redirect(&location)
        })
    }
}

/// For CLIs and desktop programs: prints the authorization URL (and opens it in a browser when
/// one is available), then waits for the browser's redirect on a loopback listener
/// (`http://127.0.0.1:PORT/callback`).
#[derive(Debug, Clone)]
pub struct Loopback {
    port: u16,
}

impl Loopback {
    /// `port` 0 is not allowed by most authorization servers' redirect rules; pick a fixed one.
    pub fn new(port: u16) -> Self {
        Self { port }
    }
}

impl UserAgent for Loopback {
    fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}/callback", self.port)
    }

    fn authorize(&self, url: Url) -> AgentFuture {
        let port = self.port;
        // The answer to this request carries this state; any other request is not it.
        let state = url
            .query_pairs()
            .find(|(name, _)| name == "state")
            .map(|(_, value)| value.into_owned());
        Box::pin(async move {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                .await
                .map_err(|e| {
                    super::failure(
                        AuthErrorKind::Denied,
                        format!("cannot listen on 127.0.0.1:{port}: {e}"),
                    )
                })?;
            eprintln!(
                "Open this URL to authorize:\n\n  {url}\n\nWaiting for the sign-in in the browser…"
            );
            open_browser(url.as_str());
            loop {
                let (stream, _) = listener.accept().await.map_err(|e| {
                    super::failure(AuthErrorKind::Denied, format!("callback listener: {e}"))
                })?;
                if let Some(callback) = serve_callback(stream, port, state.as_deref()).await {
                    return callback;
                }
            }
        })
    }

    fn waiting_for_another(&self) {
        eprintln!(
            "Another program is signing in to this server (see its browser window); waiting \
             for it…"
        );
    }
}

/// Reads one request on the callback listener; `None` for anything but `GET /callback?…` with
/// the `state` of the request in progress (a stray request, or a page trying its luck, is
/// answered and ignored: it does not end the sign-in).
async fn serve_callback(
    mut stream: tokio::net::TcpStream,
    port: u16,
    state: Option<&str>,
) -> Option<Result<Callback, Error>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buffer = vec![0u8; 8192];
    let mut read = 0;
    while read < buffer.len() {
        let n = stream.read(&mut buffer[read..]).await.ok()?;
        if n == 0 {
            break;
        }
        read += n;
        if buffer[..read].windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    let head = String::from_utf8_lossy(&buffer[..read]);
    let target = head
        .lines()
        .next()?
        .strip_prefix("GET ")?
        .split(' ')
        .next()?;
    let url = Url::parse(&format!("http://127.0.0.1:{port}{target}")).ok();
    let answer = match url {
        Some(url) if url.path() == "/callback" => answer_callback(&url, state),
        _ => Answer::Refused {
            status: "404 Not Found",
            page: "This is the sign-in's callback listener: only /callback is answered here."
                .to_owned(),
        },
    };
    let (status, page, callback) = match answer {
        Answer::Refused { status, page } => (status, page, None),
        Answer::Taken(callback) => {
            // The code is yet to be exchanged (and `iss` checked): the page cannot say it
            // worked.
            let page = match &callback {
                Ok(_) => "The sign-in answer was received; the program finishes signing in \
                          (see its window or terminal). You can close this window."
                    .to_owned(),
                Err(e) => format!("Sign-in failed: {e}. You can close this window."),
            };
            ("200 OK", page, Some(callback))
        }
    };
    let _ = stream.write_all(plain_page(status, &page).as_bytes()).await;
    callback
}

/// What the listener does with one request to its callback.
#[derive(Debug)]
enum Answer {
    /// Not the answer to the sign-in in progress: the person reads why, the sign-in waits on.
    Refused { status: &'static str, page: String },
    /// The answer (a code, or the authorization server's error) for the sign-in in progress.
    Taken(Result<Callback, Error>),
}

/// Whether `url` answers the sign-in whose request carried `state`, and if not, what the person
/// is told: whose answer it seems to be, and what the authorization server said in it (control
/// characters made visible). The sign-in in progress keeps waiting.
fn answer_callback(url: &Url, state: Option<&str>) -> Answer {
    let answered = url
        .query_pairs()
        .find(|(name, _)| name == "state")
        .map(|(_, value)| value);
    if state.is_none() || answered.as_deref() == state {
        return Answer::Taken(Callback::from_redirect(url));
    }
    let whose = match answered {
        None => {
            "This answer carries no state, so it cannot be the answer to the sign-in in \
                 progress"
        }
        Some(_) => {
            "This answer belongs to another sign-in (its state is not the one of the \
                    sign-in in progress): perhaps an older tab or another program's"
        }
    };
    let said = match Callback::from_redirect(url) {
        Err(Error::Unauthorized { message, .. }) => {
            format!(" In it, {}.", crate::visible::Visible(&message))
        }
        _ => String::new(),
    };
    Answer::Refused {
        status: "400 Bad Request",
        page: format!(
            "{whose}; it was ignored.{said} The sign-in in progress is still waiting: finish it \
             in the window that opened for it, or start again from the program."
        ),
    }
}

/// A plain-text HTTP answer (text is never HTML here, so nothing in it can run).
fn plain_page(status: &str, page: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\nx-content-type-options: \
         nosniff\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
        page.len()
    )
}

/// Best effort: a browser may not exist (a server, CI); the URL was printed anyway.
fn open_browser(url: &str) {
    #[cfg(target_os = "macos")]
    let opener = "open";
    #[cfg(not(target_os = "macos"))]
    let opener = "xdg-open";
    let _ = std::process::Command::new(opener)
        .arg(url)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}

/// No interactive step here: the application runs it itself ([`OAuth::begin`] and
/// [`OAuth::complete`]); a connection that needs it fails with [`Error::Unauthorized`].
///
/// [`OAuth::begin`]: super::OAuth::begin
/// [`OAuth::complete`]: super::OAuth::complete
#[derive(Debug, Clone)]
pub struct Application {
    redirect_uri: String,
}

impl Application {
    /// `redirect_uri` is the application's own callback route, as registered.
    pub fn new(redirect_uri: impl Into<String>) -> Self {
        Self {
            redirect_uri: redirect_uri.into(),
        }
    }
}

impl UserAgent for Application {
    fn redirect_uri(&self) -> String {
        self.redirect_uri.clone()
    }

    fn authorize(&self, _url: Url) -> AgentFuture {
        Box::pin(async {
            Err(super::failure(
                AuthErrorKind::InteractionRequired,
                "this connection needs the user to authorize it (OAuth::begin)".into(),
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redirect(query: &str) -> Result<Callback, Error> {
        Callback::from_redirect(
            &Url::parse(&format!("http://127.0.0.1:1/callback?{query}")).unwrap(),
        )
    }

    #[test]
    fn a_redirect_gives_code_state_and_iss_or_its_error() {
        let callback = redirect("code=c%20d&state=s&iss=https%3A%2F%2Fas&other=x").unwrap();
        assert_eq!(callback.code, "c d");
        assert_eq!(callback.state.as_deref(), Some("s"));
        assert_eq!(callback.iss.as_deref(), Some("https://as"));
        let kind = |result: Result<Callback, Error>| match result {
            Err(Error::Unauthorized { kind, .. }) => kind,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            kind(redirect("error=access_denied&code=c")),
            AuthErrorKind::Denied
        );
        assert_eq!(kind(redirect("state=s")), AuthErrorKind::Denied);
        let shown = format!(
            "{:?}",
            redirect("code=secret-code&state=secret-state").unwrap()
        );
        assert!(!shown.contains("secret"), "{shown}");
    }

    /// Issue 20: the first stray request to the loopback port (a favicon, a port scan, a page
    /// guessing) aborted the sign-in; only the answer with this request's `state` ends it.
    #[actix_rt::test]
    async fn the_loopback_ignores_requests_without_our_state() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let url = Url::parse("http://127.0.0.1:9/authorize?state=ours&x=1").unwrap();
        let signing_in = tokio::spawn(Loopback::new(port).authorize(url));
        let get = |target: &'static str| async move {
            let mut stream = loop {
                match tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
                    Ok(stream) => break stream,
                    Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
                }
            };
            let request = format!("GET {target} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n");
            stream.write_all(request.as_bytes()).await.unwrap();
            let mut answer = String::new();
            stream.read_to_string(&mut answer).await.unwrap();
            answer
        };
        let stray = get("/favicon.ico").await;
        assert!(stray.starts_with("HTTP/1.1 404"), "{stray}");
        assert!(stray.contains("only /callback is answered here"), "{stray}");
        // Each refusal says what it was, and what the server said, made visible.
        let stateless = get("/callback?error=access_denied&error_description=no%1b%5b2K").await;
        assert!(stateless.starts_with("HTTP/1.1 400"), "{stateless}");
        assert!(stateless.contains("carries no state"), "{stateless}");
        assert!(
            stateless.contains("the authorization server answered access_denied: no\\u{1b}[2K"),
            "{stateless}"
        );
        assert!(!stateless.contains('\u{1b}'), "{stateless}");
        let theirs = get("/callback?code=x&state=theirs").await;
        assert!(theirs.starts_with("HTTP/1.1 400"), "{theirs}");
        assert!(theirs.contains("belongs to another sign-in"), "{theirs}");
        assert!(theirs.contains("still waiting"), "{theirs}");
        assert!(
            !signing_in.is_finished(),
            "stray requests do not end the sign-in"
        );
        let page = get("/callback?code=c&state=ours").await;
        assert!(page.starts_with("HTTP/1.1 200"), "{page}");
        assert!(
            !page.contains("Authorized"),
            "the code is not exchanged yet: {page}"
        );
        let callback = signing_in.await.unwrap().unwrap();
        assert_eq!(callback.code, "c");
    }

    #[test]
    fn the_agents_name_their_redirect_uri() {
        assert_eq!(
            Loopback::new(8976).redirect_uri(),
            "http://127.0.0.1:8976/callback"
        );
        assert_eq!(Headless::new("http://h/cb").redirect_uri(), "http://h/cb");
        assert_eq!(
            Application::new("https://a/cb").redirect_uri(),
            "https://a/cb"
        );
    }

    #[actix_rt::test]
    async fn an_application_agent_asks_the_application_to_run_the_flow() {
        let url = Url::parse("https://as.example.com/authorize").unwrap();
        match Application::new("https://a/cb").authorize(url).await {
            Err(Error::Unauthorized { kind, .. }) => {
                assert_eq!(kind, AuthErrorKind::InteractionRequired)
            }
            other => panic!("{other:?}"),
        }
    }
}
