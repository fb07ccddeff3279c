//! Notifications off the write path: the fan-out of the event log into people's inboxes, and
//! the mail that tells them.

pub mod fanout;
pub mod mail;
pub mod metrics;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

use crate::config::Config;
use crate::domain::ServerKey;
use fanout::FanOutRules;

/// How this process's notification fan-out works, from `config`.
pub fn fan_out_rules(config: &Config) -> FanOutRules {
    let settings = &config.notify;
    let secs = |s: u64| i64::try_from(s.saturating_mul(1_000_000)).unwrap_or(i64::MAX);
    FanOutRules {
        lease: Duration::from_secs(config.webhooks.lease_secs),
        mail: settings.smtp_url.is_some(),
        email_default: settings.email_default,
        pace: crate::domain::notifications::MailPace {
            min_interval: secs(settings.min_interval_secs),
            hourly: secs(settings.hourly_secs),
            daily: secs(settings.daily_secs),
        },
    }
}

/// The mail worker, when an SMTP server is set (`THREADQL_SMTP_URL`, with `THREADQL_MAIL_FROM`):
/// a bad URL or sender stops the start. Links use `THREADQL_PUBLIC_URL`, else the listener.
pub fn mail_worker(
    config: &Config,
    storage: crate::store::DynStorage,
    key: &ServerKey,
    addr: std::net::SocketAddr,
    metrics: Arc<crate::notify::metrics::NotifyMetrics>,
) -> anyhow::Result<Option<crate::notify::mail::MailWorker>> {
    let settings = &config.notify;
    let Some(mailer) = mailer_of(config)? else {
        return Ok(None);
    };
    let public_url = match &config.public_url {
        Some(public) => public.to_string().trim_end_matches('/').to_owned(),
        None => {
            tracing::warn!("THREADQL_SMTP_URL is set without THREADQL_PUBLIC_URL: e-mail links and unsubscribe links name http://{addr}");
            format!("http://{addr}")
        }
    };
    let rules = fan_out_rules(config);
    Ok(Some(crate::notify::mail::MailWorker::new(
        storage,
        mailer,
        crate::mail::UnsubscribeTokens::new(key),
        crate::notify::mail::MailRules {
            lease: Duration::from_secs(config.webhooks.lease_secs.max(60)),
            default: settings.email_default,
            pace: rules.pace,
            retry: Duration::from_secs(settings.retry_secs),
            public_url,
        },
        metrics,
    )))
}

/// The mailer `THREADQL_SMTP_URL` and `THREADQL_MAIL_FROM` say (`None` without a URL); a bad
/// URL, or a URL without a sender, is an error that names the setting.
pub fn mailer_of(config: &Config) -> anyhow::Result<Option<crate::mail::Mailer>> {
    let settings = &config.notify;
    let Some(url) = &settings.smtp_url else {
        return Ok(None);
    };
    let from = settings.mail_from.as_deref().context(
        "THREADQL_SMTP_URL is set without THREADQL_MAIL_FROM: set the sender of notification e-mail",
    )?;
    Ok(Some(crate::mail::Mailer::new(
        url,
        from,
        Duration::from_secs(60),
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(url: Option<&str>, from: Option<&str>) -> anyhow::Result<Option<crate::mail::Mailer>> {
        let mut config = Config::defaults().expect("the defaults");
        config.notify.smtp_url = url.map(str::to_owned);
        config.notify.mail_from = from.map(str::to_owned);
        mailer_of(&config)
    }

    #[tokio::test]
    async fn a_bad_smtp_url_or_a_missing_sender_stops_the_start_naming_the_setting() {
        assert!(with(None, None).expect("no mail").is_none());
        assert!(with(Some("smtp://127.0.0.1:2525"), Some("a@example.com"))
            .expect("a mailer")
            .is_some());
        let missing = with(Some("smtp://127.0.0.1:2525"), None).expect_err("no sender");
        assert!(
            missing.to_string().contains("THREADQL_MAIL_FROM"),
            "{missing}"
        );
        for bad in [
            "http://mail.example.com",
            "smtp://",
            "smtps://u:secret@mail.example.com:99999",
        ] {
            let refused = with(Some(bad), Some("a@example.com")).expect_err(bad);
            let shown = format!("{refused:#}");
            assert!(shown.contains("THREADQL_SMTP_URL"), "{bad}: {shown}");
            assert!(!shown.contains("secret"), "{bad}: {shown}");
        }
        let bad_from =
            with(Some("smtp://127.0.0.1:2525"), Some("not an address")).expect_err("from");
        assert!(
            format!("{bad_from:#}").contains("mail address"),
            "{bad_from:#}"
        );
    }
}
