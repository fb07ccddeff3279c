//! Tests of the findings of probes of the running server, one module per finding.

mod markdown;
