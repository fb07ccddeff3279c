//! GraphiQL at `/`, with its scripts and styles served from the binary (assets/graphiql), under
//! a Content-Security-Policy that lets the page load only those and never be framed.

use axum::extract::Path;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::assets::{asset, named, Asset};

/// Our page: GraphiQL pointed at `/graphql`, with a threaded default query.
const PAGE: &str = include_str!("graphiql.html");
/// The page's own script (no inline script runs): it mounts GraphiQL.
const SCRIPT: &str = include_str!("graphiql.js");
/// Where the page loads its script from.
const SCRIPT_PATH: &str = "/graphiql/threadql-graphiql.js";

/// What the page may load and run: scripts, styles, images and fonts from this server (the
/// stylesheet's images and fonts are `data:` URLs), connections to this server only (`/graphql`
/// over HTTP and WebSocket), and no frame may hold it. Inline styles are allowed: GraphiQL's
/// dialogs add a `<style>` element and its editor sets `style` attributes; no inline script is.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
     connect-src 'self'; img-src 'self' data:; font-src 'self' data:; form-action 'none'; \
     base-uri 'none'; frame-ancestors 'none'";

/// The vendored files (see assets/graphiql/README.md). Their names carry their package's version.
const ASSETS: &[Asset] = &[
    asset!(
        "graphiql",
        "graphiql-3.8.3.min.js",
        "text/javascript; charset=utf-8"
    ),
    asset!(
        "graphiql",
        "graphiql-3.8.3.min.css",
        "text/css; charset=utf-8"
    ),
    asset!(
        "graphiql",
        "react-18.3.1.production.min.js",
        "text/javascript; charset=utf-8"
    ),
    asset!(
        "graphiql",
        "react-dom-18.3.1.production.min.js",
        "text/javascript; charset=utf-8"
    ),
    asset!(
        "graphiql",
        "LICENSE-graphiql-3.8.3.txt",
        "text/plain; charset=utf-8"
    ),
    asset!(
        "graphiql",
        "LICENSE-react-18.3.1.txt",
        "text/plain; charset=utf-8"
    ),
    asset!(
        "graphiql",
        "LICENSE-react-dom-18.3.1.txt",
        "text/plain; charset=utf-8"
    ),
];

/// The routes of GraphiQL: the page at `/` and its files at `/graphiql/<file>`.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(page))
        .route(SCRIPT_PATH, get(script))
        .route("/graphiql/{file}", get(file))
}

/// The page, with its policy; `X-Frame-Options` too, for browsers without `frame-ancestors`.
async fn page() -> Response {
    (
        [
            (CONTENT_TYPE, "text/html; charset=utf-8"),
            (CACHE_CONTROL, "no-cache"),
            (CONTENT_SECURITY_POLICY, POLICY),
            (X_FRAME_OPTIONS, "DENY"),
            (X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        PAGE,
    )
        .into_response()
}

/// The page's script, checked again on every use (it changes with the server, its name does
/// not).
async fn script() -> Response {
    (
        [
            (CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (CACHE_CONTROL, "no-cache"),
            (X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        SCRIPT,
    )
        .into_response()
}

/// A vendored file, cached for a year (a new version has a new name); 404 for any other name.
async fn file(Path(name): Path<String>) -> Response {
    match named(ASSETS, &name) {
        Some(asset) => (
            [
                (CONTENT_TYPE, asset.content_type),
                (CACHE_CONTROL, "public, max-age=31536000, immutable"),
                (X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            asset.bytes,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "not found").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use sha2::{Digest, Sha256};
    use tower::ServiceExt;

    async fn get(path: &str) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
        let response = routes::<()>()
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let (parts, body) = response.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes().to_vec();
        (parts.status, parts.headers, bytes)
    }

    /// The `/graphiql/…` paths the page loads.
    fn page_assets() -> Vec<&'static str> {
        PAGE.split(['"', '\''])
            .filter(|part| part.starts_with("/graphiql/"))
            .collect()
    }

    #[tokio::test]
    async fn the_page_loads_only_files_the_server_has() {
        let (status, headers, body) = get("/").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers[CONTENT_TYPE], "text/html; charset=utf-8");
        let body = String::from_utf8(body).unwrap();
        assert!(body.contains("<title>threadql</title>"));
        assert!(
            !body.contains("http://") && !body.contains("https://"),
            "the page names another origin"
        );
        let loaded = page_assets();
        assert_eq!(loaded.len(), 5, "{loaded:?}");
        for path in loaded.into_iter().filter(|path| *path != SCRIPT_PATH) {
            let (status, headers, body) = get(path).await;
            assert_eq!(status, StatusCode::OK, "{path}");
            assert!(!body.is_empty(), "{path}");
            let expected = if path.ends_with(".css") {
                "text/css; charset=utf-8"
            } else {
                "text/javascript; charset=utf-8"
            };
            assert_eq!(headers[CONTENT_TYPE], expected, "{path}");
            assert_eq!(
                headers[CACHE_CONTROL], "public, max-age=31536000, immutable",
                "{path}"
            );
        }
    }

    #[tokio::test]
    async fn the_page_runs_no_inline_script_and_cannot_be_framed() {
        let (_, headers, body) = get("/").await;
        assert_eq!(headers[CONTENT_SECURITY_POLICY], POLICY);
        assert!(POLICY.contains("frame-ancestors 'none'"));
        assert!(POLICY.contains("script-src 'self';"));
        assert_eq!(headers[X_FRAME_OPTIONS], "DENY");
        let body = String::from_utf8(body).unwrap();
        // Every script element loads a file; none holds code.
        assert_eq!(body.matches("<script").count(), 4);
        assert_eq!(body.matches("<script src=\"/graphiql/").count(), 4);
        assert_eq!(body.matches("></script>").count(), 4);
        let (status, headers, script) = get(SCRIPT_PATH).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers[CONTENT_TYPE], "text/javascript; charset=utf-8");
        assert_eq!(headers[CACHE_CONTROL], "no-cache");
        assert_eq!(script, SCRIPT.as_bytes());
        assert!(SCRIPT.contains("GraphiQL.createFetcher"));
    }

    #[tokio::test]
    async fn unknown_files_are_not_found() {
        for path in [
            "/graphiql/graphiql.min.js",
            "/graphiql/README.md",
            "/graphiql/..%2Fgraphiql.html",
            "/graphiql/",
            "/graphiql",
        ] {
            let (status, _, _) = get(path).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        }
    }

    #[test]
    fn every_file_matches_its_recorded_sha256() {
        let readme = include_str!("../assets/graphiql/README.md");
        for asset in ASSETS {
            let row = readme
                .lines()
                .find(|line| line.starts_with(&format!("| `{}` |", asset.name)))
                .unwrap_or_else(|| panic!("{} is not in assets/graphiql/README.md", asset.name));
            let sum: String = Sha256::digest(asset.bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert!(
                row.contains(&format!("`{sum}`"))
                    && row.contains(&format!("| {} |", asset.bytes.len())),
                "{} (sha256 {sum}, {} bytes) does not match its row: {row}",
                asset.name,
                asset.bytes.len()
            );
        }
        let rows = readme.lines().filter(|l| l.starts_with("| `")).count();
        assert_eq!(
            rows,
            ASSETS.len(),
            "README.md lists files the server does not serve"
        );
    }

    #[test]
    fn the_stylesheet_loads_nothing_from_elsewhere() {
        let css = ASSETS
            .iter()
            .find(|asset| asset.name.ends_with(".css"))
            .map(|asset| String::from_utf8_lossy(asset.bytes))
            .unwrap();
        assert!(!css.contains("@import"));
        for (at, _) in css.match_indices("url(") {
            let target = css[at + 4..].trim_start_matches(['"', '\'']);
            assert!(
                target.starts_with("data:"),
                "the stylesheet loads {}",
                &target[..target.len().min(80)]
            );
        }
    }
}
