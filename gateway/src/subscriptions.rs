//! Resource subscriptions shared by every session: one upstream subscription per server and URI,
//! however many downstream sessions asked for it; the first session subscribes upstream, the
//! last to leave unsubscribes. A plain type; the sessions do the I/O it says.

use std::collections::HashMap;

#[derive(Default)]
pub struct Subscribers {
    /// (server, URI) → how many sessions are subscribed.
    count: HashMap<(String, String), usize>,
}

impl Subscribers {
    /// A session subscribes to `uri` of `server`: whether the server must be asked (the first).
    pub fn join(&mut self, server: &str, uri: &str) -> bool {
        let count = self
            .count
            .entry((server.to_owned(), uri.to_owned()))
            .or_default();
        *count += 1;
        *count == 1
    }

    /// A session no longer is: whether the server must be told (it was the last).
    pub fn leave(&mut self, server: &str, uri: &str) -> bool {
        let key = (server.to_owned(), uri.to_owned());
        let Some(count) = self.count.get_mut(&key) else {
            return false;
        };
        *count -= 1;
        if *count > 0 {
            return false;
        }
        self.count.remove(&key);
        true
    }

    /// The URIs of `server` someone is subscribed to: asked again of its next connection.
    pub fn of(&self, server: &str) -> Vec<String> {
        let on = self.count.keys().filter(|(s, _)| s == server);
        on.map(|(_, uri)| uri.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_session_subscribes_upstream_and_the_last_unsubscribes() {
        let mut subscribers = Subscribers::default();
        assert!(subscribers.join("a", "file:///x"));
        assert!(!subscribers.join("a", "file:///x"), "a second session");
        assert!(subscribers.join("b", "file:///x"), "another server");
        assert!(!subscribers.leave("a", "file:///x"));
        assert_eq!(subscribers.of("a"), ["file:///x"]);
        assert!(subscribers.leave("a", "file:///x"), "the last");
        assert!(subscribers.of("a").is_empty());
        assert!(!subscribers.leave("a", "file:///x"), "not subscribed");
        assert!(subscribers.join("a", "file:///x"), "first again");
    }
}
