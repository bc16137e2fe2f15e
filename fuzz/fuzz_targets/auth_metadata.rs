//! The authorization parsers: `WWW-Authenticate` challenges, protected-resource and
//! authorization-server metadata documents, and the discovery rules applied to them (which
//! URLs are asked, whether a `resource` names the server, https-or-loopback). Never a panic;
//! a challenge we could have been sent reads back as sent; discovery never leaves the origin.
#![no_main]

use actix_mcp::auth::{AuthorizationServerMetadata, Challenge, ProtectedResourceMetadata};
use actix_mcp::fuzzing::{
    authorization_server_metadata_urls, check_secure, resource_matches, resource_metadata_urls,
};
use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use url::Url;

#[derive(Debug, Arbitrary)]
struct Params {
    resource_metadata: Option<String>,
    scope: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
    /// Unquoted values (a token, no blanks or commas) where true.
    bare: bool,
    /// A parameter we do not read, first.
    realm: Option<String>,
}

/// The input's layout (simple, so the seeds in `corpus/` are written by hand): the server URL
/// and a `WWW-Authenticate` value (each a length byte and the bytes), the bytes [`Params`] are
/// drawn from (likewise), then a metadata document.
#[derive(Debug)]
struct Input<'a> {
    server: String,
    header: String,
    params: Params,
    document: &'a [u8],
}

fn take<'a>(data: &mut &'a [u8]) -> Option<&'a [u8]> {
    let (&n, rest) = data.split_first()?;
    let n = usize::from(n).min(rest.len());
    let (taken, rest) = rest.split_at(n);
    *data = rest;
    Some(taken)
}

impl<'a> Input<'a> {
    fn read(mut data: &'a [u8]) -> Option<Self> {
        let server = String::from_utf8_lossy(take(&mut data)?).into_owned();
        let header = String::from_utf8_lossy(take(&mut data)?).into_owned();
        let params = Params::arbitrary_take_rest(Unstructured::new(take(&mut data)?)).ok()?;
        Some(Input {
            server,
            header,
            params,
            document: data,
        })
    }
}

fn quoted(value: &str) -> String {
    let mut out = String::from("\"");
    for c in value.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// A bare value: an RFC 9110 token.
fn is_token(value: &str) -> bool {
    !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c))
}

/// What a quoted string can carry: visible ASCII, blanks and tabs.
fn is_quotable(value: &str) -> bool {
    value.chars().all(|c| c == '\t' || c == ' ' || c.is_ascii_graphic())
}

fn challenge_round_trip(params: &Params) {
    let mut parts = Vec::new();
    let mut expected = Challenge {
        scheme: "Bearer".into(),
        ..Challenge::default()
    };
    let mut add = |name: &str, value: &Option<String>, slot: Option<&mut Option<String>>| {
        let Some(value) = value else { return true };
        let written = if params.bare {
            if !is_token(value) {
                return false;
            }
            value.clone()
        } else {
            if !is_quotable(value) {
                return false;
            }
            quoted(value)
        };
        parts.push(format!("{name}={written}"));
        if let Some(slot) = slot {
            *slot = Some(value.clone());
        }
        true
    };
    let fits = add("realm", &params.realm, None)
        && add(
            "resource_metadata",
            &params.resource_metadata,
            Some(&mut expected.resource_metadata),
        )
        && add("scope", &params.scope, Some(&mut expected.scope))
        && add("error", &params.error, Some(&mut expected.error))
        && add(
            "error_description",
            &params.error_description,
            Some(&mut expected.error_description),
        );
    if !fits {
        return;
    }
    let header = format!("Bearer {}", parts.join(", "));
    assert_eq!(Challenge::parse(&header), expected, "header: {header:?}");
}

fuzz_target!(|data: &[u8]| {
    let Some(input) = Input::read(data) else {
        return;
    };
    let challenge = Challenge::parse(&input.header);
    assert!(!challenge.scheme.contains(char::is_whitespace));
    challenge_round_trip(&input.params);

    let server = Url::parse(&input.server)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.fragment().is_none());

    if let Some(server) = &server {
        // A server is always its own resource.
        assert!(
            resource_matches(server, server.as_str()),
            "{server} does not match itself"
        );
        let origin = server.origin().ascii_serialization();
        let hint = challenge.resource_metadata.as_deref();
        let urls = resource_metadata_urls(server, hint);
        let skip = usize::from(hint.is_some());
        for url in &urls[skip..] {
            assert!(url.starts_with(&origin), "{url} leaves {origin}");
            if check_secure("server", server.as_str()).is_ok() {
                assert!(check_secure("metadata", url).is_ok(), "{url} is not secure");
            }
        }
    }

    if let Ok(metadata) = serde_json::from_slice::<ProtectedResourceMetadata>(input.document) {
        if let Some(server) = &server {
            let _ = resource_matches(server, &metadata.resource);
        }
        for issuer in &metadata.authorization_servers {
            let Ok(issuer) = check_secure("authorization server", issuer) else {
                continue;
            };
            let origin = issuer.origin().ascii_serialization();
            for url in authorization_server_metadata_urls(&issuer) {
                assert!(url.starts_with(&origin), "{url} leaves {origin}");
                assert!(
                    check_secure("metadata", &url).is_ok(),
                    "{url} is not secure"
                );
            }
        }
    }
    if let Ok(metadata) = serde_json::from_slice::<AuthorizationServerMetadata>(input.document) {
        let _ = metadata.supports_scope("offline_access");
        for endpoint in [
            &metadata.authorization_endpoint,
            &metadata.token_endpoint,
            &metadata.registration_endpoint,
        ]
        .into_iter()
        .flatten()
        {
            let _ = check_secure("endpoint", endpoint.as_str());
        }
    }
});
