//! A Disqus export (`<disqus>` with `<thread>` and `<post>` elements) read as records, one
//! element at a time.

use std::io::BufRead;

use chrono::{DateTime, NaiveDateTime};

use super::html::to_markdown;
use super::source::{
    guest_id, FormatError, KeyFrom, Record, SkipReason, SourceComment, SourceDiscussion,
};
use super::xml::{attr, is_true, Fields, XmlEvent, XmlStream};
use crate::domain::{Author, CommentStatus, Micros};

/// The format's name in errors.
const FORMAT: &str = "disqus";

/// Reads a Disqus export: each `<thread>` is a [`Record::Discussion`], each `<post>` a
/// [`Record::Comment`] (or a [`Record::Skipped`] when marked as spam), in file order.
///
/// It streams: only the element being read is held. After the first error it ends.
pub struct DisqusReader<R: BufRead> {
    xml: XmlStream<R>,
    key: Option<KeyFrom>,
    done: bool,
}

impl<R: BufRead> DisqusReader<R> {
    /// Reads `reader`; `key` picks what keys a discussion (`None`: the `<id>` when it is not
    /// empty, else the `<link>`).
    pub fn new(reader: R, key: Option<KeyFrom>) -> Self {
        DisqusReader {
            xml: XmlStream::new(reader, FORMAT, "disqus"),
            key,
            done: false,
        }
    }

    /// The next record, `None` at the end of the document.
    fn step(&mut self) -> Result<Option<Record>, FormatError> {
        loop {
            let Some(event) = self.xml.next()? else {
                return Ok(None);
            };
            let XmlEvent::Start { name, attrs } = event else {
                continue;
            };
            if self.xml.depth() != 2 {
                continue; // the root element
            }
            match name.as_str() {
                "thread" => {
                    let fields = self.xml.collect()?;
                    return self.thread(&attrs, &fields).map(Some);
                }
                "post" => {
                    let fields = self.xml.collect()?;
                    return self.post(&attrs, &fields).map(Some);
                }
                _ => self.xml.skip()?,
            }
        }
    }

    fn thread(&self, attrs: &[(String, String)], fields: &Fields) -> Result<Record, FormatError> {
        let source_id = attr(attrs, "dsq:id")
            .ok_or_else(|| self.xml.error("a <thread> without a dsq:id"))?
            .to_owned();
        let link = fields.non_empty("link").map(str::to_owned);
        let identifier = fields.non_empty("id").map(str::to_owned);
        let key = match self.key {
            None | Some(KeyFrom::Identifier) => identifier.or_else(|| link.clone()),
            Some(KeyFrom::Link) => link.clone(),
        };
        let title = match fields.non_empty("title") {
            Some(title) => title.to_owned(),
            None => link.clone().unwrap_or_default(),
        };
        Ok(Record::Discussion(SourceDiscussion {
            source_id,
            key,
            url: link,
            title,
            created: fields.text("createdAt").and_then(parse_date),
        }))
    }

    fn post(&self, attrs: &[(String, String)], fields: &Fields) -> Result<Record, FormatError> {
        let source_id = attr(attrs, "dsq:id")
            .ok_or_else(|| self.xml.error("a <post> without a dsq:id"))?
            .to_owned();
        let discussion = fields
            .attr("thread", "dsq:id")
            .ok_or_else(|| {
                self.xml
                    .error(format!("post {source_id} has no <thread dsq:id=\"…\"/>"))
            })?
            .to_owned();
        if is_true(fields.text("isSpam")) {
            return Ok(Record::Skipped {
                discussion,
                source_id,
                reason: SkipReason::Spam,
            });
        }
        if fields.overlong("message") {
            return Ok(Record::Skipped {
                discussion,
                source_id,
                reason: SkipReason::TooLong,
            });
        }
        let created = fields.text("createdAt").unwrap_or_default();
        let posted = parse_date(created).ok_or_else(|| {
            self.xml.error(format!(
                "post {source_id}: createdAt {created:?} is not a date and time"
            ))
        })?;
        let username = fields.non_empty("author/username");
        let name = fields.text("author/name").unwrap_or_default();
        let id = match username {
            Some(username) => format!("disqus:{username}"),
            None => guest_id(FORMAT, fields.non_empty("author/email"), name),
        };
        let shown = match (name.is_empty(), username) {
            (false, _) => name.to_owned(),
            (true, Some(username)) => username.to_owned(),
            (true, None) => "Anonymous".to_owned(),
        };
        Ok(Record::Comment(SourceComment {
            discussion,
            source_id,
            parent: fields.attr("parent", "dsq:id").map(str::to_owned),
            posted,
            author: Author { id, name: shown },
            text: to_markdown(fields.raw("message").unwrap_or_default()),
            deleted: is_true(fields.text("isDeleted")),
            status: CommentStatus::Approved,
        }))
    }
}

impl<R: BufRead> Iterator for DisqusReader<R> {
    type Item = Result<Record, FormatError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step() {
            Ok(Some(record)) => Some(Ok(record)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(error) => {
                self.done = true;
                Some(Err(error))
            }
        }
    }
}

/// A Disqus time (`2013-01-18T20:42:26Z`; one without a zone is taken as UTC).
fn parse_date(text: &str) -> Option<Micros> {
    let text = text.trim();
    if let Ok(time) = DateTime::parse_from_rfc3339(text) {
        return Some(Micros(time.timestamp_micros()));
    }
    NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f")
        .ok()
        .map(|time| Micros(time.and_utc().timestamp_micros()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::fixtures::{self, comment};

    fn read(bytes: &[u8], key: Option<KeyFrom>) -> Vec<Result<Record, FormatError>> {
        DisqusReader::new(bytes, key).take(10_000).collect()
    }

    fn fixture(key: Option<KeyFrom>) -> Vec<Record> {
        fixtures::records(DisqusReader::new(
            fixtures::bytes("disqus.xml").as_slice(),
            key,
        ))
    }

    #[test]
    fn reads_threads_posts_and_spam_in_file_order() {
        let records = fixture(None);
        let discussions: Vec<_> = records
            .iter()
            .filter_map(|record| match record {
                Record::Discussion(discussion) => Some(discussion.source_id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(discussions, ["1001", "1002", "1003"]);
        let comments: Vec<_> = records
            .iter()
            .filter_map(|record| match record {
                Record::Comment(comment) => Some(comment.source_id.as_str()),
                _ => None,
            })
            .collect();
        // 2004 replies to 2003 and comes before it.
        assert_eq!(
            comments,
            ["2001", "2002", "2004", "2003", "10500", "9800", "3001", "3002", "3003", "3005"]
        );
        let skipped: Vec<_> = records
            .iter()
            .filter_map(|record| match record {
                Record::Skipped {
                    discussion,
                    source_id,
                    reason,
                } => Some((discussion.as_str(), source_id.as_str(), *reason)),
                _ => None,
            })
            .collect();
        assert_eq!(
            skipped,
            [
                ("1001", "2005", SkipReason::Spam),
                ("1002", "3004", SkipReason::Spam)
            ]
        );
    }

    #[test]
    fn posts_keep_their_parents_authors_and_flags() {
        let records = fixture(None);
        let parent = |id| comment(&records, id).parent.as_deref();
        assert_eq!(parent("2001"), None);
        assert_eq!(parent("2002"), Some("2001"));
        assert_eq!(parent("2003"), Some("2002"));
        assert_eq!(parent("2004"), Some("2003"));
        assert_eq!(
            parent("3002"),
            Some("3999"),
            "the orphan's parent is not in the file"
        );
        assert!(comment(&records, "2002").deleted);
        assert!(!comment(&records, "2003").deleted);
        assert_eq!(comment(&records, "2001").discussion, "1001");
        assert_eq!(comment(&records, "3003").discussion, "1002");
        assert_eq!(
            comment(&records, "2001").posted,
            Micros(1_358_541_746_000_000)
        );

        let author = |id| comment(&records, id).author.clone();
        assert_eq!(author("2001").id, "disqus:annsmith");
        assert_eq!(author("2001").name, "Ann Smith");
        // No username: a guest by lower-cased e-mail, by name when the e-mail is empty or absent.
        assert_eq!(
            author("2002").id,
            guest_id("disqus", Some("bob@example.com"), "")
        );
        assert_eq!(
            author("9800").id,
            guest_id("disqus", Some("eve@example.com"), "")
        );
        assert_eq!(author("2004").id, guest_id("disqus", None, "Carol"));
        assert_eq!(author("10500").id, guest_id("disqus", None, "Guest Writer"));
        assert_eq!(author("3002").id, "disqus:lostuser");
        assert_eq!(author("3002").name, "lostuser");
        assert_eq!(author("3005").name, "Anonymous");
        assert!(author("3001").name.contains('山'));

        assert_eq!(
            comment(&records, "2003").text,
            "Nice try friend \\<b>not bold\\</b>\n\n> I regret this."
        );
    }

    #[test]
    fn keys_are_identifiers_then_links() {
        let keys = |key| {
            fixture(key)
                .into_iter()
                .filter_map(|record| match record {
                    Record::Discussion(discussion) => discussion.key,
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        let links = [
            "https://blog.example.com/2013/01/hello-world/",
            "https://blog.example.com/2013/02/cafe-notes/",
            "https://blog.example.com/2013/03/quiet/",
        ];
        // `<id/>` and a blank `<id>` fall back to the link.
        let identifiers = ["post-hello-world", links[1], links[2]];
        assert_eq!(keys(None), identifiers);
        assert_eq!(keys(Some(KeyFrom::Identifier)), identifiers);
        assert_eq!(keys(Some(KeyFrom::Link)), links);

        let records = fixture(None);
        let Some(Record::Discussion(first)) = records.first() else {
            panic!("the first record is not a discussion");
        };
        assert_eq!(first.title, "Hello & welcome");
        assert_eq!(first.url.as_deref(), Some(links[0]));
        assert_eq!(first.created, Some(Micros(1_358_541_600_000_000)));
    }

    #[test]
    fn agrees_with_the_expected_import() {
        fixtures::check_expected(&fixture(None), "disqus");
    }

    #[test]
    fn a_truncated_file_ends_in_an_error() {
        let results = read(&fixtures::bytes("disqus-truncated.xml"), None);
        let Some(Err(error)) = results.last() else {
            panic!("a truncated file must end in an error");
        };
        assert_eq!(error.format, "disqus");
        assert!(error.position > 0);
        // What came before the cut was read.
        assert_eq!(results.iter().filter(|result| result.is_ok()).count(), 6);
        let truncated = fixtures::bytes("disqus-truncated.xml");
        let mut reader = DisqusReader::new(truncated.as_slice(), None);
        assert!(reader.by_ref().any(|result| result.is_err()));
        assert!(reader.next().is_none(), "nothing after the first error");
    }

    #[test]
    fn bad_files_are_errors() {
        let error = |xml: &str| match read(xml.as_bytes(), None).pop() {
            Some(Err(error)) => error.message,
            other => panic!("{xml}: {other:?}"),
        };
        assert!(error(r#"<rss version="2.0"><channel/></rss>"#).contains("<rss>"));
        assert!(error("").contains("no <disqus>"));
        assert!(error("<disqus>").contains("truncated"));
        assert!(error("<disqus><post dsq:id=\"1\"><message>x</message>").contains("truncated"));
        assert!(error("<disqus><post dsq:id=\"1\"></disqus>").contains("XML"));
        let post = |inner: &str| format!("<disqus>{inner}</disqus>");
        assert!(error(&post(
            r#"<post dsq:id="1"><createdAt>2013-01-18T20:42:26Z</createdAt></post>"#
        ))
        .contains("thread"));
        assert!(error(&post(
            r#"<post><thread dsq:id="9"/><createdAt>2013-01-18T20:42:26Z</createdAt></post>"#
        ))
        .contains("dsq:id"));
        assert!(error(&post(
            r#"<post dsq:id="1"><thread dsq:id="9"/><createdAt>yesterday</createdAt></post>"#
        ))
        .contains("yesterday"));
        assert!(read(post("").as_bytes(), None).is_empty());
    }

    #[test]
    fn mangled_files_do_not_panic() {
        fixtures::mangle("disqus.xml", "</disqus>", |bytes| read(bytes, None));
    }
}
