//! Who may use what (a server's `access` rules): a caller's lists hold only what they may use,
//! and a request for anything else is refused before it reaches upstream, with an error that
//! names what is missing (and, where a scope would grant it, that scope: a `403` scope challenge
//! when the answer's status is still open).

use std::{borrow::Cow, sync::Arc};

use actix_mcp::config::{Decision, ItemKind};
use serde_json::{json, Value};

use super::Session;
use crate::{
    method::{List, Routed},
    owner::Caller,
    replies::{Refusal, FORBIDDEN},
    routes::Routes,
};

impl Session {
    /// The latest request came with `caller`'s token: what it may use is judged by it, and it
    /// is what a `tokenExchange` server's token is exchanged from.
    pub fn called_by(&self, caller: Arc<Caller>) {
        *self.caller.borrow_mut() = caller;
    }

    /// Refused unless the caller may use `name` of `server` (`shown`: as the client names it).
    fn may_use(
        &self,
        server: &str,
        kind: ItemKind,
        name: &str,
        shown: &str,
    ) -> Result<(), Refusal> {
        let caller = self.caller.borrow().clone();
        let what = format!("{} {shown:?}", kind.name());
        match self.upstream.decide(&caller, server, kind, name) {
            Decision::Allowed => Ok(()),
            Decision::Denied { rule } => Err(Refusal(
                FORBIDDEN,
                format!("{what} is denied to you (access rule {rule} of server {server:?})"),
                None,
            )),
            Decision::NotGranted { scopes } if !scopes.is_empty() => {
                let scope = scopes.join(" ");
                Err(Refusal(
                    FORBIDDEN,
                    format!("{what} needs scope {scope:?}, which your token does not grant"),
                    Some(json!({ "scope": scope })),
                ))
            }
            Decision::NotGranted { .. } => Err(Refusal(
                FORBIDDEN,
                format!("{what} is not granted to you by the access rules of server {server:?}"),
                None,
            )),
        }
    }

    /// Refused if `routed` asks for what the caller may not use. What names nothing the routes
    /// know is left to the request itself to refuse.
    pub(super) fn guard(
        &self,
        routed: Routed,
        params: &Value,
        routes: &Routes,
    ) -> Result<(), Refusal> {
        if !self.upstream.guarded {
            return Ok(());
        }
        match what(routed, params) {
            Some((ItemKind::Resource, uri)) => self.guard_uri(routes, uri),
            Some((kind, name)) => self.guard_named(routes, kind, name),
            // Tasks are their user's already, whatever tool they run.
            None => Ok(()),
        }
    }

    /// The server and the item (its own name, or the URI) `routed` names, if the routes know it.
    pub(super) fn target(
        &self,
        routed: Routed,
        params: &Value,
        routes: &Routes,
    ) -> Option<(String, String)> {
        let (kind, named) = what(routed, params)?;
        let (server, item) = match kind {
            ItemKind::Resource => {
                let server = routes
                    .resource_server(named)
                    .or_else(|| routes.templates.get(named).map(String::as_str))?;
                (server, named)
            }
            ItemKind::Prompt => routes.prompts.route(named)?,
            ItemKind::Tool => routes.tools.route(named)?,
        };
        Some((server.to_owned(), item.to_owned()))
    }

    /// A tool or prompt by its gateway name.
    fn guard_named(&self, routes: &Routes, kind: ItemKind, shown: &str) -> Result<(), Refusal> {
        let names = match kind {
            ItemKind::Prompt => &routes.prompts,
            _ => &routes.tools,
        };
        match names.route(shown) {
            Some((server, name)) => self.may_use(server, kind, name, shown),
            None => Ok(()),
        }
    }

    /// A resource (or a template's completion) by URI.
    pub(super) fn guard_uri(&self, routes: &Routes, uri: &str) -> Result<(), Refusal> {
        if !self.upstream.guarded {
            return Ok(());
        }
        let server = routes
            .resource_server(uri)
            .or_else(|| routes.templates.get(uri).map(String::as_str));
        match server {
            Some(server) => self.may_use(server, ItemKind::Resource, uri, uri),
            None => Ok(()),
        }
    }

    /// `list` as this caller may see it: only what they may use.
    pub(super) fn visible<'r>(&self, list: List, routes: &'r Routes) -> Cow<'r, [Value]> {
        let lists = &routes.lists;
        let items = match list {
            List::Tools => &lists.tools,
            List::Prompts => &lists.prompts,
            List::Resources => &lists.resources,
            List::Templates => &lists.templates,
        };
        if !self.upstream.guarded {
            return Cow::Borrowed(items);
        }
        let field = |item: &Value, name: &str| item[name].as_str().unwrap_or_default().to_owned();
        let usable = |item: &&Value| match list {
            List::Tools => self
                .guard_named(routes, ItemKind::Tool, &field(item, "name"))
                .is_ok(),
            List::Prompts => self
                .guard_named(routes, ItemKind::Prompt, &field(item, "name"))
                .is_ok(),
            List::Resources => self.guard_uri(routes, &field(item, "uri")).is_ok(),
            List::Templates => self.guard_uri(routes, &field(item, "uriTemplate")).is_ok(),
        };
        Cow::Owned(items.iter().filter(usable).cloned().collect())
    }
}

/// What `routed` names, as the client named it: a tool or prompt by its gateway name, a
/// resource by URI. `None` for a task's request.
fn what(routed: Routed, params: &Value) -> Option<(ItemKind, &str)> {
    fn name(value: &Value) -> &str {
        value.as_str().unwrap_or_default()
    }
    Some(match routed {
        Routed::CallTool => (ItemKind::Tool, name(&params["name"])),
        Routed::GetPrompt => (ItemKind::Prompt, name(&params["name"])),
        Routed::ReadResource => (ItemKind::Resource, name(&params["uri"])),
        Routed::Complete => match params["ref"]["type"].as_str() {
            Some("ref/prompt") => (ItemKind::Prompt, name(&params["ref"]["name"])),
            _ => (ItemKind::Resource, name(&params["ref"]["uri"])),
        },
        Routed::Task(_) => return None,
    })
}
