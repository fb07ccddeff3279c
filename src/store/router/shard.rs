//! Sharding: the shard key of each collection (and the collections left unsharded), and
//! `threadql shard-setup`, which shards them on a cluster. Every key of a comments collection
//! starts with `discussion_id`, and every command the store sends to those collections filters
//! on it, so a sharded cluster routes each to one shard (a test records the commands and
//! checks).

use mongodb::bson::{doc, Bson, Document};
use mongodb::Database;

use crate::store::moderation::Moderation;
use crate::store::shared::error::{StoreError, StoreResult};

/// A collection's shard key: fields in order, and whether its index is unique.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardKey {
    /// The collection.
    pub collection: &'static str,
    /// The key's fields, in order, with `1` (ranged) or `"hashed"`.
    pub fields: &'static [(&'static str, KeyKind)],
    /// Whether the collection's unique index is this key (so uniqueness holds per shard).
    pub unique: bool,
}

/// How a shard key field is ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// Ranged (`1`).
    Ranged,
    /// Hashed (`"hashed"`).
    Hashed,
}

/// The shard keys: comments by discussion then slug, pages by discussion then page (both their
/// unique indexes), discussions by hashed `_id` (they are read by `_id`, and by key through an
/// index on every shard), the claims of discussion keys by hashed `_id`, the key, which
/// `_id`'s own unique index keeps unique, and reports by hashed `_id` (comment and reporter),
/// which they are written and removed by; votes by discussion, comment and voter, tallies by
/// discussion and comment (their unique indexes), import entries by discussion and source id
/// (their unique index), rankings by hashed `_id` (the discussion).
pub const SHARD_KEYS: [ShardKey; 9] = [
    ShardKey {
        collection: "discussions",
        fields: &[("_id", KeyKind::Hashed)],
        unique: false,
    },
    ShardKey {
        collection: "discussion_keys",
        fields: &[("_id", KeyKind::Hashed)],
        unique: false,
    },
    ShardKey {
        collection: crate::store::moderation::held::REPORTS,
        fields: &[("_id", KeyKind::Hashed)],
        unique: false,
    },
    ShardKey {
        collection: "comments",
        fields: &[
            ("discussion_id", KeyKind::Ranged),
            ("slug", KeyKind::Ranged),
        ],
        unique: true,
    },
    ShardKey {
        collection: crate::store::votes::VOTES,
        fields: &[
            ("discussion_id", KeyKind::Ranged),
            ("slug", KeyKind::Ranged),
            ("voter", KeyKind::Ranged),
        ],
        unique: true,
    },
    ShardKey {
        collection: crate::store::votes::TALLIES,
        fields: &[
            ("discussion_id", KeyKind::Ranged),
            ("slug", KeyKind::Ranged),
        ],
        unique: true,
    },
    ShardKey {
        collection: crate::store::moves::imports::COLLECTION,
        fields: &[
            ("discussion_id", KeyKind::Ranged),
            ("source", KeyKind::Ranged),
        ],
        unique: true,
    },
    ShardKey {
        collection: crate::store::votes::RANKINGS,
        fields: &[("_id", KeyKind::Hashed)],
        unique: false,
    },
    ShardKey {
        collection: "comment_pages",
        fields: &[
            ("discussion_id", KeyKind::Ranged),
            ("page", KeyKind::Ranged),
        ],
        unique: true,
    },
];

/// The collections left unsharded, each with the reason: small, and read and written by `_id`
/// alone (so every command goes to the one shard that holds the collection).
pub const UNSHARDED: [(&str, &str); 6] = [
    (
        crate::store::moderation::held::COLLECTION,
        "comments waiting for a moderator and the queue entries of public ones: as many as \
         wait, read by `_id` and in ranges of (status, time) across every discussion",
    ),
    (
        crate::store::moderation::held::PEOPLE,
        "one small document per author who has had a comment approved, read and written by `_id`",
    ),
    (
        Moderation::BANS,
        "one small document per banned user, read and written by `_id` (the user id)",
    ),
    (
        Moderation::MODERATORS,
        "one small document per moderator who made a mutation, read and written by `_id`",
    ),
    (
        Moderation::LOG,
        "moderator actions, read in ranges of `_id` (the entry's number)",
    ),
    (
        Moderation::COUNTERS,
        "the moderation log's last entry number, one document",
    ),
];

impl ShardKey {
    /// The key as `shardCollection` takes it.
    pub fn key(&self) -> Document {
        let mut key = Document::new();
        for (field, kind) in self.fields {
            let value = match kind {
                KeyKind::Ranged => Bson::Int32(1),
                KeyKind::Hashed => Bson::String("hashed".into()),
            };
            key.insert(*field, value);
        }
        key
    }
}

/// Shards the database's collections on [`SHARD_KEYS`]: `enableSharding`, then
/// `shardCollection` for each (already sharded on the same key is fine). Refuses anything but a
/// `mongos`. Returns one line per collection.
pub async fn setup(db: &Database) -> StoreResult<Vec<String>> {
    let admin = db.client().database("admin");
    let hello = admin.run_command(doc! { "hello": 1 }).await?;
    if hello.get_str("msg") != Ok("isdbgrid") {
        return Err(StoreError::Unsupported(
            "this deployment is not a sharded cluster (connect to a mongos): there is nothing to \
             shard; threadql runs on it as it is"
                .into(),
        ));
    }
    admin
        .run_command(doc! { "enableSharding": db.name() })
        .await?;
    let mut done = Vec::new();
    for shard in SHARD_KEYS {
        let namespace = format!("{}.{}", db.name(), shard.collection);
        admin
            .run_command(doc! {
                "shardCollection": &namespace,
                "key": shard.key(),
                "unique": shard.unique,
            })
            .await?;
        done.push(format!("{namespace} sharded on {}", shard.key()));
    }
    for (collection, why) in UNSHARDED {
        done.push(format!("{}.{collection} left unsharded: {why}", db.name()));
    }
    Ok(done)
}
