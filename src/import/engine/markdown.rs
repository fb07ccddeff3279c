//! An imported discussion's texts made fit to store: Markdown nested deeper than the server
//! allows is flattened (and reported), and each text is rendered to the HTML stored with it, as
//! a post's is.

use super::{Options, Prepared};
use crate::domain::markdown;

/// `prepared` with every comment text within `options.max_markdown_depth` levels of block
/// quotes and lists (a deeper one flattened: see [`markdown::flatten`]) and, unless `render` is
/// false (a dry run), its HTML; and a line for the report per text flattened. Rendering a
/// discussion's texts takes CPU: it runs on the blocking pool, one discussion at a time, so
/// memory holds one discussion's HTML at most.
pub(super) async fn fit_texts(
    mut prepared: Prepared,
    options: &Options,
    render: bool,
) -> anyhow::Result<(Prepared, Vec<String>)> {
    let (format, max) = (options.format, options.max_markdown_depth);
    let fit = move || {
        let mut flattened = Vec::new();
        for (source, comment) in prepared.comments.iter_mut().chain(prepared.held.iter_mut()) {
            let Some(text) = comment.text.as_mut() else {
                continue;
            };
            if let Some(flat) = markdown::flatten(text, max) {
                flattened.push(format!(
                    "{source}: block quotes and lists nested {} levels deep; the markers past \
                     {max} levels were escaped",
                    markdown::depth(text)
                ));
                *text = flat;
            }
            if render {
                comment.html = Some(markdown::render(text, max));
            }
        }
        (prepared, flattened)
    };
    tokio::task::spawn_blocking(fit)
        .await
        .map_err(|e| anyhow::anyhow!("preparing the texts of a {format} discussion failed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{
        Author, Comment, DiscussionTitle, FullSlug, Layout, Micros, NewDiscussion, Slug, SlugPart,
    };

    fn comment(text: &str) -> Comment {
        let part = SlugPart::generate();
        Comment {
            discussion_id: crate::domain::DiscussionId::generate(),
            slug: Slug::top_level(&part),
            full_slug: FullSlug::top_level(Micros(1), &part),
            parent: None,
            posted: Micros(1),
            author: Author {
                id: "a".into(),
                name: "A".into(),
            },
            text: Some(text.into()),
            html: None,
            edited: None,
            edited_by: None,
            deleted: false,
            revisions: Vec::new(),
            reply_count: 0,
            standing: Default::default(),
            votes: Default::default(),
            number: None,
        }
    }

    #[tokio::test]
    async fn deep_texts_are_flattened_reported_and_rendered() {
        let options = Options {
            format: "disqus",
            layout: None,
            default_layout: Layout::PerComment,
            max_depth: 8,
            max_markdown_depth: 3,
            max_text_chars: 10_000,
            dry_run: false,
            lease: std::time::Duration::from_secs(1),
        };
        let prepared = Prepared {
            new: NewDiscussion {
                title: DiscussionTitle::parse("t").unwrap_or_else(|e| panic!("{e}")),
                layout: Layout::PerComment,
                key: None,
                url: None,
                id: None,
                created: None,
            },
            comments: vec![
                ("disqus:1".into(), comment("> > > > > deep")),
                ("disqus:2".into(), comment("*fine*")),
            ],
            held: vec![("disqus:3".into(), comment("- - - - x"))],
            votes: Vec::new(),
            pinned: Vec::new(),
            locked: false,
            moderation: None,
        };
        let (fit, flattened) = fit_texts(prepared, &options, true)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(flattened.len(), 2, "{flattened:?}");
        assert!(flattened[0].starts_with("disqus:1: block quotes and lists nested 5 levels deep"));
        assert!(flattened[1].starts_with("disqus:3:"));
        let deep = &fit.comments[0].1;
        assert_eq!(deep.text.as_deref(), Some("> > > \\> > deep"));
        assert_eq!(
            deep.html
                .as_deref()
                .map(|h| h.matches("<blockquote>").count()),
            Some(3)
        );
        assert_eq!(fit.comments[1].1.text.as_deref(), Some("*fine*"));
        assert_eq!(
            fit.comments[1].1.html.as_deref(),
            Some("<p><em>fine</em></p>\n")
        );
        assert!(fit.held[0].1.html.is_some());
        // A dry run reports without rendering.
        let dry = Prepared {
            comments: vec![("disqus:4".into(), comment("> > > > x"))],
            ..fit
        };
        let (dry, flattened) = fit_texts(dry, &options, false)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(flattened.len(), 1);
        assert!(dry.comments[0].1.html.is_none());
    }
}
