//! Notification e-mail end to end, through a real SMTP server (`SmtpServer`): immediate mail
//! batched by the interval, an hourly digest (its period shortened) that leaves out what was
//! read in the app, the headers, the one-click unsubscribe (a GET changes nothing, a forged or
//! altered token is refused), no mail to an unverified address, 4xx retried and 5xx dropped.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{encode, EncodingKey, Header};
use serde_json::{json, Value};

use crate::support::{graphql_data, metric, server_config, Mail, Running, SmtpServer, SECRET};

/// How long mail may take to arrive.
const ARRIVES: Duration = Duration::from_secs(20);

const POST: &str = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug } }";
const SETTINGS: &str = "mutation($e: EmailFrequency!) { setNotificationSettings(input: {email: $e}) { email emailAddress emailAvailable } }";

/// A token for `sub` carrying `email`, verified or not, signed with the tests' secret.
fn mail_token(sub: &str, email: &str, verified: bool) -> String {
    let exp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3600;
    let claims = json!({ "sub": sub, "name": sub.to_uppercase(), "exp": exp, "email": email, "email_verified": verified });
    encode(
        &Header::default(),
        &claims,
        &EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .unwrap()
}

/// A server mailing through `smtp`, immediate mail at most every `interval` seconds, hourly
/// digests every `hourly` seconds, retries after a second.
async fn mailing_server(label: &str, smtp: &SmtpServer, interval: u64, hourly: u64) -> Running {
    let mut config = server_config(label);
    config.notify.smtp_url = Some(smtp.url());
    config.notify.mail_from = Some("threadql <notify@comments.example.com>".into());
    config.notify.min_interval_secs = interval;
    config.notify.hourly_secs = hourly;
    config.notify.retry_secs = 1;
    Running::start(config).await
}

/// Runs `query` as `token`; its data.
async fn mail_call(server: &Running, token: &str, query: &str, vars: Value) -> Value {
    graphql_data(&reqwest::Client::new(), server, Some(token), query, vars).await
}

/// A discussion titled `title` with a comment by `author`; the discussion and the comment.
async fn commented(server: &Running, author: &str, title: &str) -> (String, String) {
    let create = "mutation($t: String!, $u: String!) { createDiscussion(input: {title: $t, url: $u}) { id } }";
    let vars = json!({ "t": title, "u": "https://blog.example.com/posts/tides#top" });
    let d = mail_call(server, author, create, vars).await["createDiscussion"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let c = mail_call(server, author, POST, json!({ "d": d, "t": "my comment" })).await
        ["postComment"]["slug"]
        .as_str()
        .unwrap()
        .to_owned();
    (d, c)
}

/// Replies to `parent` in `d` as `token`; the reply's slug.
async fn reply(server: &Running, token: &str, d: &str, parent: &str, text: &str) -> String {
    let vars = json!({ "d": d, "p": parent, "t": text });
    mail_call(server, token, POST, vars).await["postComment"]["slug"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The messages taken (answered 250) for `to`.
fn taken_for(smtp: &SmtpServer, to: &str) -> Vec<Mail> {
    smtp.messages()
        .into_iter()
        .filter(|m| m.status == 250 && m.to.iter().any(|t| t == to))
        .collect()
}

/// Waits until `to` has `n` messages taken; them.
async fn until_mailed(smtp: &SmtpServer, to: &str, n: usize) -> Vec<Mail> {
    let deadline = tokio::time::Instant::now() + ARRIVES;
    loop {
        let taken = taken_for(smtp, to);
        if taken.len() >= n || tokio::time::Instant::now() > deadline {
            assert_eq!(taken.len(), n, "messages to {to}: {taken:#?}");
            return taken;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn immediate_mail_is_batched_by_the_interval_and_carries_its_headers() {
    let smtp = SmtpServer::start().await;
    let server = mailing_server("mail_immediate", &smtp, 4, 3600).await;
    let ada = mail_token("ada", "ada@example.com", true);
    let eve = mail_token("eve", "eve@example.com", false);
    let bob = mail_token("bob", "bob@example.com", true);
    let set = mail_call(&server, &ada, SETTINGS, json!({ "e": "IMMEDIATE" })).await;
    assert_eq!(
        set["setNotificationSettings"],
        json!({ "email": "IMMEDIATE", "emailAddress": "ada@example.com", "emailAvailable": true })
    );
    let unverified = mail_call(&server, &eve, SETTINGS, json!({ "e": "IMMEDIATE" })).await;
    assert_eq!(
        unverified["setNotificationSettings"]["emailAddress"],
        Value::Null
    );
    let (d, c) = commented(&server, &ada, "Tides & <moons>").await;
    let (de, e) = commented(&server, &eve, "Eve's").await;
    let first = reply(&server, &bob, &d, &c, "the **first** reply").await;
    let mail = until_mailed(&smtp, "ada@example.com", 1).await.remove(0);
    assert!(
        mail.subject.as_deref().unwrap().contains("Tides & <moons>"),
        "{mail:#?}"
    );
    let html = mail.html.as_deref().unwrap();
    assert!(html.contains("<strong>first</strong>"), "{html}");
    let link = format!("https://blog.example.com/posts/tides#comment-{first}");
    assert!(html.contains(&link), "{html}");
    assert!(mail.text.as_deref().unwrap().contains("first"));
    let unsubscribe = mail.header("list-unsubscribe").unwrap();
    assert!(
        unsubscribe.contains("/notifications/unsubscribe?token="),
        "{unsubscribe}"
    );
    assert_eq!(
        mail.header("list-unsubscribe-post"),
        Some("List-Unsubscribe=One-Click")
    );
    assert!(mail
        .message_id
        .as_deref()
        .is_some_and(|id| id.contains('@')));
    assert!(mail.references.iter().any(|r| r.contains(&d)), "{mail:#?}");
    // Two more replies within the interval join one next message.
    reply(&server, &bob, &d, &c, "second").await;
    reply(&server, &bob, &d, &c, "third").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        taken_for(&smtp, "ada@example.com").len(),
        1,
        "not before the interval"
    );
    let next = until_mailed(&smtp, "ada@example.com", 2).await.remove(1);
    let text = next.text.as_deref().unwrap();
    assert!(text.contains("second") && text.contains("third"), "{text}");
    assert_ne!(next.message_id, mail.message_id);
    // An address whose token did not say it is verified is never mailed.
    reply(&server, &bob, &de, &e, "to eve").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(taken_for(&smtp, "eve@example.com").is_empty());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hourly_digest_holds_what_is_still_unread_at_the_end_of_its_period() {
    const PERIOD: u64 = 6;
    let smtp = SmtpServer::start().await;
    let server = mailing_server("mail_hourly", &smtp, 300, PERIOD).await;
    let ada = mail_token("ada", "ada@example.com", true);
    let bob = mail_token("bob", "bob@example.com", true);
    mail_call(&server, &ada, SETTINGS, json!({ "e": "HOURLY" })).await;
    let (d, c) = commented(&server, &ada, "Digest").await;
    // Start just after a period begins, so everything below falls in one period.
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let into = now.as_millis() as u64 % (PERIOD * 1000);
    tokio::time::sleep(Duration::from_millis(PERIOD * 1000 - into + 100)).await;
    reply(&server, &bob, &d, &c, "read in the app").await;
    let inbox = "{ viewer { notifications(first: 10) { nodes { id } } } }";
    let mut first_id = Value::Null;
    for _ in 0..100 {
        let nodes = mail_call(&server, &ada, inbox, json!({})).await["viewer"]["notifications"]
            ["nodes"]
            .clone();
        if let Some(id) = nodes.get(0) {
            first_id = id["id"].clone();
            break;
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    let mark = "mutation($id: ID!) { markNotificationsRead(upTo: $id) }";
    assert_eq!(
        mail_call(&server, &ada, mark, json!({ "id": first_id })).await["markNotificationsRead"],
        1
    );
    reply(&server, &bob, &d, &c, "still unread one").await;
    reply(&server, &bob, &d, &c, "still unread two").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        taken_for(&smtp, "ada@example.com").is_empty(),
        "not before the period ends"
    );
    let digest = until_mailed(&smtp, "ada@example.com", 1).await.remove(0);
    let text = digest.text.as_deref().unwrap();
    assert!(
        text.contains("still unread one") && text.contains("still unread two"),
        "{text}"
    );
    assert!(!text.contains("read in the app"), "{text}");
    // Nothing unread: no digest next period.
    mail_call(
        &server,
        &ada,
        "mutation { markNotificationsRead }",
        json!({}),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(PERIOD + 1)).await;
    assert_eq!(taken_for(&smtp, "ada@example.com").len(), 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_click_unsubscribes_by_post_only_and_refuses_forged_tokens() {
    let smtp = SmtpServer::start().await;
    let server = mailing_server("mail_unsubscribe", &smtp, 1, 3600).await;
    let (ada, bob) = (
        mail_token("ada", "ada@example.com", true),
        mail_token("bob", "bob@example.com", true),
    );
    for who in [&ada, &bob] {
        mail_call(&server, who, SETTINGS, json!({ "e": "IMMEDIATE" })).await;
    }
    let (d, c) = commented(&server, &ada, "Unsubscribe").await;
    reply(&server, &bob, &d, &c, "hello").await;
    let mail = until_mailed(&smtp, "ada@example.com", 1).await.remove(0);
    let link = mail
        .header("list-unsubscribe")
        .unwrap()
        .trim_matches(|c| c == '<' || c == '>')
        .to_owned();
    let path = &link[link.find("/notifications/").unwrap()..];
    let url = server.url(path);
    let client = reqwest::Client::new();
    let email_of = |token: String| {
        let server = &server;
        async move {
            let settings = "{ viewer { notificationSettings { email } } }";
            mail_call(server, &token, settings, json!({})).await["viewer"]["notificationSettings"]
                ["email"]
                .clone()
        }
    };
    let page = client.get(&url).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .contains("default-src 'none'"));
    let body = page.text().await.unwrap();
    assert!(body.contains("<form method=\"post\""), "{body}");
    assert_eq!(
        email_of(ada.clone()).await,
        "IMMEDIATE",
        "a GET changes nothing"
    );
    let (token_start, token) = (
        url.find("token=").unwrap() + 6,
        url.split("token=").nth(1).unwrap().to_owned(),
    );
    let mut altered = token.clone().into_bytes();
    altered[3] = if altered[3] == b'A' { b'B' } else { b'A' };
    let altered = format!(
        "{}{}",
        &url[..token_start],
        String::from_utf8(altered).unwrap()
    );
    for bad in [
        altered,
        server.url("/notifications/unsubscribe?token=YWRh.AAAA"),
        server.url("/notifications/unsubscribe"),
    ] {
        let refused = client
            .post(&bad)
            .body("List-Unsubscribe=One-Click")
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 400, "{bad}");
        assert_eq!(
            client.get(&bad).send().await.unwrap().status(),
            400,
            "{bad}"
        );
    }
    assert_eq!(email_of(ada.clone()).await, "IMMEDIATE");
    let done = client
        .post(&url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body("List-Unsubscribe=One-Click")
        .send()
        .await
        .unwrap();
    assert_eq!(done.status(), 200);
    assert_eq!(email_of(ada.clone()).await, "NEVER");
    assert_eq!(
        email_of(bob.clone()).await,
        "IMMEDIATE",
        "the link names ada only"
    );
    reply(&server, &bob, &d, &c, "after unsubscribing").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(taken_for(&smtp, "ada@example.com").len(), 1, "no more mail");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temporary_failure_is_retried_and_a_permanent_one_dropped() {
    let smtp = SmtpServer::start().await;
    let server = mailing_server("mail_failures", &smtp, 1, 3600).await;
    let (ada, bob) = (
        mail_token("ada", "ada@example.com", true),
        mail_token("bob", "bob@example.com", true),
    );
    mail_call(&server, &ada, SETTINGS, json!({ "e": "IMMEDIATE" })).await;
    let (d, c) = commented(&server, &ada, "Failures").await;
    smtp.answer_next(&[451]).await;
    reply(&server, &bob, &d, &c, "retried").await;
    let taken = until_mailed(&smtp, "ada@example.com", 1).await;
    assert!(taken[0].text.as_deref().unwrap().contains("retried"));
    let tried: Vec<u16> = smtp.messages().iter().map(|m| m.status).collect();
    assert_eq!(tried, vec![451, 250]);
    assert_eq!(
        metric(&server, "threadql_emails_total{result=\"retried\"}").await,
        1
    );
    smtp.answer_next(&[550]).await;
    reply(&server, &bob, &d, &c, "dropped").await;
    let deadline = tokio::time::Instant::now() + ARRIVES;
    while smtp.messages().len() < 3 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let tried: Vec<u16> = smtp.messages().iter().map(|m| m.status).collect();
    assert_eq!(tried, vec![451, 250, 550], "a 5xx is not tried again");
    assert_eq!(
        metric(&server, "threadql_emails_total{result=\"dropped\"}").await,
        1
    );
    // The person is not stuck: the next notification is mailed.
    reply(&server, &bob, &d, &c, "after the drop").await;
    let taken = until_mailed(&smtp, "ada@example.com", 2).await;
    assert!(taken[1].text.as_deref().unwrap().contains("after the drop"));
    assert_eq!(
        metric(&server, "threadql_emails_total{result=\"sent\"}").await,
        2
    );
    server.shutdown().await;
}
