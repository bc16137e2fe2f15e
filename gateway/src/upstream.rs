//! What every downstream session shares: the upstream servers of the config (one connection
//! each), what the config lets each offer (`tools` and `prompts`: allow, deny, rename), and the
//! registry through which their requests find the session that can answer them.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
};

use actix_mcp::{
    auth::CredentialStore,
    config::{Access, Decision, Exposure, ItemKind},
    Client, Config, LoggingLevel, Servers,
};

use crate::{
    names::Naming,
    owner::Caller,
    pins_file::PinsFile,
    routes::{Offers, Routes},
    server_requests::Downstream,
    subscriptions::Subscribers,
};

#[derive(Clone)]
pub struct Upstream {
    pub servers: Servers,
    pub downstream: Downstream,
    offered: Arc<HashMap<String, Offered>>,
    /// Some server has `access` rules: lists are filtered per caller, calls checked.
    pub guarded: bool,
    /// Where each routed request's record goes (`--audit`; nowhere by default).
    pub audit: crate::audit::Audit,
    /// The pinned catalogues (`--pins`), if pinning is on.
    pub pins: Option<Arc<PinsFile>>,
    /// The servers reached with each user's own grant, and their users' connections.
    pub users: Arc<crate::users::Users>,
    /// The most verbose log level any session asked for: what the upstream servers are asked
    /// for (each session filters to its own).
    log_floor: Arc<Mutex<Option<LoggingLevel>>>,
    /// Who is subscribed to which resource of which server.
    subscribers: Arc<Mutex<Subscribers>>,
    /// How the tools and prompts are named (`--names`).
    pub naming: Naming,
    /// With `--replicas`: this replica's part in the shared store.
    pub replicas: Option<Arc<crate::replicas::Replicas>>,
    /// The routes of the last catalogue, shared by every session and stateless call: made once
    /// per catalogue change, not once per request.
    routes: Arc<Mutex<Made>>,
}

/// The routes made, and which change of the catalogue they are of.
#[derive(Default)]
struct Made {
    routes: Option<Arc<Routes>>,
    changes: u64,
}

/// One server's `tools`, `prompts` and `access` of the config.
struct Offered {
    tools: Exposure,
    prompts: Exposure,
    access: Option<Access>,
}

/// What a server the config does not name offers: everything, under its own names.
static EVERYTHING: std::sync::LazyLock<Exposure> = std::sync::LazyLock::new(Exposure::default);

impl Upstream {
    /// The config's servers, each with the handlers that carry its requests (sampling,
    /// elicitation, roots) to the downstream session that can answer them. Nothing starts yet.
    pub fn from_config(config: &Config, store: Arc<dyn CredentialStore>, naming: Naming) -> Self {
        // No upstream timeout of the gateway's own: the downstream client's timeout, carried as
        // its cancel, is the one.
        let mut base = Client::builder().no_request_timeout();
        if let Some(meter) = actix_mcp_programs::telemetry::meter() {
            base = base.metrics(meter);
        }
        let servers = Servers::new(base.clone());
        let downstream = Downstream::default();
        let mut offered = HashMap::new();
        let mut per_user = Vec::new();
        for server in &config.servers {
            let options = downstream.handlers(&server.name, server.connect_options(&base));
            per_user.push((server.clone(), options.clone()));
            let (described, store) = (server.clone(), store.clone());
            servers.add_with(
                server.name.clone(),
                Some(options),
                server.enabled,
                move || described.transport_with_store(store.clone()),
            );
            let exposure = Offered {
                tools: server.tools.clone(),
                prompts: server.prompts.clone(),
                access: server.access.clone(),
            };
            offered.insert(server.name.clone(), exposure);
        }
        let guarded = offered.values().any(|o: &Offered| o.access.is_some());
        let users = Arc::new(crate::users::Users::new(store, per_user));
        Self {
            users,
            servers,
            downstream,
            guarded,
            audit: crate::audit::Audit::default(),
            pins: None,
            offered: Arc::new(offered),
            log_floor: Arc::default(),
            subscribers: Arc::default(),
            naming,
            replicas: None,
            routes: Arc::default(),
        }
    }

    fn made(&self) -> std::sync::MutexGuard<'_, Made> {
        self.routes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every ready server's lists under the gateway's names, and where each name goes: those
    /// made last, unless the catalogue changed since.
    pub async fn routes(&self) -> Arc<Routes> {
        let changes = {
            let made = self.made();
            if let Some(routes) = &made.routes {
                return routes.clone();
            }
            made.changes
        };
        let mut catalogue = self.servers.catalogue().await;
        if let Some(pins) = &self.pins {
            self.vet(pins, &mut catalogue);
        }
        let routes = Arc::new(Routes::of(&catalogue, self));
        let mut made = self.made();
        // Made of a catalogue that changed meanwhile: used once, not kept.
        if made.changes == changes {
            made.routes = Some(routes.clone());
        }
        routes
    }

    /// Whether `caller` may use `name` (a URI for a resource) of `server`, by its `access`
    /// rules (a server without rules: yes).
    pub fn decide(&self, caller: &Caller, server: &str, kind: ItemKind, name: &str) -> Decision {
        let access = self.offered.get(server).and_then(|o| o.access.as_ref());
        match access {
            None => Decision::Allowed,
            Some(access) => access.decide(&caller.as_access(), kind, name),
        }
    }

    /// `catalogue` as the pins let it be served; what they newly hold is reported (a warning,
    /// an audit record, a metric). Pins that cannot be read serve nothing: pinning fails closed.
    fn vet(&self, pins: &PinsFile, catalogue: &mut actix_mcp::Catalogue) {
        let reports = match pins.vet(catalogue) {
            Ok(reports) => reports,
            Err(e) => {
                tracing::error!("the pins cannot be read or written, nothing is served: {e}");
                eprintln!("actix-mcp-gateway: pins: {e}; nothing is served until they can be");
                catalogue.tools.clear();
                catalogue.prompts.clear();
                catalogue.resources.clear();
                catalogue.resource_templates.clear();
                return;
            }
        };
        for report in reports {
            let what = match &report.replaces {
                Some(_) => "a pinned definition changed",
                None => "a new item of a pinned server",
            };
            tracing::warn!(server = %report.server, item = %report.key, "{what}: held until approved");
            eprintln!(
                "actix-mcp-gateway: {what}: {} of {}, held until approved \
                 (actix-mcp-gateway pins approve {})",
                actix_mcp::visible::visible(&report.key),
                actix_mcp::visible::visible(&report.server),
                actix_mcp::visible::visible(&report.server),
            );
            let server = [("mcp.server.name", report.server.clone())];
            actix_mcp_programs::telemetry::count("mcp.gateway.pins.held", &server);
            self.audit.record(crate::audit::Record::held(&report));
        }
    }

    /// A server's lists changed, or it connected or went away: the routes are made anew.
    pub fn catalogue_changed(&self) {
        let mut made = self.made();
        made.changes += 1;
        made.routes = None;
    }

    /// The level the upstream servers are asked to log at, if any session asked.
    pub fn log_floor(&self) -> Option<LoggingLevel> {
        *self
            .log_floor
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A session asks for logs at `level`: whether the upstream servers must now be asked for
    /// more than before.
    pub fn lower_log_floor(&self, level: LoggingLevel) -> bool {
        let mut floor = self
            .log_floor
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if floor.is_some_and(|floor| floor <= level) {
            return false;
        }
        *floor = Some(level);
        true
    }

    /// The resource subscriptions of every session.
    pub fn subscribers(&self) -> std::sync::MutexGuard<'_, Subscribers> {
        self.subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A session no longer subscribes to `uri` of `server`: the server is told if no session
    /// does any more.
    pub async fn release(&self, server: &str, uri: &str) {
        if !self.subscribers().leave(server, uri) {
            return;
        }
        if let Ok(client) = self.servers.client(server).await {
            let _ = client.unsubscribe_resource(uri).await;
        }
    }
}

impl Offers for Upstream {
    /// What `server` offers of its tools, and as what.
    fn tools_of(&self, server: &str) -> &Exposure {
        self.offered.get(server).map_or(&EVERYTHING, |o| &o.tools)
    }

    /// What `server` offers of its prompts, and as what.
    fn prompts_of(&self, server: &str) -> &Exposure {
        self.offered.get(server).map_or(&EVERYTHING, |o| &o.prompts)
    }

    fn naming(&self) -> Naming {
        self.naming
    }
}
