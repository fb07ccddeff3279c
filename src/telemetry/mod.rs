//! What the server reports about itself beyond its answers.

pub mod trace;
