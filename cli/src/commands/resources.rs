//! `resources`, `resource-templates` and `read URI`.

use super::Session;
use crate::Failure;

/// `resources`: the server's resources.
pub async fn list(session: &Session<'_>) -> Result<(), Failure> {
    let resources = session
        .client
        .resources()
        .cancellation(session.interrupt)
        .await?;
    session.out.resources(&resources)
}

/// `resource-templates`: the server's resource templates.
pub async fn templates(session: &Session<'_>) -> Result<(), Failure> {
    let templates = session
        .client
        .resource_templates()
        .cancellation(session.interrupt)
        .await?;
    session.out.resource_templates(&templates)
}

/// `read URI`: one resource's contents.
pub async fn read(session: &Session<'_>, uri: &str) -> Result<(), Failure> {
    let contents = session
        .client
        .read_resource(uri)
        .cancellation(session.interrupt)
        .await?;
    session.out.read(&contents)
}
