//! Multi-round-trip requests (2026-07-28, SEP-2322): instead of sending the client requests of its
//! own, a server answers `tools/call`, `prompts/get` or `resources/read` with
//! `{"resultType": "input_required", "inputRequests": {key: {method, params}}, "requestState": ..}`.
//! The call fulfils each input request with the client's handlers (the same ones that answer a
//! 2025-11-25 server's requests), then retries the original request under a **new id** with
//! `inputResponses` and the `requestState` echoed byte for byte. Nothing of one call's rounds
//! leaks into another call.

use std::{
    borrow::Cow,
    collections::BTreeMap,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use serde::Deserialize;
use serde_json::{value::RawValue, Map, Value};

use super::progress::ProgressCallback;
use crate::{
    cancellation::Cancellation,
    connection::{HandlerError, Handlers, Request},
    error::Error,
    protocol::{jsonrpc::RequestId, routing::Routing},
    timeout::Timeout,
};

/// The methods whose results may be `input_required`.
pub(crate) const RETRYABLE: &[&str] = &["tools/call", "prompts/get", "resources/read"];

/// A bound on rounds, so a server cannot keep a call asking for input for ever.
pub(crate) const MAX_ROUNDS: u32 = 16;

/// What a call keeps to retry itself: the request as first sent. (The handlers are the
/// connection's, reached through the call's link.)
pub(crate) struct Retry {
    pub method: Cow<'static, str>,
    pub params: Option<Box<RawValue>>,
    /// The call's timeout, kept by the actor for each round's request.
    pub timeout: Option<Timeout>,
    /// What the 2026-07-28 HTTP transport routes each round's request on.
    pub routing: Option<Routing>,
    pub rounds: u32,
    /// The call's progress listener, shared by every round's request (each round's request
    /// carries its own id as the progress token).
    pub progress: Option<SharedProgress>,
}

/// A progress listener several requests of one call feed in turn.
pub(crate) type SharedProgress = std::sync::Arc<std::sync::Mutex<ProgressCallback>>;

/// A listener for one request that forwards to the call's shared one.
pub(crate) fn forward_progress(shared: &SharedProgress) -> ProgressCallback {
    let shared = shared.clone();
    Box::new(move |progress| {
        let mut listener = shared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        listener(progress);
    })
}

/// What a result says about the call.
pub(crate) enum Verdict {
    /// `resultType` absent (a server of an older revision) or `"complete"`: the result.
    Complete,
    InputRequired(InputRequired),
    /// `"task"` (the 2026-07-28 tasks extension): the server made a task of the call.
    Task(Box<crate::protocol::tasks::Task>),
    /// Any other `resultType`: invalid for a call that did not ask for it.
    Invalid(String),
}

/// An `input_required` result: what the server needs before it answers.
#[derive(Deserialize)]
pub(crate) struct InputRequired {
    #[serde(rename = "inputRequests", default)]
    input_requests: InputRequests,
    /// Opaque: echoed exactly as received.
    #[serde(rename = "requestState", default)]
    request_state: Option<Box<RawValue>>,
}

/// One of the server's input requests: a request of the kind its handlers answer.
#[derive(Deserialize)]
pub(crate) struct InputRequest {
    method: String,
    #[serde(default)]
    params: Value,
}

/// `inputRequests` (of an `input_required` result or of a task), by key: each answer goes back
/// under its request's key.
pub(crate) type InputRequests = BTreeMap<String, InputRequest>;

pub(crate) fn classify(result: &RawValue) -> Verdict {
    #[derive(Deserialize)]
    struct Probe<'a> {
        #[serde(rename = "resultType", borrow, default)]
        result_type: Option<Cow<'a, str>>,
    }
    match serde_json::from_str::<Probe>(result.get()) {
        Ok(Probe { result_type: None }) => Verdict::Complete,
        Ok(Probe {
            result_type: Some(kind),
        }) => match kind.as_ref() {
            "complete" => Verdict::Complete,
            "input_required" => match serde_json::from_str(result.get()) {
                Ok(input) => Verdict::InputRequired(input),
                Err(e) => Verdict::Invalid(format!("malformed input_required result: {e}")),
            },
            "task" => match serde_json::from_str(result.get()) {
                Ok(task) => Verdict::Task(Box::new(task)),
                Err(e) => Verdict::Invalid(format!("malformed task result: {e}")),
            },
            other => Verdict::Invalid(format!("unexpected resultType {other:?}")),
        },
        // Not an object with a readable resultType: the typed decoding will say what is wrong.
        Err(_) => Verdict::Complete,
    }
}

type HandlerFuture = Pin<Box<dyn Future<Output = Result<Value, HandlerError>> + Send>>;

/// The server's input requests being answered by the client's handlers (those that answer a
/// 2025-11-25 server's requests), for an `input_required` result and a task needing input
/// alike. Dropped before every answer is in, its handlers are told: their token is cancelled.
pub(crate) struct Answering {
    /// (key, method, the handler's answer to come).
    pending: Vec<(String, String, HandlerFuture)>,
    answered: Map<String, Value>,
    token: Cancellation,
}

impl Answering {
    /// Starts a handler on each request; fails if one has no handler.
    pub fn start(requests: InputRequests, handlers: &Handlers) -> Result<Self, Error> {
        let token = Cancellation::new();
        let mut pending = Vec::with_capacity(requests.len());
        for (key, InputRequest { method, params }) in requests {
            let Some(handler) = handlers.get(&method, Some(&params)) else {
                return Err(Error::Protocol(format!(
                    "the server asked for {method:?} input, which this client has no handler for"
                )));
            };
            let future = handler(params, token.clone());
            pending.push((key, method, future));
        }
        Ok(Self {
            pending,
            answered: Map::new(),
            token,
        })
    }
}

impl Future for Answering {
    /// Every answer, by its request's key; or the first handler's failure.
    type Output = Result<Map<String, Value>, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let mut failed = None;
        this.pending
            .retain_mut(|(key, method, future)| match future.as_mut().poll(cx) {
                Poll::Pending => true,
                Poll::Ready(Ok(value)) => {
                    this.answered.insert(std::mem::take(key), value);
                    false
                }
                Poll::Ready(Err(e)) => {
                    failed.get_or_insert_with(|| {
                        Error::Misuse(format!("the {method} handler failed: {}", e.message))
                    });
                    false
                }
            });
        if let Some(error) = failed {
            return Poll::Ready(Err(error));
        }
        if !this.pending.is_empty() {
            return Poll::Pending;
        }
        Poll::Ready(Ok(std::mem::take(&mut this.answered)))
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        if !self.pending.is_empty() {
            self.token
                .cancel_with_reason("the input is no longer needed");
        }
    }
}

/// One round of an `input_required` result: its input requests being answered, then the
/// request made again with the answers, under a new id. Nothing is in flight meanwhile.
pub(crate) struct Fulfilling {
    answering: Answering,
    request_state: Option<Box<RawValue>>,
    /// The request as first sent (taken from the call for the round, and handed back).
    retry: Retry,
    /// The id the retry will carry.
    retry_id: RequestId,
}

impl Fulfilling {
    pub fn start(input: InputRequired, retry: Retry, handlers: &Handlers) -> Result<Self, Error> {
        Ok(Self {
            answering: Answering::start(input.input_requests, handlers)?,
            request_state: input.request_state,
            retry,
            retry_id: RequestId::next(),
        })
    }

    /// Once every input request is answered: the same request again, under its new id.
    pub fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<Request, Error>> {
        let answered = match Pin::new(&mut self.answering).poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(answered) => answered?,
        };
        let retry = &self.retry;
        let token = retry.progress.as_ref().map(|_| self.retry_id);
        let params = retry_params(
            retry.params.as_deref(),
            answered,
            self.request_state.as_deref(),
            token,
        )?;
        Poll::Ready(Ok(Request::retry(
            self.retry_id,
            retry.method.clone(),
            params,
            retry.timeout,
            retry.progress.as_ref().map(forward_progress),
            retry.routing.clone(),
        )))
    }

    /// The call's [`Retry`], back for the rounds to come.
    pub fn into_retry(self) -> Retry {
        self.retry
    }
}

/// The original params, plus `inputResponses`, plus `requestState` exactly as the server sent it.
/// With a progress listener, `_meta.progressToken` becomes the retry's own id.
fn retry_params(
    original: Option<&RawValue>,
    responses: Map<String, Value>,
    request_state: Option<&RawValue>,
    progress_token: Option<RequestId>,
) -> Result<Box<RawValue>, Error> {
    let mut params: Map<String, Value> = match original {
        None => Map::new(),
        Some(raw) => serde_json::from_str(raw.get())
            .map_err(|e| Error::Misuse(format!("params must be an object to retry: {e}")))?,
    };
    params.remove("requestState");
    if let Some(token) = progress_token {
        if let Some(Value::Object(meta)) = params.get_mut("_meta") {
            meta.insert("progressToken".into(), Value::from(token.as_u64()));
        }
    }
    params.insert("inputResponses".into(), Value::Object(responses));
    let mut text = Value::Object(params).to_string();
    if let Some(state) = request_state {
        // Spliced in as received: re-encoding could change its bytes.
        text.pop(); // the closing brace
        text.push_str(",\"requestState\":");
        text.push_str(state.get());
        text.push('}');
    }
    RawValue::from_string(text).map_err(|e| Error::Misuse(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn results_are_classified_by_result_type() {
        assert!(matches!(
            classify(&raw(r#"{"content":[]}"#)),
            Verdict::Complete
        ));
        assert!(matches!(
            classify(&raw(r#"{"resultType":"complete","content":[]}"#)),
            Verdict::Complete
        ));
        assert!(matches!(
            classify(&raw(
                r#"{"resultType":"input_required","inputRequests":{}}"#
            )),
            Verdict::InputRequired(_)
        ));
        assert!(
            matches!(
                classify(&raw(r#"{"resultType":"task","taskId":"t"}"#)),
                Verdict::Invalid(_)
            ),
            "a task without its status is malformed"
        );
        assert!(matches!(
            classify(&raw(
                r#"{"resultType":"task","taskId":"t","status":"working"}"#
            )),
            Verdict::Task(_)
        ));
        assert!(matches!(
            classify(&raw(r#"{"resultType":"later"}"#)),
            Verdict::Invalid(_)
        ));
    }

    #[test]
    fn the_retry_keeps_the_params_and_echoes_the_state_byte_for_byte() {
        let state = raw(r#""caf\u00e9 \"quoted\"""#);
        let mut responses = Map::new();
        responses.insert("confirm".into(), serde_json::json!({"action": "accept"}));
        let params = retry_params(
            Some(&raw(r#"{"name":"t","arguments":{"a":1}}"#)),
            responses,
            Some(&state),
            None,
        )
        .unwrap();
        assert!(params
            .get()
            .ends_with(r#","requestState":"caf\u00e9 \"quoted\""}"#));
        let value: Value = serde_json::from_str(params.get()).unwrap();
        assert_eq!(value["name"], "t");
        assert_eq!(value["arguments"]["a"], 1);
        assert_eq!(value["inputResponses"]["confirm"]["action"], "accept");
        let without = retry_params(None, Map::new(), None, None).unwrap();
        let value: Value = serde_json::from_str(without.get()).unwrap();
        assert!(value.get("requestState").is_none());

        let id = RequestId::next();
        let tokened = retry_params(
            Some(&raw(r#"{"name":"t","_meta":{"progressToken":1,"k":"v"}}"#)),
            Map::new(),
            None,
            Some(id),
        )
        .unwrap();
        let value: Value = serde_json::from_str(tokened.get()).unwrap();
        assert_eq!(value["_meta"]["progressToken"], id.as_u64());
        assert_eq!(value["_meta"]["k"], "v");
    }
}
