//! Composition, the two bodies, the headers lettre writes, and making a [`Mailer`].

use std::time::Duration;

use lettre::message::Mailbox;

use super::headers::letter;
use super::*;

const UNSUBSCRIBE: &str = "https://comments.example.com/notifications/unsubscribe?token=dXNlcg.abc";

/// An item of `kind` in discussion `id` titled `title`.
fn item(kind: ItemKind, id: &str, title: &str) -> Item {
    Item {
        kind,
        discussion_id: id.to_owned(),
        discussion_title: title.to_owned(),
        link: format!("https://blog.example.com/{id}#comment-abc"),
        actor_name: Some("Ada".to_owned()),
        comment_html: Some("<p>Nice <em>post</em></p>".to_owned()),
        comment_text: Some("Nice *post*\nsecond line".to_owned()),
        reason: None,
        approved: None,
    }
}

/// The subject of a message of `items`.
fn subject_of(items: &[Item]) -> String {
    compose(
        "reader@example.com",
        items,
        "comments.example.com",
        UNSUBSCRIBE,
    )
    .subject
}

/// The message as it goes over the wire.
fn wire(outgoing: &Outgoing) -> String {
    let from: Mailbox = "threadql <mail@example.com>".parse().expect("a mailbox");
    let message = letter(outgoing, &from).expect("a message");
    String::from_utf8(message.formatted()).expect("ASCII")
}

#[test]
fn one_item_names_what_happened_and_the_discussion() {
    let reply = item(ItemKind::Reply, "d1", "Title");
    assert_eq!(
        subject_of(std::slice::from_ref(&reply)),
        "Ada replied to you in “Title”"
    );
    let anonymous = Item {
        actor_name: None,
        ..reply
    };
    assert_eq!(subject_of(&[anonymous]), "New reply to you in “Title”");
    let moderated = |approved| Item {
        approved,
        ..item(ItemKind::Moderation, "d1", "Title")
    };
    assert_eq!(
        subject_of(&[moderated(Some(true))]),
        "Your comment in “Title” was approved"
    );
    assert_eq!(
        subject_of(&[moderated(Some(false))]),
        "Your comment in “Title” was rejected"
    );
    assert_eq!(
        subject_of(&[moderated(None)]),
        "Your comment in “Title” was moderated"
    );
    assert_eq!(
        subject_of(&[item(ItemKind::Followed, "d1", "Title")]),
        "New comment in “Title”"
    );
    assert_eq!(subject_of(&[]), "No new notifications");
}

#[test]
fn several_items_are_counted_per_discussion() {
    let in_one = [
        item(ItemKind::Reply, "d1", "Title"),
        item(ItemKind::Followed, "d1", "Title"),
        item(ItemKind::Moderation, "d1", "Title"),
    ];
    assert_eq!(subject_of(&in_one), "3 new notifications in “Title”");
    let in_three = [
        item(ItemKind::Reply, "d1", "Title"),
        item(ItemKind::Followed, "d2", "Other"),
        item(ItemKind::Followed, "d1", "Title"),
        item(ItemKind::Reply, "d3", "Third"),
    ];
    assert_eq!(
        subject_of(&in_three),
        "4 new notifications in “Title” and 2 other discussions"
    );
    assert_eq!(
        subject_of(&in_three[..2]),
        "2 new notifications in “Title” and 1 other discussion"
    );
}

#[test]
fn a_subject_is_one_line_and_capped() {
    let hostile = Item {
        actor_name: Some("Eve\r\nBcc: victim@example.com".to_owned()),
        ..item(
            ItemKind::Reply,
            "d1",
            "Hi\r\nBcc: everyone@example.com\n\u{0}\u{1b}[31m\u{2028}there",
        )
    };
    let subject = subject_of(std::slice::from_ref(&hostile));
    assert_eq!(
        subject,
        "Eve Bcc: victim@example.com replied to you in \
         “Hi Bcc: everyone@example.com [31m there”"
    );
    assert!(!subject.chars().any(char::is_control), "{subject:?}");
    let outgoing = compose("reader@example.com", &[hostile], "h", UNSUBSCRIBE);
    let wire = wire(&outgoing);
    assert!(!wire.lines().any(|line| line.starts_with("Bcc:")), "{wire}");

    let long = item(ItemKind::Followed, "d1", &"word ".repeat(100));
    let subject = subject_of(&[long]);
    assert!(subject.chars().count() <= MAX_SUBJECT_CHARS, "{subject}");
    assert!(
        subject.starts_with("New comment in “word word"),
        "{subject}"
    );
    assert!(subject.ends_with("word…”"), "{subject}");
    let many = [
        item(ItemKind::Followed, "d1", &"ü".repeat(400)),
        item(ItemKind::Followed, "d2", "x"),
    ];
    let subject = subject_of(&many);
    assert!(subject.chars().count() <= MAX_SUBJECT_CHARS, "{subject}");
    assert!(subject.ends_with("…” and 1 other discussion"), "{subject}");
    assert_eq!(
        subject_of(&[item(ItemKind::Followed, "d1", " \n ")]),
        "New comment in “Untitled discussion”"
    );
}

#[test]
fn user_text_is_escaped_in_the_html_and_the_comment_html_is_kept() {
    let hostile = Item {
        actor_name: Some("<script>name()</script>".to_owned()),
        reason: Some("<script>reason()</script> & more".to_owned()),
        approved: Some(false),
        link: "https://x.example/\"><script>link()</script>".to_owned(),
        ..item(ItemKind::Moderation, "d1", "<script>title()</script>")
    };
    let reply = Item {
        actor_name: Some("<b>Mallory</b>".to_owned()),
        link: "javascript:alert(1)".to_owned(),
        ..item(ItemKind::Reply, "d2", "Fine & dandy")
    };
    let outgoing = compose("r@example.com", &[hostile, reply], "h", UNSUBSCRIBE);
    let html = &outgoing.html;
    assert!(!html.contains("<script"), "{html}");
    assert!(!html.contains("<b>"), "{html}");
    assert!(
        html.contains("&lt;script&gt;title()&lt;/script&gt;"),
        "{html}"
    );
    assert!(html.contains("Reason: &lt;script&gt;reason()&lt;/script&gt; &amp; more"));
    assert!(html.contains("href=\"https://x.example/&quot;&gt;&lt;script&gt;link()"));
    assert!(
        html.contains("&lt;b&gt;Mallory&lt;/b&gt; replied to you:"),
        "{html}"
    );
    assert!(html.contains("“Fine &amp; dandy”"), "{html}");
    assert!(!html.contains("javascript:"), "{html}");
    assert_eq!(html.matches("<p>Nice <em>post</em></p>").count(), 2);
    assert!(
        html.contains(&format!("<a href=\"{UNSUBSCRIBE}\">")),
        "{html}"
    );
}

#[test]
fn the_text_part_says_the_same_in_plain_text() {
    let moderated = Item {
        reason: Some("Off\ntopic".to_owned()),
        approved: Some(false),
        ..item(ItemKind::Moderation, "d1", "Title")
    };
    let followed = item(ItemKind::Followed, "d2", "Other\u{1b}");
    let outgoing = compose("r@example.com", &[moderated, followed], "h", UNSUBSCRIBE);
    let text = &outgoing.text;
    for expected in [
        "“Title”\n",
        "Your comment was rejected.\nReason: Off topic\n",
        "> Nice *post*\n> second line\n",
        "View your comment: https://blog.example.com/d1#comment-abc\n",
        "“Other”\n",
        "Ada commented:\n",
        "View the comment: https://blog.example.com/d2#comment-abc\n",
        &format!("Unsubscribe with one click: {UNSUBSCRIBE}\n"),
    ] {
        assert!(text.contains(expected), "{expected:?} is not in:\n{text}");
    }
    assert!(!text.contains('\u{1b}'));
    assert!(text.find("“Title”") < text.find("“Other”"));
}

#[test]
fn ids_thread_per_discussion_and_each_message_is_new() {
    let items = [
        item(ItemKind::Reply, "0123abcd", "One"),
        item(ItemKind::Followed, "odd id/é", "Two"),
        item(ItemKind::Reply, "0123abcd", "One"),
    ];
    let first = compose("r@example.com", &items, "comments.example.com", UNSUBSCRIBE);
    let again = compose("r@example.com", &items, "comments.example.com", UNSUBSCRIBE);
    assert_eq!(first.references.len(), 2);
    assert_eq!(
        first.references[0],
        "<discussion-0123abcd@comments.example.com>"
    );
    assert!(first.references[1].starts_with("<discussion."));
    assert!(first.references[1].is_ascii() && !first.references[1].contains(' '));
    assert_eq!(first.references, again.references);
    assert_ne!(first.message_id, again.message_id);
    assert!(first.message_id.starts_with('<'));
    assert!(first.message_id.ends_with("@comments.example.com>"));
    let odd_host = compose(
        "r@example.com",
        &items[..1],
        "exa mple>\r\n.com",
        UNSUBSCRIBE,
    );
    assert!(
        odd_host.message_id.ends_with("@example.com>"),
        "{}",
        odd_host.message_id
    );
    let no_host = compose("r@example.com", &items[..1], "", UNSUBSCRIBE);
    assert!(no_host.message_id.ends_with("@localhost>"));
}

#[test]
fn the_message_carries_the_threading_and_unsubscribe_headers() {
    let one = compose(
        "r@example.com",
        &[item(ItemKind::Reply, "d1", "Title")],
        "h.example",
        UNSUBSCRIBE,
    );
    let wire = wire(&one);
    for expected in [
        format!("Message-ID: {}\r\n", one.message_id),
        "References: <discussion-d1@h.example>\r\n".to_owned(),
        "In-Reply-To: <discussion-d1@h.example>\r\n".to_owned(),
        format!("List-Unsubscribe: <{UNSUBSCRIBE}>\r\n"),
        "List-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n".to_owned(),
        "To: r@example.com\r\n".to_owned(),
        "Content-Type: multipart/alternative;".to_owned(),
    ] {
        assert!(wire.contains(&expected), "{expected:?} is not in:\n{wire}");
    }
    let plain = wire.find("Content-Type: text/plain").expect("a text part");
    let html = wire.find("Content-Type: text/html").expect("an html part");
    assert!(plain < html, "text comes before html");

    let two = compose(
        "r@example.com",
        &[
            item(ItemKind::Reply, "d1", "Title"),
            item(ItemKind::Reply, "d2", "Other"),
        ],
        "h.example",
        UNSUBSCRIBE,
    );
    let wire = self::wire(&two);
    assert!(wire.contains("References: <discussion-d1@h.example> <discussion-d2@h.example>"));
    assert!(!wire.contains("In-Reply-To"), "{wire}");
}

#[test]
fn an_unsubscribe_url_that_cannot_stand_in_a_header_is_left_out() {
    for url in [
        "",
        "javascript:alert(1)",
        "https://x/a b",
        "https://x/<a>",
        "https://x/é",
    ] {
        let outgoing = compose("r@example.com", &[], "h", url);
        let wire = wire(&outgoing);
        assert!(!wire.contains("List-Unsubscribe"), "{url}: {wire}");
    }
}

#[test]
fn a_bad_recipient_cannot_be_built() {
    let outgoing = compose("not an address", &[], "h", UNSUBSCRIBE);
    let from: Mailbox = "mail@example.com".parse().expect("a mailbox");
    let refusal = letter(&outgoing, &from).expect_err("refused");
    assert!(refusal.contains("recipient address"), "{refusal}");
}

#[tokio::test]
async fn a_mailer_is_made_from_good_settings_only() {
    let timeout = Duration::from_secs(5);
    for url in [
        "smtp://127.0.0.1:2525",
        "smtp://h?tls=starttls",
        "smtp+starttls://u:p@h",
        "smtps://h",
    ] {
        for from in ["mail@example.com", "threadql <mail@example.com>"] {
            assert!(Mailer::new(url, from, timeout).is_ok(), "{url} {from}");
        }
    }
    let bad_from =
        Mailer::new("smtp://u:s3cret@h", "not an address", timeout).expect_err("refused");
    let message = bad_from.to_string();
    assert!(message.starts_with("THREADQL_MAIL_FROM"), "{message}");
    assert!(message.contains("\"not an address\""), "{message}");
    assert!(!message.contains("s3cret"), "{message}");
    let bad_url =
        Mailer::new("http://u:s3cret@h", "mail@example.com", timeout).expect_err("refused");
    assert!(matches!(bad_url, MailError::Url(_)), "{bad_url}");
    assert!(!bad_url.to_string().contains("s3cret"));
}

#[test]
fn a_mailer_needs_a_runtime() {
    let outside = Mailer::new("smtp://h", "mail@example.com", Duration::from_secs(1));
    assert_eq!(outside.err(), Some(MailError::NoRuntime));
}

#[tokio::test]
async fn a_bad_recipient_is_dropped_without_connecting() {
    // Port 9 on 127.0.0.1: nothing needs to listen, nothing is dialled.
    let mailer = Mailer::new(
        "smtp://127.0.0.1:9",
        "mail@example.com",
        Duration::from_secs(1),
    )
    .expect("a mailer");
    let outgoing = compose("nobody", &[], "h", UNSUBSCRIBE);
    assert!(matches!(
        mailer.send(&outgoing).await,
        SendOutcome::Permanent(reason) if reason.contains("recipient")
    ));
}
