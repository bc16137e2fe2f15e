//! Who a request came from, for the logs: its peer, or behind a proxy the operator trusts
//! (`--trusted-proxy`), the address that proxy says it forwarded for. Forwarded headers from
//! anyone else are what any client may write, and are not believed.

use std::net::IpAddr;

/// The client's address: the last `X-Forwarded-For` entry not itself a trusted proxy when the
/// peer is one, else the peer.
pub fn client_address(
    peer: Option<IpAddr>,
    forwarded_for: Option<&str>,
    trusted: &[IpAddr],
) -> Option<IpAddr> {
    let peer = peer?;
    if !trusted.contains(&peer) {
        return Some(peer);
    }
    let Some(forwarded_for) = forwarded_for else {
        return Some(peer);
    };
    let hops = forwarded_for.split(',').rev();
    let mut hops = hops.map(|hop| hop.trim().parse::<IpAddr>().ok());
    match hops.find(|hop| hop.is_none_or(|hop| !trusted.contains(&hop))) {
        Some(Some(client)) => Some(client),
        // An entry that is not an address: the last hop believed is the proxy itself.
        _ => Some(peer),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn forwarded_headers_are_believed_only_from_a_trusted_proxy() {
        let trusted = [ip("10.0.0.1")];
        let said = Some("203.0.113.7, 10.0.0.1");
        // From anyone else, the header is what that client wrote.
        assert_eq!(
            client_address(Some(ip("198.51.100.2")), said, &trusted),
            Some(ip("198.51.100.2"))
        );
        // From the proxy: the last hop that is not itself a trusted proxy.
        assert_eq!(
            client_address(Some(ip("10.0.0.1")), said, &trusted),
            Some(ip("203.0.113.7"))
        );
        let spoofed = Some("1.2.3.4, 203.0.113.7");
        assert_eq!(
            client_address(Some(ip("10.0.0.1")), spoofed, &trusted),
            Some(ip("203.0.113.7"))
        );
        assert_eq!(
            client_address(Some(ip("10.0.0.1")), Some("junk"), &trusted),
            Some(ip("10.0.0.1"))
        );
    }
}
