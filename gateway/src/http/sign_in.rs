//! The sign-in pages of per-user servers (`users/sign_in.rs`): `/oauth/start/<ticket>` and
//! `/oauth/callback`, reached by the person's browser (no token: the sign-in itself says who
//! they are). A finished sign-in tells the user's sessions (`notifications/elicitation/complete`).

use actix_web::{web, HttpRequest, HttpResponse};

use super::Gateway;
use crate::{
    audit::{Outcome, Record},
    changes::Event,
    users::sign_in::Page,
};

/// `GET /oauth/start/{ticket}`.
pub async fn start(gateway: web::Data<Gateway>, ticket: web::Path<String>) -> HttpResponse {
    let page = crate::users::sign_in::start(&gateway.upstream.users, &ticket).await;
    answer(&gateway, page)
}

/// `GET /oauth/callback`.
pub async fn callback(request: HttpRequest, gateway: web::Data<Gateway>) -> HttpResponse {
    let (Some(authorization), Some(serving)) =
        (&gateway.authorization, gateway.upstream.users.serving())
    else {
        return HttpResponse::NotFound().finish();
    };
    let Ok(redirect) = url::Url::parse(&format!("{}{}", serving.origin, request.uri())) else {
        return HttpResponse::BadRequest().body("not a URL");
    };
    let users = &gateway.upstream.users;
    let page = crate::users::sign_in::callback(users, authorization, &redirect).await;
    answer(&gateway, page)
}

fn answer(gateway: &Gateway, page: Page) -> HttpResponse {
    match page {
        Page::Redirect(url) => HttpResponse::Found()
            .insert_header(("location", url.as_str()))
            .insert_header(("cache-control", "no-store"))
            .finish(),
        Page::Done {
            owner,
            server,
            ticket,
        } => {
            tracing::info!(%owner, %server, "a user signed in upstream");
            let record = Record::sign_in(Some(&owner), Some(&server), Outcome::Granted);
            gateway.upstream.audit.record(record);
            let _ = gateway.changes.send(Event::SignedIn {
                owner,
                elicitation: ticket,
            });
            let text = format!(
                "Signed in to {}: the gateway now acts there as you. You can close this window.",
                actix_mcp::visible::visible(&server)
            );
            plain(actix_web::http::StatusCode::OK, text)
        }
        Page::Refused(status, why) => {
            let outcome = Outcome::NotGranted { why: why.clone() };
            gateway
                .upstream
                .audit
                .record(Record::sign_in(None, None, outcome));
            let status = actix_web::http::StatusCode::from_u16(status)
                .unwrap_or(actix_web::http::StatusCode::BAD_REQUEST);
            plain(
                status,
                format!("Not signed in: {}", actix_mcp::visible::visible(&why)),
            )
        }
    }
}

/// Plain text, never HTML: nothing a server or an authorization server said can run here.
fn plain(status: actix_web::http::StatusCode, text: String) -> HttpResponse {
    HttpResponse::build(status)
        .content_type("text/plain; charset=utf-8")
        .insert_header(("x-content-type-options", "nosniff"))
        .insert_header(("cache-control", "no-store"))
        .body(text)
}
