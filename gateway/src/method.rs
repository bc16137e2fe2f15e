//! What a downstream request asks, by its method: read once, then matched exhaustively wherever
//! the gateway dispatches (the session's request, its routed call, the 2026-07-28 envelope), so
//! the places that must agree cannot drift apart.

/// A list the gateway answers from its catalogue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum List {
    Tools,
    Prompts,
    Resources,
    Templates,
}

impl List {
    /// The result's field.
    pub fn field(self) -> &'static str {
        match self {
            Self::Tools => "tools",
            Self::Prompts => "prompts",
            Self::Resources => "resources",
            Self::Templates => "resourceTemplates",
        }
    }
}

/// A request routed to one upstream server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routed {
    CallTool,
    GetPrompt,
    ReadResource,
    Complete,
    /// `tasks/get`, `tasks/result`, `tasks/cancel`, `tasks/list`.
    Task(Task),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Task {
    Get,
    Result,
    Cancel,
    List,
}

/// A downstream request's method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Initialize,
    Discover,
    Ping,
    SetLogLevel,
    List(List),
    Routed(Routed),
    Subscribe,
    Unsubscribe,
    Listen,
    /// A method the gateway does not serve.
    Other,
}

impl Method {
    pub fn of(name: &str) -> Self {
        match name {
            "initialize" => Self::Initialize,
            "server/discover" => Self::Discover,
            "ping" => Self::Ping,
            "logging/setLevel" => Self::SetLogLevel,
            "tools/list" => Self::List(List::Tools),
            "prompts/list" => Self::List(List::Prompts),
            "resources/list" => Self::List(List::Resources),
            "resources/templates/list" => Self::List(List::Templates),
            "tools/call" => Self::Routed(Routed::CallTool),
            "prompts/get" => Self::Routed(Routed::GetPrompt),
            "resources/read" => Self::Routed(Routed::ReadResource),
            "completion/complete" => Self::Routed(Routed::Complete),
            "tasks/get" => Self::Routed(Routed::Task(Task::Get)),
            "tasks/result" => Self::Routed(Routed::Task(Task::Result)),
            "tasks/cancel" => Self::Routed(Routed::Task(Task::Cancel)),
            "tasks/list" => Self::Routed(Routed::Task(Task::List)),
            "resources/subscribe" => Self::Subscribe,
            "resources/unsubscribe" => Self::Unsubscribe,
            "subscriptions/listen" => Self::Listen,
            _ => Self::Other,
        }
    }

    /// Whether the gateway serves it in the 2026-07-28 era (which removed `initialize`,
    /// `ping`, `logging/setLevel` and the resource subscriptions) or, `modern` false, in a
    /// 2025-11-25 session (which has no listen; `server/discover` is answered in both, as a
    /// client probing for the era sends it before it knows).
    pub fn served(self, modern: bool) -> bool {
        match self {
            Self::Initialize | Self::Ping | Self::SetLogLevel => !modern,
            Self::Subscribe | Self::Unsubscribe => !modern,
            Self::Listen => modern,
            Self::Discover | Self::List(_) | Self::Routed(_) => true,
            Self::Other => false,
        }
    }

    /// The name or URI a 2026-07-28 request routes by is in `params.name` (tools, prompts) or
    /// `params.uri` (a read), and its `Mcp-Name` header repeats it.
    pub fn routed_by(self) -> Option<&'static str> {
        match self {
            Self::Routed(Routed::CallTool | Routed::GetPrompt) => Some("name"),
            Self::Routed(Routed::ReadResource) => Some("uri"),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_era_serves_its_own_methods() {
        let modern = |name| Method::of(name).served(true);
        let session = |name| Method::of(name).served(false);
        for name in [
            "initialize",
            "ping",
            "logging/setLevel",
            "resources/subscribe",
        ] {
            assert!(session(name) && !modern(name), "{name}");
        }
        assert!(modern("subscriptions/listen") && !session("subscriptions/listen"));
        for name in ["tools/call", "tools/list", "tasks/cancel", "resources/read"] {
            assert!(session(name) && modern(name), "{name}");
        }
        assert!(!modern("sampling/createMessage") && !session("nothing/else"));
        assert_eq!(Method::of("resources/read").routed_by(), Some("uri"));
    }
}
