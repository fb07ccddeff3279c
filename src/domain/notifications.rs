//! Notifications: who hears of an event, and what each person asked to be told.
//!
//! An event of the log becomes notifications by [`plan`]: the author of the parent comment
//! hears of a reply (`Reply`), the author of a held comment of its approval or rejection
//! (`Moderation`), and the followers of a discussion of every comment made public in it
//! (`Followed`). Nobody hears of their own action, and one comment gives a person at most one
//! notification (a reply wins over a follow): its `once` key is the same for both.

use crate::domain::{Approval, Author, DiscussionId, EventRecord, EventType, Micros, Slug};

/// Why a person is notified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotificationKind {
    /// A reply to their comment became public.
    Reply,
    /// A moderator approved or rejected their held comment.
    Moderation,
    /// A comment became public in a discussion they follow.
    Followed,
}

impl NotificationKind {
    /// Every kind.
    pub const ALL: [NotificationKind; 3] = [
        NotificationKind::Reply,
        NotificationKind::Moderation,
        NotificationKind::Followed,
    ];

    /// Its stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            NotificationKind::Reply => "reply",
            NotificationKind::Moderation => "moderation",
            NotificationKind::Followed => "followed",
        }
    }

    /// The kind a stored name names.
    pub fn from_name(name: &str) -> Option<NotificationKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// How often a person is mailed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EmailFrequency {
    /// Never (the default: mail is opt-in).
    Never,
    /// Soon after each notification, at most one message per interval.
    Immediate,
    /// One digest an hour, when something is unread.
    Hourly,
    /// One digest a day, when something is unread.
    Daily,
}

impl EmailFrequency {
    /// Every frequency.
    pub const ALL: [EmailFrequency; 4] = [
        EmailFrequency::Never,
        EmailFrequency::Immediate,
        EmailFrequency::Hourly,
        EmailFrequency::Daily,
    ];

    /// Its stored name (also the setting's value).
    pub fn as_str(self) -> &'static str {
        match self {
            EmailFrequency::Never => "never",
            EmailFrequency::Immediate => "immediate",
            EmailFrequency::Hourly => "hourly",
            EmailFrequency::Daily => "daily",
        }
    }

    /// The frequency a name names (any case).
    pub fn from_name(name: &str) -> Option<EmailFrequency> {
        Self::ALL
            .into_iter()
            .find(|f| f.as_str().eq_ignore_ascii_case(name))
    }
}

/// What a person asked to be told, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotificationSettings {
    /// How often they are mailed.
    pub email: EmailFrequency,
    /// Mail about replies to their comments.
    pub on_reply: bool,
    /// Mail about the moderation of their comments.
    pub on_moderation: bool,
    /// Mail about discussions they follow.
    pub on_followed: bool,
}

impl NotificationSettings {
    /// The settings of a person who set none: every kind on, mailed `email` (the site's default).
    pub fn defaults(email: EmailFrequency) -> Self {
        Self {
            email,
            on_reply: true,
            on_moderation: true,
            on_followed: true,
        }
    }

    /// Whether a notification of `kind` is mailed.
    pub fn mails(&self, kind: NotificationKind) -> bool {
        self.email != EmailFrequency::Never
            && match kind {
                NotificationKind::Reply => self.on_reply,
                NotificationKind::Moderation => self.on_moderation,
                NotificationKind::Followed => self.on_followed,
            }
    }
}

/// The periods that pace a person's mail, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MailPace {
    /// Least time between two messages to a person mailed immediately.
    pub min_interval: i64,
    /// An hourly digest's period.
    pub hourly: i64,
    /// A daily digest's period.
    pub daily: i64,
}

impl MailPace {
    /// When a person mailed `frequency`, last at `last`, gets their next message, for a
    /// notification at `now` (`None`: never). Immediately: at once, or once the interval since
    /// the last message has passed. A digest: at the end of the period `now` is in (periods
    /// counted from the Unix epoch), so a period sends one at most.
    pub fn next(
        &self,
        frequency: EmailFrequency,
        last: Option<Micros>,
        now: Micros,
    ) -> Option<Micros> {
        let boundary = |period: i64| {
            let period = period.max(1);
            Micros((now.0.div_euclid(period) + 1).saturating_mul(period))
        };
        match frequency {
            EmailFrequency::Never => None,
            EmailFrequency::Immediate => {
                let after = last.map_or(now.0, |l| l.0.saturating_add(self.min_interval));
                Some(Micros(now.0.max(after)))
            }
            EmailFrequency::Hourly => Some(boundary(self.hourly)),
            EmailFrequency::Daily => Some(boundary(self.daily)),
        }
    }
}

/// One notification of one person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// `<event id>:<recipient>`: a re-run of the event's fan-out makes the same id.
    pub id: String,
    /// Who is notified.
    pub recipient: String,
    /// Why.
    pub kind: NotificationKind,
    /// When the event committed.
    pub at: Micros,
    /// Whether its recipient read it.
    pub read: bool,
    /// Its discussion.
    pub discussion: DiscussionId,
    /// The comment it is about.
    pub slug: Slug,
    /// Who acted (the replier, the moderator).
    pub actor: Author,
    /// A moderator's reason.
    pub reason: Option<String>,
    /// For `Moderation`: approved (`true`) or rejected.
    pub approved: Option<bool>,
}

impl Notification {
    /// What keeps one comment from notifying a person twice: the comment's for a reply or a
    /// follow (one of them, once), the event's for a moderation notice.
    pub fn once(&self) -> String {
        match self.kind {
            NotificationKind::Moderation => self.id.clone(),
            _ => format!("{}/{}", self.discussion.as_str(), self.slug.as_str()),
        }
    }
}

/// Who an event notifies, before the followers are read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// The notifications it makes on its own (a reply, a moderation notice).
    pub direct: Vec<Notification>,
    /// Whether the followers of its discussion hear of it (`Followed`).
    pub followers: bool,
    /// Who is never notified of it as a follower (the actor, the author, the direct ones).
    pub except: Vec<String>,
    /// Who the comment it makes public is by, when that is not who acted (an approval): the
    /// actor of its `Reply` and `Followed` notices.
    pub by: Option<Author>,
}

impl Plan {
    /// The `Followed` notification of `follower`, unless they are left out.
    pub fn followed(&self, record: &EventRecord, follower: &str) -> Option<Notification> {
        if !self.followers || self.except.iter().any(|e| e == follower) {
            return None;
        }
        let by = self.by.as_ref().unwrap_or(&record.actor);
        notice(record, follower, NotificationKind::Followed, by, None)
    }
}

/// Whether events of `kind` may notify anyone (the fan-out reads only those).
pub fn notifies(kind: EventType) -> bool {
    matches!(
        kind,
        EventType::CommentPosted | EventType::CommentApproved | EventType::CommentRejected
    )
}

/// Who `record` notifies, given the author of the comment it replies to (when it is a reply
/// and that comment is still there) and, for an approval, the author of the comment it
/// publishes as stored (their name; the id alone when the comment cannot be read).
pub fn plan(
    record: &EventRecord,
    parent_author: Option<&str>,
    published_by: Option<&Author>,
) -> Plan {
    let Some(author) = record.author.as_ref().map(|a| a.as_str()) else {
        return Plan::default();
    };
    let actor = record.actor.id.as_str();
    let published = match record.kind {
        EventType::CommentPosted => true,
        EventType::CommentApproved => {
            record.detail.as_deref().and_then(Approval::from_name) == Some(Approval::Published)
        }
        _ => false,
    };
    let mut direct = Vec::new();
    let moderated = match record.kind {
        EventType::CommentApproved => {
            match record.detail.as_deref().and_then(Approval::from_name) {
                Some(Approval::Published | Approval::Restored) => Some(true),
                _ => None,
            }
        }
        EventType::CommentRejected => Some(false),
        _ => None,
    };
    if let Some(approved) = moderated.filter(|_| author != actor) {
        direct.extend(notice(
            record,
            author,
            NotificationKind::Moderation,
            &record.actor,
            Some(approved),
        ));
    }
    if !published {
        return Plan {
            direct,
            ..Plan::default()
        };
    }
    // A reply or a follow tells of the comment's author, whoever published it.
    let by = (author != actor).then(|| match published_by {
        Some(by) if by.id == author => by.clone(),
        _ => Author {
            id: author.to_owned(),
            name: String::new(),
        },
    });
    let mut except = vec![actor.to_owned(), author.to_owned()];
    if let Some(parent) = parent_author.filter(|p| *p != actor && *p != author) {
        let from = by.as_ref().unwrap_or(&record.actor);
        direct.extend(notice(record, parent, NotificationKind::Reply, from, None));
        except.push(parent.to_owned());
    }
    Plan {
        direct,
        followers: true,
        except,
        by,
    }
}

/// The notification of `recipient` about `record`, telling of `actor`.
fn notice(
    record: &EventRecord,
    recipient: &str,
    kind: NotificationKind,
    actor: &Author,
    approved: Option<bool>,
) -> Option<Notification> {
    Some(Notification {
        id: format!("{}:{recipient}", record.id),
        recipient: recipient.to_owned(),
        kind,
        at: record.at,
        read: false,
        discussion: record.discussion.clone()?,
        slug: record.slug.clone()?,
        actor: actor.clone(),
        reason: record.reason.clone(),
        approved,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::UserId;

    fn record(kind: EventType, actor: &str, author: &str, detail: Option<&str>) -> EventRecord {
        EventRecord {
            id: "0000000000000001abcdefgh".into(),
            kind,
            at: Micros(1),
            actor: Author {
                id: actor.into(),
                name: actor.into(),
            },
            moderator: actor == "mod",
            discussion: Some(DiscussionId::generate()),
            slug: Some(Slug::parse("abcdefgh/ijklmnop").expect("slug")),
            author: Some(UserId::from_stored(author.into())),
            parent: Some(Slug::parse("abcdefgh").expect("slug")),
            user: None,
            reason: Some("off topic".into()),
            detail: detail.map(str::to_owned),
        }
    }

    fn who(plan: &Plan) -> Vec<(String, NotificationKind)> {
        plan.direct
            .iter()
            .map(|n| (n.recipient.clone(), n.kind))
            .collect()
    }

    #[test]
    fn a_reply_notifies_the_parents_author_and_the_followers_but_neither_twice() {
        let posted = record(EventType::CommentPosted, "bob", "bob", None);
        let plan = plan(&posted, Some("ada"), None);
        assert_eq!(who(&plan), vec![("ada".into(), NotificationKind::Reply)]);
        assert!(plan.followed(&posted, "ada").is_none(), "a reply wins");
        assert!(plan.followed(&posted, "bob").is_none(), "not of oneself");
        let followed = plan.followed(&posted, "cy").expect("a follower");
        assert_eq!(followed.kind, NotificationKind::Followed);
        assert_eq!(
            followed.once(),
            plan.direct[0].once(),
            "one key per comment"
        );
        assert_eq!(followed.id, "0000000000000001abcdefgh:cy");
    }

    #[test]
    fn nobody_hears_of_their_own_reply() {
        let posted = record(EventType::CommentPosted, "ada", "ada", None);
        assert!(plan(&posted, Some("ada"), None).direct.is_empty());
    }

    #[test]
    fn an_approval_that_publishes_notifies_like_a_post_and_tells_the_author() {
        let approved = record(EventType::CommentApproved, "mod", "bob", Some("published"));
        let bob = Author {
            id: "bob".into(),
            name: "Bob".into(),
        };
        let plan = plan(&approved, Some("ada"), Some(&bob));
        assert_eq!(
            who(&plan),
            vec![
                ("bob".into(), NotificationKind::Moderation),
                ("ada".into(), NotificationKind::Reply)
            ]
        );
        assert_eq!(plan.direct[0].approved, Some(true));
        assert_eq!(plan.direct[0].actor.id, "mod", "the moderator approved it");
        assert_eq!(plan.direct[1].actor, bob, "bob replied");
        assert!(plan.followed(&approved, "mod").is_none());
        assert!(plan.followed(&approved, "bob").is_none());
        let followed = plan.followed(&approved, "cy").expect("a follower");
        assert_eq!(followed.actor, bob, "bob wrote the comment");
    }

    #[test]
    fn an_approved_comment_that_cannot_be_read_names_its_author_by_id() {
        let approved = record(EventType::CommentApproved, "mod", "bob", Some("published"));
        let plan = plan(&approved, Some("ada"), None);
        assert_eq!(plan.direct[1].kind, NotificationKind::Reply);
        assert_eq!(plan.direct[1].actor.id, "bob");
        let stranger = Author {
            id: "eve".into(),
            name: "Eve".into(),
        };
        let plan = super::plan(&approved, Some("ada"), Some(&stranger));
        assert_eq!(
            plan.direct[1].actor.id, "bob",
            "only the author's own name is taken"
        );
    }

    #[test]
    fn a_restored_placeholder_tells_its_author_only_and_dismissed_reports_tell_nobody() {
        let restored = record(EventType::CommentApproved, "mod", "bob", Some("restored"));
        let restored = plan(&restored, Some("ada"), None);
        assert_eq!(
            who(&restored),
            vec![("bob".into(), NotificationKind::Moderation)]
        );
        assert!(!restored.followers);
        let dismissed = record(EventType::CommentApproved, "mod", "bob", Some("dismissed"));
        assert_eq!(plan(&dismissed, Some("ada"), None), Plan::default());
    }

    #[test]
    fn a_rejection_tells_the_author_with_the_reason_unless_they_rejected_it() {
        let rejected = record(EventType::CommentRejected, "mod", "bob", None);
        let plan = plan(&rejected, Some("ada"), None);
        assert_eq!(
            who(&plan),
            vec![("bob".into(), NotificationKind::Moderation)]
        );
        assert_eq!(plan.direct[0].approved, Some(false));
        assert_eq!(plan.direct[0].reason.as_deref(), Some("off topic"));
        assert!(!plan.followers);
        let own = record(EventType::CommentRejected, "bob", "bob", None);
        assert!(super::plan(&own, None, None).direct.is_empty());
    }

    #[test]
    fn other_events_notify_nobody() {
        for kind in [EventType::CommentHeld, EventType::CommentEdited] {
            assert!(!notifies(kind));
            assert_eq!(
                plan(&record(kind, "bob", "bob", None), Some("ada"), None),
                Plan::default()
            );
        }
    }

    #[test]
    fn immediate_mail_waits_out_the_interval_and_digests_wait_for_their_periods_end() {
        let pace = MailPace {
            min_interval: 300,
            hourly: 3_600,
            daily: 86_400,
        };
        let now = Micros(10_000);
        assert_eq!(pace.next(EmailFrequency::Never, None, now), None);
        assert_eq!(pace.next(EmailFrequency::Immediate, None, now), Some(now));
        assert_eq!(
            pace.next(EmailFrequency::Immediate, Some(Micros(9_900)), now),
            Some(Micros(10_200))
        );
        assert_eq!(
            pace.next(EmailFrequency::Immediate, Some(Micros(1_000)), now),
            Some(now)
        );
        assert_eq!(
            pace.next(EmailFrequency::Hourly, None, now),
            Some(Micros(10_800))
        );
        assert_eq!(
            pace.next(EmailFrequency::Daily, None, now),
            Some(Micros(86_400))
        );
    }

    #[test]
    fn settings_mail_only_kinds_that_are_on_and_never_when_off() {
        let mut settings = NotificationSettings::defaults(EmailFrequency::Immediate);
        assert!(NotificationKind::ALL.iter().all(|k| settings.mails(*k)));
        settings.on_followed = false;
        assert!(!settings.mails(NotificationKind::Followed));
        let never = NotificationSettings::defaults(EmailFrequency::Never);
        assert!(!never.mails(NotificationKind::Reply));
        assert_eq!(
            EmailFrequency::from_name("HOURLY"),
            Some(EmailFrequency::Hourly)
        );
        assert_eq!(EmailFrequency::from_name("weekly"), None);
    }
}
