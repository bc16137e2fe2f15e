//! One downstream client over stdio: a JSON-RPC message per line on stdin, answers per line on
//! stdout. At the end of stdin the client is gone: what it left in flight is cancelled upstream.
//! What waits for stdout is bounded (`outbox.rs`): a client that stops reading while the gateway
//! has more for it is taken as gone too. A line longer than the bound is refused, not kept.

use std::{cell::RefCell, rc::Rc};

use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};

use crate::{outbound::Outbound, outbox, session::Session, upstream::Upstream};

/// What may wait unread on stdout, and the longest line taken from stdin.
const BOUND: usize = 16 << 20;

const FELL_BEHIND: &str = "the downstream client did not read its stdout";

pub async fn serve(
    upstream: Upstream,
    changes: tokio::sync::broadcast::Sender<crate::changes::Event>,
) -> std::io::Result<()> {
    let (out, lines) = outbox::channel(BOUND);
    let written = write_lines(lines);
    let (fell_behind, behind) = oneshot::channel::<()>();
    let fell_behind = RefCell::new(Some(fell_behind));
    let answers: crate::session::Answers = Rc::new(move |answer: Outbound, _: Option<&Value>| {
        if out.send(&answer).is_err() {
            // Told once; the session then ends.
            if let Some(told) = fell_behind.borrow_mut().take() {
                let _ = told.send(());
            }
        }
    });
    let answers_out = answers.clone();
    let session = Session::start(
        upstream,
        answers,
        Some(&changes),
        crate::owner::Caller::anonymous(),
    );
    let mut stdin = read_lines();
    let mut behind = std::pin::pin!(behind);
    let why = loop {
        let line = tokio::select! {
            line = stdin.recv() => line,
            Ok(()) = &mut behind => break FELL_BEHIND,
        };
        let line = match line {
            None => break "the downstream client went away",
            Some(Line::Read(line)) => line,
            Some(Line::TooLong) => {
                let why = format!("a line over {BOUND} bytes");
                let refusal = json!({"jsonrpc": "2.0", "id": null,
                    "error": {"code": -32600, "message": why}});
                (answers_out)(refusal.into(), None);
                continue;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        match crate::message::parse(line.as_bytes()) {
            Ok(message) => session.message(message),
            Err(refusal) => {
                tracing::warn!("a downstream line that is not a JSON-RPC message was refused");
                (answers_out)(refusal.into(), None);
            }
        }
    };
    session.end(why).await;
    drop((session, answers_out));
    // The writer ends once it wrote what is left; a client that does not read gets nothing more.
    if why != FELL_BEHIND {
        let _ = written.await;
    }
    Ok(())
}

/// Writes `lines` to stdout, each followed by a newline, on a thread of its own (a write blocked
/// on a client that does not read must not keep the gateway from ending): resolves when it is done.
fn write_lines(mut lines: outbox::Inbox) -> oneshot::Receiver<()> {
    use std::io::Write as _;
    let (done, written) = oneshot::channel();
    std::thread::spawn(move || {
        let mut stdout = std::io::stdout().lock();
        while let Some(line) = futures::executor::block_on(lines.recv()) {
            let wrote = stdout
                .write_all(&line.json)
                .and_then(|()| stdout.write_all(b"\n"));
            if wrote.and_then(|()| stdout.flush()).is_err() {
                break;
            }
        }
        let _ = done.send(());
    });
    written
}

/// A line of stdin, or one that was too long (skipped to its end).
enum Line {
    Read(String),
    TooLong,
}

/// Stdin's lines, read on a thread of its own: a client that stops reading its stdout may keep
/// its stdin open, and a read blocked there must not keep the gateway from ending (a runtime's
/// blocking reader would be waited for). Few lines wait at once: the client waits for the rest.
fn read_lines() -> mpsc::Receiver<Line> {
    let (lines, read) = mpsc::channel(16);
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        while let Ok(Some(line)) = bounded_line(&mut stdin, BOUND) {
            if lines.blocking_send(line).is_err() {
                return;
            }
        }
    });
    read
}

/// The next line of `reader` (`None` at its end), at most `max` bytes: a longer one is read to
/// its end and dropped.
fn bounded_line(reader: &mut impl std::io::BufRead, max: usize) -> std::io::Result<Option<Line>> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let available = reader.fill_buf()?;
        if available.is_empty() {
            return Ok((!line.is_empty() || too_long).then(|| finish(line, too_long)));
        }
        let (taken, ended) = match available.iter().position(|b| *b == b'\n') {
            Some(at) => (at + 1, true),
            None => (available.len(), false),
        };
        let content = &available[..if ended { taken - 1 } else { taken }];
        too_long |= line.len() + content.len() > max;
        if !too_long {
            line.extend_from_slice(content);
        }
        reader.consume(taken);
        if ended {
            return Ok(Some(finish(line, too_long)));
        }
    }
}

fn finish(line: Vec<u8>, too_long: bool) -> Line {
    match too_long {
        true => Line::TooLong,
        false => Line::Read(String::from_utf8_lossy(&line).into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_whole_and_a_long_one_is_dropped_to_its_end() {
        let mut input = std::io::Cursor::new(b"short\nthis one is too long\nlast".to_vec());
        let mut next = || bounded_line(&mut input, 8).expect("read");
        assert!(matches!(next(), Some(Line::Read(l)) if l == "short"));
        assert!(matches!(next(), Some(Line::TooLong)));
        assert!(matches!(next(), Some(Line::Read(l)) if l == "last"));
        assert!(next().is_none());
    }
}
