//! Elicitation: the server asks the user for input, through a form (a restricted JSON Schema) or
//! by sending them to a URL (`elicitation/create`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::form_schema::FormSchema;

/// The params of `elicitation/create`, by mode (absent means form).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum ElicitRequest {
    /// URL mode (`mode: "url"`, 2025-11-25 and later).
    Url(UrlElicitation),
    /// Form mode (`mode: "form"` or absent).
    Form(FormElicitation),
}

/// Form mode: fields described by a flat JSON Schema of primitive properties.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FormElicitation {
    /// `"form"`, or absent (the revisions before URL mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// What to ask the user.
    pub message: String,
    /// The fields to ask for: a flat object of strings, numbers, booleans and enums.
    pub requested_schema: FormSchema,
    /// The params' `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// URL mode: the user is sent to `url` (sensitive input never passes through the client).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UrlElicitation {
    /// Always `"url"`.
    #[serde(deserialize_with = "url_mode")]
    pub mode: String,
    /// Why the user should go to the URL.
    pub message: String,
    /// The URL to open for the user.
    pub url: String,
    /// 2025-11-25.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation_id: Option<String>,
    /// The params' `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn url_mode<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let mode = String::deserialize(deserializer)?;
    if mode == "url" {
        Ok(mode)
    } else {
        Err(serde::de::Error::custom("not url mode"))
    }
}

/// What the user did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ElicitAction {
    /// The user submitted the form or agreed to go to the URL.
    Accept,
    /// The user explicitly declined.
    Decline,
    /// The user dismissed the request without choosing.
    Cancel,
}

/// The client's answer to `elicitation/create`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElicitResult {
    /// What the user did.
    pub action: ElicitAction,
    /// The form's values (form mode, accepted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Map<String, Value>>,
    /// The result's `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ElicitResult {
    /// Accepted, with the form's values.
    pub fn accept(content: Map<String, Value>) -> Self {
        Self {
            action: ElicitAction::Accept,
            content: Some(content),
            meta: None,
            extra: Map::new(),
        }
    }

    /// Accepted without content (URL mode: the user went to the URL).
    pub fn accepted() -> Self {
        Self {
            action: ElicitAction::Accept,
            content: None,
            meta: None,
            extra: Map::new(),
        }
    }

    /// Declined by the user.
    pub fn decline() -> Self {
        Self {
            action: ElicitAction::Decline,
            content: None,
            meta: None,
            extra: Map::new(),
        }
    }
}

/// `-32042`: the server needs the user to complete these URL elicitations first.
pub const URL_ELICITATION_REQUIRED: i64 = -32042;
