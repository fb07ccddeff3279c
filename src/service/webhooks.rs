//! Webhook endpoints, managed by admins: created with a secret shown once, updated, deleted,
//! their secrets rotated with an overlap, their deliveries sent again. The dispatcher
//! (`crate::webhooks::dispatch`) delivers to them.

use std::time::Duration;

use super::{Caller, Services};
use crate::domain::webhooks::{Delivery, Endpoint, EndpointPatch, SigningSecret};
use crate::domain::{DomainError, EventType, Micros};
use crate::webhooks::{check_url, Secret};

/// Most endpoints an installation may have.
pub const MAX_ENDPOINTS: usize = 100;
/// Longest description, in characters.
const MAX_DESCRIPTION: usize = 500;
/// Longest overlap of a rotated-out secret.
pub(super) const MAX_OVERLAP: Duration = Duration::from_secs(7 * 86_400);

/// What a new endpoint is.
#[derive(Debug, Clone)]
pub struct NewEndpoint {
    /// Where deliveries go.
    pub url: String,
    /// The kinds it gets (`None`: every kind).
    pub events: Option<Vec<EventType>>,
    /// What it is for.
    pub description: Option<String>,
}

impl Services {
    /// Creates an endpoint and its first secret, returned here and never again. Admins only.
    /// `BAD_USER_INPUT` for a URL the address rules refuse, an empty list of kinds, a
    /// description over 500 characters, or past 100 endpoints.
    pub async fn create_endpoint(
        &self,
        caller: &Caller,
        new: NewEndpoint,
    ) -> Result<(Endpoint, String), DomainError> {
        caller.must_administer()?;
        let url = self.endpoint_url(&new.url).await?;
        let events = kinds(new.events)?;
        let description = description(new.description)?;
        let hooks = self.storage.webhooks();
        if hooks.endpoints().await?.len() >= MAX_ENDPOINTS {
            return Err(DomainError::bad_input(format!(
                "at most {MAX_ENDPOINTS} webhook endpoints: delete one first"
            )));
        }
        let secret = Secret::generate();
        let endpoint = Endpoint {
            id: format!("ep_{:024x}", rand::random::<u128>() >> 32),
            url,
            events,
            description,
            enabled: true,
            disabled_reason: None,
            created: Micros::now(),
            secrets: vec![SigningSecret {
                secret: secret.expose().to_owned(),
                until: None,
            }],
            failing_since: None,
        };
        hooks.create_endpoint(&endpoint).await?;
        tracing::info!(endpoint = %endpoint.id, by = %caller.author().id, "webhook endpoint created");
        Ok((endpoint, secret.expose().to_owned()))
    }

    /// Changes an endpoint's URL, kinds, description or whether it is enabled (enabling clears
    /// why it was disabled). Admins only; `NOT_FOUND` for an unknown id.
    pub async fn update_endpoint(
        &self,
        caller: &Caller,
        id: &str,
        mut patch: EndpointPatch,
    ) -> Result<Endpoint, DomainError> {
        caller.must_administer()?;
        if let Some(url) = &patch.url {
            patch.url = Some(self.endpoint_url(url).await?);
        }
        if let Some(events) = patch.events.take() {
            patch.events = Some(kinds(events)?);
        }
        if let Some(text) = patch.description.take() {
            patch.description = Some(description(text)?);
        }
        self.storage
            .webhooks()
            .update_endpoint(id, &patch)
            .await?
            .ok_or_else(|| no_endpoint(id))
    }

    /// Deletes an endpoint and its pending deliveries: true when there was one. Admins only.
    pub async fn delete_endpoint(&self, caller: &Caller, id: &str) -> Result<bool, DomainError> {
        caller.must_administer()?;
        Ok(self.storage.webhooks().delete_endpoint(id).await?)
    }

    /// Gives an endpoint a new secret, returned here and never again; the older ones go on
    /// signing for `overlap` (at most 7 days), so that during it every delivery carries both
    /// signatures. Admins only; `NOT_FOUND` for an unknown id.
    pub async fn rotate_secret(
        &self,
        caller: &Caller,
        id: &str,
        overlap: Duration,
    ) -> Result<String, DomainError> {
        caller.must_administer()?;
        if overlap > MAX_OVERLAP {
            return Err(DomainError::bad_input(format!(
                "overlapSeconds must be between 0 and {}",
                MAX_OVERLAP.as_secs()
            )));
        }
        let secret = Secret::generate();
        let signing = SigningSecret {
            secret: secret.expose().to_owned(),
            until: None,
        };
        let micros = i64::try_from(overlap.as_micros()).unwrap_or(i64::MAX);
        let until = Micros(Micros::now().0.saturating_add(micros));
        self.storage
            .webhooks()
            .rotate_secret(id, &signing, until)
            .await?
            .ok_or_else(|| no_endpoint(id))?;
        tracing::info!(endpoint = %id, by = %caller.author().id, overlap_secs = overlap.as_secs(), "webhook secret rotated");
        Ok(secret.expose().to_owned())
    }

    /// Sends a delivery again, now, with the same `webhook-id`. Admins only; `NOT_FOUND` for
    /// an unknown id.
    pub async fn redeliver(&self, caller: &Caller, id: &str) -> Result<Delivery, DomainError> {
        caller.must_administer()?;
        self.storage
            .webhooks()
            .redeliver(id, Micros::now())
            .await?
            .ok_or_else(|| DomainError::not_found(format!("no webhook delivery {id}")))
    }

    /// The URL as the address rules accept it, its name resolved to public addresses only
    /// (`BAD_USER_INPUT` with the rule otherwise). Every attempt checks the addresses again.
    async fn endpoint_url(&self, url: &str) -> Result<String, DomainError> {
        let insecure = self.rules.insecure_webhooks;
        let refused =
            |why: String| DomainError::bad_input(format!("the endpoint URL is refused: {why}"));
        let checked = check_url(url, insecure).map_err(refused)?;
        if let (false, Some(url::Host::Domain(name))) = (insecure, checked.host()) {
            let port = checked.port_or_known_default().unwrap_or(443);
            let found = tokio::net::lookup_host((name, port))
                .await
                .map_err(|e| refused(format!("{name} cannot be resolved ({e})")))?;
            for address in found {
                if !crate::webhooks::is_public(address.ip()) {
                    return Err(refused(format!(
                        "{name} resolves to {}, a private address",
                        address.ip()
                    )));
                }
            }
        }
        Ok(checked.to_string())
    }
}

/// The kinds an endpoint gets: every kind, or a list that names at least one.
fn kinds(events: Option<Vec<EventType>>) -> Result<Option<Vec<EventType>>, DomainError> {
    match events {
        Some(list) if list.is_empty() => Err(DomainError::bad_input(
            "events names no kind: leave it out (or null) to get every kind",
        )),
        Some(list) => {
            let mut unique = Vec::new();
            for kind in list {
                if !unique.contains(&kind) {
                    unique.push(kind);
                }
            }
            Ok(Some(unique))
        }
        None => Ok(None),
    }
}

fn description(text: Option<String>) -> Result<Option<String>, DomainError> {
    match text {
        Some(text) if text.chars().count() > MAX_DESCRIPTION => Err(DomainError::bad_input(
            format!("a description has at most {MAX_DESCRIPTION} characters"),
        )),
        Some(text) if text.trim().is_empty() => Ok(None),
        other => Ok(other),
    }
}

fn no_endpoint(id: &str) -> DomainError {
    DomainError::not_found(format!("no webhook endpoint {id}"))
}
