//! `threadql import`: discussions and comments from a threadql, Disqus or WordPress file.

pub mod disqus;
#[cfg(test)]
mod fixtures;
pub mod html;
pub mod source;
pub mod wordpress;
mod xml;
