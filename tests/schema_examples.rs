//! The official schema examples (`tests/data/schema-examples/`, unmodified copies; see its
//! README for the source and commit) read into this crate's types and written back: nothing a
//! conforming server sends is rejected or lost. Covers the types the crate models today, for
//! both revisions.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a panic is its failure"
)]

use std::path::{Path, PathBuf};

use actix_mcp::protocol::completion::CompleteResult;
use actix_mcp::protocol::elicitation::ElicitRequest;
use actix_mcp::protocol::form_schema::PrimitiveSchema;
use actix_mcp::protocol::notifications::LogMessage;
use actix_mcp::protocol::prompts::ListPromptsResult;
use actix_mcp::protocol::resources::ListResourceTemplatesResult;
use actix_mcp::protocol::resources::ListResourcesResult;
use actix_mcp::protocol::results::CacheScope;
use actix_mcp::protocol::results::ResultType;
use actix_mcp::protocol::roots::ListRootsResult;
use actix_mcp::protocol::sampling::ModelPreferences;
use actix_mcp::protocol::sampling::Role;
use actix_mcp::protocol::sampling::SamplingMessage;
use actix_mcp::protocol::tools::ListToolsResult;
use actix_mcp::LoggingLevel;
use actix_mcp::{
    CallToolResult, ClientCapabilities, ContentBlock, CreateMessageRequest, CreateMessageResult,
    ElicitResult, FormElicitation, GetPromptResult, InitializeResult, ReadResourceResult, Resource,
    ResourceContents, Root, ServerCapabilities, Tool, UrlElicitation,
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
        "ToolUseContent",
        "ToolResultContent",
    ] {
        assert!(round_trip::<ContentBlock>(kind) > 0, "{kind}");
    }
}

/// The first example of `kind` in `revision`, typed.
fn first<T: DeserializeOwned>(revision: &str, kind: &str) -> T {
    let file = examples(revision, kind).remove(0);
    serde_json::from_str(&std::fs::read_to_string(&file).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

#[test]
fn content_annotations_and_tool_blocks_are_typed_not_left_in_extra() {
    let image: ContentBlock = first("2026-07-28", "ImageContent");
    let annotations = image.annotations().expect("the example is annotated");
    assert_eq!(annotations.audience.as_deref(), Some(&[Role::User][..]));
    assert_eq!(
        annotations.priority.as_ref().and_then(|p| p.as_f64()),
        Some(0.9)
    );
    let ContentBlock::Image(media) = &image else {
        panic!("not an image: {image:?}");
    };
    assert!(media.extra.is_empty(), "left in extra: {:?}", media.extra);

    let embedded: ContentBlock = first("2026-07-28", "EmbeddedResource");
    let last_modified = embedded.annotations().and_then(|a| a.last_modified.clone());
    assert_eq!(last_modified.as_deref(), Some("2025-05-03T14:30:00Z"));

    let ContentBlock::ToolUse(used) = first::<ContentBlock>("2025-11-25", "ToolUseContent") else {
        panic!("not a tool_use block");
    };
    assert_eq!(
        (used.id.as_str(), used.name.as_str()),
        ("call_abc123", "get_weather")
    );
    assert_eq!(used.input["city"], "Paris");
    let ContentBlock::ToolResult(answer) = first::<ContentBlock>("2025-11-25", "ToolResultContent")
    else {
        panic!("not a tool_result block");
    };
    assert_eq!(answer.tool_use_id, "call_abc123");
    assert!(answer.content[0]
        .as_text()
        .is_some_and(|t| t.contains("Paris")));
}

#[test]
fn resources_and_prompts_carry_title_icons_annotations_and_cache_hints() {
    let resource: Resource = first("2026-07-28", "Resource");
    assert_eq!(resource.title.as_deref(), Some("Project Documentation"));
    assert_eq!(
        resource
            .annotations
            .as_ref()
            .and_then(|a| a.priority.clone())
            .and_then(|p| p.as_f64()),
        Some(0.8)
    );
    assert!(
        resource.extra.is_empty(),
        "left in extra: {:?}",
        resource.extra
    );

    let page: ListResourcesResult = first("2026-07-28", "ListResourcesResult");
    assert_eq!(page.page.result_type, Some(ResultType::Complete));
    assert_eq!(page.page.ttl_ms, Some(600_000));
    assert_eq!(page.page.cache_scope, Some(CacheScope::Private));
    assert!(page.resources[0]
        .icons
        .as_ref()
        .is_some_and(|i| !i.is_empty()));
    assert!(
        page.page.extra.is_empty(),
        "left in extra: {:?}",
        page.page.extra
    );

    let tools: ListToolsResult = first("2026-07-28", "ListToolsResult");
    assert!(
        tools.page.ttl_ms.is_some() && tools.page.extra.is_empty(),
        "{:?}",
        tools.page.extra
    );
    let prompts: ListPromptsResult = first("2026-07-28", "ListPromptsResult");
    assert!(
        prompts.page.ttl_ms.is_some() && prompts.page.extra.is_empty(),
        "{:?}",
        prompts.page.extra
    );

    let prompt: GetPromptResult = first("2026-07-28", "GetPromptResult");
    assert!(prompt.messages.iter().any(|m| m.role == Role::User));
    assert!(prompt.extra.is_empty(), "left in extra: {:?}", prompt.extra);
}

#[test]
fn form_fields_of_every_shape_are_typed_and_round_trip() {
    let shapes = [
        ("StringSchema", "String"),
        ("NumberSchema", "Number"),
        ("BooleanSchema", "Boolean"),
        ("UntitledSingleSelectEnumSchema", "SingleSelect"),
        ("TitledSingleSelectEnumSchema", "SingleSelect"),
        ("UntitledMultiSelectEnumSchema", "MultiSelect"),
        ("TitledMultiSelectEnumSchema", "MultiSelect"),
    ];
    for (kind, variant) in shapes {
        assert!(round_trip::<PrimitiveSchema>(kind) > 0, "{kind}");
        let typed: PrimitiveSchema = first("2025-11-25", kind);
        let shape = format!("{typed:?}");
        assert!(shape.starts_with(variant), "{kind} read as {shape}");
    }
    let titled: PrimitiveSchema = first("2025-11-25", "TitledSingleSelectEnumSchema");
    assert_eq!(titled.choices()[0], ("#FF0000", "Red"));
    let form: FormElicitation = first("2025-11-25", "ElicitRequestFormParams");
    assert!(form.requested_schema.is_required("name"));
    assert!(form
        .requested_schema
        .properties
        .values()
        .all(|field| !matches!(field, PrimitiveSchema::Other(_))));
}

#[test]
fn log_messages_round_trip_typed() {
    assert!(round_trip::<LogMessage>("LoggingMessageNotificationParams") > 0);
    let log: LogMessage = first("2026-07-28", "LoggingMessageNotificationParams");
    assert_eq!(log.level, LoggingLevel::Error);
    assert_eq!(log.logger.as_deref(), Some("database"));
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
    let capabilities = result.capabilities;
    assert_eq!(capabilities.resources.unwrap().subscribe, Some(true));
    assert_eq!(capabilities.tools.unwrap().list_changed, Some(true));
}
