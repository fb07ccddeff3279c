//! `threadql import`: discussions and comments from a threadql, Disqus or WordPress file.

pub mod html;
pub mod source;
