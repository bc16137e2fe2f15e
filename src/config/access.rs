//! Who may use what of a server: its `access` rules in `mcp.json`. A rule names the callers it
//! is for (the `scopes` their token must grant, the `claims` it must carry; neither: every
//! caller) and what it allows and denies of the server: `tools` and `prompts` by the server's
//! own names, `resources` by URI, each a list of patterns where `*` matches any run of
//! characters. A caller may use what a rule of theirs allows unless a rule of theirs denies it.
//! A server without `access` is open to every caller; `"access": []` to none.
//!
//! ```json
//! "access": [
//!   {"allow": {"tools": ["echo", "add"], "resources": ["demo://*"]}},
//!   {"scopes": ["admin"], "allow": {"tools": ["*"]}},
//!   {"claims": {"groups": "contractors"}, "deny": {"tools": ["add"]}}
//! ]
//! ```

use std::collections::BTreeMap;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde_json::{Map, Value};

/// A server's `access` rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    rules: Vec<AccessRule>,
}

/// One rule: for which callers, allowing and denying what.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AccessRule {
    /// Scopes the caller's token must all grant.
    pub scopes: Vec<String>,
    /// Claims the caller's token must carry: each with one of the values (a claim that is a
    /// list matches when it holds one of them).
    pub claims: BTreeMap<String, Vec<String>>,
    /// What the rule lets its callers use.
    pub allow: Items,
    /// What the rule keeps from its callers, whatever other rules allow.
    pub deny: Items,
}

/// What a rule names of a server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Items {
    /// Tools, by the server's names.
    pub tools: Patterns,
    /// Prompts, by the server's names.
    pub prompts: Patterns,
    /// Resources (and resource templates), by URI.
    pub resources: Patterns,
}

/// Names or URIs, `*` matching any run of characters.
#[derive(Debug, Clone, Default)]
pub struct Patterns {
    written: Vec<String>,
    set: GlobSet,
}

/// What an item of a server is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemKind {
    /// A tool, by its name.
    Tool,
    /// A prompt, by its name.
    Prompt,
    /// A resource, by its URI.
    Resource,
}

impl ItemKind {
    /// `tool`, `prompt` or `resource`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Prompt => "prompt",
            Self::Resource => "resource",
        }
    }
}

/// What a caller's token says, as the rules read it.
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    /// The scopes it grants.
    pub scopes: &'a [String],
    /// Its claims.
    pub claims: &'a Map<String, Value>,
}

/// Whether a caller may use an item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// A rule of the caller's allows it and none denies it.
    Allowed,
    /// A rule of the caller's denies it.
    Denied {
        /// The rule's position in `access`, from 1.
        rule: usize,
    },
    /// No rule of the caller's allows it.
    NotGranted {
        /// What the token lacks for the rule that would allow it with the fewest more scopes
        /// (empty when no scope would do).
        scopes: Vec<String>,
    },
}

impl PartialEq for Patterns {
    fn eq(&self, other: &Self) -> bool {
        self.written == other.written
    }
}

impl Eq for Patterns {}

impl Patterns {
    /// `written`, each a name or a pattern; the first that is not a valid pattern is the error.
    pub fn new(written: Vec<String>) -> Result<Self, String> {
        let mut set = GlobSetBuilder::new();
        for pattern in &written {
            let glob = Glob::new(pattern).map_err(|e| format!("{pattern:?}: {}", e.kind()))?;
            set.add(glob);
        }
        let set = set.build().map_err(|e| e.to_string())?;
        Ok(Self { written, set })
    }

    /// Whether one of the patterns matches all of `name`.
    pub fn matches(&self, name: &str) -> bool {
        !self.written.is_empty() && self.set.is_match(name)
    }

    /// Whether there are no patterns (nothing matches).
    pub fn is_empty(&self) -> bool {
        self.written.is_empty()
    }
}

impl Items {
    fn of(&self, kind: ItemKind) -> &Patterns {
        match kind {
            ItemKind::Tool => &self.tools,
            ItemKind::Prompt => &self.prompts,
            ItemKind::Resource => &self.resources,
        }
    }

    /// Whether it names nothing.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty() && self.prompts.is_empty() && self.resources.is_empty()
    }
}

impl AccessRule {
    /// Whether the rule is for callers with these claims, whatever their scopes.
    fn claims_match(&self, caller: &Caller<'_>) -> bool {
        self.claims.iter().all(|(name, values)| {
            let has = |value: &Value| match value {
                Value::String(text) => values.contains(text),
                Value::Bool(_) | Value::Number(_) => values.contains(&value.to_string()),
                _ => false,
            };
            match caller.claims.get(name) {
                Some(Value::Array(held)) => held.iter().any(has),
                Some(value) => has(value),
                None => false,
            }
        })
    }

    /// The rule's scopes the caller's token does not grant.
    fn missing_scopes(&self, caller: &Caller<'_>) -> Vec<String> {
        let missing = self.scopes.iter().filter(|s| !caller.scopes.contains(s));
        missing.cloned().collect()
    }
}

impl Access {
    /// The rules, in their order in `mcp.json`.
    pub fn new(rules: Vec<AccessRule>) -> Self {
        Self { rules }
    }

    /// The rules, in their order.
    pub fn rules(&self) -> &[AccessRule] {
        &self.rules
    }

    /// Whether `caller` may use the item `name` (a URI for a resource) of kind `kind`.
    pub fn decide(&self, caller: &Caller<'_>, kind: ItemKind, name: &str) -> Decision {
        let mut allowed = false;
        let mut fewest: Option<Vec<String>> = None;
        for (at, rule) in self.rules.iter().enumerate() {
            if !rule.claims_match(caller) {
                continue;
            }
            let missing = rule.missing_scopes(caller);
            let names = |items: &Items| items.of(kind).matches(name);
            if missing.is_empty() {
                if names(&rule.deny) {
                    return Decision::Denied { rule: at + 1 };
                }
                allowed |= names(&rule.allow);
            } else if names(&rule.allow) && fewest.as_ref().is_none_or(|f| missing.len() < f.len())
            {
                fewest = Some(missing);
            }
        }
        match allowed {
            true => Decision::Allowed,
            false => Decision::NotGranted {
                scopes: fewest.unwrap_or_default(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn patterns(written: &[&str]) -> Patterns {
        Patterns::new(written.iter().map(|p| (*p).to_owned()).collect()).expect("patterns")
    }

    fn tools(written: &[&str]) -> Items {
        Items {
            tools: patterns(written),
            ..Items::default()
        }
    }

    fn claims(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    /// Everyone: echo; admins: everything; contractors: never add.
    fn access() -> Access {
        Access::new(vec![
            AccessRule {
                allow: tools(&["echo", "add"]),
                ..AccessRule::default()
            },
            AccessRule {
                scopes: vec!["admin".into()],
                allow: tools(&["*"]),
                ..AccessRule::default()
            },
            AccessRule {
                claims: BTreeMap::from([("groups".into(), vec!["contractors".into()])]),
                deny: tools(&["add"]),
                ..AccessRule::default()
            },
        ])
    }

    #[test]
    fn a_rule_without_scopes_or_claims_is_every_callers() {
        let none = Map::new();
        let caller = Caller {
            scopes: &[],
            claims: &none,
        };
        let access = access();
        assert_eq!(
            access.decide(&caller, ItemKind::Tool, "echo"),
            Decision::Allowed
        );
        assert_eq!(
            access.decide(&caller, ItemKind::Tool, "reset"),
            Decision::NotGranted {
                scopes: vec!["admin".into()]
            }
        );
        assert_eq!(
            access.decide(&caller, ItemKind::Prompt, "echo"),
            Decision::NotGranted { scopes: vec![] },
            "a tool's rule says nothing of a prompt of the same name"
        );
    }

    #[test]
    fn a_scope_opens_its_rule_and_a_claim_in_a_list_matches() {
        let none = Map::new();
        let admin = ["admin".to_owned()];
        let caller = Caller {
            scopes: &admin,
            claims: &none,
        };
        assert_eq!(
            access().decide(&caller, ItemKind::Tool, "reset"),
            Decision::Allowed
        );
        let contractor = claims(json!({"groups": ["staff", "contractors"]}));
        let caller = Caller {
            scopes: &admin,
            claims: &contractor,
        };
        assert_eq!(
            access().decide(&caller, ItemKind::Tool, "add"),
            Decision::Denied { rule: 3 },
            "a deny of the caller's wins over every allow"
        );
    }

    #[test]
    fn no_rules_grant_nothing_and_patterns_match_whole_names() {
        let none = Map::new();
        let caller = Caller {
            scopes: &[],
            claims: &none,
        };
        let shut = Access::new(vec![]);
        assert!(matches!(
            shut.decide(&caller, ItemKind::Tool, "echo"),
            Decision::NotGranted { .. }
        ));
        let p = patterns(&["demo://*", "exact"]);
        assert!(p.matches("demo://a/b") && p.matches("exact"));
        assert!(!p.matches("exactly") && !p.matches("other://demo://"));
        assert!(Patterns::new(vec!["[".into()]).is_err());
    }

    proptest! {
        /// A deny of the caller's always wins; with no rule of theirs naming the item it is
        /// never allowed; adding scopes to a token never takes an allowed item away unless a
        /// deny for those scopes names it.
        #[test]
        fn decisions_follow_the_rules(
            rules in proptest::collection::vec((any::<bool>(), any::<bool>(), 0..3usize, 0..3usize), 0..5),
            item in 0..3usize,
            has_scope in any::<bool>(),
        ) {
            let names = ["a", "b", "*"];
            let built: Vec<AccessRule> = rules.iter().map(|(scoped, deny, allow_at, deny_at)| AccessRule {
                scopes: if *scoped { vec!["s".into()] } else { vec![] },
                allow: tools(&[names[*allow_at]]),
                deny: if *deny { tools(&[names[*deny_at]]) } else { Items::default() },
                ..AccessRule::default()
            }).collect();
            let access = Access::new(built.clone());
            let granted = if has_scope { vec!["s".to_owned()] } else { vec![] };
            let none = Map::new();
            let caller = Caller { scopes: &granted, claims: &none };
            let name = ["a", "b", "c"][item];
            let theirs: Vec<&AccessRule> = built.iter().filter(|r| r.scopes.is_empty() || has_scope).collect();
            let denied = theirs.iter().any(|r| r.deny.tools.matches(name));
            let allowed = theirs.iter().any(|r| r.allow.tools.matches(name));
            let decision = access.decide(&caller, ItemKind::Tool, name);
            prop_assert_eq!(decision == Decision::Allowed, allowed && !denied);
            prop_assert_eq!(matches!(decision, Decision::Denied { .. }), denied);
        }
    }
}
