//! The reference embed: `/embed/threadql.js`, an ES module any page can import to show the
//! comments of its discussion (by the page's key), `/embed/count.js`, which fills an index
//! page's elements with their discussions' comment counts, `/embed/demo?key=…`, a plain page
//! that mounts the embed, and the guests' proof of work: `/embed/proof-worker.js`, the worker that finds it,
//! and `/embed/proof`, the frame that runs that worker for pages of another origin. The files
//! are served from the binary (assets/embed).

use std::sync::LazyLock;

use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, IF_NONE_MATCH, REFERRER_POLICY,
    X_CONTENT_TYPE_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use sha2::{Digest, Sha256};

/// The embed module.
const SCRIPT: &str = include_str!("../assets/embed/threadql.js");
/// The count widget: each discussion's comment count, on the elements that name its key.
const COUNT_SCRIPT: &str = include_str!("../assets/embed/count.js");
/// The demo page's module, which mounts the embed.
const DEMO_SCRIPT: &str = include_str!("../assets/embed/demo.js");
/// The demo page, with `{{key}}` and `{{comments}}` to fill.
const DEMO_PAGE: &str = include_str!("../assets/embed/demo.html");
/// The worker that finds a guest's proof of work.
const PROOF_WORKER: &str = include_str!("../assets/embed/proof-worker.js");
/// The proof frame's script, which runs the worker for a page of another origin.
const PROOF_FRAME_SCRIPT: &str = include_str!("../assets/embed/proof-frame.js");
/// The proof frame: an empty page that runs its script.
const PROOF_FRAME: &str = include_str!("../assets/embed/proof.html");

/// What the demo page may load and run: its own files and connections to its own server,
/// nothing inline, nothing from elsewhere.
const DEMO_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self' data:; form-action 'self'; base-uri 'none'; \
     frame-ancestors 'none'";

/// What the proof frame may do: run its own script and worker, and nothing else. Any page may
/// frame it (the embed's host pages are anyone's): it shows nothing and keeps nothing, and the
/// work it does is its framer's visitor's.
const PROOF_POLICY: &str = "default-src 'none'; script-src 'self'; worker-src 'self'; \
     base-uri 'none'; form-action 'none'";

/// One module served at `/embed/<name>`, with the entity tag of its bytes.
struct Module {
    body: &'static str,
    etag: HeaderValue,
}

impl Module {
    fn new(body: &'static str) -> Self {
        let sum: String = Sha256::digest(body.as_bytes())[..12]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let etag = HeaderValue::from_str(&format!("\"{sum}\""))
            .unwrap_or_else(|_| HeaderValue::from_static("\"threadql\""));
        Self { body, etag }
    }
}

static EMBED: LazyLock<Module> = LazyLock::new(|| Module::new(SCRIPT));
static COUNT: LazyLock<Module> = LazyLock::new(|| Module::new(COUNT_SCRIPT));
static DEMO: LazyLock<Module> = LazyLock::new(|| Module::new(DEMO_SCRIPT));
static WORKER: LazyLock<Module> = LazyLock::new(|| Module::new(PROOF_WORKER));
static FRAME: LazyLock<Module> = LazyLock::new(|| Module::new(PROOF_FRAME_SCRIPT));

/// The routes of the embed: the module, the count widget, the demo page and the demo's module, the proof worker,
/// and the proof frame with its script. The HTTP layer gives them the CORS headers of the
/// allowed origins, so their pages can import the module.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/embed/threadql.js", get(|h: HeaderMap| module(&EMBED, h)))
        .route("/embed/count.js", get(|h: HeaderMap| module(&COUNT, h)))
        .route("/embed/demo.js", get(|h: HeaderMap| module(&DEMO, h)))
        .route("/embed/demo", get(demo))
        .route(
            "/embed/proof-worker.js",
            get(|h: HeaderMap| module(&WORKER, h)),
        )
        .route(
            "/embed/proof-frame.js",
            get(|h: HeaderMap| module(&FRAME, h)),
        )
        .route("/embed/proof", get(proof_frame))
}

/// The proof frame, under its policy (see [`PROOF_POLICY`]).
async fn proof_frame() -> Response {
    (
        [
            (CONTENT_TYPE, "text/html; charset=utf-8"),
            (CACHE_CONTROL, "no-cache"),
            (CONTENT_SECURITY_POLICY, PROOF_POLICY),
            (X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (REFERRER_POLICY, "no-referrer"),
        ],
        PROOF_FRAME,
    )
        .into_response()
}

/// A module: checked again on every use (`no-cache`), which costs a `304` while it is
/// unchanged, so a page never runs an embed older than its server.
async fn module(module: &'static Module, headers: HeaderMap) -> Response {
    let common = [
        (CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (ETAG, module.etag.clone()),
        (X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
    ];
    let unchanged = headers
        .get_all(IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|tag| {
            let tag = tag.trim();
            tag == "*" || tag.trim_start_matches("W/") == module.etag
        });
    if unchanged {
        return (StatusCode::NOT_MODIFIED, common).into_response();
    }
    (
        common,
        [(
            CONTENT_TYPE,
            HeaderValue::from_static("text/javascript; charset=utf-8"),
        )],
        module.body,
    )
        .into_response()
}

/// The demo page for the `key` of the query string (its first `key`; a form asks for one when
/// there is none). The key is put in the page as escaped text and read by the demo's module.
async fn demo(uri: Uri) -> Response {
    let key = uri.query().and_then(|query| {
        url::form_urlencoded::parse(query.as_bytes())
            .find(|(name, _)| name == "key")
            .map(|(_, value)| value.into_owned())
    });
    let comments = match key.as_deref() {
        Some(key) if !key.is_empty() => format!(
            "<div id=\"comments\" data-key=\"{}\"></div>",
            escape_html(key)
        ),
        _ => String::new(),
    };
    let escaped_key = escape_html(key.as_deref().unwrap_or_default());
    let page = fill(DEMO_PAGE, &[("key", &escaped_key), ("comments", &comments)]);
    (
        [
            (CONTENT_TYPE, "text/html; charset=utf-8"),
            (CACHE_CONTROL, "no-cache"),
            (CONTENT_SECURITY_POLICY, DEMO_POLICY),
            (X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        page,
    )
        .into_response()
}

/// `template` with each `{{name}}` of `values` replaced by its value, in one pass over the
/// template: what a value holds is never read as a placeholder (a key of `{{comments}}` stays
/// text). A placeholder not in `values` is left as it is.
fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut filled = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        filled.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let value = after.find("}}").and_then(|end| {
            let name = &after[..end];
            values
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, value)| (*value, end))
        });
        match value {
            Some((value, end)) => {
                filled.push_str(value);
                rest = &after[end + 2..];
            }
            None => {
                filled.push_str("{{");
                rest = after;
            }
        }
    }
    filled.push_str(rest);
    filled
}

/// `text` safe inside an element or a quoted attribute.
fn escape_html(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    async fn get_with(path: &str, headers: &[(&str, &str)]) -> (StatusCode, HeaderMap, String) {
        let mut request = Request::get(path);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = routes::<()>()
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap();
        let (parts, body) = response.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes().to_vec();
        (
            parts.status,
            parts.headers,
            String::from_utf8(bytes).unwrap(),
        )
    }

    async fn get(path: &str) -> (StatusCode, HeaderMap, String) {
        get_with(path, &[]).await
    }

    #[tokio::test]
    async fn the_modules_are_javascript_revalidated_by_their_tag() {
        for (path, body) in [
            ("/embed/threadql.js", SCRIPT),
            ("/embed/count.js", COUNT_SCRIPT),
            ("/embed/demo.js", DEMO_SCRIPT),
            ("/embed/proof-worker.js", PROOF_WORKER),
            ("/embed/proof-frame.js", PROOF_FRAME_SCRIPT),
        ] {
            let (status, headers, text) = get(path).await;
            assert_eq!(status, StatusCode::OK, "{path}");
            assert_eq!(headers[CONTENT_TYPE], "text/javascript; charset=utf-8");
            assert_eq!(headers[CACHE_CONTROL], "no-cache");
            assert_eq!(headers[X_CONTENT_TYPE_OPTIONS], "nosniff");
            assert_eq!(text, body);
            let etag = headers[ETAG].to_str().unwrap().to_owned();
            assert!(etag.starts_with('"') && etag.len() == 26, "{etag}");

            let (status, headers, text) = get_with(path, &[("if-none-match", &etag)]).await;
            assert_eq!(status, StatusCode::NOT_MODIFIED, "{path}");
            assert_eq!(headers[ETAG], etag.as_str());
            assert!(text.is_empty());
            let weak = format!("\"other\", W/{etag}");
            let (status, _, _) = get_with(path, &[("if-none-match", &weak)]).await;
            assert_eq!(status, StatusCode::NOT_MODIFIED, "{path} {weak}");
            let (status, _, text) = get_with(path, &[("if-none-match", "\"other\"")]).await;
            assert_eq!(status, StatusCode::OK, "{path}");
            assert_eq!(text, body);
        }
        assert_ne!(EMBED.etag, DEMO.etag);
        assert_ne!(EMBED.etag, COUNT.etag);
        assert_ne!(WORKER.etag, FRAME.etag);
    }

    #[test]
    fn the_embed_talks_to_its_own_server_only() {
        for (name, text) in [
            ("threadql.js", SCRIPT),
            ("count.js", COUNT_SCRIPT),
            ("demo.js", DEMO_SCRIPT),
            ("proof-worker.js", PROOF_WORKER),
            ("proof-frame.js", PROOF_FRAME_SCRIPT),
        ] {
            for line in text.lines() {
                let code = line.trim_start();
                if code.starts_with("//") || code.starts_with('*') {
                    continue;
                }
                assert!(
                    !code.contains("http://") && !code.contains("https://"),
                    "{name} names another origin: {line}"
                );
                assert!(
                    !code.contains("eval(") && !code.contains("new Function"),
                    "{name} evaluates code: {line}"
                );
            }
        }
        // The one place HTML is parsed is the template the allow-list cleans.
        assert_eq!(SCRIPT.matches(".innerHTML").count(), 1);
        assert!(SCRIPT.contains("template.innerHTML = html;"));
        assert!(!SCRIPT.contains("insertAdjacentHTML") && !SCRIPT.contains("outerHTML"));
        assert!(SCRIPT.contains("export function mount(element, options = {})"));
        // The count widget parses no HTML at all, and asks its own server only.
        for html in [
            "innerHTML",
            "insertAdjacentHTML",
            "outerHTML",
            "document.write",
        ] {
            assert!(!COUNT_SCRIPT.contains(html), "count.js uses {html}");
        }
        assert!(COUNT_SCRIPT.contains("new URL(options.endpoint ?? '/graphql', import.meta.url)"));
        assert!(COUNT_SCRIPT.contains("export async function count(root = document, options = {})"));
    }

    #[tokio::test]
    async fn the_demo_page_escapes_its_key() {
        let hostile = r#""><script>alert(1)</script><img src=x onerror='alert(2)'>&amp;"#;
        let query: String = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("key", hostile)
            .finish();
        let (status, headers, page) = get(&format!("/embed/demo?{query}")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers[CONTENT_TYPE], "text/html; charset=utf-8");
        assert_eq!(headers[CONTENT_SECURITY_POLICY], DEMO_POLICY);
        let escaped = "&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x \
                       onerror=&#39;alert(2)&#39;&gt;&amp;amp;";
        assert!(page.contains(&format!("data-key=\"{escaped}\"")), "{page}");
        assert!(page.contains(&format!("value=\"{escaped}\"")), "{page}");
        assert!(!page.contains("<script>alert"), "{page}");
        assert!(!page.contains("<img"), "{page}");
        // The only script is the demo's module, from this server.
        assert_eq!(page.matches("<script").count(), 1, "{page}");
        assert!(page.contains(r#"<script type="module" src="/embed/demo.js"></script>"#));
    }

    #[tokio::test]
    async fn the_demo_page_asks_for_a_key_it_lacks() {
        for path in ["/embed/demo", "/embed/demo?key=", "/embed/demo?other=1"] {
            let (status, _, page) = get(path).await;
            assert_eq!(status, StatusCode::OK, "{path}");
            assert!(page.contains("<input name=\"key\""), "{path}");
            assert!(!page.contains("id=\"comments\""), "{path}: {page}");
            assert!(!page.contains("{{"), "{path}: {page}");
        }
        // The first key counts; bad percent-encoding is decoded as best it can be.
        let (_, _, page) = get("/embed/demo?key=a%20b&key=c").await;
        assert!(page.contains(r#"data-key="a b""#), "{page}");
        let (status, _, page) = get("/embed/demo?key=%ZZ%e2%82").await;
        assert_eq!(status, StatusCode::OK);
        assert!(page.contains("data-key=\"%ZZ\u{fffd}\""), "{page}");
    }

    #[tokio::test]
    async fn the_proof_frame_runs_its_own_script_and_worker_only() {
        let (status, headers, page) = get("/embed/proof").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers[CONTENT_TYPE], "text/html; charset=utf-8");
        assert_eq!(headers[CONTENT_SECURITY_POLICY], PROOF_POLICY);
        assert_eq!(headers[REFERRER_POLICY], "no-referrer");
        // Host pages of any origin frame it: nothing forbids that.
        assert!(!PROOF_POLICY.contains("frame-ancestors"));
        assert!(
            PROOF_POLICY.starts_with("default-src 'none'; script-src 'self'; worker-src 'self'")
        );
        assert_eq!(page.matches("<script").count(), 1, "{page}");
        assert!(page.contains(r#"<script type="module" src="/embed/proof-frame.js"></script>"#));
        // The frame starts the worker it is served with, and listens to its parent only.
        assert!(PROOF_FRAME_SCRIPT.contains("new Worker('/embed/proof-worker.js')"));
        assert!(PROOF_FRAME_SCRIPT.contains("event.source !== window.parent"));
        // The embed runs the same worker, directly or in that frame: no blob or inline worker.
        assert!(SCRIPT.contains("new URL('proof-worker.js', import.meta.url)"));
        assert!(SCRIPT.contains("new URL('proof', import.meta.url)"));
        for text in [SCRIPT, PROOF_FRAME_SCRIPT, PROOF_WORKER] {
            assert!(!text.contains("blob:") && !text.contains("createObjectURL"));
            assert!(!text.contains("importScripts"));
        }
    }

    #[tokio::test]
    async fn other_embed_paths_are_not_found() {
        for path in [
            "/embed/",
            "/embed/threadql.css",
            "/embed/demo.html",
            "/embed/proof.html",
            "/embed/proof-worker",
            "/embed/count",
            "/embed/../graphql",
        ] {
            let (status, _, _) = get(path).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        }
    }

    #[test]
    fn placeholders_are_filled_once() {
        let values = [("key", "{{comments}}"), ("comments", "<div>")];
        assert_eq!(
            fill("a{{key}}b{{comments}}c", &values),
            "a{{comments}}b<div>c"
        );
        assert_eq!(fill("{{other}}{{key", &values), "{{other}}{{key");
        assert_eq!(fill("{{{key}}}", &values), "{{{key}}}");
        assert_eq!(fill("", &values), "");
    }

    #[tokio::test]
    async fn a_key_naming_a_placeholder_stays_text() {
        let (_, _, page) = get("/embed/demo?key=%7B%7Bcomments%7D%7DA%7B%7Bcomments%7D%7DB").await;
        assert_eq!(page.matches("id=\"comments\"").count(), 1, "{page}");
        assert!(
            page.contains("value=\"{{comments}}A{{comments}}B\""),
            "{page}"
        );
    }

    #[test]
    fn escaping_covers_every_special_character() {
        assert_eq!(
            escape_html(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(escape_html("plain ключ"), "plain ключ");
    }
}
