//! The layout registry: the one place that lists the storage layouts, builds them, and hands
//! each request to the right one.

use std::collections::HashMap;
use std::sync::Arc;

use mongodb::Database;

use crate::domain::{Discussion, Layout, NewComment};
use crate::store::api::{CommentStore, Posted};
use crate::store::bucketed::Bucketed;
use crate::store::discussions::{Discussions, FieldsByLayout};
use crate::store::embedded::Embedded;
use crate::store::moves::migrate::{Movable, Movers};
use crate::store::per_comment::PerComment;
use crate::store::shared::error::StoreResult;
use crate::store::shared::skeleton;
use crate::store::shared::writer::Writer;

/// The three layouts.
pub(crate) struct Layouts {
    per_comment: PerComment,
    embedded: Embedded,
    bucketed: Bucketed,
}

/// What the layouts are built from.
pub(crate) struct Parts<'a> {
    pub(crate) db: &'a Database,
    pub(crate) writer: Writer,
    pub(crate) bucket_size: u32,
    pub(crate) embedded_max_bytes: usize,
}

impl Layouts {
    /// What each layout keeps on the discussion document (the discussions collection reads
    /// them before the layouts exist).
    pub(crate) fn fields(transactions: bool) -> FieldsByLayout {
        let mut fields: FieldsByLayout = HashMap::new();
        fields.insert(
            Layout::PerComment,
            Arc::new(PerComment::fields(transactions)),
        );
        fields.insert(Layout::Bucketed, Arc::new(Bucketed::fields()));
        fields
    }

    /// Builds every layout.
    pub(crate) fn new(parts: Parts<'_>, discussions: &Discussions) -> Self {
        Self {
            per_comment: PerComment::new(parts.db, discussions.clone(), parts.writer.clone()),
            embedded: Embedded::new(
                parts.db,
                &parts.writer.commands,
                parts.embedded_max_bytes,
                parts.writer.log.clone(),
            ),
            bucketed: Bucketed::new(
                parts.db,
                discussions.clone(),
                parts.writer,
                parts.bucket_size,
            ),
        }
    }

    /// Creates every layout's indexes (idempotent).
    pub(crate) async fn ensure_indexes(&self) -> StoreResult<()> {
        self.per_comment.ensure_indexes().await?;
        self.embedded.ensure_indexes().await?;
        self.bucketed.ensure_indexes().await
    }

    /// The layouts as an author's history reads them (see `router::history`).
    pub(crate) fn authored(&self) -> (&PerComment, &Embedded, &Bucketed) {
        (&self.per_comment, &self.embedded, &self.bucketed)
    }

    /// The reads and changes of a layout.
    pub(crate) fn get(&self, layout: Layout) -> &dyn CommentStore {
        match layout {
            Layout::PerComment => &self.per_comment,
            Layout::Embedded => &self.embedded,
            Layout::Bucketed => &self.bucketed,
        }
    }

    /// Posts a comment through the skeleton with the steps of the discussion's layout.
    pub(crate) async fn post(
        &self,
        writer: &Writer,
        discussion: &Discussion,
        new: &NewComment,
    ) -> StoreResult<Posted> {
        match discussion.layout {
            Layout::PerComment => skeleton::post(&self.per_comment, writer, discussion, new).await,
            Layout::Embedded => skeleton::post(&self.embedded, writer, discussion, new).await,
            Layout::Bucketed => skeleton::post(&self.bucketed, writer, discussion, new).await,
        }
    }

    /// The layouts as a move sees them.
    pub(crate) fn movers(&self) -> Movers<'_> {
        let movers: [(Layout, &dyn Movable); 3] = [
            (Layout::PerComment, &self.per_comment),
            (Layout::Embedded, &self.embedded),
            (Layout::Bucketed, &self.bucketed),
        ];
        movers.into_iter().collect()
    }
}
