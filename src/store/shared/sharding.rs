//! What a shard key is: a collection, its key's fields, and whether the key is its unique index.
//! Each collection's owner gives its key; `router::shard` lists them all and shards a cluster.

use mongodb::bson::{Bson, Document};

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
