//! The `discussions` collection: the fields every layout shares (title, key and URL, counters,
//! lock, the move fence), and the hook through which each layout reads its own.

mod keys;

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document, RawDocument, RawDocumentBuf};
use mongodb::options::ReturnDocument;
use mongodb::{Client, Database};
use serde::{Deserialize, Serialize};

use crate::domain::paging::Cursor;
use crate::domain::slug::MonotonicClock;
use crate::domain::{Closing, Event, GuestPolicy};
use crate::domain::{
    Comment, Discussion, DiscussionId, DiscussionKey, DiscussionUpdate, Layout, LayoutHints,
    Micros, ModerationMode, NewDiscussion, Page, Slug, Window,
};
use crate::store::api::{ChangeKind, DiscussionStore};
use crate::store::changes;
use crate::store::events::EventLog;
use crate::store::shared::bson::to_count;
use crate::store::shared::connect::index_model;
use crate::store::shared::error::{StoreError, StoreResult};
use crate::store::shared::metrics::{CommandCounter, Counted};
use crate::store::shared::order::{cursor_filter, limit_plus_one, sort_toward};

/// The fields every discussion document has, whatever its layout. Layouts add fields of their
/// own (see [`LayoutFields`]; the embedded layout keeps its comments here); metadata reads
/// project the comments away.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct DiscussionDoc {
    #[serde(rename = "_id")]
    id: String,
    title: String,
    /// The host page's key (claimed in `discussion_keys`; absent without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    /// The page's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    layout: String,
    created: i64,
    #[serde(default)]
    comment_count: i64,
    #[serde(default)]
    thread_count: i64,
    #[serde(default)]
    locked: bool,
    /// How it moderates, once a moderator set it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    moderation: Option<String>,
    /// Whether it takes guests' comments, once a moderator set it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    guests: Option<String>,
    /// When it closes, once a moderator set it (see [`closing_bson`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    closes: Option<Bson>,
    /// The slugs of the pinned comments, in pin order.
    #[serde(default)]
    pinned: Vec<String>,
    #[serde(default)]
    moves: i64,
}

/// What a layout keeps on the discussion document for its own reads and writes: the names of
/// its fields, how they read as the layout's hints, and their values in a new discussion.
pub(crate) trait LayoutFields: Send + Sync {
    /// The fields (metadata reads return them).
    fn names(&self) -> &'static [&'static str];

    /// The layout's hints, read from the discussion document (which has the shared fields and
    /// those of [`LayoutFields::names`]).
    fn hints(&self, doc: &RawDocument) -> StoreResult<LayoutHints>;

    /// The fields of a new discussion in this layout.
    fn initial(&self) -> Document;
}

/// The fields of every layout, by layout.
pub(crate) type FieldsByLayout = HashMap<Layout, Arc<dyn LayoutFields>>;

/// Reads a discussion document: the shared fields, and the hints of its layout.
fn discussion_of(raw: &RawDocument, fields: &FieldsByLayout) -> StoreResult<Discussion> {
    let doc: DiscussionDoc = mongodb::bson::from_slice(raw.as_bytes())
        .map_err(|e| StoreError::Corrupt(format!("a discussion: {e}")))?;
    let corrupt = |what: String| StoreError::Corrupt(format!("discussion {}: {what}", doc.id));
    let layout = doc
        .layout
        .parse::<Layout>()
        .map_err(|e| corrupt(e.to_string()))?;
    let hints = match fields.get(&layout) {
        Some(fields) => fields.hints(raw)?,
        None => LayoutHints::default(),
    };
    Ok(Discussion {
        id: DiscussionId::parse(&doc.id).map_err(|e| corrupt(e.to_string()))?,
        layout,
        title: doc.title,
        key: doc.key.as_deref().map(DiscussionKey::stored),
        url: doc.url,
        created: Micros(doc.created),
        comment_count: to_count(doc.comment_count),
        thread_count: to_count(doc.thread_count),
        locked: doc.locked,
        moderation: doc
            .moderation
            .as_deref()
            .map(str::parse::<ModerationMode>)
            .transpose()
            .map_err(|e| corrupt(e.to_string()))?,
        guests: doc
            .guests
            .as_deref()
            .map(str::parse::<GuestPolicy>)
            .transpose()
            .map_err(|e| corrupt(e.to_string()))?,
        closing: closing_of(doc.closes.as_ref()).map_err(corrupt)?,
        pinned: doc
            .pinned
            .iter()
            .map(|slug| Slug::parse(slug))
            .collect::<Result<_, _>>()
            .map_err(|e| corrupt(format!("a pinned slug: {e}")))?,
        moves: to_count(doc.moves),
        hints,
    })
}

/// How a moderator's closing is stored in `closes`: Int64 microseconds for a date, `"never"`
/// for never; without one the field is absent (`Null` in a filter matches that).
pub(crate) fn closing_bson(closing: Option<Closing>) -> Bson {
    match closing {
        Some(Closing::At(at)) => Bson::Int64(at.0),
        Some(Closing::Never) => Bson::String(NEVER.to_owned()),
        None => Bson::Null,
    }
}

/// What `closes` says is stored as `never`.
const NEVER: &str = "never";

/// A moderator's closing, as stored in `closes` (see [`closing_bson`]).
pub(crate) fn closing_of(stored: Option<&Bson>) -> Result<Option<Closing>, String> {
    match stored {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::String(never)) if never == NEVER => Ok(Some(Closing::Never)),
        Some(Bson::Int64(at)) => Ok(Some(Closing::At(Micros(*at)))),
        Some(other) => Err(format!("`closes` is {other}: not a date or \"never\"")),
    }
}

/// The field a move to another layout holds while it runs: every write to the discussion's
/// comments is refused while it is there (see `migrate`).
pub(crate) const FENCE: &str = "moving";

/// The discussion, while no move of it is under way.
pub(crate) fn unfenced(id: &DiscussionId) -> Document {
    doc! { "_id": id.as_str(), FENCE: { "$exists": false } }
}

/// The error of a write refused because the discussion is moving (or is gone).
pub(crate) fn moving(id: &DiscussionId) -> StoreError {
    StoreError::Moving(format!(
        "discussion {id} is moving to another layout (or no longer exists)"
    ))
}

/// The discussion, while it takes posts as `discussion` saw it: no move under way or made
/// since, not locked, and moderated as it was. A post that did not read the discussion itself (see
/// `PostStore::post_to`) relies on this filter in its write.
pub(crate) fn open_for_posts(discussion: &Discussion) -> Document {
    let mut filter = unfenced(&discussion.id);
    filter.insert("locked", doc! { "$ne": true });
    // The post decided whether to hold the comment by this mode (`None`: the server's default).
    filter.insert("moderation", discussion.moderation.map(|m| m.as_str()));
    // …and whether to take a guest's comment by this policy.
    filter.insert("guests", discussion.guests.map(|g| g.as_str()));
    // …and whether it was closed by when a moderator said it closes.
    filter.insert("closes", closing_bson(discussion.closing));
    match i64::try_from(discussion.moves).unwrap_or(i64::MAX) {
        // Discussions from before moves were counted have no count.
        0 => filter.insert("moves", doc! { "$in": [0_i64, Bson::Null] }),
        moves => filter.insert("moves", moves),
    };
    filter
}

/// The error of a post to a locked discussion.
pub(crate) fn locked(id: &DiscussionId) -> StoreError {
    StoreError::Locked(format!(
        "discussion {id} is locked: it takes no new comments or replies"
    ))
}

/// What new comments stored together change on their discussion: the counters, and one
/// change-feed mark that names them all.
pub(crate) fn posts_update(comments: &[&Comment]) -> Document {
    let count = i64::try_from(comments.len()).unwrap_or(i64::MAX);
    let top_level = comments.iter().filter(|c| c.parent.is_none()).count();
    let slugs: Vec<&Slug> = comments.iter().map(|c| &c.slug).collect();
    doc! {
        "$inc": { "comment_count": count, "thread_count": i64::try_from(top_level).unwrap_or(i64::MAX) },
        "$set": { changes::FIELD: changes::mark_all(ChangeKind::Posted, &slugs) },
    }
}

/// Fields a metadata read returns: the shared ones and every layout's own.
fn metadata_projection(fields: &FieldsByLayout) -> Document {
    let mut projection = doc! {
        "title": 1, "key": 1, "url": 1, "layout": 1, "created": 1, "comment_count": 1, "thread_count": 1, "locked": 1, "moderation": 1, "guests": 1, "closes": 1, "pinned": 1,
        "moves": 1,
    };
    let mut layouts: Vec<_> = fields.iter().collect();
    layouts.sort_by_key(|(layout, _)| layout.as_str());
    for (_, fields) in layouts {
        for name in fields.names() {
            projection.insert(*name, 1);
        }
    }
    projection
}

/// The discussions collection.
#[derive(Clone)]
pub struct Discussions {
    coll: Counted<Document>,
    /// The claims of discussion keys (see `keys`).
    claims: Counted<Document>,
    /// Where a discussion with a key and its claim are written in one transaction.
    client: Client,
    /// Whether the deployment runs transactions.
    transactions: bool,
    commands: CommandCounter,
    clock: Arc<MonotonicClock>,
    /// What each layout keeps on the discussion document.
    fields: Arc<FieldsByLayout>,
    /// The event log, which changes of a discussion join in their transaction.
    log: EventLog,
}

impl Discussions {
    /// Name of the collection.
    pub const COLLECTION: &'static str = "discussions";

    /// Name of the collection of key claims.
    pub const KEYS_COLLECTION: &'static str = keys::CLAIMS;

    pub(crate) fn new(
        db: &Database,
        clock: Arc<MonotonicClock>,
        fields: FieldsByLayout,
        commands: &CommandCounter,
        log: EventLog,
    ) -> Self {
        Self {
            coll: Counted::new(db, Self::COLLECTION, commands),
            claims: Counted::new(db, Self::KEYS_COLLECTION, commands),
            client: db.client().clone(),
            transactions: log.transactional(),
            log,
            commands: commands.clone(),
            clock,
            fields: Arc::new(fields),
        }
    }

    /// The collection's indexes: by creation (the listing) and by key (not unique: the claims
    /// keep keys unique).
    pub(crate) async fn ensure_indexes(&self) -> StoreResult<()> {
        let created = index_model("created_id", doc! { "created": 1, "_id": 1 }, false);
        self.coll.create_index(created).await?;
        let key = index_model("key", doc! { "key": 1 }, false);
        self.coll.create_index(key).await?;
        Ok(())
    }

    /// Records a new comment in the discussion's counters.
    /// and marks it for the change feed.
    pub async fn record_post(
        &self,
        discussion: &Discussion,
        comment: &Comment,
        session: &mut mongodb::ClientSession,
    ) -> StoreResult<()> {
        self.record_posts(discussion, &[comment], Document::new(), session)
            .await
    }

    /// Counts comments stored together (one update, one change-feed mark for them all), in
    /// their post's transaction, with the layout's own counts (`more`: update operators and
    /// their fields, merged into the update): `Moving` (and nothing of the transaction stays)
    /// when the discussion is moving, moved, or was locked since `discussion` was read.
    pub async fn record_posts(
        &self,
        discussion: &Discussion,
        comments: &[&Comment],
        more: Document,
        session: &mut mongodb::ClientSession,
    ) -> StoreResult<()> {
        let mut update = posts_update(comments);
        for (op, fields) in more {
            match (update.get_document_mut(&op), fields) {
                (Ok(existing), Bson::Document(fields)) => existing.extend(fields),
                (_, fields) => {
                    update.insert(op, fields);
                }
            }
        }
        let result = self
            .coll
            .update_one(open_for_posts(discussion), update)
            .session(session)
            .await?;
        if result.matched_count == 0 {
            return Err(moving(&discussion.id));
        }
        Ok(())
    }

    /// Marks a change of a comment stored outside the discussion document for the change feed,
    /// in the transaction that changes it: the mark takes the discussion document into the
    /// transaction, so a move of the discussion cannot begin until it is over, and it is
    /// refused (`Moving`) once one has begun.
    pub async fn mark_change(
        &self,
        id: &DiscussionId,
        mark: Document,
        session: &mut mongodb::ClientSession,
    ) -> StoreResult<()> {
        let result = self
            .coll
            .update_one(unfenced(id), doc! { "$set": { changes::FIELD: mark } })
            .session(session)
            .await?;
        if result.matched_count == 0 {
            return Err(moving(id));
        }
        Ok(())
    }

    /// The discussion (`NotFound` when there is none).
    pub(crate) async fn by_id(&self, id: &DiscussionId) -> StoreResult<Discussion> {
        self.by_ids(std::slice::from_ref(id))
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| StoreError::NotFound(format!("no discussion {id}")))
    }

    /// The discussion collection, for the layouts' own fields and for moves between layouts.
    pub(in crate::store) fn raw(&self) -> Counted<Document> {
        self.coll.clone()
    }

    /// Reads discussion documents as read by a metadata read.
    pub(crate) fn read(&self, raw: &RawDocument) -> StoreResult<Discussion> {
        discussion_of(raw, &self.fields)
    }

    /// Fields a metadata read returns.
    pub(crate) fn projection(&self) -> Document {
        metadata_projection(&self.fields)
    }

    /// Sets `fields` on a discussion (a moderator's setting); returns it as it is now
    /// (`NotFound` if unknown).
    async fn set(
        &self,
        id: &DiscussionId,
        fields: Document,
        events: &[Event],
    ) -> StoreResult<Discussion> {
        let found = self
            .changed(doc! { "_id": id.as_str() }, doc! { "$set": fields }, events)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("no discussion {id}")))?;
        self.read(&found)
    }

    /// One `findAndModify` of a discussion, returning it as it is after, with `events` written
    /// in its transaction when it matched.
    async fn changed(
        &self,
        filter: Document,
        update: Document,
        events: &[Event],
    ) -> StoreResult<Option<RawDocumentBuf>> {
        let coll = self.coll.clone_with_type::<RawDocumentBuf>();
        let (coll, projection) = (&coll, self.projection());
        self.log
            .atomically(|mut session| {
                let (filter, update, projection) =
                    (filter.clone(), update.clone(), projection.clone());
                async move {
                    let found = coll
                        .find_one_and_update(filter, update)
                        .projection(projection)
                        .return_document(ReturnDocument::After)
                        .session(&mut session)
                        .await;
                    let told = match &found {
                        Ok(Some(_)) => events.to_vec(),
                        _ => Vec::new(),
                    };
                    (session, found.map(|f| (f, told)).map_err(Into::into))
                }
            })
            .await
    }

    /// The event log, which changes of discussions join.
    pub(crate) fn log(&self) -> &EventLog {
        &self.log
    }

    /// After a compare-and-set replace of a comment stored outside the discussion document
    /// (`replaced` tells whether it matched): marks the change for the change feed, and passes
    /// `replaced` on.
    pub async fn after_replace(
        &self,
        (id, slug): (&DiscussionId, &Slug),
        mark: Document,
        replaced: bool,
    ) -> bool {
        if replaced {
            self.record_change(id, slug, mark).await;
        }
        replaced
    }

    /// Marks an edit or delete of a comment stored outside the discussion document for the
    /// change feed. The change itself is already stored: when the mark cannot be written, live
    /// subscribers miss it (logged), and the change stands.
    async fn record_change(&self, id: &DiscussionId, slug: &Slug, mark: Document) {
        let update = doc! { "$set": { changes::FIELD: mark } };
        if let Err(err) = self
            .coll
            .update_one(doc! { "_id": id.as_str() }, update)
            .await
        {
            tracing::warn!(%err, discussion = %id, %slug, "a change was stored, but live subscribers will not hear of it");
        }
    }
}

#[async_trait]
impl DiscussionStore for Discussions {
    async fn add(&self, new: NewDiscussion, events: &[Event]) -> StoreResult<Discussion> {
        if let Some(key) = &new.key {
            return self.add_keyed(key, &new, events).await;
        }
        let doc = self.document_of(&new, &new.id.clone().unwrap_or_else(DiscussionId::generate))?;
        let (coll, stored) = (&self.coll, &doc);
        self.log
            .atomically(|mut session| async move {
                let inserted = coll.insert_one(stored).session(&mut session).await;
                (
                    session,
                    inserted.map(|_| ((), events.to_vec())).map_err(Into::into),
                )
            })
            .await?;
        self.stored(&doc)
    }

    async fn ensure(&self, new: NewDiscussion, events: &[Event]) -> StoreResult<Discussion> {
        match &new.key {
            Some(key) => self.ensure_keyed(key, &new, events).await,
            None => self.add(new, events).await,
        }
    }

    async fn by_keys(&self, keys: &[DiscussionKey]) -> StoreResult<Vec<Discussion>> {
        self.read_keys(keys).await
    }

    /// The discussions with these ids (missing ones are left out).
    async fn by_ids(&self, ids: &[DiscussionId]) -> StoreResult<Vec<Discussion>> {
        let ids: Vec<&str> = ids.iter().map(DiscussionId::as_str).collect();
        let docs: Vec<RawDocumentBuf> = self
            .coll
            .clone_with_type::<RawDocumentBuf>()
            .find(doc! { "_id": { "$in": ids } })
            .projection(self.projection())
            .await?
            .try_collect()
            .await?;
        docs.iter().map(|d| self.read(d)).collect()
    }

    /// One page of discussions, oldest first. A backward window reads the creation order from
    /// its end (or its cursor) down, as a forward one reads it up.
    async fn list(&self, window: &Window) -> StoreResult<Page<Discussion>> {
        let (filter, skip) = match window {
            Window::Offset { skip, .. } | Window::FromEnd { skip, .. } => (doc! {}, *skip),
            Window::After { cursor: None, .. } => (doc! {}, 0),
            Window::After {
                cursor: Some(Cursor::Discussion { .. }),
                ..
            }
            | Window::Before {
                cursor: Cursor::Discussion { .. },
                ..
            } => (cursor_filter(window).unwrap_or_default(), 0),
            Window::After { .. } | Window::Before { .. } => {
                return Err(StoreError::Unsupported("cursor of another list".into()))
            }
        };
        let backward = window.is_backward();
        let mut docs: Vec<RawDocumentBuf> = self
            .coll
            .clone_with_type::<RawDocumentBuf>()
            .find(filter)
            .sort(sort_toward(&["created", "_id"], backward))
            .skip(skip)
            .limit(limit_plus_one(window.limit()))
            .projection(self.projection())
            .await?
            .try_collect()
            .await?;
        if backward {
            docs.reverse();
        }
        let items = docs
            .iter()
            .map(|d| self.read(d))
            .collect::<StoreResult<Vec<_>>>()?;
        Ok(window.page(items))
    }

    /// How many discussions exist.
    async fn count(&self) -> StoreResult<u64> {
        Ok(self.coll.count_documents(doc! {}).await?)
    }

    async fn set_pinned(
        &self,
        id: &DiscussionId,
        slug: &Slug,
        pinned: bool,
        events: &[Event],
    ) -> StoreResult<Discussion> {
        let (filter, update) = if pinned {
            let last = format!("pinned.{}", Discussion::MAX_PINNED - 1);
            (
                doc! { "_id": id.as_str(), "pinned": { "$ne": slug.as_str() }, last: { "$exists": false } },
                doc! { "$push": { "pinned": slug.as_str() } },
            )
        } else {
            (
                doc! { "_id": id.as_str() },
                doc! { "$pull": { "pinned": slug.as_str() } },
            )
        };
        let found = self.changed(filter, update, events).await?;
        match found {
            Some(found) => self.read(&found),
            // Pinned already (nothing to change), or the pins are full.
            None if pinned => {
                let discussion = self.by_id(id).await?;
                match discussion.is_pinned(slug) {
                    true => Ok(discussion),
                    false => Err(StoreError::PinsFull(id.to_string())),
                }
            }
            None => Err(StoreError::NotFound(format!("no discussion {id}"))),
        }
    }

    async fn set_locked(
        &self,
        id: &DiscussionId,
        locked: bool,
        events: &[Event],
    ) -> StoreResult<Discussion> {
        self.set(id, doc! { "locked": locked }, events).await
    }

    async fn update(
        &self,
        id: &DiscussionId,
        update: &DiscussionUpdate,
        events: &[Event],
    ) -> StoreResult<Discussion> {
        let mut set = Document::new();
        if let Some(title) = &update.title {
            set.insert("title", title.as_str());
        }
        if let Some(url) = &update.url {
            set.insert("url", url.as_str());
        }
        if set.is_empty() {
            return self.by_id(id).await;
        }
        self.set(id, set, events).await
    }

    async fn set_moderation(
        &self,
        id: &DiscussionId,
        mode: ModerationMode,
        events: &[Event],
    ) -> StoreResult<Discussion> {
        self.set(id, doc! { "moderation": mode.as_str() }, events)
            .await
    }

    async fn set_guests(
        &self,
        id: &DiscussionId,
        policy: Option<GuestPolicy>,
        events: &[Event],
    ) -> StoreResult<Discussion> {
        let update = match policy {
            Some(policy) => doc! { "$set": { "guests": policy.as_str() } },
            None => doc! { "$unset": { "guests": "" } },
        };
        let found = self
            .changed(doc! { "_id": id.as_str() }, update, events)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("no discussion {id}")))?;
        self.read(&found)
    }

    async fn set_closing(
        &self,
        id: &DiscussionId,
        closing: Option<Closing>,
        events: &[Event],
    ) -> StoreResult<Discussion> {
        let update = match closing {
            Some(closing) => doc! { "$set": { "closes": closing_bson(Some(closing)) } },
            None => doc! { "$unset": { "closes": "" } },
        };
        let found = self
            .changed(doc! { "_id": id.as_str() }, update, events)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("no discussion {id}")))?;
        self.read(&found)
    }
}
