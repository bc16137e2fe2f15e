//! A routed request's record in the audit trail (`crate::audit`), made as it ends: what it
//! named, by whom, and how it ended, from what the session saw (never a token or an argument).

use std::time::Duration;

use actix_mcp::servers::RoutedResult as _;
use serde_json::Value;

use super::Session;
use crate::{
    audit::{digest, Outcome, Record},
    method::Routed,
    outbound::Answer,
    replies::{Refusal, FORBIDDEN},
};

impl Session {
    /// Records the end of routed request `method` (`params`), which took `took`: `cancelled`
    /// names by what, if it was cancelled downstream. Called only when the trail is kept.
    pub(super) fn audit(
        &self,
        routed: Routed,
        method: &str,
        params: &Value,
        outcome: &Result<Answer, Refusal>,
        cancelled: Option<String>,
        took: Duration,
    ) {
        let audit = &self.upstream.audit;
        let outcome = match (cancelled, outcome) {
            (Some(by), _) => Outcome::Cancelled { by },
            (None, Err(Refusal(FORBIDDEN, ..))) => Outcome::Refused,
            (None, Err(Refusal(code, ..))) => Outcome::Error { code: *code },
            (None, Ok(answer)) if failed(answer) => Outcome::ToolError,
            (None, Ok(_)) => Outcome::Answered,
        };
        let mut record = Record::call(&self.owner, method, outcome, took);
        record.session = self.known_as.borrow().as_deref().map(str::to_owned);
        let routes = self.state.borrow().routes.clone();
        if let Some((server, item)) = routes.and_then(|r| self.target(routed, params, &r)) {
            record.server = Some(server);
            record.item = Some(item);
        }
        let arguments = match routed {
            Routed::Complete => &params["argument"],
            _ => &params["arguments"],
        };
        record.arguments_sha256 = digest(arguments);
        audit.record(record);
    }
}

/// Whether a tool reported its own failure (`isError: true`).
fn failed(answer: &Answer) -> bool {
    match answer {
        Answer::Made(made) => made["isError"] == true,
        Answer::Passed(passed) => passed.tool_failed(),
    }
}
