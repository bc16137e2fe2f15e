//! `complete`: the server's suggestions for an argument of a prompt or of a resource template.

use actix_mcp::CompletionReference;

use super::{parse_object, Session};
use crate::{usage, Failure};

/// What is completed: `--prompt NAME` or `--resource TEMPLATE`.
pub fn reference(
    prompt: Option<&str>,
    resource: Option<&str>,
) -> Result<CompletionReference, Failure> {
    match (prompt, resource) {
        (Some(name), _) => Ok(CompletionReference::prompt(name)),
        (None, Some(template)) => Ok(CompletionReference::resource(template)),
        (None, None) => Err(usage("complete needs --prompt or --resource")),
    }
}

/// `complete ARGUMENT [VALUE]`: completions of `argument` from what was typed so far, given
/// the arguments already chosen (`--context`, a JSON object).
pub async fn complete(
    session: &Session<'_>,
    reference: CompletionReference,
    argument: &str,
    value: &str,
    context: Option<&str>,
) -> Result<(), Failure> {
    let context = context.map(|c| parse_object(c, "--context")).transpose()?;
    let result = session
        .client
        .complete(reference, argument, value, context)
        .cancellation(session.interrupt)
        .await?;
    session.out.completion(&result)
}
