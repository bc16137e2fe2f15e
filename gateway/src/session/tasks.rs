//! The requests a session hands to one server as they are: tasks (2025-11-25 `params.task`,
//! then `tasks/*` by the session's ids) and `completion/complete`.

use actix_mcp::Error;
use serde_json::{json, Value};

use crate::method::Task;

use super::Session;
use crate::{
    replies::{Refusal, INTERNAL_ERROR},
    routes::Routes,
};

impl Session {
    /// `completion/complete` for a prompt (by its gateway name) or a resource template (by its
    /// `uriTemplate`), asked of the server that lists it, under the server's own name.
    pub(super) async fn complete(
        &self,
        id: &Value,
        params: &Value,
        routes: &Routes,
        token: &actix_mcp::Cancellation,
    ) -> Result<Value, Refusal> {
        let reference = &params["ref"];
        let mut upstream_params = params.clone();
        let server = match reference["type"].as_str() {
            Some("ref/prompt") => {
                let name = reference["name"].as_str().unwrap_or_default();
                let (server, prompt) = routes
                    .prompts
                    .route(name)
                    .ok_or_else(|| Refusal::params(format!("no prompt named {name:?}")))?;
                upstream_params["ref"]["name"] = json!(prompt);
                server
            }
            Some("ref/resource") => {
                let uri = reference["uri"].as_str().unwrap_or_default();
                let server = routes
                    .templates
                    .get(uri)
                    .or_else(|| routes.resources.get(uri));
                server.ok_or_else(|| Refusal::params(format!("no resource template {uri:?}")))?
            }
            _ => {
                return Err(Refusal::params(
                    "ref must be a ref/prompt or a ref/resource",
                ))
            }
        };
        let _in_flight = self.upstream.downstream.call_begins(self.key, server, id);
        let client = self.upstream_client(server).await?;
        // The downstream's `_meta` (its era's envelope) is the gateway's to read; the upstream
        // request carries only its trace context.
        if let Some(params) = upstream_params.as_object_mut() {
            params.remove("_meta");
        }
        let call = client.request::<Value>("completion/complete", upstream_params);
        let call = call.meta(super::trace_context(params));
        call.cancellation(token)
            .await
            .map_err(|e| Refusal::from_error(&e))
    }

    /// A `tools/call` run as a task (2025-11-25 `params.task`): the upstream server makes the
    /// task; the downstream client gets it under the session's id for it.
    pub(super) async fn start_task(
        &self,
        id: &Value,
        params: &Value,
        routes: &Routes,
        token: &actix_mcp::Cancellation,
    ) -> Result<Value, Refusal> {
        let (server, tool) = super::routed_tool(routes, params)?;
        let _in_flight = self.upstream.downstream.call_begins(self.key, server, id);
        let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
        let client = self.upstream_client(server).await?;
        let call = client.call_tool(tool, arguments).cancellation(token);
        let call = match params["task"]["ttl"].as_u64() {
            Some(ms) => call.task_ttl(std::time::Duration::from_millis(ms)),
            None => call.as_task(),
        };
        let failed = |e: Error| Refusal::from_error(&e);
        let handle = call.start_task().await.map_err(failed)?;
        let task = handle.get().await.map_err(failed)?;
        // With replicas, its id names this replica: a request of it reaching another comes here.
        let server_here = crate::replicas::here_named(self.upstream.replicas.as_ref(), server);
        let known_as = self
            .state
            .borrow_mut()
            .upstream_tasks
            .adopt(&server_here, handle);
        Ok(json!({"task": crate::tasks::shown(&task, &known_as)}))
    }

    /// `tasks/get`, `tasks/result`, `tasks/cancel` of one of the session's tasks, passed to its
    /// server; `tasks/list`: the session's tasks, each as its server has it now.
    pub(super) async fn task(
        &self,
        asked: Task,
        params: &Value,
        token: &actix_mcp::Cancellation,
    ) -> Result<Value, Refusal> {
        let failed = |e: Error| Refusal::from_error(&e);
        if asked == Task::List {
            let all = self.state.borrow().upstream_tasks.all();
            let mut tasks = Vec::with_capacity(all.len());
            for (known_as, handle) in all {
                if let Ok(task) = handle.get().await {
                    tasks.push(crate::tasks::shown(&task, &known_as));
                }
            }
            return Ok(json!({ "tasks": tasks }));
        }
        let known_as = params["taskId"].as_str().unwrap_or_default();
        let handle = self.state.borrow().upstream_tasks.get(known_as);
        let handle = handle.ok_or_else(|| Refusal::params(format!("no task {known_as:?}")))?;
        match asked {
            Task::Get => Ok(crate::tasks::shown(
                &handle.get().await.map_err(failed)?,
                known_as,
            )),
            Task::Cancel => Ok(crate::tasks::shown(
                &handle.cancel().await.map_err(failed)?,
                known_as,
            )),
            Task::Result | Task::List => {
                // Waits for the task's end; the downstream client may give up the wait (its
                // cancel ends the wait, not the task).
                let result = tokio::select! {
                    result = handle.result() => result.map_err(failed)?,
                    () = token.cancelled() => return Err(Refusal(INTERNAL_ERROR, "cancelled".into(), None)),
                };
                let mut result = serde_json::to_value(result)
                    .map_err(|e| Refusal(INTERNAL_ERROR, e.to_string(), None))?;
                result["_meta"]["io.modelcontextprotocol/related-task"] =
                    json!({"taskId": known_as});
                Ok(result)
            }
        }
    }
}
