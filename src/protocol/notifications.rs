//! Notifications from the server, as subscribers receive them, and progress.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::logging::LoggingLevel;

/// Called on the connection's thread for each `notifications/progress` of one request. Keep it
/// short; use a `ProgressStream` to do real work elsewhere.
pub type ProgressCallback = Box<dyn FnMut(Progress) + Send>;

/// A notification an application can subscribe to.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ServerNotification {
    ToolsListChanged,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated {
        uri: String,
    },
    /// `notifications/message` (logging).
    Log(LogMessage),
    /// Any other notification, as sent.
    Other {
        method: String,
        params: Option<Value>,
    },
}

/// What a `subscriptions/listen` (2026-07-28) asks the server to send. The notifications arrive
/// like any other: on [`Client::notifications`](crate::Client::notifications) and to subscribed
/// actors.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenFilter {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tools_list_changed: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prompts_list_changed: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resources_list_changed: bool,
    /// URIs whose `notifications/resources/updated` the client wants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_subscriptions: Vec<String>,
}

impl ListenFilter {
    /// Every list change, no resource updates.
    pub fn list_changes() -> Self {
        Self {
            tools_list_changed: true,
            prompts_list_changed: true,
            resources_list_changed: true,
            resource_subscriptions: Vec::new(),
        }
    }
}

impl actix::Message for ServerNotification {
    type Result = ();
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogMessage {
    pub level: LoggingLevel,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logger: Option<String>,
    pub data: Value,
}

impl ServerNotification {
    /// Classifies a notification; `None` for the ones routed elsewhere (progress, cancelled).
    pub(crate) fn from_wire(method: &str, params: Option<Value>) -> Option<Self> {
        Some(match method {
            "notifications/tools/list_changed" => ServerNotification::ToolsListChanged,
            "notifications/prompts/list_changed" => ServerNotification::PromptsListChanged,
            "notifications/resources/list_changed" => ServerNotification::ResourcesListChanged,
            "notifications/resources/updated" => {
                match params
                    .as_ref()
                    .and_then(|p| p.get("uri"))
                    .and_then(Value::as_str)
                {
                    Some(uri) => ServerNotification::ResourceUpdated {
                        uri: uri.to_owned(),
                    },
                    None => ServerNotification::Other {
                        method: method.to_owned(),
                        params,
                    },
                }
            }
            "notifications/message" => {
                match params
                    .clone()
                    .and_then(|p| serde_json::from_value::<LogMessage>(p).ok())
                {
                    Some(log) => ServerNotification::Log(log),
                    None => ServerNotification::Other {
                        method: method.to_owned(),
                        params,
                    },
                }
            }
            "notifications/progress" | "notifications/cancelled" => return None,
            _ => ServerNotification::Other {
                method: method.to_owned(),
                params,
            },
        })
    }
}

/// One `notifications/progress` for a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    pub progress: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
