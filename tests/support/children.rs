//! This process's child processes still running, from `/proc` (Linux): what a manager's
//! `stop()` must leave none of. Shared by the tests and the benchmark.

/// How many processes have this one as their parent.
pub fn children() -> usize {
    let me = std::process::id().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("status")).ok())
        .filter(|status| {
            status
                .lines()
                .any(|line| line.strip_prefix("PPid:").map(str::trim) == Some(me.as_str()))
        })
        .count()
}
