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

/// How long one request to an authorization server may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Clone)]
pub(crate) struct Fetcher {
    http: reqwest::Client,
}

/// A failed HTTP exchange, for the `oauth2` crate (no secrets: only the URL's origin and why).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct HttpError(String);

impl HttpError {
    pub fn new(why: String) -> Self {
        Self(why)
    }
}

impl Fetcher {
    /// This thread's fetcher: one client per thread, shared by every connection's
    /// authorization (see `transport/http/clients.rs` for why per thread).
    pub fn new() -> Result<Self, Error> {
        thread_local! {
            static SHARED: RefCell<Option<reqwest::Client>> = const { RefCell::new(None) };
        }
        SHARED.with(|slot| {
            if let Some(http) = &*slot.borrow() {
                return Ok(Self { http: http.clone() });
            }
            let http = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(REQUEST_TIMEOUT)
                .build()
                .map_err(|e| {
                    super::failure(AuthErrorKind::Discovery, format!("HTTP client: {e}"))
                })?;
            *slot.borrow_mut() = Some(http.clone());
            Ok(Self { http })
        })
    }

    pub fn client(&self) -> &reqwest::Client {
        &self.http
    }

    /// GETs a JSON document; `None` when the server has none there (any non-success status, or
    /// a body that is not this document).
    pub async fn get_json<T: DeserializeOwned>(&self, url: Url) -> Result<Option<T>, Error> {
        let response = match self
            .http
            .get(url.clone())
            .header("accept", "application/json")
            .send()
            .await
        {
            Ok(response) => response,
            Err(e) => {
                tracing::debug!(%url, error = %e, "metadata request failed");
                return Ok(None);
            }
        };
        if !response.status().is_success() {
            return Ok(None);
        }
        let body = read_capped(response).await?;
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
            .http
            .post(url.clone())
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| {
                super::failure(
                    AuthErrorKind::Registration,
                    format!("POST {}: {e}", url.origin().ascii_serialization()),
                )
            })?;
        let status = response.status().as_u16();
        Ok((status, read_capped(response).await?))
    }

    /// The `oauth2` crate's HTTP client: one request, the answer capped.
    pub async fn execute(
        &self,
        request: oauth2::HttpRequest,
    ) -> Result<oauth2::HttpResponse, HttpError> {
        let request = reqwest::Request::try_from(request)
            .map_err(|e| HttpError(format!("bad request: {e}")))?;
        let origin = request.url().origin().ascii_serialization();
        let response = self
            .http
            .execute(request)
            .await
            .map_err(|e| HttpError(format!("{origin}: {e}")))?;
        let mut builder = http::Response::builder().status(response.status());
        for (name, value) in response.headers() {
            builder = builder.header(name, value);
        }
        let body = read_capped(response)
            .await
            .map_err(|e| HttpError(e.to_string()))?;
        builder
            .body(body.to_vec())
            .map_err(|e| HttpError(format!("{origin}: {e}")))
    }
}

pub(crate) async fn read_capped(mut response: reqwest::Response) -> Result<Bytes, Error> {
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > BODY_LIMIT {
                    return Err(super::failure(
                        AuthErrorKind::Discovery,
                        format!("an authorization server answer over {BODY_LIMIT} bytes"),
                    ));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body.into()),
            Err(e) => {
                return Err(super::failure(
                    AuthErrorKind::Discovery,
                    format!("reading an authorization server answer: {e}"),
                ))
            }
        }
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
        match read_capped(response(vec![b'x'; BODY_LIMIT + 1])).await {
            Err(Error::Unauthorized { kind, .. }) => assert_eq!(kind, AuthErrorKind::Discovery),
            other => panic!("{other:?}"),
        }
    }
}
