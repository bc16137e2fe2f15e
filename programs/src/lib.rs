//! What the workspace's programs (the `actix-mcp` command, the gateway) share: telemetry by the
//! standard OpenTelemetry environment, and the credential store `--credentials` names.

pub mod credentials;
pub mod telemetry;
