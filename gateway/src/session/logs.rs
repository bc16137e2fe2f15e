//! 2026-07-28 logging is per request: a request that wants the server's log messages while it
//! runs says so in its `_meta` (`io.modelcontextprotocol/logLevel`), and they come on its own
//! stream. A routed call that asks carries the level upstream (and asks the 2025-11-25 servers,
//! which only take `logging/setLevel`); while it runs, its upstream server's log messages come
//! back on its stream when it is the one call in flight there (`Downstream::log_recipient`).
//! Those received before the upstream answer are all passed on before it.

use std::future::Future;

use actix_mcp::{protocol::discover::META_LOG_LEVEL, LoggingLevel, ServerNotification};
use futures::FutureExt as _;
use serde_json::{json, Map, Value};

use super::{trace_context, Refusal, Session};

impl Session {
    /// The `_meta` a routed call `id` carries upstream (the trace context, and the `logLevel`
    /// asked for), and that level: registered for the call, and asked of the upstream servers.
    pub(super) async fn call_meta(
        &self,
        id: &Value,
        params: &Value,
    ) -> Result<(Map<String, Value>, Option<LoggingLevel>), Refusal> {
        let mut meta = trace_context(params);
        if !self.modern.get() {
            return Ok((meta, self.session_logs(id)));
        }
        let Some(asked) = params["_meta"].get(META_LOG_LEVEL) else {
            return Ok((meta, None));
        };
        let level = serde_json::from_value::<LoggingLevel>(asked.clone())
            .map_err(|e| Refusal::params(format!("{META_LOG_LEVEL}: {e}")))?;
        self.upstream.downstream.wants_logs(self.key, id, level);
        self.ask_upstreams_for_logs(level).await;
        meta.insert(META_LOG_LEVEL.into(), Value::from(level.as_str()));
        Ok((meta, Some(level)))
    }

    /// 2025-11-25, with users: the level this session asked for (`logging/setLevel`), for call
    /// `id`, whose log messages come on its own stream rather than on every session's.
    fn session_logs(&self, id: &Value) -> Option<LoggingLevel> {
        if self.owner == crate::owner::Owner::Anonymous {
            return None;
        }
        let level = self.state.borrow().log_level?;
        self.upstream.downstream.wants_logs(self.key, id, level);
        Some(level)
    }

    /// Runs `call`, request `id`'s upstream call on `server`; if it asked for logs (`level`),
    /// the server's log messages meanwhile that are its come back on its stream, those that came
    /// before the answer first.
    pub(super) async fn with_logs<T>(
        &self,
        id: &Value,
        server: &str,
        level: Option<LoggingLevel>,
        call: impl Future<Output = T>,
    ) -> T {
        let client = match level {
            Some(_) => self.upstream.servers.client(server).await.ok(),
            None => None,
        };
        let Some(client) = client else {
            return call.await;
        };
        // Subscribed before the call is sent: nothing it causes is missed.
        let mut notifications = client.notifications();
        let mut call = std::pin::pin!(call);
        let answer = loop {
            tokio::select! {
                biased;
                Some(notification) = notifications.next() => {
                    self.pass_log(id, server, notification);
                }
                answer = &mut call => break answer,
            }
        };
        // The connection hands a message on before the answer that follows it.
        while let Some(Some(notification)) = notifications.next().now_or_never() {
            self.pass_log(id, server, notification);
        }
        answer
    }

    /// An upstream notification, if it is a log message for call `id`: on its stream.
    fn pass_log(&self, id: &Value, server: &str, notification: ServerNotification) {
        let ServerNotification::Log(message) = notification else {
            return;
        };
        let recipient = self
            .upstream
            .downstream
            .log_recipient(server, message.level);
        if recipient.is_none_or(|(key, call)| key != self.key || call != *id) {
            return;
        }
        let params = super::events::log_params(server, &message);
        let notification =
            json!({"jsonrpc": "2.0", "method": "notifications/message", "params": params});
        (self.out)(notification.into(), Some(id));
    }
}
