//! Content blocks of tool results, prompt messages and sampling: text, images, audio, resource
//! links, embedded resources, and (sampling with tools) tool uses and tool results. A block of a
//! kind this crate does not know is kept as it came.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Number, Value};

use super::resources::{Resource, ResourceContents};

/// Who a message or a piece of content is meant for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Role {
    /// The human using the client.
    User,
    /// The model.
    Assistant,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        })
    }
}

/// Hints about how a client should use a block or a resource.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Annotations {
    /// Who the content is meant for (several may be named).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<Vec<Role>>,
    /// How important it is, from 0 (optional) to 1 (required); kept as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Number>,
    /// When it last changed (ISO 8601), as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A `text` block.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TextContent {
    /// The text.
    pub text: String,
    /// How the client should use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// The block's `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An `image` or `audio` block: base64 `data` with its `mimeType`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MediaContent {
    /// The bytes, base64-encoded, as sent.
    pub data: String,
    /// For example `image/png` or `audio/wav`.
    pub mime_type: String,
    /// How the client should use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// The block's `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A `resource` block: a resource's contents, embedded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddedResource {
    /// The contents (text or a base64 blob).
    pub resource: ResourceContents,
    /// How the client should use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// The block's `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A `tool_use` block (sampling with tools, 2025-11-25): the model asks to call a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolUseContent {
    /// The id a `tool_result` block answers.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The tool's arguments.
    #[serde(default)]
    pub input: Map<String, Value>,
    /// The block's `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A `tool_result` block (sampling with tools, 2025-11-25): what a tool the model called gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultContent {
    /// The `id` of the `tool_use` block this answers.
    pub tool_use_id: String,
    /// The tool's content.
    #[serde(default)]
    pub content: Vec<ContentBlock>,
    /// The tool's structured result, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// Whether the tool failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// The block's `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One block of content, by its `type`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ContentBlock {
    /// `text`.
    Text(TextContent),
    /// `image`.
    Image(MediaContent),
    /// `audio`.
    Audio(MediaContent),
    /// `resource_link`: a resource the client may read.
    ResourceLink(Box<Resource>),
    /// `resource`: a resource's contents, embedded.
    Resource(Box<EmbeddedResource>),
    /// `tool_use` (sampling with tools).
    ToolUse(Box<ToolUseContent>),
    /// `tool_result` (sampling with tools).
    ToolResult(Box<ToolResultContent>),
    /// A kind this crate does not know, as sent.
    Other(Value),
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text(TextContent {
            text: text.into(),
            ..TextContent::default()
        })
    }

    /// The text of a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            ContentBlock::Text(block) => Some(&block.text),
            _ => None,
        }
    }

    /// The block's `type`.
    pub fn kind(&self) -> &str {
        match self {
            ContentBlock::Text(_) => "text",
            ContentBlock::Image(_) => "image",
            ContentBlock::Audio(_) => "audio",
            ContentBlock::ResourceLink(_) => "resource_link",
            ContentBlock::Resource(_) => "resource",
            ContentBlock::ToolUse(_) => "tool_use",
            ContentBlock::ToolResult(_) => "tool_result",
            ContentBlock::Other(value) => value.get("type").and_then(Value::as_str).unwrap_or(""),
        }
    }

    /// The block's annotations, for the kinds that have them.
    pub fn annotations(&self) -> Option<&Annotations> {
        match self {
            ContentBlock::Text(block) => block.annotations.as_ref(),
            ContentBlock::Image(block) | ContentBlock::Audio(block) => block.annotations.as_ref(),
            ContentBlock::ResourceLink(block) => block.annotations.as_ref(),
            ContentBlock::Resource(block) => block.annotations.as_ref(),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        fn typed<T: serde::de::DeserializeOwned, E: serde::de::Error>(
            kind: &str,
            map: Map<String, Value>,
        ) -> Result<T, E> {
            serde_json::from_value(Value::Object(map))
                .map_err(|e| E::custom(format!("invalid {kind} content block: {e}")))
        }
        let value = Value::deserialize(deserializer)?;
        let Value::Object(mut map) = value else {
            return Ok(ContentBlock::Other(value));
        };
        let Some(Value::String(kind)) = map.remove("type") else {
            return Ok(ContentBlock::Other(Value::Object(map)));
        };
        Ok(match kind.as_str() {
            "text" => ContentBlock::Text(typed(&kind, map)?),
            "image" => ContentBlock::Image(typed(&kind, map)?),
            "audio" => ContentBlock::Audio(typed(&kind, map)?),
            "resource_link" => ContentBlock::ResourceLink(typed(&kind, map)?),
            "resource" => ContentBlock::Resource(typed(&kind, map)?),
            "tool_use" => ContentBlock::ToolUse(typed(&kind, map)?),
            "tool_result" => ContentBlock::ToolResult(typed(&kind, map)?),
            _ => {
                map.insert("type".into(), Value::String(kind));
                ContentBlock::Other(Value::Object(map))
            }
        })
    }
}

impl Serialize for ContentBlock {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let body = match self {
            ContentBlock::Text(block) => serde_json::to_value(block),
            ContentBlock::Image(block) | ContentBlock::Audio(block) => serde_json::to_value(block),
            ContentBlock::ResourceLink(block) => serde_json::to_value(block),
            ContentBlock::Resource(block) => serde_json::to_value(block),
            ContentBlock::ToolUse(block) => serde_json::to_value(block),
            ContentBlock::ToolResult(block) => serde_json::to_value(block),
            ContentBlock::Other(value) => return value.serialize(serializer),
        }
        .map_err(serde::ser::Error::custom)?;
        let Value::Object(body) = body else {
            return Err(serde::ser::Error::custom("a content block is an object"));
        };
        let mut map = Map::with_capacity(body.len() + 1);
        map.insert("type".into(), Value::from(self.kind()));
        map.extend(body);
        map.serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn known_blocks_are_typed_unknown_ones_kept_and_both_round_trip() {
        let blocks = json!([
            {"type": "text", "text": "hi", "annotations": {"priority": 1, "audience": ["user"]}},
            {"type": "image", "data": "AAE=", "mimeType": "image/png", "_meta": {"k": 1}},
            {"type": "resource_link", "uri": "demo://x", "name": "x", "size": 3},
            {"type": "resource", "resource": {"uri": "demo://y", "text": "y"}},
            {"type": "tool_use", "id": "u1", "name": "t", "input": {"a": 1}},
            {"type": "tool_result", "toolUseId": "u1", "content": [{"type": "text", "text": "r"}]},
            {"type": "hologram", "frames": 3}
        ]);
        let parsed: Vec<ContentBlock> = serde_json::from_value(blocks.clone()).unwrap();
        assert_eq!(parsed[0].as_text(), Some("hi"));
        let audience = parsed[0].annotations().and_then(|a| a.audience.clone());
        assert_eq!(audience, Some(vec![Role::User]));
        assert!(matches!(&parsed[1], ContentBlock::Image(m) if m.meta.is_some()));
        assert!(matches!(&parsed[2], ContentBlock::ResourceLink(r) if r.size == Some(3)));
        assert!(matches!(parsed[3], ContentBlock::Resource(_)));
        assert!(matches!(&parsed[4], ContentBlock::ToolUse(u) if u.name == "t"));
        assert!(matches!(&parsed[5], ContentBlock::ToolResult(r) if r.content.len() == 1));
        assert!(matches!(parsed[6], ContentBlock::Other(_)));
        assert_eq!(serde_json::to_value(&parsed).unwrap(), blocks);
    }

    #[test]
    fn a_known_block_missing_its_fields_is_an_error() {
        assert!(serde_json::from_value::<ContentBlock>(json!({"type": "text"})).is_err());
        assert!(
            serde_json::from_value::<ContentBlock>(json!({"type": "image", "data": 1})).is_err()
        );
    }
}
