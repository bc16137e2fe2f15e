//! `actix-mcp-gateway pins --pins FILE list|approve`: what the pins hold for approval (each
//! held definition beside the pinned one it would replace), and approving it. The running
//! gateway sees an approval within a second and tells its clients their lists changed.

use std::{path::Path, process::ExitCode};

use actix_mcp::visible::visible;
use serde_json::Value;

use crate::pins_file::locked;

#[derive(clap::Subcommand)]
pub enum Action {
    /// Every held definition, by server.
    List,
    /// Approves what SERVER holds (only ITEMs, as `list` names them, if any are given).
    Approve {
        server: String,
        #[arg(value_name = "ITEM")]
        items: Vec<String>,
    },
}

pub fn run(path: &Path, action: &Action) -> ExitCode {
    let done = match action {
        Action::List => locked(path, |pins| {
            let mut any = false;
            for (server, held) in pins.servers.iter().filter(|(_, p)| !p.held.is_empty()) {
                println!("{}:", visible(server));
                for (key, change) in &held.held {
                    any = true;
                    let pinned = held.pinned.get(key).map(|p| &p.definition);
                    println!("  {}", describe(key, &change.definition, pinned));
                }
            }
            if !any {
                println!("nothing is held");
            }
        }),
        Action::Approve { server, items } => locked(path, |pins| {
            let approved = pins.approve(server, items);
            for key in &approved {
                println!("approved {} of {}", visible(key), visible(server));
            }
            approved.len()
        })
        .map(|approved| {
            if approved == 0 {
                println!("nothing held for {} matched", visible(server));
            }
        }),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("actix-mcp-gateway: pins: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One held item: new, or changed, with its description then and now (control characters
/// made visible: a server wrote them).
fn describe(key: &str, held: &Value, pinned: Option<&Value>) -> String {
    let description = |definition: &Value| {
        let text = definition["description"].as_str().unwrap_or("(none)");
        format!("\"{}\"", visible(text))
    };
    match pinned {
        None => format!("{} (new): {}", visible(key), description(held)),
        Some(pinned) => format!(
            "{} (changed): {} -> {}",
            visible(key),
            description(pinned),
            description(held)
        ),
    }
}
