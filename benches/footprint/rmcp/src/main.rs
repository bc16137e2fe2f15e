//! The smallest program with the reach compared: stdio, Streamable HTTP, OAuth.
use rmcp::{
    model::CallToolRequestParams,
    transport::{auth::{AuthClient, AuthorizationManager}, StreamableHttpClientTransport, TokioChildProcess, streamable_http_client::StreamableHttpClientTransportConfig},
    ServiceExt,
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let local = ().serve(TokioChildProcess::new(tokio::process::Command::new("mcp-server"))?).await?;
    let manager = AuthorizationManager::new("https://example.com/mcp").await?;
    let client = AuthClient::new(reqwest::Client::default(), manager);
    let transport = StreamableHttpClientTransport::with_client(client, StreamableHttpClientTransportConfig::with_uri("https://example.com/mcp"));
    let hosted = ().serve(transport).await?;
    for service in [local, hosted] {
        let result = service.call_tool(CallToolRequestParams::new("echo")).await?;
        println!("{result:?}");
    }
    Ok(())
}
