//! The tool table: each tool declared once, its `tools/list` entry next to its handler, so the
//! list, the name check, the taskSupport checks and the dispatch cannot drift apart. Adding a
//! tool is one entry here plus its handler in `handlers.rs`.

use std::rc::Rc;

use serde_json::{json, Value};

use super::{handlers, ToolCall};
use crate::{
    server::{Server, Step, LOG_LEVELS},
    tasks::TaskSupport,
};

/// Runs one call; `Err` is a bad argument, answered as a tool error.
pub(crate) type Handler = fn(&Rc<Server>, ToolCall<'_>) -> Result<Step, String>;

/// One tool: what `tools/list` says of it, and what `tools/call` does with it.
#[derive(Clone, Copy)]
pub(crate) struct ToolDef {
    pub(crate) name: &'static str,
    description: &'static str,
    /// `inputSchema.properties`; a function because `json!` cannot build a const.
    properties: fn() -> Value,
    /// `inputSchema.required`.
    required: &'static [&'static str],
    /// `outputSchema`, for the tools whose structured content has a declared shape.
    output: Option<fn() -> Value>,
    /// `execution.taskSupport` (absent when forbidden), enforced by `call_tool`.
    pub(crate) tasks: TaskSupport,
    /// False for `client_extensions` alone: it has always answered before the taskSupport
    /// checks, whatever `params.task` says, and clients may rely on that.
    pub(crate) checks_tasks: bool,
    pub(crate) run: Handler,
}

impl ToolDef {
    /// A tool without outputSchema that must not run as a task.
    const fn new(
        name: &'static str,
        description: &'static str,
        properties: fn() -> Value,
        required: &'static [&'static str],
        run: Handler,
    ) -> Self {
        Self {
            name,
            description,
            properties,
            required,
            output: None,
            tasks: TaskSupport::Forbidden,
            checks_tasks: true,
            run,
        }
    }

    const fn output(self, schema: fn() -> Value) -> Self {
        Self {
            output: Some(schema),
            ..self
        }
    }

    const fn tasks(self, tasks: TaskSupport) -> Self {
        Self { tasks, ..self }
    }

    const fn unchecked_tasks(self) -> Self {
        Self {
            checks_tasks: false,
            ..self
        }
    }

    /// This tool's entry in `tools/list`.
    fn listing(&self) -> Value {
        let mut tool = json!({
            "name": self.name,
            "description": self.description,
            "inputSchema": {
                "type": "object",
                "properties": (self.properties)(),
                "required": self.required,
            },
        });
        if let Some(output) = self.output {
            tool["outputSchema"] = output();
        }
        let support = match self.tasks {
            TaskSupport::Forbidden => None,
            TaskSupport::Optional => Some("optional"),
            TaskSupport::Required => Some("required"),
        };
        if let Some(support) = support {
            tool["execution"] = json!({"taskSupport": support});
        }
        tool
    }
}

fn integer(description: &str) -> Value {
    json!({"type": "integer", "minimum": 0, "description": description})
}

fn string(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

fn no_properties() -> Value {
    json!({})
}

/// `add` and `add-wrong`.
fn addends() -> Value {
    json!({
        "a": {"type": "number", "description": "First addend."},
        "b": {"type": "number", "description": "Second addend."},
    })
}

/// What `add` and `add-wrong` declare of their structured content.
fn sum_schema() -> Value {
    json!({"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]})
}

/// `task_sleep` and `task_required`.
fn sleep_plan() -> Value {
    json!({
        "ms": integer("Total duration, in milliseconds."),
        "steps": integer("Number of steps, 1 or more (default 5)."),
    })
}

/// `ask_client` and `ask_client_then_cancel` (which adds `after_ms`).
fn client_request() -> Value {
    json!({
        "method": string("Method of the request."),
        "params": {"type": "object", "description": "Params of the request."},
    })
}

/// Every tool, in `tools/list` order.
pub(crate) const TOOLS: &[ToolDef] = &[
    ToolDef::new(
        "echo",
        "Return the given text unchanged.",
        || json!({"text": string("Text to echo back.")}),
        &["text"],
        handlers::echo,
    ),
    ToolDef::new(
        "add",
        "Add two numbers; the sum is also returned as structured content.",
        addends,
        &["a", "b"],
        handlers::add,
    )
    .output(sum_schema),
    ToolDef::new(
        "add-wrong",
        "Like add, but its structured content breaks its outputSchema (the sum as a string).",
        addends,
        &["a", "b"],
        handlers::add_wrong,
    )
    .output(sum_schema),
    ToolDef::new(
        "sleep",
        "Sleep for `ms` milliseconds, reporting progress every 100 ms when a progress token is given. Cancellable.",
        || json!({"ms": integer("How long to sleep, in milliseconds.")}),
        &["ms"],
        handlers::sleep,
    ),
    ToolDef::new(
        "late",
        "Sleep for `ms` milliseconds and answer even if the request was cancelled.",
        || json!({"ms": integer("How long to sleep, in milliseconds.")}),
        &["ms"],
        handlers::late,
    ),
    ToolDef::new(
        "stats",
        "Return the server's request, response and cancellation counters.",
        no_properties,
        &[],
        handlers::stats,
    ),
    ToolDef::new(
        "pid",
        "Return the server's process id.",
        no_properties,
        &[],
        handlers::pid,
    ),
    ToolDef::new(
        "crash",
        "Flush pending output and exit immediately with the given code, without answering.",
        || json!({"code": {"type": "integer", "description": "Exit code (default 1)."}}),
        &[],
        handlers::crash,
    ),
    ToolDef::new(
        "flood",
        "Send `count` log notifications of `size` bytes each, then answer.",
        || {
            json!({
                "count": integer("Number of notifications."),
                "size": integer("Payload size of each notification, in bytes (default 0)."),
            })
        },
        &["count"],
        handlers::flood,
    ),
    ToolDef::new(
        "big",
        "Answer with a text of exactly `bytes` 'x' characters.",
        || json!({"bytes": integer("Length of the text.")}),
        &["bytes"],
        handlers::big,
    ),
    ToolDef::new(
        "client_extensions",
        "Answer with the extensions the client declared in its capabilities, as JSON.",
        no_properties,
        &[],
        handlers::client_extensions,
    )
    .unchecked_tasks(),
    ToolDef::new(
        "garbage",
        "Write invalid and unsolicited lines to stdout, then answer.",
        no_properties,
        &[],
        handlers::garbage,
    ),
    ToolDef::new(
        "stderr",
        "Write `text` to stderr `lines` times.",
        || {
            json!({
                "text": string("Line to write."),
                "lines": integer("How many times (default 1)."),
            })
        },
        &["text"],
        handlers::stderr,
    ),
    ToolDef::new(
        "ping_client",
        "Send a ping request to the client and return its response.",
        no_properties,
        &[],
        handlers::ping_client,
    ),
    ToolDef::new(
        "ask_client",
        "Send an arbitrary request to the client and return its response.",
        client_request,
        &["method"],
        handlers::ask_client,
    ),
    ToolDef::new(
        "cancel_foreign",
        "Send the client a notifications/cancelled naming `request_id`.",
        || json!({"request_id": {"type": ["integer", "string"], "description": "Request id to name."}}),
        &["request_id"],
        handlers::cancel_foreign,
    ),
    ToolDef::new(
        "pause_reading",
        "Answer at once, then stop reading stdin for `ms` milliseconds.",
        || json!({"ms": integer("Pause length, in milliseconds.")}),
        &["ms"],
        handlers::pause_reading,
    ),
    ToolDef::new(
        "env",
        "Return the value of an environment variable (empty if unset).",
        || json!({"name": string("Variable name.")}),
        &["name"],
        handlers::env,
    ),
    ToolDef::new(
        "cwd",
        "Return the server's current directory.",
        no_properties,
        &[],
        handlers::cwd,
    ),
    ToolDef::new(
        "log",
        "Send a notifications/message at `level` unless logging/setLevel filters it out; answers `logged` or `filtered`.",
        || {
            json!({
                "level": {"type": "string", "enum": LOG_LEVELS, "description": "RFC 5424 severity."},
                "message": string("Message (the notification's `data`)."),
            })
        },
        &["level", "message"],
        handlers::log,
    ),
    ToolDef::new(
        "notify",
        "Send notifications/<kind>/list_changed (kind tools, prompts or resources), or notifications/resources/updated for a subscribed `uri` (kind updated), then answer.",
        || {
            json!({
                "kind": {
                    "type": "string",
                    "enum": ["tools", "prompts", "resources", "updated"],
                    "description": "Which notification to send.",
                },
                "uri": string("Resource uri, for kind `updated`."),
            })
        },
        &["kind"],
        handlers::notify,
    ),
    ToolDef::new(
        "progress",
        "Send `steps` progress notifications, one every `interval_ms` milliseconds, when a progress token is given, then answer. Cancellable.",
        || {
            json!({
                "steps": integer("Number of progress notifications."),
                "interval_ms": integer("Delay before each notification, in milliseconds."),
                "total": {"type": "boolean", "description": "Include `total` in the notifications (default true)."},
            })
        },
        &["steps", "interval_ms"],
        handlers::progress,
    ),
    ToolDef::new(
        "ask_client_then_cancel",
        "Send a request to the client, cancel it after `after_ms` milliseconds unless answered, wait 500 ms more, and return the response (or null).",
        || {
            let mut properties = client_request();
            properties["after_ms"] = integer("Delay before the cancel, in milliseconds.");
            properties
        },
        &["method", "after_ms"],
        handlers::ask_client_then_cancel,
    ),
    ToolDef::new(
        "sample",
        "Send the client a sampling/createMessage request and return its response.",
        no_properties,
        &[],
        handlers::sample,
    ),
    ToolDef::new(
        "task_sleep",
        "Sleep for `ms` milliseconds in `steps` steps; with `params.task` it runs as a task (taskSupport optional) whose statusMessage goes `step i/N`. Answers `slept {ms} ms in {steps} steps`.",
        sleep_plan,
        &["ms"],
        handlers::task_sleep,
    )
    .tasks(TaskSupport::Optional),
    ToolDef::new(
        "task_required",
        "Like task_sleep, but only as a task (taskSupport required): a call without `params.task` fails with -32601.",
        sleep_plan,
        &["ms"],
        handlers::task_sleep,
    )
    .tasks(TaskSupport::Required),
    ToolDef::new(
        "task_input",
        "Only as a task (taskSupport required; 2025-11-25 `params.task`, or a 2026-07-28 request declaring the io.modelcontextprotocol/tasks extension): works `ms / 2` milliseconds, then needs input (status input_required, statusMessage `waiting for input`). 2025-11-25: the question comes as an elicitation/create request (form, `answer` string, related-task _meta) while a tasks/result of the task waits. 2026-07-28: tasks/get carries inputRequests.answer (that elicitation/create), answered with tasks/update inputResponses.answer. Accepted: working again for the other `ms / 2`, then completes with `answered: {answer}`; declined or cancelled: completes with `declined`; a client error response: fails.",
        || json!({"ms": integer("Total work time, in milliseconds (default 200).")}),
        &[],
        handlers::task_input,
    )
    .tasks(TaskSupport::Required),
];

pub(crate) fn find_tool(name: &str) -> Option<&'static ToolDef> {
    TOOLS.iter().find(|tool| tool.name == name)
}

pub(crate) fn is_tool(name: &str) -> bool {
    find_tool(name).is_some()
}

/// The whole `tools/list` result, with the cache hints of `--list-ttl-ms` (0: none).
pub(crate) fn tool_list(ttl_ms: u64) -> Value {
    let tools: Vec<Value> = TOOLS.iter().map(ToolDef::listing).collect();
    if ttl_ms > 0 {
        return json!({"tools": tools, "ttlMs": ttl_ms, "cacheScope": "private"});
    }
    json!({"tools": tools})
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    /// `tools/list` as the server answered it before the table: clients and the tests
    /// compare it, so it must not move by a byte.
    const SNAPSHOT: &str = include_str!("../../tests/data/tools_list.json");

    #[test]
    fn the_tool_list_is_byte_for_byte_the_snapshot() {
        assert_eq!(tool_list(0).to_string(), SNAPSHOT.trim_end());
        let mut cached: Value = serde_json::from_str(SNAPSHOT).expect("snapshot is JSON");
        cached["ttlMs"] = json!(500);
        cached["cacheScope"] = json!("private");
        assert_eq!(tool_list(500).to_string(), cached.to_string());
    }

    #[test]
    fn names_are_unique_and_found() {
        let mut seen = HashSet::new();
        for tool in TOOLS {
            assert!(seen.insert(tool.name), "{} declared twice", tool.name);
            assert!(is_tool(tool.name));
        }
        assert!(!is_tool("no_such_tool"));
        assert_eq!(TOOLS.len(), 27);
    }
}
