//! All-pages requests: follow `nextCursor` until the end, a repeated cursor, or the page cap.

use std::{
    collections::HashSet,
    future::{Future, IntoFuture},
    marker::PhantomData,
    pin::Pin,
    time::Duration,
};

use serde::de::DeserializeOwned;

use super::Client;
use crate::{
    cancellation::Cancellation,
    error::Error,
    protocol::{
        prompts::{ListPromptsResult, Prompt},
        resources::{ListResourceTemplatesResult, ListResourcesResult, Resource, ResourceTemplate},
        tools::{ListToolsResult, Tool},
    },
};

/// Default cap on the pages one all-pages request follows.
pub const DEFAULT_MAX_PAGES: usize = 1000;

/// A page of a paginated list.
pub trait Page: DeserializeOwned + Send + 'static {
    /// What the list holds (a tool, a resource, ...).
    type Item: Send + 'static;
    /// The list method that returns this page (e.g. `tools/list`).
    const METHOD: &'static str;
    /// The page's items and its `nextCursor` (`None` on the last page).
    fn into_parts(self) -> (Vec<Self::Item>, Option<String>);
}

impl Page for ListToolsResult {
    type Item = Tool;
    const METHOD: &'static str = "tools/list";
    fn into_parts(self) -> (Vec<Tool>, Option<String>) {
        (self.tools, self.page.next_cursor)
    }
}

impl Page for ListResourcesResult {
    type Item = Resource;
    const METHOD: &'static str = "resources/list";
    fn into_parts(self) -> (Vec<Resource>, Option<String>) {
        (self.resources, self.page.next_cursor)
    }
}

impl Page for ListResourceTemplatesResult {
    type Item = ResourceTemplate;
    const METHOD: &'static str = "resources/templates/list";
    fn into_parts(self) -> (Vec<ResourceTemplate>, Option<String>) {
        (self.resource_templates, self.page.next_cursor)
    }
}

impl Page for ListPromptsResult {
    type Item = Prompt;
    const METHOD: &'static str = "prompts/list";
    fn into_parts(self) -> (Vec<Prompt>, Option<String>) {
        (self.prompts, self.page.next_cursor)
    }
}

/// Every item of a paginated list, awaited. Cancelling fails the whole request with
/// [`Error::Cancelled`]: no partial list.
#[must_use = "an AllPages does nothing until it is awaited"]
pub struct AllPages<P> {
    client: Client,
    cancellation: Option<Cancellation>,
    timeout: Option<Duration>,
    max_pages: usize,
    refetch: bool,
    _page: PhantomData<fn() -> P>,
}

impl<P: Page> AllPages<P> {
    pub(crate) fn new(client: Client) -> Self {
        Self {
            timeout: client.settings.default_timeout,
            max_pages: client.settings.max_pages,
            client,
            cancellation: None,
            refetch: false,
            _page: PhantomData,
        }
    }

    /// Cancels the page in flight when `token` is cancelled, failing the whole request with
    /// [`Error::Cancelled`].
    pub fn cancellation(mut self, token: &Cancellation) -> Self {
        self.cancellation = Some(token.clone());
        self
    }

    /// The timeout of each page.
    pub fn timeout(mut self, per_page: Duration) -> Self {
        self.timeout = Some(per_page);
        self
    }

    /// Asks the server for every page, even those a 2026-07-28 server marked cacheable and
    /// still fresh (the answers replace the kept pages).
    pub fn refetch(mut self) -> Self {
        self.refetch = true;
        self
    }

    /// More pages than this fails with [`Error::TooManyPages`].
    pub fn max_pages(mut self, max: usize) -> Self {
        self.max_pages = max.max(1);
        self
    }
}

impl<P: Page> IntoFuture for AllPages<P> {
    type Output = Result<Vec<P::Item>, Error>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let mut items = Vec::new();
            let mut seen = HashSet::new();
            let mut cursor: Option<String> = None;
            let mut pages = 0;
            loop {
                if pages == self.max_pages {
                    return Err(Error::TooManyPages {
                        limit: self.max_pages,
                    });
                }
                let mut call = self.client.list_page::<P>(cursor.as_deref());
                if self.refetch {
                    call = call.refetch();
                }
                let page: P = call
                    .cancellation_opt(self.cancellation.as_ref())
                    .timeout_opt(self.timeout)
                    .await?;
                pages += 1;
                let (mut page_items, next) = page.into_parts();
                items.append(&mut page_items);
                match next {
                    // A cursor seen before would loop forever: stop there.
                    Some(next) if seen.insert(next.clone()) => cursor = Some(next),
                    _ => return Ok(items),
                }
            }
        })
    }
}
