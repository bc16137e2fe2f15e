//! The stdio frame splitter (`read_frames`): arbitrary bytes, read in arbitrary chunks, against
//! the rule it implements, applied to the whole input at once: a frame is a line without its
//! `\n` and one trailing `\r`; blank lines are skipped; a line longer than the cap (after that
//! stripping) ends the stream with `TooLarge`, as does an unfinished line that can no longer fit;
//! an unfinished last line is dropped at the end of the input.
#![no_main]

use actix_mcp::fuzzing::{split_frames, FramesEnd};
use libfuzzer_sys::fuzz_target;

/// The input's layout (simple, so the seeds in `corpus/` are written by hand): the cap (one
/// byte), a count `n` and `n` read sizes, then the bytes to split.
#[derive(Debug)]
struct Input<'a> {
    cap: usize,
    cuts: &'a [u8],
    bytes: &'a [u8],
}

impl<'a> Input<'a> {
    fn read(data: &'a [u8]) -> Option<Self> {
        let (&cap, rest) = data.split_first()?;
        let (&n, rest) = rest.split_first()?;
        let n = usize::from(n).min(rest.len());
        // Small caps, so lines meet them often.
        Some(Input {
            cap: 1 + usize::from(cap % 64),
            cuts: &rest[..n],
            bytes: &rest[n..],
        })
    }
}

/// The rule, over the whole input.
fn expected(bytes: &[u8], cap: usize) -> (Vec<&[u8]>, FramesEnd) {
    let mut frames = Vec::new();
    let mut rest = bytes;
    while let Some(pos) = rest.iter().position(|&b| b == b'\n') {
        let mut line = &rest[..pos];
        rest = &rest[pos + 1..];
        if let Some(stripped) = line.strip_suffix(b"\r") {
            line = stripped;
        }
        if line.len() > cap {
            return (frames, FramesEnd::TooLarge);
        }
        if line.iter().any(|b| !b.is_ascii_whitespace()) {
            frames.push(line);
        }
    }
    // The unfinished last line: over the cap once it is longer than the cap plus a `\r` that a
    // `\n` may still follow.
    let could_fit = rest.len() <= cap || (rest.len() == cap + 1 && rest.last() == Some(&b'\r'));
    if could_fit {
        (frames, FramesEnd::Eof)
    } else {
        (frames, FramesEnd::TooLarge)
    }
}

fn chunks(bytes: &[u8], cuts: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut rest = bytes;
    for &cut in cuts {
        if rest.is_empty() {
            break;
        }
        let n = usize::from(cut).min(rest.len());
        out.push(rest[..n].to_vec());
        rest = &rest[n..];
    }
    if !rest.is_empty() {
        out.push(rest.to_vec());
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some(input) = Input::read(data) else {
        return;
    };
    let (frames, end) = split_frames(chunks(input.bytes, input.cuts), input.cap);
    for frame in &frames {
        assert!(
            !frame.contains(&b'\n'),
            "a frame holds a newline: {frame:?}"
        );
        assert!(frame.len() <= input.cap, "a frame over the cap: {frame:?}");
        assert!(
            frame.iter().any(|b| !b.is_ascii_whitespace()),
            "a blank frame"
        );
    }
    let (want_frames, want_end) = expected(input.bytes, input.cap);
    assert_eq!(
        frames.iter().map(|f| &f[..]).collect::<Vec<_>>(),
        want_frames,
        "frames differ from the whole-input split"
    );
    assert_eq!(end, want_end, "the end differs from the whole-input split");
});
