//! `prompts` and `prompt NAME [ARGS]`.

use super::{parse_object, Session};
use crate::Failure;

/// `prompts`: the server's prompts.
pub async fn list(session: &Session<'_>) -> Result<(), Failure> {
    let prompts = session
        .client
        .prompts()
        .cancellation(session.interrupt)
        .await?;
    session.out.prompts(&prompts)
}

/// `prompt NAME [ARGS]`: the prompt with its arguments (a JSON object of strings) filled in.
pub async fn get(session: &Session<'_>, name: &str, args: &str) -> Result<(), Failure> {
    let args = parse_object(args, "arguments")?;
    let prompt = session
        .client
        .get_prompt(name, args)
        .cancellation(session.interrupt)
        .await?;
    session.out.prompt(&prompt)
}
