//! Content blocks of tool results and prompt messages: text, images, audio, resource links and
//! embedded resources. A block of a kind this crate does not know is kept as it came.

use serde::{de::Error as _, Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::resources::ResourceContents;

#[derive(Debug, Clone, PartialEq)]
pub enum ContentBlock {
    Text {
        text: String,
        extra: Map<String, Value>,
    },
    /// Base64 `data` with its `mimeType`.
    Image {
        data: String,
        mime_type: String,
        extra: Map<String, Value>,
    },
    Audio {
        data: String,
        mime_type: String,
        extra: Map<String, Value>,
    },
    /// A link to a resource the client may read (`uri`, `name`, ...).
    ResourceLink {
        uri: String,
        name: Option<String>,
        extra: Map<String, Value>,
    },
    /// An embedded resource.
    Resource {
        resource: Box<ResourceContents>,
        extra: Map<String, Value>,
    },
    /// A kind this crate does not know, as sent.
    Other(Value),
}

impl ContentBlock {
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text {
            text: text.into(),
            extra: Map::new(),
        }
    }

    /// The text of a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            ContentBlock::Text { text, .. } => Some(text),
            _ => None,
        }
    }
}

fn take_str(map: &mut Map<String, Value>, key: &str) -> Result<String, String> {
    match map.remove(key) {
        Some(Value::String(s)) => Ok(s),
        _ => Err(format!("content block without a string {key:?}")),
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let Value::Object(mut map) = value else {
            return Ok(ContentBlock::Other(value));
        };
        let kind = map.get("type").and_then(Value::as_str).map(str::to_owned);
        let original = map.clone();
        let parsed = (|| -> Result<ContentBlock, String> {
            map.remove("type");
            Ok(match kind.as_deref() {
                Some("text") => ContentBlock::Text {
                    text: take_str(&mut map, "text")?,
                    extra: map,
                },
                Some("image") => ContentBlock::Image {
                    data: take_str(&mut map, "data")?,
                    mime_type: take_str(&mut map, "mimeType")?,
                    extra: map,
                },
                Some("audio") => ContentBlock::Audio {
                    data: take_str(&mut map, "data")?,
                    mime_type: take_str(&mut map, "mimeType")?,
                    extra: map,
                },
                Some("resource_link") => ContentBlock::ResourceLink {
                    uri: take_str(&mut map, "uri")?,
                    name: take_str(&mut map, "name").ok(),
                    extra: map,
                },
                Some("resource") => {
                    let resource = map
                        .remove("resource")
                        .ok_or("resource block without resource")?;
                    ContentBlock::Resource {
                        resource: Box::new(
                            serde_json::from_value(resource).map_err(|e| e.to_string())?,
                        ),
                        extra: map,
                    }
                }
                _ => return Err("unknown".into()),
            })
        })();
        match parsed {
            Ok(block) => Ok(block),
            // An unknown kind is kept as sent; a known kind missing its fields is an error.
            Err(_)
                if !matches!(
                    kind.as_deref(),
                    Some("text" | "image" | "audio" | "resource_link" | "resource")
                ) =>
            {
                Ok(ContentBlock::Other(Value::Object(original)))
            }
            Err(e) => Err(D::Error::custom(e)),
        }
    }
}

impl Serialize for ContentBlock {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = Map::new();
        let extra = match self {
            ContentBlock::Text { text, extra } => {
                map.insert("type".into(), "text".into());
                map.insert("text".into(), text.clone().into());
                extra
            }
            ContentBlock::Image {
                data,
                mime_type,
                extra,
            }
            | ContentBlock::Audio {
                data,
                mime_type,
                extra,
            } => {
                let kind = if matches!(self, ContentBlock::Image { .. }) {
                    "image"
                } else {
                    "audio"
                };
                map.insert("type".into(), kind.into());
                map.insert("data".into(), data.clone().into());
                map.insert("mimeType".into(), mime_type.clone().into());
                extra
            }
            ContentBlock::ResourceLink { uri, name, extra } => {
                map.insert("type".into(), "resource_link".into());
                map.insert("uri".into(), uri.clone().into());
                if let Some(name) = name {
                    map.insert("name".into(), name.clone().into());
                }
                extra
            }
            ContentBlock::Resource { resource, extra } => {
                map.insert("type".into(), "resource".into());
                let resource = serde_json::to_value(resource).map_err(serde::ser::Error::custom)?;
                map.insert("resource".into(), resource);
                extra
            }
            ContentBlock::Other(value) => return value.serialize(serializer),
        };
        for (k, v) in extra {
            map.entry(k.clone()).or_insert_with(|| v.clone());
        }
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
            {"type": "text", "text": "hi", "annotations": {"priority": 1}},
            {"type": "image", "data": "AAE=", "mimeType": "image/png"},
            {"type": "resource_link", "uri": "demo://x", "name": "x"},
            {"type": "resource", "resource": {"uri": "demo://y", "text": "y"}},
            {"type": "hologram", "frames": 3}
        ]);
        let parsed: Vec<ContentBlock> = serde_json::from_value(blocks.clone()).unwrap();
        assert_eq!(parsed[0].as_text(), Some("hi"));
        assert!(matches!(parsed[1], ContentBlock::Image { .. }));
        assert!(matches!(parsed[3], ContentBlock::Resource { .. }));
        assert!(matches!(parsed[4], ContentBlock::Other(_)));
        assert_eq!(serde_json::to_value(&parsed).unwrap(), blocks);
    }

    #[test]
    fn a_known_block_missing_its_fields_is_an_error() {
        assert!(serde_json::from_value::<ContentBlock>(json!({"type": "text"})).is_err());
    }
}
