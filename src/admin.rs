//! The moderation console at `/admin`: one page, its stylesheet and its plain ES modules, served
//! from the binary (assets/admin), under a policy that lets the page load only those files and
//! talk only to this server (`/graphql` over HTTP and WebSocket), and never be framed.

use axum::extract::Path;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use axum::http::{HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::assets::{asset, named, Asset};

/// The page: its markup loads the stylesheet and `main.js`, which imports the other modules.
const PAGE: &str = include_str!("../assets/admin/index.html");

/// What the page may load and run: its own files, connections to its own server (`'self'`
/// covers the WebSocket of the same host), nothing inline (no script, no style element or
/// attribute), no plugin, no base, no form sent anywhere, and no frame may hold it.
const POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; \
     connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// Every response's headers besides its type: checked again on every use (the files change
/// with the server, their names do not), never sniffed, and no address of the console (whose
/// fragment may carry a token) sent to another site.
const COMMON: [(HeaderName, &str); 3] = [
    (CACHE_CONTROL, "no-cache"),
    (X_CONTENT_TYPE_OPTIONS, "nosniff"),
    (REFERRER_POLICY, "no-referrer"),
];

/// The page's files: the stylesheet, the icon and the modules.
const ASSETS: &[Asset] = &[
    asset!("admin", "admin.css", "text/css; charset=utf-8"),
    asset!("admin", "icon.svg", "image/svg+xml"),
    asset!("admin", "main.js", "text/javascript; charset=utf-8"),
    asset!("admin", "api.js", "text/javascript; charset=utf-8"),
    asset!("admin", "dom.js", "text/javascript; charset=utf-8"),
    asset!("admin", "queue.js", "text/javascript; charset=utf-8"),
    asset!("admin", "history.js", "text/javascript; charset=utf-8"),
    asset!("admin", "discussions.js", "text/javascript; charset=utf-8"),
    asset!("admin", "bans.js", "text/javascript; charset=utf-8"),
    asset!("admin", "log.js", "text/javascript; charset=utf-8"),
    asset!("admin", "keys.js", "text/javascript; charset=utf-8"),
];

/// The routes of the console: the page at `/admin` (`/admin/` sends there: a fragment with a
/// token stays with the browser, which carries it across the redirect) and its files at
/// `/admin/<file>`.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/admin", get(page))
        .route("/admin/", get(to_page))
        .route("/admin/{file}", get(file))
}

/// `/admin/`: a permanent redirect to the page.
async fn to_page() -> Response {
    (
        StatusCode::PERMANENT_REDIRECT,
        COMMON,
        [(axum::http::header::LOCATION, "/admin")],
    )
        .into_response()
}

/// The page, with its policy; `X-Frame-Options` too, for browsers without `frame-ancestors`.
async fn page() -> Response {
    (
        COMMON,
        [
            (CONTENT_TYPE, "text/html; charset=utf-8"),
            (CONTENT_SECURITY_POLICY, POLICY),
            (X_FRAME_OPTIONS, "DENY"),
        ],
        PAGE,
    )
        .into_response()
}

/// A file of the page; 404 for any other name.
async fn file(Path(name): Path<String>) -> Response {
    match named(ASSETS, &name) {
        Some(asset) => (COMMON, [(CONTENT_TYPE, asset.content_type)], asset.bytes).into_response(),
        None => (StatusCode::NOT_FOUND, COMMON, "not found").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::{HeaderMap, Request};
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    async fn get(path: &str) -> (StatusCode, HeaderMap, Vec<u8>) {
        let response = routes::<()>()
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let (parts, body) = response.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes().to_vec();
        (parts.status, parts.headers, bytes)
    }

    fn text(asset: &Asset) -> &'static str {
        std::str::from_utf8(asset.bytes).unwrap()
    }

    /// The `/admin/…` paths the page loads.
    fn page_files() -> Vec<&'static str> {
        PAGE.split('"')
            .filter(|part| part.starts_with("/admin/"))
            .collect()
    }

    /// The modules a module imports (`from './x.js'`), as names.
    fn imports(module: &str) -> Vec<&str> {
        module
            .lines()
            .filter_map(|line| line.split_once(" from './"))
            .filter_map(|(_, rest)| rest.split_once('\''))
            .map(|(name, _)| name)
            .collect()
    }

    fn assert_common(headers: &HeaderMap, path: &str) {
        assert_eq!(headers[CACHE_CONTROL], "no-cache", "{path}");
        assert_eq!(headers[X_CONTENT_TYPE_OPTIONS], "nosniff", "{path}");
        assert_eq!(headers[REFERRER_POLICY], "no-referrer", "{path}");
    }

    #[tokio::test]
    async fn the_page_is_html_under_its_policy_and_cannot_be_framed() {
        let (status, headers, body) = get("/admin").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers[CONTENT_TYPE], "text/html; charset=utf-8");
        assert_common(&headers, "/admin");
        assert_eq!(headers[CONTENT_SECURITY_POLICY], POLICY);
        assert_eq!(headers[X_FRAME_OPTIONS], "DENY");
        for directive in [
            "default-src 'self'",
            "script-src 'self';",
            "style-src 'self';",
            "connect-src 'self';",
            "frame-ancestors 'none'",
        ] {
            assert!(POLICY.contains(directive), "{directive}");
        }
        assert!(!POLICY.contains("unsafe") && !POLICY.contains("http"));
        assert_eq!(body, PAGE.as_bytes());
    }

    #[tokio::test]
    async fn the_page_runs_no_inline_script_or_style() {
        // One script element, loading the entry module; no style element or attribute, no
        // handler attribute, nothing from another origin.
        assert_eq!(PAGE.matches("<script").count(), 1);
        assert!(PAGE.contains(r#"<script type="module" src="/admin/main.js"></script>"#));
        assert!(!PAGE.contains("<style") && !PAGE.contains(" style="));
        for attribute in ["onclick=", "onload=", "onerror=", "onsubmit="] {
            assert!(!PAGE.contains(attribute), "{attribute}");
        }
        assert!(!PAGE.contains("http://") && !PAGE.contains("https://"));
        assert_eq!(
            page_files(),
            ["/admin/icon.svg", "/admin/admin.css", "/admin/main.js"]
        );
    }

    #[tokio::test]
    async fn every_file_the_page_loads_is_served_with_its_type() {
        let mut wanted: Vec<String> = page_files().into_iter().map(str::to_owned).collect();
        for asset in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
            for name in imports(text(asset)) {
                wanted.push(format!("/admin/{name}"));
            }
        }
        for path in &wanted {
            let (status, headers, body) = get(path).await;
            assert_eq!(status, StatusCode::OK, "{path}");
            assert_common(&headers, path);
            let expected = match path.rsplit_once('.').map(|(_, ext)| ext) {
                Some("js") => "text/javascript; charset=utf-8",
                Some("css") => "text/css; charset=utf-8",
                Some("svg") => "image/svg+xml",
                other => panic!("{path}: an unexpected kind of file {other:?}"),
            };
            assert_eq!(headers[CONTENT_TYPE], expected, "{path}");
            assert!(!body.is_empty(), "{path}");
        }
        // Every module is reached from the page: none is served for nothing.
        for asset in ASSETS {
            let path = format!("/admin/{}", asset.name);
            assert!(wanted.contains(&path), "{path} is served but never loaded");
        }
    }

    #[test]
    fn every_file_of_the_folder_is_served() {
        let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/admin");
        let mut names: Vec<String> = std::fs::read_dir(folder)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name != "index.html")
            .collect();
        names.sort();
        let mut served: Vec<&str> = ASSETS.iter().map(|asset| asset.name).collect();
        served.sort_unstable();
        assert_eq!(names, served);
    }

    #[test]
    fn the_modules_talk_to_their_own_server_only() {
        for asset in ASSETS.iter().filter(|a| !a.name.ends_with(".svg")) {
            let name = asset.name;
            for line in text(asset).lines() {
                let code = line.trim_start();
                if code.starts_with("//") || code.starts_with("/*") || code.starts_with('*') {
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
                assert!(
                    !code.contains("@import") && !code.contains("url("),
                    "{name} loads a file: {line}"
                );
            }
        }
        let api = ASSETS
            .iter()
            .find(|a| a.name == "api.js")
            .map(text)
            .unwrap();
        assert!(api.contains("new URL('/graphql', window.location.origin)"));
        // The one place HTML is parsed is the inert template the allow-list cleans.
        let parsing: Vec<&str> = ASSETS
            .iter()
            .filter(|a| a.name.ends_with(".js"))
            .filter(|a| {
                let code = text(a);
                code.contains("innerHTML")
                    || code.contains("outerHTML")
                    || code.contains("insertAdjacentHTML")
                    || code.contains("document.write")
                    || code.contains("setAttribute('style'")
            })
            .map(|a| a.name)
            .collect();
        assert_eq!(parsing, ["dom.js"]);
        let dom = ASSETS
            .iter()
            .find(|a| a.name == "dom.js")
            .map(text)
            .unwrap();
        assert_eq!(dom.matches("innerHTML").count(), 1);
        assert!(dom.contains("template.innerHTML = html;"));
    }

    #[tokio::test]
    async fn a_trailing_slash_leads_to_the_page() {
        let (status, headers, body) = get("/admin/").await;
        assert_eq!(status, StatusCode::PERMANENT_REDIRECT);
        assert_eq!(headers[axum::http::header::LOCATION], "/admin");
        assert_common(&headers, "/admin/");
        assert!(body.is_empty());
    }

    #[tokio::test]
    async fn other_paths_are_not_found() {
        for path in [
            "/admin/index.html",
            "/admin/README.md",
            "/admin/main.js.map",
            "/admin/..%2Fsrc%2Fadmin.rs",
            "/admin/assets/admin/main.js",
            "/admin.html",
        ] {
            let (status, _, _) = get(path).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        }
    }
}
