//! A call of a per-user server (`users/`), on the user's own connection. Without the user's
//! grant, for a client that declared URL-mode elicitation: the sign-in link is asked of the client as an `elicitation/create` (URL mode)
//! on the call's stream (2025-11-25), or in its `input_required` answer (2026-07-28); once the
//! person signed in through it, the call goes on. A client that did not declare it gets the
//! `-32042` refusal with the link instead, and retries itself.

use std::{rc::Rc, time::Duration};

use serde_json::Value;

use super::Session;
use crate::{replies::Refusal, server_requests::ToSession, users::URL_ELICITATION_REQUIRED};

/// How long a call waits for its user's sign-in (a ticket's lifetime).
const SIGN_IN_WAIT: Duration = Duration::from_secs(600);

impl Session {
    /// `tools/call` of `tool` on `owner`'s own connection to `server`, once.
    #[allow(clippy::too_many_arguments, reason = "the call's parts, each its own")]
    pub(super) async fn user_tool_call(
        &self,
        id: &Value,
        server: &str,
        tool: &str,
        arguments: Value,
        meta: serde_json::Map<String, Value>,
        progress_token: Option<Value>,
        token: &actix_mcp::Cancellation,
    ) -> Result<actix_mcp::protocol::RawResult, Refusal> {
        let client = self.upstream_client(server).await?;
        let call = client.call_tool(tool, arguments).raw();
        let call = call.meta(meta).cancellation(token);
        let users = &self.upstream.users;
        let error = |e: actix_mcp::Error| users.refusal(&self.owner, server, &e);
        match progress_token {
            None => call.await.map_err(error),
            Some(progress_token) => {
                let (call, progress) = call.progress_stream();
                let call = std::future::IntoFuture::into_future(call);
                let passed = self.with_progress(id, progress_token, call, progress);
                passed.await.map_err(error)
            }
        }
    }

    /// `attempt` with `parts`, on a per-user server through [`with_sign_in`](Self::with_sign_in)
    /// (boxed: the common path's future stays small; its parts are moved, not copied).
    pub(super) async fn signed_in_if_need_be<A: Clone, T, F>(
        self: &Rc<Self>,
        id: &Value,
        server: &str,
        token: &actix_mcp::Cancellation,
        parts: A,
        attempt: impl Fn(A) -> F,
    ) -> Result<T, Refusal>
    where
        F: std::future::Future<Output = Result<T, Refusal>>,
    {
        match self.upstream.users.per_user(&self.owner, server) {
            true => Box::pin(self.with_sign_in(id, token, parts, attempt)).await,
            false => attempt(parts).await,
        }
    }

    /// `attempt` with `parts` on a per-user server; if it wants the user's sign-in and the
    /// client can be asked, asks it, waits for the sign-in (or the call's cancel), and attempts
    /// once more (the parts copied for the first attempt, moved into the second).
    pub(super) async fn with_sign_in<A: Clone, T, F>(
        self: &Rc<Self>,
        id: &Value,
        token: &actix_mcp::Cancellation,
        parts: A,
        attempt: impl Fn(A) -> F,
    ) -> Result<T, Refusal>
    where
        F: std::future::Future<Output = Result<T, Refusal>>,
    {
        let refusal = match attempt(parts.clone()).await {
            Err(refusal) if refusal.0 == URL_ELICITATION_REQUIRED => refusal,
            done => return done,
        };
        let Some(elicitation) = refusal.2.as_ref().map(|d| d["elicitations"][0].clone()) else {
            return Err(refusal);
        };
        let method = "elicitation/create";
        if !self
            .upstream
            .downstream
            .declared(self.key, method, &elicitation)
        {
            return Err(refusal);
        }
        let elicitation_id = elicitation["elicitationId"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        // Waited for before the client is asked: a sign-in cannot end unseen.
        let waiting = self.upstream.users.sign_ins.when_done(&elicitation_id);
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.carried(ToSession::Ask {
            id: self.upstream.downstream.ask_id(),
            method: method.to_owned(),
            params: elicitation,
            related: id.clone(),
            reply,
            required: None,
        });
        let outcome = tokio::select! {
            answer = answer => match answer {
                Ok(Ok(result)) if result["action"] == "accept" => Ok(()),
                Ok(Ok(result)) => Err(format!("the user did not sign in ({})", result["action"])),
                Ok(Err(e)) => Err(format!("the client refused the sign-in: {}", e.message)),
                Err(_) => Err("the session ended".to_owned()),
            },
            () = token.cancelled() => Err("cancelled".to_owned()),
        };
        let waited = match outcome {
            Ok(()) => tokio::select! {
                signed = tokio::time::timeout(SIGN_IN_WAIT, waiting) => {
                    signed.map_err(|_| "the sign-in took too long".to_owned())
                        .and_then(|s| s.map_err(|_| "the session ended".to_owned()))
                }
                () = token.cancelled() => Err("cancelled".to_owned()),
            },
            Err(why) => Err(why),
        };
        match waited {
            Ok(()) => attempt(parts).await,
            Err(why) => Err(Refusal(
                refusal.0,
                format!("{}: {why}", refusal.1),
                refusal.2,
            )),
        }
    }
}
