//! A WordPress export (WXR: RSS 2.0 with `wp:` elements) read as records, one item at a time.

use std::collections::VecDeque;
use std::io::BufRead;

use chrono::NaiveDateTime;

use super::html::{decode_entities, to_markdown};
use super::source::{
    guest_id, FormatError, KeyFrom, Record, SkipReason, SourceComment, SourceDiscussion,
};
use super::xml::{Fields, XmlEvent, XmlStream};
use crate::domain::{Author, CommentStatus, Micros};

/// The format's name in errors.
const FORMAT: &str = "wordpress";

/// Reads a WordPress export: each `<item>` with at least one `<wp:comment>` is a
/// [`Record::Discussion`], followed by its comments as [`Record::Comment`] (or
/// [`Record::Skipped`] for spam and trash); items without comments give nothing.
///
/// Pingbacks and trackbacks (`wp:comment_type` `pingback`, `trackback`) are read as ordinary
/// comments by their site. Elements are known by their usual prefixes (`wp:`, `content:`).
///
/// An item without a `wp:post_id` is known by its link (its comments name it so), or by its
/// place in the file when it has no link either; `--key identifier` cannot key it, so such an
/// item with comments is an error then.
///
/// It streams: only the current item's titles and ids and the comment being read are held
/// (an item's comments wait only if they come before its `wp:post_id`, or it has none). After
/// the first error it ends.
pub struct WordPressReader<R: BufRead> {
    xml: XmlStream<R>,
    key: Option<KeyFrom>,
    item: Option<Item>,
    /// How many `<item>`s have started.
    items: usize,
    ready: VecDeque<Record>,
    /// The error that ended reading, given out after the records read before it.
    failure: Option<FormatError>,
    done: bool,
}

/// What an item gives its discussion, gathered as it is read.
#[derive(Debug, Default)]
struct Item {
    /// Its place in the file (1 for the first).
    number: usize,
    title: String,
    link: String,
    post_id: String,
    date_gmt: String,
    /// Whether its discussion was given out.
    emitted: bool,
    /// Comments read before its `wp:post_id`.
    waiting: Vec<Fields>,
}

impl<R: BufRead> WordPressReader<R> {
    /// Reads `reader`; `key` picks what keys a discussion (`None`: the `<link>`).
    pub fn new(reader: R, key: Option<KeyFrom>) -> Self {
        WordPressReader {
            xml: XmlStream::new(reader, FORMAT, "rss"),
            key,
            item: None,
            items: 0,
            ready: VecDeque::new(),
            failure: None,
            done: false,
        }
    }

    /// Reads on until there are records to give, or the document ends.
    fn fill(&mut self) -> Result<(), FormatError> {
        while self.ready.is_empty() {
            let Some(event) = self.xml.next()? else {
                return Ok(());
            };
            let depth = self.xml.depth();
            match event {
                XmlEvent::Start { name, .. } => match (depth, name.as_str()) {
                    (1, _) | (2, "channel") => {}
                    (3, "item") => {
                        self.items += 1;
                        self.item = Some(Item {
                            number: self.items,
                            ..Item::default()
                        });
                    }
                    (4, "title" | "link" | "wp:post_id" | "wp:post_date_gmt")
                        if self.item.is_some() =>
                    {
                        let text = self.xml.read_text()?.trim().to_owned();
                        if let Some(item) = self.item.as_mut() {
                            match name.as_str() {
                                "title" => item.title = text,
                                "link" => item.link = text,
                                "wp:post_id" => item.post_id = text,
                                _ => item.date_gmt = text,
                            }
                        }
                    }
                    (4, "wp:comment") if self.item.is_some() => {
                        let fields = self.xml.collect()?;
                        self.comment(fields)?;
                    }
                    _ => self.xml.skip()?,
                },
                XmlEvent::End if depth == 2 => {
                    if let Some(item) = self.item.take() {
                        self.end_item(item)?;
                    }
                }
                XmlEvent::End | XmlEvent::Text(_) => {}
            }
        }
        Ok(())
    }

    /// A comment of the current item: given out now if the item's id is known, else kept.
    fn comment(&mut self, fields: Fields) -> Result<(), FormatError> {
        let Some(mut item) = self.item.take() else {
            return Ok(());
        };
        let result = if item.post_id.is_empty() {
            item.waiting.push(fields);
            Ok(())
        } else {
            self.discussion(&mut item);
            self.convert(&item.post_id, &fields)
        };
        self.item = Some(item);
        result
    }

    fn end_item(&mut self, mut item: Item) -> Result<(), FormatError> {
        if item.waiting.is_empty() {
            return Ok(());
        }
        if item.post_id.is_empty() && self.key == Some(KeyFrom::Identifier) {
            return Err(self.xml.error(format!(
                "an <item> with comments has no <wp:post_id> to key it by (--key identifier): {}",
                item.name()
            )));
        }
        self.discussion(&mut item);
        let source_id = item.source_id();
        for fields in std::mem::take(&mut item.waiting) {
            self.convert(&source_id, &fields)?;
        }
        Ok(())
    }

    /// Queues the item's discussion, once.
    fn discussion(&mut self, item: &mut Item) {
        if item.emitted {
            return;
        }
        item.emitted = true;
        let link = Some(item.link.clone()).filter(|link| !link.is_empty());
        let key = match self.key {
            None | Some(KeyFrom::Link) => link.clone(),
            Some(KeyFrom::Identifier) => Some(item.post_id.clone()),
        };
        // WordPress keeps titles HTML-escaped (`&amp;`, `&#8217;`).
        let title = decode_entities(&item.title).trim().to_owned();
        let title = if title.is_empty() {
            item.link.clone()
        } else {
            title
        };
        self.ready.push_back(Record::Discussion(SourceDiscussion {
            source_id: item.source_id(),
            key,
            url: link,
            title,
            created: parse_date(&item.date_gmt),
        }));
    }

    /// Queues one `<wp:comment>` of the discussion whose source id is `post_id`.
    fn convert(&mut self, post_id: &str, fields: &Fields) -> Result<(), FormatError> {
        let discussion = post_id.to_owned();
        let source_id = fields
            .non_empty("wp:comment_id")
            .ok_or_else(|| {
                self.xml.error(format!(
                    "a <wp:comment> of post {post_id} has no <wp:comment_id>"
                ))
            })?
            .to_owned();
        let status = match fields.text("wp:comment_approved").unwrap_or_default() {
            "1" => CommentStatus::Approved,
            "spam" | "trash" => {
                let reason = if fields.text("wp:comment_approved") == Some("spam") {
                    SkipReason::Spam
                } else {
                    SkipReason::Trash
                };
                self.ready.push_back(Record::Skipped {
                    discussion,
                    source_id,
                    reason,
                });
                return Ok(());
            }
            _ => CommentStatus::Pending,
        };
        if fields.overlong("wp:comment_content") {
            self.ready.push_back(Record::Skipped {
                discussion,
                source_id,
                reason: SkipReason::TooLong,
            });
            return Ok(());
        }
        let posted = fields
            .text("wp:comment_date_gmt")
            .and_then(parse_date)
            .or_else(|| fields.text("wp:comment_date").and_then(parse_date))
            .ok_or_else(|| {
                self.xml.error(format!(
                    "comment {source_id}: no readable wp:comment_date_gmt or wp:comment_date"
                ))
            })?;
        let name = fields.text("wp:comment_author").unwrap_or_default();
        let id = match fields
            .text("wp:comment_user_id")
            .and_then(|id| id.parse::<u64>().ok())
            .filter(|&id| id > 0)
        {
            Some(user) => format!("{FORMAT}:{user}"),
            None => guest_id(FORMAT, fields.non_empty("wp:comment_author_email"), name),
        };
        let parent = fields
            .non_empty("wp:comment_parent")
            .filter(|&parent| parent != "0")
            .map(str::to_owned);
        self.ready.push_back(Record::Comment(SourceComment {
            discussion,
            source_id,
            parent,
            posted,
            author: Author {
                id,
                name: if name.is_empty() { "Anonymous" } else { name }.to_owned(),
            },
            text: to_markdown(fields.raw("wp:comment_content").unwrap_or_default()),
            deleted: false,
            status,
        }));
        Ok(())
    }
}

impl Item {
    /// What its comments name: its `wp:post_id`, else its link, else its place in the file.
    fn source_id(&self) -> String {
        match (self.post_id.as_str(), self.link.as_str()) {
            ("", "") => format!("item {}", self.number),
            ("", link) => link.to_owned(),
            (post_id, _) => post_id.to_owned(),
        }
    }

    /// The item in an error: its place in the file, title and link.
    fn name(&self) -> String {
        let mut parts = vec![format!("item {}", self.number)];
        for part in [&self.title, &self.link] {
            if !part.is_empty() {
                parts.push(format!("{part:?}"));
            }
        }
        parts.join(" ")
    }
}

impl<R: BufRead> Iterator for WordPressReader<R> {
    type Item = Result<Record, FormatError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.ready.is_empty() && !self.done {
            if let Err(error) = self.fill() {
                self.done = true;
                self.failure = Some(error);
            }
        }
        if let Some(record) = self.ready.pop_front() {
            return Some(Ok(record));
        }
        self.done = true;
        self.failure.take().map(Err)
    }
}

/// A WordPress time (`2011-04-04 20:12:27`), taken as UTC; `0000-00-00 00:00:00` is none.
fn parse_date(text: &str) -> Option<Micros> {
    NaiveDateTime::parse_from_str(text.trim(), "%Y-%m-%d %H:%M:%S")
        .ok()
        .map(|time| Micros(time.and_utc().timestamp_micros()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::fixtures::{self, comment};
    use crate::import::source::guest_id;

    fn read(bytes: &[u8], key: Option<KeyFrom>) -> Vec<Result<Record, FormatError>> {
        WordPressReader::new(bytes, key).take(10_000).collect()
    }

    fn fixture(key: Option<KeyFrom>) -> Vec<Record> {
        fixtures::records(WordPressReader::new(
            fixtures::bytes("wordpress.xml").as_slice(),
            key,
        ))
    }

    /// Each record as `D:<id>`, `C:<id>` or `S:<id>`.
    fn outline(records: &[Record]) -> Vec<String> {
        records
            .iter()
            .map(|record| match record {
                Record::Discussion(discussion) => format!("D:{}", discussion.source_id),
                Record::Comment(comment) => format!("C:{}", comment.source_id),
                Record::Skipped { source_id, .. } => format!("S:{source_id}"),
            })
            .collect()
    }

    #[test]
    fn items_with_comments_come_before_their_comments() {
        let records = fixture(None);
        assert_eq!(
            outline(&records),
            [
                "D:11", "C:101", "C:104", "C:102", "C:103", "S:105", "S:106", "C:107", "C:1010",
                "C:109", "D:12", "C:201", "C:202", "C:203", "C:204"
            ],
            "the item without comments gives nothing"
        );
        let skips: Vec<_> = records
            .iter()
            .filter_map(|record| match record {
                Record::Skipped {
                    discussion, reason, ..
                } => Some((discussion.as_str(), *reason)),
                _ => None,
            })
            .collect();
        assert_eq!(skips, [("11", SkipReason::Spam), ("11", SkipReason::Trash)]);
    }

    #[test]
    fn comments_keep_parents_statuses_authors_and_times() {
        let records = fixture(None);
        let parent = |id| comment(&records, id).parent.as_deref();
        assert_eq!(parent("101"), None);
        assert_eq!(parent("102"), Some("101"));
        assert_eq!(parent("103"), Some("102"));
        assert_eq!(parent("104"), Some("103"));
        assert_eq!(parent("202"), Some("299"));
        assert_eq!(comment(&records, "107").status, CommentStatus::Pending);
        assert_eq!(comment(&records, "101").status, CommentStatus::Approved);
        assert!(records.iter().all(|record| match record {
            Record::Comment(comment) => !comment.deleted,
            _ => true,
        }));
        assert_eq!(comment(&records, "204").discussion, "12");

        let author = |id| comment(&records, id).author.clone();
        assert_eq!(author("101").id, "wordpress:1");
        assert_eq!(author("204").id, "wordpress:3");
        assert_eq!(
            author("102").id,
            guest_id("wordpress", Some("bert@example.com"), "")
        );
        // An empty e-mail: a guest by name.
        assert_eq!(author("201").id, guest_id("wordpress", None, "Jürgen"));
        assert_eq!(author("201").name, "Jürgen");
        // A pingback is a comment by its site.
        assert_eq!(author("203").name, "Some Blog");

        assert_eq!(
            comment(&records, "101").posted,
            Micros(1_301_947_947_000_000)
        );
        // `0000-00-00 00:00:00` in GMT: the local time, taken as UTC.
        assert_eq!(
            comment(&records, "201").posted,
            Micros(1_336_288_089_000_000)
        );
        assert_eq!(
            comment(&records, "102").text,
            "Nice work!",
            "the script is dropped"
        );
    }

    #[test]
    fn keys_are_links_or_post_ids() {
        let discussions = |key| {
            fixture(key)
                .into_iter()
                .filter_map(|record| match record {
                    Record::Discussion(discussion) => Some(discussion),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        let keys = |key| {
            discussions(key)
                .into_iter()
                .map(|discussion| discussion.key.unwrap_or_default())
                .collect::<Vec<_>>()
        };
        let links = [
            "https://wp.example.org/2011/04/hello-world/",
            "https://wp.example.org/about/",
        ];
        assert_eq!(keys(None), links);
        assert_eq!(keys(Some(KeyFrom::Link)), links);
        assert_eq!(keys(Some(KeyFrom::Identifier)), ["11", "12"]);
        let first = &discussions(None)[0];
        assert_eq!(first.source_id, "11");
        assert_eq!(first.title, "Hello world & more");
        assert_eq!(first.url.as_deref(), Some(links[0]));
        assert_eq!(first.created, Some(Micros(1_301_943_600_000_000)));
    }

    #[test]
    fn agrees_with_the_expected_import() {
        fixtures::check_expected(&fixture(None), "wordpress");
    }

    #[test]
    fn comments_before_the_post_id_wait_for_it() {
        let xml = r#"<rss><channel><item><title>T</title><link>https://x.org/t</link>
            <wp:comment><wp:comment_id>5</wp:comment_id><wp:comment_approved>1</wp:comment_approved>
            <wp:comment_date_gmt>2011-04-04 20:12:27</wp:comment_date_gmt></wp:comment>
            <wp:post_id>7</wp:post_id></item></channel></rss>"#;
        let records = fixtures::records(WordPressReader::new(xml.as_bytes(), None));
        assert_eq!(outline(&records), ["D:7", "C:5"]);
        assert_eq!(comment(&records, "5").discussion, "7");
    }

    #[test]
    fn an_item_without_a_post_id_is_keyed_by_its_link() {
        let comment_xml = |id: u32| {
            format!("<wp:comment><wp:comment_id>{id}</wp:comment_id><wp:comment_approved>1</wp:comment_approved><wp:comment_date_gmt>2011-04-04 20:12:27</wp:comment_date_gmt></wp:comment>")
        };
        let xml = format!(
            "<rss><channel><item><title>T</title><link>https://x.org/t</link>{}{}</item>\
             <item><title>No link</title>{}</item>\
             <item><link>https://x.org/u</link><wp:post_id>9</wp:post_id>{}</item></channel></rss>",
            comment_xml(5),
            comment_xml(6),
            comment_xml(7),
            comment_xml(8)
        );
        for key in [None, Some(KeyFrom::Link)] {
            let records = fixtures::records(WordPressReader::new(xml.as_bytes(), key));
            assert_eq!(
                outline(&records),
                [
                    "D:https://x.org/t",
                    "C:5",
                    "C:6",
                    "D:item 2",
                    "C:7",
                    "D:9",
                    "C:8"
                ]
            );
            let Some(Record::Discussion(first)) = records.first() else {
                panic!("{records:?}");
            };
            assert_eq!(first.key.as_deref(), Some("https://x.org/t"));
            assert_eq!(first.title, "T");
            assert_eq!(comment(&records, "6").discussion, "https://x.org/t");
            // With neither an id nor a link, the import reports it (it has no key).
            let Some(Record::Discussion(second)) = records.get(3) else {
                panic!("{records:?}");
            };
            assert_eq!(
                (second.key.as_deref(), second.title.as_str()),
                (None, "No link")
            );
        }
        // `--key identifier` cannot key it: the file is refused, naming the item.
        let results = read(xml.as_bytes(), Some(KeyFrom::Identifier));
        let [Err(error)] = results.as_slice() else {
            panic!("{results:?}");
        };
        assert!(error.message.contains("<wp:post_id>"), "{error}");
        assert!(error.message.contains("item 1"), "{error}");
        assert!(error.message.contains("https://x.org/t"), "{error}");
    }

    #[test]
    fn bad_files_are_errors() {
        let error = |xml: &str| match read(xml.as_bytes(), None).pop() {
            Some(Err(error)) => {
                assert_eq!(error.format, "wordpress");
                error.message
            }
            other => panic!("{xml}: {other:?}"),
        };
        assert!(error("<disqus></disqus>").contains("<disqus>"));
        assert!(error("<rss><channel><item>").contains("truncated"));
        let item = |comment: &str| {
            format!("<rss><channel><item><wp:post_id>1</wp:post_id><wp:comment>{comment}</wp:comment></item></channel></rss>")
        };
        assert!(error(&item(
            "<wp:comment_id>5</wp:comment_id><wp:comment_approved>1</wp:comment_approved>"
        ))
        .contains("comment 5"));
        assert!(
            error(&item("<wp:comment_approved>1</wp:comment_approved>")).contains("wp:comment_id")
        );
        // Spam and trash need no date.
        let skipped = read(
            item("<wp:comment_id>5</wp:comment_id><wp:comment_approved>spam</wp:comment_approved>")
                .as_bytes(),
            None,
        );
        assert!(skipped.iter().all(Result::is_ok));
        assert_eq!(skipped.len(), 2);

        let mut cut = fixtures::bytes("wordpress.xml");
        let at = cut
            .windows(8)
            .position(|window| window == b"Oops, wr")
            .unwrap_or_default();
        cut.truncate(at);
        let results = read(&cut, None);
        assert!(matches!(results.last(), Some(Err(_))));
        assert_eq!(results.iter().filter(|result| result.is_ok()).count(), 6);
    }

    #[test]
    fn mangled_files_do_not_panic() {
        fixtures::mangle("wordpress.xml", "</rss>", |bytes| read(bytes, None));
    }
}
