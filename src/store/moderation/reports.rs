//! Reading reports back for moderators: a comment's reports are the range of `reports` ids that
//! start with `<discussion>:<slug>:` (each id ends with its reporter), so the reports of a page
//! of queued comments are one `find` over one range per comment.

use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};

use super::held::HeldComments;
use crate::domain::{DiscussionId, Micros, ReportReason, Slug};
use crate::store::api::Report;
use crate::store::shared::bson::corrupt;
use crate::store::shared::error::StoreResult;

/// The first id of a comment's reports, and the first id past them (`;` follows `:`).
fn range(discussion: &DiscussionId, slug: &Slug) -> (String, String) {
    (
        format!("{discussion}:{slug}:"),
        format!("{discussion}:{slug};"),
    )
}

impl HeldComments {
    /// The reports of each comment, oldest first, at most `each` per comment, in one command.
    pub(super) async fn reports_of_comments(
        &self,
        comments: &[(DiscussionId, Slug)],
        each: usize,
    ) -> StoreResult<Vec<Report>> {
        if comments.is_empty() || each == 0 {
            return Ok(Vec::new());
        }
        let ranges: Vec<Bson> = comments
            .iter()
            .map(|(discussion, slug)| {
                let (from, to) = range(discussion, slug);
                Bson::Document(doc! { "_id": { "$gte": from, "$lt": to } })
            })
            .collect();
        let docs: Vec<Document> = self
            .reports_collection()
            .find(doc! { "$or": ranges })
            .sort(doc! { "_id": 1 })
            .await?
            .try_collect()
            .await?;
        let mut reports: Vec<Report> = Vec::new();
        for doc in &docs {
            let report = report_of(doc)?;
            let kept = reports
                .iter()
                .filter(|r| r.discussion == report.discussion && r.slug == report.slug)
                .count();
            if kept < each {
                reports.push(report);
            }
        }
        reports.sort_by_key(|r| r.at);
        Ok(reports)
    }
}

/// A stored report.
pub(crate) fn report_of(doc: &Document) -> StoreResult<Report> {
    let text = |field: &str| {
        doc.get_str(field)
            .map_err(|_| corrupt(format!("a report without its {field}")))
    };
    let reason = match text("reason")? {
        "spam" => ReportReason::Spam,
        "abuse" => ReportReason::Abuse,
        "off_topic" => ReportReason::OffTopic,
        "other" => ReportReason::Other,
        other => return Err(corrupt(format!("a report of unknown reason {other:?}"))),
    };
    Ok(Report {
        discussion: DiscussionId::parse(text("discussion_id")?)
            .map_err(|e| corrupt(format!("a report's discussion: {e}")))?,
        slug: Slug::parse(text("slug")?).map_err(|e| corrupt(format!("a report's slug: {e}")))?,
        reporter: text("reporter")?.to_owned(),
        reason,
        note: doc.get_str("note").ok().map(str::to_owned),
        at: Micros(
            doc.get_i64("at")
                .map_err(|_| corrupt("a report without its time"))?,
        ),
    })
}
