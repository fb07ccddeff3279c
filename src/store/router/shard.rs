//! Sharding: the shard key of each collection (and the collections left unsharded), and
//! `threadql shard-setup`, which shards them on a cluster. Every key of a comments collection
//! starts with `discussion_id`, and every command the store sends to those collections filters
//! on it, so a sharded cluster routes each to one shard (a test records the commands and
//! checks).

use mongodb::bson::doc;
use mongodb::Database;

use crate::store::bucketed::Bucketed;
use crate::store::discussions::Discussions;
use crate::store::moderation::Moderation;
use crate::store::per_comment::PerComment;
use crate::store::shared::error::{StoreError, StoreResult};
pub use crate::store::shared::sharding::{KeyKind, ShardKey};
use crate::store::webhooks::Webhooks;

/// The shard keys: comments by discussion then slug, pages by discussion then page (both their
/// unique indexes, each given by its layout; the embedded layout keeps its comments in the
/// discussion documents, and follows their key), discussions by hashed `_id` (they are read by `_id`, and by key through an
/// index on every shard), the claims of discussion keys by hashed `_id`, the key, which
/// `_id`'s own unique index keeps unique, and reports by hashed `_id` (comment and reporter),
/// which they are written and removed by; votes by discussion, comment and voter, tallies by
/// discussion and comment (their unique indexes), import entries by discussion and source id
/// (their unique index), rankings by hashed `_id` (the discussion), the bucketed layout's
/// copies of voted comments by discussion and comment (their unique index); notifications by hashed
/// recipient (every read names one; `_id` holds the recipient, so it stays unique on its
/// shard), follows by hashed discussion (the fan-out's reads; `_id` holds the discussion).
pub const SHARD_KEYS: [ShardKey; 12] = [
    ShardKey {
        collection: Discussions::COLLECTION,
        fields: &[("_id", KeyKind::Hashed)],
        unique: false,
    },
    ShardKey {
        collection: Discussions::KEYS_COLLECTION,
        fields: &[("_id", KeyKind::Hashed)],
        unique: false,
    },
    ShardKey {
        collection: crate::store::moderation::held::REPORTS,
        fields: &[("_id", KeyKind::Hashed)],
        unique: false,
    },
    PerComment::SHARD_KEY,
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
    Bucketed::SHARD_KEY,
    crate::store::bucketed::COPIES_KEY,
    ShardKey {
        collection: crate::store::notifications::Notifications::NOTIFICATIONS,
        fields: &[("recipient", KeyKind::Hashed)],
        unique: false,
    },
    ShardKey {
        collection: crate::store::notifications::Notifications::FOLLOWS,
        fields: &[("discussion_id", KeyKind::Hashed)],
        unique: false,
    },
];

/// The collections left unsharded, each with the reason: small, and read and written by `_id`
/// alone, or read across every discussion (so every command goes to the one shard that holds
/// the collection).
pub const UNSHARDED: [(&str, &str); 15] = [
    (
        crate::store::events::COLLECTION,
        "the event log: one small document per change, kept for days, read in ranges of `_id` \
         (commit time) across every discussion",
    ),
    (
        crate::store::moderation::held::COLLECTION,
        "comments waiting for a moderator and the queue entries of public ones: as many as \
         wait, read by `_id` and in ranges of (status, time) across every discussion",
    ),
    (
        crate::store::moderation::held::PEOPLE,
        "one small document per person (an author's approved comments, notification settings, \
         address, mail due), read and written by `_id`, and the mail due in a range of its time",
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
        crate::store::moderation::names::COLLECTION,
        "one small document per reserved display name, read whole and written by `_id`",
    ),
    (
        Moderation::COUNTERS,
        "the moderation log's last entry number, one document",
    ),
    (
        crate::store::guests::PROOFS,
        "one small document per guest proof of work spent, written by `_id` (the challenge) and \
         removed by a TTL index within minutes",
    ),
    (
        crate::store::guests::DETAILS,
        "one small document per guest (e-mail, website, network), read and written by `_id`",
    ),
    (
        crate::store::guests::NETWORK_BANS,
        "one small document per network banned from guest posting, read whole",
    ),
    (
        crate::store::server::COLLECTION,
        "the installation's own settings (its key, the migrations done), a few documents",
    ),
    (
        Webhooks::ENDPOINTS,
        "one small document per webhook endpoint, read whole and by `_id`; not tied to a \
         discussion",
    ),
    (
        Webhooks::DELIVERIES,
        "one document per event and webhook endpoint, read across every discussion: the due \
         ones in ranges of their due time, an endpoint's in ranges of (endpoint, `_id`)",
    ),
    (
        Webhooks::ROUNDS,
        "one small document per round of the webhook fan-out still attempting, read by `_id`, \
         holder and lease end",
    ),
];

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
