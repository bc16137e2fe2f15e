//! The smallest program with the reach compared: stdio, Streamable HTTP, OAuth.
use actix_mcp::{auth::{Loopback, OAuth, OAuthConfig}, Client, HttpTransport, StdioTransport};

#[actix::main]
async fn main() -> Result<(), actix_mcp::Error> {
    let local = Client::connect(StdioTransport::new("mcp-server")).await?;
    let oauth = OAuth::new(Loopback::new(8976), OAuthConfig::default());
    let hosted = Client::connect(HttpTransport::new("https://example.com/mcp").auth(oauth)).await?;
    for client in [local, hosted] {
        println!("{}", client.call_tool("echo", serde_json::json!({})).await?.text());
    }
    Ok(())
}
