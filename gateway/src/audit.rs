//! The audit trail (`--audit FILE|-`): one JSON line per routed request (a tool call, a prompt,
//! a read, a completion), written by a thread of its own so that no request waits on the disk:
//! when, who (issuer and subject), which session, which server and item, a digest of the
//! arguments, how it ended (answered, a tool's error, an error and its code, refused by the
//! access rules, cancelled and by what), and how long it took. Never a token, never an
//! argument's value. Each record is also an OpenTelemetry log record when the standard
//! environment asks for log export.

use std::{
    io::Write as _,
    path::PathBuf,
    sync::mpsc,
    time::{Duration, SystemTime},
};

use serde::Serialize;
use serde_json::Value;
use sha2::Digest as _;

use crate::owner::Owner;

/// Where records go: nowhere (no `--audit`), or to the writer thread.
#[derive(Clone, Default)]
pub struct Audit {
    records: Option<mpsc::Sender<Record>>,
}

/// Where the writer writes.
pub enum Sink {
    Stdout,
    File(PathBuf),
}

impl Sink {
    /// `-` for stdout, else a file (appended to).
    pub fn parse(written: &str) -> Self {
        match written {
            "-" => Self::Stdout,
            path => Self::File(PathBuf::from(path)),
        }
    }
}

/// How a routed request ended.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Answered with a result.
    Answered,
    /// Answered with a result that reports the tool's own failure (`isError: true`).
    ToolError,
    /// Answered with an error (its JSON-RPC code).
    Error { code: i64 },
    /// Refused by the access rules before anything went upstream.
    Refused,
    /// Cancelled: by the client (a cancel, its POST gone), its session's end, the gateway's stop.
    Cancelled { by: String },
    /// A user's grant at an upstream server, signed in through the gateway.
    Granted,
    /// A sign-in through the gateway that did not end in a grant, and why.
    NotGranted { why: String },
    /// A definition held by the pins until approved: its digest, and the pinned one it replaces
    /// (none for a new name).
    Held {
        sha256: String,
        replaces: Option<String>,
    },
}

/// One record, as written.
#[derive(Serialize, Debug, Clone)]
pub struct Record {
    /// RFC 3339, UTC, milliseconds.
    pub time: String,
    pub event: &'static str,
    pub issuer: Option<String>,
    pub subject: Option<String>,
    /// The 2025-11-25 session (`Mcp-Session-Id`); none for a 2026-07-28 request or stdio.
    pub session: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    pub server: Option<String>,
    /// The tool or prompt (the server's own name), or the resource's URI.
    pub item: Option<String>,
    /// SHA-256 of the arguments' JSON, hex; none without arguments.
    pub arguments_sha256: Option<String>,
    #[serde(flatten)]
    pub outcome: Outcome,
    pub duration_ms: f64,
}

impl Record {
    /// A record of `method`, for `owner`, that took `took`.
    pub fn call(owner: &Owner, method: &str, outcome: Outcome, took: Duration) -> Self {
        let (issuer, subject) = match owner {
            Owner::Anonymous => (None, None),
            Owner::User { issuer, subject } => {
                (Some(issuer.to_string()), Some(subject.to_string()))
            }
        };
        Self {
            time: rfc3339(SystemTime::now()),
            event: "call",
            issuer,
            subject,
            session: None,
            method: Some(method.to_owned()),
            server: None,
            item: None,
            arguments_sha256: None,
            outcome,
            duration_ms: took.as_secs_f64() * 1000.0,
        }
    }
}

impl Record {
    /// A sign-in of `owner` (if known) at `server` through the gateway.
    pub fn sign_in(owner: Option<&Owner>, server: Option<&str>, outcome: Outcome) -> Self {
        let mut record = Self::call(
            owner.unwrap_or(&Owner::Anonymous),
            "",
            outcome,
            Duration::ZERO,
        );
        record.event = "sign_in";
        record.method = None;
        record.server = server.map(str::to_owned);
        record
    }

    /// A definition the pins hold until approved (`item`: `kind/name`).
    pub fn held(report: &crate::pins_file::Report) -> Self {
        let outcome = Outcome::Held {
            sha256: report.sha256.clone(),
            replaces: report.replaces.clone(),
        };
        let mut record = Self::call(&Owner::Anonymous, "", outcome, Duration::ZERO);
        record.event = "pin";
        record.method = None;
        record.server = Some(report.server.clone());
        record.item = Some(report.key.clone());
        record
    }
}

/// SHA-256 of `arguments`' JSON, hex (none for null).
pub fn digest(arguments: &Value) -> Option<String> {
    if arguments.is_null() {
        return None;
    }
    let digest = sha2::Sha256::digest(arguments.to_string().as_bytes());
    Some(digest.iter().map(|byte| format!("{byte:02x}")).collect())
}

fn rfc3339(at: SystemTime) -> String {
    let at = time::OffsetDateTime::from(at);
    let millis = at.nanosecond() / 1_000_000 * 1_000_000;
    let at = at.replace_nanosecond(millis).unwrap_or(at);
    let format = time::format_description::well_known::Rfc3339;
    at.format(&format).unwrap_or_default()
}

impl Audit {
    /// Records go to `sink`, written by a thread of its own (the file opened here, appended to).
    pub fn start(sink: Sink) -> std::io::Result<Self> {
        let mut out: Box<dyn std::io::Write + Send> = match sink {
            Sink::Stdout => Box::new(std::io::stdout()),
            Sink::File(path) => Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?,
            ),
        };
        let (records, received) = mpsc::channel::<Record>();
        let logger = actix_mcp_programs::telemetry::logger();
        std::thread::Builder::new()
            .name("audit".into())
            .spawn(move || {
                // Each record as it comes, a flush when none waits: a crash loses none written.
                while let Ok(record) = received.recv() {
                    write(&mut out, &record, logger.as_deref());
                    while let Ok(record) = received.try_recv() {
                        write(&mut out, &record, logger.as_deref());
                    }
                    if let Err(e) = out.flush() {
                        tracing::error!("the audit trail cannot be written: {e}");
                    }
                }
            })?;
        Ok(Self {
            records: Some(records),
        })
    }

    pub fn is_on(&self) -> bool {
        self.records.is_some()
    }

    pub fn record(&self, record: Record) {
        if let Some(records) = &self.records {
            let _ = records.send(record);
        }
    }
}

fn write(
    out: &mut Box<dyn std::io::Write + Send>,
    record: &Record,
    logger: Option<&actix_mcp_programs::telemetry::AuditLogger>,
) {
    let Ok(line) = serde_json::to_string(record) else {
        return;
    };
    if let Err(e) = writeln!(out, "{line}") {
        tracing::error!("the audit trail cannot be written: {e}");
    }
    if let (Some(logger), Ok(Value::Object(fields))) = (logger, serde_json::to_value(record)) {
        logger.emit("actix-mcp-gateway.audit", &fields);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_record_names_who_and_what_but_never_an_argument() {
        let owner = Owner::user("https://issuer", "alice");
        let mut record = Record::call(
            &owner,
            "tools/call",
            Outcome::Cancelled {
                by: "the downstream client".into(),
            },
            Duration::from_millis(12),
        );
        record.arguments_sha256 = digest(&json!({"secret": "hunter2"}));
        let line = serde_json::to_string(&record).unwrap();
        let read: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(read["subject"], "alice");
        assert_eq!(read["issuer"], "https://issuer");
        assert_eq!(read["outcome"], "cancelled");
        assert_eq!(read["by"], "the downstream client");
        assert_eq!(read["duration_ms"], 12.0);
        assert!(!line.contains("hunter2"), "{line}");
        assert_eq!(read["arguments_sha256"].as_str().unwrap().len(), 64);
        let time = read["time"].as_str().unwrap();
        assert!(
            time.ends_with('Z') && time.len() <= "2026-12-06T19:04:18.175Z".len(),
            "{time}"
        );
        assert_eq!(digest(&Value::Null), None);
    }

    #[test]
    fn an_error_keeps_its_code_and_an_answer_says_only_that() {
        let owner = Owner::Anonymous;
        let error = Record::call(
            &owner,
            "prompts/get",
            Outcome::Error { code: -32602 },
            Duration::ZERO,
        );
        let read = serde_json::to_value(&error).unwrap();
        assert_eq!(
            (read["outcome"].clone(), read["code"].clone()),
            (json!("error"), json!(-32602))
        );
        assert_eq!(read["subject"], Value::Null);
        let answered = Record::call(&owner, "tools/call", Outcome::Answered, Duration::ZERO);
        assert_eq!(
            serde_json::to_value(&answered).unwrap()["outcome"],
            "answered"
        );
    }
}
