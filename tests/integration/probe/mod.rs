//! The findings of an adversarial probe, each over a real socket: what it cost before, refused
//! or bounded now.

mod guests;
mod identities;
mod imports;
pub(crate) mod markdown;
mod offsets;
mod surface;
mod surface_pages;
