//! One test's application: settings, a fresh database, and GraphQL run against the real schema.

use std::net::SocketAddr;
use std::sync::Arc;

use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;
use serde_json::Value;
use threadql::app::App;
use threadql::config::{Config, LayoutArg, RateLimit};
use threadql::domain::Layout;
use threadql::graphql::Api;
use threadql::store::{Store, StoreConfig};

use super::database::{server_uri, unique_db};
use super::tokens::SECRET;
use threadql::auth::JwtKeys;

/// Settings a test may change; everything else is the server's default.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
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
    /// Votes per user (off by default here: tests cast many).
    pub vote_rate_limit: RateLimit,
    /// Moderators' actions per moderator (off by default here).
    pub moderation_rate_limit: RateLimit,
    /// Whether a full embedded discussion moves to the bucketed layout (as the server's default).
    pub promote_embedded: bool,
    /// Receives every command the store sends (see `sharding`).
    pub command_events: Option<EventHandler<CommandEvent>>,
    /// Reports that hold a public comment (0: never).
    pub reports_to_hold: u64,
    /// The banned-word list file, if any.
    pub banned_words: Option<std::path::PathBuf>,
    /// The suspect-word list file, if any.
    pub suspect_words: Option<std::path::PathBuf>,
}

/// The server's defaults, as `threadql` with no flags has them.
pub(crate) fn defaults() -> Config {
    Config::defaults().expect("THREADQL_* variables in the environment are valid")
}

impl Settings {
    /// The server's defaults, with new discussions in `layout`.
    pub(crate) fn new(layout: Layout) -> Self {
        let config = defaults();
        Self {
            layout,
            max_depth: config.max_depth as usize,
            bucket_size: config.bucket_size,
            max_text_chars: config.max_text_chars,
            embedded_max_bytes: config.embedded_max_bytes as usize,
            edit_window_secs: config.edit_window_secs,
            rate_limit: RateLimit::Off,
            vote_rate_limit: RateLimit::Off,
            moderation_rate_limit: RateLimit::Off,
            promote_embedded: config.promote_embedded,
            command_events: None,
            reports_to_hold: config.reports_to_hold,
            banned_words: None,
            suspect_words: None,
        }
    }

    /// The server configuration for a test database with these settings.
    pub(crate) fn config(&self, database: &str) -> Config {
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
        config.vote_rate_limit = self.vote_rate_limit;
        config.moderation_rate_limit = self.moderation_rate_limit;
        config.promote_embedded = self.promote_embedded;
        config.rate_limit_anon = RateLimit::Off;
        config.rate_limit_reads = RateLimit::Off;
        config.reports_to_hold = self.reports_to_hold;
        config.banned_words = self.banned_words.clone();
        config.suspect_words = self.suspect_words.clone();
        config
    }
}

/// One test's application: its own database, built from a `Config` like the server.
pub(crate) struct TestApp {
    /// The API (schema + storage).
    pub api: Api,
    /// The database name.
    pub database: String,
    /// The settings it was built with.
    pub settings: Settings,
    store: Arc<Store>,
}

/// The store settings used for a test database.
pub(crate) fn store_config(database: &str, settings: &Settings) -> StoreConfig {
    let config = settings.config(database);
    threadql::app::store_config(&config, server_uri().to_owned())
}

impl TestApp {
    /// A fresh app on a fresh database with the default settings for `layout`.
    pub(crate) async fn new(label: &str, layout: Layout) -> TestApp {
        Self::with(label, Settings::new(layout)).await
    }

    /// A fresh app on a fresh database.
    pub(crate) async fn with(label: &str, settings: Settings) -> TestApp {
        let database = unique_db(label);
        let app = App::build_observed(&settings.config(&database), settings.command_events.clone())
            .await
            .expect("build the app on the test database");
        Self::from_app(app, database, settings)
    }

    /// A test app around an app built elsewhere (from `settings.config(&database)`, changed).
    pub(crate) fn from_app(app: App, database: String, settings: Settings) -> TestApp {
        Self::from_parts(app.api, app.store, database, settings)
    }

    /// A test app over the API and store of an app that is served elsewhere.
    pub(crate) fn from_parts(
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
        }
    }

    /// The storage (tests look inside it; the API sees only its traits).
    pub(crate) fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// A valid token for a user, signed with the app's secret.
    pub(crate) fn token(&self, sub: &str, name: &str) -> String {
        self.keys().mint(sub, name, &[], 3600)
    }

    /// A valid token for a moderator, signed with the app's secret.
    pub(crate) fn moderator_token(&self, sub: &str, name: &str) -> String {
        self.keys().mint(sub, name, &["moderator".to_owned()], 3600)
    }

    /// A valid token for an admin (who may also moderate), signed with the app's secret.
    pub(crate) fn admin_token(&self, sub: &str, name: &str) -> String {
        self.keys().mint(sub, name, &["admin".to_owned()], 3600)
    }

    /// The keys of the app's configured secret.
    fn keys(&self) -> JwtKeys {
        let config = self.settings.config(&self.database);
        JwtKeys::new(config.jwt_secret.as_deref().unwrap_or(SECRET))
    }

    /// Runs a query with an optional bearer token; returns the whole response as JSON.
    pub(crate) async fn exec_as(
        &self,
        token: Option<&str>,
        query: &str,
        variables: Value,
    ) -> Value {
        let request = async_graphql::Request::new(query)
            .variables(async_graphql::Variables::from_json(variables));
        let header = token.map(|t| format!("Bearer {t}"));
        let response = self.api.execute(request, header.as_deref()).await;
        serde_json::to_value(&response).expect("serialize response")
    }

    /// Runs a query as the default user; returns the whole response.
    pub(crate) async fn exec(&self, query: &str, variables: Value) -> Value {
        let token = self.token("u1", "Ada");
        self.exec_as(Some(&token), query, variables).await
    }

    /// Runs a query and returns `data`, failing the test on any error.
    pub(crate) async fn ok(&self, query: &str, variables: Value) -> Value {
        let response = self.exec(query, variables).await;
        assert!(
            response
                .get("errors")
                .is_none_or(|e| e.as_array().is_some_and(|a| a.is_empty())),
            "unexpected errors: {response:#}"
        );
        response["data"].clone()
    }

    /// Runs a query as `token` (anonymous without) and returns `data`, failing the test on any
    /// error.
    pub(crate) async fn ok_as(&self, token: Option<&str>, query: &str, variables: Value) -> Value {
        let response = self.exec_as(token, query, variables).await;
        assert!(response.get("errors").is_none(), "{response:#}");
        response["data"].clone()
    }

    /// Runs a query that must fail; returns the first error's `extensions.code`.
    pub(crate) async fn err_code(&self, query: &str, variables: Value) -> String {
        let response = self.exec(query, variables).await;
        error_code(&response)
    }
}

/// A server's configuration for `layout` over a fresh database, every other setting the tests'
/// default.
pub(crate) fn layout_config(label: &str, layout: Layout) -> Config {
    Settings::new(layout).config(&unique_db(label))
}

/// The first error's `extensions.code` of a response (fails if there is none).
pub(crate) fn error_code(response: &Value) -> String {
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
pub(crate) fn layout_name(layout: Layout) -> &'static str {
    match layout {
        Layout::PerComment => "PER_COMMENT",
        Layout::Embedded => "EMBEDDED",
        Layout::Bucketed => "BUCKETED",
    }
}
