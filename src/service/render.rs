//! Comment HTML: rendered when a text is written, off the runtime's threads, and stored with it;
//! for a comment stored before that, rendered once on its first read and stored then, or ahead
//! of reads by `threadql render-html` ([`Services::fill_html`]).

use std::sync::Arc;

use tokio::sync::Semaphore;
use tracing::Instrument as _;

use super::Services;
use crate::domain::paging::Cursor;
use crate::domain::{markdown, Comment, Discussion, DomainError, Slug, Window};
use crate::store::StoreError;

/// Renders comment texts on the blocking pool, as many at once as the machine has cores: a long
/// text takes milliseconds of CPU to render and sanitise, which on a runtime thread would stall
/// every other request it serves; past the cores, a render waits for a permit (asynchronously),
/// so renders never pile up threads.
#[derive(Clone)]
pub(crate) struct Renderer {
    permits: Arc<Semaphore>,
    max_depth: usize,
}

impl Renderer {
    /// A renderer of texts nested at most `max_depth` levels deep (deeper ones, stored before
    /// the rule, are flattened first: see [`markdown::render`]).
    pub(crate) fn new(max_depth: usize) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Self {
            permits: Arc::new(Semaphore::new(cores)),
            max_depth,
        }
    }

    /// `text` as the HTML stored with it ([`markdown::render`]).
    pub(crate) async fn render(&self, text: &str) -> Result<String, DomainError> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|e| DomainError::Internal(format!("the renderer is closed: {e}")))?;
        let (text, max_depth) = (text.to_owned(), self.max_depth);
        tokio::task::spawn_blocking(move || markdown::render(&text, max_depth))
            .await
            .map_err(|e| DomainError::Internal(format!("rendering a comment failed: {e}")))
    }
}

/// What [`Services::fill_html`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Filled {
    /// Discussions read.
    pub discussions: u64,
    /// Comments read (public and held; deleted ones have no text, hence no HTML).
    pub comments: u64,
    /// Comments whose HTML was rendered and stored.
    pub stored: u64,
    /// Comments changed or gone between the read and the write (their writer stored their
    /// HTML, or they have none to store).
    pub changed: u64,
}

impl Services {
    /// `text` as the HTML stored with it, rendered off the runtime's threads.
    pub(super) async fn render(&self, text: &str) -> Result<String, DomainError> {
        self.renderer.render(text).await
    }

    /// The HTML of `comment` of `discussion` (`held`: a held comment, stored outside the
    /// layouts): the stored HTML, or, for a comment stored before HTML was stored with
    /// comments, its text rendered now, and stored with it by a task of its own (while the
    /// text is still the one rendered), so that it is rendered once; the read does not wait
    /// for that write (which waits out a move of the discussion). Storing it is a quiet
    /// change: what the public sees does not change, the read cache forgets the discussion,
    /// live subscribers hear nothing. A failed store is logged. `None` without text.
    pub async fn html_of(
        &self,
        discussion: &Discussion,
        comment: &Comment,
        held: bool,
    ) -> Result<Option<String>, DomainError> {
        let Some(text) = comment.text.as_deref() else {
            return Ok(None);
        };
        if let Some(html) = &comment.html {
            return Ok(Some(html.clone()));
        }
        let html = self.render(text).await?;
        let services = self.clone();
        let (discussion, slug) = (discussion.clone(), comment.slug.clone());
        let (text, stored) = (text.to_owned(), html.clone());
        let store = async move {
            let done = services
                .store_html(&discussion, &slug, &text, &stored, held)
                .await;
            if let Err(err) = done {
                tracing::warn!(discussion = %discussion.id, %slug, error = %err, "could not store the HTML of a comment stored without it");
            }
        };
        tokio::spawn(store.in_current_span());
        Ok(Some(html))
    }

    /// Stores `html` with the comment `slug` while its text is `text` and it has no HTML; whether
    /// it did. A write of its own task (counted for shutdown, like every write), with no event.
    async fn store_html(
        &self,
        discussion: &Discussion,
        slug: &Slug,
        text: &str,
        html: &str,
        held: bool,
    ) -> Result<bool, DomainError> {
        let storage = self.storage.clone();
        let (discussion, slug) = (discussion.clone(), slug.clone());
        let (text, html) = (text.to_owned(), html.to_owned());
        let write = async move {
            if held {
                let stored = storage
                    .held()
                    .store_html(&discussion.id, &slug, &text, &html)
                    .await?;
                return Ok((stored, Vec::new()));
            }
            let decide = |current: &Comment, _now| {
                let unchanged = current.html.is_none() && current.text.as_deref() == Some(&text);
                Ok(unchanged.then(|| Comment {
                    html: Some(html.clone()),
                    ..current.clone()
                }))
            };
            let after = storage
                .posting()
                .change_comment(&discussion, &slug, &decide, &|_, _| Vec::new())
                .await;
            match after {
                Ok(after) => Ok((after.html.as_deref() == Some(&html), Vec::new())),
                // Gone (its discussion too): nothing to store it with.
                Err(DomainError::NotFound(_)) => Ok((false, Vec::new())),
                Err(err) => Err(err),
            }
        };
        let span = tracing::debug_span!("store.html");
        let operator = self.operator("html");
        Ok(self.run(&operator, span, write).await?.value)
    }

    /// Renders and stores the HTML of every comment stored without it (`threadql render-html`):
    /// discussion by discussion, `batch` comments a read, public comments then held ones. Safe
    /// to run again, and while servers serve: a comment with HTML is left as it is, and one
    /// changed meanwhile is counted, not overwritten. `progress` hears the counts after each
    /// discussion.
    pub async fn fill_html(
        &self,
        batch: usize,
        progress: &(dyn Fn(&Filled) + Send + Sync),
    ) -> Result<Filled, DomainError> {
        let batch = batch.max(1);
        let mut filled = Filled::default();
        let mut cursor = None;
        loop {
            let window = Window::After {
                cursor: cursor.take(),
                limit: batch,
            };
            let page = self.storage.discussions().list(&window).await?;
            for discussion in &page.items {
                self.fill_discussion(discussion, batch, &mut filled).await?;
                filled.discussions += 1;
                progress(&filled);
            }
            match page.items.last() {
                Some(last) if page.has_next => cursor = Some(Cursor::of_discussion(last)),
                _ => return Ok(filled),
            }
        }
    }

    /// [`Services::fill_html`] for one discussion.
    async fn fill_discussion(
        &self,
        discussion: &Discussion,
        batch: usize,
        filled: &mut Filled,
    ) -> Result<(), DomainError> {
        let layout = self.storage.layout(discussion.layout)?;
        let mut last: Option<Arc<Comment>> = None;
        loop {
            let page = match layout
                .posted_after(discussion, last.as_deref(), batch)
                .await
            {
                Ok(page) => page,
                // Moved meanwhile: the next run reads it where it went.
                Err(StoreError::Moving(_)) => break,
                Err(err) => return Err(err.into()),
            };
            self.fill_comments(discussion, &page.items, false, filled)
                .await?;
            if !page.has_next {
                break;
            }
            last = page.items.into_iter().last();
        }
        let mut after: Option<Slug> = None;
        loop {
            let held = self
                .storage
                .held()
                .held_in(&discussion.id, after.as_ref(), batch)
                .await?;
            let comments: Vec<Comment> = held.into_iter().map(|h| h.comment).collect();
            self.fill_comments(discussion, &comments, true, filled)
                .await?;
            match comments.last() {
                Some(last) if comments.len() == batch => after = Some(last.slug.clone()),
                _ => return Ok(()),
            }
        }
    }

    /// Renders the comments of `comments` that have text and no HTML (at once, as many as the
    /// renderer allows) and stores each.
    async fn fill_comments(
        &self,
        discussion: &Discussion,
        comments: &[impl std::borrow::Borrow<Comment>],
        held: bool,
        filled: &mut Filled,
    ) -> Result<(), DomainError> {
        filled.comments += comments.len() as u64;
        let missing: Vec<(&Comment, &str)> = comments
            .iter()
            .map(std::borrow::Borrow::borrow)
            .filter(|c| c.html.is_none())
            .filter_map(|c| Some((c, c.text.as_deref()?)))
            .collect();
        let rendered =
            futures::future::join_all(missing.iter().map(|(_, text)| self.render(text))).await;
        for ((comment, text), html) in missing.into_iter().zip(rendered) {
            match self
                .store_html(discussion, &comment.slug, text, &html?, held)
                .await?
            {
                true => filled.stored += 1,
                false => filled.changed += 1,
            }
        }
        Ok(())
    }
}
