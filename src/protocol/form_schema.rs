//! The restricted JSON Schema of a form-mode elicitation (`requestedSchema`): a flat object
//! whose properties are strings, numbers, booleans, or single- and multi-select enums. A
//! property of a shape this crate does not know is kept as sent ([`PrimitiveSchema::Other`]),
//! so a form is never refused for it.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Number, Value};

/// `requestedSchema`: the form's fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FormSchema {
    /// Always `"object"`.
    #[serde(rename = "type", default = "object")]
    pub kind: String,
    /// The fields, by name.
    #[serde(default)]
    pub properties: BTreeMap<String, PrimitiveSchema>,
    /// The names of the fields the user must fill in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<Vec<String>>,
    /// Fields this crate does not know (`$schema`, ...), as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn object() -> String {
    "object".into()
}

impl FormSchema {
    /// Whether the user must fill in `field`.
    pub fn is_required(&self, field: &str) -> bool {
        self.required
            .as_ref()
            .is_some_and(|required| required.iter().any(|r| r == field))
    }
}

/// One field of a form.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum PrimitiveSchema {
    /// `{"type": "string"}` without choices.
    String(StringSchema),
    /// `{"type": "number" | "integer"}`.
    Number(NumberSchema),
    /// `{"type": "boolean"}`.
    Boolean(BooleanSchema),
    /// `{"type": "string"}` with choices (`enum`, or titled `oneOf`).
    SingleSelect(SingleSelectSchema),
    /// `{"type": "array"}` of choices (`items.enum`, or titled `items.anyOf`).
    MultiSelect(MultiSelectSchema),
    /// A shape this crate does not know, as sent.
    Other(Value),
}

/// A text field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StringSchema {
    /// The label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Fewest characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_length: Option<u64>,
    /// Most characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<u64>,
    /// `email`, `uri`, `date` or `date-time`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// The value a client fills in when the user gives none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A number field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NumberSchema {
    /// `number` or `integer`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Smallest value allowed; kept as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<Number>,
    /// Largest value allowed; kept as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum: Option<Number>,
    /// The value a client fills in when the user gives none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Number>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A checkbox.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BooleanSchema {
    /// The label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The value a client fills in when the user gives none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<bool>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One choice of a titled enum: the value sent back and its label.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnumOption {
    /// The value the client answers with.
    #[serde(rename = "const")]
    pub value: String,
    /// Its label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Pick one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SingleSelectSchema {
    /// The label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Untitled choices.
    #[serde(rename = "enum", default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
    /// Labels of the untitled choices, in order (the older, deprecated form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enum_names: Option<Vec<String>>,
    /// Titled choices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_of: Option<Vec<EnumOption>>,
    /// The choice a client preselects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The choices of a multi-select.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MultiSelectItems {
    /// `string` for untitled choices.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Untitled choices.
    #[serde(rename = "enum", default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
    /// Titled choices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub any_of: Option<Vec<EnumOption>>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Pick several.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MultiSelectSchema {
    /// The label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Fewest choices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_items: Option<u64>,
    /// Most choices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<u64>,
    /// The choices.
    pub items: MultiSelectItems,
    /// The choices a client preselects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Vec<String>>,
    /// Fields this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl PrimitiveSchema {
    /// The field's label, if it has one.
    pub fn title(&self) -> Option<&str> {
        match self {
            PrimitiveSchema::String(s) => s.title.as_deref(),
            PrimitiveSchema::Number(s) => s.title.as_deref(),
            PrimitiveSchema::Boolean(s) => s.title.as_deref(),
            PrimitiveSchema::SingleSelect(s) => s.title.as_deref(),
            PrimitiveSchema::MultiSelect(s) => s.title.as_deref(),
            PrimitiveSchema::Other(v) => v.get("title").and_then(Value::as_str),
        }
    }

    /// The choices of an enum field as (value, label) pairs; empty for other fields.
    pub fn choices(&self) -> Vec<(&str, &str)> {
        fn titled(options: &[EnumOption]) -> Vec<(&str, &str)> {
            options
                .iter()
                .map(|o| (o.value.as_str(), o.title.as_deref().unwrap_or(&o.value)))
                .collect()
        }
        fn untitled<'a>(
            values: &'a [String],
            names: Option<&'a [String]>,
        ) -> Vec<(&'a str, &'a str)> {
            values
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    (
                        v.as_str(),
                        names.and_then(|n| n.get(i)).unwrap_or(v).as_str(),
                    )
                })
                .collect()
        }
        match self {
            PrimitiveSchema::SingleSelect(s) => match (&s.one_of, &s.values) {
                (Some(options), _) => titled(options),
                (None, Some(values)) => untitled(values, s.enum_names.as_deref()),
                (None, None) => Vec::new(),
            },
            PrimitiveSchema::MultiSelect(s) => match (&s.items.any_of, &s.items.values) {
                (Some(options), _) => titled(options),
                (None, Some(values)) => untitled(values, None),
                (None, None) => Vec::new(),
            },
            _ => Vec::new(),
        }
    }
}

impl<'de> Deserialize<'de> for PrimitiveSchema {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let Some(map) = value.as_object() else {
            return Ok(PrimitiveSchema::Other(value));
        };
        let kind = map.get("type").and_then(Value::as_str);
        let choices = map.contains_key("enum") || map.contains_key("oneOf");
        let mut rest = map.clone();
        let parsed = match kind {
            Some("string") if choices => {
                rest.remove("type");
                serde_json::from_value(Value::Object(rest)).map(PrimitiveSchema::SingleSelect)
            }
            Some("string") => {
                rest.remove("type");
                serde_json::from_value(Value::Object(rest)).map(PrimitiveSchema::String)
            }
            Some("number" | "integer") => {
                serde_json::from_value(Value::Object(rest)).map(PrimitiveSchema::Number)
            }
            Some("boolean") => {
                rest.remove("type");
                serde_json::from_value(Value::Object(rest)).map(PrimitiveSchema::Boolean)
            }
            Some("array") => {
                rest.remove("type");
                serde_json::from_value(Value::Object(rest)).map(PrimitiveSchema::MultiSelect)
            }
            _ => return Ok(PrimitiveSchema::Other(value)),
        };
        // A field of a known type but an unexpected shape is kept as sent, never refused.
        Ok(parsed.unwrap_or(PrimitiveSchema::Other(value)))
    }
}

impl Serialize for PrimitiveSchema {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (kind, body) = match self {
            PrimitiveSchema::String(s) => (Some("string"), serde_json::to_value(s)),
            PrimitiveSchema::Number(s) => (None, serde_json::to_value(s)),
            PrimitiveSchema::Boolean(s) => (Some("boolean"), serde_json::to_value(s)),
            PrimitiveSchema::SingleSelect(s) => (Some("string"), serde_json::to_value(s)),
            PrimitiveSchema::MultiSelect(s) => (Some("array"), serde_json::to_value(s)),
            PrimitiveSchema::Other(value) => return value.serialize(serializer),
        };
        let mut body = body.map_err(serde::ser::Error::custom)?;
        if let (Some(kind), Some(map)) = (kind, body.as_object_mut()) {
            map.insert("type".into(), Value::from(kind));
        }
        body.serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_field_shape_is_typed_and_written_back_unchanged() {
        let schema = json!({"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "minLength": 1, "format": "email"},
            "age": {"type": "integer", "minimum": 0, "default": 30},
            "ok": {"type": "boolean", "default": true},
            "color": {"type": "string", "enum": ["r", "g"], "enumNames": ["Red", "Green"]},
            "size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
            "when": {"type": "date-ish", "x": 1},
            "odd": {"type": "string", "minLength": "three"}
        }});
        let typed: FormSchema = serde_json::from_value(schema.clone()).unwrap();
        let p = &typed.properties;
        assert!(matches!(p["name"], PrimitiveSchema::String(_)));
        assert!(matches!(p["age"], PrimitiveSchema::Number(_)));
        assert!(matches!(p["ok"], PrimitiveSchema::Boolean(_)));
        assert_eq!(p["color"].choices(), [("r", "Red"), ("g", "Green")]);
        assert_eq!(p["size"].choices(), [("s", "Small")]);
        assert_eq!(p["tags"].choices(), [("a", "a"), ("b", "b")]);
        assert!(matches!(p["when"], PrimitiveSchema::Other(_)));
        assert!(
            matches!(p["odd"], PrimitiveSchema::Other(_)),
            "kept, not refused"
        );
        assert!(typed.is_required("name") && !typed.is_required("age"));
        assert_eq!(serde_json::to_value(&typed).unwrap(), schema);
    }
}
