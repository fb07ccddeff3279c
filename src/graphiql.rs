//! GraphiQL at `/`, with its scripts and styles served from the binary (assets/graphiql).

use axum::extract::Path;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

/// Our page: GraphiQL pointed at `/graphql`, with a threaded default query.
const PAGE: &str = include_str!("graphiql.html");

/// One vendored file, served at `/graphiql/<name>`.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $content_type:literal) => {
        Asset {
            name: $name,
            content_type: $content_type,
            bytes: include_bytes!(concat!("../assets/graphiql/", $name)),
        }
    };
}

/// The vendored files (see assets/graphiql/README.md). Their names carry their package's version.
const ASSETS: &[Asset] = &[
    asset!("graphiql-3.8.3.min.js", "text/javascript; charset=utf-8"),
    asset!("graphiql-3.8.3.min.css", "text/css; charset=utf-8"),
    asset!(
        "react-18.3.1.production.min.js",
        "text/javascript; charset=utf-8"
    ),
    asset!(
        "react-dom-18.3.1.production.min.js",
        "text/javascript; charset=utf-8"
    ),
    asset!("LICENSE-graphiql-3.8.3.txt", "text/plain; charset=utf-8"),
    asset!("LICENSE-react-18.3.1.txt", "text/plain; charset=utf-8"),
    asset!("LICENSE-react-dom-18.3.1.txt", "text/plain; charset=utf-8"),
];

/// The routes of GraphiQL: the page at `/` and its files at `/graphiql/<file>`.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(page))
        .route("/graphiql/{file}", get(file))
}

async fn page() -> Response {
    (
        [
            (CONTENT_TYPE, "text/html; charset=utf-8"),
            (CACHE_CONTROL, "no-cache"),
        ],
        PAGE,
    )
        .into_response()
}

/// A vendored file, cached for a year (a new version has a new name); 404 for any other name.
async fn file(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|asset| asset.name == name) {
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
        assert_eq!(loaded.len(), 4, "{loaded:?}");
        for path in loaded {
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
