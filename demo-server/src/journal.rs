//! The journal of everything read, and SIGTERM (journalled, otherwise ignored, with
//! `--ignore-sigterm`).

use std::{fs::File, io, io::Write as _, path::Path, rc::Rc};

use crate::SERVER_NAME;

/// Synchronous, unbuffered record of every input line, so tests can see exactly what the
/// client sent even if the process is killed a moment later.
pub(crate) struct Journal {
    file: Option<File>,
}

impl Journal {
    pub(crate) fn create(path: Option<&Path>) -> io::Result<Self> {
        let file = path.map(File::create).transpose()?;
        Ok(Self { file })
    }

    pub(crate) fn record(&self, line: &[u8]) {
        let Some(file) = &self.file else { return };
        // One write_all per entry keeps an entry in one piece.
        let mut entry = Vec::with_capacity(line.len() + 1);
        entry.extend_from_slice(line);
        entry.push(b'\n');
        if let Err(err) = (&*file).write_all(&entry) {
            eprintln!("{SERVER_NAME}: journal write failed: {err}");
        }
    }
}

/// SIGTERM, caught (on unix; elsewhere there is nothing to catch).
#[cfg(unix)]
pub(crate) type Sigterm = tokio::signal::unix::Signal;
#[cfg(not(unix))]
pub(crate) type Sigterm = std::convert::Infallible;

/// Catches SIGTERM from now on. Needs the runtime's context.
#[cfg(unix)]
pub(crate) fn catch_sigterm() -> io::Result<Sigterm> {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
}

#[cfg(not(unix))]
pub(crate) fn catch_sigterm() -> io::Result<Sigterm> {
    Err(io::Error::other("no SIGTERM on this platform"))
}

/// Journals each SIGTERM (signals arriving before the last one was seen coalesce) and
/// otherwise ignores it.
#[cfg(unix)]
pub(crate) async fn watch_sigterm(mut sigterm: Sigterm, journal: Rc<Journal>) {
    while sigterm.recv().await.is_some() {
        eprintln!("{SERVER_NAME}: SIGTERM received and ignored");
        journal.record(b"#SIGTERM");
    }
}

#[cfg(not(unix))]
pub(crate) async fn watch_sigterm(sigterm: Sigterm, _journal: Rc<Journal>) {
    match sigterm {}
}
