//! Calls routed by name ([`Servers::call`], [`Servers::call_tool`]): the server found (and
//! started if need be), then the tool called with every guarantee of a direct call. Once an
//! inspector turned [`Servers::track_calls`] on, each routed call is kept in flight with its
//! progress, cancellable from the inspector, and counted for its tool as it ends.

use std::{
    future::{Future, IntoFuture},
    marker::PhantomData,
    pin::Pin,
    time::Duration,
};

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::{catalogue, lists::Kinds, live, CallInFlight, Servers, ServersError, ToolStats};
use crate::{
    cancellation::Cancellation,
    client::{Client, ProgressStream},
    error::Error,
    protocol::{
        jsonrpc::{RawResult, RequestId},
        notifications::{Progress, ProgressCallback},
        tools::CallToolResult,
    },
};

/// What a routed call answers: the typed [`CallToolResult`], or the result as the server sent
/// it ([`RoutedCall::raw`]).
pub trait RoutedResult: DeserializeOwned + Send + 'static + private::Sealed {
    /// Whether the tool reported a failure of its own (`isError: true`), for its figures.
    fn tool_failed(&self) -> bool;
}

mod private {
    pub trait Sealed {}
    impl Sealed for super::CallToolResult {}
    impl Sealed for super::RawResult {}
}

impl RoutedResult for CallToolResult {
    fn tool_failed(&self) -> bool {
        self.failed()
    }
}

impl RoutedResult for RawResult {
    fn tool_failed(&self) -> bool {
        #[derive(serde::Deserialize)]
        struct Flag {
            #[serde(rename = "isError", default)]
            is_error: Option<bool>,
        }
        serde_json::from_str::<Flag>(self.get()).is_ok_and(|flag| flag.is_error == Some(true))
    }
}

/// A `tools/call` routed by name ([`Servers::call`]): set a token and a timeout, then await.
/// It answers a [`CallToolResult`], or with [`raw`](Self::raw) the result as the server sent it.
#[must_use = "a RoutedCall does nothing until it is awaited"]
pub struct RoutedCall<T = CallToolResult> {
    target: Target,
    arguments: Value,
    cancellation: Option<Cancellation>,
    timeout: Option<Duration>,
    meta: Option<Map<String, Value>>,
    progress: Option<ProgressCallback>,
    before_send: Option<BeforeSend>,
    _result: PhantomData<fn() -> T>,
}

/// What runs once a routed call's server is found, before its request is sent
/// ([`RoutedCall::before_send`]).
pub type BeforeSend =
    Box<dyn FnOnce(&Client, RequestId) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// Where a routed call goes. Apart from the call's settings, whose progress callback is not
/// `Sync`: finding the server borrows only this, and the call stays `Send`.
struct Target {
    servers: Servers,
    /// The server named by the caller ([`Servers::call_tool`]); `None`: routed by the name.
    server: Option<String>,
    tool: String,
}

impl Servers {
    /// `tools/call` of `tool` on server `server`. Set a token and a timeout on the returned
    /// call as on a direct one; cancelling before the server is connected sends nothing.
    pub fn call_tool(&self, server: &str, tool: &str, arguments: Value) -> RoutedCall {
        RoutedCall::new(self.clone(), Some(server.to_owned()), tool, arguments)
    }

    /// `tools/call` routed by the tool's name: a qualified `server/tool`, or a bare name that
    /// one server offers. Set a token and a timeout on the returned call as on a direct one;
    /// cancelling before the server is found sends nothing.
    pub fn call(&self, tool: &str, arguments: Value) -> RoutedCall {
        RoutedCall::new(self.clone(), None, tool, arguments)
    }

    /// Which server and tool a name routes to (see [`call`](Self::call)).
    pub async fn route(&self, tool: &str) -> Result<(String, String), ServersError> {
        let names = self.names();
        if let Some((server, tool)) =
            catalogue::split_qualified(tool, names.iter().map(String::as_str))
        {
            // Qualified: no need to list anything.
            return Ok((server.to_owned(), tool.to_owned()));
        }
        let tools = self.catalogue_of(Kinds::TOOLS).await.tools;
        catalogue::route(tool, &names, &tools)
    }

    /// Keeps the routed calls ([`call`](Self::call), [`call_tool`](Self::call_tool)) in flight
    /// from now on, for [`calls_in_flight`](Self::calls_in_flight) and
    /// [`cancel_call`](Self::cancel_call): an inspector turns it on. Each such call then asks
    /// its server for progress (a progress token), and the last progress is kept.
    pub fn track_calls(&self) {
        self.inner.live.get_or_init(live::Shared::default);
    }

    /// The routed calls in flight, oldest first (empty unless [`track_calls`](Self::track_calls)
    /// is on).
    pub fn calls_in_flight(&self) -> Vec<CallInFlight> {
        self.inner
            .live
            .get()
            .map(live::snapshot)
            .unwrap_or_default()
    }

    /// Per server and tool, the routed calls that ended since [`track_calls`](Self::track_calls)
    /// was turned on: how many, failed, cancelled, and their durations' p50 and p99 (over the
    /// last [`DURATIONS_KEPT`](super::DURATIONS_KEPT) of each). Empty unless it is on.
    pub fn tool_stats(&self) -> Vec<ToolStats> {
        self.inner
            .live
            .get()
            .map(live::tool_stats)
            .unwrap_or_default()
    }

    /// Cancels routed call `id` as its own token would: its caller gets [`Error::Cancelled`]
    /// with `reason`, and the server its cancel. `false` if no such call is in flight.
    pub fn cancel_call(&self, id: u64, reason: &str) -> bool {
        self.inner
            .live
            .get()
            .is_some_and(|shared| live::cancel(shared, id, reason))
    }
}

impl RoutedCall {
    fn new(servers: Servers, server: Option<String>, tool: &str, arguments: Value) -> Self {
        Self {
            target: Target {
                servers,
                server,
                tool: tool.to_owned(),
            },
            arguments,
            cancellation: None,
            timeout: None,
            meta: None,
            progress: None,
            before_send: None,
            _result: PhantomData,
        }
    }

    /// The result as the server sent it, its JSON text unread (see [`Call::raw`](crate::Call::raw)):
    /// for passing it on unchanged.
    pub fn raw(self) -> RoutedCall<RawResult> {
        RoutedCall {
            target: self.target,
            arguments: self.arguments,
            cancellation: self.cancellation,
            timeout: self.timeout,
            meta: self.meta,
            progress: self.progress,
            before_send: self.before_send,
            _result: PhantomData,
        }
    }
}

impl<T: RoutedResult> RoutedCall<T> {
    /// Calls `callback` with each progress update of the call, as
    /// [`Call::on_progress`](crate::Call::on_progress) (the inspector still sees them too).
    pub fn on_progress(mut self, callback: impl FnMut(Progress) + Send + 'static) -> Self {
        self.progress = Some(Box::new(callback));
        self
    }

    /// The call's progress as a stream, as [`Call::progress_stream`](crate::Call::progress_stream).
    pub fn progress_stream(self) -> (Self, ProgressStream) {
        let (callback, stream) = ProgressStream::new();
        (self.on_progress(callback), stream)
    }

    /// Adds `_meta` entries to the request's params, as [`Call::meta`](crate::Call::meta).
    pub fn meta(mut self, meta: Map<String, Value>) -> Self {
        self.meta.get_or_insert_with(Default::default).extend(meta);
        self
    }

    /// Cancels the call when `token` is cancelled (on the server, once it was sent).
    pub fn cancellation(mut self, token: &Cancellation) -> Self {
        self.cancellation = Some(token.clone());
        self
    }

    /// Runs `hook` once the server is found, with its connection and the id the request will
    /// carry, and sends the request only when it is done: for keeping a record of what is about
    /// to be owed to the server (a gateway replica writes it to a shared store, so that another
    /// cancels the call if this process dies). A cancel meanwhile: nothing is sent.
    pub fn before_send(
        mut self,
        hook: impl FnOnce(&Client, RequestId) -> Pin<Box<dyn Future<Output = ()> + Send>>
            + Send
            + 'static,
    ) -> Self {
        self.before_send = Some(Box::new(hook));
        self
    }

    /// The call's timeout, as [`Call::timeout`](crate::Call::timeout) (finding the server
    /// is not counted).
    pub fn timeout(mut self, after: Duration) -> Self {
        self.timeout = Some(after);
        self
    }
}

impl<T: RoutedResult> IntoFuture for RoutedCall<T> {
    type Output = Result<T, ServersError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            match self.target.servers.inner.live.get().cloned() {
                Some(live) => self.run_tracked(&live).await,
                None => self.run(None).await,
            }
        })
    }
}

impl<T: RoutedResult> RoutedCall<T> {
    /// The call, kept in flight meanwhile and counted for its tool as it ends.
    async fn run_tracked(mut self, live: &live::Shared) -> Result<T, ServersError> {
        // The call's own token: cancelled by the caller's, or from the inspector.
        let stop = Cancellation::new();
        let registration = live::register(live, &self.target.tool, stop.clone());
        let theirs = self.cancellation.replace(stop.clone());
        let call = self.run(Some(&registration));
        let outcome = match theirs {
            None => call.await,
            Some(theirs) => {
                let mut call = std::pin::pin!(call);
                tokio::select! {
                    outcome = &mut call => outcome,
                    () = theirs.cancelled() => {
                        stop.cancel_inner_with(theirs.reason_owned());
                        call.await
                    }
                }
            }
        };
        registration.finished(outcome_of(&outcome));
        outcome
    }

    async fn run(self, live: Option<&live::Registration>) -> Result<T, ServersError> {
        let token = self.cancellation.clone();
        let (client, tool) = self.target.find(token.as_ref(), live).await?;
        self.send(&client, &tool, token.as_ref(), live).await
    }

    /// The `tools/call` itself, as a direct one with this call's settings.
    async fn send(
        self,
        client: &Client,
        tool: &str,
        token: Option<&Cancellation>,
        live: Option<&live::Registration>,
    ) -> Result<T, ServersError> {
        let call = client.call_tool(tool, self.arguments).answering::<T>();
        let mut call = call.cancellation_opt(token);
        if let Some(after) = self.timeout {
            call = call.timeout(after);
        }
        if let Some(meta) = self.meta {
            call = call.meta(meta);
        }
        let keeper = live.map(live::Registration::progress_keeper);
        if let Some(progress) = progress_callback(keeper, self.progress) {
            call = call.on_progress(progress);
        }
        if let Some(hook) = self.before_send {
            hook(client, call.id()).await;
        }
        Ok(call.await?)
    }
}

impl Target {
    /// The server's client, and the tool's name there. A cancel meanwhile: nothing was sent,
    /// nothing is.
    async fn find(
        &self,
        token: Option<&Cancellation>,
        live: Option<&live::Registration>,
    ) -> Result<(Client, String), ServersError> {
        let find = async {
            let (server, tool) = match &self.server {
                Some(server) => (server.clone(), self.tool.clone()),
                None => self.servers.route(&self.tool).await?,
            };
            if let Some(live) = live {
                live.routed_to(&server, &tool);
            }
            let client = self.servers.client(&server).await?;
            Ok::<_, ServersError>((client, tool))
        };
        let Some(token) = token else {
            return find.await;
        };
        if token.is_cancelled() {
            return Err(Error::cancelled(token.reason_owned()).into());
        }
        tokio::select! {
            found = find => found,
            () = token.cancelled() => Err(Error::cancelled(token.reason_owned()).into()),
        }
    }
}

/// The call's progress callback: the inspector's keeper, the caller's, both, or none.
fn progress_callback(
    keeper: Option<impl FnMut(Progress) + Send + 'static>,
    theirs: Option<ProgressCallback>,
) -> Option<ProgressCallback> {
    match (keeper, theirs) {
        (Some(mut keep), Some(mut theirs)) => Some(Box::new(move |progress: Progress| {
            keep(progress.clone());
            theirs(progress);
        })),
        (Some(keep), None) => Some(Box::new(keep)),
        (None, theirs) => theirs,
    }
}

/// How a routed call ended, for its tool's figures: a timeout counts as a cancel.
fn outcome_of<T: RoutedResult>(outcome: &Result<T, ServersError>) -> live::Outcome {
    match outcome {
        Ok(result) => live::Outcome::Answered {
            tool_error: result.tool_failed(),
        },
        Err(e) if e.is_cancelled() => live::Outcome::Cancelled,
        Err(ServersError::Client(Error::Timeout { .. })) => live::Outcome::Cancelled,
        Err(_) => live::Outcome::Failed,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use serde_json::json;

    use super::*;
    use crate::servers::{lock, test_support::Scripted};

    fn progress(at: f64) -> Progress {
        Progress {
            progress: at,
            total: None,
            message: None,
        }
    }

    fn echoed(result: &CallToolResult) -> String {
        serde_json::to_value(&result.content).expect("content")[0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    #[test]
    fn both_the_inspector_and_the_caller_see_the_progress() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (kept, theirs) = (seen.clone(), seen.clone());
        let keeper = move |p: Progress| lock(&kept).push(("keeper", p.progress));
        let caller: ProgressCallback =
            Box::new(move |p| lock(&theirs).push(("caller", p.progress)));
        let mut both = progress_callback(Some(keeper), Some(caller)).expect("a callback");
        both(progress(1.0));
        assert_eq!(*lock(&seen), [("keeper", 1.0), ("caller", 1.0)]);

        let none: Option<fn(Progress)> = None;
        assert!(progress_callback(none, None).is_none());
    }

    #[test]
    fn a_timeout_counts_as_a_cancel_and_a_tool_error_as_an_error() {
        let answered = |is_error| {
            Ok(CallToolResult {
                is_error,
                ..serde_json::from_value(json!({"content": []})).expect("a result")
            })
        };
        assert!(matches!(
            outcome_of(&answered(Some(true))),
            live::Outcome::Answered { tool_error: true }
        ));
        assert!(matches!(
            outcome_of(&answered(None)),
            live::Outcome::Answered { tool_error: false }
        ));
        let timeout = Error::Timeout {
            after: Duration::from_secs(1),
        };
        assert!(matches!(
            outcome_of::<CallToolResult>(&Err(timeout.into())),
            live::Outcome::Cancelled
        ));
        assert!(matches!(
            outcome_of::<CallToolResult>(&Err(Error::cancelled(None).into())),
            live::Outcome::Cancelled
        ));
        assert!(matches!(
            outcome_of::<CallToolResult>(&Err(ServersError::UnknownTool("x".into()))),
            live::Outcome::Failed
        ));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_route_by_bare_name_while_unique_else_by_qualified_name() {
        let servers = Servers::new(crate::client::Client::builder());
        Scripted::add(&servers, "a", &["echo", "add"]);
        Scripted::add(&servers, "b", &["echo"]);
        assert_eq!(
            servers.route("add").await.expect("routed"),
            ("a".to_owned(), "add".to_owned())
        );
        let result = servers
            .call("b/echo", json!({"x": 1}))
            .await
            .expect("called");
        assert_eq!(echoed(&result), r#"{"x":1}"#);
        assert!(matches!(
            servers.call("echo", json!({})).await,
            Err(ServersError::AmbiguousTool { candidates, .. }) if candidates == ["a/echo", "b/echo"]
        ));
        assert!(matches!(
            servers.call("nope", json!({})).await,
            Err(ServersError::UnknownTool(_))
        ));
        assert!(matches!(
            servers.call_tool("c", "echo", json!({})).await,
            Err(ServersError::UnknownServer(_))
        ));
        servers.stop().await;
    }

    #[test]
    fn a_raw_result_tells_a_tool_error_by_its_flag_alone() {
        let raw = |text: &str| {
            RawResult::from(serde_json::value::RawValue::from_string(text.into()).expect("JSON"))
        };
        assert!(raw(r#"{"content":[],"isError":true}"#).tool_failed());
        assert!(!raw(r#"{"content":[],"isError":false}"#).tool_failed());
        assert!(!raw(r#"{"content":[{"text":"isError"}]}"#).tool_failed());
        assert!(
            !raw(r#"[1]"#).tool_failed(),
            "not an object: not a tool error"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_raw_routed_call_answers_the_servers_text_unchanged() {
        let servers = Servers::new(crate::client::Client::builder());
        Scripted::add(&servers, "a", &["echo"]);
        servers.track_calls();
        let raw = servers
            .call("echo", json!({"x": 1}))
            .raw()
            .await
            .expect("called");
        // As the scripted server wrote it: its keys in its order, not re-made from a type.
        assert_eq!(
            raw.get(),
            r#"{"content":[{"text":"{\"x\":1}","type":"text"}]}"#
        );
        assert_eq!(
            (
                servers.tool_stats()[0].calls,
                servers.tool_stats()[0].errors
            ),
            (1, 0)
        );
        servers.stop().await;
    }

    #[tokio::test]
    async fn a_call_cancelled_before_its_server_is_found_starts_nothing() {
        let servers = Servers::new(crate::client::Client::builder());
        let script = Scripted::add(&servers, "a", &["echo"]);
        let token = Cancellation::new();
        token.cancel();
        let outcome = servers
            .call_tool("a", "echo", json!({}))
            .cancellation(&token)
            .await;
        assert!(matches!(outcome, Err(e) if e.is_cancelled()));
        assert_eq!(script.connects(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tracked_calls_are_counted_per_server_and_tool() {
        let servers = Servers::new(crate::client::Client::builder());
        Scripted::add(&servers, "a", &["echo"]);
        assert!(servers.tool_stats().is_empty(), "not tracked yet");
        servers.track_calls();
        servers.call("echo", json!({})).await.expect("called");
        servers
            .call_tool("a", "echo", json!({}))
            .await
            .expect("called");
        let stats = servers.tool_stats();
        assert_eq!(stats.len(), 1);
        assert_eq!(
            (stats[0].server.as_str(), stats[0].tool.as_str()),
            ("a", "echo")
        );
        assert_eq!(
            (stats[0].calls, stats[0].errors, stats[0].cancels),
            (2, 0, 0)
        );
        assert!(servers.calls_in_flight().is_empty());
        assert!(!servers.cancel_call(1, "too late"));
        servers.stop().await;
    }
}
