//! Wiring: builds the store, the API and the router from a config, and serves them.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use tokio::net::TcpListener;

use crate::auth::{JwtKeys, TokenRules, DEV_SECRET};
use crate::config::{own_origins, Config, CorsOrigins, Origin};
use crate::domain::paging::DEFAULT_PAGE_SIZE;
use crate::domain::{EditRules, GuestIds, ServerKey, WordList, WordLists};
use crate::graphql::limits::DocumentLimits;
use crate::graphql::live::LiveConfig;
use crate::graphql::shared::SubscriptionCaps;
use crate::graphql::{Api, Limits};
use crate::http::{ConnectionTimeouts, Connections, HttpLimits};
use crate::notify::fanout::FanOut;
use crate::service::closing::Stage;
use crate::service::{EventSink, ModerationLog, PageOrigins, Rules, Services};
use crate::webhooks::dispatch::{DispatchRules, Dispatcher};
use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;

use crate::store::embedded_db::EmbeddedDb;
use crate::store::{DynStorage, MoveTiming, Storage, Store, StoreConfig};

/// Connections the metrics listener takes at once (scrapers and an operator's curl).
const METRICS_CONNECTIONS: usize = 16;

/// A built application: its router, the address it is bound to, and what it owns.
pub struct App {
    /// The HTTP router.
    pub router: Router,
    /// The bound address (useful with port 0).
    pub addr: SocketAddr,
    /// The GraphQL API (tests execute against it directly).
    pub api: Api,
    /// The storage behind the API (tests and tools inspect it; the API sees only its traits).
    pub store: Arc<Store>,
    /// The address `/metrics` has to itself, when `THREADQL_METRICS_LISTEN` is set.
    pub metrics_addr: Option<SocketAddr>,
    listener: TcpListener,
    metrics: Option<(TcpListener, Router)>,
    connections: Connections,
    timeouts: ConnectionTimeouts,
    grace: Duration,
    /// Whether serving opens the change feed at once (the read cache is on: it serves only
    /// while the feed is open); otherwise the first subscription opens it.
    follow_changes: bool,
    embedded: Option<EmbeddedDb>,
    /// Delivers webhooks while serving.
    dispatcher: Arc<Dispatcher>,
    fan_out: Arc<FanOut>,
    mail: Option<Arc<crate::notify::mail::MailWorker>>,
}

/// Descriptors kept out of the default connection cap: the database pool's, plus the process's
/// own (its listeners, the embedded database's pipes, logs, the change stream).
fn reserved_descriptors(config: &Config) -> u64 {
    u64::from(config.db_pool_size) + 64
}

/// The connection cap: `THREADQL_MAX_CONNECTIONS`, else what the open-file limit allows.
fn connection_cap(config: &Config) -> usize {
    let reserve = reserved_descriptors(config);
    let allowed = crate::http::default_max_connections(reserve);
    match (config.max_connections, allowed) {
        (Some(max), allowed) => {
            let max = max as usize;
            if allowed.is_some_and(|allowed| max > allowed) {
                tracing::warn!(
                    max_connections = max,
                    allowed = ?allowed,
                    "THREADQL_MAX_CONNECTIONS is above what the open-file limit allows (less {reserve} descriptors kept for the database pool and the process): raise the limit (ulimit -n) or accept will fail under load"
                );
            }
            max
        }
        (None, Some(allowed)) => allowed,
        (None, None) => {
            tracing::warn!("cannot read the open-file limit: connections are capped at 1000; set THREADQL_MAX_CONNECTIONS");
            1000
        }
    }
}

/// The JWT keys from config: exactly one of the HS256 secret (`THREADQL_JWT_SECRET`), a PEM public
/// key (`THREADQL_JWT_PUBLIC_KEY`, RS256 or ES256) or a JWKS file (`THREADQL_JWT_JWKS`), checked
/// with the configured issuer, audience and leeway. With none of them, the development secret
/// (the server warns loudly when it runs with it); with several, an error.
pub fn jwt_keys(config: &Config) -> anyhow::Result<JwtKeys> {
    let rules = TokenRules {
        issuer: config.jwt_issuer.clone(),
        audience: config.jwt_audience.clone(),
        leeway_secs: config.jwt_leeway_secs,
    };
    let keys = match (&config.jwt_secret, &config.jwt_public_key, &config.jwt_jwks) {
        (Some(secret), None, None) => {
            JwtKeys::hs256(secret, rules).context("THREADQL_JWT_SECRET")?
        }
        (None, Some(path), None) => {
            let pem = std::fs::read(path).with_context(|| {
                format!("cannot read THREADQL_JWT_PUBLIC_KEY {}", path.display())
            })?;
            JwtKeys::from_public_key_pem(&pem, rules)
                .with_context(|| format!("THREADQL_JWT_PUBLIC_KEY {}", path.display()))?
        }
        (None, None, Some(path)) => {
            let json = std::fs::read(path)
                .with_context(|| format!("cannot read THREADQL_JWT_JWKS {}", path.display()))?;
            JwtKeys::from_jwks(&json, rules)
                .with_context(|| format!("THREADQL_JWT_JWKS {}", path.display()))?
        }
        (None, None, None) => JwtKeys::hs256(DEV_SECRET, rules)?,
        (secret, public_key, jwks) => {
            let set: Vec<&str> = [
                (secret.is_some(), "THREADQL_JWT_SECRET"),
                (public_key.is_some(), "THREADQL_JWT_PUBLIC_KEY"),
                (jwks.is_some(), "THREADQL_JWT_JWKS"),
            ]
            .into_iter()
            .filter_map(|(is_set, name)| is_set.then_some(name))
            .collect();
            anyhow::bail!(
                "{} are set together: configure exactly one way to verify tokens (THREADQL_JWT_SECRET for HS256, THREADQL_JWT_PUBLIC_KEY for an RS256/ES256 public key, or THREADQL_JWT_JWKS)",
                set.join(" and ")
            );
        }
    };
    Ok(keys)
}

/// The word lists from config: `THREADQL_BANNED_WORDS` and `THREADQL_SUSPECT_WORDS`, each file
/// read and checked once (an unset variable is an empty list). A file that cannot be read, a
/// line that is not UTF-8 or a line with no word stops the start with the variable, the file
/// and the line.
pub fn word_lists(config: &Config) -> anyhow::Result<WordLists> {
    let read = |variable: &str, path: Option<&std::path::Path>| -> anyhow::Result<WordList> {
        let Some(path) = path else {
            return Ok(WordList::default());
        };
        let file = std::fs::read(path)
            .with_context(|| format!("cannot read {variable} {}", path.display()))?;
        WordList::parse(&file).with_context(|| format!("{variable} {}", path.display()))
    };
    let banned = read("THREADQL_BANNED_WORDS", config.banned_words.as_deref())?;
    let suspect = read("THREADQL_SUSPECT_WORDS", config.suspect_words.as_deref())?;
    Ok(WordLists::new(banned, suspect))
}

/// The server's start-up line about its word lists, when it has any.
fn log_word_lists(config: &Config, words: &WordLists) {
    if config.banned_words.is_some() || config.suspect_words.is_some() {
        tracing::info!(
            banned = words.banned_len(),
            suspect = words.suspect_len(),
            "word lists loaded"
        );
    }
}

/// The server's start-up lines about how it verifies bearer tokens.
fn log_jwt_keys(config: &Config, keys: &JwtKeys) {
    if config.jwt_secret.is_none() && config.jwt_public_key.is_none() && config.jwt_jwks.is_none() {
        tracing::warn!("none of THREADQL_JWT_SECRET, THREADQL_JWT_PUBLIC_KEY, THREADQL_JWT_JWKS is set: using the built-in DEVELOPMENT secret; anyone can mint tokens. Never run like this in production.");
    }
    if !keys.can_mint() && config.jwt_audience.is_none() {
        tracing::warn!("THREADQL_JWT_AUDIENCE is not set: tokens the identity provider issued for any audience are accepted");
    }
    tracing::info!(keys = %keys.describe(), "bearer tokens are verified");
}

/// The server key configured (`THREADQL_ID_KEY`), checked before anything connects: `None`
/// when it is not set. Its value is never part of an error or a log line.
pub fn configured_key(config: &Config) -> anyhow::Result<Option<ServerKey>> {
    config
        .id_key
        .as_deref()
        .map(|text| {
            ServerKey::parse(text).map_err(|e| {
                anyhow::anyhow!(
                    "THREADQL_ID_KEY is refused: {e} (its value is not shown). Give at least {} random bytes as hex or base64, e.g. the output of `openssl rand -hex 32`, or leave it unset to use the key kept in the database",
                    ServerKey::MIN_BYTES
                )
            })
        })
        .transpose()
}

/// The server key: the configured one, else the one kept in the database (a key generated from
/// the operating system's random source is stored by the first start; every later start, and
/// every racing one, reads the one stored first).
pub async fn server_key(
    configured: Option<ServerKey>,
    storage: &dyn Storage,
) -> anyhow::Result<ServerKey> {
    match configured {
        Some(key) => Ok(key),
        None => storage
            .server()
            .server_key(&ServerKey::generate())
            .await
            .context("cannot read or store the server key"),
    }
}

/// The workflows over `storage` with the rules of `config`, screening texts against `words`
/// and keying guest ids with `key`; their events go to the moderation log (and this process's
/// feed).
pub fn services(
    config: &Config,
    storage: DynStorage,
    words: Arc<WordLists>,
    key: &ServerKey,
) -> Services {
    let rules = Rules {
        max_text_chars: config.max_text_chars,
        max_markdown_depth: config.max_markdown_depth as usize,
        default_layout: config.default_layout.into(),
        default_moderation: config.moderation.into(),
        reports_to_hold: config.reports_to_hold,
        edit_rules: EditRules {
            window_secs: config.edit_window_secs,
        },
        change_rate: config.rate_limit,
        vote_rate: config.vote_rate_limit,
        moderation_rate: config.moderation_rate_limit,
        guest_ids: GuestIds::new(key),
        insecure_webhooks: config.webhooks.allow_insecure,
        auto_close_after: config.auto_close_after.0,
    };
    let log: Arc<dyn EventSink> = Arc::new(ModerationLog(storage.clone()));
    Services::new(storage, rules, words, vec![log])
        .with_page_origins(page_origins(config))
        .with_mail(crate::service::MailRules {
            enabled: config.notify.smtp_url.is_some(),
            default: config.notify.email_default,
        })
        .with_unsubscribe_tokens(crate::mail::UnsubscribeTokens::new(key))
        .with_guests((&config.guests).into(), key)
}

/// The pages users who are not moderators may create discussions for: those of
/// `THREADQL_PUBLIC_URL` and `THREADQL_PAGE_ORIGINS` (else `THREADQL_CORS_ORIGINS`); any page
/// when none of them is set, or when the list is `*`.
pub fn page_origins(config: &Config) -> PageOrigins {
    let listed = config
        .page_origins
        .as_ref()
        .or(config.cors_origins.as_ref());
    let mut origins: Vec<Origin> = match listed {
        Some(CorsOrigins::Any) => return PageOrigins::Any,
        Some(CorsOrigins::List(origins)) => origins.clone(),
        None if config.public_url.is_none() => return PageOrigins::Any,
        None => Vec::new(),
    };
    if let Some(public) = &config.public_url {
        if !origins.contains(public) {
            origins.insert(0, public.clone());
        }
    }
    PageOrigins::Only(origins)
}

/// The server's start-up line about the pages discussions may be created for.
/// The webhook dispatcher of this process, with the settings of `config`.
fn dispatcher(config: &Config, services: &Services) -> anyhow::Result<Dispatcher> {
    let settings = &config.webhooks;
    if settings.allow_insecure {
        tracing::warn!("THREADQL_WEBHOOK_ALLOW_INSECURE is set: webhook endpoints may use http and private, loopback and link-local addresses. For development and tests only.");
    }
    let rules = DispatchRules {
        timeout: Duration::from_secs(settings.timeout_secs),
        schedule: settings.retry_schedule.clone(),
        disable_after: Duration::from_secs(settings.disable_after_secs),
        concurrency: usize::try_from(settings.concurrency).unwrap_or(8),
        lease: Duration::from_secs(settings.lease_secs),
        insecure: settings.allow_insecure,
    };
    Dispatcher::new(
        services.store().clone(),
        rules,
        services.webhook_metrics().clone(),
    )
    .map_err(|e| anyhow::anyhow!("cannot build the webhook client: {e}"))
}

/// A second store over the same database for background work (the notifications' fan-out):
/// connections of its own, no read cache, no command events, so its reads never land among
/// the requests' (in their counts, their traces or the cache's admissions).
async fn background_store(
    config: &Config,
    embedded: Option<&EmbeddedDb>,
) -> anyhow::Result<crate::store::DynStorage> {
    let uri = match (&config.mongodb_uri, embedded) {
        (Some(uri), _) => uri.clone(),
        (None, Some(db)) => db.uri(),
        (None, None) => anyhow::bail!("no database to connect to"),
    };
    let store = Store::connect(&StoreConfig {
        pool_size: 4,
        cache_bytes: 0,
        traces: false,
        command_events: None,
        ensure_indexes: false,
        ..store_config(config, uri)
    })
    .await
    .context("cannot connect the background store to the database")?;
    Ok(Arc::new(store))
}

fn log_page_origins(config: &Config) {
    let unset = config.page_origins.is_none()
        && config.cors_origins.is_none()
        && config.public_url.is_none();
    if unset {
        tracing::warn!("none of THREADQL_PAGE_ORIGINS, THREADQL_CORS_ORIGINS, THREADQL_PUBLIC_URL is set: any signed-in user may create the discussion of any page key, with their own title and url, before the site does. Set THREADQL_PAGE_ORIGINS to the sites' origins.");
    }
}

impl From<&Config> for Limits {
    fn from(config: &Config) -> Self {
        Limits {
            default_page_size: DEFAULT_PAGE_SIZE.min(config.max_page_size),
            max_page_size: config.max_page_size,
            max_text_chars: config.max_text_chars,
            default_layout: config.default_layout.into(),
            default_moderation: config.moderation.into(),
            reports_to_hold: config.reports_to_hold,
            vote_rate: config.vote_rate_limit,
            edit_rules: EditRules {
                window_secs: config.edit_window_secs,
            },
            max_query_depth: config.max_query_depth,
            document: DocumentLimits {
                max_tokens: config.max_tokens,
                max_aliases: config.max_aliases,
                max_root_fields: config.max_root_fields,
                introspection: config.introspection,
                max_depth: config.max_query_depth,
                max_cost: config.max_complexity,
                default_page_size: DEFAULT_PAGE_SIZE.min(config.max_page_size),
                count_cost: config.max_page_size.max(1),
            },
            introspection: config.introspection,
            apq_cache: config.apq_cache,
            apq_cache_bytes: usize::try_from(config.apq_cache_bytes).unwrap_or(usize::MAX),
            request_timeout: Duration::from_secs(config.request_timeout_secs.max(1)),
            live: LiveConfig {
                retry: Duration::from_millis(config.live_retry_ms),
                open_timeout: Duration::from_secs(config.request_timeout_secs.max(1)),
            },
            max_ws_operations: config.max_ws_operations as usize,
            anonymous_rate: config.rate_limit_anon,
            signed_in_rate: config.rate_limit_reads,
            subscription_caps: SubscriptionCaps {
                max_total: config.max_subscriptions as usize,
                max_per_client: config.max_subscriptions_per_client as usize,
            },
            max_subscription_complexity: config.max_subscription_complexity as usize,
            metric_operations: config.metrics_operations as usize,
            traces: config.traces(),
        }
    }
}

/// The store settings from config, for a given connection string.
pub fn store_config(config: &Config, uri: String) -> StoreConfig {
    StoreConfig {
        uri,
        database: config.database.clone(),
        max_depth: config.max_depth as usize,
        bucket_size: config.bucket_size,
        embedded_max_bytes: usize::try_from(config.embedded_max_bytes).unwrap_or(usize::MAX),
        cache_bytes: config.cache_bytes,
        timeout: Duration::from_millis(config.db_timeout_ms.max(1)),
        pool_size: config.db_pool_size,
        write_concern: config.write_concern.clone(),
        journal: config.write_journal,
        promote_embedded: config.promote_embedded,
        moves: MoveTiming {
            lease: Duration::from_secs(config.move_lease_secs),
            wait: Duration::from_secs(config.move_wait_secs),
            chunk: usize::try_from(config.move_chunk).unwrap_or(1000),
            ..MoveTiming::default()
        },
        command_events: None,
        traces: config.traces(),
        event_retention: crate::store::Retention(Duration::from_secs(
            config.event_retention_days.saturating_mul(86_400),
        )),
        notification_retention: Duration::from_secs(
            config.notify.retention_days.saturating_mul(86_400),
        ),
        ensure_indexes: true,
    }
}

impl App {
    /// Starts the embedded database when no URI is configured, connects, and binds the listener.
    pub async fn build(config: &Config) -> anyhow::Result<App> {
        Self::build_observed(config, None).await
    }

    /// [`App::build`], with every database command the store sends reported to `events`.
    pub async fn build_observed(
        config: &Config,
        events: Option<EventHandler<CommandEvent>>,
    ) -> anyhow::Result<App> {
        // Read before connecting: a bad list stops the start before a database is started.
        let words = Arc::new(word_lists(config)?);
        log_word_lists(config, &words);
        let configured = configured_key(config)?;
        let (store, embedded) = connect_observed(config, events).await?;
        let background = background_store(config, embedded.as_ref()).await?;
        let key = server_key(configured, store.as_ref()).await?;
        crate::upgrade::at_start(store.as_ref(), &key).await?;
        let keys = jwt_keys(config)?;
        log_jwt_keys(config, &keys);
        log_page_origins(config);
        let services = services(config, store.clone(), words, &key);
        services
            .load_reserved_names()
            .await
            .context("cannot read the reserved names")?;
        let dispatcher = Arc::new(dispatcher(config, &services)?);
        let notify_metrics = services.notify_metrics().clone();
        let fan_out = Arc::new(FanOut::new(
            background.clone(),
            crate::notify::fan_out_rules(config),
            notify_metrics.clone(),
        ));
        let api = Api::new(store.clone(), keys, config.into(), services);
        let connections = Connections::new(connection_cap(config));
        let listener = TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("cannot listen on {}", config.listen))?;
        let addr = listener.local_addr()?;
        let mail = crate::notify::mail_worker(config, background, &key, addr, notify_metrics)?
            .map(Arc::new);
        let limits = HttpLimits {
            own_origins: own_origins(config.public_url.as_ref(), addr),
            ..HttpLimits::from(config)
        };
        let responses = Arc::new(crate::http::ResponseCache::new(config.response_cache_bytes));
        let router =
            crate::http::router(api.clone(), limits, connections.clone(), responses.clone());
        let metrics = match config.metrics_listen {
            Some(at) => {
                let listener = TcpListener::bind(at)
                    .await
                    .with_context(|| format!("cannot listen on {at} (THREADQL_METRICS_LISTEN)"))?;
                let router = crate::http::metrics_router(
                    api.clone(),
                    config.into(),
                    connections.clone(),
                    responses,
                );
                Some((listener, router))
            }
            None => None,
        };
        let metrics_addr = match &metrics {
            Some((listener, _)) => Some(listener.local_addr()?),
            None => None,
        };
        Ok(App {
            router,
            addr,
            api,
            store,
            metrics_addr,
            listener,
            metrics,
            connections,
            timeouts: ConnectionTimeouts {
                header: Duration::from_secs(config.header_timeout_secs.max(1)),
                idle: Duration::from_secs(config.idle_timeout_secs.max(1)),
            },
            grace: Duration::from_secs(config.shutdown_grace_secs.max(1)),
            follow_changes: config.cache_bytes > 0,
            embedded,
            dispatcher,
            fan_out,
            mail,
        })
    }

    /// Serves until `shutdown` resolves, then shuts down within the grace period
    /// (`THREADQL_SHUTDOWN_GRACE_SECS`): no new connections; requests in flight finish; every
    /// subscription gets `complete` and its WebSocket closes with 1001 (an event stream ends);
    /// connections still open when the period runs out are dropped. Then the writes already
    /// started finish (given as long again at most), and the embedded database, if there is one,
    /// is stopped.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        tracing::info!(addr = %self.addr, max_connections = self.connections.max(), "threadql listening: GraphiQL at http://{}/", self.addr);
        // The feed keeps the read cache exact; without it the cache is bypassed.
        if self.follow_changes {
            self.api.follow_changes();
        }
        let (stop, stopped) = tokio::sync::watch::channel(None::<tokio::time::Instant>);
        let wake = self.api.services().events();
        tokio::spawn(self.dispatcher.clone().run(wake, stopped.clone()));
        let wake = self.api.services().events();
        tokio::spawn(self.fan_out.clone().run(wake, stopped.clone()));
        self.api.services().follow_notifications();
        self.api.services().watch_queues();
        if let Some(mail) = &self.mail {
            tokio::spawn(mail.clone().run(stopped.clone()));
        }
        let grace = self.grace;
        let (api, connections) = (self.api.clone(), self.connections.clone());
        tokio::spawn(async move {
            shutdown.await;
            let began = tokio::time::Instant::now();
            let (open, subscriptions) = (connections.open(), api.subscriptions_held());
            tracing::info!(
                connections = open,
                subscriptions,
                grace_secs = grace.as_secs(),
                "shutting down: {open} connections, {subscriptions} subscriptions"
            );
            let _ = stop.send(Some(began + grace));
            api.drain();
        });
        let metrics = self.metrics.map(|(listener, router)| {
            tracing::info!(addr = ?self.metrics_addr, "metrics at /metrics on their own listener");
            tokio::spawn(crate::http::serve(
                listener,
                router,
                Connections::new(METRICS_CONNECTIONS),
                self.timeouts,
                stopped.clone(),
            ))
        });
        let mut dropped = crate::http::serve(
            self.listener,
            self.router,
            self.connections,
            self.timeouts,
            stopped.clone(),
        )
        .await;
        let metrics_served = match metrics {
            Some(task) => match task.await {
                Ok(more) => {
                    dropped += more;
                    Ok(())
                }
                Err(err) => Err(err).context("the metrics listener failed"),
            },
            None => Ok(()),
        };
        // When the listener stopped: the deadline less the grace period.
        let began =
            (*stopped.borrow()).map_or_else(tokio::time::Instant::now, |deadline| deadline - grace);
        let closing = self.api.closing();
        if dropped > 0 {
            tracing::warn!(
                dropped,
                grace_secs = grace.as_secs(),
                "the shutdown grace period ran out: {dropped} connections dropped"
            );
        }
        // Streaming connections still open go now; nothing more can start a write.
        closing.advance(Stage::Dropping);
        let writes = closing.writes_running();
        if writes > 0 {
            tracing::info!(writes, "waiting for the writes already started");
        }
        let unfinished = closing.finish_writes(grace).await;
        if unfinished > 0 {
            tracing::warn!(
                unfinished,
                "{unfinished} writes were still running after the wait: they may not be stored"
            );
        }
        if let Some(db) = self.embedded {
            tracing::info!("stopping the embedded database");
            db.stop().await;
        }
        let took = began.elapsed().as_millis();
        tracing::info!(took_ms = took, "stopped after {took} ms");
        metrics_served
    }
}

/// Resolves on Ctrl-C or SIGTERM. The signals are caught from the call on, so a signal sent once
/// the server says it is listening stops it cleanly.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let interrupt = signal(SignalKind::interrupt());
    let term = signal(SignalKind::terminate());
    async move {
        let wait = |caught: std::io::Result<tokio::signal::unix::Signal>| async move {
            match caught {
                Ok(mut signal) => {
                    signal.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = wait(interrupt) => {},
            () = wait(term) => {},
        }
    }
}

/// Connects to the configured database, starting the embedded development database when no URI
/// is configured (it is returned, to be stopped when done).
pub async fn connect(config: &Config) -> anyhow::Result<(Arc<Store>, Option<EmbeddedDb>)> {
    connect_observed(config, None).await
}

async fn connect_observed(
    config: &Config,
    events: Option<EventHandler<CommandEvent>>,
) -> anyhow::Result<(Arc<Store>, Option<EmbeddedDb>)> {
    let (uri, embedded) = match &config.mongodb_uri {
        Some(uri) => (uri.clone(), None),
        None => {
            let binary = EmbeddedDb::locate(config.secantusd.as_deref())?;
            let db = EmbeddedDb::start(&binary, &config.data_dir).await?;
            tracing::info!(
                data_dir = %config.data_dir.display(),
                port = db.port(),
                "using the EMBEDDED DEVELOPMENT database (secantusd-rs); set THREADQL_MONGODB_URI to use MongoDB"
            );
            (db.uri(), Some(db))
        }
    };
    let store = Arc::new(
        Store::connect(&StoreConfig {
            command_events: events,
            ..store_config(config, uri)
        })
        .await
        .context("cannot connect to the database")?,
    );
    store
        .health()
        .ping()
        .await
        .context("the database does not answer ping")?;
    Ok((store, embedded))
}
