// Reading what the official conformance suite prints, for `tests/conformance.rs` and
// `gateway/tests/conformance.rs`.

/// What the suite printed: its stdout, then its stderr.
pub fn report(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr)
}

/// One scenario's verdict line (`Passed: N/M, 0 failed, 0 warnings`), and whether it says every
/// check passed, with at least one check run.
pub fn scenario_verdict(report: &str) -> (String, bool) {
    let line = report
        .lines()
        .find(|l| l.starts_with("Passed: "))
        .unwrap_or_default()
        .to_owned();
    let counts = line
        .trim_start_matches("Passed: ")
        .split(',')
        .next()
        .and_then(|n| n.split_once('/'))
        .and_then(|(n, m)| Some((n.trim().parse::<u32>().ok()?, m.trim().parse::<u32>().ok()?)));
    let passed =
        counts.is_some_and(|(n, m)| n == m && m > 0) && line.ends_with(" 0 failed, 0 warnings");
    (line, passed)
}
