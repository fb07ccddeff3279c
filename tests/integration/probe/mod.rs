//! Tests of the probe's findings, one file per part of the surface they cover.

mod surface;
mod surface_pages;
