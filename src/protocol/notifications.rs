//! Notifications from the server, as subscribers receive them, and progress.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::logging::LoggingLevel;

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
