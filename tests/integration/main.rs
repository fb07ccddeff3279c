//! The integration test binary: every test runs against the real dev database over the wire.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod api;
mod audit;
mod browser;
mod bucketed;
mod clients;
mod contract;
mod embedded;
mod faults;
mod federation;
mod hostile;
mod http;
mod identity;
mod lifecycle;
mod live;
mod migrate;
mod model;
mod node;
mod properties;
mod sequence;
mod sharding;
mod subscriptions;
mod subtrees;
mod support;
