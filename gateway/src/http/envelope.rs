//! What a 2026-07-28 request must carry before the gateway looks at it (the stateless era: no
//! session, every request says who it is): `_meta` with its protocol version and the client's
//! capabilities; the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers, when sent,
//! agreeing with the body (SEP-2243); a version the gateway speaks; a method the era has. A
//! plain function of the headers and the body: the refusal, HTTP status included, or nothing.

use serde_json::{json, Value};

use crate::{
    message::Request,
    replies::{error, INVALID_PARAMS, METHOD_NOT_FOUND},
};

/// The version of the stateless era.
pub const MODERN: &str = "2026-07-28";

const HEADER_MISMATCH: i64 = -32020;
const UNSUPPORTED_VERSION: i64 = -32022;

/// The headers that repeat the body.
#[derive(Default)]
pub struct Headers<'a> {
    pub protocol_version: Option<&'a str>,
    pub method: Option<&'a str>,
    pub name: Option<&'a str>,
}

/// A refusal: the HTTP status and the JSON-RPC error.
#[derive(Debug, PartialEq)]
pub struct Refused {
    pub status: u16,
    pub answer: Value,
}

/// Whether `request` is of the 2026-07-28 era (its headers or its `_meta` say so).
pub fn is_modern(headers: &Headers<'_>, request: &Request) -> bool {
    headers.protocol_version == Some(MODERN)
        || request.meta()["io.modelcontextprotocol/protocolVersion"].is_string()
}

/// Checks a 2026-07-28 request.
pub fn check(headers: &Headers<'_>, request: &Request) -> Result<(), Refused> {
    let (method, id) = (request.name.as_str(), &request.id);
    let refuse = |status, code, text: String, data: Option<Value>| {
        let mut answer = error(id, code, text);
        if let Some(data) = data {
            answer["error"]["data"] = data;
        }
        Err(Refused { status, answer })
    };
    let meta = request.meta();
    let version = meta["io.modelcontextprotocol/protocolVersion"].as_str();
    let Some(version) = version else {
        let why = "_meta needs io.modelcontextprotocol/protocolVersion";
        return refuse(400, INVALID_PARAMS, why.into(), None);
    };
    if !meta["io.modelcontextprotocol/clientCapabilities"].is_object() {
        let why = "_meta needs io.modelcontextprotocol/clientCapabilities";
        return refuse(400, INVALID_PARAMS, why.into(), None);
    }
    let asked = request.method;
    let name = asked
        .routed_by()
        .and_then(|field| request.params[field].as_str());
    // SEP-2243: `Mcp-Method` on every request, `Mcp-Name` with the name or URI it routes by.
    if headers.method.is_none() || (name.is_some() && headers.name.is_none()) {
        let why = "the Mcp-Method header (and Mcp-Name, for a named request) must be sent";
        return refuse(400, INVALID_PARAMS, why.into(), None);
    }
    let disagree = |header: Option<&str>, body: Option<&str>| header.is_some() && header != body;
    if disagree(headers.protocol_version, Some(version))
        || disagree(headers.method, Some(method))
        || disagree(headers.name, name)
    {
        let why = "the MCP-Protocol-Version, Mcp-Method or Mcp-Name header disagrees with the body";
        return refuse(400, HEADER_MISMATCH, why.into(), None);
    }
    if version != MODERN {
        let data = json!({"supported": [MODERN], "requested": version});
        let why = format!("protocol version {version:?} is not served without a session");
        return refuse(400, UNSUPPORTED_VERSION, why, Some(data));
    }
    // What the gateway serves of the era: the rest (its removed methods among them:
    // `initialize`, `ping`, `logging/setLevel`, `resources/subscribe`) is `404`.
    if !asked.served(true) {
        let why = format!("the gateway does not serve {method} in the {MODERN} era");
        return refuse(404, METHOD_NOT_FOUND, why, None);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::method::Method;

    fn request(method: &str, meta: Value) -> Request {
        Request {
            id: json!(1),
            method: Method::of(method),
            name: method.to_owned(),
            params: json!({"name": "echo", "_meta": meta}),
        }
    }

    fn envelope(version: &str) -> Value {
        json!({"io.modelcontextprotocol/protocolVersion": version,
               "io.modelcontextprotocol/clientCapabilities": {}})
    }

    fn sent(message: &Request) -> Headers<'_> {
        Headers {
            protocol_version: None,
            method: Some(&message.name),
            name: message.params["name"]
                .as_str()
                .filter(|_| message.name == "tools/call"),
        }
    }

    fn refused(headers: &Headers<'_>, message: &Request) -> (u16, i64) {
        let refused = check(headers, message).expect_err("refused");
        let code = refused.answer["error"]["code"].as_i64().unwrap_or_default();
        (refused.status, code)
    }

    #[test]
    fn a_whole_envelope_with_agreeing_headers_passes() {
        let headers = Headers {
            protocol_version: Some(MODERN),
            method: Some("tools/call"),
            name: Some("echo"),
        };
        assert_eq!(
            check(&headers, &request("tools/call", envelope(MODERN))),
            Ok(())
        );
    }

    #[test]
    fn what_is_missing_or_disagrees_is_refused_with_its_status_and_code() {
        let bare = request("tools/list", json!({}));
        assert_eq!(refused(&sent(&bare), &bare), (400, -32602));
        let no_capabilities = json!({"io.modelcontextprotocol/protocolVersion": MODERN});
        let partial = request("tools/list", no_capabilities);
        assert_eq!(refused(&sent(&partial), &partial), (400, -32602));
        let call = request("tools/call", envelope(MODERN));
        assert_eq!(
            refused(&Headers::default(), &call),
            (400, -32602),
            "no Mcp-Method"
        );
        let unnamed = Headers {
            method: Some("tools/call"),
            ..Headers::default()
        };
        assert_eq!(refused(&unnamed, &call), (400, -32602), "no Mcp-Name");
        let other = request("server/discover", envelope("v999.0.0"));
        let header = Headers {
            protocol_version: Some(MODERN),
            ..sent(&other)
        };
        assert_eq!(refused(&header, &other), (400, -32020), "mismatch first");
        assert_eq!(refused(&sent(&other), &other), (400, -32022));
        let named = Headers {
            name: Some("other"),
            ..sent(&call)
        };
        assert_eq!(refused(&named, &call), (400, -32020));
        for removed in [
            "initialize",
            "ping",
            "logging/setLevel",
            "resources/subscribe",
            "x/y",
        ] {
            let message = request(removed, envelope(MODERN));
            let headers = Headers {
                name: None,
                ..sent(&message)
            };
            assert_eq!(refused(&headers, &message), (404, -32601));
        }
        let unsupported = check(&sent(&other), &other).expect_err("refused");
        let data = &unsupported.answer["error"]["data"];
        assert_eq!(data["requested"], "v999.0.0");
        assert_eq!(data["supported"], json!([MODERN]));
    }
}
