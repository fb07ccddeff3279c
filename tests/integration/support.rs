//! Test support: one dev database server per test run, a fresh database per test, and helpers to
//! run GraphQL against the real schema.

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::stream::{BoxStream, StreamExt};
use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;
use serde_json::{json, Value};
use threadql::app::App;
use threadql::auth::JwtKeys;
use threadql::config::{Config, LayoutArg, RateLimit};
use threadql::domain::{Author, CommentText, Discussion, DiscussionId, Layout, NewComment, Slug};
use threadql::graphql::Api;
use threadql::store::embedded_db::EmbeddedDb;
use threadql::store::{ChangeKind, Storage, Store, StoreConfig, Watched};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The JWT secret tests sign with.
pub const SECRET: &str = "integration-test-secret";

/// The connection string of the test run's database server: `THREADQL_MONGODB_URI` if set,
/// otherwise one `secantusd-rs` started for the whole run. A watchdog stops it when the test
/// process exits, and removes its files.
pub fn server_uri() -> &'static str {
    static URI: OnceLock<String> = OnceLock::new();
    URI.get_or_init(|| {
        if let Ok(uri) = std::env::var("THREADQL_MONGODB_URI") {
            return uri;
        }
        let binary = EmbeddedDb::locate(None).expect("secantusd-rs is needed: run ./scripts/test.sh");
        let dir = std::env::temp_dir().join(format!("threadql-test-db-{}", std::process::id()));
        let script = format!(
            "{bin} --host 127.0.0.1 --port 0 --log-level WARNING --log-file-max 32MB --cache-size 1G --storage-path '{dir}' & child=$!; \
             while kill -0 {parent} 2>/dev/null; do sleep 0.5; done; kill -TERM $child; wait $child; rm -rf '{dir}'",
            bin = binary.display(),
            dir = dir.display(),
            parent = std::process::id(),
        );
        let mut child = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the test database");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let port = loop {
            let line = lines
                .next()
                .expect("the test database exited before it listened")
                .expect("read the test database output");
            if let Some(port) = line
                .split("listening on ")
                .nth(1)
                .and_then(|rest| rest.trim().rsplit(':').next())
                .and_then(|p| p.parse::<u16>().ok())
            {
                break port;
            }
        };
        std::thread::spawn(move || {
            for _ in lines.by_ref() {}
            let _ = child.wait();
        });
        format!("mongodb://127.0.0.1:{port}/?directConnection=true")
    })
}

/// A unique database name for one test.
pub fn unique_db(label: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let label: String = label
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(30)
        .collect();
    format!("t{}_{}_{}", std::process::id(), n, label)
}

/// Settings a test may change; everything else is the server's default.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Layout of new discussions.
    pub layout: Layout,
    /// Depth cap.
    pub max_depth: usize,
    /// Bucket size.
    pub bucket_size: u32,
    /// Text limit.
    pub max_text_chars: usize,
    /// Size cap of an embedded discussion, in bytes.
    pub embedded_max_bytes: usize,
    /// How long an author may edit a comment after posting it, in seconds (0: never).
    pub edit_window_secs: u64,
    /// Mutations per author (off by default here: tests load data).
    pub rate_limit: RateLimit,
    /// Whether a full embedded discussion moves to the bucketed layout (as the server's default).
    pub promote_embedded: bool,
    /// Receives every command the store sends (see `sharding`).
    pub command_events: Option<EventHandler<CommandEvent>>,
}

/// The server's defaults, as `threadql` with no flags has them.
pub fn defaults() -> Config {
    Config::defaults().expect("THREADQL_* variables in the environment are valid")
}

impl Settings {
    /// The server's defaults, with new discussions in `layout`.
    pub fn new(layout: Layout) -> Self {
        let config = defaults();
        Self {
            layout,
            max_depth: config.max_depth as usize,
            bucket_size: config.bucket_size,
            max_text_chars: config.max_text_chars,
            embedded_max_bytes: config.embedded_max_bytes as usize,
            edit_window_secs: config.edit_window_secs,
            rate_limit: RateLimit::Off,
            promote_embedded: config.promote_embedded,
            command_events: None,
        }
    }

    /// The server configuration for a test database with these settings.
    pub fn config(&self, database: &str) -> Config {
        let mut config = defaults();
        config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
        config.mongodb_uri = Some(server_uri().to_owned());
        config.database = database.to_owned();
        config.jwt_secret = Some(SECRET.to_owned());
        config.default_layout = match self.layout {
            Layout::PerComment => LayoutArg::PerComment,
            Layout::Embedded => LayoutArg::Embedded,
            Layout::Bucketed => LayoutArg::Bucketed,
        };
        config.max_depth = self.max_depth as u32;
        config.bucket_size = self.bucket_size;
        config.max_text_chars = self.max_text_chars;
        config.embedded_max_bytes = self.embedded_max_bytes as u64;
        config.edit_window_secs = self.edit_window_secs;
        config.rate_limit = self.rate_limit;
        config.promote_embedded = self.promote_embedded;
        config.rate_limit_anon = RateLimit::Off;
        config
    }
}

/// One test's application: its own database, built from a `Config` like the server.
pub struct TestApp {
    /// The API (schema + storage).
    pub api: Api,
    /// The database name.
    pub database: String,
    /// The settings it was built with.
    pub settings: Settings,
    store: Arc<Store>,
    keys: JwtKeys,
}

/// The store settings used for a test database.
pub fn store_config(database: &str, settings: &Settings) -> StoreConfig {
    let config = settings.config(database);
    threadql::app::store_config(&config, server_uri().to_owned())
}

impl TestApp {
    /// A fresh app on a fresh database with the default settings for `layout`.
    pub async fn new(label: &str, layout: Layout) -> TestApp {
        Self::with(label, Settings::new(layout)).await
    }

    /// A fresh app on a fresh database.
    pub async fn with(label: &str, settings: Settings) -> TestApp {
        let database = unique_db(label);
        let app = App::build_observed(&settings.config(&database), settings.command_events.clone())
            .await
            .expect("build the app on the test database");
        Self::from_app(app, database, settings)
    }

    /// A test app around an app built elsewhere (from `settings.config(&database)`, changed).
    pub fn from_app(app: App, database: String, settings: Settings) -> TestApp {
        Self::from_parts(app.api, app.store, database, settings)
    }

    /// A test app over the API and store of an app that is served elsewhere.
    pub fn from_parts(
        api: Api,
        store: Arc<Store>,
        database: String,
        settings: Settings,
    ) -> TestApp {
        TestApp {
            api,
            store,
            database,
            settings,
            keys: JwtKeys::new(SECRET),
        }
    }

    /// The storage (tests look inside it; the API sees only its traits).
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// A valid token for a user.
    pub fn token(&self, sub: &str, name: &str) -> String {
        self.keys.mint(sub, name, &[], 3600)
    }

    /// A valid token for a moderator.
    pub fn moderator_token(&self, sub: &str, name: &str) -> String {
        self.keys.mint(sub, name, &["moderator".to_owned()], 3600)
    }

    /// Runs a query with an optional bearer token; returns the whole response as JSON.
    pub async fn exec_as(&self, token: Option<&str>, query: &str, variables: Value) -> Value {
        let request = async_graphql::Request::new(query)
            .variables(async_graphql::Variables::from_json(variables));
        let header = token.map(|t| format!("Bearer {t}"));
        let response = self.api.execute(request, header.as_deref()).await;
        serde_json::to_value(&response).expect("serialize response")
    }

    /// Runs a query as the default user; returns the whole response.
    pub async fn exec(&self, query: &str, variables: Value) -> Value {
        let token = self.token("u1", "Ada");
        self.exec_as(Some(&token), query, variables).await
    }

    /// Runs a query and returns `data`, failing the test on any error.
    pub async fn ok(&self, query: &str, variables: Value) -> Value {
        let response = self.exec(query, variables).await;
        assert!(
            response
                .get("errors")
                .is_none_or(|e| e.as_array().is_some_and(|a| a.is_empty())),
            "unexpected errors: {response:#}"
        );
        response["data"].clone()
    }

    /// Runs a query that must fail; returns the first error's `extensions.code`.
    pub async fn err_code(&self, query: &str, variables: Value) -> String {
        let response = self.exec(query, variables).await;
        error_code(&response)
    }

    /// Creates a discussion in the app's layout and returns its id.
    pub async fn discussion(&self, title: &str) -> String {
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
    pub async fn post(&self, discussion: &str, parent: Option<&str>, text: &str) -> String {
        let data = self
            .ok(
                "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug } }",
                json!({ "d": discussion, "p": parent, "t": text }),
            )
            .await;
        data["postComment"]["slug"]
            .as_str()
            .expect("slug")
            .to_owned()
    }

    /// Database commands sent so far by this app.
    pub fn commands(&self) -> u64 {
        self.store().commands().total()
    }
}

/// The first error's `extensions.code` of a response (fails if there is none).
pub fn error_code(response: &Value) -> String {
    let errors = response["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("expected an error: {response:#}"));
    let first = errors.first().expect("at least one error");
    first["extensions"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("error without a code: {first:#}"))
        .to_owned()
}

/// The GraphQL enum name of a layout.
pub fn layout_name(layout: Layout) -> &'static str {
    match layout {
        Layout::PerComment => "PER_COMMENT",
        Layout::Embedded => "EMBEDDED",
        Layout::Bucketed => "BUCKETED",
    }
}

/// A server on a loopback socket until `shutdown`, with handles on its API and store.
pub struct Running {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its GraphQL API.
    pub api: Api,
    /// Its storage.
    pub store: Arc<Store>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<anyhow::Result<()>>,
}

impl Running {
    /// Builds the app from `config` and serves it.
    pub async fn start(config: Config) -> Running {
        let app = App::build(&config).await.expect("build the app");
        let (addr, api, store) = (app.addr, app.api.clone(), app.store.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(app.serve(async move {
            let _ = stopped.await;
        }));
        Running {
            addr,
            api,
            store,
            stop,
            task,
        }
    }

    /// Runs a mutation over HTTP with a token and returns its data, failing on errors.
    pub async fn mutate(&self, token: &str, query: &str, variables: Value) -> Value {
        let client = reqwest::Client::new();
        let (status, body) = post_graphql(&client, self, Some(token), query, variables).await;
        assert!(
            status == 200 && body.get("errors").is_none(),
            "{status} {body}"
        );
        body["data"].clone()
    }

    /// Creates a discussion in `layout` over HTTP; returns its id.
    pub async fn discussion(&self, token: &str, layout: Layout) -> String {
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
    pub async fn post(&self, token: &str, d: &str, parent: Option<&str>, text: &str) -> String {
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

    /// The URL of a path on it.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Starts a graceful shutdown without waiting for it.
    pub fn begin_shutdown(&mut self) {
        let (placeholder, _) = oneshot::channel();
        let _ = std::mem::replace(&mut self.stop, placeholder).send(());
    }

    /// Stops it gracefully and waits until it has.
    pub async fn shutdown(mut self) {
        self.begin_shutdown();
        self.task
            .await
            .expect("server task")
            .expect("server ran cleanly");
    }
}

/// Posts a GraphQL request to a running server, with an optional bearer token; returns the HTTP
/// status and the JSON body.
pub async fn post_graphql(
    client: &reqwest::Client,
    server: &Running,
    token: Option<&str>,
    query: &str,
    variables: Value,
) -> (u16, Value) {
    let mut request = client
        .post(server.url("/graphql"))
        .json(&json!({ "query": query, "variables": variables }));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("send");
    let status = response.status().as_u16();
    (status, response.json().await.expect("json body"))
}

/// The discussion `d` as `store` reads it (a second store stands for another server).
pub async fn load_discussion(store: &Store, d: &str) -> Discussion {
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
pub async fn post_in(
    store: &Store,
    layout: Layout,
    discussion: &Discussion,
    parent: Option<&Slug>,
    text: &str,
) -> Slug {
    assert_eq!(discussion.layout, layout, "the discussion's layout");
    store
        .post(
            discussion,
            NewComment {
                parent: parent.cloned(),
                author: Author {
                    id: "u1".into(),
                    name: "Ada".into(),
                },
                text: CommentText::parse(text, 100).expect("text"),
            },
        )
        .await
        .expect("post")
        .comment
        .slug
}

/// The store's change feed, once it is open.
pub async fn open_feed(store: &Store) -> BoxStream<'static, Watched> {
    let mut feed = store.changes(Duration::from_millis(100));
    loop {
        match tokio::time::timeout(Duration::from_secs(30), feed.next()).await {
            Ok(Some(Watched::Open)) => return feed,
            Ok(Some(_)) => {}
            other => panic!("the change feed did not open: {other:?}"),
        }
    }
}

/// The slugs of the first `total` posts the feed reports in discussion `d` (each once).
pub async fn posts_reported(
    feed: &mut BoxStream<'static, Watched>,
    d: &str,
    total: usize,
) -> HashSet<String> {
    let mut reported: HashSet<String> = HashSet::new();
    while reported.len() < total {
        match tokio::time::timeout(Duration::from_secs(30), feed.next()).await {
            Ok(Some(Watched::Change(change))) => {
                assert_eq!(change.kind, ChangeKind::Posted);
                if change.discussion.as_str() == d {
                    assert!(reported.insert(change.slug.to_string()), "reported twice");
                }
            }
            Ok(Some(Watched::Open)) => {}
            other => panic!(
                "the change feed stopped after {} of {total} posts: {other:?}",
                reported.len()
            ),
        }
    }
    reported
}

/// `find` commands the app has sent so far.
pub fn finds(app: &TestApp) -> u64 {
    app.store()
        .commands()
        .snapshot()
        .get("find")
        .copied()
        .unwrap_or(0)
}

/// The commands sent between two snapshots of the command counter, by name (those sent at all).
pub fn diff(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect()
}
