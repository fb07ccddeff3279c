//! What every part of the store shares: connecting (and the embedded development database),
//! transactions, the writer and the write skeleton, errors, command metrics, BSON and comment
//! documents, ordering, bounded blocks, and the per-request read scope.

pub(crate) mod authored;
pub(crate) mod authors;
pub(crate) mod blocks;
pub(crate) mod bson;
pub(crate) mod connect;
pub(crate) mod docs;
pub mod embedded_db;
pub(crate) mod error;
pub(crate) mod inserts;
pub(crate) mod metrics;
pub(crate) mod name_keys;
pub(crate) mod numbers;
pub(crate) mod numbers_backfill;
pub(crate) mod order;
pub(crate) mod scope;
pub(crate) mod sharding;
pub(crate) mod skeleton;
pub(crate) mod transactions;
pub(crate) mod ttl;
pub(crate) mod writer;
