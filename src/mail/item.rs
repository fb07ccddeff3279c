//! The notifications a message is made of, and how they group by discussion.

/// What happened, for one notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemKind {
    /// Someone replied to the recipient's comment.
    Reply,
    /// A moderator approved or rejected the recipient's comment.
    Moderation,
    /// A new comment in a discussion the recipient follows.
    Followed,
}

/// One notification in a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// What happened.
    pub kind: ItemKind,
    /// The discussion's id.
    pub discussion_id: String,
    /// The discussion's title (user text).
    pub discussion_title: String,
    /// The comment's link, built by the caller (the discussion's URL + `#comment-<slug>`).
    pub link: String,
    /// Who wrote the comment (user text).
    pub actor_name: Option<String>,
    /// The comment's html, already sanitised: it goes into the html part as it is.
    pub comment_html: Option<String>,
    /// The comment's Markdown source, for the text part.
    pub comment_text: Option<String>,
    /// Why a moderator decided as they did (user text).
    pub reason: Option<String>,
    /// For [`ItemKind::Moderation`]: approved (`true`) or rejected (`false`).
    pub approved: Option<bool>,
}

/// The items of one discussion, in the order they came.
#[derive(Debug)]
pub(super) struct Discussion<'a> {
    /// The discussion's id.
    pub(super) id: &'a str,
    /// The title of its first item.
    pub(super) title: &'a str,
    /// Its items.
    pub(super) items: Vec<&'a Item>,
}

/// `items` grouped by discussion, in the order each discussion first comes.
pub(super) fn by_discussion(items: &[Item]) -> Vec<Discussion<'_>> {
    let mut discussions: Vec<Discussion<'_>> = Vec::new();
    for item in items {
        match discussions.iter_mut().find(|d| d.id == item.discussion_id) {
            Some(discussion) => discussion.items.push(item),
            None => discussions.push(Discussion {
                id: &item.discussion_id,
                title: &item.discussion_title,
                items: vec![item],
            }),
        }
    }
    discussions
}
