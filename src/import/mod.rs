//! `threadql import`: discussions and comments from a threadql, Disqus or WordPress file.

pub mod source;
