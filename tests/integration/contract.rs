//! The contract suite: the same behaviour, checked against every storage layout.

use serde_json::json;
use threadql::domain::Layout;

use crate::support::TestApp;

/// Instantiates every contract case for one layout.
macro_rules! contract_suite {
    ($module:ident, $layout:expr) => {
        mod $module {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn posts_and_reads_back() {
                posts_and_reads_back_case($layout).await;
            }
        }
    };
}

contract_suite!(per_comment, Layout::PerComment);

async fn posts_and_reads_back_case(layout: Layout) {
    let app = TestApp::new("posts_and_reads_back", layout).await;
    let d = app.discussion("hello").await;
    let top = app.post(&d, None, "top").await;
    let reply = app.post(&d, Some(&top), "reply").await;
    let data = app
        .ok(
            "query($d: ID!) { discussion(id: $d) { commentCount threads { nodes { slug replies { nodes { slug text } } } } } }",
            json!({ "d": d }),
        )
        .await;
    assert_eq!(data["discussion"]["commentCount"], 2);
    let thread = &data["discussion"]["threads"]["nodes"][0];
    assert_eq!(thread["slug"], top.as_str());
    assert_eq!(thread["replies"]["nodes"][0]["slug"], reply.as_str());
}
