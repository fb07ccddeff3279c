//! Probes of issue 45: what hostile identities and import files did, each refused or reported.

mod identities;
mod imports;
