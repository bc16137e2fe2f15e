//! The shapes of `mcp.json`, as serde reads them: every field this crate knows, with its type.
//! What the shapes cannot say (which fields go together, what contradicts what, `${VAR}`
//! expansion) is `parse.rs`'s.

use std::{collections::BTreeMap, fmt, marker::PhantomData, time::Duration};

use serde::{
    de::{self, value::MapAccessDeserializer, IgnoredAny, Unexpected, Visitor},
    Deserialize, Deserializer,
};

use crate::client::ProtocolEra;

/// The file. Its other fields are warned about.
#[derive(Debug, Deserialize)]
#[serde(expecting = "an object with \"mcpServers\" or \"servers\"")]
pub(super) struct FileShape {
    /// Claude Desktop, Claude Code, Cursor.
    #[serde(rename = "mcpServers")]
    pub(super) mcp_servers: Option<Object<BTreeMap<String, Object<ServerShape>>>>,
    /// VS Code.
    pub(super) servers: Option<Object<BTreeMap<String, Object<ServerShape>>>>,
    /// VS Code's prompted inputs: not supported (a `${input:..}` that uses one is an error for
    /// its field); only their shape is checked.
    #[allow(dead_code, reason = "read for its shape only")]
    pub(super) inputs: Option<Vec<IgnoredAny>>,
}

/// One server, as written. `null` reads as absent.
#[derive(Debug, Deserialize)]
#[serde(
    rename_all = "camelCase",
    expecting = "an object of the server's fields"
)]
pub(super) struct ServerShape {
    #[serde(rename = "type")]
    pub(super) kind: Option<Kind>,
    pub(super) command: Option<String>,
    pub(super) args: Option<Vec<String>>,
    pub(super) env: Option<Object<BTreeMap<String, String>>>,
    pub(super) cwd: Option<String>,
    pub(super) url: Option<String>,
    /// The Unix socket an `http` server is reached over (instead of TCP).
    pub(super) socket: Option<String>,
    pub(super) headers: Option<Object<BTreeMap<String, String>>>,
    pub(super) enabled: Option<bool>,
    /// Cline's spelling of `enabled: false`.
    pub(super) disabled: Option<bool>,
    pub(super) timeout: Option<Millis>,
    pub(super) request_timeout_ms: Option<Millis>,
    pub(super) connect_timeout_ms: Option<Millis>,
    pub(super) era: Option<ProtocolEra>,
    pub(super) auth: Option<Object<AuthShape>>,
    pub(super) tools: Option<Object<ExposureShape>>,
    pub(super) prompts: Option<Object<ExposureShape>>,
    pub(super) access: Option<Vec<Object<AccessRuleShape>>>,
    pub(super) shared: Option<bool>,
}

/// One rule of a server's `access`.
#[derive(Debug, Deserialize)]
pub(super) struct AccessRuleShape {
    pub(super) scopes: Option<Vec<String>>,
    pub(super) claims: Option<Object<BTreeMap<String, OneOrMany>>>,
    pub(super) allow: Option<Object<ItemsShape>>,
    pub(super) deny: Option<Object<ItemsShape>>,
}

/// What an `access` rule allows or denies.
#[derive(Debug, Deserialize)]
pub(super) struct ItemsShape {
    pub(super) tools: Option<Vec<String>>,
    pub(super) prompts: Option<Vec<String>>,
    pub(super) resources: Option<Vec<String>>,
}

/// A string, or a list of strings.
#[derive(Debug, Deserialize)]
#[serde(untagged, expecting = "a string or a list of strings")]
pub(super) enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub(super) fn into_vec(self) -> Vec<String> {
        match self {
            Self::One(one) => vec![one],
            Self::Many(many) => many,
        }
    }
}

/// A server's `tools` or `prompts`.
#[derive(Debug, Deserialize)]
pub(super) struct ExposureShape {
    pub(super) allow: Option<Vec<String>>,
    pub(super) deny: Option<Vec<String>>,
    pub(super) rename: Option<Object<BTreeMap<String, String>>>,
}

/// A server's `auth`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct AuthShape {
    pub(super) client_id: Option<String>,
    pub(super) client_secret: Option<String>,
    pub(super) client_metadata_url: Option<String>,
    pub(super) scopes: Option<Scopes>,
    pub(super) callback_port: Option<Port>,
    pub(super) sign_in_timeout_ms: Option<Millis>,
    pub(super) token_exchange: Option<bool>,
}

/// A `T` read from a JSON object, and only from one: serde's derived structs also take arrays
/// (their fields by position), which no `mcp.json` means.
#[derive(Debug, Clone, Default)]
pub(super) struct Object<T>(pub(super) T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ObjectVisitor(PhantomData))
    }
}

struct ObjectVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
    type Value = Object<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: de::MapAccess<'de>>(self, members: A) -> Result<Object<T>, A::Error> {
        T::deserialize(MapAccessDeserializer::new(members)).map(Object)
    }
}

/// `type`'s values (Claude Code writes `streamable-http`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub(super) enum Kind {
    #[serde(rename = "stdio")]
    Stdio,
    #[serde(rename = "http", alias = "streamable-http", alias = "streamableHttp")]
    Http,
    #[serde(rename = "sse")]
    Sse,
}

impl Kind {
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::Stdio => "stdio",
            Kind::Http => "http",
            Kind::Sse => "sse",
        }
    }
}

/// A whole number of milliseconds.
#[derive(Debug, Clone, Copy)]
pub(super) struct Millis(pub(super) Duration);

impl<'de> Deserialize<'de> for Millis {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let whole = Whole {
            range: 0..=u64::MAX,
            expecting: "a whole number of milliseconds",
        };
        let millis = deserializer.deserialize_u64(whole)?;
        Ok(Millis(Duration::from_millis(millis)))
    }
}

/// A TCP port that can be listened on: 1 to 65535.
#[derive(Debug, Clone, Copy)]
pub(super) struct Port(pub(super) u16);

impl<'de> Deserialize<'de> for Port {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let whole = Whole {
            range: 1..=u64::from(u16::MAX),
            expecting: "a port number from 1 to 65535",
        };
        let port = deserializer.deserialize_u64(whole)?;
        u16::try_from(port)
            .map(Port)
            .map_err(|_| de::Error::invalid_value(Unexpected::Unsigned(port), &"a port"))
    }
}

/// A whole number in `range`, named `expecting` in refusals.
struct Whole {
    range: std::ops::RangeInclusive<u64>,
    expecting: &'static str,
}

impl Visitor<'_> for Whole {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expecting)
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<u64, E> {
        if self.range.contains(&value) {
            Ok(value)
        } else {
            Err(E::invalid_value(Unexpected::Unsigned(value), &self))
        }
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<u64, E> {
        match u64::try_from(value) {
            Ok(value) => self.visit_u64(value),
            Err(_) => Err(E::invalid_value(Unexpected::Signed(value), &self)),
        }
    }
}

/// `auth.scopes`: an array of strings or one space-separated string.
#[derive(Debug, Clone, Default)]
pub(super) struct Scopes(pub(super) Vec<String>);

impl<'de> Deserialize<'de> for Scopes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ScopesVisitor)
    }
}

struct ScopesVisitor;

impl<'de> Visitor<'de> for ScopesVisitor {
    type Value = Scopes;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of strings or one space-separated string")
    }

    fn visit_str<E: de::Error>(self, scopes: &str) -> Result<Scopes, E> {
        Ok(Scopes(
            scopes.split_whitespace().map(str::to_owned).collect(),
        ))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut items: A) -> Result<Scopes, A::Error> {
        let mut scopes = Vec::with_capacity(items.size_hint().unwrap_or(0).min(64));
        while let Some(scope) = items.next_element::<String>()? {
            scopes.push(scope);
        }
        Ok(Scopes(scopes))
    }
}
