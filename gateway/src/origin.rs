//! DNS-rebinding protection (the transport's security warning: servers must validate `Origin`):
//! a gateway listening on loopback answers only requests addressed to a loopback name, and a
//! browser's request only from a page of a loopback origin; one listening elsewhere, a browser's
//! request only from a page of the host it was addressed to. Anything else gets `403`.

/// Whether a request with these `Host` and `Origin` headers must be refused.
pub fn is_foreign(host: Option<&str>, origin: Option<&str>, loopback: bool) -> bool {
    let host = host.map(hostname);
    if loopback && !host.is_some_and(is_loopback) {
        return true;
    }
    let Some(origin) = origin else {
        return false; // not a browser's request
    };
    let Some(from) = origin_host(origin) else {
        return true; // `null` (a sandboxed page, a file) or not an origin at all
    };
    if loopback {
        !is_loopback(&from)
    } else {
        host.is_none_or(|host| !host.eq_ignore_ascii_case(&from))
    }
}

/// `Host`'s name without its port (`[::1]:8080` → `[::1]`).
fn hostname(host: &str) -> &str {
    let host = host.trim();
    if host.starts_with('[') {
        return host.split_inclusive(']').next().unwrap_or(host);
    }
    host.split(':').next().unwrap_or(host)
}

fn is_loopback(name: &str) -> bool {
    let name = name.trim_end_matches('.');
    name.eq_ignore_ascii_case("localhost")
        || name
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The host of an origin (`http://127.0.0.1:8080` → `127.0.0.1`).
fn origin_host(origin: &str) -> Option<String> {
    let uri: actix_web::http::Uri = origin.trim().parse().ok()?;
    uri.scheme()?;
    let host = uri.host()?;
    Some(host.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_loopback_only_loopback_names_and_origins_are_served() {
        assert!(!is_foreign(Some("127.0.0.1:8080"), None, true));
        assert!(!is_foreign(
            Some("localhost:8080"),
            Some("http://localhost:3000"),
            true
        ));
        assert!(!is_foreign(
            Some("[::1]:8080"),
            Some("http://[::1]:3000"),
            true
        ));
        assert!(
            is_foreign(Some("evil.example:8080"), None, true),
            "a rebound name"
        );
        assert!(is_foreign(
            Some("127.0.0.1:8080"),
            Some("https://evil.example"),
            true
        ));
        assert!(is_foreign(Some("127.0.0.1:8080"), Some("null"), true));
        assert!(is_foreign(None, None, true));
    }

    #[test]
    fn elsewhere_a_browser_must_come_from_the_host_it_addressed() {
        assert!(!is_foreign(Some("mcp.example.com"), None, false));
        assert!(!is_foreign(
            Some("mcp.example.com"),
            Some("https://MCP.example.com"),
            false
        ));
        assert!(is_foreign(
            Some("mcp.example.com"),
            Some("https://evil.example"),
            false
        ));
    }
}
