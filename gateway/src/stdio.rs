//! One downstream client over stdio: a JSON-RPC message per line on stdin, answers per line on
//! stdout. At the end of stdin the client is gone: what it left in flight is cancelled upstream.

use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    sync::mpsc,
};

use crate::{session::Session, upstream::Upstream};

pub async fn serve(
    upstream: Upstream,
    changes: tokio::sync::broadcast::Sender<crate::changes::Event>,
) -> std::io::Result<()> {
    let (out, mut lines) = mpsc::unbounded_channel::<Vec<u8>>();
    let writer = actix_rt::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = lines.recv().await {
            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    let answers: crate::session::Answers =
        std::rc::Rc::new(move |answer: Value, _: Option<&Value>| {
            let mut line = answer.to_string().into_bytes();
            line.push(b'\n');
            let _ = out.send(line);
        });
    let answers_out = answers.clone();
    let session = Session::start(
        upstream,
        answers,
        Some(&changes),
        crate::owner::Owner::Anonymous,
    );
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = stdin.next_line().await? {
        if line.trim().is_empty() {
            continue;
        }
        let message = match crate::message::parse(line.as_bytes()) {
            Ok(message) => message,
            Err(refusal) => {
                tracing::warn!("a downstream line that is not a JSON-RPC message was refused");
                (answers_out)(refusal, None);
                continue;
            }
        };
        session.message(message);
    }
    session.end("the downstream client went away").await;
    // The writer ends once nothing can send it more.
    drop((session, answers_out));
    let _ = writer.await;
    Ok(())
}
