//! The leak test's checks: every public read, direct link, moderator queue and live event
//! compared with the model's view.

use super::*;

impl<'r> Case<'r> {
    /// Runs a read; its data, failing on errors.
    async fn read(&self, token: Option<&str>, query: &str, variables: Value, what: &str) -> Value {
        let response = self.run.app.exec_as(token, query, variables).await;
        assert!(
            response.get("errors").is_none(),
            "{}: {what} failed: {response:#}",
            self.at()
        );
        normal(&response["data"])
    }

    fn same(&self, what: &str, got: &Value, expected: &Value) {
        assert!(
            got == expected,
            "{}: {what} differs from the model: {}\n  got:      {}\n  expected: {}\n  the operations so far:\n    {}",
            self.at(),
            describe_difference(got, expected),
            cut(got),
            cut(expected),
            self.log.join("\n    ")
        );
    }

    /// Compares every read with the model, and the live events so far.
    pub(super) async fn check(&mut self) {
        let tokens = [None, Some(self.run.viewer.clone())];
        for token in &tokens {
            let who = if token.is_some() {
                "viewer"
            } else {
                "anonymous"
            };
            self.check_public(token.as_deref(), who).await;
        }
        self.check_links().await;
        self.check_moderators().await;
        self.check_events().await;
    }

    async fn check_public(&mut self, token: Option<&str>, who: &str) {
        let chronological = self.chronological();
        let mut newest = chronological.clone();
        newest.reverse();
        let threaded = self.threaded();
        let top: Vec<usize> = self.children(None);
        let mut top_newest = top.clone();
        top_newest.reverse();
        let count = chronological.len();

        // The discussion, by id, by key, and as a federation entity by both keys.
        let mut reps = vec![
            json!({ "__typename": "Discussion", "id": self.d }),
            json!({ "__typename": "Discussion", "key": self.key }),
        ];
        let mut expected_entities = vec![
            json!({ "id": self.d, "commentCount": count }),
            json!({ "id": self.d, "commentCount": count }),
        ];
        for (i, c) in self.comments.iter().enumerate() {
            reps.push(json!({ "__typename": "Comment", "discussionId": self.d, "slug": c.slug }));
            expected_entities.push(if c.in_layout() {
                self.public_view(i)
            } else {
                Value::Null
            });
        }
        let query = format!(
            "query($d: ID!, $k: String!, $r: [_Any!]!) {{ discussion(id: $d) {{ commentCount moderation pendingCount }} discussionsByKeys(keys: [$k]) {{ id commentCount pendingCount }} _entities(representations: $r) {{ ... on Discussion {{ id commentCount }} ... on Comment {{ ...C }} }} }} {}",
            fragment()
        );
        let got = self
            .read(
                token,
                &query,
                json!({ "d": self.d, "k": self.key, "r": reps }),
                "discussion, discussionsByKeys, _entities",
            )
            .await;
        self.same(
            &format!("{who}: discussion counters"),
            &got["discussion"],
            &json!({ "commentCount": count, "moderation": self.mode.name(), "pendingCount": null }),
        );
        self.same(
            &format!("{who}: discussionsByKeys"),
            &got["discussionsByKeys"],
            &json!([{ "id": self.d, "commentCount": count, "pendingCount": null }]),
        );
        self.same(
            &format!("{who}: _entities"),
            &got["_entities"],
            &Value::Array(expected_entities),
        );

        // Every list, walked forward, backward and by offset.
        let lists = [
            (Source::Comments("CHRONOLOGICAL"), chronological.clone()),
            (Source::Comments("NEWEST"), newest),
            (Source::Comments("THREADED"), threaded),
            (Source::Threads("CHRONOLOGICAL"), top.clone()),
            (Source::Threads("NEWEST"), top_newest),
        ];
        for (source, list) in lists {
            self.walk(token, who, &source, &self.views(&list)).await;
        }

        // Every comment's replies, in both orders: the tree, walked down from the threads
        // (a few comments a request, within the server's alias and root-field limits).
        for batch in chronological.chunks(LINKS_A_REQUEST / 2) {
            let decls: Vec<String> = (0..batch.len())
                .map(|j| format!("$s{j}: String!"))
                .collect();
            let roots: Vec<String> = (0..batch.len())
                .map(|j| {
                    format!(
                        "c{j}: comment(discussionId: $d, slug: $s{j}) {{ chronological: replies(first: 100) {{ totalCount nodes {{ ...C }} }} newest: replies(order: NEWEST, first: 100) {{ totalCount nodes {{ ...C }} }} }}"
                    )
                })
                .collect();
            let query = format!(
                "query($d: ID!, {}) {{ {} }} {}",
                decls.join(", "),
                roots.join(" "),
                fragment()
            );
            let mut vars = json!({ "d": self.d });
            for (j, &i) in batch.iter().enumerate() {
                vars[format!("s{j}")] = json!(self.comments[i].slug);
            }
            let got = self.read(token, &query, vars, "replies").await;
            for (j, &i) in batch.iter().enumerate() {
                let slug = &self.comments[i].slug;
                let replies = self.children(Some(slug));
                let mut newest = replies.clone();
                newest.reverse();
                let expected = json!({
                    "chronological": { "totalCount": replies.len(), "nodes": self.views(&replies) },
                    "newest": { "totalCount": newest.len(), "nodes": self.views(&newest) },
                });
                self.same(
                    &format!("{who}: the replies of {slug} (both orders)"),
                    &got[format!("c{j}")],
                    &expected,
                );
            }
        }

        // Some comments' replies and sub-discussions, paged.
        let parents: Vec<usize> = chronological
            .iter()
            .copied()
            .filter(|&i| self.reply_count(i) > 0)
            .collect();
        for _ in 0..2 {
            let Some(i) = self.pick(&parents) else { break };
            let slug = self.comments[i].slug.clone();
            let replies = self.children(Some(&slug));
            let mut newest = replies.clone();
            newest.reverse();
            let mut sub = Vec::new();
            self.threaded_under(Some(&slug), &mut sub);
            let lists = [
                (Source::Replies(slug.clone(), "CHRONOLOGICAL"), replies),
                (Source::Replies(slug.clone(), "NEWEST"), newest),
                (Source::Sub(slug.clone()), sub),
            ];
            for (source, list) in lists {
                self.walk(token, who, &source, &self.views(&list)).await;
            }
        }
    }

    /// Walks a list forward (`first`/`after`), backward (`last`/`before`) and by offset, each
    /// page against the model.
    async fn walk(&self, token: Option<&str>, who: &str, source: &Source, expected: &[Value]) {
        let total = expected.len();
        let vars = |n: usize, cursor: Option<&str>, offset: Option<usize>| json!({ "d": self.d, "s": source.slug(), "n": n, "c": cursor, "o": offset });
        // Forward.
        let query = source.query("first: $n, after: $c");
        let (mut at, mut after, mut pages) = (0, None::<String>, 0);
        loop {
            let what = format!("{who}: {source:?} forward from {at}");
            let data = self
                .read(token, &query, vars(PAGE, after.as_deref(), None), &what)
                .await;
            let conn = source.connection(&data);
            let end = (at + PAGE).min(total);
            self.page(
                &what,
                conn,
                &expected[at..end],
                total,
                end < total,
                after.is_some(),
            );
            after = conn["pageInfo"]["endCursor"].as_str().map(str::to_owned);
            at = end;
            pages += 1;
            if at >= total || pages > total {
                break;
            }
        }
        // Backward.
        let query = source.query("last: $n, before: $c");
        let (mut end, mut before, mut pages) = (total, None::<String>, 0);
        loop {
            let what = format!("{who}: {source:?} backward from {end}");
            let data = self
                .read(token, &query, vars(PAGE, before.as_deref(), None), &what)
                .await;
            let conn = source.connection(&data);
            let start = end.saturating_sub(PAGE);
            self.page(
                &what,
                conn,
                &expected[start..end],
                total,
                before.is_some(),
                start > 0,
            );
            before = conn["pageInfo"]["startCursor"].as_str().map(str::to_owned);
            end = start;
            pages += 1;
            if end == 0 || pages > total {
                break;
            }
        }
        // By offset, one past the end included.
        if source.offsets() {
            let query = source.query("first: $n, offset: $o");
            let mut at = 0;
            loop {
                let what = format!("{who}: {source:?} at offset {at}");
                let data = self
                    .read(token, &query, vars(PAGE, None, Some(at)), &what)
                    .await;
                let start = at.min(total);
                let end = (at + PAGE).min(total);
                self.page(
                    &what,
                    source.connection(&data),
                    &expected[start..end],
                    total,
                    end < total,
                    at > 0,
                );
                if at >= total {
                    break;
                }
                at += PAGE;
            }
        }
    }

    fn page(
        &self,
        what: &str,
        conn: &Value,
        expected: &[Value],
        total: usize,
        next: bool,
        previous: bool,
    ) {
        let nodes: Vec<Value> = conn["edges"]
            .as_array()
            .map(|edges| edges.iter().map(|e| e["node"].clone()).collect())
            .unwrap_or_default();
        let got = json!({
            "totalCount": conn["totalCount"],
            "hasNextPage": conn["pageInfo"]["hasNextPage"],
            "hasPreviousPage": conn["pageInfo"]["hasPreviousPage"],
            "nodes": nodes,
        });
        let expected = json!({
            "totalCount": total,
            "hasNextPage": next,
            "hasPreviousPage": previous,
            "nodes": expected,
        });
        self.same(what, &got, &expected);
    }

    /// Direct links to every comment: the public gets NOT_FOUND for held ones and the
    /// placeholder for the others; authors see their own with status and reason; moderators
    /// see all.
    async fn check_links(&mut self) {
        if self.comments.is_empty() {
            return;
        }
        let n = self.comments.len();
        let mut callers: Vec<(String, Option<String>, Option<usize>, bool)> = vec![
            ("anonymous".into(), None, None, false),
            ("viewer".into(), Some(self.run.viewer.clone()), None, false),
            (
                "moderator".into(),
                Some(self.run.moderator.clone()),
                None,
                true,
            ),
        ];
        for a in 0..AUTHORS {
            callers.push((
                format!("author {a}"),
                Some(self.run.users[a].token.clone()),
                Some(a),
                false,
            ));
        }
        let all: Vec<usize> = (0..n).collect();
        for batch in all.chunks(LINKS_A_REQUEST) {
            let decls: Vec<String> = (0..batch.len())
                .map(|j| format!("$s{j}: String!"))
                .collect();
            let roots: Vec<String> = (0..batch.len())
                .map(|j| format!("q{j}: comment(discussionId: $d, slug: $s{j}) {{ ...C }}"))
                .collect();
            let query = format!(
                "query($d: ID!, {}) {{ {} }} {}",
                decls.join(", "),
                roots.join(" "),
                fragment()
            );
            let mut vars = json!({ "d": self.d });
            for (j, &i) in batch.iter().enumerate() {
                vars[format!("s{j}")] = json!(self.comments[i].slug);
            }
            for (who, token, author, moderator) in &callers {
                let response = self
                    .run
                    .app
                    .exec_as(token.as_deref(), &query, vars.clone())
                    .await;
                for (j, &i) in batch.iter().enumerate() {
                    let c = &self.comments[i];
                    let expected = if *moderator || *author == Some(c.author) {
                        self.own_view(i, *moderator)
                    } else if c.held() {
                        json!({ "error": "NOT_FOUND" })
                    } else {
                        self.public_view(i)
                    };
                    self.same(
                        &format!(
                            "{who}: the direct link comment(discussionId, slug: {})",
                            c.slug
                        ),
                        &aliased_outcome(&response, &format!("q{j}")),
                        &expected,
                    );
                }
            }
        }
        // The discussion's own direct link, for the public: held ones one by one (the field is
        // not nullable, so an error takes the discussion with it).
        for i in 0..n {
            let c = &self.comments[i];
            let query = format!(
                "query($d: ID!, $s: String!) {{ discussion(id: $d) {{ comment(slug: $s) {{ ...C }} }} }} {}",
                fragment()
            );
            let response = self
                .run
                .app
                .exec_as(None, &query, json!({ "d": self.d, "s": c.slug }))
                .await;
            let got = match response["errors"][0]["extensions"]["code"].as_str() {
                Some(code) => json!({ "error": code }),
                None => normal(&response["data"]["discussion"]["comment"]),
            };
            let expected = if c.held() {
                json!({ "error": "NOT_FOUND" })
            } else {
                self.public_view(i)
            };
            self.same(
                &format!("anonymous: discussion.comment(slug: {})", c.slug),
                &got,
                &expected,
            );
        }
    }

    /// The moderators' queues and pending count.
    async fn check_moderators(&mut self) {
        let pending = self.queue(Queue::Pending, Some(&self.d)).len();
        let data = self
            .read(
                Some(&self.run.moderator.clone()),
                "query($d: ID!, $k: String!) { discussion(id: $d) { pendingCount } discussionsByKeys(keys: [$k]) { pendingCount } }",
                json!({ "d": self.d, "k": self.key }),
                "pendingCount",
            )
            .await;
        self.same(
            "moderator: pendingCount",
            &data,
            &json!({ "discussion": { "pendingCount": pending }, "discussionsByKeys": [{ "pendingCount": pending }] }),
        );
        for queue in Queue::ALL {
            for scope in [Some(self.d.clone()), None] {
                let expected = self.queue(queue, scope.as_deref());
                let data = self
                    .read(
                        Some(&self.run.moderator.clone()),
                        "query($q: ModerationQueue!, $d: ID) { moderationQueue(queue: $q, discussionId: $d, first: 100) { totalCount nodes { slug discussionId } } }",
                        json!({ "q": queue.name(), "d": scope }),
                        "moderationQueue",
                    )
                    .await;
                let got: Vec<Value> = data["moderationQueue"]["nodes"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                // Across all discussions the slugs are told apart by discussion.
                let got_slugs: Vec<String> = got
                    .iter()
                    .map(|n| n["slug"].as_str().unwrap_or_default().to_owned())
                    .collect();
                self.same(
                    &format!(
                        "moderator: moderationQueue({}) in {}",
                        queue.name(),
                        scope.as_deref().unwrap_or("every discussion")
                    ),
                    &json!({ "totalCount": data["moderationQueue"]["totalCount"], "slugs": got_slugs }),
                    &json!({ "totalCount": expected.len(), "slugs": expected }),
                );
            }
        }
    }

    /// The live events so far: exactly the model's, in order, on each subscription.
    async fn check_events(&mut self) {
        while self.posted_got.len() < self.posted_expected.len()
            || self.changed_got.len() < self.changed_expected.len()
        {
            let Ok((id, payload)) = tokio::time::timeout(EVENT_WAIT, self.ws.next()).await else {
                panic!(
                    "{}: live events missing\n  posted got:      {:?}\n  posted expected: {:?}\n  changed got:      {:?}\n  changed expected: {:?}",
                    self.at(),
                    self.posted_got,
                    self.posted_expected,
                    self.changed_got,
                    self.changed_expected
                );
            };
            match id.as_str() {
                "posted" => self
                    .posted_got
                    .push(normal(&payload["data"]["commentPosted"]).or(&payload)),
                "changed" => self
                    .changed_got
                    .push(normal(&payload["data"]["commentChanged"]).or(&payload)),
                other => panic!("{}: an event of operation {other}: {payload}", self.at()),
            }
        }
        for (what, got, due) in [
            ("commentPosted", &self.posted_got, &self.posted_expected),
            ("commentChanged", &self.changed_got, &self.changed_expected),
        ] {
            let slugs = |events: &[Value]| -> Vec<Value> {
                events.iter().map(|e| e["slug"].clone()).collect()
            };
            let due_slugs: Vec<Value> = due
                .iter()
                .map(|&(i, _)| json!(self.comments[i].slug))
                .collect();
            self.same(
                &format!("anonymous: the comments of the {what} events"),
                &Value::Array(slugs(got)),
                &Value::Array(due_slugs),
            );
            for (n, (event, &(i, since))) in got.iter().zip(due.iter()).enumerate() {
                let allowed = &self.states[i][since..];
                if !allowed.contains(event) {
                    self.same(
                        &format!(
                            "anonymous: {what} event {n} (the comment as it was then, or any later state: {})",
                            Value::Array(allowed.to_vec())
                        ),
                        event,
                        &allowed[0],
                    );
                }
            }
        }
    }

    /// The last check, after a public post and its delete: nothing arrived that the model did
    /// not expect, since those two come last.
    pub(super) async fn finish(mut self) {
        self.op += 1;
        if self.mode != Mode::Post {
            self.tick();
            self.moderate(
                "mutation($d: ID!) { setModeration(id: $d, mode: POST) { moderation } }",
                json!({ "d": self.d }),
            )
            .await;
            self.mode = Mode::Post;
        }
        self.post(0, None).await;
        let last = self.comments.len() - 1;
        self.tick();
        let token = self.run.users[0].token.clone();
        let response = self
            .run
            .app
            .exec_as(
                Some(&token),
                "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { deleted } }",
                json!({ "d": self.d, "s": self.comments[last].slug }),
            )
            .await;
        assert_eq!(
            response["data"]["deleteComment"]["deleted"],
            true,
            "{}: {response:#}",
            self.at()
        );
        self.comments[last].deleted = true;
        let due = self.state(last);
        self.changed_expected.push(due);
        self.check().await;
        let Case {
            run,
            d,
            comments,
            ws,
            ..
        } = self;
        drop(ws);
        await_subscribers(&run.server, 0).await;
        run.finished.push((d, comments));
    }
}
