//! A client for the official MCP conformance suite (`@modelcontextprotocol/conformance`).
//!
//! The suite starts a scenario's server, then runs this program with the server's URL as the last
//! argument and the scenario's name in `MCP_CONFORMANCE_SCENARIO`; the program must do what the
//! scenario asks and exit 0. `tests/conformance.rs` (in the root package) runs the suite's client scenarios with it.

use std::{process::ExitCode, time::Duration};

use actix_mcp::{
    auth::{Headless, IdentityAssertion, OAuth, OAuthConfig},
    client::skills,
    Client, ElicitResult, Error, HttpTransport, ProtocolEra,
};
use serde_json::{json, Value};

#[actix::main]
async fn main() -> ExitCode {
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let Some(url) = std::env::args().skip(1).last() else {
        eprintln!("usage: mcp-conformance-client <server-url>");
        return ExitCode::from(2);
    };
    match tokio::time::timeout(Duration::from_secs(25), run(&scenario, &url)).await {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("{scenario}: {e}");
            ExitCode::FAILURE
        }
        Err(_) => {
            eprintln!("{scenario}: timed out");
            ExitCode::FAILURE
        }
    }
}

/// Connects as the scenario's revision and context say, does what the scenario asks, and closes
/// the session. An error fails the scenario at once, without the shutdown.
async fn run(scenario: &str, url: &str) -> Result<(), Error> {
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or_default();
    let client = connect(url, &context).await?;
    act(scenario, &client, &context).await?;
    client.shutdown().await;
    Ok(())
}

/// The client the suite's servers expect: the scenario's era, every form accepted, the Skills
/// extension declared, and authorization (see [`oauth_config`]) when the server asks for it.
async fn connect(url: &str, context: &Value) -> Result<Client, Error> {
    // The suite says which revision the scenario runs at: up to 2025-11-25 the handshake,
    // 2026-07-28 the stateless era.
    let version = std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION").unwrap_or_default();
    let era = if version.as_str() >= "2026" {
        ProtocolEra::Modern
    } else {
        ProtocolEra::Legacy
    };
    let builder = Client::builder()
        .era(era)
        // Accept every form, filled from the schema's defaults (SEP-1034).
        .on_form_elicitation(|_, _| async { Ok(ElicitResult::accept(serde_json::Map::new())) });
    // The suite's authorization servers approve by themselves, so the headless agent reads the
    // code from the redirect.
    let oauth = OAuth::new(
        Headless::new("http://localhost:3000/callback"),
        oauth_config(context)?,
    );
    let builder = builder.extension(skills::EXTENSION, json!({}));
    builder.connect(HttpTransport::new(url).auth(oauth)).await
}

/// The credentials the scenario's context hands over. The client is pre-registered when the
/// context says so, else known by its metadata document URL (CIMD) where supported, else
/// registered; a secret, a private key, a JWT or an identity assertion are used when given.
fn oauth_config(context: &Value) -> Result<OAuthConfig, Error> {
    let cimd = "https://conformance-test.local/client-metadata.json";
    let mut config = OAuthConfig::default().client_metadata_url(parsed(cimd)?);
    if let Some(id) = context["client_id"].as_str() {
        config = config.client_id(id);
    }
    if let Some(secret) = context["client_secret"].as_str() {
        config = config.client_secret(secret);
    }
    if let Some(pem) = context["private_key_pem"].as_str() {
        config = config.private_key_jwt(pem);
    }
    if let Some(jwt) = context["valid_jwt"].as_str() {
        config = config.jwt_bearer(jwt);
    }
    if let (Some(endpoint), Some(id_token)) = (
        context["idp_token_endpoint"].as_str(),
        context["idp_id_token"].as_str(),
    ) {
        config = config.identity_assertion(IdentityAssertion {
            token_endpoint: parsed(endpoint)?,
            id_token: id_token.to_owned(),
            client_id: context["idp_client_id"].as_str().map(str::to_owned),
        });
    }
    Ok(config)
}

/// What the scenario asks of a connected client, by the scenario's name.
async fn act(scenario: &str, client: &Client, context: &Value) -> Result<(), Error> {
    match scenario {
        // Skills (SEP-2640): listed, nothing fetched ahead of need.
        "sep-2640-client-no-prefetch" => {
            client.skills().await?;
        }
        _ if scenario.starts_with("sep-2640-client-") => load_skills(scenario, client).await?,
        "tools_call" => {
            client.tools().await?;
            client
                .call_tool("add_numbers", json!({"a": 2, "b": 3}))
                .await?;
        }
        "json-schema-2020-12-preservation" => {
            let tools = client.tools().await?;
            let echo = "json_schema_echo";
            if let Some(tool) = tools.iter().find(|t| t.name != echo) {
                client
                    .call_tool(echo, json!({"schema": tool.input_schema}))
                    .await?;
            }
        }
        _ => call_tools(scenario, client, context).await?,
    }
    Ok(())
}

/// Skills (SEP-2640): each skill loaded (its SKILL.md verified and its frontmatter compared),
/// and only a verified one's other files read (each verified too). A refusal is reported, not
/// fatal: refusing a tampered skill or file is what the scenario checks.
async fn load_skills(scenario: &str, client: &Client) -> Result<(), Error> {
    for skill in client.skills().await? {
        if let Err(e) = skill.load().await {
            eprintln!("{scenario}: skill refused: {e}");
            continue;
        }
        let files = skill.entry().resources.iter();
        for file in files.filter(|f| f.uri != skill.entry().uri) {
            if let Err(e) = skill.read(&file.uri).await {
                eprintln!("{scenario}: file refused: {e}");
            }
        }
    }
    Ok(())
}

/// The calls the scenario's context names, with their arguments; otherwise every tool (each
/// scenario's server acts when its tool is called). A tool the server cannot call is its
/// business; the scenario's checks say what mattered.
async fn call_tools(scenario: &str, client: &Client, context: &Value) -> Result<(), Error> {
    let tools = client.tools().await?;
    if let Some(calls) = context["toolCalls"].as_array() {
        for call in calls {
            let name = call["name"].as_str().unwrap_or_default();
            if let Err(e) = client.call_tool(name, call["arguments"].clone()).await {
                eprintln!("{scenario}: {name}: {e}");
            }
        }
        return Ok(());
    }
    for tool in tools {
        if let Err(e) = client.call_tool(&tool.name, json!({})).await {
            eprintln!("{scenario}: {}: {e}", tool.name);
        }
    }
    Ok(())
}

/// A URL the suite hands over.
fn parsed(url: &str) -> Result<url::Url, Error> {
    url::Url::parse(url).map_err(|e| Error::Misuse(format!("{url:?}: {e}")))
}
