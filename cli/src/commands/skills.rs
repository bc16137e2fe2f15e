//! Skills (SEP-2640): `skills` lists them, `skill NAME [FILE]` loads one, verified.

use actix_mcp::client::skills::{Skill, SkillError};
use actix_mcp::visible::Visible;

use super::Session;
use crate::Failure;

/// `skills`: each skill's name and description, nothing of them fetched.
pub async fn list(session: &Session<'_>) -> Result<(), Failure> {
    session.out.skills(&session.client.skills().await?)
}

/// `skill NAME [FILE]`: the skill's SKILL.md, or one of its files.
pub async fn load(session: &Session<'_>, name: &str, file: Option<&str>) -> Result<(), Failure> {
    let skills = session.client.skills().await?;
    let skill = skills
        .iter()
        .find(|skill| skill.name() == Some(name))
        .ok_or_else(|| Failure {
            message: format!("no skill named {}", Visible(name)),
            code: 1,
        })?;
    session.out.skill_file(&skill_text(skill, file).await?)
}

/// `skill`'s text: SKILL.md, or `file` of the skill, verified.
pub async fn skill_text(skill: &Skill, file: Option<&str>) -> Result<String, Failure> {
    Ok(match file {
        None => skill.load().await.map_err(skill_failure)?,
        Some(file) => {
            let bytes = skill.read(file).await.map_err(skill_failure)?;
            String::from_utf8_lossy(&bytes).into_owned()
        }
    })
}

/// A skill refused or unread: the library's error as any other, a verification failure as
/// itself (exit 1).
fn skill_failure(e: SkillError) -> Failure {
    match e {
        SkillError::Client(e) => e.into(),
        refused => Failure {
            message: format!("refused: {refused}"),
            code: 1,
        },
    }
}
