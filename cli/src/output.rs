//! How results are shown: human-readable text, or JSON with `--json`.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use actix_mcp::protocol::completion::CompleteResult;
use actix_mcp::visible::{visible, Visible, VisibleLines};
use actix_mcp::{
    CallToolResult, Client, ContentBlock, GetPromptResult, LoggingLevel, Progress, Prompt,
    ReadResourceResult, Resource, ResourceContents, ResourceTemplate, Tool,
};
use serde::Serialize;
use serde_json::json;

use super::Failure;

/// `println!` that ends the program quietly when stdout is closed (`actix-mcp ... | head`), as
/// command-line tools do, instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = writeln!(std::io::stdout().lock(), $($arg)*) {
            stdout_failed(e);
        }
    }};
}

fn stdout_failed(e: std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    eprintln!("actix-mcp: cannot write the output: {e}");
    std::process::exit(1)
}

/// How wide a description may be in a table: the rest is in `--json`.
const SUMMARY_WIDTH: usize = 80;

/// The first line of `text`, at most [`SUMMARY_WIDTH`] characters, made visible; `…` says
/// there is more.
fn summary(text: &str) -> String {
    let mut lines = text.trim().lines();
    let first = visible(lines.next().unwrap_or_default().trim_end());
    let more = lines.next().is_some();
    if first.chars().count() > SUMMARY_WIDTH {
        let cut: String = first.chars().take(SUMMARY_WIDTH - 1).collect();
        format!("{cut}…")
    } else if more {
        format!("{first} …")
    } else {
        first
    }
}

/// `(none)` for an empty list, so that an empty answer is seen as one.
fn none_if_empty<T>(items: &[T]) {
    if items.is_empty() {
        out!("(none)");
    }
}

pub struct Printer {
    pub json: bool,
}

impl Printer {
    fn print_json(&self, value: &impl Serialize) -> Result<(), Failure> {
        let text = serde_json::to_string_pretty(value).map_err(|e| Failure {
            message: format!("cannot print the result: {e}"),
            code: 1,
        })?;
        out!("{text}");
        Ok(())
    }

    pub fn info(&self, client: &Client) -> Result<(), Failure> {
        if self.json {
            return self.print_json(client.initialize_result());
        }
        let info = client.server_info();
        out!(
            "server:   {} {}",
            Visible(&info.name),
            Visible(&info.version)
        );
        out!("protocol: {}", client.protocol_version());
        // What the server declared, by name (the known ones and any others it sent).
        let declared = serde_json::to_value(client.capabilities()).unwrap_or_default();
        let caps: Vec<&str> = declared
            .as_object()
            .map(|c| c.keys().map(String::as_str).collect())
            .unwrap_or_default();
        out!("offers:   {}", Visible(&caps.join(", ")));
        if let Some(instructions) = client.instructions() {
            out!("\n{}", VisibleLines(instructions));
        }
        Ok(())
    }

    /// `call --detach`: the task's id.
    pub fn task_started(&self, id: &str) -> Result<(), Failure> {
        if self.json {
            return self.print_json(&json!({ "taskId": id }));
        }
        out!("{}", Visible(id));
        Ok(())
    }

    /// A task's state.
    pub fn task(&self, task: &actix_mcp::Task) -> Result<(), Failure> {
        if self.json {
            return self.print_json(task);
        }
        out!(
            "{} {}{}",
            Visible(&task.task_id),
            task.status.as_str(),
            task.status_message
                .as_deref()
                .map(|m| format!(": {}", Visible(m)))
                .unwrap_or_default()
        );
        Ok(())
    }

    /// `servers`: one line per server, or the rows as JSON.
    pub fn servers(&self, rows: &[serde_json::Value]) -> Result<(), Failure> {
        if self.json {
            return self.print_json(&rows);
        }
        for row in rows {
            let detail = match (row.get("error"), row.get("server")) {
                (Some(error), _) => error.as_str().unwrap_or_default().to_owned(),
                (None, Some(server)) => format!(
                    "{} {} ({})",
                    server["name"].as_str().unwrap_or_default(),
                    server["version"].as_str().unwrap_or_default(),
                    row["protocol"].as_str().unwrap_or_default()
                ),
                (None, None) => String::new(),
            };
            out!(
                "{:<20} {:<6} {:<12} {}",
                row["name"].as_str().unwrap_or_default(),
                row["transport"].as_str().unwrap_or_default(),
                row["status"].as_str().unwrap_or_default(),
                Visible(&detail)
            );
        }
        none_if_empty(rows);
        Ok(())
    }

    /// `tools --all`: each tool as `server/tool`, once per server.
    pub fn catalogue_tools(
        &self,
        tools: &[actix_mcp::servers::Listed<Tool>],
    ) -> Result<(), Failure> {
        if self.json {
            return self.print_json(&tools);
        }
        for tool in tools {
            let name = visible(&tool.qualified);
            out!("{name:<32} {}", tool_summary(&tool.item));
        }
        none_if_empty(tools);
        Ok(())
    }

    pub fn tools(&self, tools: &[Tool]) -> Result<(), Failure> {
        if self.json {
            return self.print_json(&tools);
        }
        for tool in tools {
            let name = visible(&tool.name);
            out!("{name:<24} {}", tool_summary(tool));
        }
        none_if_empty(tools);
        Ok(())
    }

    pub fn tool_result(&self, result: &CallToolResult) -> Result<(), Failure> {
        if self.json {
            self.print_json(result)?;
        } else {
            for block in &result.content {
                match block {
                    ContentBlock::Text(block) => out!("{}", VisibleLines(&block.text)),
                    ContentBlock::Image(media) => out!("[image, {}]", Visible(&media.mime_type)),
                    ContentBlock::Audio(media) => out!("[audio, {}]", Visible(&media.mime_type)),
                    ContentBlock::ResourceLink(link) => out!("[link to {}]", Visible(&link.uri)),
                    ContentBlock::Resource(embedded) => {
                        out!("[resource {}]", Visible(embedded.resource.uri()))
                    }
                    ContentBlock::ToolUse(used) => out!("[tool use {}]", Visible(&used.name)),
                    ContentBlock::ToolResult(answer) => {
                        out!("[tool result for {}]", Visible(&answer.tool_use_id))
                    }
                    // JSON text: its strings' controls are escaped by the serializer.
                    ContentBlock::Other(value) => out!("{value}"),
                    _ => out!("[content of a kind this program does not show]"),
                }
            }
            if result.content.is_empty() {
                if let Some(structured) = &result.structured_content {
                    out!("{structured}");
                }
            }
        }
        if result.failed() {
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
            out!("{:<32} {}", visible(&r.uri), summary(&r.name));
        }
        none_if_empty(resources);
        Ok(())
    }

    pub fn skills(&self, skills: &[actix_mcp::client::skills::Skill]) -> Result<(), Failure> {
        let entries: Vec<_> = skills.iter().map(|s| s.entry()).collect();
        if self.json {
            return self.print_json(&entries);
        }
        for entry in &entries {
            let text = |key| entry.frontmatter.get(key).and_then(|v| v.as_str());
            let name = text("name").unwrap_or("(no name)");
            let description = text("description").unwrap_or_default();
            out!("{:<24} {}", visible(name), Visible(description));
        }
        none_if_empty(&entries);
        Ok(())
    }

    /// Every server's skills: a JSON list of each entry with its `server`, or a line each.
    pub fn catalogue_skills(
        &self,
        skills: &[(String, actix_mcp::client::skills::Skill)],
    ) -> Result<(), Failure> {
        if self.json {
            let entries: Vec<_> = skills
                .iter()
                .map(|(server, skill)| {
                    let mut entry = serde_json::to_value(skill.entry()).unwrap_or_default();
                    if let Some(fields) = entry.as_object_mut() {
                        fields.insert("server".into(), server.clone().into());
                    }
                    entry
                })
                .collect();
            return self.print_json(&entries);
        }
        for (server, skill) in skills {
            let description = skill.entry().frontmatter.get("description");
            let description = description.and_then(|v| v.as_str()).unwrap_or_default();
            let name = skill.name().unwrap_or("(no name)");
            out!(
                "{:<16} {:<24} {}",
                visible(server),
                visible(name),
                Visible(description)
            );
        }
        none_if_empty(skills);
        Ok(())
    }

    /// A skill's file, verified.
    pub fn skill_file(&self, text: &str) -> Result<(), Failure> {
        if self.json {
            return self.print_json(&text);
        }
        out!("{}", VisibleLines(text));
        Ok(())
    }

    pub fn resource_templates(&self, templates: &[ResourceTemplate]) -> Result<(), Failure> {
        if self.json {
            return self.print_json(&templates);
        }
        for t in templates {
            out!("{:<32} {}", visible(&t.uri_template), summary(&t.name));
        }
        none_if_empty(templates);
        Ok(())
    }

    /// The answer to `ping`, after `round_trip`.
    pub fn pong(&self, round_trip: Duration) -> Result<(), Failure> {
        // Milliseconds, to the microsecond.
        let ms = (round_trip.as_secs_f64() * 1e6).round() / 1e3;
        if self.json {
            return self.print_json(&json!({ "ok": true, "ms": ms }));
        }
        out!("pong {ms:.3} ms");
        Ok(())
    }

    pub fn level_set(&self, level: LoggingLevel) -> Result<(), Failure> {
        if self.json {
            return self.print_json(&json!({ "ok": true, "level": level }));
        }
        out!("logging level: {}", level.as_str());
        Ok(())
    }

    pub fn read(&self, result: &ReadResourceResult) -> Result<(), Failure> {
        if self.json {
            return self.print_json(result);
        }
        for item in &result.contents {
            match item {
                ResourceContents::Text { text, .. } => out!("{}", VisibleLines(text)),
                ResourceContents::Blob { uri, .. } => {
                    let bytes = item
                        .bytes()
                        .map_err(|e| Failure::from(actix_mcp::Error::from(e)))?;
                    let uri = Visible(uri);
                    out!("[{} bytes of binary content from {uri}]", bytes.len());
                }
                _ => out!("[contents of {}]", Visible(item.uri())),
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
                    if a.is_required() {
                        visible(&a.name)
                    } else {
                        format!("[{}]", Visible(&a.name))
                    }
                })
                .collect();
            out!(
                "{:<24} {:<28} {}",
                visible(&p.name),
                args.join(" "),
                summary(p.description.as_deref().unwrap_or(""))
            );
        }
        none_if_empty(prompts);
        Ok(())
    }

    pub fn prompt(&self, result: &GetPromptResult) -> Result<(), Failure> {
        if self.json {
            return self.print_json(result);
        }
        for m in &result.messages {
            let text = m
                .text()
                .map(str::to_owned)
                .unwrap_or_else(|| json!(m.content).to_string());
            out!("{}: {}", m.role, VisibleLines(&text));
        }
        Ok(())
    }

    pub fn completion(&self, result: &CompleteResult) -> Result<(), Failure> {
        if self.json {
            return self.print_json(&json!(result.completion));
        }
        for v in &result.completion.values {
            out!("{}", Visible(v));
        }
        none_if_empty(&result.completion.values);
        Ok(())
    }
}

/// A tool's table cell: its description's first line, `[app only]` for a tool only an app may
/// call (MCP Apps).
fn tool_summary(tool: &Tool) -> String {
    let description = summary(tool.description.as_deref().unwrap_or(""));
    if tool.app_only() {
        format!("[app only] {description}")
    } else {
        description
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
            bar.set_message(visible(message));
        }
    }

    /// A task's status message as the bar's message (a spinner when there is no bar yet).
    pub fn status(&self, message: &str) {
        let Some(slot) = &self.bar else { return };
        let Ok(mut slot) = slot.lock() else { return };
        let bar = slot.get_or_insert_with(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            bar
        });
        bar.set_message(visible(message));
        bar.tick();
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
