//! The notification settings: how long notifications are kept, and e-mail (the SMTP server,
//! the sender, the default frequency, the batching periods).

use clap::Args;

use crate::domain::notifications::EmailFrequency;

/// Parses an e-mail frequency (`never`, `immediate`, `hourly`, `daily`).
fn parse_frequency(raw: &str) -> Result<EmailFrequency, String> {
    EmailFrequency::from_name(raw.trim())
        .ok_or_else(|| format!("`{raw}` is not one of never, immediate, hourly, daily"))
}

/// How people are notified.
#[derive(Clone, Args)]
pub struct NotifySettings {
    /// Days a notification is kept.
    #[arg(long = "notification-retention-days", env = "THREADQL_NOTIFICATION_RETENTION_DAYS", default_value_t = 90, value_parser = clap::value_parser!(u64).range(1..=3650), global = true)]
    pub retention_days: u64,
    /// The SMTP server mail goes through: `smtp://host:port` (STARTTLS when offered),
    /// `smtp+starttls://…` (STARTTLS required), `smtps://…` (TLS), with `user:password@` for
    /// AUTH. Without it, no mail is sent.
    #[arg(
        long = "smtp-url",
        env = "THREADQL_SMTP_URL",
        global = true,
        hide_env_values = true
    )]
    pub smtp_url: Option<String>,
    /// The sender of every message (`Name <address>` or an address).
    #[arg(long = "mail-from", env = "THREADQL_MAIL_FROM", global = true)]
    pub mail_from: Option<String>,
    /// How often a person who set nothing is mailed (`never`: mail is opt-in; a site that
    /// collected consent elsewhere may choose another).
    #[arg(long = "email-default", env = "THREADQL_EMAIL_DEFAULT", default_value = "never", value_parser = parse_frequency, global = true)]
    pub email_default: EmailFrequency,
    /// Least seconds between two messages to one person mailed immediately.
    #[arg(long = "email-min-interval-secs", env = "THREADQL_EMAIL_MIN_INTERVAL_SECS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86_400), global = true)]
    pub min_interval_secs: u64,
    /// The period of an hourly digest, in seconds (shorter in tests).
    #[arg(long = "email-hourly-secs", env = "THREADQL_EMAIL_HOURLY_SECS", default_value_t = 3_600, value_parser = clap::value_parser!(u64).range(1..=86_400), global = true)]
    pub hourly_secs: u64,
    /// The period of a daily digest, in seconds.
    #[arg(long = "email-daily-secs", env = "THREADQL_EMAIL_DAILY_SECS", default_value_t = 86_400, value_parser = clap::value_parser!(u64).range(1..=7 * 86_400), global = true)]
    pub daily_secs: u64,
    /// Seconds before a message that failed for now (a 4xx answer, no connection) is tried
    /// again; doubled for each further try, up to an hour, 8 tries in all.
    #[arg(long = "email-retry-secs", env = "THREADQL_EMAIL_RETRY_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3_600), global = true)]
    pub retry_secs: u64,
}

impl std::fmt::Debug for NotifySettings {
    /// Everything but the SMTP URL's credentials (its scheme, host and port are shown).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let smtp = self
            .smtp_url
            .as_deref()
            .map(|raw| match url::Url::parse(raw) {
                Ok(url) => format!(
                    "{}://{}:{}",
                    url.scheme(),
                    url.host_str().unwrap_or_default(),
                    url.port().map_or_else(String::new, |p| p.to_string())
                ),
                Err(_) => "(not a URL)".to_owned(),
            });
        f.debug_struct("NotifySettings")
            .field("retention_days", &self.retention_days)
            .field("smtp_url", &smtp)
            .field("mail_from", &self.mail_from)
            .field("email_default", &self.email_default)
            .field("min_interval_secs", &self.min_interval_secs)
            .field("hourly_secs", &self.hourly_secs)
            .field("daily_secs", &self.daily_secs)
            .field("retry_secs", &self.retry_secs)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smtp_password_never_shows_in_the_settings_debug_form() {
        let settings = NotifySettings {
            retention_days: 90,
            smtp_url: Some("smtps://mailer:hunter2@mail.example.com:465".into()),
            mail_from: None,
            email_default: EmailFrequency::Never,
            min_interval_secs: 300,
            hourly_secs: 3600,
            daily_secs: 86_400,
            retry_secs: 30,
        };
        let shown = format!("{settings:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("mailer"),
            "{shown}"
        );
        assert!(shown.contains("smtps://mail.example.com:465"), "{shown}");
        assert!(parse_frequency("weekly").is_err());
        assert_eq!(parse_frequency("DAILY"), Ok(EmailFrequency::Daily));
    }
}
