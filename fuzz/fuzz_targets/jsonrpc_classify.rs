//! The incoming-frame classifier (`IncomingFrame::parse` + `classify`) and the batch splitter the
//! connection routes every frame and JSON body with: never a panic, and what is classified
//! survives being written by our own frame writers and read again.
#![no_main]

use actix_mcp::fuzzing::{
    body_messages, classify, notification_frame, request_frame, response_frame, Classified,
};
use actix_mcp::protocol::jsonrpc::WireId;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn value(raw: &Option<String>) -> Option<Option<Value>> {
    match raw {
        None => Some(None),
        // A raw value deeper than serde_json's recursion limit cannot become a Value.
        Some(raw) => serde_json::from_str(raw).ok().map(Some),
    }
}

fn strip_newline(frame: &[u8]) -> &[u8] {
    assert_eq!(
        frame.last(),
        Some(&b'\n'),
        "a written frame ends with a newline"
    );
    let frame = &frame[..frame.len() - 1];
    assert!(!frame.contains(&b'\n'), "a written frame is one line");
    frame
}

fn check(message: &[u8], classified: &Classified) {
    assert_eq!(
        message.trim_ascii_start().first(),
        Some(&b'{'),
        "only a JSON object is a message"
    );
    match classified {
        Classified::Response { id, outcome } => {
            if let WireId::Number(n) = id {
                assert_eq!(id.as_request_id().map(|r| r.as_u64()), n.as_u64());
            }
            let outcome = match outcome {
                Ok(raw) => match serde_json::from_str::<Value>(raw) {
                    Ok(v) => Ok(v),
                    Err(_) => return,
                },
                Err(e) => Err(e.clone()),
            };
            let frame = response_frame(id, outcome.clone()).expect("a response frame is written");
            match classify(strip_newline(&frame)) {
                Ok(Classified::Response {
                    id: again,
                    outcome: back,
                }) => {
                    assert_eq!(&again, id, "the response id round-trips");
                    match (outcome, back) {
                        (Ok(v), Ok(raw)) => {
                            assert_eq!(serde_json::from_str::<Value>(&raw).ok(), Some(v))
                        }
                        (Err(e), Err(back)) => {
                            assert_eq!(
                                (e.code, e.message, e.data),
                                (back.code, back.message, back.data)
                            )
                        }
                        (a, b) => panic!("outcome changed: {a:?} -> {b:?}"),
                    }
                }
                other => panic!("our response frame reads back as {other:?}"),
            }
        }
        Classified::ServerRequest { id, method, params } => {
            let Some(params) = value(params) else { return };
            if let Some(n) = id.as_request_id() {
                let raw = params
                    .as_ref()
                    .map(|p| serde_json::value::to_raw_value(p).expect("params re-serialize"));
                let frame = request_frame(n.as_u64(), method, raw.as_deref())
                    .expect("a request frame is written");
                match classify(strip_newline(&frame)) {
                    Ok(Classified::ServerRequest {
                        id: again,
                        method: m,
                        params: p,
                    }) => {
                        assert_eq!(again.as_request_id(), Some(n));
                        assert_eq!(&m, method);
                        assert_eq!(value(&p), Some(params));
                    }
                    other => panic!("our request frame reads back as {other:?}"),
                }
            }
        }
        Classified::Notification { method, params } => {
            let Some(params) = value(params) else { return };
            let frame = notification_frame(method, params.as_ref())
                .expect("a notification frame is written");
            match classify(strip_newline(&frame)) {
                Ok(Classified::Notification {
                    method: m,
                    params: p,
                }) => {
                    assert_eq!(&m, method);
                    assert_eq!(value(&p), Some(params));
                }
                other => panic!("our notification frame reads back as {other:?}"),
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(classified) = classify(data) {
        check(data, &classified);
    }
    if let Ok(messages) = body_messages(data) {
        for (message, classified) in messages {
            if let Ok(classified) = classified {
                check(message, &classified);
            }
        }
    }
});
