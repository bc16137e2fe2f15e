//! Typed use of actix-mcp against the bundled demo server (a real child process): typed
//! handlers answer the server's own requests (sampling, form elicitation, roots), tool
//! arguments go in as a Rust struct, structured results come back as one, and a result that
//! breaks its tool's `outputSchema` is refused with a typed error.
//!
//! ```text
//! cargo run --example typed
//! ```

#[path = "../tests/support/workspace_bins.rs"]
mod workspace_bins;

use actix_mcp::{
    CallToolResult, Client, CreateMessageResult, ElicitResult, Error, Root, StdioTransport,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The `add` tool's arguments.
#[derive(Serialize)]
struct AddArgs {
    a: f64,
    b: f64,
}

/// What `add` returns as structured content (its `outputSchema` says so).
#[derive(Debug, Deserialize)]
struct Sum {
    sum: f64,
}

#[actix::main]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("typed example failed: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let server = workspace_bins::try_program(
        &[workspace_bins::DEMO_SERVER],
        workspace_bins::DEMO_SERVER,
        false,
    )?;
    let client = Client::builder()
        // `sampling/createMessage`: typed request in, typed result out (a real application
        // would ask its model here).
        .on_sampling(|request, _cancel| async move {
            let prompt = request
                .messages
                .last()
                .map(|m| m.content.text())
                .unwrap_or_default();
            Ok(CreateMessageResult::text(
                "example-model",
                format!("an answer to {prompt:?}"),
            ))
        })
        // `elicitation/create` in form mode: the requested schema is typed; answer with content.
        .on_form_elicitation(|form, _cancel| async move {
            println!("the server asks: {}", form.message);
            let mut content = serde_json::Map::new();
            content.insert("name".into(), json!("Ada"));
            Ok(ElicitResult::accept(content))
        })
        // `roots/list`.
        .on_roots(|_cancel| async { Ok(vec![Root::new("file:///srv/project", Some("project"))]) })
        .connect(StdioTransport::new(server))
        .await?;
    println!(
        "connected to {} (protocol {}); it offers tools: {}",
        client.server_info().name,
        client.protocol_version(),
        client.capabilities().tools.is_some()
    );

    // Listing the tools compiles their output schemas once.
    let tools = client.tools().await?;
    let add = tools
        .iter()
        .find(|t| t.name == "add")
        .ok_or("no add tool")?;
    println!(
        "add declares an outputSchema: {}",
        add.output_schema.is_some()
    );

    // Typed arguments in, typed structured result out.
    let result: CallToolResult = client
        .call_tool_with("add", &AddArgs { a: 2.0, b: 3.5 })
        .await?;
    let sum: Sum = result.structured()?;
    println!("add(2, 3.5) = {}", sum.sum);

    // A result that breaks the tool's outputSchema is a typed error naming the rule broken.
    match client
        .call_tool_with("add-wrong", &AddArgs { a: 1.0, b: 1.0 })
        .await
    {
        Err(Error::InvalidOutput {
            tool,
            path,
            problem,
        }) => println!("{tool} refused: at {path:?}, {problem}"),
        other => return Err(format!("add-wrong was not refused: {other:?}").into()),
    }

    // The server's requests, answered by the typed handlers above.
    for (method, params) in [
        (
            "sampling/createMessage",
            json!({"maxTokens": 50, "messages": [
                {"role": "user", "content": {"type": "text", "text": "what is MCP?"}}]}),
        ),
        (
            "elicitation/create",
            json!({"mode": "form", "message": "your name?", "requestedSchema":
                {"type": "object", "properties": {"name": {"type": "string"}}}}),
        ),
        ("roots/list", json!({})),
    ] {
        let answer = client
            .call_tool("ask_client", json!({"method": method, "params": params}))
            .await?;
        let response = answer
            .structured_content
            .map(|s| s["response"]["result"].clone())
            .unwrap_or_default();
        println!("{method} answered: {response}");
    }
    client.close().await;
    Ok(())
}
