//! HTTP for authorization: never follows a redirect (so discovery never crosses origins), caps
//! every body it reads, and adapts reqwest to the `oauth2` crate's client interface.

use std::{cell::RefCell, time::Duration};

use bytes::Bytes;
use serde::de::DeserializeOwned;
use url::Url;

use super::AuthErrorKind;
use crate::error::Error;

/// The most read from an authorization or metadata endpoint.
const BODY_LIMIT: usize = 256 * 1024;

/// HTTP for one authorization's machine steps: every request, its body included, bounded by
/// the configured request timeout ([`OAuthConfig::request_timeout`](super::OAuthConfig::request_timeout)).
#[derive(Clone)]
pub(crate) struct Fetcher {
    http: reqwest::Client,
    timeout: Duration,
}

/// A failed HTTP exchange, for the `oauth2` crate (no secrets: only the URL's origin and why).
#[derive(Debug, thiserror::Error)]
#[error("{why}")]
pub(crate) struct HttpError {
    why: String,
    /// The endpoint did not answer within the request timeout.
    pub timed_out: bool,
}

impl HttpError {
    pub fn new(why: String) -> Self {
        Self {
            why,
            timed_out: false,
        }
    }
}

impl Fetcher {
    /// This thread's fetcher, each request bounded by `timeout`: one client per thread, shared
    /// by every connection's authorization (see `transport/http/clients.rs` for why per thread).
    pub fn new(timeout: Duration) -> Result<Self, Error> {
        thread_local! {
            static SHARED: RefCell<Option<reqwest::Client>> = const { RefCell::new(None) };
        }
        SHARED.with(|slot| {
            if let Some(http) = &*slot.borrow() {
                return Ok(Self {
                    http: http.clone(),
                    timeout,
                });
            }
            let http = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| {
                    super::failure(AuthErrorKind::Discovery, format!("HTTP client: {e}"))
                })?;
            *slot.borrow_mut() = Some(http.clone());
            Ok(Self { http, timeout })
        })
    }

    /// A request to `url`, bounded by the request timeout from its start to its body's end.
    pub fn request(&self, method: reqwest::Method, url: Url) -> reqwest::RequestBuilder {
        self.http.request(method, url).timeout(self.timeout)
    }

    /// Why a request to `url` failed: a [`TimedOut`](AuthErrorKind::TimedOut) naming the
    /// endpoint and the bound when it did not answer in time, else `kind`.
    pub fn failure(&self, kind: AuthErrorKind, url: &Url, error: &reqwest::Error) -> Error {
        let origin = url.origin().ascii_serialization();
        if error.is_timeout() {
            return super::failure(AuthErrorKind::TimedOut, self.no_answer(&origin));
        }
        super::failure(kind, format!("{origin}: {error}"))
    }

    /// The message of a request that timed out.
    fn no_answer(&self, origin: &str) -> String {
        format!(
            "{origin} did not answer within {} (the authorization request timeout)",
            seconds(self.timeout)
        )
    }

    /// GETs a JSON document; `None` when the server has none there (any non-success status, or
    /// a body that is not this document).
    pub async fn get_json<T: DeserializeOwned>(&self, url: Url) -> Result<Option<T>, Error> {
        let response = match self
            .request(reqwest::Method::GET, url.clone())
            .header("accept", "application/json")
            .send()
            .await
        {
            Ok(response) => response,
            // A server that does not answer is not one without the document: trying the next
            // place would make the wait a multiple of the bound.
            Err(e) if e.is_timeout() => {
                return Err(self.failure(AuthErrorKind::Discovery, &url, &e))
            }
            Err(e) => {
                tracing::debug!(%url, error = %e, "metadata request failed");
                return Ok(None);
            }
        };
        if !response.status().is_success() {
            return Ok(None);
        }
        let body = self.read_capped(&url, response).await?;
        Ok(serde_json::from_slice(&body).ok())
    }

    /// POSTs JSON and returns the status and the (capped) body.
    pub async fn post_json(
        &self,
        url: Url,
        body: &impl serde::Serialize,
    ) -> Result<(u16, Bytes), Error> {
        let body = serde_json::to_vec(body).map_err(|e| {
            super::failure(AuthErrorKind::Registration, format!("request body: {e}"))
        })?;
        let response = self
            .request(reqwest::Method::POST, url.clone())
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| self.failure(AuthErrorKind::Registration, &url, &e))?;
        let status = response.status().as_u16();
        Ok((status, self.read_capped(&url, response).await?))
    }

    /// The `oauth2` crate's HTTP client: one request, the answer capped.
    pub async fn execute(
        &self,
        request: oauth2::HttpRequest,
    ) -> Result<oauth2::HttpResponse, HttpError> {
        let mut request = reqwest::Request::try_from(request)
            .map_err(|e| HttpError::new(format!("bad request: {e}")))?;
        *request.timeout_mut() = Some(self.timeout);
        let url = request.url().clone();
        let origin = url.origin().ascii_serialization();
        let failed = |e: reqwest::Error| HttpError {
            timed_out: e.is_timeout(),
            why: match e.is_timeout() {
                true => self.no_answer(&origin),
                false => format!("{origin}: {e}"),
            },
        };
        let response = self.http.execute(request).await.map_err(failed)?;
        let mut builder = http::Response::builder().status(response.status());
        for (name, value) in response.headers() {
            builder = builder.header(name, value);
        }
        let body = self.read_capped(&url, response).await.map_err(|e| {
            let timed_out = matches!(
                e,
                Error::Unauthorized {
                    kind: AuthErrorKind::TimedOut,
                    ..
                }
            );
            HttpError {
                timed_out,
                why: e.to_string(),
            }
        })?;
        builder
            .body(body.to_vec())
            .map_err(|e| HttpError::new(format!("{origin}: {e}")))
    }

    /// The body of `response` from `url`, capped, its reading bounded by the request timeout.
    pub async fn read_capped(
        &self,
        url: &Url,
        response: reqwest::Response,
    ) -> Result<Bytes, Error> {
        read_capped(response).await.map_err(|e| match e {
            Unread::Failed(e) => self.failure(AuthErrorKind::Discovery, url, &e),
            Unread::TooLong => super::failure(
                AuthErrorKind::Discovery,
                format!("an authorization server answer over {BODY_LIMIT} bytes"),
            ),
        })
    }
}

/// Why a body could not be read.
#[derive(Debug)]
enum Unread {
    /// The connection failed or timed out while it was read.
    Failed(reqwest::Error),
    /// It was longer than [`BODY_LIMIT`].
    TooLong,
}

async fn read_capped(mut response: reqwest::Response) -> Result<Bytes, Unread> {
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > BODY_LIMIT {
                    return Err(Unread::TooLong);
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body.into()),
            Err(e) => return Err(Unread::Failed(e)),
        }
    }
}

/// `timeout` as a person reads it: whole seconds, else milliseconds.
fn seconds(timeout: Duration) -> String {
    match timeout.subsec_millis() {
        0 => format!("{} s", timeout.as_secs()),
        _ => format!("{} ms", timeout.as_millis()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(body: Vec<u8>) -> reqwest::Response {
        reqwest::Response::from(http::Response::new(body))
    }

    #[actix_rt::test]
    async fn an_answer_is_read_up_to_the_cap_and_refused_past_it() {
        let at_cap = read_capped(response(vec![b'x'; BODY_LIMIT])).await.unwrap();
        assert_eq!(at_cap.len(), BODY_LIMIT);
        let over = read_capped(response(vec![b'x'; BODY_LIMIT + 1])).await;
        assert!(matches!(over, Err(Unread::TooLong)), "{over:?}");
    }
}
