//! How results are shown: human-readable text, or JSON with `--json`.

use std::sync::{Arc, Mutex};

use actix_mcp::{
    CallToolResult, Client, CompleteResult, ContentBlock, GetPromptResult, Progress, Prompt,
    ReadResourceResult, Resource, ResourceContents, Tool,
};
use serde::Serialize;
use serde_json::json;

use super::Failure;

pub struct Printer {
    pub json: bool,
}

impl Printer {
    fn print_json(&self, value: &impl Serialize) -> Result<(), Failure> {
        let text = serde_json::to_string_pretty(value).map_err(|e| Failure {
            message: format!("cannot print the result: {e}"),
            code: 1,
        })?;
        println!("{text}");
        Ok(())
    }

    pub fn info(&self, client: &Client) -> Result<(), Failure> {
        if self.json {
            return self.print_json(client.initialize_result());
        }
        let info = client.server_info();
        println!("server:   {} {}", info.name, info.version);
        println!("protocol: {}", client.protocol_version());
        let caps: Vec<&String> = client
            .server_capabilities()
            .as_object()
            .map(|c| c.keys().collect())
            .unwrap_or_default();
        println!(
            "offers:   {}",
            caps.iter()
                .map(|c| c.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        if let Some(instructions) = client.instructions() {
            println!("\n{instructions}");
        }
        Ok(())
    }

    pub fn tools(&self, tools: &[Tool]) -> Result<(), Failure> {
        if self.json {
            return self.print_json(&tools);
        }
        for tool in tools {
            println!(
                "{:<24} {}",
                tool.name,
                tool.description.as_deref().unwrap_or("")
            );
        }
        Ok(())
    }

    pub fn tool_result(&self, result: &CallToolResult) -> Result<(), Failure> {
        if self.json {
            self.print_json(result)?;
        } else {
            for block in &result.content {
                match block {
                    ContentBlock::Text { text, .. } => println!("{text}"),
                    ContentBlock::Image { mime_type, .. } => println!("[image, {mime_type}]"),
                    ContentBlock::Audio { mime_type, .. } => println!("[audio, {mime_type}]"),
                    ContentBlock::ResourceLink { uri, .. } => println!("[link to {uri}]"),
                    ContentBlock::Resource { resource, .. } => {
                        println!("[resource {}]", resource.uri())
                    }
                    ContentBlock::Other(value) => println!("{value}"),
                }
            }
            if result.content.is_empty() {
                if let Some(structured) = &result.structured_content {
                    println!("{structured}");
                }
            }
        }
        if result.is_error {
            return Err(Failure {
                message: "the tool reported an error".into(),
                code: 1,
            });
        }
        Ok(())
    }

    pub fn resources(&self, resources: &[Resource]) -> Result<(), Failure> {
        if self.json {
            return self.print_json(&resources);
        }
        for r in resources {
            println!("{:<32} {}", r.uri, r.name);
        }
        Ok(())
    }

    pub fn read(&self, result: &ReadResourceResult) -> Result<(), Failure> {
        if self.json {
            return self.print_json(result);
        }
        for item in &result.contents {
            match item {
                ResourceContents::Text { text, .. } => println!("{text}"),
                ResourceContents::Blob { uri, .. } => {
                    let bytes = item.bytes().map_err(Failure::from)?;
                    println!("[{} bytes of binary content from {uri}]", bytes.len());
                }
            }
        }
        Ok(())
    }

    pub fn prompts(&self, prompts: &[Prompt]) -> Result<(), Failure> {
        if self.json {
            return self.print_json(&prompts);
        }
        for p in prompts {
            let args: Vec<String> = p
                .arguments
                .iter()
                .map(|a| {
                    if a.required {
                        a.name.clone()
                    } else {
                        format!("[{}]", a.name)
                    }
                })
                .collect();
            println!(
                "{:<24} {:<28} {}",
                p.name,
                args.join(" "),
                p.description.as_deref().unwrap_or("")
            );
        }
        Ok(())
    }

    pub fn prompt(&self, result: &GetPromptResult) -> Result<(), Failure> {
        if self.json {
            return self.print_json(result);
        }
        for m in &result.messages {
            println!(
                "{}: {}",
                m.role,
                m.text()
                    .map(str::to_owned)
                    .unwrap_or_else(|| json!(m.content).to_string())
            );
        }
        Ok(())
    }

    pub fn completion(&self, result: &CompleteResult) -> Result<(), Failure> {
        if self.json {
            return self.print_json(&json!(result.completion));
        }
        for v in &result.completion.values {
            println!("{v}");
        }
        Ok(())
    }
}

/// A progress bar fed by progress notifications; hidden until the first one arrives.
#[derive(Clone)]
pub struct ProgressBar {
    bar: Option<Arc<Mutex<Option<indicatif::ProgressBar>>>>,
}

impl ProgressBar {
    pub fn new(enabled: bool) -> Self {
        Self {
            bar: enabled.then(|| Arc::new(Mutex::new(None))),
        }
    }

    pub fn update(&self, p: &Progress) {
        let Some(slot) = &self.bar else { return };
        let Ok(mut slot) = slot.lock() else { return };
        let bar = slot.get_or_insert_with(|| {
            let bar = match p.total {
                Some(total) => indicatif::ProgressBar::new(total.max(0.0) as u64),
                None => indicatif::ProgressBar::new_spinner(),
            };
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            bar
        });
        if let Some(total) = p.total {
            bar.set_length(total.max(0.0) as u64);
        }
        bar.set_position(p.progress.max(0.0) as u64);
        if let Some(message) = &p.message {
            bar.set_message(message.clone());
        }
    }

    pub fn finish(&self) {
        if let Some(slot) = &self.bar {
            if let Ok(mut slot) = slot.lock() {
                if let Some(bar) = slot.take() {
                    bar.finish_and_clear();
                }
            }
        }
    }
}
