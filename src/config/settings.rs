//! Every setting of a run, one flag and one `THREADQL_*` (or `OTEL_*`) variable each, with
//! their defaults and allowed ranges, and how the settings are printed (secrets hidden).

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use super::{CorsOrigins, LayoutArg, LogFormat, ModerationArg, Origin, RateLimit};

/// Every setting, read once at start and passed down.
#[derive(Clone, Args)]
pub struct Config {
    /// Address to listen on.
    #[arg(
        long,
        env = "THREADQL_LISTEN",
        default_value = "127.0.0.1:8080",
        global = true
    )]
    pub listen: SocketAddr,
    /// MongoDB connection string; unset = start the embedded development database.
    #[arg(
        long,
        env = "THREADQL_MONGODB_URI",
        hide_env_values = true,
        global = true
    )]
    pub mongodb_uri: Option<String>,
    /// Database name.
    #[arg(
        long,
        env = "THREADQL_DATABASE",
        default_value = "threadql",
        global = true
    )]
    pub database: String,
    /// Where the embedded development database keeps its files.
    #[arg(
        long,
        env = "THREADQL_DATA_DIR",
        default_value = "./threadql-data",
        global = true
    )]
    pub data_dir: PathBuf,
    /// Layout of new discussions that do not name one.
    #[arg(
        long,
        env = "THREADQL_DEFAULT_LAYOUT",
        value_enum,
        default_value = "per_comment",
        global = true
    )]
    pub default_layout: LayoutArg,
    /// How discussions moderate new comments until a moderator sets it for one
    /// (`setModeration`): `post` publishes at once, `pre` holds every comment for review,
    /// `pre_first` holds a comment until its author has had one approved.
    #[arg(
        long,
        env = "THREADQL_MODERATION",
        value_enum,
        default_value = "post",
        global = true
    )]
    pub moderation: ModerationArg,
    /// Comments per bucket in the bucketed layout.
    #[arg(long, env = "THREADQL_BUCKET_SIZE", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000), global = true)]
    pub bucket_size: u32,
    /// Size cap of one discussion in the embedded layout, in bytes (MongoDB's document limit is
    /// 16 MiB); a post that would cross it fails with DISCUSSION_TOO_LARGE.
    #[arg(long, env = "THREADQL_EMBEDDED_MAX_BYTES", default_value_t = 8 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(16 * 1024..=16_000_000), global = true)]
    pub embedded_max_bytes: u64,
    /// Move an embedded discussion to the bucketed layout when a post does not fit under its
    /// size cap, then post it there (`false` keeps DISCUSSION_TOO_LARGE).
    #[arg(long, env = "THREADQL_PROMOTE_EMBEDDED", default_value_t = true, action = clap::ArgAction::Set, global = true)]
    pub promote_embedded: bool,
    /// How long a move between layouts holds its discussion without renewing its hold, in
    /// seconds: a move that stops for longer (a crash) is taken over by writers and later moves.
    #[arg(long, env = "THREADQL_MOVE_LEASE_SECS", default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..=3600), global = true)]
    pub move_lease_secs: u64,
    /// How long a write waits for a move of its discussion to end before it answers
    /// UNAVAILABLE, in seconds.
    #[arg(long, env = "THREADQL_MOVE_WAIT_SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600), global = true)]
    pub move_wait_secs: u64,
    /// Comments a move between layouts reads, and writes, per database command.
    #[arg(long, env = "THREADQL_MOVE_CHUNK", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..=100_000), global = true)]
    pub move_chunk: u64,
    /// HS256 secret for JWTs; unset = a development secret (never use it in production).
    #[arg(
        long,
        env = "THREADQL_JWT_SECRET",
        hide_env_values = true,
        global = true
    )]
    pub jwt_secret: Option<String>,
    /// The server key: the root secret that keys imported guest ids (and every other keyed
    /// value), at least 32 random bytes written as hex or base64 (e.g. `openssl rand -hex 32`).
    /// Unset: a key generated on the first start is kept in the database and shared by every
    /// process. Set it on every process or on none: another key gives other ids.
    #[arg(long, env = "THREADQL_ID_KEY", hide_env_values = true, global = true)]
    pub id_key: Option<String>,
    /// Tracing filter, e.g. `info` or `info,threadql=debug`; unset = `info` for
    /// `serve`, `warn` for the other subcommands.
    #[arg(long, env = "THREADQL_LOG", global = true)]
    pub log: Option<String>,
    /// How log lines are written to standard error: `text` for people, `json` for one JSON
    /// object per line (with the current span and its fields).
    #[arg(
        long,
        env = "THREADQL_LOG_FORMAT",
        value_enum,
        default_value = "text",
        global = true
    )]
    pub log_format: LogFormat,
    /// Deepest comment nesting: a reply deeper than this attaches to the deepest allowed ancestor.
    #[arg(long, env = "THREADQL_MAX_DEPTH", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=40), global = true)]
    pub max_depth: u32,
    /// Longest comment text, in characters.
    #[arg(
        long,
        env = "THREADQL_MAX_TEXT_CHARS",
        default_value_t = 10_000,
        global = true
    )]
    pub max_text_chars: usize,
    /// Deepest nesting of block quotes and lists in a comment text, together (a deeper text is
    /// refused; an import flattens it).
    #[arg(long, env = "THREADQL_MAX_MARKDOWN_DEPTH", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=256), global = true)]
    pub max_markdown_depth: u32,
    /// How long an author may edit a comment after posting it, in seconds; 0 = authors never
    /// edit (moderators always may).
    #[arg(
        long,
        env = "THREADQL_EDIT_WINDOW_SECS",
        default_value_t = 900,
        global = true
    )]
    pub edit_window_secs: u64,
    /// How long after its creation a discussion closes to new comments, replies, edits and
    /// votes (moderators may still act): a whole number and a unit, `s`, `m`, `h` or `d` (e.g.
    /// `30d`), up to 100 years; `off` = never. A moderator sets it per discussion with
    /// `setDiscussionClosing`.
    #[arg(
        long,
        env = "THREADQL_AUTO_CLOSE_AFTER",
        default_value = "off",
        global = true
    )]
    pub auto_close_after: super::AutoClose,
    /// How many days the event log keeps an event (a TTL index; the pull feed and webhook
    /// redeliveries reach back this far).
    #[arg(long, env = "THREADQL_EVENT_RETENTION_DAYS", default_value_t = 7, value_parser = clap::value_parser!(u64).range(1..=3650), global = true)]
    pub event_retention_days: u64,
    /// How webhooks are delivered.
    #[command(flatten)]
    pub webhooks: super::WebhookSettings,
    /// Whether guests comment, and their limits.
    #[command(flatten)]
    pub guests: super::GuestSettings,
    /// How people are notified.
    #[command(flatten)]
    pub notify: super::NotifySettings,
    /// Largest page a client may ask for.
    #[arg(
        long,
        env = "THREADQL_MAX_PAGE_SIZE",
        default_value_t = 100,
        global = true
    )]
    pub max_page_size: usize,
    /// Path of the `secantusd-rs` binary for the embedded database (default: found on PATH or in
    /// ~/.cargo/bin).
    #[arg(long, env = "THREADQL_SECANTUSD", global = true)]
    pub secantusd: Option<PathBuf>,

    // ----- requests -----
    /// Largest request body, in bytes; a larger one gets 413.
    #[arg(long, env = "THREADQL_MAX_BODY_BYTES", default_value_t = 256 * 1024, global = true)]
    pub max_body_bytes: usize,
    /// Most operations in one batched request (a JSON array); 0 refuses batches.
    #[arg(long, env = "THREADQL_MAX_BATCH", default_value_t = 10, global = true)]
    pub max_batch: usize,
    /// Deepest field nesting a query may have.
    #[arg(
        long,
        env = "THREADQL_MAX_QUERY_DEPTH",
        default_value_t = 48,
        global = true
    )]
    pub max_query_depth: usize,
    /// Highest query cost, summed over the operations of a batch: every field counts 1, a
    /// connection's items once per item it may return (`first`, or the default page size), a
    /// `totalCount` that counts on demand (a sub-discussion's, the discussions') as much as the
    /// largest page, `_entities` its selection once per representation, `discussionsByKeys`
    /// once per key, and a ranked `offset` each comment it skips. The default runs a comment
    /// widget's tree (20 threads, replies 10, 10 and 5 deep: about 78 000) three times over,
    /// and refuses `first: 100` four levels deep.
    #[arg(
        long,
        env = "THREADQL_MAX_COMPLEXITY",
        default_value_t = 250_000,
        global = true
    )]
    pub max_complexity: usize,
    /// Most aliased fields in one document, and in all the documents of a batch together.
    #[arg(
        long,
        env = "THREADQL_MAX_ALIASES",
        default_value_t = 30,
        global = true
    )]
    pub max_aliases: usize,
    /// Most fields at the root of one operation, and of all the operations of a batch together.
    #[arg(
        long,
        env = "THREADQL_MAX_ROOT_FIELDS",
        default_value_t = 20,
        global = true
    )]
    pub max_root_fields: usize,
    /// Most lexical tokens in one document (checked before it is parsed).
    #[arg(
        long,
        env = "THREADQL_MAX_TOKENS",
        default_value_t = 5_000,
        global = true
    )]
    pub max_tokens: usize,
    /// Queries kept for automatic persisted queries (Apollo APQ), least recently used dropped
    /// first; 0 turns APQ off.
    #[arg(
        long,
        env = "THREADQL_APQ_CACHE",
        default_value_t = 1_000,
        global = true
    )]
    pub apq_cache: usize,
    /// Whether the schema can be introspected (GraphiQL needs it).
    #[arg(long, env = "THREADQL_INTROSPECTION", default_value_t = true, action = clap::ArgAction::Set, global = true)]
    pub introspection: bool,

    // ----- identity -----
    /// PEM file with the public key that verifies RS256 or ES256 tokens (instead of the HS256
    /// secret).
    #[arg(long, env = "THREADQL_JWT_PUBLIC_KEY", global = true)]
    pub jwt_public_key: Option<PathBuf>,
    /// JWKS file (`{"keys": [...]}`) whose keys verify tokens, chosen by the token's `kid`.
    #[arg(long, env = "THREADQL_JWT_JWKS", global = true)]
    pub jwt_jwks: Option<PathBuf>,
    /// Required `iss` claim, when set.
    #[arg(long, env = "THREADQL_JWT_ISSUER", global = true)]
    pub jwt_issuer: Option<String>,
    /// Required `aud` claim, when set.
    #[arg(long, env = "THREADQL_JWT_AUDIENCE", global = true)]
    pub jwt_audience: Option<String>,
    /// Clock skew allowed when checking `exp` and `nbf`, in seconds.
    #[arg(
        long,
        env = "THREADQL_JWT_LEEWAY_SECS",
        default_value_t = 5,
        global = true
    )]
    pub jwt_leeway_secs: u64,

    // ----- abuse -----
    /// Mutations per author (token `sub`): `<count>/<seconds>s`, or `off`.
    #[arg(
        long,
        env = "THREADQL_RATE_LIMIT",
        default_value = "10/10s",
        global = true
    )]
    pub rate_limit: RateLimit,
    /// Votes per user (token `sub`), counted apart from other mutations: `<count>/<seconds>s`,
    /// or `off`.
    #[arg(
        long,
        env = "THREADQL_VOTE_RATE_LIMIT",
        default_value = "60/60s",
        global = true
    )]
    pub vote_rate_limit: RateLimit,
    /// Moderators' actions per moderator (approvals, rejections, bans, locks, pins, moves…),
    /// counted apart from their own posts and edits, so that a console can act on a page of the
    /// queue at once: `<count>/<seconds>s`, or `off`.
    #[arg(
        long,
        env = "THREADQL_MODERATION_RATE_LIMIT",
        default_value = "300/60s",
        global = true
    )]
    pub moderation_rate_limit: RateLimit,
    /// Operations per client of callers that are not signed in (no token, or a refused one):
    /// `<count>/<seconds>s`, or `off`. Every operation counts: each one of a batch, of a
    /// WebSocket (and its upgrade), of Server-Sent Events. A client is an IPv4 address or an
    /// IPv6 /64 network.
    #[arg(
        long,
        env = "THREADQL_RATE_LIMIT_ANON",
        default_value = "600/60s",
        global = true
    )]
    pub rate_limit_anon: RateLimit,
    /// Operations per signed-in user (token `sub`): `<count>/<seconds>s`, or `off`. Every
    /// operation counts one, over every transport; one that costs more than a tenth of
    /// `THREADQL_MAX_COMPLEXITY` counts one more for each further tenth (up to 10).
    #[arg(
        long,
        env = "THREADQL_RATE_LIMIT_READS",
        default_value = "1200/60s",
        global = true
    )]
    pub rate_limit_reads: RateLimit,
    /// Header that holds the client's address when threadql runs behind a proxy (e.g.
    /// `x-forwarded-for`): its lines are read in order as one list and the last entry counts
    /// (the one the nearest proxy wrote; `address:port` is that address, and a value that is no
    /// address is a client of its own). Unset, or absent from a request: the peer address.
    #[arg(long, env = "THREADQL_CLIENT_IP_HEADER", global = true)]
    pub client_ip_header: Option<String>,

    // ----- moderation -----
    /// File of banned words and phrases: UTF-8, one a line, blank lines and lines starting
    /// with `#` skipped. Matched on whole words, ignoring case, after NFKC normalisation. Read
    /// once at start; a line that is not UTF-8 or holds no word stops the start. Unset: none.
    #[arg(long, env = "THREADQL_BANNED_WORDS", global = true)]
    pub banned_words: Option<PathBuf>,
    /// File of suspect words and phrases, written and matched as THREADQL_BANNED_WORDS is.
    /// Unset: none.
    #[arg(long, env = "THREADQL_SUSPECT_WORDS", global = true)]
    pub suspect_words: Option<PathBuf>,
    /// Reports (from different users) that hold a public comment for a moderator: it becomes a
    /// PENDING placeholder until one approves or rejects it. 0: reports never hold a comment.
    #[arg(
        long,
        env = "THREADQL_REPORTS_TO_HOLD",
        default_value_t = 3,
        global = true
    )]
    pub reports_to_hold: u64,

    // ----- database -----
    /// How long a database operation may wait for a server or an answer, in milliseconds,
    /// before it fails with UNAVAILABLE.
    #[arg(
        long,
        env = "THREADQL_DB_TIMEOUT_MS",
        default_value_t = 5_000,
        global = true
    )]
    pub db_timeout_ms: u64,
    /// Longest a GraphQL request may take, in seconds; past it the client gets UNAVAILABLE (a
    /// write it started still completes).
    #[arg(
        long,
        env = "THREADQL_REQUEST_TIMEOUT_SECS",
        default_value_t = 30,
        global = true
    )]
    pub request_timeout_secs: u64,
    /// Wait before reopening the live-update change stream after it fails, in milliseconds
    /// (doubling on each failure, up to 5 s); no change made meanwhile is lost.
    #[arg(
        long,
        env = "THREADQL_LIVE_RETRY_MS",
        default_value_t = 500,
        global = true
    )]
    pub live_retry_ms: u64,
    /// Most operations (subscriptions) one WebSocket connection may run at once.
    #[arg(long, env = "THREADQL_MAX_WS_OPERATIONS", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000), global = true)]
    pub max_ws_operations: u32,
    /// Most connections to the database.
    #[arg(long, env = "THREADQL_DB_POOL_SIZE", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=10_000), global = true)]
    pub db_pool_size: u32,
    /// Write concern of every write: `majority`, or a number of nodes.
    #[arg(
        long,
        env = "THREADQL_WRITE_CONCERN",
        default_value = "majority",
        global = true
    )]
    pub write_concern: String,
    /// Whether writes wait for the journal.
    #[arg(long, env = "THREADQL_WRITE_JOURNAL", default_value_t = true, action = clap::ArgAction::Set, global = true)]
    pub write_journal: bool,

    // ----- connections -----
    /// Longest a client may take to send a request's headers, in seconds, counted from its first
    /// byte (or from the connection's start); past it the connection is closed.
    #[arg(long, env = "THREADQL_HEADER_TIMEOUT_SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600), global = true)]
    pub header_timeout_secs: u64,
    /// Longest a client may take to send a request's body once its headers are in, in seconds;
    /// past it the request gets 408 and the connection is closed.
    #[arg(long, env = "THREADQL_BODY_TIMEOUT_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600), global = true)]
    pub body_timeout_secs: u64,
    /// How long a keep-alive connection may sit idle between requests, and a WebSocket may stay
    /// silent (it is pinged; a pong counts), in seconds, before it is closed.
    #[arg(long, env = "THREADQL_IDLE_TIMEOUT_SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400), global = true)]
    pub idle_timeout_secs: u64,
    /// How long a shutdown (SIGTERM, Ctrl-C) may take, in seconds: requests in flight finish,
    /// subscriptions get `complete` and their sockets close; connections still open after it are
    /// dropped. Writes already started still complete (they get up to as long again).
    #[arg(long, env = "THREADQL_SHUTDOWN_GRACE_SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600), global = true)]
    pub shutdown_grace_secs: u64,
    /// Most client connections open at once (HTTP and WebSocket); past it new connections wait
    /// in the listen queue. Unset: what the process's open-file limit allows, less a reserve for
    /// the database pool and the process's own files.
    #[arg(long, env = "THREADQL_MAX_CONNECTIONS", value_parser = clap::value_parser!(u32).range(1..=1_000_000), global = true)]
    pub max_connections: Option<u32>,
    /// Address of a separate listener for `/metrics`; when set, the public listener answers 404
    /// there. Unset: `/metrics` is served on the public listener.
    #[arg(long, env = "THREADQL_METRICS_LISTEN", global = true)]
    pub metrics_listen: Option<SocketAddr>,
    /// Operation names the request metrics give series of their own, first come; the
    /// durations of operations named later are counted under `operation="other"`.
    #[arg(long, env = "THREADQL_METRICS_OPERATIONS", default_value_t = 100, value_parser = clap::value_parser!(u32).range(0..=10_000), global = true)]
    pub metrics_operations: u32,
    /// Origins whose pages may call `/graphql` from a browser: a comma-separated list of
    /// `scheme://host[:port]` (e.g. `https://blog.example.com,http://localhost:3000`), or `*`
    /// for any. Their preflights are answered (POST and GET, with `Content-Type`,
    /// `Authorization` and Apollo's preflight headers; never credentials), and WebSockets and
    /// Server-Sent Events from any other origin but the server's own are refused (403).
    /// Unset: the server's own origin only.
    #[arg(long, env = "THREADQL_CORS_ORIGINS", global = true)]
    pub cors_origins: Option<CorsOrigins>,
    /// The origin browsers reach this server at, `scheme://host[:port]` (e.g.
    /// `https://comments.example.com`), when it is not the listener's (behind a proxy, under a
    /// name, with TLS). WebSockets and event streams from its pages are the server's own, and
    /// users who are not moderators may create discussions for its pages. Unset: the
    /// listener's origins (for a loopback or unspecified address `http://127.0.0.1:PORT`,
    /// `http://localhost:PORT` and `http://[::1]:PORT`).
    #[arg(long, env = "THREADQL_PUBLIC_URL", value_parser = super::origins::parse_public_url, global = true)]
    pub public_url: Option<Origin>,
    /// Origins of the pages users who are not moderators may create discussions for (the
    /// `url` of `ensureDiscussion` and `createDiscussion`): a comma-separated list of
    /// `scheme://host[:port]`, or `*` for any. Unset: those of `THREADQL_CORS_ORIGINS`; with
    /// neither (nor `THREADQL_PUBLIC_URL`) set, every origin, with a warning at start.
    #[arg(long, env = "THREADQL_PAGE_ORIGINS", value_parser = super::origins::parse_page_origins, global = true)]
    pub page_origins: Option<CorsOrigins>,
    // ----- read cache -----
    /// The most bytes the read cache of hot discussions holds, per process (0 turns it off).
    #[arg(long, env = "THREADQL_CACHE_BYTES", default_value_t = 64 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(0..=(1_u64 << 40)), global = true)]
    pub cache_bytes: u64,
    /// The most bytes the response cache of anonymous answers holds, per process (0 turns it
    /// off; it needs the read cache, whose generations tell when an answer changes).
    #[arg(long, env = "THREADQL_RESPONSE_CACHE_BYTES", default_value_t = 32 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(0..=(1_u64 << 40)), global = true)]
    pub response_cache_bytes: u64,
    // ----- query costs and persisted queries -----
    /// Most bytes of query text the automatic-persisted-query cache keeps (with its entries'
    /// keys and bookkeeping), least recently used dropped first; a document larger than this is
    /// run but not kept.
    #[arg(long, env = "THREADQL_APQ_CACHE_BYTES", default_value_t = 16 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(1..=(1_u64 << 40)), global = true)]
    pub apq_cache_bytes: u64,
    // ----- live subscriptions under load -----
    /// Most live subscriptions the process serves at once, over every client and transport;
    /// one more gets RATE_LIMITED on that subscription (the connection stays).
    #[arg(long, env = "THREADQL_MAX_SUBSCRIPTIONS", default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=1_000_000), global = true)]
    pub max_subscriptions: u32,
    /// Most live subscriptions one client holds at once, over all its connections: a client is
    /// a token's `sub`, or the client address without a token. One more gets RATE_LIMITED.
    #[arg(long, env = "THREADQL_MAX_SUBSCRIPTIONS_PER_CLIENT", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1_000_000), global = true)]
    pub max_subscriptions_per_client: u32,
    /// Highest cost of a subscription's selection, which runs again for every event: every
    /// field counts 1, and a connection its selection once per item of the largest page,
    /// whatever `first` says. Past it: GRAPHQL_VALIDATION_FAILED, before any database command.
    #[arg(long, env = "THREADQL_MAX_SUBSCRIPTION_COMPLEXITY", default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1_000_000), global = true)]
    pub max_subscription_complexity: u32,
    // ----- traces (the standard OpenTelemetry variables) -----
    /// Base URL of an OpenTelemetry collector: traces are sent over OTLP to it (HTTP:
    /// `<url>/v1/traces`). Unset (with OTEL_EXPORTER_OTLP_TRACES_ENDPOINT unset too): no traces.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT", global = true)]
    pub otlp_endpoint: Option<String>,
    /// URL traces are sent to, used as it is (over HTTP, with its path); wins over
    /// OTEL_EXPORTER_OTLP_ENDPOINT.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", global = true)]
    pub otlp_traces_endpoint: Option<String>,
    /// How traces are sent: `http/protobuf` (the default) or `grpc`.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_PROTOCOL", global = true)]
    pub otlp_protocol: Option<String>,
    /// How traces are sent, for traces only; wins over OTEL_EXPORTER_OTLP_PROTOCOL.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", global = true)]
    pub otlp_traces_protocol: Option<String>,
    /// Headers sent with every export, `key=value` pairs separated by commas (values
    /// percent-encoded), e.g. an API key.
    #[arg(
        long,
        env = "OTEL_EXPORTER_OTLP_HEADERS",
        hide_env_values = true,
        global = true
    )]
    pub otlp_headers: Option<String>,
    /// Headers sent with every export of traces, added to OTEL_EXPORTER_OTLP_HEADERS.
    #[arg(
        long,
        env = "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        hide_env_values = true,
        global = true
    )]
    pub otlp_traces_headers: Option<String>,
    /// The service name the traces carry (`service.name`); unset: the `service.name` of
    /// OTEL_RESOURCE_ATTRIBUTES, else `threadql`.
    #[arg(long, env = "OTEL_SERVICE_NAME", global = true)]
    pub otel_service_name: Option<String>,
    /// Which traces are kept: `parentbased_always_on` (the default: every trace, unless the
    /// caller's `traceparent` says it is not sampled), `always_on`, `always_off`,
    /// `traceidratio`, `parentbased_traceidratio`, `parentbased_always_off`.
    #[arg(long, env = "OTEL_TRACES_SAMPLER", global = true)]
    pub otel_traces_sampler: Option<String>,
    /// The ratio of the `traceidratio` samplers, from 0 to 1 (default 1).
    #[arg(long, env = "OTEL_TRACES_SAMPLER_ARG", global = true)]
    pub otel_traces_sampler_arg: Option<String>,
    /// `true` turns traces off whatever the endpoint says.
    #[arg(long, env = "OTEL_SDK_DISABLED", default_value_t = false, action = clap::ArgAction::Set, global = true)]
    pub otel_sdk_disabled: bool,
}

/// The service name traces carry when neither OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES
/// names one.
pub const DEFAULT_SERVICE_NAME: &str = "threadql";

impl Config {
    /// Whether traces are sent: an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
    /// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, not empty) and OTEL_SDK_DISABLED is not `true`.
    pub fn traces(&self) -> bool {
        let set = |v: &Option<String>| v.as_deref().is_some_and(|v| !v.trim().is_empty());
        !self.otel_sdk_disabled && (set(&self.otlp_endpoint) || set(&self.otlp_traces_endpoint))
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("listen", &self.listen)
            .field("mongodb_uri", &self.mongodb_uri.as_ref().map(|_| "<set>"))
            .field("database", &self.database)
            .field("data_dir", &self.data_dir)
            .field("default_layout", &self.default_layout)
            .field("moderation", &self.moderation)
            .field("reports_to_hold", &self.reports_to_hold)
            .field("bucket_size", &self.bucket_size)
            .field("embedded_max_bytes", &self.embedded_max_bytes)
            .field("promote_embedded", &self.promote_embedded)
            .field("move_lease_secs", &self.move_lease_secs)
            .field("move_wait_secs", &self.move_wait_secs)
            .field("move_chunk", &self.move_chunk)
            .field("jwt_secret", &self.jwt_secret.as_ref().map(|_| "<set>"))
            .field("id_key", &self.id_key.as_ref().map(|_| "<set>"))
            .field("log", &self.log)
            .field("log_format", &self.log_format)
            .field("max_depth", &self.max_depth)
            .field("max_text_chars", &self.max_text_chars)
            .field("max_markdown_depth", &self.max_markdown_depth)
            .field("max_page_size", &self.max_page_size)
            .field("edit_window_secs", &self.edit_window_secs)
            .field("auto_close_after", &self.auto_close_after)
            .field("event_retention_days", &self.event_retention_days)
            .field("webhooks", &self.webhooks)
            .field("guests", &self.guests)
            .field("notify", &self.notify)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_batch", &self.max_batch)
            .field("max_query_depth", &self.max_query_depth)
            .field("max_complexity", &self.max_complexity)
            .field("max_aliases", &self.max_aliases)
            .field("max_root_fields", &self.max_root_fields)
            .field("max_tokens", &self.max_tokens)
            .field("apq_cache", &self.apq_cache)
            .field("introspection", &self.introspection)
            .field("jwt_public_key", &self.jwt_public_key)
            .field("jwt_jwks", &self.jwt_jwks)
            .field("jwt_issuer", &self.jwt_issuer)
            .field("jwt_audience", &self.jwt_audience)
            .field("jwt_leeway_secs", &self.jwt_leeway_secs)
            .field("rate_limit", &self.rate_limit)
            .field("vote_rate_limit", &self.vote_rate_limit)
            .field("moderation_rate_limit", &self.moderation_rate_limit)
            .field("rate_limit_anon", &self.rate_limit_anon)
            .field("rate_limit_reads", &self.rate_limit_reads)
            .field("client_ip_header", &self.client_ip_header)
            .field("banned_words", &self.banned_words)
            .field("suspect_words", &self.suspect_words)
            .field("db_timeout_ms", &self.db_timeout_ms)
            .field("request_timeout_secs", &self.request_timeout_secs)
            .field("live_retry_ms", &self.live_retry_ms)
            .field("max_ws_operations", &self.max_ws_operations)
            .field("db_pool_size", &self.db_pool_size)
            .field("write_concern", &self.write_concern)
            .field("write_journal", &self.write_journal)
            .field("header_timeout_secs", &self.header_timeout_secs)
            .field("body_timeout_secs", &self.body_timeout_secs)
            .field("idle_timeout_secs", &self.idle_timeout_secs)
            .field("shutdown_grace_secs", &self.shutdown_grace_secs)
            .field("max_connections", &self.max_connections)
            .field("metrics_listen", &self.metrics_listen)
            .field("metrics_operations", &self.metrics_operations)
            .field("cors_origins", &self.cors_origins)
            .field("public_url", &self.public_url)
            .field("page_origins", &self.page_origins)
            .field("apq_cache_bytes", &self.apq_cache_bytes)
            .field("cache_bytes", &self.cache_bytes)
            .field("response_cache_bytes", &self.response_cache_bytes)
            .field("max_subscriptions", &self.max_subscriptions)
            .field(
                "max_subscriptions_per_client",
                &self.max_subscriptions_per_client,
            )
            .field(
                "max_subscription_complexity",
                &self.max_subscription_complexity,
            )
            .field("otlp_endpoint", &self.otlp_endpoint)
            .field("otlp_traces_endpoint", &self.otlp_traces_endpoint)
            .field("otlp_protocol", &self.otlp_protocol)
            .field("otlp_traces_protocol", &self.otlp_traces_protocol)
            .field("otlp_headers", &self.otlp_headers.as_ref().map(|_| "<set>"))
            .field(
                "otlp_traces_headers",
                &self.otlp_traces_headers.as_ref().map(|_| "<set>"),
            )
            .field("otel_service_name", &self.otel_service_name)
            .field("otel_traces_sampler", &self.otel_traces_sampler)
            .field("otel_traces_sampler_arg", &self.otel_traces_sampler_arg)
            .field("otel_sdk_disabled", &self.otel_sdk_disabled)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Cli;
    use clap::Parser as _;

    #[test]
    fn the_embedded_size_cap_stays_under_mongodbs_limit() {
        let cap = |value: &str| {
            Cli::try_parse_from(["threadql", "--embedded-max-bytes", value])
                .map(|cli| cli.config.embedded_max_bytes)
        };
        assert_eq!(cap("65536").ok(), Some(65_536));
        assert!(cap("1000").is_err());
        assert!(cap("16777216").is_err());
        assert!(cap("-1").is_err());
    }

    #[test]
    fn the_persisted_query_budget_is_bytes_above_zero() {
        let budget = |value: &str| {
            Cli::try_parse_from(["threadql", "--apq-cache-bytes", value])
                .map(|cli| cli.config.apq_cache_bytes)
        };
        assert_eq!(budget("4096").ok(), Some(4096));
        assert!(budget("0").is_err());
        assert!(budget("-1").is_err());
        assert!(budget("16MiB").is_err());
        assert_eq!(
            Config::defaults().map(|c| c.apq_cache_bytes).ok(),
            Some(16 * 1024 * 1024)
        );
    }

    #[test]
    fn subscription_limits_are_positive() {
        let parse = |flag: &str, value: &str| Cli::try_parse_from(["threadql", flag, value]);
        for flag in [
            "--max-subscriptions",
            "--max-subscriptions-per-client",
            "--max-subscription-complexity",
        ] {
            assert!(parse(flag, "0").is_err(), "{flag}");
            assert!(parse(flag, "-1").is_err(), "{flag}");
            assert!(parse(flag, "7").is_ok(), "{flag}");
        }
    }

    #[test]
    fn the_shutdown_grace_period_is_at_least_a_second() {
        let grace = |value: &str| {
            let flag = format!("--shutdown-grace-secs={value}");
            Cli::try_parse_from(["threadql", flag.as_str()])
                .map(|cli| cli.config.shutdown_grace_secs)
        };
        assert_eq!(grace("1").ok(), Some(1));
        assert_eq!(grace("25").ok(), Some(25));
        for bad in ["0", "-1", "ten", "1.5", ""] {
            let refused = grace(bad)
                .err()
                .map(|err| err.to_string())
                .unwrap_or_default();
            assert!(
                refused.contains("--shutdown-grace-secs"),
                "{bad}: {refused}"
            );
        }
        if std::env::var_os("THREADQL_SHUTDOWN_GRACE_SECS").is_none() {
            assert_eq!(
                Config::defaults().map(|c| c.shutdown_grace_secs).ok(),
                Some(10)
            );
        }
    }

    #[test]
    fn logs_are_text_unless_json_is_asked_for_and_subcommands_log_warnings_only() {
        let cli = |args: &[&str]| Cli::try_parse_from(args.iter().copied());
        let parsed = cli(&["threadql", "--log-format", "json"]);
        assert_eq!(
            parsed.map(|c| c.config.log_format).ok(),
            Some(LogFormat::Json)
        );
        assert!(cli(&["threadql", "--log-format", "xml"]).is_err());
        let filter = |args: &[&str]| cli(args).map(|c| c.log_filter().to_owned()).ok();
        assert_eq!(
            filter(&["threadql", "--log", "info"]).as_deref(),
            Some("info")
        );
        assert_eq!(
            filter(&["threadql", "--log", "debug", "print-schema"]).as_deref(),
            Some("debug")
        );
        if std::env::var_os("THREADQL_LOG").is_none() {
            assert_eq!(filter(&["threadql"]).as_deref(), Some("info"));
            assert_eq!(filter(&["threadql", "serve"]).as_deref(), Some("info"));
            assert_eq!(
                filter(&["threadql", "print-schema"]).as_deref(),
                Some("warn")
            );
        }
        if std::env::var_os("THREADQL_LOG_FORMAT").is_none() {
            assert_eq!(
                cli(&["threadql"]).map(|c| c.config.log_format).ok(),
                Some(LogFormat::Text)
            );
        }
    }
}
