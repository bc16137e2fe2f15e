//! The official schema examples (`tests/data/schema-examples/`, unmodified copies; see its
//! README for the source and commit) read into this crate's types and written back: nothing a
//! conforming server sends is rejected or lost. Covers the types the crate models today, for
//! both revisions.

use std::path::{Path, PathBuf};

use actix_mcp::{
    CallToolResult, ClientCapabilities, CompleteResult, ContentBlock, CreateMessageRequest,
    CreateMessageResult, ElicitRequest, ElicitResult, FormElicitation, GetPromptResult,
    InitializeResult, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListRootsResult, ListToolsResult, ModelPreferences, ReadResourceResult, Resource,
    ResourceContents, Root, SamplingMessage, ServerCapabilities, Tool, UrlElicitation,
};
use serde::{de::DeserializeOwned, Serialize};
use serde_json::Value;

fn examples(revision: &str, kind: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/schema-examples")
        .join(revision)
        .join(kind);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no examples in {}", dir.display());
    files
}

/// Every example of `kind` reads into `T` and writes back as the same JSON value.
fn round_trip<T: DeserializeOwned + Serialize>(kind: &str) -> usize {
    let mut checked = 0;
    for revision in ["2025-11-25", "2026-07-28"] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/schema-examples")
            .join(revision)
            .join(kind);
        if !dir.exists() {
            continue; // a type of one revision only
        }
        for file in examples(revision, kind) {
            let text = std::fs::read_to_string(&file).unwrap();
            let sent: Value = serde_json::from_str(&text).unwrap();
            let typed: T = serde_json::from_value(sent.clone())
                .unwrap_or_else(|e| panic!("{} is refused: {e}", file.display()));
            let written = serde_json::to_value(&typed).unwrap();
            assert_eq!(written, sent, "{} changed in a round trip", file.display());
            checked += 1;
        }
    }
    checked
}

#[test]
fn tools_and_tool_results_round_trip() {
    assert!(round_trip::<Tool>("Tool") > 0);
    assert!(round_trip::<ListToolsResult>("ListToolsResult") > 0);
    assert!(round_trip::<CallToolResult>("CallToolResult") > 0);
}

#[test]
fn content_blocks_round_trip() {
    for kind in [
        "TextContent",
        "ImageContent",
        "AudioContent",
        "ResourceLink",
        "EmbeddedResource",
    ] {
        assert!(round_trip::<ContentBlock>(kind) > 0, "{kind}");
    }
}

#[test]
fn resources_round_trip() {
    assert!(round_trip::<Resource>("Resource") > 0);
    assert!(round_trip::<ResourceContents>("TextResourceContents") > 0);
    assert!(round_trip::<ResourceContents>("BlobResourceContents") > 0);
    assert!(round_trip::<ListResourcesResult>("ListResourcesResult") > 0);
    assert!(round_trip::<ListResourceTemplatesResult>("ListResourceTemplatesResult") > 0);
    assert!(round_trip::<ReadResourceResult>("ReadResourceResult") > 0);
}

#[test]
fn prompts_and_completion_round_trip() {
    assert!(round_trip::<ListPromptsResult>("ListPromptsResult") > 0);
    assert!(round_trip::<GetPromptResult>("GetPromptResult") > 0);
    assert!(round_trip::<CompleteResult>("CompleteResult") > 0);
}

#[test]
fn sampling_elicitation_and_roots_round_trip() {
    assert!(round_trip::<CreateMessageRequest>("CreateMessageRequestParams") > 0);
    assert!(round_trip::<CreateMessageResult>("CreateMessageResult") > 0);
    assert!(round_trip::<SamplingMessage>("SamplingMessage") > 0);
    assert!(round_trip::<ModelPreferences>("ModelPreferences") > 0);
    assert!(round_trip::<FormElicitation>("ElicitRequestFormParams") > 0);
    assert!(round_trip::<UrlElicitation>("ElicitRequestURLParams") > 0);
    assert!(round_trip::<ElicitRequest>("ElicitRequestFormParams") > 0);
    assert!(round_trip::<ElicitRequest>("ElicitRequestURLParams") > 0);
    assert!(round_trip::<ElicitResult>("ElicitResult") > 0);
    assert!(round_trip::<Root>("Root") > 0);
    assert!(round_trip::<ListRootsResult>("ListRootsResult") > 0);
}

/// A URL-mode request is never taken for a form, nor a form for a URL request.
#[test]
fn elicitation_modes_are_told_apart() {
    for file in examples("2025-11-25", "ElicitRequestURLParams") {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(matches!(
            serde_json::from_str::<ElicitRequest>(&text).unwrap(),
            ElicitRequest::Url(_)
        ));
    }
    for file in examples("2025-11-25", "ElicitRequestFormParams") {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(matches!(
            serde_json::from_str::<ElicitRequest>(&text).unwrap(),
            ElicitRequest::Form(_)
        ));
    }
}

#[test]
fn capabilities_and_the_handshake_round_trip() {
    assert!(round_trip::<ServerCapabilities>("ServerCapabilities") > 0);
    assert!(round_trip::<ClientCapabilities>("ClientCapabilities") > 0);
    assert!(round_trip::<InitializeResult>("InitializeResult") > 0);
    let file = examples("2025-11-25", "InitializeResult").remove(0);
    let result: InitializeResult =
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    assert_eq!(
        result.server_info.title.as_deref(),
        Some("Example Server Display Name")
    );
    assert!(result
        .server_info
        .icons
        .as_ref()
        .is_some_and(|i| !i.is_empty()));
    let capabilities = result.typed_capabilities();
    assert_eq!(capabilities.resources.unwrap().subscribe, Some(true));
    assert_eq!(capabilities.tools.unwrap().list_changed, Some(true));
}
