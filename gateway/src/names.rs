//! The names the gateway lists: every upstream tool once per server, under a name valid by the
//! spec's naming rules (1 to 128 characters of `A-Z a-z 0-9 _ - .`; many clients accept only
//! `^[a-zA-Z0-9_-]{1,64}$`, so the gateway keeps to that): `{server}__{tool}`, characters
//! outside the set written as `_`, cut to 64, a number added when two would meet; or, with
//! `--names plain`, the tool's own name, qualified only where a server listed earlier took it. A
//! plain type: the route of each name is kept, never parsed back out of it.

use std::collections::{HashMap, HashSet};

/// The longest name made.
pub const MAX_NAME: usize = 64;

/// How the names are made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Naming {
    /// `{server}__{tool}`, always.
    #[default]
    Qualified,
    /// The tool's own name; `{server}__{tool}` where that is taken.
    Plain,
}

/// Names given, and where each one routes.
#[derive(Debug, Default)]
pub struct Names {
    routes: HashMap<String, (String, String)>,
}

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// `text` with every character outside the set written as `_`.
fn clean(text: &str) -> String {
    text.chars()
        .map(|c| if allowed(c) { c } else { '_' })
        .collect()
}

/// `base` cut to leave room for `suffix`, then `suffix` (char boundaries are ASCII here).
fn fitted(base: &str, suffix: &str) -> String {
    let room = MAX_NAME.saturating_sub(suffix.len());
    let mut name: String = base.chars().take(room).collect();
    name.push_str(suffix);
    name
}

/// Whether `name` is one the gateway would give.
#[cfg(test)]
pub fn valid(name: &str) -> bool {
    (1..=MAX_NAME).contains(&name.len()) && name.chars().all(allowed)
}

impl Names {
    /// Names for `tools` (`(server, tool)`, in listing order): the same pair gets the same name
    /// each time the list is made in the same order.
    #[cfg(test)]
    pub fn new<'a>(tools: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let tools = tools.into_iter().map(|(server, tool)| (server, tool, tool));
        Self::offered(tools, Naming::Qualified)
    }

    /// Names for `tools` (`(server, tool, shown)`: `tool` as its server calls it, offered as
    /// `shown` (a rename in the config), in listing order). Each name routes to the server's
    /// own tool name.
    pub fn offered<'a>(
        tools: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
        naming: Naming,
    ) -> Self {
        let mut routes = HashMap::new();
        let mut taken = HashSet::new();
        for (server, tool, shown) in tools {
            let plain = fitted(&clean(shown), "");
            if naming == Naming::Plain && !plain.is_empty() && !taken.contains(&plain) {
                taken.insert(plain.clone());
                routes.insert(plain, (server.to_owned(), tool.to_owned()));
                continue;
            }
            let base = clean(&format!("{server}__{shown}"));
            let mut name = fitted(&base, "");
            let mut n = 1;
            while name.is_empty() || taken.contains(&name) {
                n += 1;
                name = fitted(&base, &format!("_{n}"));
            }
            taken.insert(name.clone());
            routes.insert(name, (server.to_owned(), tool.to_owned()));
        }
        Self { routes }
    }

    /// The server and tool `name` routes to.
    pub fn route(&self, name: &str) -> Option<(&str, &str)> {
        self.routes
            .get(name)
            .map(|(server, tool)| (server.as_str(), tool.as_str()))
    }

    /// The name given to `server`'s `tool`.
    pub fn name_of(&self, server: &str, tool: &str) -> Option<&str> {
        self.routes
            .iter()
            .find(|(_, (s, t))| s == server && t == tool)
            .map(|(name, _)| name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_tool_is_named_after_its_server() {
        let names = Names::new([("weather", "get_forecast"), ("files", "read.file")]);
        assert_eq!(
            names.name_of("weather", "get_forecast"),
            Some("weather__get_forecast")
        );
        assert_eq!(
            names.name_of("files", "read.file"),
            Some("files__read_file")
        );
        assert_eq!(
            names.route("files__read_file"),
            Some(("files", "read.file"))
        );
        assert_eq!(names.route("files__read.file"), None);
    }

    #[test]
    fn a_renamed_tool_is_offered_as_its_new_name_and_routes_to_its_own() {
        let offered = [("demo", "echo", "say"), ("demo", "sleep", "sleep")];
        let names = Names::offered(offered, Naming::Qualified);
        assert_eq!(names.route("demo__say"), Some(("demo", "echo")));
        assert_eq!(names.route("demo__echo"), None);
        assert_eq!(names.name_of("demo", "echo"), Some("demo__say"));
    }

    #[test]
    fn names_that_would_meet_are_told_apart() {
        let names = Names::new([("a b", "x"), ("a_b", "x"), ("a.b", "x")]);
        let given: HashSet<_> = ["a b", "a_b", "a.b"]
            .iter()
            .map(|s| names.name_of(s, "x").unwrap().to_owned())
            .collect();
        assert_eq!(given.len(), 3);
    }

    proptest! {
        /// Whatever the servers and tools are called, every name given is valid, unique, and
        /// routes back to its own server and tool.
        #[test]
        fn every_name_is_valid_unique_and_routes_back(
            tools in proptest::collection::vec(("\\PC{0,40}", "\\PC{0,80}"), 0..40),
        ) {
            let mut pairs: Vec<(String, String)> = tools;
            pairs.sort();
            pairs.dedup();
            let names = Names::new(pairs.iter().map(|(s, t)| (s.as_str(), t.as_str())));
            let mut seen = HashSet::new();
            for (server, tool) in &pairs {
                let name = names.name_of(server, tool).expect("named");
                prop_assert!(valid(name), "{name:?}");
                prop_assert!(seen.insert(name.to_owned()), "{name:?} twice");
                prop_assert_eq!(names.route(name), Some((server.as_str(), tool.as_str())));
            }
        }
    }

    #[test]
    fn plain_names_are_the_tools_own_unless_an_earlier_server_took_one() {
        let offered = [
            ("a", "echo", "echo"),
            ("b", "echo", "echo"),
            ("b", "get.x", "get.x"),
        ];
        let names = Names::offered(offered, Naming::Plain);
        assert_eq!(names.route("echo"), Some(("a", "echo")));
        assert_eq!(names.route("b__echo"), Some(("b", "echo")));
        assert_eq!(names.route("get_x"), Some(("b", "get.x")));
    }
}
