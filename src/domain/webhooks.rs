//! Webhook endpoints and their deliveries, as the service and the dispatcher see them (no I/O).

use super::{EventType, Micros};

/// A secret an endpoint's deliveries are signed with, and until when it signs.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningSecret {
    /// The `whsec_…` text.
    pub secret: String,
    /// When it stops signing (a rotated-out secret during its overlap); `None`: it signs on.
    pub until: Option<Micros>,
}

impl std::fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningSecret")
            .field("secret", &"whsec_…")
            .field("until", &self.until)
            .finish()
    }
}

/// Where events are delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Its id (`ep_` and 24 hex digits).
    pub id: String,
    /// The URL deliveries are POSTed to.
    pub url: String,
    /// The kinds it gets; `None`: every kind.
    pub events: Option<Vec<EventType>>,
    /// What it is for, as the admin wrote it.
    pub description: Option<String>,
    /// Whether it gets deliveries.
    pub enabled: bool,
    /// Why it was disabled (a 410 answer, deliveries failing for too long), if it was.
    pub disabled_reason: Option<String>,
    /// When it was created: it gets the events committed from then on.
    pub created: Micros,
    /// The secrets that sign its deliveries, newest first.
    pub secrets: Vec<SigningSecret>,
    /// Since when every attempt has failed (`None` after a success, or before any attempt).
    pub failing_since: Option<Micros>,
}

impl Endpoint {
    /// Whether it gets events of `kind`.
    pub fn wants(&self, kind: EventType) -> bool {
        self.events
            .as_ref()
            .is_none_or(|kinds| kinds.contains(&kind))
    }

    /// The secrets that sign a delivery at `now`, newest first.
    pub fn signing_at(&self, now: Micros) -> Vec<&str> {
        self.secrets
            .iter()
            .filter(|s| s.until.is_none_or(|until| until > now))
            .map(|s| s.secret.as_str())
            .collect()
    }
}

/// How a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryStatus {
    /// Not answered with a 2xx yet, with attempts left.
    Pending,
    /// Answered with a 2xx.
    Succeeded,
    /// Every attempt failed (or its endpoint was disabled).
    Failed,
}

impl DeliveryStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Succeeded => "succeeded",
            DeliveryStatus::Failed => "failed",
        }
    }

    /// The status stored as `name`.
    pub fn from_stored(name: &str) -> Option<Self> {
        [Self::Pending, Self::Succeeded, Self::Failed]
            .into_iter()
            .find(|s| s.as_str() == name)
    }
}

/// One event to one endpoint, with its attempts so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// Its id: `<event id>:<endpoint id>`, so an event reaches an endpoint once.
    pub id: String,
    /// The endpoint.
    pub endpoint: String,
    /// The event (its id is the `webhook-id` of every attempt).
    pub event: String,
    /// The event's kind.
    pub kind: EventType,
    /// How it stands.
    pub status: DeliveryStatus,
    /// Attempts made.
    pub attempts: u32,
    /// When the next attempt is due (pending ones).
    pub next_at: Option<Micros>,
    /// When the last attempt was made.
    pub last_attempt_at: Option<Micros>,
    /// The status the last attempt was answered with.
    pub last_status: Option<u16>,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
    /// The first 4 KiB of the last answer's body.
    pub last_body: Option<String>,
    /// When the event was committed (for the lag from commit to a 2xx).
    pub committed: Micros,
}

impl Delivery {
    /// The id of the delivery of `event` to `endpoint`.
    pub fn id_of(event: &str, endpoint: &str) -> String {
        format!("{event}:{endpoint}")
    }
}

/// What one attempt came to, as stored with its delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRecord {
    /// When it was made.
    pub at: Micros,
    /// The answer's status, if one came.
    pub status: Option<u16>,
    /// Why it failed, if it did.
    pub error: Option<String>,
    /// The first 4 KiB of the answer's body.
    pub body: Option<String>,
    /// How the delivery stands after it.
    pub then: DeliveryStatus,
    /// When the next attempt is due (while pending).
    pub next_at: Option<Micros>,
}

/// What an update of an endpoint changes (`None`: that field stays).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointPatch {
    /// A new URL.
    pub url: Option<String>,
    /// New kinds (`Some(None)`: every kind).
    pub events: Option<Option<Vec<EventType>>>,
    /// A new description (`Some(None)`: none).
    pub description: Option<Option<String>>,
    /// Enabled or disabled; enabling clears `disabled_reason` and `failing_since`.
    pub enabled: Option<bool>,
}
