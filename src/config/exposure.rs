//! Which of a server's tools and prompts a catalogue offers, and under which names: a server's
//! `tools` and `prompts` fields (`{"allow": [..], "deny": [..], "rename": {"theirs": "ours"}}`).

use std::collections::{BTreeMap, BTreeSet};

/// One server's `tools` (or `prompts`): what is offered of them and as what. By default,
/// everything under its own name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Exposure {
    /// Only these are offered (by the server's names); `None`: all.
    pub allow: Option<BTreeSet<String>>,
    /// These are never offered.
    pub deny: BTreeSet<String>,
    /// Offered under another name: the server's name → the name offered.
    pub rename: BTreeMap<String, String>,
}

impl Exposure {
    /// Whether the server's `name` is offered.
    pub fn offers(&self, name: &str) -> bool {
        !self.deny.contains(name) && self.allow.as_ref().is_none_or(|allow| allow.contains(name))
    }

    /// The name the server's `name` is offered under.
    pub fn offered_name<'a>(&'a self, name: &'a str) -> &'a str {
        self.rename.get(name).map_or(name, String::as_str)
    }

    /// Whether everything is offered under its own name.
    pub fn is_everything(&self) -> bool {
        self.allow.is_none() && self.deny.is_empty() && self.rename.is_empty()
    }

    /// What makes `allow`, `deny` and `rename` contradict each other, if anything: a name both
    /// allowed and denied, a rename to an empty name, two renamed to one, a rename of what is
    /// not offered.
    pub(super) fn contradiction(&self) -> Option<String> {
        if let Some(both) = self.allow.iter().flatten().find(|n| self.deny.contains(*n)) {
            return Some(format!("allow and deny both name {both:?}"));
        }
        let mut given = BTreeSet::new();
        for (theirs, ours) in &self.rename {
            if ours.trim().is_empty() {
                return Some(format!("rename gives {theirs:?} an empty name"));
            }
            if !given.insert(ours) {
                return Some(format!("rename gives two names the one name {ours:?}"));
            }
            if !self.offers(theirs) {
                return Some(format!("rename names {theirs:?}, which is not offered"));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn deny_wins_over_everything_and_allow_keeps_only_its_names() {
        let mut exposure = Exposure::default();
        assert!(exposure.offers("any") && exposure.is_everything());
        exposure.deny = names(&["stats"]);
        assert!(!exposure.offers("stats") && exposure.offers("echo"));
        exposure.allow = Some(names(&["echo"]));
        assert!(exposure.offers("echo") && !exposure.offers("sleep"));
        exposure.rename.insert("echo".into(), "say".into());
        assert_eq!(exposure.offered_name("echo"), "say");
        assert_eq!(exposure.offered_name("sleep"), "sleep");
        assert_eq!(exposure.contradiction(), None);
    }

    #[test]
    fn contradictions_are_named() {
        let both = Exposure {
            allow: Some(names(&["a"])),
            deny: names(&["a"]),
            ..Exposure::default()
        };
        assert!(both.contradiction().unwrap().contains("\"a\""));
        let mut two = Exposure::default();
        two.rename.insert("a".into(), "x".into());
        two.rename.insert("b".into(), "x".into());
        assert!(two.contradiction().unwrap().contains("one name"));
        let mut hidden = Exposure {
            deny: names(&["a"]),
            ..Exposure::default()
        };
        hidden.rename.insert("a".into(), "x".into());
        assert!(hidden.contradiction().unwrap().contains("not offered"));
    }
}
