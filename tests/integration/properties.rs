//! Property tests of the input path, through the real schema and the real database: arbitrary
//! comment texts; arbitrary ids, slugs, cursors and paging numbers; arbitrary JSON as variables.
//! Whatever comes in, the answer is data or errors that each carry a code, never a panic.
//!
//! Each property runs 64 cases by default; `PROPTEST_CASES` changes that. A longer run:
//!
//! ```sh
//! PROPTEST_CASES=5000 ./scripts/test.sh properties
//! ```
//!
//! A failure prints the smallest input found that still fails; `PROPTEST_RNG_SEED=<n>` repeats
//! a run's choices.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use proptest::prelude::*;
use proptest::test_runner::{contextualize_config, Config as ProptestConfig, TestRunner};
use serde_json::{json, Value};
use threadql::domain::{text, Layout};
use tokio::runtime::Runtime;

use crate::support::TestApp;

const LAYOUTS: [Layout; 3] = [Layout::PerComment, Layout::Embedded, Layout::Bucketed];

/// 64 cases unless `PROPTEST_CASES` says otherwise; failures are not written to files.
fn runner() -> TestRunner {
    TestRunner::new(contextualize_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::with_cases(64)
    }))
}

fn runtime() -> Runtime {
    Runtime::new().expect("tokio runtime")
}

/// Drops what holds database clients inside the runtime and lets their background tasks end, so
/// shutting the runtime down does not cut them off halfway.
fn finish<T>(rt: Runtime, owned: T) {
    rt.block_on(async move {
        drop(owned);
        tokio::time::sleep(Duration::from_millis(200)).await;
    });
    rt.shutdown_timeout(Duration::from_secs(5));
}

/// The codes of a response's errors (`None` without errors); every error must have one.
fn codes(response: &Value) -> Result<Option<Vec<String>>, TestCaseError> {
    let Some(errors) = response.get("errors").and_then(Value::as_array) else {
        return Ok(None);
    };
    if errors.is_empty() {
        return Ok(None);
    }
    let mut codes = Vec::new();
    for error in errors {
        match error["extensions"]["code"].as_str() {
            Some(code) if !code.is_empty() => codes.push(code.to_owned()),
            _ => {
                return Err(TestCaseError::fail(format!(
                    "an error without a code: {error}"
                )))
            }
        }
    }
    Ok(Some(codes))
}

/// How often each outcome was seen, printed at the end of a property (`--nocapture`).
#[derive(Default)]
struct Tally(RefCell<BTreeMap<String, u64>>);

impl Tally {
    fn add(&self, outcome: &str) {
        *self.0.borrow_mut().entry(outcome.to_owned()).or_default() += 1;
    }

    /// The outcome of a response: `data`, or its error codes.
    fn response(&self, codes: Option<&[String]>) {
        self.add(&codes.map_or("data".to_owned(), |c| c.join("+")));
    }

    fn get(&self, outcome: &str) -> u64 {
        self.0.borrow().get(outcome).copied().unwrap_or(0)
    }

    fn show(&self, property: &str) {
        println!("{property}: {:?}", self.0.borrow());
    }
}

// ----- texts -----

/// What a posted text must read back as, by the documented rules: CRLF becomes LF, trailing
/// white space is dropped and open bidirectional controls are closed; blank text (white space
/// and invisible characters only), text over `max` characters and control characters other than
/// newline and tab are refused (`None`).
fn stored_text(raw: &str, max: usize) -> Option<String> {
    let normalized = raw.replace("\r\n", "\n");
    let text = normalized.trim_end();
    // Blank: nothing but white space and characters that show nothing by themselves (the
    // domain's table of them is checked by its own unit tests).
    let refused = text.chars().all(text::is_invisible)
        || text.chars().count() > max
        || text
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t');
    (!refused).then(|| {
        // Bidirectional controls the text leaves open are closed at its end.
        let mut stored = text.to_owned();
        text::close_bidi(&mut stored);
        stored
    })
}

/// Pieces that sit on the edges of the text rules.
const TRICKY: &[&str] = &[
    "a",
    "Z",
    " ",
    "\t",
    "\n",
    "\r",
    "\r\n",
    "\n\r",
    "\u{0}",
    "\u{7}",
    "\u{1b}[0m",
    "\u{7f}",
    "\u{85}",
    "\u{a0}",
    "\u{2028}",
    "\u{2029}",
    "\u{3000}",
    "\u{200b}",
    "\u{200d}",
    "\u{200e}",
    "\u{202e}",
    "\u{feff}",
    "\u{fffd}",
    "\u{e000}",
    "\u{fdd0}",
    "\u{10ffff}",
    "e\u{301}",
    "😀",
    "👩🏽‍💻",
    "𝄞",
    "ß",
    "İ",
    "<script>",
    "$ne",
    ".*",
    "\\",
    "\"",
    "'",
    "{}",
    "%00",
];

fn text_strategy(max: usize) -> impl Strategy<Value = String> {
    prop_oneof![
        4 => any::<String>(),
        3 => "(\\PC|[ \t\r\n]){0,60}",
        4 => prop::collection::vec(prop::sample::select(TRICKY), 0..24).prop_map(|v| v.concat()),
        1 => (max - 2..=max + 2, prop::sample::select(&["x", "é", "😀"][..]), 0..4usize)
            .prop_map(|(n, c, trailing)| c.repeat(n) + &" ".repeat(trailing)),
    ]
}

const POST: &str = "mutation($d: ID!, $t: String!) { postComment(input: {discussionId: $d, text: $t}) { slug text } }";
const READ_BACK: &str =
    "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { text } }";
const COUNT: &str = "query($d: ID!) { discussion(id: $d) { commentCount } }";

async fn comment_count(app: &TestApp, discussion: &str) -> u64 {
    app.ok(COUNT, json!({ "d": discussion })).await["discussion"]["commentCount"]
        .as_u64()
        .expect("commentCount")
}

#[test]
fn any_text_is_stored_as_documented_or_refused_as_bad_input() {
    let rt = runtime();
    let apps: Vec<(TestApp, String, Cell<u64>)> = rt.block_on(async {
        let mut apps = Vec::new();
        for layout in LAYOUTS {
            let app = TestApp::new("prop_text", layout).await;
            let d = app.discussion("texts").await;
            apps.push((app, d, Cell::new(0)));
        }
        apps
    });
    let max = apps[0].0.settings.max_text_chars;
    let strategy = (0..apps.len(), text_strategy(max));
    let tally = Tally::default();
    let result = runner().run(&strategy, |(which, raw)| {
        let (app, d, posted) = &apps[which];
        rt.block_on(async {
            let before = comment_count(app, d).await;
            let response = app.exec(POST, json!({ "d": d, "t": raw })).await;
            let after = comment_count(app, d).await;
            let codes = codes(&response)?;
            tally.response(codes.as_deref());
            match (codes, stored_text(&raw, max)) {
                (None, Some(want)) => {
                    posted.set(posted.get() + 1);
                    prop_assert_eq!(
                        response["data"]["postComment"]["text"].as_str(),
                        Some(want.as_str())
                    );
                    let slug = response["data"]["postComment"]["slug"]
                        .as_str()
                        .unwrap_or_default();
                    let read = app.exec(READ_BACK, json!({ "d": d, "s": slug })).await;
                    prop_assert_eq!(
                        read["data"]["comment"]["text"].as_str(),
                        Some(want.as_str()),
                        "read back: {}",
                        read
                    );
                    prop_assert_eq!(after, before + 1, "commentCount after a post");
                }
                (Some(codes), None) => {
                    prop_assert_eq!(codes, vec!["BAD_USER_INPUT".to_owned()]);
                    prop_assert_eq!(after, before, "commentCount after a refused post");
                }
                (None, None) => {
                    return Err(TestCaseError::fail(format!(
                        "accepted a text the rules refuse: {response}"
                    )))
                }
                (Some(_), Some(want)) => {
                    return Err(TestCaseError::fail(format!(
                        "refused a text the rules accept (as {want:?}): {response}"
                    )))
                }
            }
            Ok(())
        })
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
    rt.block_on(async {
        for (app, d, posted) in &apps {
            assert_eq!(
                comment_count(app, d).await,
                posted.get(),
                "commentCount counts exactly the accepted posts ({:?})",
                app.settings.layout
            );
        }
    });
    tally.show("texts");
    assert!(
        tally.get("data") > 0 && tally.get("BAD_USER_INPUT") > 0,
        "the generated texts should be both accepted and refused"
    );
    finish(rt, apps);
}

// ----- ids, slugs, cursors and paging -----

/// A discussion with a small thread, and every cursor its lists give out.
struct Seeded {
    app: TestApp,
    d: String,
    slugs: Vec<String>,
    cursors: Vec<String>,
}

async fn seed_lookups(layout: Layout) -> Seeded {
    let app = TestApp::new("prop_lookup", layout).await;
    let d = app.discussion("lookups").await;
    let a = app.post(&d, None, "a").await;
    let ab = app.post(&d, Some(&a), "ab").await;
    let abc = app.post(&d, Some(&ab), "abc").await;
    let b = app.post(&d, None, "b").await;
    let ac = app.post(&d, Some(&a), "ac").await;
    let mut cursors = Vec::new();
    for order in ["CHRONOLOGICAL", "THREADED"] {
        let data = app
            .ok(
                "query($d: ID!, $o: CommentOrder!) { discussion(id: $d) { comments(order: $o) { edges { cursor } } } }",
                json!({ "d": d, "o": order }),
            )
            .await;
        for edge in data["discussion"]["comments"]["edges"]
            .as_array()
            .expect("edges")
        {
            cursors.push(edge["cursor"].as_str().expect("cursor").to_owned());
        }
    }
    let data = app
        .ok("{ discussions { edges { cursor } } }", json!({}))
        .await;
    for edge in data["discussions"]["edges"].as_array().expect("edges") {
        cursors.push(edge["cursor"].as_str().expect("cursor").to_owned());
    }
    Seeded {
        app,
        d,
        slugs: vec![a, ab, abc, b, ac],
        cursors,
    }
}

/// A string argument: one of the seeded values (by index), or anything.
#[derive(Debug, Clone)]
enum Arg {
    Known(usize),
    Text(String),
}

impl Arg {
    fn resolve(&self, known: &[String]) -> String {
        match self {
            Arg::Known(i) => known[i % known.len()].clone(),
            Arg::Text(text) => text.clone(),
        }
    }
}

fn id_strategy() -> impl Strategy<Value = Arg> {
    prop_oneof![
        8 => Just(Arg::Known(0)),
        2 => "[0-9a-f]{24}".prop_map(Arg::Text),
        2 => "[0-9a-fA-F]{0,30}".prop_map(Arg::Text),
        3 => any::<String>().prop_map(Arg::Text),
        1 => prop::sample::select(&[".*", "{\"$ne\": 1}", "../../etc", "", " ", "null"][..])
            .prop_map(|s| Arg::Text(s.to_owned())),
    ]
}

fn slug_strategy() -> impl Strategy<Value = Arg> {
    prop_oneof![
        8 => (0..8usize).prop_map(Arg::Known),
        2 => "[0-9a-z]{8}(/[0-9a-z]{8}){0,3}".prop_map(Arg::Text),
        2 => "[0-9a-z/.*]{0,20}".prop_map(Arg::Text),
        3 => any::<String>().prop_map(Arg::Text),
    ]
}

fn cursor_strategy() -> impl Strategy<Value = Option<Arg>> {
    prop_oneof![
        5 => Just(None),
        4 => (0..32usize).prop_map(|i| Some(Arg::Known(i))),
        2 => any::<String>().prop_map(|s| Some(Arg::Text(s))),
        2 => "[cdt]\\|[0-9a-z|:/.*-]{0,40}"
            .prop_map(|raw| Some(Arg::Text(URL_SAFE_NO_PAD.encode(raw)))),
        1 => any::<Vec<u8>>().prop_map(|raw| Some(Arg::Text(URL_SAFE_NO_PAD.encode(raw)))),
    ]
}

fn number_strategy() -> impl Strategy<Value = Option<i32>> {
    prop_oneof![
        5 => Just(None),
        4 => (-3..110i32).prop_map(Some),
        1 => any::<i32>().prop_map(Some),
    ]
}

const LOOKUPS: [&str; 7] = [
    "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { slug depth text parent { slug } } }",
    "query($d: ID!, $o: CommentOrder!, $f: Int, $a: String, $x: Int) { discussion(id: $d) { comments(order: $o, first: $f, after: $a, offset: $x) { totalCount nodes { slug } pageInfo { hasNextPage endCursor } } } }",
    "query($d: ID!, $s: String!, $f: Int, $a: String) { comment(discussionId: $d, slug: $s) { replies(first: $f, after: $a) { totalCount nodes { slug } pageInfo { endCursor } } } }",
    "query($d: ID!, $f: Int, $a: String, $x: Int) { discussion(id: $d) { threads(first: $f, after: $a, offset: $x) { totalCount nodes { slug } } } }",
    "query($d: ID!, $s: String!, $f: Int, $a: String) { comment(discussionId: $d, slug: $s) { subDiscussion(first: $f, after: $a) { totalCount nodes { slug } } } }",
    "query($d: ID!, $s: String!) { discussion(id: $d) { comment(slug: $s) { slug } } }",
    "query($f: Int, $a: String) { discussions(first: $f, after: $a) { totalCount nodes { id } } }",
];

/// What a lookup may fail with. `GRAPHQL_VALIDATION_FAILED` is the engine's code for a query
/// over the cost limit (a huge `first`) once it has its own code; today that is `BAD_USER_INPUT`.
const LOOKUP_CODES: [&str; 3] = ["BAD_USER_INPUT", "NOT_FOUND", "GRAPHQL_VALIDATION_FAILED"];

#[test]
fn any_id_slug_cursor_or_page_gets_data_or_bad_input_or_not_found() {
    let rt = runtime();
    let seeded: Vec<Seeded> = rt.block_on(async {
        let mut seeded = Vec::new();
        for layout in LAYOUTS {
            seeded.push(seed_lookups(layout).await);
        }
        seeded
    });
    let strategy = (
        0..seeded.len(),
        0..LOOKUPS.len(),
        id_strategy(),
        slug_strategy(),
        cursor_strategy(),
        number_strategy(),
        number_strategy(),
        any::<bool>(),
    );
    let tally = Tally::default();
    let result = runner().run(
        &strategy,
        |(which, query, id, slug, after, first, offset, threaded)| {
            let s = &seeded[which];
            let d = id.resolve(std::slice::from_ref(&s.d));
            let slug = slug.resolve(&s.slugs);
            let after = after.map(|a| a.resolve(&s.cursors));
            let variables = json!({
                "d": d,
                "s": slug,
                "a": after,
                "f": first,
                "x": offset,
                "o": if threaded { "THREADED" } else { "CHRONOLOGICAL" },
            });
            let response = rt.block_on(s.app.exec_as(None, LOOKUPS[query], variables.clone()));
            let codes = codes(&response)?;
            tally.response(codes.as_deref());
            match codes {
                None => {
                    prop_assert!(
                        response["data"].is_object(),
                        "no errors and no data for {}: {}",
                        variables,
                        response
                    );
                    if let Some(nodes) = response
                        .pointer("/data/discussion/comments/nodes")
                        .and_then(Value::as_array)
                    {
                        let limit = first.map_or(20, |n| usize::try_from(n).unwrap_or(0));
                        prop_assert!(
                            nodes.len() <= limit,
                            "{} nodes for first {:?}",
                            nodes.len(),
                            first
                        );
                    }
                }
                Some(codes) => {
                    for code in &codes {
                        prop_assert!(
                            LOOKUP_CODES.contains(&code.as_str()),
                            "code {} for {}: {}",
                            code,
                            variables,
                            response
                        );
                    }
                }
            }
            Ok(())
        },
    );
    if let Err(failure) = result {
        panic!("{failure}");
    }
    tally.show("lookups");
    finish(rt, seeded);
}

// ----- arbitrary JSON as variables -----

/// Strings that mean something to the schema, so arbitrary variables sometimes hit real things.
fn meaningful_strings(d: &str, slug: &str) -> Vec<String> {
    [
        d,
        slug,
        "CHRONOLOGICAL",
        "THREADED",
        "PER_COMMENT",
        "EMBEDDED",
        "BUCKETED",
        "moderator",
        "",
        " ",
        ".*",
        "$ne",
        "😀",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

const KEYS: &[&str] = &[
    "d",
    "s",
    "t",
    "f",
    "a",
    "x",
    "o",
    "b",
    "id",
    "input",
    "discussionId",
    "parentSlug",
    "slug",
    "text",
    "title",
    "layout",
    "$ne",
    "__proto__",
];

fn json_strategy(strings: Vec<String>) -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-200..200i64).prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        any::<String>().prop_map(Value::String),
        prop::sample::select(strings).prop_map(Value::String),
    ];
    let key = prop_oneof![
        3 => prop::sample::select(KEYS).prop_map(str::to_owned),
        1 => any::<String>(),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
    .boxed()
}

/// Variables that mostly have the names and types the documents declare (so requests get past
/// validation and into the resolvers), each sometimes replaced by an arbitrary JSON value.
fn typed_variables(d: &str, slug: &str, any_json: &BoxedStrategy<Value>) -> BoxedStrategy<Value> {
    let or_any = |typed: BoxedStrategy<Value>| {
        let any_json = any_json.clone();
        prop::option::weighted(0.9, prop_oneof![9 => typed, 1 => any_json]).boxed()
    };
    let id = prop_oneof![
        3 => Just(json!(d)),
        1 => "[0-9a-f]{24}".prop_map(Value::from),
        1 => any::<String>().prop_map(Value::from),
    ]
    .boxed();
    let slug = prop_oneof![
        3 => Just(json!(slug)),
        1 => "[0-9a-z]{8}(/[0-9a-z]{8})?".prop_map(Value::from),
        1 => any::<String>().prop_map(Value::from),
    ]
    .boxed();
    let text = any::<String>().prop_map(Value::from).boxed();
    let int = prop_oneof![
        (-2..120i32).prop_map(Value::from),
        any::<i32>().prop_map(Value::from)
    ]
    .boxed();
    let order = prop::sample::select(&["CHRONOLOGICAL", "THREADED", "chronological", "RANDOM"][..])
        .prop_map(Value::from)
        .boxed();
    let layout = prop::sample::select(&["PER_COMMENT", "EMBEDDED", "BUCKETED", "OTHER"][..])
        .prop_map(Value::from)
        .boxed();
    let flag = any::<bool>().prop_map(Value::from).boxed();
    // The fields of one of the three input types (which one is chosen at random), each present
    // or not; `post` fields alone fit PostCommentInput, and so on.
    let post = (
        or_any(id.clone()),
        or_any(slug.clone()),
        or_any(text.clone()),
    )
        .prop_map(|(d, p, t)| object([("discussionId", d), ("parentSlug", p), ("text", t)]));
    let create = (or_any(text.clone()), or_any(layout))
        .prop_map(|(t, l)| object([("title", t), ("layout", l)]));
    let edit = (
        or_any(id.clone()),
        or_any(slug.clone()),
        or_any(text.clone()),
    )
        .prop_map(|(d, s, t)| object([("discussionId", d), ("slug", s), ("text", t)]));
    let input = prop_oneof![post, create, edit].boxed();
    (
        (
            or_any(id.clone()),
            or_any(slug.clone()),
            or_any(text),
            or_any(int.clone()),
            or_any(int),
        ),
        (
            or_any(any::<String>().prop_map(Value::from).boxed()),
            or_any(order),
            or_any(flag),
            or_any(id),
            or_any(input),
            or_any(slug),
        ),
    )
        .prop_map(|((d, s, t, f, x), (a, o, b, id, input, p))| {
            object([
                ("d", d),
                ("s", s),
                ("t", t),
                ("f", f),
                ("x", x),
                ("a", a),
                ("o", o),
                ("b", b),
                ("id", id),
                ("input", input),
                ("p", p),
            ])
        })
        .boxed()
}

/// A JSON object of the fields that are present.
fn object<const N: usize>(fields: [(&str, Option<Value>); N]) -> Value {
    Value::Object(
        fields
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v)))
            .collect(),
    )
}

const DOCUMENTS: [&str; 10] = [
    "query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { text } }",
    "query($d: ID!, $o: CommentOrder!, $f: Int, $a: String, $x: Int) { discussion(id: $d) { comments(order: $o, first: $f, after: $a, offset: $x) { totalCount } } }",
    "query($f: Int, $a: String) { discussions(first: $f, after: $a) { totalCount } }",
    "query($d: ID!, $s: String!, $f: Int, $a: String, $b: Boolean!) { comment(discussionId: $d, slug: $s) { replies(first: $f, after: $a) @include(if: $b) { totalCount } subDiscussion(first: $f) @skip(if: $b) { totalCount } } }",
    "mutation($input: PostCommentInput!) { postComment(input: $input) { slug text } }",
    "mutation($input: CreateDiscussionInput!) { createDiscussion(input: $input) { id title layout } }",
    "mutation($input: EditCommentInput!) { editComment(input: $input) { text } }",
    "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { deleted } }",
    "mutation($id: ID!, $b: Boolean!) { lockDiscussion(id: $id, locked: $b) { locked } }",
    "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug } }",
];

#[test]
fn any_json_as_variables_gets_coded_errors() {
    let rt = runtime();
    let (app, d, slug) = rt.block_on(async {
        let app = TestApp::new("prop_variables", Layout::PerComment).await;
        let d = app.discussion("variables").await;
        let slug = app.post(&d, None, "target").await;
        (app, d, slug)
    });
    let value = json_strategy(meaningful_strings(&d, &slug));
    let variables = prop_oneof![
        1 => value.clone(),
        2 => prop::collection::btree_map(prop::sample::select(KEYS).prop_map(str::to_owned), value.clone(), 0..8)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        5 => typed_variables(&d, &slug, &value),
    ];
    let strategy = (0..DOCUMENTS.len(), variables, any::<bool>());
    let token = app.token("u1", "Ada");
    let tally = Tally::default();
    let result = runner().run(&strategy, |(document, variables, signed_in)| {
        let token = signed_in.then_some(token.as_str());
        let response = rt.block_on(app.exec_as(token, DOCUMENTS[document], variables.clone()));
        let codes = codes(&response)?;
        tally.response(codes.as_deref());
        if let Some(codes) = codes {
            prop_assert!(
                !codes.iter().any(|c| c == "INTERNAL"),
                "an internal error for {}: {}",
                variables,
                response
            );
        } else {
            prop_assert!(
                response["data"].is_object(),
                "neither data nor errors: {}",
                response
            );
        }
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
    tally.show("variables");
    finish(rt, app);
}
