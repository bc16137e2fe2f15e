//! The catalogue a session lists and routes by: every ready server's tools, prompts, resources
//! and templates, as the config offers them (allow, deny, rename), under the gateway's names.

use std::collections::HashMap;

use actix_mcp::Catalogue;
use serde_json::Value;

use actix_mcp::config::Exposure;

use crate::names::{Names, Naming};

/// What the config lets each server offer, and how names are made: what routes are made with.
pub trait Offers {
    fn tools_of(&self, server: &str) -> &Exposure;
    fn prompts_of(&self, server: &str) -> &Exposure;
    fn naming(&self) -> Naming;
}

/// Where each listed name goes: tools and prompts by their gateway names, resources by URI
/// (the first server listing a URI serves it).
#[derive(Default)]
pub struct Routes {
    pub tools: Names,
    pub prompts: Names,
    pub resources: HashMap<String, String>,
    /// Resource templates by `uriTemplate` (the first server listing one serves it).
    pub templates: HashMap<String, String>,
    /// The lists as the downstream client gets them.
    pub lists: Lists,
}

#[derive(Default)]
pub struct Lists {
    pub tools: Vec<Value>,
    pub prompts: Vec<Value>,
    pub resources: Vec<Value>,
    pub templates: Vec<Value>,
}

impl Routes {
    /// The server of resource `uri`: the one listing it, else the one whose template it fits.
    pub fn resource_server(&self, uri: &str) -> Option<&str> {
        if let Some(server) = self.resources.get(uri) {
            return Some(server);
        }
        // The longest template that fits: `file:///logs/{name}` before `file:///{path}`.
        self.templates
            .iter()
            .filter(|(template, _)| fits(template, uri))
            .max_by_key(|(template, _)| template.len())
            .map(|(_, server)| server.as_str())
    }

    /// `catalogue`'s lists as the config offers them, under the gateway's names.
    pub fn of(catalogue: &Catalogue, upstream: &impl Offers) -> Self {
        for (server, why) in &catalogue.unavailable {
            tracing::info!(%server, %why, "left out of the lists");
        }
        // What the config offers of each server's tools and prompts, under the names it gives.
        let tools: Vec<_> = catalogue
            .tools
            .iter()
            .filter(|t| upstream.tools_of(&t.server).offers(&t.item.name))
            .collect();
        let prompts: Vec<_> = catalogue
            .prompts
            .iter()
            .filter(|p| upstream.prompts_of(&p.server).offers(&p.item.name))
            .collect();
        let tool_names = Names::offered(
            tools.iter().map(|t| {
                let shown = upstream.tools_of(&t.server).offered_name(&t.item.name);
                (t.server.as_str(), t.item.name.as_str(), shown)
            }),
            upstream.naming(),
        );
        let prompt_names = Names::offered(
            prompts.iter().map(|p| {
                let shown = upstream.prompts_of(&p.server).offered_name(&p.item.name);
                (p.server.as_str(), p.item.name.as_str(), shown)
            }),
            upstream.naming(),
        );
        let renamed = |names: &Names, server: &str, name: &str, item: Value| {
            let mut item = item;
            item["name"] = Value::String(names.name_of(server, name)?.to_owned());
            Some(item)
        };
        let mut lists = Lists::default();
        for listed in tools {
            let item = serde_json::to_value(&listed.item).unwrap_or_default();
            lists.tools.extend(renamed(
                &tool_names,
                &listed.server,
                &listed.item.name,
                item,
            ));
        }
        for listed in prompts {
            let item = serde_json::to_value(&listed.item).unwrap_or_default();
            lists.prompts.extend(renamed(
                &prompt_names,
                &listed.server,
                &listed.item.name,
                item,
            ));
        }
        let mut resources = HashMap::new();
        for listed in &catalogue.resources {
            if resources.contains_key(&listed.item.uri) {
                continue; // the first server listing a URI serves it
            }
            resources.insert(listed.item.uri.clone(), listed.server.clone());
            lists
                .resources
                .extend(serde_json::to_value(&listed.item).ok());
        }
        let mut templates = HashMap::new();
        for listed in &catalogue.resource_templates {
            let template = listed.item.uri_template.clone();
            if templates.contains_key(&template) {
                continue;
            }
            templates.insert(template, listed.server.clone());
            lists
                .templates
                .extend(serde_json::to_value(&listed.item).ok());
        }
        Self {
            tools: tool_names,
            prompts: prompt_names,
            resources,
            templates,
            lists,
        }
    }
}

/// Whether `uri` can be an expansion of the URI template `template` (RFC 6570): its literal
/// parts in order, each expression standing for at least one character.
fn fits(template: &str, uri: &str) -> bool {
    let mut literals = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        literals.push(&rest[..open]);
        let Some(close) = rest[open..].find('}') else {
            return false;
        };
        rest = &rest[open + close + 1..];
    }
    let last = rest;
    let Some((first, middle)) = literals.split_first() else {
        return template == uri;
    };
    let Some(mut left) = uri.strip_prefix(first) else {
        return false;
    };
    for literal in middle {
        // An expression takes at least one character before the next literal.
        let Some(at) = left.get(1..).and_then(|l| l.find(literal)) else {
            return false;
        };
        left = &left[1 + at + literal.len()..];
    }
    left.len() > last.len() && left.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::fits;

    #[test]
    fn a_uri_fits_a_template_by_its_literal_parts() {
        assert!(fits(
            "test://template/{id}/data",
            "test://template/123/data"
        ));
        assert!(!fits("test://template/{id}/data", "test://template//data"));
        assert!(!fits("test://template/{id}/data", "test://other/123/data"));
        assert!(!fits(
            "test://template/{id}/data",
            "test://template/123/info"
        ));
        assert!(fits("file:///{path}", "file:///a/b.txt"));
        assert!(fits("db://{schema}/{table}", "db://main/users"));
        assert!(!fits("db://{schema}/{table}", "db://main"));
        assert!(fits("plain://x", "plain://x") && !fits("plain://x", "plain://y"));
        assert!(!fits("broken://{x", "broken://1"));
    }
}
