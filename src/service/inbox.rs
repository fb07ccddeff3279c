//! A person's own notifications: following discussions, marking notifications read, their
//! settings, their verified address, and the live stream of what they are notified of.
//!
//! These change only the caller's own data, so they take the signed-in identity as it is: a
//! banned person may still read and silence their notifications, and the per-user allowance
//! of operations (not the rate of posts) bounds them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use futures::stream::{BoxStream, StreamExt};
use tokio::sync::broadcast;

use super::Services;
use crate::domain::notifications::{Notification, NotificationSettings};
use crate::domain::{Author, Discussion, DiscussionId, DomainError, EmailFrequency, Micros};
use crate::store::DynStorage;

/// Notifications stored and not yet taken by this process's subscribers, at most.
const BACKLOG: usize = 1_024;
/// Addresses this process remembers having stored (so a request stores one once).
const ADDRESSES: usize = 10_000;

/// What the notification settings depend on, from config.
#[derive(Debug, Clone, Copy)]
pub struct MailRules {
    /// Whether mail can be sent (an SMTP server is set).
    pub enabled: bool,
    /// How often a person who set nothing is mailed.
    pub default: EmailFrequency,
}

/// This process's live notifications: one stream of what is stored (on any replica), opened
/// at the first subscription and shared by every subscriber, each taking their own.
#[derive(Clone)]
pub(super) struct Inboxes {
    sender: broadcast::Sender<Arc<Notification>>,
    opened: Arc<OnceLock<()>>,
    /// The addresses stored by this process, by person.
    addresses: Arc<Mutex<HashMap<String, String>>>,
}

impl Inboxes {
    pub(super) fn new() -> Self {
        Self {
            sender: broadcast::channel(BACKLOG).0,
            opened: Arc::default(),
            addresses: Arc::default(),
        }
    }

    /// Opens the stream of what is stored, once.
    fn open(&self, storage: &DynStorage) {
        self.opened.get_or_init(|| {
            let (storage, sender) = (storage.clone(), self.sender.clone());
            tokio::spawn(async move {
                let mut received = storage.notifications().received();
                while let Some(notification) = received.next().await {
                    let _ = sender.send(Arc::new(notification));
                }
            });
        });
    }

    /// `recipient`'s notifications from now on.
    fn subscribe(
        &self,
        storage: &DynStorage,
        recipient: String,
    ) -> BoxStream<'static, Notification> {
        let receiver = self.sender.subscribe();
        self.open(storage);
        futures::stream::unfold(receiver, move |mut receiver| {
            let recipient = recipient.clone();
            async move {
                loop {
                    match receiver.recv().await {
                        Ok(n) if n.recipient == recipient => return Some(((*n).clone(), receiver)),
                        Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                        Err(broadcast::error::RecvError::Closed) => return None,
                    }
                }
            }
        })
        .boxed()
    }
}

impl Services {
    /// Follows or unfollows a discussion for `author`; the discussion (`NOT_FOUND` when there
    /// is none).
    pub async fn follow_discussion(
        &self,
        author: &Author,
        id: DiscussionId,
        follow: bool,
    ) -> Result<Arc<Discussion>, DomainError> {
        let discussion = self.read_discussion(&id).await?;
        self.storage
            .notifications()
            .follow(&author.id, &id, follow, Micros::now())
            .await?;
        Ok(discussion)
    }

    /// Marks `author`'s notifications read: those up to `up_to` (an id of theirs), or all;
    /// how many changed.
    pub async fn mark_notifications_read(
        &self,
        author: &Author,
        up_to: Option<&str>,
    ) -> Result<u64, DomainError> {
        if up_to.is_some_and(|id| id.len() > 600) {
            return Err(DomainError::BadInput(
                "`upTo` is not a notification id".into(),
            ));
        }
        Ok(self
            .storage
            .notifications()
            .mark_read(&author.id, up_to)
            .await?)
    }

    /// `author`'s settings (the site's defaults until they set some).
    pub async fn notification_settings(
        &self,
        author: &Author,
    ) -> Result<NotificationSettings, DomainError> {
        let person = self.storage.notifications().person(&author.id).await?;
        Ok(person
            .and_then(|p| p.settings)
            .unwrap_or_else(|| NotificationSettings::defaults(self.mail.default)))
    }

    /// Stores `author`'s settings. Mail other than `NEVER` needs an SMTP server
    /// (`BAD_USER_INPUT` without one).
    pub async fn set_notification_settings(
        &self,
        author: &Author,
        settings: NotificationSettings,
    ) -> Result<NotificationSettings, DomainError> {
        if settings.email != EmailFrequency::Never && !self.mail.enabled {
            return Err(DomainError::BadInput(
                "this server sends no e-mail (no SMTP server is set): `email` must be NEVER".into(),
            ));
        }
        self.storage
            .notifications()
            .set_settings(&author.id, &settings)
            .await?;
        Ok(settings)
    }

    /// Turns e-mail off for the person an unsubscribe link's `token` names (the one-click
    /// unsubscribe, no sign-in); who that is. `BAD_USER_INPUT` for a token this server did not
    /// sign for anyone.
    pub async fn unsubscribe_with(&self, token: &str) -> Result<String, DomainError> {
        let user = self
            .unsubscribe_tokens
            .verify(token)
            .ok_or_else(|| DomainError::BadInput("this unsubscribe link is not valid".into()))?;
        self.unsubscribe(&user).await?;
        Ok(user)
    }

    /// The person an unsubscribe link's `token` names, if this server signed it.
    pub fn check_unsubscribe(&self, token: &str) -> Option<String> {
        self.unsubscribe_tokens.verify(token)
    }

    /// Turns `user`'s e-mail off.
    pub async fn unsubscribe(&self, user: &str) -> Result<(), DomainError> {
        let author = Author {
            id: user.to_owned(),
            name: String::new(),
        };
        let mut settings = self.notification_settings(&author).await?;
        settings.email = EmailFrequency::Never;
        self.storage
            .notifications()
            .set_settings(user, &settings)
            .await?;
        Ok(())
    }

    /// Keeps `address` as `user`'s verified address: one write the first time this process
    /// sees it, none after.
    pub async fn remember_address(&self, user: &str, address: &str) -> Result<(), DomainError> {
        let known = |map: &HashMap<String, String>| map.get(user).is_some_and(|a| a == address);
        if known(
            &self
                .inboxes
                .addresses
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        ) {
            return Ok(());
        }
        self.storage
            .notifications()
            .remember_address(user, address)
            .await?;
        let mut addresses = self
            .inboxes
            .addresses
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if addresses.len() >= ADDRESSES {
            addresses.clear();
        }
        addresses.insert(user.to_owned(), address.to_owned());
        Ok(())
    }

    /// Whether mail can be sent, and the default frequency.
    pub fn mail_rules(&self) -> MailRules {
        self.mail
    }

    /// Opens this process's stream of stored notifications now, so that a subscription made
    /// later hears everything stored from its start (one opened on the first subscription could
    /// miss what is stored while it opens).
    pub fn follow_notifications(&self) {
        self.inboxes.open(&self.storage);
    }

    /// `recipient`'s notifications from now on, as they are stored on any replica.
    pub fn notifications_received(&self, recipient: &str) -> BoxStream<'static, Notification> {
        self.inboxes.subscribe(&self.storage, recipient.to_owned())
    }
}
