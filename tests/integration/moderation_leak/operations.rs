//! The leak test's operations: each posts, replies, moderates, reports or deletes on the server
//! and applies the same to the model, or checks that what may not be done is refused.

use super::*;

impl<'r> Case<'r> {
    /// Runs one random operation on the server and the model.
    pub(super) async fn step(&mut self) {
        let roll = self.rng.gen_range(0..100);
        match roll {
            0..=13 => self.post_top().await,
            14..=33 => self.reply().await,
            34..=38 => self.set_mode().await,
            39..=52 => self.approve().await,
            53..=60 => self.reject().await,
            61..=79 => self.report().await,
            80..=85 => self.delete().await,
            86..=99 => self.refused().await,
            _ => self.reply().await,
        }
    }

    pub(super) fn pick<T: Clone>(&mut self, items: &[T]) -> Option<T> {
        if items.is_empty() {
            None
        } else {
            Some(items[self.rng.gen_range(0..items.len())].clone())
        }
    }

    /// An author who may post now (under PRE_FIRST, none whose trust the contract leaves open).
    fn poster(&mut self) -> Option<usize> {
        let candidates: Vec<usize> = (0..AUTHORS)
            .filter(|a| self.mode != Mode::PreFirst || !self.run.unsure.contains(a))
            .collect();
        self.pick(&candidates)
    }

    async fn post_top(&mut self) {
        if let Some(author) = self.poster() {
            self.post(author, None).await;
        }
    }

    async fn reply(&mut self) {
        let Some(author) = self.poster() else { return };
        // Public comments anyone sees, and the author's own held comments.
        let parents: Vec<usize> = (0..self.comments.len())
            .filter(|&i| {
                let c = &self.comments[i];
                c.depth < MAX_DEPTH
                    && !c.deleted
                    && (c.public() || (c.held() && c.author == author))
            })
            .collect();
        match self.pick(&parents) {
            Some(parent) => self.post(author, Some(parent)).await,
            None => self.post(author, None).await,
        }
    }

    pub(super) async fn post(&mut self, author: usize, parent: Option<usize>) {
        let now = self.tick();
        let text = format!("text {} of seed {} by {author}", self.op, self.seed);
        let parent_slug = parent.map(|p| self.comments[p].slug.clone());
        let parent_held = parent.is_some_and(|p| self.comments[p].held());
        let held = parent_held
            || match self.mode {
                Mode::Post => false,
                Mode::Pre => true,
                Mode::PreFirst => !self.run.trusted.contains(&author),
            };
        let response = self
            .run
            .app
            .exec_as(
                Some(&self.run.users[author].token),
                "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug parentSlug status text } }",
                json!({ "d": self.d, "p": parent_slug, "t": text }),
            )
            .await;
        let got = &response["data"]["postComment"];
        let slug = got["slug"]
            .as_str()
            .unwrap_or_else(|| panic!("{}: post: {response:#}", self.at()))
            .to_owned();
        let status = if held {
            Status::Pending
        } else {
            Status::Approved
        };
        assert_eq!(
            *got,
            json!({ "slug": slug, "parentSlug": parent_slug, "status": status.name(), "text": text }),
            "{}: postComment (mode {:?}, parent held {parent_held}) answered {response:#}",
            self.at(),
            self.mode
        );
        let comment = Model {
            slug,
            parent: parent_slug,
            depth: parent.map_or(0, |p| self.comments[p].depth + 1),
            author,
            text,
            status,
            reason: None,
            published: (!held).then_some(now),
            deleted: false,
            reporters: BTreeSet::new(),
            reported_by: BTreeSet::new(),
            queued: now,
        };
        self.note(&format!(
            "author {author} posts {} under {:?} (mode {:?}): {}",
            comment.slug,
            comment.parent,
            self.mode,
            status.name()
        ));
        self.comments.push(comment);
        self.states.push(Vec::new());
        if !held {
            let due = self.state(self.comments.len() - 1);
            self.posted_expected.push(due);
        }
    }

    async fn set_mode(&mut self) {
        let modes: Vec<Mode> = [Mode::Post, Mode::Pre, Mode::PreFirst]
            .into_iter()
            .filter(|m| *m != self.mode)
            .collect();
        let Some(mode) = self.pick(&modes) else {
            return;
        };
        self.set(mode).await;
    }

    pub(super) async fn set(&mut self, mode: Mode) {
        self.tick();
        let data = self
            .moderate(
                "mutation($d: ID!, $m: ModerationMode!) { setModeration(id: $d, mode: $m) { moderation } }",
                json!({ "d": self.d, "m": mode.name() }),
            )
            .await;
        assert_eq!(
            data["setModeration"]["moderation"],
            mode.name(),
            "{}",
            self.at()
        );
        self.mode = mode;
        self.note(&format!("setModeration {mode:?}"));
    }

    /// Runs a mutation as the moderator; its data, failing on errors.
    pub(super) async fn moderate(&self, query: &str, variables: Value) -> Value {
        let response = self
            .run
            .app
            .exec_as(Some(&self.run.moderator), query, variables.clone())
            .await;
        assert!(
            response.get("errors").is_none(),
            "{}: {query} with {variables}: {response:#}",
            self.at()
        );
        response["data"].clone()
    }

    async fn approve(&mut self) {
        let candidates: Vec<usize> = (0..self.comments.len())
            .filter(|&i| {
                let c = &self.comments[i];
                if c.held() {
                    return true;
                }
                !c.deleted
                    && (c.placeholder() || c.status == Status::Approved && !c.reporters.is_empty())
            })
            .collect();
        let held: Vec<usize> = candidates
            .iter()
            .copied()
            .filter(|&i| self.comments[i].held())
            .collect();
        let pick = if !held.is_empty() && self.rng.gen_bool(0.5) {
            self.pick(&held)
        } else {
            self.pick(&candidates)
        };
        let Some(i) = pick else {
            return self.post_top().await;
        };
        let now = self.tick();
        let vars = json!({ "d": self.d, "s": self.comments[i].slug });
        const APPROVE: &str = "mutation($d: ID!, $s: String!) { approveComment(discussionId: $d, slug: $s) { slug status text } }";
        let parent_held = self.comments[i]
            .parent
            .as_ref()
            .is_some_and(|p| self.comments[self.index(p)].held());
        if self.comments[i].held() && parent_held {
            // Its parent first: refused, nothing changes.
            let response = self
                .run
                .app
                .exec_as(Some(&self.run.moderator), APPROVE, vars)
                .await;
            self.expect_code(
                &response,
                "BAD_USER_INPUT",
                "approving a reply under a held parent",
            );
            self.note(&format!(
                "approve {} before its parent: refused",
                self.comments[i].slug
            ));
            return;
        }
        let data = self.moderate(APPROVE, vars).await;
        let c = &self.comments[i];
        let kind = if c.held() {
            "held"
        } else if c.placeholder() {
            "placeholder"
        } else {
            "reported"
        };
        self.note(&format!("approve {kind} {}", c.slug));
        let c = &mut self.comments[i];
        assert_eq!(
            data["approveComment"],
            json!({ "slug": c.slug, "status": "APPROVED", "text": c.text }),
            "{}: approveComment",
            self.run.layout_at(self.seed, self.op)
        );
        let author = c.author;
        if c.held() {
            c.published = Some(now);
            c.status = Status::Approved;
            c.reason = None;
            self.run.trusted.insert(author);
            let due = self.state(i);
            self.posted_expected.push(due);
        } else if c.placeholder() {
            c.status = Status::Approved;
            c.reason = None;
            c.reporters.clear();
            self.run.trusted.insert(author);
            let due = self.state(i);
            self.changed_expected.push(due);
        } else {
            // Reports dismissed: nothing public changes, and no event says so.
            c.reporters.clear();
            self.run.unsure.insert(author);
        }
    }

    async fn reject(&mut self) {
        let candidates: Vec<usize> = (0..self.comments.len())
            .filter(|&i| {
                let c = &self.comments[i];
                (c.held() && c.status == Status::Pending) || (c.public() && c.reporters.is_empty())
            })
            .collect();
        let Some(i) = self.pick(&candidates) else {
            return self.reply().await;
        };
        let now = self.tick();
        let reason = self
            .rng
            .gen_bool(0.6)
            .then(|| format!("reason {} of seed {}", self.op, self.seed));
        let data = self
            .moderate(
                "mutation($d: ID!, $s: String!, $r: String) { rejectComment(discussionId: $d, slug: $s, reason: $r) { slug status moderationReason } }",
                json!({ "d": self.d, "s": self.comments[i].slug, "r": reason }),
            )
            .await;
        let kind = if self.comments[i].held() {
            "held"
        } else {
            "public"
        };
        self.note(&format!(
            "reject {kind} {} ({reason:?})",
            self.comments[i].slug
        ));
        let c = &mut self.comments[i];
        assert_eq!(
            data["rejectComment"],
            json!({ "slug": c.slug, "status": "REJECTED", "moderationReason": reason }),
            "{}: rejectComment",
            self.run.layout_at(self.seed, self.op)
        );
        c.status = Status::Rejected;
        c.reason = reason;
        c.queued = now;
        if c.in_layout() {
            let due = self.state(i);
            self.changed_expected.push(due);
        }
    }

    async fn report(&mut self) {
        // A reporter and a public comment not theirs (a user's report counts once per comment,
        // dismissed or not).
        let reporter = self.rng.gen_range(0..AUTHORS + REPORTERS);
        let candidates: Vec<usize> = (0..self.comments.len())
            .filter(|&i| {
                let c = &self.comments[i];
                c.public() && c.author != reporter
            })
            .collect();
        let Some(i) = self.pick(&candidates) else {
            return self.post_top().await;
        };
        let now = self.tick();
        let reason = ["SPAM", "ABUSE", "OFF_TOPIC", "OTHER"][self.rng.gen_range(0..4)];
        let repeat = self.comments[i].reported_by.contains(&reporter);
        let response = self
            .run
            .app
            .exec_as(
                Some(&self.run.users[reporter].token),
                "mutation($d: ID!, $s: String!, $r: ReportReason!, $n: String) { reportComment(discussionId: $d, slug: $s, reason: $r, note: $n) }",
                json!({ "d": self.d, "s": self.comments[i].slug, "r": reason, "n": "see the seed" }),
            )
            .await;
        assert_eq!(
            response,
            json!({ "data": { "reportComment": !repeat } }),
            "{}: reportComment by user {reporter} on {} (repeat: {repeat})",
            self.at(),
            self.comments[i].slug
        );
        let holds = !repeat && self.comments[i].reporters.len() + 1 == REPORTS_TO_HOLD;
        self.note(&format!(
            "user {reporter} reports {} (repeat: {repeat}, holds: {holds})",
            self.comments[i].slug
        ));
        if repeat {
            return;
        }
        let c = &mut self.comments[i];
        if c.reporters.is_empty() {
            c.queued = now;
        }
        c.reporters.insert(reporter);
        c.reported_by.insert(reporter);
        if c.reporters.len() == REPORTS_TO_HOLD {
            c.status = Status::Pending;
            c.reason = Some(format!("reported by {REPORTS_TO_HOLD} users"));
            c.queued = now;
            let due = self.state(i);
            self.changed_expected.push(due);
        }
    }

    async fn delete(&mut self) {
        // A public comment without reports and without held replies (what happens to those is
        // not this test's subject).
        let candidates: Vec<usize> = (0..self.comments.len())
            .filter(|&i| {
                let c = &self.comments[i];
                c.public()
                    && c.reporters.is_empty()
                    && !self
                        .comments
                        .iter()
                        .any(|r| r.held() && r.parent.as_deref() == Some(c.slug.as_str()))
            })
            .collect();
        let Some(i) = self.pick(&candidates) else {
            return self.post_top().await;
        };
        self.tick();
        let token = if self.rng.gen_bool(0.5) {
            self.run.moderator.clone()
        } else {
            self.run.users[self.comments[i].author].token.clone()
        };
        let response = self
            .run
            .app
            .exec_as(
                Some(&token),
                "mutation($d: ID!, $s: String!) { deleteComment(discussionId: $d, slug: $s) { slug deleted text } }",
                json!({ "d": self.d, "s": self.comments[i].slug }),
            )
            .await;
        assert_eq!(
            response["data"]["deleteComment"],
            json!({ "slug": self.comments[i].slug, "deleted": true, "text": null }),
            "{}: deleteComment: {response:#}",
            self.at()
        );
        self.comments[i].deleted = true;
        self.note(&format!("delete {}", self.comments[i].slug));
        let due = self.state(i);
        self.changed_expected.push(due);
    }

    /// What others may not do with what they cannot see: reply to a held comment, or report a
    /// held comment or a placeholder (NOT_FOUND; a placeholder is visible, as a tombstone is,
    /// so replying to it is allowed); report their own comment (BAD_USER_INPUT) or a deleted
    /// one (COMMENT_DELETED). Nothing changes.
    async fn refused(&mut self) {
        let hidden: Vec<usize> = (0..self.comments.len())
            .filter(|&i| self.comments[i].held() || self.comments[i].placeholder())
            .collect();
        let kind = self.rng.gen_range(0..4);
        let held: Vec<usize> = (0..self.comments.len())
            .filter(|&i| self.comments[i].held())
            .collect();
        let target = match kind {
            0 => self.pick(&held),
            1 => self.pick(&hidden),
            2 => {
                let public: Vec<usize> = (0..self.comments.len())
                    .filter(|&i| self.comments[i].public())
                    .collect();
                self.pick(&public)
            }
            _ => {
                let deleted: Vec<usize> = (0..self.comments.len())
                    .filter(|&i| self.comments[i].deleted)
                    .collect();
                self.pick(&deleted)
            }
        };
        let Some(i) = target else {
            return self.post_top().await;
        };
        self.tick();
        let c = self.comments[i].clone();
        // Someone else than its author (for kind 2: its author).
        let user = if kind == 2 {
            c.author
        } else {
            (c.author + 1 + self.rng.gen_range(0..AUTHORS + REPORTERS - 1)) % (AUTHORS + REPORTERS)
        };
        let token = self.run.users[user].token.clone();
        let (query, vars, code) = match kind {
            0 => (
                "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug } }",
                json!({ "d": self.d, "p": c.slug, "t": "a reply to what I cannot see" }),
                "NOT_FOUND",
            ),
            _ => (
                "mutation($d: ID!, $s: String!) { reportComment(discussionId: $d, slug: $s, reason: SPAM) }",
                json!({ "d": self.d, "s": c.slug }),
                match kind {
                    1 => "NOT_FOUND",
                    2 => "BAD_USER_INPUT",
                    _ => "COMMENT_DELETED",
                },
            ),
        };
        let response = self.run.app.exec_as(Some(&token), query, vars).await;
        self.note(&format!(
            "user {user} tries kind {kind} on {}: {code}",
            c.slug
        ));
        self.expect_code(
            &response,
            code,
            &format!("user {user} on {} (kind {kind})", c.slug),
        );
    }

    fn expect_code(&self, response: &Value, code: &str, what: &str) {
        let got = response["errors"][0]["extensions"]["code"].as_str();
        assert!(
            got == Some(code),
            "{}: {what}: expected {code}, got {}\n  the operations so far:\n    {}",
            self.at(),
            cut(response),
            self.log.join("\n    ")
        );
        // The message does not give away what is hidden.
        let message = response["errors"][0]["message"]
            .as_str()
            .unwrap_or_default();
        for c in &self.comments {
            assert!(
                !message.contains(&c.text),
                "{}: {what}: the error shows a comment's text: {message}",
                self.at()
            );
        }
    }
}
