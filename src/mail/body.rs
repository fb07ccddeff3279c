//! The two bodies of a notification message, text/plain and text/html, with the same content:
//! per discussion its title, per item what happened, the comment and a link to it, and a footer
//! with the unsubscribe link. In the html every piece of user text is escaped, except the
//! comment's html, which was sanitised when the comment was stored.

use std::fmt::Write as _;

use super::clean::{one_line, shortened, title_line};
use super::item::{Discussion, Item, ItemKind};

/// The longest name of a person in a body, in characters.
const MAX_NAME_CHARS: usize = 100;

/// The text/plain part.
pub(super) fn text(discussions: &[Discussion<'_>], unsubscribe_url: &str) -> String {
    let mut out = String::new();
    if discussions.is_empty() {
        out.push_str("You have no new notifications.\n\n");
    }
    for discussion in discussions {
        let _ = writeln!(out, "“{}”\n", title_line(discussion.title));
        for item in &discussion.items {
            let _ = writeln!(out, "{}", headline(item));
            if let Some(reason) = reason(item) {
                let _ = writeln!(out, "Reason: {reason}");
            }
            if let Some(comment) = item.comment_text.as_deref() {
                out.push('\n');
                for line in plain_text(comment).lines() {
                    let _ = writeln!(out, "> {line}");
                }
            }
            if let Some(link) = web_link(&item.link) {
                let _ = writeln!(out, "\n{}: {link}", link_label(item));
            }
            out.push('\n');
        }
    }
    out.push_str("-- \nYou get these e-mails because you turned on notifications.\n");
    if let Some(url) = web_link(unsubscribe_url) {
        let _ = writeln!(out, "Unsubscribe with one click: {url}");
    }
    out
}

/// The text/html part.
pub(super) fn html(discussions: &[Discussion<'_>], unsubscribe_url: &str) -> String {
    let mut out = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"></head>\
         <body style=\"font-family: sans-serif; line-height: 1.4;\">\n",
    );
    if discussions.is_empty() {
        out.push_str("<p>You have no new notifications.</p>\n");
    }
    for discussion in discussions {
        let _ = writeln!(
            out,
            "<h2 style=\"font-size: 1.1em;\">“{}”</h2>",
            escape(&title_line(discussion.title))
        );
        for item in &discussion.items {
            out.push_str("<div style=\"margin: 0 0 1.5em 0;\">\n");
            let _ = writeln!(out, "<p>{}</p>", escape(&headline(item)));
            if let Some(reason) = reason(item) {
                let _ = writeln!(out, "<p>Reason: {}</p>", escape(&reason));
            }
            if let Some(comment) = item.comment_html.as_deref() {
                let _ = writeln!(
                    out,
                    "<blockquote style=\"margin: 0 0 0.5em 0; padding-left: 1em; \
                     border-left: 3px solid #ccc;\">{comment}</blockquote>"
                );
            }
            if let Some(link) = web_link(&item.link) {
                let _ = writeln!(
                    out,
                    "<p><a href=\"{}\">{}</a></p>",
                    escape(link),
                    link_label(item)
                );
            }
            out.push_str("</div>\n");
        }
    }
    out.push_str(
        "<hr>\n<p style=\"font-size: 0.85em; color: #666;\">\
         You get these e-mails because you turned on notifications.",
    );
    if let Some(url) = web_link(unsubscribe_url) {
        let _ = write!(
            out,
            " <a href=\"{}\">Unsubscribe with one click</a>.",
            escape(url)
        );
    }
    out.push_str("</p>\n</body></html>\n");
    out
}

/// What happened, in one sentence.
fn headline(item: &Item) -> String {
    let actor = item
        .actor_name
        .as_deref()
        .map(|name| shortened(&one_line(name), MAX_NAME_CHARS))
        .filter(|name| !name.is_empty());
    match (item.kind, actor, item.approved) {
        (ItemKind::Reply, Some(actor), _) => format!("{actor} replied to you:"),
        (ItemKind::Reply, None, _) => "Someone replied to you:".to_owned(),
        (ItemKind::Moderation, _, Some(true)) => "Your comment was approved.".to_owned(),
        (ItemKind::Moderation, _, Some(false)) => "Your comment was rejected.".to_owned(),
        (ItemKind::Moderation, _, None) => "Your comment was moderated.".to_owned(),
        (ItemKind::Followed, Some(actor), _) => format!("{actor} commented:"),
        (ItemKind::Followed, None, _) => "New comment:".to_owned(),
    }
}

/// The item's reason on one line, when it has one.
fn reason(item: &Item) -> Option<String> {
    item.reason
        .as_deref()
        .map(one_line)
        .filter(|reason| !reason.is_empty())
}

/// The words of the link to the item's comment.
fn link_label(item: &Item) -> &'static str {
    match item.kind {
        ItemKind::Reply => "View the reply",
        ItemKind::Moderation => "View your comment",
        ItemKind::Followed => "View the comment",
    }
}

/// `link` when it is an http or https URL (nothing else is ever made a link).
fn web_link(link: &str) -> Option<&str> {
    let lower = link.get(..8).unwrap_or(link).to_ascii_lowercase();
    let web = lower.starts_with("https://") || lower.starts_with("http://");
    (web && !link.chars().any(char::is_whitespace)).then_some(link)
}

/// A comment's Markdown for the text part: line breaks as `\n`, no other control characters.
fn plain_text(text: &str) -> String {
    text.replace("\r\n", "\n")
        .chars()
        .filter(|&c| c == '\n' || c == '\t' || !c.is_control())
        .collect()
}

/// `text` escaped for html text and attribute values.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
