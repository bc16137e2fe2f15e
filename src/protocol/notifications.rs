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
    /// `notifications/tools/list_changed`: the tool list changed.
    ToolsListChanged,
    /// `notifications/prompts/list_changed`: the prompt list changed.
    PromptsListChanged,
    /// `notifications/resources/list_changed`: the resource list changed.
    ResourcesListChanged,
    /// `notifications/resources/updated`: a subscribed resource changed.
    ResourceUpdated {
        /// The resource's URI (possibly a sub-resource of the one subscribed to).
        uri: String,
    },
    /// `notifications/message` (logging).
    Log(LogMessage),
    /// Any other notification, as sent.
    Other {
        /// The notification's method.
        method: String,
        /// Its params; `None` if it had none.
        params: Option<Value>,
    },
}

/// What a `subscriptions/listen` (2026-07-28) asks the server to send. The notifications arrive
/// like any other: on [`Client::notifications`](crate::Client::notifications) and to subscribed
/// actors.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenFilter {
    /// Send `notifications/tools/list_changed`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tools_list_changed: bool,
    /// Send `notifications/prompts/list_changed`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prompts_list_changed: bool,
    /// Send `notifications/resources/list_changed`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resources_list_changed: bool,
    /// URIs whose `notifications/resources/updated` the client wants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_subscriptions: Vec<String>,
    /// Tasks whose `notifications/tasks` the client wants (the tasks extension).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub task_ids: Vec<String>,
}

impl ListenFilter {
    /// Every list change, no resource updates.
    pub fn list_changes() -> Self {
        Self {
            tools_list_changed: true,
            prompts_list_changed: true,
            resources_list_changed: true,
            resource_subscriptions: Vec::new(),
            task_ids: Vec::new(),
        }
    }

    /// The status notifications of these tasks (`notifications/tasks`, 2026-07-28).
    pub fn tasks(task_ids: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self {
            task_ids: task_ids.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }
}

impl actix::Message for ServerNotification {
    type Result = ();
}

/// The params of `notifications/message`: one log entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogMessage {
    /// Its severity.
    pub level: LoggingLevel,
    /// The name of the logger that wrote it; `None` if not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logger: Option<String>,
    /// The entry itself: any JSON (a string, an object, ...).
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
    /// Progress so far; it grows with each notification, even when `total` is unknown.
    pub progress: f64,
    /// The total to reach, in the same unit as `progress`; `None` if unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// A human-readable status (2025-03-26 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
