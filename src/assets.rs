//! Files built into the binary and served by name: GraphiQL's vendored files and the
//! moderation console's (each module sets its own headers).

/// One file under `assets/`, with its content type.
pub(crate) struct Asset {
    /// Its name in its folder, and in the address it is served at.
    pub(crate) name: &'static str,
    /// Its `Content-Type`.
    pub(crate) content_type: &'static str,
    /// Its bytes.
    pub(crate) bytes: &'static [u8],
}

/// The file `assets/<folder>/<name>`, built into the binary.
macro_rules! asset {
    ($folder:literal, $name:literal, $content_type:literal) => {
        crate::assets::Asset {
            name: $name,
            content_type: $content_type,
            bytes: include_bytes!(concat!("../assets/", $folder, "/", $name)),
        }
    };
}
pub(crate) use asset;

/// The file of `assets` named `name`, if there is one (any other name is not served).
pub(crate) fn named<'a>(assets: &'a [Asset], name: &str) -> Option<&'a Asset> {
    assets.iter().find(|asset| asset.name == name)
}
