//! What an answer means for a call: the synchronous core under
//! [`CallFuture`](super::CallFuture). No I/O, no waiting, no clock: the future hands each answer
//! of the server here and does what the [`Next`] says.

use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use super::{
    super::{
        mrtr::{classify, InputRequired, Retry, Verdict, MAX_ROUNDS},
        output_schemas::OutputCheck,
        tasks::TaskOptions,
    },
    decode,
};
use crate::{error::Error, protocol::tasks::Task};

/// What a call does after an answer.
pub(crate) enum Next<T> {
    /// The call's result.
    Done(T),
    /// The call's end, failed.
    Failed(Error),
    /// The server made a task of the call: follow it to its end.
    Follow(Box<Task>, TaskOptions),
    /// The server asked for input first (a 2026-07-28 multi round-trip request): answer its
    /// input requests, then make the request again with the answers.
    Fulfil(InputRequired, Retry),
}

impl<T> From<Result<T, Error>> for Next<T> {
    fn from(result: Result<T, Error>) -> Self {
        match result {
            Ok(value) => Next::Done(value),
            Err(error) => Next::Failed(error),
        }
    }
}

/// How a call reads its answers, beyond decoding them.
#[derive(Default)]
pub(crate) struct Reading {
    /// A `tools/call` of a tool with an `outputSchema`: its result is checked.
    pub output_check: Option<OutputCheck>,
    /// A request a 2026-07-28 server may answer with `input_required` (or, a `tools/call`,
    /// with a task): the request as first sent, to make again.
    pub retry: Option<Retry>,
    /// How to follow a task the server makes of this call, if not the defaults.
    pub follow: Option<TaskOptions>,
}

impl Reading {
    /// What the server's answer (a result, or an error the call ends with) means for the call.
    pub fn on_answer<T: DeserializeOwned>(&mut self, answer: Result<&RawValue, Error>) -> Next<T> {
        let raw = match answer {
            Ok(raw) => raw,
            Err(error) => return Next::Failed(error),
        };
        // Only a request that may be retried can be answered with anything but its result.
        let Some(mut retry) = self.retry.take() else {
            return self.complete(raw).into();
        };
        let next = match classify(raw) {
            Verdict::Complete => self.complete(raw).into(),
            // Only `tools/call` may become a task (the extension's supported methods).
            Verdict::Task(_) if retry.method != "tools/call" => Next::Failed(Error::Protocol(
                format!("a task answered {}, which cannot become one", retry.method),
            )),
            Verdict::Task(task) => match self.follow.take().unwrap_or_default() {
                // A detached start wants the task, not its end.
                options if options.detach => decode(raw).into(),
                options => Next::Follow(task, options),
            },
            Verdict::Invalid(why) => Next::Failed(Error::Protocol(why)),
            Verdict::InputRequired(_) if retry.rounds >= MAX_ROUNDS => {
                Next::Failed(Error::Protocol(format!(
                    "the server asked for input {MAX_ROUNDS} times in a row"
                )))
            }
            Verdict::InputRequired(input) => {
                retry.rounds += 1;
                return Next::Fulfil(input, retry);
            }
        };
        self.retry = Some(retry);
        next
    }

    /// The final result of a task the call ran or followed.
    pub fn on_task_result<T: DeserializeOwned>(&self, raw: &RawValue) -> Result<T, Error> {
        self.complete(raw)
    }

    /// A complete result: checked against the tool's output schema, if any, and decoded.
    fn complete<T: DeserializeOwned>(&self, raw: &RawValue) -> Result<T, Error> {
        if let Some(check) = &self.output_check {
            check.check(raw)?;
        }
        decode(raw)
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use serde_json::{json, Value};

    use super::*;
    use crate::protocol::tools::CallToolResult;

    /// What `reading` makes of the result `value`.
    fn answer<T: DeserializeOwned>(reading: &mut Reading, value: Value) -> Next<T> {
        let raw = serde_json::value::to_raw_value(&value).unwrap();
        reading.on_answer(Ok(&raw))
    }

    fn retry(method: &'static str) -> Retry {
        Retry {
            method: Cow::Borrowed(method),
            params: None,
            timeout: None,
            routing: None,
            rounds: 0,
            progress: None,
        }
    }

    /// The reading of a 2026-07-28 `tools/call` (retryable, may become a task).
    fn tool_call() -> Reading {
        Reading {
            retry: Some(retry("tools/call")),
            ..Reading::default()
        }
    }

    fn task_answer() -> Value {
        json!({"resultType": "task", "taskId": "t1", "status": "working"})
    }

    fn input_answer() -> Value {
        json!({"resultType": "input_required", "inputRequests": {"who": {
            "method": "elicitation/create", "params": {"message": "who?"}}},
            "requestState": "opaque"})
    }

    #[test]
    fn a_plain_result_is_done() {
        for mut reading in [Reading::default(), tool_call()] {
            let text = json!({"content": [{"type": "text", "text": "hi"}]});
            let Next::Done(result) = answer::<CallToolResult>(&mut reading, text) else {
                panic!("not done")
            };
            assert_eq!(result.content.len(), 1);
        }
        let next = answer::<Value>(&mut tool_call(), json!({"resultType": "complete"}));
        assert!(matches!(next, Next::Done(v) if v["resultType"] == "complete"));
    }

    #[test]
    fn an_error_answer_ends_the_call_with_it() {
        let server = Error::Server {
            code: -32601,
            message: "no such method".into(),
            data: None,
        };
        for mut reading in [Reading::default(), tool_call()] {
            let next = reading.on_answer::<Value>(Err(server.clone()));
            assert!(matches!(
                next,
                Next::Failed(Error::Server { code: -32601, .. })
            ));
        }
    }

    #[test]
    fn a_result_of_the_wrong_shape_fails_as_the_peers_fault() {
        let next = answer::<CallToolResult>(&mut tool_call(), json!({"content": 3}));
        assert!(
            matches!(next, Next::Failed(Error::Protocol(why)) if why.starts_with("unexpected result"))
        );
        let next = answer::<CallToolResult>(&mut Reading::default(), json!([1, 2]));
        assert!(matches!(next, Next::Failed(Error::Protocol(_))));
    }

    #[test]
    fn an_unknown_or_malformed_result_type_fails() {
        let next = answer::<Value>(&mut tool_call(), json!({"resultType": "later"}));
        assert!(matches!(next, Next::Failed(Error::Protocol(why)) if why.contains("later")));
        let no_method =
            json!({"resultType": "input_required", "inputRequests": {"k": {"params": {}}}});
        let next = answer::<Value>(&mut tool_call(), no_method);
        assert!(
            matches!(next, Next::Failed(Error::Protocol(why)) if why.contains("malformed input_required")),
            "an input request without its method"
        );
        let no_status = json!({"resultType": "task", "taskId": "t"});
        let next = answer::<Value>(&mut tool_call(), no_status);
        assert!(
            matches!(next, Next::Failed(Error::Protocol(why)) if why.contains("malformed task"))
        );
    }

    #[test]
    fn a_request_that_cannot_be_retried_reads_any_result_as_its_result() {
        // An older server's result, or a method without rounds: `resultType` is just a member.
        let next = answer::<Value>(&mut Reading::default(), input_answer());
        assert!(matches!(next, Next::Done(v) if v["resultType"] == "input_required"));
    }

    #[test]
    fn a_task_creating_answer_is_followed_unless_the_start_is_detached() {
        let mut reading = tool_call();
        match answer::<CallToolResult>(&mut reading, task_answer()) {
            Next::Follow(task, options) => {
                assert_eq!(task.task_id, "t1");
                assert!(!options.detach);
            }
            _ => panic!("not followed"),
        }
        assert!(reading.retry.is_some(), "the call can still be retried");

        let mut detached = tool_call();
        detached.follow = Some(TaskOptions {
            detach: true,
            ..TaskOptions::default()
        });
        let next = answer::<Value>(&mut detached, task_answer());
        assert!(matches!(next, Next::Done(v) if v["taskId"] == "t1"));
    }

    #[test]
    fn only_a_tool_call_may_become_a_task() {
        let mut reading = Reading {
            retry: Some(retry("prompts/get")),
            ..Reading::default()
        };
        let next = answer::<Value>(&mut reading, task_answer());
        assert!(matches!(next, Next::Failed(Error::Protocol(why)) if why.contains("prompts/get")));
    }

    #[test]
    fn an_input_requests_answer_is_fulfilled_a_bounded_number_of_rounds() {
        let mut reading = tool_call();
        for round in 1..=MAX_ROUNDS {
            match answer::<Value>(&mut reading, input_answer()) {
                Next::Fulfil(_, retry) => {
                    assert_eq!(retry.rounds, round);
                    assert!(reading.retry.is_none(), "the round holds the retry");
                    reading.retry = Some(retry); // handed back once the round is sent
                }
                _ => panic!("round {round} not fulfilled"),
            }
        }
        let next = answer::<Value>(&mut reading, input_answer());
        assert!(
            matches!(next, Next::Failed(Error::Protocol(why)) if why.contains("times in a row"))
        );
    }

    #[cfg(feature = "output-schema")]
    fn checked_tool_call() -> Reading {
        let schema = json!({"type": "object", "properties": {"sum": {"type": "number"}},
            "required": ["sum"]});
        let validator = std::sync::Arc::new(jsonschema::validator_for(&schema).unwrap());
        Reading {
            output_check: Some(OutputCheck::new("add", validator)),
            ..tool_call()
        }
    }

    #[cfg(feature = "output-schema")]
    #[test]
    fn structured_content_is_checked_against_the_output_schema() {
        let valid = json!({"content": [], "structuredContent": {"sum": 3}});
        let next = answer::<CallToolResult>(&mut checked_tool_call(), valid);
        assert!(matches!(next, Next::Done(r) if r.structured_content == Some(json!({"sum": 3}))));

        let invalid = json!({"content": [], "structuredContent": {"sum": "3"}});
        let next = answer::<CallToolResult>(&mut checked_tool_call(), invalid.clone());
        assert!(matches!(
            next,
            Next::Failed(Error::InvalidOutput { ref tool, ref path, .. }) if tool == "add" && path == "/sum"
        ));
        let next = answer::<CallToolResult>(&mut checked_tool_call(), json!({"content": []}));
        assert!(matches!(next, Next::Failed(Error::InvalidOutput { .. })));
        let tool_error = json!({"content": [], "isError": true});
        let next = answer::<CallToolResult>(&mut checked_tool_call(), tool_error);
        assert!(
            matches!(next, Next::Done(r) if r.is_error == Some(true)),
            "a tool error says what went wrong in its content"
        );
        let invalid = serde_json::value::to_raw_value(&invalid).unwrap();
        let end = checked_tool_call().on_task_result::<CallToolResult>(&invalid);
        assert!(
            matches!(end, Err(Error::InvalidOutput { .. })),
            "a task's final result is checked too"
        );
    }

    #[cfg(feature = "output-schema")]
    #[test]
    fn answers_that_are_not_the_result_yet_are_not_checked() {
        let next = answer::<CallToolResult>(&mut checked_tool_call(), input_answer());
        assert!(matches!(next, Next::Fulfil(..)));
        let next = answer::<CallToolResult>(&mut checked_tool_call(), task_answer());
        assert!(matches!(next, Next::Follow(..)));
    }

    /// The kinds of answer a server may give a call, for the model below.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Kind {
        Plain,
        SchemaValid,
        SchemaInvalid,
        InputRequired,
        Task,
        UnknownResultType,
        ServerError,
    }

    /// Mostly input requests, so that calls reach the bound on rounds.
    fn kind() -> impl proptest::strategy::Strategy<Value = Kind> {
        use proptest::strategy::Just;
        proptest::prop_oneof![
            12 => Just(Kind::InputRequired),
            1 => Just(Kind::Plain),
            1 => Just(Kind::SchemaValid),
            1 => Just(Kind::SchemaInvalid),
            1 => Just(Kind::Task),
            1 => Just(Kind::UnknownResultType),
            1 => Just(Kind::ServerError),
        ]
    }

    /// What the model expects of an answer.
    #[derive(Debug, PartialEq)]
    enum Expected {
        Done,
        Protocol,
        InvalidOutput,
        Server,
        Follow,
        Fulfil,
    }

    fn model(kind: Kind, retryable: bool, tool_call: bool, checked: bool, rounds: u32) -> Expected {
        let complete = |structured_ok: bool| match (checked, structured_ok) {
            (true, false) => Expected::InvalidOutput,
            _ => Expected::Done,
        };
        match kind {
            Kind::ServerError => Expected::Server,
            Kind::Plain => complete(false),
            Kind::SchemaValid => complete(true),
            Kind::SchemaInvalid => complete(false),
            // To a request that cannot be retried, `resultType` means nothing.
            _ if !retryable => complete(false),
            Kind::UnknownResultType => Expected::Protocol,
            Kind::Task if tool_call => Expected::Follow,
            Kind::Task => Expected::Protocol,
            Kind::InputRequired if rounds < MAX_ROUNDS => Expected::Fulfil,
            Kind::InputRequired => Expected::Protocol,
        }
    }

    fn result_of(kind: Kind) -> Result<Value, Error> {
        Ok(match kind {
            Kind::Plain => json!({"content": []}),
            Kind::SchemaValid => json!({"content": [], "structuredContent": {"sum": 1}}),
            Kind::SchemaInvalid => json!({"content": [], "structuredContent": {"sum": []}}),
            Kind::InputRequired => input_answer(),
            Kind::Task => task_answer(),
            Kind::UnknownResultType => json!({"resultType": "someday"}),
            Kind::ServerError => {
                return Err(Error::Server {
                    code: -32000,
                    message: "no".into(),
                    data: None,
                })
            }
        })
    }

    proptest::proptest! {
        /// Each answer in a call's life, however the server mixes them, means what the model
        /// says; the retry outlives every answer, and rounds stay bounded.
        #[test]
        fn answers_mean_what_the_model_says(
            answers in proptest::collection::vec(kind(), 1..60),
            retryable: bool,
            tool_call: bool,
            checked: bool,
        ) {
            let checked = checked && cfg!(feature = "output-schema");
            let mut reading = Reading::default();
            #[cfg(feature = "output-schema")]
            if checked {
                reading = checked_tool_call();
            }
            let method = if tool_call { "tools/call" } else { "prompts/get" };
            reading.retry = retryable.then(|| retry(method));
            let mut rounds = 0;
            for kind in answers {
                let expected = model(kind, retryable, tool_call, checked, rounds);
                let next = match result_of(kind) {
                    Ok(value) => {
                        let raw = serde_json::value::to_raw_value(&value).unwrap();
                        reading.on_answer::<Value>(Ok(&raw))
                    }
                    Err(error) => reading.on_answer::<Value>(Err(error)),
                };
                let got = match next {
                    Next::Done(_) => Expected::Done,
                    Next::Failed(Error::Protocol(_)) => Expected::Protocol,
                    Next::Failed(Error::InvalidOutput { .. }) => Expected::InvalidOutput,
                    Next::Failed(Error::Server { .. }) => Expected::Server,
                    Next::Failed(other) => panic!("unexpected error {other:?}"),
                    Next::Follow(..) => Expected::Follow,
                    Next::Fulfil(_, retry) => {
                        rounds += 1;
                        proptest::prop_assert_eq!(retry.rounds, rounds);
                        proptest::prop_assert!(reading.retry.is_none());
                        reading.retry = Some(retry); // as the round's end hands it back
                        Expected::Fulfil
                    }
                };
                proptest::prop_assert_eq!(&got, &expected, "{:?} after {} rounds", kind, rounds);
                proptest::prop_assert!(rounds <= MAX_ROUNDS);
                proptest::prop_assert_eq!(reading.retry.is_some(), retryable);
            }
        }
    }
}
