//! The HTTP transport's answer path: the headers it reads (`Content-Type`, `WWW-Authenticate`)
//! and the bodies, a JSON body (one message or a batch, as the connection routes it) or an event
//! stream (`eventsource-stream` under our cap), in arbitrary chunks. Never a panic; the events
//! read do not depend on how the body was chunked.
#![no_main]

use actix_mcp::auth::Challenge;
use actix_mcp::fuzzing::{body_messages, media_type, read_event_stream};
use libfuzzer_sys::fuzz_target;

/// The input's layout (simple, so the seeds in `corpus/` are written by hand): `Content-Type`
/// and `WWW-Authenticate` (each a length byte and the bytes), the cap on one event (one byte), a
/// count `n` and `n` chunk sizes, then the body.
#[derive(Debug)]
struct Input<'a> {
    content_type: &'a [u8],
    www_authenticate: &'a [u8],
    limit: usize,
    cuts: &'a [u8],
    body: &'a [u8],
}

fn take<'a>(data: &mut &'a [u8]) -> Option<&'a [u8]> {
    let (&n, rest) = data.split_first()?;
    let n = usize::from(n).min(rest.len());
    let (taken, rest) = rest.split_at(n);
    *data = rest;
    Some(taken)
}

impl<'a> Input<'a> {
    fn read(mut data: &'a [u8]) -> Option<Self> {
        let content_type = take(&mut data)?;
        let www_authenticate = take(&mut data)?;
        let (&limit, mut rest) = data.split_first()?;
        let cuts = take(&mut rest)?;
        Some(Input {
            content_type,
            www_authenticate,
            limit: 1 + usize::from(limit),
            cuts,
            body: rest,
        })
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
    if let Some(media) = media_type(input.content_type) {
        assert!(!media.contains(';'), "parameters are cut off: {media:?}");
        assert_eq!(media, media.trim(), "the media type is trimmed");
        assert_eq!(
            media,
            media.to_ascii_lowercase(),
            "the media type is lower-case"
        );
    }

    let challenge = Challenge::parse(&String::from_utf8_lossy(input.www_authenticate));
    assert!(
        !challenge.scheme.contains(char::is_whitespace),
        "a scheme with a blank: {:?}",
        challenge.scheme
    );
    let _ = challenge.scopes();

    // A JSON body, as the connection routes it.
    let _ = body_messages(input.body);

    // An event stream: chunked as given, and in one piece, with no cap to speak of.
    let parts = chunks(input.body, input.cuts);
    let largest = parts.iter().map(Vec::len).max().unwrap_or(0);
    let unlimited = usize::MAX / 2;
    let chunked = read_event_stream(parts.clone(), unlimited);
    let whole = read_event_stream(vec![input.body.to_vec()], unlimited);
    assert_eq!(chunked, whole, "the events depend on the chunking");
    for frame in &chunked.frames {
        let text = std::str::from_utf8(frame).expect("event data is text");
        assert!(!text.trim().is_empty(), "a blank message is delivered");
    }
    // With the cap: nothing over it beyond the chunk that crossed it (the cap is checked per
    // chunk received), and what is delivered is what the uncapped reader delivered first.
    let capped = read_event_stream(parts, input.limit);
    for frame in &capped.frames {
        // A stray byte is delivered as U+FFFD (3 bytes): count each as the byte it replaced.
        let text = std::str::from_utf8(frame).expect("event data is text");
        let wire = frame.len() - 2 * text.matches('\u{fffd}').count();
        assert!(
            wire <= input.limit + largest,
            "an event of {wire} bytes past the cap {} (chunks up to {largest})",
            input.limit
        );
    }
    assert!(
        whole.frames.starts_with(&capped.frames),
        "the cap changed what was delivered"
    );
    if capped.error.is_none() {
        assert_eq!(capped, chunked, "a stream under the cap reads the same");
    }
});
