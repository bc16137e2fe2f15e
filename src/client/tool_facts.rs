//! What the client knows of the server's tools: the plain state that
//! [`Shared`](super::shared::Shared) keeps under one lock. No I/O, no clock: the connection
//! hands each event here (a `tools/list` page arrived, the list changed, a refetch of it ended)
//! and does what the answer says; calls ask it about their tool.
//!
//! Everything here is learned from `tools/list` pages, one at a time: a page teaches about the
//! tools it lists and keeps what was learned of the tools on other pages.

use std::{borrow::Cow, collections::HashSet};

use serde::Deserialize;
use serde_json::Value;

use super::{
    output_schemas::{self, OutputSchemas, Schema},
    tool_headers::{param_values, screen_tools_list, ToolHeaders},
};
use crate::{error::Error, protocol::jsonrpc::RawResult};

/// Distinct tool names the client learns about at most (output schemas, `x-mcp-header`
/// annotations, task support): a server that keeps listing new tools (and can have its lists
/// refetched with `tools/list_changed`) cannot grow what is kept about them. A page that would
/// go past it fails with [`Error::Protocol`] and teaches nothing.
pub(crate) const MAX_LEARNED_TOOLS: usize = 10_000;

/// The facts about the server's tools, and where the refetch of their list stands.
#[derive(Default)]
pub(crate) struct ToolFacts {
    /// Every tool name learned from a list, at most [`MAX_LEARNED_TOOLS`]: what the facts below
    /// are keyed by.
    learned: HashSet<String>,
    /// What the 2026-07-28 `tools/list` results said about `x-mcp-header` arguments.
    headers: ToolHeaders,
    /// The compiled `outputSchema` of each listed tool that has one.
    output_schemas: OutputSchemas,
    /// The tools whose `execution.taskSupport` is `required` (run as tasks without asking).
    task_required: HashSet<String>,
    /// Whether a tool list was ever learned: only then does a `tools/list_changed` refetch it.
    ever_listed: bool,
    refetch: Refetch,
}

/// Where the background refetch of the tool list stands: never several at once, and a change
/// that comes during one is never lost.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Refetch {
    #[default]
    Idle,
    Running,
    /// Running, and the list changed again since it began: one more follows it.
    RunningThenAgain,
}

impl ToolFacts {
    /// A `tools/list` page arrived: records its tool names (failing, having learned nothing, if
    /// they would go past [`MAX_LEARNED_TOOLS`]); in the 2026-07-28 era (`modern`) learns the
    /// tools' `x-mcp-header` annotations and drops from `result` the tools whose annotations
    /// are invalid; in both, compiles the tools' output schemas and learns which must run as
    /// tasks.
    pub fn learned_page(&mut self, result: &mut RawResult, modern: bool) -> Result<(), Error> {
        self.admit(result)?;
        if modern {
            if let Some(screened) = screen_tools_list(result, &mut self.headers) {
                *result = screened;
            }
        }
        output_schemas::learn(result, &mut self.output_schemas);
        self.learn_task_support(result);
        self.ever_listed = true;
        Ok(())
    }

    /// The `Mcp-Param-*` values of a call of `tool` with `arguments`: its annotated arguments.
    pub fn routing_params(&self, tool: &str, arguments: &Value) -> Vec<(String, String)> {
        self.headers
            .get(tool)
            .map(|mapped| param_values(arguments.as_object(), mapped))
            .unwrap_or_default()
    }

    /// The compiled `outputSchema` of `tool`, if it has one.
    pub fn output_schema(&self, tool: &str) -> Option<Schema> {
        self.output_schemas.get(tool).cloned()
    }

    /// Whether `tool` must run as a task.
    pub fn task_required(&self, tool: &str) -> bool {
        self.task_required.contains(tool)
    }

    /// The server's tools changed (`notifications/tools/list_changed`): whether to start a
    /// refetch of the list now. Only a list ever learned is refetched, never on a connection
    /// that ended; a change during a refetch asks for one more after it instead.
    pub fn list_changed(&mut self, connection_ended: bool) -> bool {
        if !self.ever_listed || connection_ended {
            return false;
        }
        match self.refetch {
            Refetch::Idle => {
                self.refetch = Refetch::Running;
                true
            }
            Refetch::Running | Refetch::RunningThenAgain => {
                self.refetch = Refetch::RunningThenAgain;
                false
            }
        }
    }

    /// The running refetch ended (whether it succeeded or not): whether to fetch the list again,
    /// because it changed meanwhile (and the connection still runs).
    pub fn refetch_ended(&mut self, connection_ended: bool) -> bool {
        let again = self.refetch == Refetch::RunningThenAgain && !connection_ended;
        self.refetch = if again {
            Refetch::Running
        } else {
            Refetch::Idle
        };
        again
    }

    /// Records the page's tool names, unless they would take the learned ones past
    /// [`MAX_LEARNED_TOOLS`].
    fn admit(&mut self, result: &RawResult) -> Result<(), Error> {
        #[derive(Deserialize)]
        struct Page<'a> {
            #[serde(default, borrow)]
            tools: Vec<Named<'a>>,
        }
        #[derive(Deserialize)]
        struct Named<'a> {
            #[serde(borrow)]
            name: Cow<'a, str>,
        }
        let Ok(page) = serde_json::from_str::<Page>(result.get()) else {
            return Ok(()); // the typed decoding says what is wrong
        };
        let new = page
            .tools
            .iter()
            .filter(|tool| !self.learned.contains(tool.name.as_ref()))
            .map(|tool| tool.name.as_ref())
            .collect::<HashSet<_>>();
        if self.learned.len() + new.len() > MAX_LEARNED_TOOLS {
            return Err(Error::Protocol(format!(
                "the server listed more than {MAX_LEARNED_TOOLS} distinct tools"
            )));
        }
        self.learned.extend(new.into_iter().map(str::to_owned));
        Ok(())
    }

    /// Learns which of the page's tools must run as tasks.
    fn learn_task_support(&mut self, result: &RawResult) {
        #[derive(Deserialize)]
        struct Page {
            #[serde(default)]
            tools: Vec<Listed>,
        }
        #[derive(Deserialize)]
        struct Listed {
            name: String,
            #[serde(default)]
            execution: Option<Value>,
        }
        let Ok(page) = serde_json::from_str::<Page>(result.get()) else {
            return;
        };
        for tool in page.tools {
            let support = tool
                .execution
                .as_ref()
                .and_then(|e| e.get("taskSupport"))
                .and_then(Value::as_str);
            if support == Some("required") {
                self.task_required.insert(tool.name);
            } else {
                self.task_required.remove(&tool.name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn page(value: Value) -> RawResult {
        serde_json::value::to_raw_value(&value).unwrap()
    }

    fn tool_names(result: &RawResult) -> Vec<String> {
        let value: Value = serde_json::from_str(result.get()).unwrap();
        value["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| tool["name"].as_str().unwrap().to_owned())
            .collect()
    }

    /// A tool with an `x-mcp-header` argument, one with an invalid one, and a plain one.
    fn annotated_page() -> RawResult {
        page(json!({"tools": [
            {"name": "routed", "inputSchema": {"properties": {
                "region": {"type": "string", "x-mcp-header": "Region"}}}},
            {"name": "invalid", "inputSchema": {"properties": {
                "v": {"type": "string", "x-mcp-header": ""}}}},
            {"name": "plain", "inputSchema": {}}
        ]}))
    }

    #[test]
    fn a_modern_page_teaches_the_routing_of_its_tools_and_loses_the_invalid_ones() {
        let mut facts = ToolFacts::default();
        let mut result = annotated_page();
        facts.learned_page(&mut result, true).unwrap();
        assert_eq!(tool_names(&result), ["routed", "plain"]);
        let arguments = json!({"region": "eu", "other": 1});
        assert_eq!(
            facts.routing_params("routed", &arguments),
            [("Region".to_owned(), "eu".to_owned())]
        );
        assert!(facts.routing_params("plain", &arguments).is_empty());
        assert!(facts.routing_params("invalid", &arguments).is_empty());
        assert!(facts.routing_params("unknown", &arguments).is_empty());
    }

    #[test]
    fn a_legacy_page_is_not_screened_and_teaches_no_routing() {
        let mut facts = ToolFacts::default();
        let mut result = annotated_page();
        facts.learned_page(&mut result, false).unwrap();
        assert_eq!(tool_names(&result), ["routed", "invalid", "plain"]);
        let arguments = json!({"region": "eu"});
        assert!(facts.routing_params("routed", &arguments).is_empty());
    }

    #[test]
    fn task_support_follows_the_latest_page_that_lists_the_tool() {
        let mut facts = ToolFacts::default();
        let required = json!({"taskSupport": "required"});
        let mut first = page(json!({"tools": [
            {"name": "slow", "execution": required},
            {"name": "also_slow", "execution": required},
            {"name": "optional", "execution": {"taskSupport": "optional"}},
            {"name": "fast"}
        ]}));
        facts.learned_page(&mut first, false).unwrap();
        assert!(facts.task_required("slow") && facts.task_required("also_slow"));
        assert!(!facts.task_required("optional") && !facts.task_required("fast"));
        assert!(!facts.task_required("unknown"));

        let mut second = page(json!({"tools": [{"name": "slow"}]}));
        facts.learned_page(&mut second, true).unwrap();
        assert!(!facts.task_required("slow"), "listed again without it");
        assert!(
            facts.task_required("also_slow"),
            "a tool on another page is kept"
        );
    }

    #[cfg(feature = "output-schema")]
    #[test]
    fn output_schemas_are_compiled_per_tool_and_follow_the_list() {
        let mut facts = ToolFacts::default();
        let mut result = page(json!({"tools": [
            {"name": "add", "outputSchema": {"type": "object"}},
            {"name": "plain"}
        ]}));
        facts.learned_page(&mut result, true).unwrap();
        assert!(facts.output_schema("add").is_some());
        assert!(facts.output_schema("plain").is_none());
        let mut again = page(json!({"tools": [{"name": "add"}]}));
        facts.learned_page(&mut again, false).unwrap();
        assert!(
            facts.output_schema("add").is_none(),
            "a tool that lost its schema"
        );
    }

    #[test]
    fn a_page_past_the_bound_on_tools_fails_and_teaches_nothing() {
        let mut facts = ToolFacts::default();
        let tools = (0..MAX_LEARNED_TOOLS)
            .map(|n| json!({"name": format!("tool{n}")}))
            .collect::<Vec<_>>();
        facts
            .learned_page(&mut page(json!({ "tools": tools })), false)
            .unwrap();
        // Tools learned already do not count twice.
        let mut known = page(json!({"tools": [{"name": "tool0"}, {"name": "tool1"}]}));
        facts.learned_page(&mut known, false).unwrap();

        let mut past = page(json!({"tools": [
            {"name": "tool0", "execution": {"taskSupport": "required"}},
            {"name": "one_too_many", "execution": {"taskSupport": "required"}}
        ]}));
        let before = past.get().to_owned();
        match facts.learned_page(&mut past, true) {
            Err(Error::Protocol(why)) => assert!(why.contains("distinct tools"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(past.get(), before, "the page is left as it came");
        assert!(!facts.task_required("tool0") && !facts.task_required("one_too_many"));
        assert_eq!(facts.learned.len(), MAX_LEARNED_TOOLS);
    }

    #[test]
    fn a_page_that_is_no_tool_list_teaches_nothing_but_that_one_was_listed() {
        let mut facts = ToolFacts::default();
        let mut result = page(json!({"tools": 3}));
        facts.learned_page(&mut result, true).unwrap();
        assert!(facts.learned.is_empty());
        assert!(facts.list_changed(false), "a list was fetched: refetched");
    }

    #[test]
    fn a_list_never_learned_or_on_an_ended_connection_is_not_refetched() {
        let mut facts = ToolFacts::default();
        assert!(!facts.list_changed(false), "never listed");
        facts
            .learned_page(&mut page(json!({"tools": []})), false)
            .unwrap();
        assert!(!facts.list_changed(true), "the connection ended");
        assert_eq!(facts.refetch, Refetch::Idle);
    }

    #[test]
    fn changes_during_a_refetch_make_one_more_and_only_one() {
        let mut facts = ToolFacts::default();
        facts
            .learned_page(&mut page(json!({"tools": []})), false)
            .unwrap();
        assert!(facts.list_changed(false), "starts");
        assert!(!facts.list_changed(false), "one runs already");
        assert!(!facts.list_changed(false), "still one more, not two");
        assert!(facts.refetch_ended(false), "fetches again");
        assert!(!facts.refetch_ended(false), "nothing changed meanwhile");
        assert!(facts.list_changed(false), "idle again: starts");
        assert!(!facts.list_changed(false));
        assert!(!facts.refetch_ended(true), "the connection ended meanwhile");
        assert_eq!(facts.refetch, Refetch::Idle);
    }

    /// What may happen to a connection's tool facts, in any order.
    #[derive(Debug, Clone, Copy)]
    enum Event {
        Listed,
        Changed {
            ended: bool,
        },
        /// The running refetch, if any, ends.
        RefetchEnded {
            ended: bool,
        },
    }

    fn event() -> impl proptest::strategy::Strategy<Value = Event> {
        use proptest::{prelude::any, strategy::Strategy};
        proptest::prop_oneof![
            1 => proptest::strategy::Just(Event::Listed),
            4 => any::<bool>().prop_map(|ended| Event::Changed { ended }),
            3 => any::<bool>().prop_map(|ended| Event::RefetchEnded { ended }),
        ]
    }

    proptest::proptest! {
        /// However changes and refetches interleave, at most one refetch runs, only a list
        /// learned is refetched on a live connection, and no change on a live connection goes
        /// without a fetch that begins after it.
        #[test]
        fn every_change_is_fetched_by_one_refetch_at_a_time(
            events in proptest::collection::vec(event(), 1..80)
        ) {
            let mut facts = ToolFacts::default();
            let (mut listed, mut running, mut unfetched_change) = (false, false, false);
            for event in events {
                match event {
                    Event::Listed => {
                        facts.learned_page(&mut page(json!({"tools": []})), false).unwrap();
                        listed = true;
                    }
                    Event::Changed { ended } => {
                        let starts = facts.list_changed(ended);
                        proptest::prop_assert_eq!(starts, listed && !ended && !running);
                        if starts {
                            running = true;
                        } else if listed && !ended {
                            unfetched_change = true; // the running one must fetch again
                        }
                    }
                    Event::RefetchEnded { ended } if running => {
                        let again = facts.refetch_ended(ended);
                        proptest::prop_assert_eq!(again, unfetched_change && !ended);
                        running = again;
                        unfetched_change = false;
                    }
                    Event::RefetchEnded { .. } => {}
                }
            }
        }
    }
}
