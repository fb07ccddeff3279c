//! Notification mail over a real SMTP server (support's `SmtpServer`, tests/node/smtp.mjs): a
//! sent message arrives with both parts and its threading and one-click unsubscribe headers,
//! 4xx answers and unreachable servers are temporary, 5xx answers permanent, and AUTH uses the
//! credentials in the URL.

use std::time::Duration;

use threadql::domain::secrets::ServerKey;
use threadql::mail::{compose, Item, ItemKind, Mailer, Outgoing, SendOutcome, UnsubscribeTokens};

use crate::support::{Mail, SmtpServer};

/// The longest a message may take to be reported.
const ARRIVES: Duration = Duration::from_secs(10);

/// The time-out of each step of a send.
const STEP: Duration = Duration::from_secs(5);

/// The From of every mailer here.
const FROM: &str = "threadql <notify@comments.example.com>";

/// A notification of `kind` in discussion `id` titled `title`, by Ada.
fn notification(kind: ItemKind, id: &str, title: &str) -> Item {
    Item {
        kind,
        discussion_id: id.to_owned(),
        discussion_title: title.to_owned(),
        link: format!("https://blog.example.com/posts/{id}#comment-k3x9"),
        actor_name: Some("Ada".to_owned()),
        comment_html: Some("<p>Good point, <strong>thanks</strong>!</p>".to_owned()),
        comment_text: Some("Good point, **thanks**!".to_owned()),
        reason: None,
        approved: None,
    }
}

/// A message of `items` to reader@example.com with a signed unsubscribe link.
fn message_of(items: &[Item]) -> Outgoing {
    let tokens = UnsubscribeTokens::new(&ServerKey::generate());
    let url = format!(
        "https://comments.example.com/notifications/unsubscribe?token={}",
        tokens.sign("user-42")
    );
    compose("reader@example.com", items, "comments.example.com", &url)
}

/// A mailer for `url` that fails the test when it cannot be made.
fn mailer_at(url: &str) -> Mailer {
    Mailer::new(url, FROM, STEP).unwrap_or_else(|e| panic!("a mailer for the test server: {e}"))
}

#[tokio::test]
async fn a_sent_message_arrives_with_both_parts_and_its_headers() {
    let server = SmtpServer::start().await;
    let mailer = mailer_at(&server.url());
    let outgoing = message_of(&[notification(ItemKind::Reply, "a1b2", "Ünïcode & <tags>")]);
    assert_eq!(mailer.send(&outgoing).await, SendOutcome::Sent);
    let mail: Mail = server.wait_for(1, ARRIVES).await.remove(0);
    assert_eq!(mail.status, 250);
    assert_eq!(mail.from.as_deref(), Some("notify@comments.example.com"));
    assert_eq!(mail.to, ["reader@example.com"]);
    assert_eq!(
        mail.subject.as_deref(),
        Some("Ada replied to you in “Ünïcode & <tags>”")
    );
    let text = mail.text.as_deref().expect("a text part");
    assert!(text.contains("> Good point, **thanks**!"), "{text}");
    assert!(text.contains(&outgoing.unsubscribe_url), "{text}");
    let html = mail.html.as_deref().expect("an html part");
    assert!(
        html.contains("<p>Good point, <strong>thanks</strong>!</p>"),
        "{html}"
    );
    assert!(html.contains("“Ünïcode &amp; &lt;tags&gt;”"), "{html}");
    assert!(html.contains("https://blog.example.com/posts/a1b2#comment-k3x9"));
    assert_eq!(
        mail.message_id.as_deref(),
        Some(outgoing.message_id.as_str())
    );
    assert_eq!(mail.references, outgoing.references);
    assert_eq!(mail.references, ["<discussion-a1b2@comments.example.com>"]);
    assert_eq!(
        mail.header("in-reply-to"),
        Some(outgoing.references[0].as_str())
    );
    let list_unsubscribe = format!("<{}>", outgoing.unsubscribe_url);
    assert_eq!(
        mail.header("list-unsubscribe"),
        Some(list_unsubscribe.as_str())
    );
    assert_eq!(
        mail.header("list-unsubscribe-post"),
        Some("List-Unsubscribe=One-Click")
    );
    let content_type = mail.header("content-type").expect("a content type");
    assert!(
        content_type.starts_with("multipart/alternative;"),
        "{content_type}"
    );
    assert!(mail.header("date").is_some());
}

#[tokio::test]
async fn a_digest_references_each_of_its_discussions() {
    let server = SmtpServer::start().await;
    let mailer = mailer_at(&server.url());
    let outgoing = message_of(&[
        notification(ItemKind::Reply, "d1", "First"),
        notification(ItemKind::Followed, "d2", "Second"),
        notification(ItemKind::Followed, "d1", "First"),
    ]);
    assert_eq!(mailer.send(&outgoing).await, SendOutcome::Sent);
    let mail = server.wait_for(1, ARRIVES).await.remove(0);
    assert_eq!(
        mail.subject.as_deref(),
        Some("3 new notifications in “First” and 1 other discussion")
    );
    assert_eq!(
        mail.references,
        [
            "<discussion-d1@comments.example.com>",
            "<discussion-d2@comments.example.com>"
        ]
    );
    assert_eq!(mail.header("in-reply-to"), None);
}

#[tokio::test]
async fn a_4xx_answer_is_temporary_and_a_5xx_answer_permanent() {
    let server = SmtpServer::start().await;
    let mailer = mailer_at(&server.url());
    let outgoing = message_of(&[notification(ItemKind::Followed, "d1", "Title")]);
    server.answer_next(&[451, 550]).await;
    let first = mailer.send(&outgoing).await;
    assert!(
        matches!(&first, SendOutcome::Temporary(why) if why.contains("451")),
        "{first:?}"
    );
    let second = mailer.send(&outgoing).await;
    assert!(
        matches!(&second, SendOutcome::Permanent(why) if why.contains("550")),
        "{second:?}"
    );
    assert_eq!(mailer.send(&outgoing).await, SendOutcome::Sent);
    server.answer_next_with(&[(452, "Mailbox full")]).await;
    let full = mailer.send(&outgoing).await;
    assert!(
        matches!(&full, SendOutcome::Temporary(why) if why.contains("Mailbox full")),
        "{full:?}"
    );
    let statuses: Vec<u16> = server
        .wait_for(4, ARRIVES)
        .await
        .iter()
        .map(|mail| mail.status)
        .collect();
    assert_eq!(statuses, [451, 550, 250, 452]);
    assert_eq!(server.messages().len(), 4);
}

#[tokio::test]
async fn a_server_that_is_not_there_or_silent_is_temporary() {
    let outgoing = message_of(&[notification(ItemKind::Followed, "d1", "Title")]);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port");
    let port = listener.local_addr().expect("its address").port();
    drop(listener);
    let closed = mailer_at(&format!("smtp://127.0.0.1:{port}"));
    let outcome = closed.send(&outgoing).await;
    assert!(matches!(outcome, SendOutcome::Temporary(_)), "{outcome:?}");

    // A server that takes the connection and never greets.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port");
    let url = format!(
        "smtp://127.0.0.1:{}",
        silent.local_addr().expect("its address").port()
    );
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
        }
    });
    let mailer = Mailer::new(&url, FROM, Duration::from_millis(300)).expect("a mailer");
    let started = std::time::Instant::now();
    let outcome = mailer.send(&outgoing).await;
    assert!(
        matches!(&outcome, SendOutcome::Temporary(why) if why.contains("longer than")),
        "{outcome:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the time-out bounds the whole send: {:?}",
        started.elapsed()
    );
    holder.abort();
}

#[tokio::test]
async fn auth_uses_the_url_credentials_and_a_refusal_is_permanent() {
    let server = SmtpServer::start().await;
    server.accept_credentials("mailer", "p@ss word:1").await;
    server.require_auth(true).await;
    let outgoing = message_of(&[notification(ItemKind::Followed, "d1", "Title")]);
    let port = server.port();

    let good = mailer_at(&format!("smtp://mailer:p%40ss%20word%3A1@127.0.0.1:{port}"));
    assert_eq!(good.send(&outgoing).await, SendOutcome::Sent);
    let mail = server.wait_for(1, ARRIVES).await.remove(0);
    assert_eq!(mail.user.as_deref(), Some("mailer"));

    let wrong = mailer_at(&format!("smtp://mailer:nope@127.0.0.1:{port}"));
    let refused = wrong.send(&outgoing).await;
    let refused_auth = matches!(&refused, SendOutcome::Permanent(why) if why.contains("535"));
    assert!(refused_auth, "{refused:?}");
    assert!(!format!("{refused:?}").contains("nope"), "{refused:?}");
    let anonymous = mailer_at(&server.url());
    let refused = anonymous.send(&outgoing).await;
    assert!(
        matches!(&refused, SendOutcome::Permanent(why) if why.contains("530")),
        "{refused:?}"
    );
    assert_eq!(server.messages().len(), 1);

    server.require_auth(false).await;
    assert_eq!(anonymous.send(&outgoing).await, SendOutcome::Sent);
    assert_eq!(server.wait_for(2, ARRIVES).await[1].user, None);
}

#[tokio::test]
async fn tls_the_server_cannot_do_is_temporary_and_nothing_goes_in_plain() {
    let server = SmtpServer::start().await;
    let port = server.port();
    let outgoing = message_of(&[notification(ItemKind::Followed, "d1", "Title")]);
    for (url, why) in [
        (format!("smtp://127.0.0.1:{port}?tls=starttls"), "STARTTLS"),
        (format!("smtp+starttls://127.0.0.1:{port}"), "STARTTLS"),
        (format!("smtps://127.0.0.1:{port}"), "Connection error"),
    ] {
        let mailer = Mailer::new(&url, FROM, Duration::from_secs(2)).expect("a mailer");
        let outcome = mailer.send(&outgoing).await;
        assert!(
            matches!(&outcome, SendOutcome::Temporary(text) if text.contains(why)),
            "{url}: {outcome:?}"
        );
    }
    assert_eq!(server.messages(), []);
}
