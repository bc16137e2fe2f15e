//! One catalogue of every server's tools, resources, templates and prompts, and the names a
//! routed call takes.
//!
//! **Naming scheme:** every item has a qualified name `server/name` (`/` never occurs in a
//! tool name the spec allows). An item's bare name is enough while only one server offers it;
//! when several do, the bare name is ambiguous ([`ServersError::AmbiguousTool`] for a call) and each
//! stays callable by its qualified name. A qualified name is split at the first `/` whose
//! prefix is a configured server, so a server name may contain `/` too.

use serde::Serialize;

use super::ServersError;
use crate::protocol::{
    prompts::Prompt,
    resources::{Resource, ResourceTemplate},
    tools::Tool,
};

/// The separator of qualified names.
pub const SEPARATOR: char = '/';

/// One item of the catalogue, with the server that offers it.
#[derive(Debug, Clone, Serialize)]
pub struct Listed<T> {
    /// The server's name.
    pub server: String,
    /// `server/name`: always routes to this server.
    pub qualified: String,
    /// Whether another server offers an item of the same name (then only `qualified` routes).
    pub collides: bool,
    /// The item, as the server listed it.
    #[serde(flatten)]
    pub item: T,
}

/// Every server's lists. A server that could not be listed (not ready, failed, too slow) is in
/// `unavailable` with its error; the others are listed all the same.
#[derive(Debug, Clone, Default)]
pub struct Catalogue {
    /// Every tool, once per server offering it, in server order then the server's order.
    pub tools: Vec<Listed<Tool>>,
    /// Every resource, once per server.
    pub resources: Vec<Listed<Resource>>,
    /// Every resource template, once per server.
    pub resource_templates: Vec<Listed<ResourceTemplate>>,
    /// Every prompt, once per server.
    pub prompts: Vec<Listed<Prompt>>,
    /// The servers whose lists are missing, and why.
    pub unavailable: Vec<(String, ServersError)>,
}

/// Builds the entries of one kind from each server's list, marking names several servers share.
pub(crate) fn entries<T>(
    lists: Vec<(String, Vec<T>)>,
    name: impl Fn(&T) -> &str,
) -> Vec<Listed<T>> {
    let mut counts: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (_, items) in &lists {
        for item in items {
            *counts.entry(name(item).to_owned()).or_default() += 1;
        }
    }
    let mut out = Vec::new();
    for (server, items) in lists {
        for item in items {
            let bare = name(&item);
            out.push(Listed {
                qualified: qualify(&server, bare),
                collides: counts.get(bare).copied().unwrap_or(0) > 1,
                server: server.clone(),
                item,
            });
        }
    }
    out
}

/// `server/name`.
pub fn qualify(server: &str, name: &str) -> String {
    format!("{server}{SEPARATOR}{name}")
}

/// Splits a qualified name whose server is one of `servers` (the longest match wins); `None`
/// for a bare name.
pub fn split_qualified<'a, 'n>(
    name: &'n str,
    servers: impl IntoIterator<Item = &'a str>,
) -> Option<(&'n str, &'n str)> {
    servers
        .into_iter()
        .filter(|server| {
            name.len() > server.len() + 1
                && name.starts_with(server)
                && name[server.len()..].starts_with(SEPARATOR)
        })
        .max_by_key(|server| server.len())
        .map(|server| (&name[..server.len()], &name[server.len() + 1..]))
}

/// Which server a tool name routes to, given the catalogue's tools: a qualified name to its
/// server; a bare name to the one server offering it.
pub(crate) fn route<'c>(
    name: &str,
    servers: &[String],
    tools: &'c [Listed<Tool>],
) -> Result<(String, String), ServersError> {
    if let Some((server, tool)) = split_qualified(name, servers.iter().map(String::as_str)) {
        return Ok((server.to_owned(), tool.to_owned()));
    }
    let offering: Vec<&'c Listed<Tool>> = tools.iter().filter(|t| t.item.name == name).collect();
    match offering.as_slice() {
        [] => Err(ServersError::UnknownTool(name.to_owned())),
        [one] => Ok((one.server.clone(), name.to_owned())),
        many => Err(ServersError::AmbiguousTool {
            name: name.to_owned(),
            candidates: many.iter().map(|t| t.qualified.clone()).collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str) -> Tool {
        serde_json::from_value(serde_json::json!({"name": name, "inputSchema": {}})).unwrap()
    }

    #[test]
    fn colliding_names_stay_callable_by_qualified_name() {
        let lists = vec![
            ("a".to_owned(), vec![tool("echo"), tool("add")]),
            ("b".to_owned(), vec![tool("echo"), tool("search.web")]),
        ];
        let tools = entries(lists, |t| t.name.as_str());
        let servers = vec!["a".to_owned(), "b".to_owned()];
        assert_eq!(
            route("add", &servers, &tools).unwrap(),
            ("a".into(), "add".into())
        );
        assert_eq!(
            route("search.web", &servers, &tools).unwrap(),
            ("b".into(), "search.web".into())
        );
        assert!(matches!(
            route("echo", &servers, &tools),
            Err(ServersError::AmbiguousTool { candidates, .. }) if candidates == ["a/echo", "b/echo"]
        ));
        assert_eq!(
            route("b/echo", &servers, &tools).unwrap(),
            ("b".into(), "echo".into())
        );
        assert!(matches!(
            route("nope", &servers, &tools),
            Err(ServersError::UnknownTool(_))
        ));
        assert!(tools.iter().filter(|t| t.collides).count() == 2);
    }

    #[test]
    fn the_longest_server_prefix_wins() {
        let servers = ["team", "team/search"];
        assert_eq!(
            split_qualified("team/search/q", servers),
            Some(("team/search", "q"))
        );
        assert_eq!(split_qualified("team/x", servers), Some(("team", "x")));
        assert_eq!(split_qualified("team/", servers), None);
        assert_eq!(split_qualified("other/x", servers), None);
    }
}
