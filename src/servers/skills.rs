//! The skills of every server (feature `skills`): those that declare the Skills extension are
//! asked `skills/list`; nothing of any skill is fetched until its [`Skill`] is loaded.

use super::{Servers, ServersError};
use crate::client::skills::{Skill, EXTENSION};

/// Every listed skill with its server, and the servers that could not say.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct SkillCatalogue {
    /// `(server, skill)`, in server order, then the server's.
    pub skills: Vec<(String, Skill)>,
    /// The servers whose skills are missing, and why.
    pub unavailable: Vec<(String, ServersError)>,
}

impl Servers {
    /// The skills of every enabled server that declares the extension (started as needed).
    pub async fn skills(&self) -> SkillCatalogue {
        let names = self.listed_names();
        let lists = futures::future::join_all(names.into_iter().map(|name| async move {
            let listed = async {
                let client = self.client(&name).await?;
                if !client.server_extensions().contains_key(EXTENSION) {
                    return Ok(Vec::new());
                }
                Ok::<_, ServersError>(client.skills().await?)
            };
            let listed = listed.await;
            (name, listed)
        }))
        .await;
        let mut catalogue = SkillCatalogue::default();
        for (name, listed) in lists {
            match listed {
                Ok(skills) => catalogue
                    .skills
                    .extend(skills.into_iter().map(|skill| (name.clone(), skill))),
                Err(e) => catalogue.unavailable.push((name, e)),
            }
        }
        catalogue
    }
}
