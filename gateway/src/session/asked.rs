//! What upstream servers ask of the downstream client (see `server_requests.rs`): each request
//! sent downstream under the id the registry gave it, its answer handed back, its cancel
//! passed on.

use std::rc::Rc;

use actix_mcp::HandlerError;
use serde_json::{json, Value};

use super::Session;
use crate::{replies::INTERNAL_ERROR, server_requests::ToSession};

/// A request asked of the downstream client: who waits for its answer, and the downstream
/// request it belongs to (its cancel goes on that request's stream too).
pub(super) struct Asked {
    pub(super) reply: tokio::sync::oneshot::Sender<Result<Value, HandlerError>>,
    pub(super) related: Value,
    /// What was asked, as a 2026-07-28 input request: `{method, params}`.
    pub(super) request: Value,
    /// 2026-07-28: the client capabilities it needs and the client did not declare.
    pub(super) required: Option<Value>,
}

impl Session {
    /// Asks the downstream client what upstream servers ask of it, for as long as it lives.
    pub(super) fn carry(
        self: &Rc<Self>,
        mut carried: tokio::sync::mpsc::UnboundedReceiver<Box<ToSession>>,
    ) {
        let session = Rc::downgrade(self);
        actix_rt::spawn(async move {
            while let Some(next) = carried.recv().await {
                let Some(session) = session.upgrade() else {
                    return;
                };
                session.carried(*next);
            }
        });
    }

    pub(super) fn carried(self: &Rc<Self>, next: ToSession) {
        match next {
            ToSession::Ask {
                id,
                method,
                params,
                related,
                reply,
                required,
            } => {
                let request = json!({"method": method, "params": params});
                if !self.modern.get() {
                    let mut message = request.clone();
                    message["jsonrpc"] = json!("2.0");
                    message["id"] = json!(id);
                    (self.out)(message.into(), Some(&related));
                }
                let asked = Asked {
                    reply,
                    related: related.clone(),
                    request,
                    required,
                };
                self.state.borrow_mut().asked.insert(id, asked);
                if self.modern.get() {
                    self.ask_for_input_soon(&related);
                }
            }
            ToSession::Withdraw { id, reason } => {
                let asked = self.state.borrow_mut().asked.remove(&id);
                // 2026-07-28 has no cancel of an input request: it is left out of the next.
                if let Some(asked) = asked.filter(|_| !self.modern.get()) {
                    let params = json!({"requestId": id, "reason": reason});
                    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params});
                    (self.out)(cancel.into(), Some(&asked.related));
                }
            }
        }
    }

    /// The downstream client's answer to `id`, a request an upstream server asked of it.
    pub(super) fn answered(&self, id: &Value, message: &Value) {
        let Some(asked) = id
            .as_str()
            .and_then(|id| self.state.borrow_mut().asked.remove(id))
        else {
            return tracing::debug!(%id, "an answer to nothing asked");
        };
        let answer = match message.get("error") {
            Some(error) => Err(HandlerError {
                code: error["code"].as_i64().unwrap_or(INTERNAL_ERROR),
                message: error["message"].as_str().unwrap_or_default().to_owned(),
                data: error.get("data").cloned(),
            }),
            None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
        };
        let _ = asked.reply.send(answer);
    }
}
