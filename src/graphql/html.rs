//! Rendered HTML of comment texts, kept per process: rendering is a pure function of the text
//! (CommonMark, then the sanitiser's allow-list), so a text read again is looked up, not
//! rendered again, and nothing is ever stale. Keyed by a 128-bit digest of the text, bounded in
//! bytes, least recently used dropped first.

use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use super::bounded::Bounded;
use crate::domain::markdown;

/// Bytes of rendered HTML a process keeps: about 25 000 comments of average length.
pub const HTML_CACHE_BYTES: usize = 16 << 20;

/// What an entry takes besides its HTML: its key, its map entry and its place in the order of
/// use, rounded up.
const ENTRY_OVERHEAD: usize = 96;

/// The rendered HTML of texts read recently.
#[derive(Clone)]
pub struct HtmlCache(Arc<Mutex<Bounded<[u8; 16], Arc<str>>>>);

impl HtmlCache {
    /// A cache of at most `bytes` bytes.
    pub fn new(bytes: usize) -> Self {
        Self(Arc::new(Mutex::new(Bounded::new(usize::MAX, bytes))))
    }

    /// `text` rendered as [`markdown::to_html`] renders it.
    pub fn render(&self, text: &str) -> Arc<str> {
        let digest = Sha256::digest(text.as_bytes());
        let mut key = [0_u8; 16];
        key.copy_from_slice(&digest[..16]);
        if let Some(html) = self.kept().get(&key) {
            return html;
        }
        let html: Arc<str> = Arc::from(markdown::to_html(text));
        let bytes = html.len().saturating_add(ENTRY_OVERHEAD);
        self.kept().insert(key, html.clone(), bytes);
        html
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Bounded<[u8; 16], Arc<str>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_as_the_renderer_does_and_stays_in_its_bound() {
        let texts: Vec<String> = (0..200)
            .map(|n| {
                format!("comment *{n}* with [a link](https://example.com/{n}) <script>x</script>")
            })
            .collect();
        let one = markdown::to_html(&texts[0]).len() + ENTRY_OVERHEAD;
        let cache = HtmlCache::new(10 * one);
        for _ in 0..2 {
            for text in &texts {
                assert_eq!(&*cache.render(text), markdown::to_html(text));
            }
        }
        let kept = cache.kept().bytes();
        assert!(kept <= 10 * one && kept > 5 * one, "{kept} of {}", 10 * one);
        // A text read again is the kept value itself.
        let last = texts.last().map(String::as_str).unwrap_or_default();
        assert!(Arc::ptr_eq(&cache.render(last), &cache.render(last)));
    }
}
