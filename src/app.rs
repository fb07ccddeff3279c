//! Wiring: builds the store, the API and the router from a config, and serves them.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use axum::Router;
use tokio::net::TcpListener;

use crate::auth::{JwtKeys, DEV_SECRET};
use crate::config::Config;
use crate::domain::EditRules;
use crate::graphql::{Api, Limits};
use crate::store::embedded_db::EmbeddedDb;
use crate::store::{Storage, Store, StoreConfig};

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
    listener: TcpListener,
    embedded: Option<EmbeddedDb>,
}

/// The JWT keys from config; warns loudly when the development secret is used.
pub fn jwt_keys(config: &Config) -> JwtKeys {
    match &config.jwt_secret {
        Some(secret) => JwtKeys::new(secret),
        None => {
            tracing::warn!("THREADQL_JWT_SECRET is not set: using the built-in DEVELOPMENT secret; anyone can mint tokens. Never run like this in production.");
            JwtKeys::new(DEV_SECRET)
        }
    }
}

impl From<&Config> for Limits {
    fn from(config: &Config) -> Self {
        Limits {
            default_page_size: config.default_page_size.min(config.max_page_size),
            max_page_size: config.max_page_size,
            max_text_chars: config.max_text_chars,
            default_layout: config.default_layout.into(),
            edit_rules: EditRules {
                window_secs: config.edit_window_secs,
            },
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
    }
}

impl App {
    /// Starts the embedded database when no URI is configured, connects, and binds the listener.
    pub async fn build(config: &Config) -> anyhow::Result<App> {
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
            Store::connect(&store_config(config, uri))
                .await
                .context("cannot connect to the database")?,
        );
        store
            .ping()
            .await
            .context("the database does not answer ping")?;
        let api = Api::new(store.clone(), jwt_keys(config), config.into());
        let router = crate::http::router(api.clone());
        let listener = TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("cannot listen on {}", config.listen))?;
        let addr = listener.local_addr()?;
        Ok(App {
            router,
            addr,
            api,
            store,
            listener,
            embedded,
        })
    }

    /// Serves until `shutdown` resolves, lets in-flight requests finish, then stops the embedded
    /// database if there is one.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        tracing::info!(addr = %self.addr, "threadql listening: GraphiQL at http://{}/", self.addr);
        let served = axum::serve(self.listener, self.router)
            .with_graceful_shutdown(shutdown)
            .await;
        if let Some(db) = self.embedded {
            tracing::info!("stopping the embedded database");
            db.stop().await;
        }
        served.context("server error")
    }
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutting down: finishing in-flight requests");
}
