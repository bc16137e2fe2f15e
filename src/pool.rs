//! The process's arbiters for connections: a few threads (by default one per core), each running
//! an actix System, made at the first connection placed on them and kept for the life of the
//! process. A connection goes to the arbiter running the fewest, and stays there: its actor and
//! its transport's tasks share that thread. No thread is made per connection.

use std::sync::{
    atomic::{AtomicUsize, Ordering},
    Arc, Mutex, OnceLock, PoisonError,
};

use actix_rt::ArbiterHandle;

use crate::error::Error;

/// The size asked for before the pool was made (0: one per core).
static SIZE: AtomicUsize = AtomicUsize::new(0);
static POOL: OnceLock<Pool> = OnceLock::new();
/// Makes the pool once, even when many connections ask for it at the same time.
static MAKING: Mutex<()> = Mutex::new(());

/// Sets how many arbiters the pool has (at least 1), before it is made; `false` if it was made
/// already (its size then stays). By default one per core.
pub fn set_pool_size(arbiters: usize) -> bool {
    SIZE.store(arbiters.max(1), Ordering::Relaxed);
    POOL.get().is_none()
}

/// How many connections run on each of the pool's arbiters now (empty until the pool is made).
pub fn pool_load() -> Vec<usize> {
    POOL.get().map_or_else(Vec::new, |pool| {
        pool.members
            .iter()
            .map(|m| m.load.load(Ordering::Relaxed))
            .collect()
    })
}

/// One arbiter of the pool and how many connections run on it.
struct Member {
    handle: ArbiterHandle,
    load: Arc<AtomicUsize>,
}

pub(crate) struct Pool {
    members: Vec<Member>,
}

/// A connection's place on an arbiter of the pool: counted there until it is dropped (with the
/// connection's actor).
#[derive(Debug)]
pub(crate) struct Lease {
    load: Arc<AtomicUsize>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.load.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Pool {
    /// The process's pool, made at the first call.
    pub(crate) fn get() -> Result<&'static Pool, Error> {
        if let Some(pool) = POOL.get() {
            return Ok(pool);
        }
        let _making = MAKING.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(pool) = POOL.get() {
            return Ok(pool);
        }
        let pool = Pool::make(size())?;
        Ok(POOL.get_or_init(|| pool))
    }

    fn make(size: usize) -> Result<Pool, Error> {
        let members = (0..size)
            .map(|i| {
                Ok(Member {
                    handle: start_arbiter(i)?,
                    load: Arc::default(),
                })
            })
            .collect::<Result<_, Error>>()?;
        Ok(Pool { members })
    }

    /// The arbiter with the fewest connections, and the new connection's lease on it.
    pub(crate) fn place(&self) -> (ArbiterHandle, Lease) {
        let member = self
            .members
            .iter()
            .min_by_key(|m| m.load.load(Ordering::Relaxed));
        #[allow(clippy::expect_used, reason = "`make` starts at least one arbiter")]
        let member = member.expect("a pool has at least one arbiter");
        member.load.fetch_add(1, Ordering::Relaxed);
        let lease = Lease {
            load: member.load.clone(),
        };
        (member.handle.clone(), lease)
    }
}

fn size() -> usize {
    match SIZE.load(Ordering::Relaxed) {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
}

/// A thread running an actix System for the life of the process; its arbiter's handle.
fn start_arbiter(i: usize) -> Result<ArbiterHandle, Error> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name(format!("actix-mcp-{i}"))
        .spawn(move || {
            let system = actix_rt::System::new();
            let handle = system.block_on(async { actix_rt::Arbiter::current() });
            if tx.send(handle).is_ok() {
                let _ = system.run();
            }
        })
        .map_err(|e| Error::transport("cannot start the connection pool's thread", e))?;
    rx.recv().map_err(|_| {
        Error::transport(
            "the connection pool's thread did not start",
            std::io::Error::other("no arbiter"),
        )
    })
}
