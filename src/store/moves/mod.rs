//! Moves between layouts: the move itself (`migrate`, with the side every layout implements) and
//! the record of what imports brought in (`imports`).

pub(crate) mod imports;
pub(crate) mod migrate;
