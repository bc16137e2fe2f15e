//! What each server listed (tools, resources, templates, prompts), kept until its
//! `list_changed` or a reconnect, and the catalogue made of every server's lists, each server
//! within the list timeout.

use std::future::IntoFuture;

use super::{catalogue, entry::Entry, Catalogue, Servers, ServersError};
use crate::{
    client::Client,
    error::Error,
    protocol::{
        notifications::ServerNotification,
        prompts::Prompt,
        resources::{Resource, ResourceTemplate},
        tools::Tool,
    },
};

/// What the server listed, kept until its `list_changed` or a reconnect (`None`: not kept).
#[derive(Default, Clone, Debug)]
pub(super) struct Lists {
    pub(super) tools: Option<Vec<Tool>>,
    pub(super) resources: Option<Vec<Resource>>,
    pub(super) resource_templates: Option<Vec<ResourceTemplate>>,
    pub(super) prompts: Option<Vec<Prompt>>,
}

/// Which lists a catalogue needs.
#[derive(Clone, Copy)]
pub(super) struct Kinds {
    tools: bool,
    others: bool,
}

impl Kinds {
    pub(super) const TOOLS: Kinds = Kinds {
        tools: true,
        others: false,
    };
    pub(super) const ALL: Kinds = Kinds {
        tools: true,
        others: true,
    };
}

impl Lists {
    /// Drops what `notification` says changed (resources and their templates go together:
    /// one notification covers both).
    pub(super) fn forget(&mut self, notification: &ServerNotification) {
        match notification {
            ServerNotification::ToolsListChanged => self.tools = None,
            ServerNotification::PromptsListChanged => self.prompts = None,
            ServerNotification::ResourcesListChanged => {
                self.resources = None;
                self.resource_templates = None;
            }
            _ => {}
        }
    }

    /// Keeps what was `fetched` where nothing is kept now: a list another listing kept
    /// meanwhile stays as it is.
    fn keep(&mut self, fetched: &Lists) {
        if self.tools.is_none() && fetched.tools.is_some() {
            self.tools.clone_from(&fetched.tools);
        }
        if self.resources.is_none() && fetched.resources.is_some() {
            self.resources.clone_from(&fetched.resources);
            self.resource_templates
                .clone_from(&fetched.resource_templates);
        }
        if self.prompts.is_none() && fetched.prompts.is_some() {
            self.prompts.clone_from(&fetched.prompts);
        }
    }
}

impl Entry {
    /// Keeps lists fetched from connection `generation`, unless the server reconnected
    /// meanwhile (they describe a server that is gone).
    fn keep_fetched(&mut self, generation: u64, fetched: &Lists) {
        if self.generation == generation {
            self.lists.keep(fetched);
        }
    }
}

/// The catalogue of every server's lists (or why a server has none).
fn assemble(listed: Vec<(String, Result<Lists, ServersError>)>) -> Catalogue {
    let mut catalogue = Catalogue::default();
    let (mut tools, mut resources, mut templates, mut prompts) = (vec![], vec![], vec![], vec![]);
    for (name, lists) in listed {
        match lists {
            Ok(lists) => {
                tools.push((name.clone(), lists.tools.unwrap_or_default()));
                resources.push((name.clone(), lists.resources.unwrap_or_default()));
                templates.push((name.clone(), lists.resource_templates.unwrap_or_default()));
                prompts.push((name, lists.prompts.unwrap_or_default()));
            }
            Err(e) => catalogue.unavailable.push((name, e)),
        }
    }
    catalogue.tools = catalogue::entries(tools, |t| t.name.as_str());
    catalogue.resources = catalogue::entries(resources, |r| r.uri.as_str());
    catalogue.resource_templates = catalogue::entries(templates, |t| t.uri_template.as_str());
    catalogue.prompts = catalogue::entries(prompts, |p| p.name.as_str());
    catalogue
}

/// Fetches `list` into `slot` if it is wanted and not kept; a list the server does not offer
/// is empty, without asking.
async fn fill<T, F>(
    slot: &mut Option<Vec<T>>,
    wanted: bool,
    offered: bool,
    list: impl FnOnce() -> F,
) -> Result<(), Error>
where
    F: IntoFuture<Output = Result<Vec<T>, Error>>,
{
    if wanted && slot.is_none() {
        *slot = Some(if offered { list().await? } else { Vec::new() });
    }
    Ok(())
}

/// `kept`, completed with the lists of `kinds` it lacks, asked of `client` one after another.
async fn fetch_missing(client: &Client, mut lists: Lists, kinds: Kinds) -> Result<Lists, Error> {
    let offers = client.capabilities();
    let (resources, prompts) = (offers.resources.is_some(), offers.prompts.is_some());
    fill(
        &mut lists.tools,
        kinds.tools,
        offers.tools.is_some(),
        || client.tools(),
    )
    .await?;
    fill(&mut lists.resources, kinds.others, resources, || {
        client.resources()
    })
    .await?;
    fill(
        &mut lists.resource_templates,
        kinds.others,
        resources,
        || client.resource_templates(),
    )
    .await?;
    fill(&mut lists.prompts, kinds.others, prompts, || {
        client.prompts()
    })
    .await?;
    Ok(lists)
}

impl Servers {
    /// Every server's tools, listed concurrently: `(server, its tools or why not)`, by name.
    pub async fn tools(&self) -> Vec<(String, Result<Vec<Tool>, ServersError>)> {
        let names = self.names();
        let lists = names.into_iter().map(|name| async move {
            let tools = self
                .lists_of(&name, Kinds::TOOLS)
                .await
                .map(|l| l.tools.unwrap_or_default());
            (name, tools)
        });
        futures::future::join_all(lists).await
    }

    /// Every enabled server's tools, resources, resource templates and prompts, listed
    /// concurrently (servers not yet started are started); see [`Catalogue`].
    pub async fn catalogue(&self) -> Catalogue {
        self.catalogue_of(Kinds::ALL).await
    }

    pub(super) async fn catalogue_of(&self, kinds: Kinds) -> Catalogue {
        let names = self.listed_names();
        let listed = futures::future::join_all(names.into_iter().map(|name| async move {
            let lists = self.lists_of(&name, kinds).await;
            (name, lists)
        }))
        .await;
        assemble(listed)
    }

    /// One server's lists of `kinds`: kept ones, else fetched (what the server does not offer
    /// is empty), all within the list timeout from the server's start slot (waiting for a
    /// slot behind other servers is not this one's slowness).
    async fn lists_of(&self, name: &str, kinds: Kinds) -> Result<Lists, ServersError> {
        let limit = self.inner.config.list_timeout;
        let connection = self.connection(name)?;
        if let Err(start) = &connection {
            start.slot_taken().await;
        }
        let work = async {
            let client = match connection {
                Ok(client) => client,
                Err(start) => start.done().await.map_err(|e| self.start_error(name, e))?,
            };
            let (kept, generation) = {
                let entries = self.entries();
                let entry = entries
                    .get(name)
                    .ok_or_else(|| ServersError::UnknownServer(name.to_owned()))?;
                (entry.lists.clone(), entry.generation)
            };
            let lists = fetch_missing(&client, kept, kinds).await?;
            if let Some(entry) = self.entries().get_mut(name) {
                entry.keep_fetched(generation, &lists);
            }
            Ok(lists)
        };
        match tokio::time::timeout(limit, work).await {
            Ok(outcome) => outcome,
            Err(_) => Err(Error::Timeout { after: limit }.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::servers::supervision::RestartPolicy;

    fn tool(name: &str) -> Tool {
        serde_json::from_value(serde_json::json!({"name": name, "inputSchema": {}}))
            .expect("a tool")
    }

    fn resource(uri: &str) -> Resource {
        serde_json::from_value(serde_json::json!({"uri": uri, "name": uri})).expect("a resource")
    }

    fn everything() -> Lists {
        Lists {
            tools: Some(vec![tool("echo")]),
            resources: Some(vec![resource("file:///a")]),
            resource_templates: Some(Vec::new()),
            prompts: Some(Vec::new()),
        }
    }

    fn names(tools: &Option<Vec<Tool>>) -> Vec<String> {
        tools
            .iter()
            .flatten()
            .map(|tool| tool.name.clone())
            .collect()
    }

    #[test]
    fn a_list_change_drops_only_what_it_names() {
        let mut lists = everything();
        lists.forget(&ServerNotification::ToolsListChanged);
        assert!(lists.tools.is_none());
        assert!(lists.resources.is_some() && lists.prompts.is_some());

        let mut lists = everything();
        lists.forget(&ServerNotification::ResourcesListChanged);
        assert!(lists.resources.is_none() && lists.resource_templates.is_none());
        assert!(lists.tools.is_some() && lists.prompts.is_some());

        let mut lists = everything();
        lists.forget(&ServerNotification::PromptsListChanged);
        assert!(lists.prompts.is_none());
        assert!(lists.tools.is_some() && lists.resources.is_some());
    }

    #[test]
    fn fetched_lists_fill_only_what_is_not_kept() {
        let mut kept = Lists {
            tools: Some(vec![tool("newer")]),
            ..Lists::default()
        };
        let mut fetched = everything();
        fetched.tools = Some(vec![tool("older")]);
        kept.keep(&fetched);
        assert_eq!(names(&kept.tools), ["newer"]);
        assert!(kept.resources.is_some() && kept.resource_templates.is_some());
        assert!(kept.prompts.is_some());
    }

    #[test]
    fn lists_of_an_older_connection_are_not_kept() {
        let mut entry = Entry::new(
            Arc::new(|| Err(Error::Protocol("no transport".into()))),
            None,
            RestartPolicy::default(),
            true,
        );
        entry.generation = 2;
        entry.keep_fetched(1, &everything());
        assert!(entry.lists.tools.is_none(), "fetched before the reconnect");
        entry.keep_fetched(2, &everything());
        assert_eq!(names(&entry.lists.tools), ["echo"]);
    }

    #[test]
    fn the_catalogue_lists_every_server_and_says_why_one_is_missing() {
        let catalogue = assemble(vec![
            ("a".to_owned(), Ok(everything())),
            ("b".to_owned(), Err(ServersError::Disabled("b".to_owned()))),
            ("c".to_owned(), Ok(everything())),
        ]);
        let qualified: Vec<&str> = catalogue
            .tools
            .iter()
            .map(|t| t.qualified.as_str())
            .collect();
        assert_eq!(qualified, ["a/echo", "c/echo"]);
        assert!(catalogue.tools.iter().all(|t| t.collides));
        assert_eq!(catalogue.resources.len(), 2);
        assert!(matches!(
            catalogue.unavailable.as_slice(),
            [(name, ServersError::Disabled(_))] if name == "b"
        ));
    }

    #[tokio::test]
    async fn a_list_neither_wanted_nor_offered_is_not_asked_for() {
        let mut slot: Option<Vec<Tool>> = None;
        let asked = || async { Err::<Vec<Tool>, _>(Error::Protocol("asked".into())) };
        fill(&mut slot, false, true, asked)
            .await
            .expect("not asked");
        assert!(slot.is_none(), "not wanted");
        fill(&mut slot, true, false, asked)
            .await
            .expect("not asked");
        assert_eq!(slot.as_ref().map(Vec::len), Some(0), "not offered: empty");
        let mut unset: Option<Vec<Tool>> = None;
        assert!(fill(&mut unset, true, true, asked).await.is_err());
    }
}
