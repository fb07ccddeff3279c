//! Probes of issue 45: each finding, shown over real sockets.

mod guests;
