//! Deleted comments keep their place, slug and replies in every read, for every viewer.

use crate::model::Model;

use super::*;

// ---------------------------------------------------------------------------------------------
// 4. Tombstones

/// A small tree as posted, with what each comment should look like.
struct Tree {
    d: String,
    model: Model,
    authors: Vec<Who>,
    texts: Vec<String>,
    revisions: Vec<Vec<String>>,
    edited: Vec<Value>,
    deleted: Vec<bool>,
}

impl Tree {
    fn slug(&self, name: &str) -> String {
        let i = self
            .texts
            .iter()
            .position(|t| t == name)
            .unwrap_or_else(|| panic!("no comment {name}"));
        self.model.slugs[i].clone()
    }

    /// Comment `i` through the `View` fragment, as `viewer` should see it.
    fn view(&self, i: usize, viewer: Who) -> Value {
        let deleted = self.deleted[i];
        let author = if deleted && viewer != Who::Moderator {
            deleted_author()
        } else {
            self.authors[i].author()
        };
        let may_see_revisions = viewer == Who::Moderator || viewer == self.authors[i];
        let revisions = if deleted || !may_see_revisions {
            Value::Null
        } else {
            Value::Array(
                self.revisions[i]
                    .iter()
                    .map(|t| json!({ "text": t }))
                    .collect(),
            )
        };
        json!({
            "slug": self.model.slugs[i],
            "deleted": deleted,
            "text": if deleted { Value::Null } else { json!(self.texts[i]) },
            "editedAt": self.edited[i],
            "author": author,
            "revisions": revisions,
            "replyCount": self.model.replies(i).len(),
        })
    }

    fn views(&self, slugs: &[String], viewer: Who) -> Vec<Value> {
        slugs
            .iter()
            .map(|s| self.view(self.model.index(s), viewer))
            .collect()
    }

    fn view_of(&self, slug: &str, viewer: Who) -> Value {
        self.view(self.model.index(slug), viewer)
    }
}

/// Pages through a connection (`first` and `after`, or `first` and `offset`) as `viewer`;
/// returns the nodes and checks `totalCount` on every page.
#[allow(clippy::too_many_arguments)]
async fn pages(
    api: &Calls<'_>,
    viewer: Who,
    query: &str,
    vars: Value,
    path: &[&str],
    size: usize,
    by_offset: bool,
    total: usize,
) -> Vec<Value> {
    let query = format!("{query} {VIEW}");
    let mut out: Vec<Value> = Vec::new();
    let mut after = Value::Null;
    for _ in 0..1000 {
        let mut v = vars.clone();
        v["first"] = json!(size);
        if by_offset {
            v["offset"] = json!(out.len());
        } else {
            v["after"] = after.clone();
        }
        let response = api.exec(viewer, &query, v).await;
        let got = data(response, &format!("page of {path:?} as {viewer:?}"));
        let conn = path.iter().fold(&got, |v, k| &v[*k]);
        assert_eq!(conn["totalCount"], json!(total), "totalCount of {path:?}");
        let nodes = conn["nodes"]
            .as_array()
            .unwrap_or_else(|| panic!("not a connection: {conn:#}"));
        assert!(nodes.len() <= size);
        out.extend(nodes.iter().cloned());
        if conn["pageInfo"]["hasNextPage"] != json!(true) {
            return out;
        }
        assert_eq!(nodes.len(), size, "a page before the last is full");
        after = conn["pageInfo"]["endCursor"].clone();
    }
    panic!("paging never ended");
}

/// Every read of the tree, as every viewer, against what the tree says.
async fn check_every_read(api: &Calls<'_>, tree: &Tree, when: &str) {
    let d = &tree.d;
    let model = &tree.model;
    let n = model.slugs.len();
    let page = "pageInfo { hasNextPage endCursor } totalCount nodes { ...View }";
    let by_cursor = format!("query($d: ID!, $o: CommentOrder!, $first: Int, $after: String) {{ discussion(id: $d) {{ comments(order: $o, first: $first, after: $after) {{ {page} }} }} }}");
    let by_offset = format!("query($d: ID!, $o: CommentOrder!, $first: Int, $offset: Int) {{ discussion(id: $d) {{ comments(order: $o, first: $first, offset: $offset) {{ {page} }} }} }}");
    let threads_cursor = format!("query($d: ID!, $first: Int, $after: String) {{ discussion(id: $d) {{ threads(first: $first, after: $after) {{ {page} }} }} }}");
    let threads_offset = format!("query($d: ID!, $first: Int, $offset: Int) {{ discussion(id: $d) {{ threads(first: $first, offset: $offset) {{ {page} }} }} }}");
    let replies = format!("query($d: ID!, $s: String!, $first: Int, $after: String) {{ comment(discussionId: $d, slug: $s) {{ replies(first: $first, after: $after) {{ {page} }} }} }}");
    let sub = format!("query($d: ID!, $s: String!, $first: Int, $after: String) {{ comment(discussionId: $d, slug: $s) {{ subDiscussion(first: $first, after: $after) {{ {page} }} }} }}");
    let links = format!("query($d: ID!, $s: String!) {{ comment(discussionId: $d, slug: $s) {{ ...View parent {{ ...View }} }} discussion(id: $d) {{ commentCount comment(slug: $s) {{ ...View }} }} }} {VIEW}");
    let entities = format!("query($reps: [_Any!]!) {{ _entities(representations: $reps) {{ ... on Comment {{ ...View }} }} }} {VIEW}");

    for viewer in VIEWERS {
        let what = |list: &str| format!("{when}: {list} as {viewer:?}");
        for (order, expected) in [
            ("CHRONOLOGICAL", model.chronological()),
            ("THREADED", model.threaded()),
        ] {
            for (query, offset) in [(&by_cursor, false), (&by_offset, true)] {
                let got = pages(
                    api,
                    viewer,
                    query,
                    json!({ "d": d, "o": order }),
                    &["discussion", "comments"],
                    2,
                    offset,
                    n,
                )
                .await;
                let how = if offset { "offset" } else { "cursor" };
                assert_eq!(
                    got,
                    tree.views(&expected, viewer),
                    "{}",
                    what(&format!("{order} by {how}"))
                );
            }
        }
        let expected = model.threads();
        for (query, offset) in [(&threads_cursor, false), (&threads_offset, true)] {
            let got = pages(
                api,
                viewer,
                query,
                json!({ "d": d }),
                &["discussion", "threads"],
                2,
                offset,
                expected.len(),
            )
            .await;
            assert_eq!(got, tree.views(&expected, viewer), "{}", what("threads"));
        }
        for i in 0..n {
            let slug = &model.slugs[i];
            let expected = model.replies(i);
            let got = pages(
                api,
                viewer,
                &replies,
                json!({ "d": d, "s": slug }),
                &["comment", "replies"],
                2,
                false,
                expected.len(),
            )
            .await;
            assert_eq!(
                got,
                tree.views(&expected, viewer),
                "{}",
                what(&format!("replies of {slug}"))
            );
            let expected = model.descendants(i);
            let got = pages(
                api,
                viewer,
                &sub,
                json!({ "d": d, "s": slug }),
                &["comment", "subDiscussion"],
                2,
                false,
                expected.len(),
            )
            .await;
            assert_eq!(
                got,
                tree.views(&expected, viewer),
                "{}",
                what(&format!("sub-discussion of {slug}"))
            );
            // Direct links by both routes, and the parent.
            let got = data(
                api.exec(viewer, &links, json!({ "d": d, "s": slug })).await,
                &what(&format!("direct link to {slug}")),
            );
            let view = tree.view(i, viewer);
            let mut own = got["comment"].clone();
            let parent = own
                .as_object_mut()
                .and_then(|o| o.remove("parent"))
                .unwrap_or(Value::Null);
            assert_eq!(own, view, "{}", what(&format!("comment(slug: {slug})")));
            assert_eq!(
                got["discussion"]["comment"],
                view,
                "{}",
                what(&format!("discussion.comment(slug: {slug})"))
            );
            assert_eq!(got["discussion"]["commentCount"], json!(n));
            let expected_parent = model.parents[i].map_or(Value::Null, |p| tree.view(p, viewer));
            assert_eq!(
                parent,
                expected_parent,
                "{}",
                what(&format!("parent of {slug}"))
            );
        }
        // Federation.
        let reps: Vec<Value> = model
            .slugs
            .iter()
            .map(|s| json!({ "__typename": "Comment", "discussionId": d, "slug": s }))
            .collect();
        let got = data(
            api.exec(viewer, &entities, json!({ "reps": reps })).await,
            &what("_entities"),
        );
        assert_eq!(
            got["_entities"],
            Value::Array(tree.views(&model.slugs, viewer)),
            "{}",
            what("_entities")
        );
    }
}

pub(crate) async fn tombstones_keep_their_place_in_every_read_case(settings: Settings) {
    let app = TestApp::with("lc_tombstones", settings).await;
    let api = Calls::new(&app);
    let d = app.discussion("tombstones").await;
    // Three threads, three levels deep, posted interleaved so that the chronological and the
    // threaded orders differ.
    let plan: [(&str, Option<&str>, Who); 9] = [
        ("t0", None, Who::Ada),
        ("a", Some("t0"), Who::Ada),
        ("a1", Some("a"), Who::Grace),
        ("t1", None, Who::Grace),
        ("b", Some("t0"), Who::Grace),
        ("c", Some("t1"), Who::Ada),
        ("a2", Some("a"), Who::Ada),
        ("c1", Some("c"), Who::Grace),
        ("t2", None, Who::Ada),
    ];
    let mut tree = Tree {
        d: d.clone(),
        model: Model::default(),
        authors: Vec::new(),
        texts: Vec::new(),
        revisions: Vec::new(),
        edited: Vec::new(),
        deleted: Vec::new(),
    };
    for (text, parent, who) in plan {
        let parent_index = parent.map(|p| tree.texts.iter().position(|t| t == p).expect("parent"));
        let parent_slug = parent_index.map(|p| tree.model.slugs[p].clone());
        let slug = api.post(who, &d, parent_slug.as_deref(), text).await;
        tree.model.push(slug, text.to_owned(), parent_index);
        tree.authors.push(who);
        tree.texts.push(text.to_owned());
        tree.revisions.push(Vec::new());
        tree.edited.push(Value::Null);
        tree.deleted.push(false);
    }
    let a = tree.slug("a");
    let t1 = tree.slug("t1");
    let ai = tree.model.index(&a);
    let t1i = tree.model.index(&t1);

    // `a` is edited first, so it has an edit time and revisions to lose.
    let edited = api.edit_ok(Who::Ada, &d, &a, "a, edited").await;
    tree.texts[ai] = "a, edited".to_owned();
    tree.revisions[ai].push("a".to_owned());
    tree.edited[ai] = edited["editedAt"].clone();
    check_every_read(&api, &tree, "before deleting").await;

    // A moderator deletes `a` (a reply with replies); Grace deletes her own thread `t1`.
    let tomb = api.delete_ok(Who::Moderator, &d, &a).await;
    assert_eq!(
        tomb["author"],
        Who::Ada.author(),
        "moderators see the real author"
    );
    assert_eq!(tomb["editedAt"], tree.edited[ai], "deleting keeps editedAt");
    let tomb = api.delete_ok(Who::Grace, &d, &t1).await;
    assert_eq!(
        tomb["author"],
        deleted_author(),
        "even the author sees the placeholder"
    );
    assert_eq!(tomb["editedAt"], Value::Null);
    tree.deleted[ai] = true;
    tree.deleted[t1i] = true;
    check_every_read(&api, &tree, "after deleting").await;

    // Deleting twice returns the tombstone again (by the author, too).
    for (who, slug) in [
        (Who::Moderator, &a),
        (Who::Ada, &a),
        (Who::Grace, &t1),
        (Who::Moderator, &t1),
    ] {
        let tomb = api.delete_ok(who, &d, slug).await;
        let mut expected = tree.view_of(slug, who);
        expected
            .as_object_mut()
            .expect("object")
            .remove("replyCount");
        assert_eq!(tomb, expected, "{who:?} deletes {slug} again");
    }

    // Deleted comments cannot be edited, by their author or by a moderator.
    for (who, slug) in [
        (Who::Ada, &a),
        (Who::Moderator, &a),
        (Who::Grace, &t1),
        (Who::Moderator, &t1),
    ] {
        let response = api.edit(who, &d, slug, "back from the dead").await;
        assert_code(
            &response,
            "COMMENT_DELETED",
            &format!("{who:?} edits deleted {slug}"),
        );
    }
    check_every_read(&api, &tree, "after deleting twice and editing").await;
}
