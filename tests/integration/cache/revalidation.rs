//! The response cache and HTTP revalidation at the HTTP level: what an anonymous answer carries,
//! what a `304` and a kept answer cost, and who never gets either.

use super::*;

/// The first page, as the embed reads it.
const FIRST_PAGE: &str =
    "query($d: ID!) { discussion(id: $d) { commentCount comments(first: 10) { nodes { slug text } } } }";
/// A read no generation tracks: the listing of discussions.
const LISTING: &str = "{ discussions(first: 5) { totalCount } }";

/// A GET of `query` with `vars`, as `token`, naming `tag` in `If-None-Match`: the status, the
/// `ETag`, `Cache-Control` and `Vary` headers, and the body.
async fn get_tagged(
    client: &reqwest::Client,
    server: &Running,
    (query, vars): (&str, &Value),
    token: Option<&str>,
    tag: Option<&str>,
) -> (u16, [Option<String>; 3], String) {
    let mut request = client
        .get(server.url("/graphql"))
        .query(&[("query", query), ("variables", &vars.to_string())]);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(tag) = tag {
        request = request.header("if-none-match", tag);
    }
    let response = request.send().await.expect("send");
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let headers = [header("etag"), header("cache-control"), header("vary")];
    let status = response.status().as_u16();
    (status, headers, response.text().await.expect("a body"))
}

/// An anonymous GET answer carries an `ETag` and `Cache-Control: public, max-age=0,
/// must-revalidate`; naming it gets `304` with no body without running the query, and the
/// answer kept for POST is sent without running it either. A signed-in request naming the same tag gets the whole answer, untagged.
/// A post makes the tag stale; answers that read untracked data or have errors carry no tag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_answers_are_tagged_kept_and_revalidated_without_a_read() {
    for layout in Layout::ALL {
        let database = unique_db("cache_revalidation");
        let server = Running::start(cache_config(&database, layout, true)).await;
        until("the cached server opens its change feed", || async {
            metric(&server, STREAMS).await >= 1
        })
        .await;
        let client = reqwest::Client::new();
        let d = server.discussion(&user("u1"), layout).await;
        server.post(&user("u1"), &d, None, "first").await;
        let vars = json!({ "d": d });
        let read = (FIRST_PAGE, &vars);

        // Tagged once the cache serves (its feed open), then asked until the answer is kept.
        until("an anonymous GET answer carries an ETag", || async {
            let (_, [tag, ..], _) = get_tagged(&client, &server, read, None, None).await;
            tag.is_some()
        })
        .await;
        let mut tagged = None;
        for _ in 0..ADMIT_READS {
            tagged = Some(get_tagged(&client, &server, read, None, None).await);
        }
        let (status, [tag, control, vary], body) = tagged.expect("read");
        assert_eq!(status, 200, "{layout:?}: {body}");
        let tag = tag.unwrap_or_else(|| panic!("{layout:?}: an ETag: {body}"));
        assert_eq!(
            control.as_deref(),
            Some("public, max-age=0, must-revalidate")
        );
        assert!(
            vary.is_some_and(|v| v.contains("Authorization")),
            "{layout:?}"
        );

        // Neither runs the query: the read cache is not even asked (a run of this admitted
        // discussion would count a hit or a miss there). Database commands are not counted:
        // background workers send theirs when they will.
        let looked = || async { metric(&server, HITS).await + metric(&server, MISSES).await };
        let (before, hits) = (looked().await, metric(&server, RESPONSE_HITS).await);
        let (status, [again, ..], empty) =
            get_tagged(&client, &server, read, None, Some(&tag)).await;
        assert_eq!(
            (status, again.as_deref(), empty.as_str()),
            (304, Some(tag.as_str()), "")
        );
        let posted = ask(&client, &server, None, FIRST_PAGE, vars.clone()).await;
        assert_eq!(posted, serde_json::from_str::<Value>(&body).expect("json"));
        assert_eq!(looked().await, before, "{layout:?}: neither ran");
        assert_eq!(metric(&server, RESPONSE_HITS).await, hits + 1, "{layout:?}");

        let u1 = user("u1");
        let (status, [none, ..], signed) =
            get_tagged(&client, &server, read, Some(&u1), Some(&tag)).await;
        assert_eq!(
            (status, none),
            (200, None),
            "{layout:?}: signed in: {signed}"
        );
        assert_eq!(
            signed, body,
            "{layout:?}: the same page, read for the signed-in user"
        );

        server.post(&user("u2"), &d, None, "second").await;
        let (status, [fresh, ..], body) =
            get_tagged(&client, &server, read, None, Some(&tag)).await;
        assert_eq!(status, 200, "{layout:?}: the post made the tag stale");
        assert!(
            fresh.is_some_and(|f| f != tag) && body.contains("second"),
            "{body}"
        );

        let unknown = json!({ "d": "0123456789abcdef01234567" });
        for (what, query, vars) in [
            ("the listing", LISTING, json!({})),
            ("an unknown discussion", FIRST_PAGE, unknown),
        ] {
            for _ in 0..ADMIT_READS {
                let (status, [tag, ..], body) =
                    get_tagged(&client, &server, (query, &vars), None, None).await;
                assert_eq!((status, tag), (200, None), "{layout:?}: {what}: {body}");
            }
        }
        assert!(metric(&server, "threadql_response_cache_untracked_total").await > 0);
        server.shutdown().await;
    }
}

/// Requests of one answer before the response cache keeps it.
const ADMIT_READS: usize = 3;
