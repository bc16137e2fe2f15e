//! The catalogue a session lists and routes by: every ready server's tools, prompts, resources
//! and templates, as the config offers them (allow, deny, rename), under the gateway's names.

use std::collections::HashMap;

use actix_mcp::Catalogue;
use serde_json::Value;

use crate::{names::Names, upstream::Upstream};

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
    /// `catalogue`'s lists as the config offers them, under the gateway's names.
    pub fn of(catalogue: &Catalogue, upstream: &Upstream) -> Self {
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
        let tool_names = Names::offered(tools.iter().map(|t| {
            let shown = upstream.tools_of(&t.server).offered_name(&t.item.name);
            (t.server.as_str(), t.item.name.as_str(), shown)
        }));
        let prompt_names = Names::offered(prompts.iter().map(|p| {
            let shown = upstream.prompts_of(&p.server).offered_name(&p.item.name);
            (p.server.as_str(), p.item.name.as_str(), shown)
        }));
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
