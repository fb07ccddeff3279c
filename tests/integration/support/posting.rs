//! Creating discussions and posting comments: through the schema, over HTTP, or straight through
//! a store (as another server on the same database would).

use serde_json::{json, Value};
use threadql::domain::{Author, CommentText, Discussion, DiscussionId, Layout, NewComment, Slug};
use threadql::store::{Storage, Store};

use super::app::{layout_name, TestApp};
use super::server::{graphql_data, Running};

impl TestApp {
    /// Creates a discussion in the app's layout and returns its id.
    pub(crate) async fn discussion(&self, title: &str) -> String {
        let data = self
            .ok(
                "mutation($t: String!, $l: StorageLayout) { createDiscussion(input: {title: $t, layout: $l}) { id layout } }",
                json!({ "t": title, "l": layout_name(self.settings.layout) }),
            )
            .await;
        assert_eq!(
            data["createDiscussion"]["layout"],
            layout_name(self.settings.layout)
        );
        data["createDiscussion"]["id"]
            .as_str()
            .expect("id")
            .to_owned()
    }

    /// Posts a comment (a reply when `parent` is given) and returns its slug.
    pub(crate) async fn post(&self, discussion: &str, parent: Option<&str>, text: &str) -> String {
        self.post_as(&self.token("u1", "Ada"), discussion, parent, text)
            .await
    }

    /// Posts a comment as the holder of `token`; returns its slug (failing on any error).
    pub(crate) async fn post_as(
        &self,
        token: &str,
        discussion: &str,
        parent: Option<&str>,
        text: &str,
    ) -> String {
        let response = self
            .exec_as(
                Some(token),
                "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug } }",
                json!({ "d": discussion, "p": parent, "t": text }),
            )
            .await;
        response["data"]["postComment"]["slug"]
            .as_str()
            .unwrap_or_else(|| panic!("the post failed: {response:#}"))
            .to_owned()
    }
}

impl Running {
    /// Runs a mutation over HTTP with a token and returns its data, failing on errors.
    pub(crate) async fn mutate(&self, token: &str, query: &str, variables: Value) -> Value {
        graphql_data(&reqwest::Client::new(), self, Some(token), query, variables).await
    }

    /// Creates a discussion in `layout` over HTTP; returns its id.
    pub(crate) async fn discussion(&self, token: &str, layout: Layout) -> String {
        let data = self
            .mutate(
                token,
                "mutation($l: StorageLayout) { createDiscussion(input: {title: \"over http\", layout: $l}) { id } }",
                json!({ "l": layout_name(layout) }),
            )
            .await;
        data["createDiscussion"]["id"]
            .as_str()
            .expect("id")
            .to_owned()
    }

    /// Posts a comment over HTTP; returns its slug.
    pub(crate) async fn post(
        &self,
        token: &str,
        d: &str,
        parent: Option<&str>,
        text: &str,
    ) -> String {
        let data = self
            .mutate(
                token,
                "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug } }",
                json!({ "d": d, "p": parent, "t": text }),
            )
            .await;
        data["postComment"]["slug"]
            .as_str()
            .expect("slug")
            .to_owned()
    }
}

/// The discussion `d` as `store` reads it (a second store stands for another server).
pub(crate) async fn load_discussion(store: &Store, d: &str) -> Discussion {
    let id = DiscussionId::parse(d).expect("id");
    store
        .discussions()
        .by_ids(&[id])
        .await
        .expect("discussion")
        .pop()
        .expect("exists")
}

/// Posts one comment through `store`'s `layout`, in process.
pub(crate) async fn post_in(
    store: &Store,
    layout: Layout,
    discussion: &Discussion,
    parent: Option<&Slug>,
    text: &str,
) -> Slug {
    assert_eq!(discussion.layout, layout, "the discussion's layout");
    store
        .posting()
        .post(
            discussion,
            NewComment {
                parent: parent.cloned(),
                author: Author {
                    id: "u1".into(),
                    name: "Ada".into(),
                },
                text: CommentText::parse(text, 100).expect("text"),
                html: threadql::domain::markdown::render(text, 16),
                part: None,
                announce: None,
                number: None,
            },
        )
        .await
        .expect("post")
        .comment
        .slug
}
