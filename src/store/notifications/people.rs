//! People (`people`): one document per person who set something or has a verified address,
//! `_id` their user id. `mail_due` (sparse, indexed) is when their next message is due; a
//! mailer claims it by moving it to the end of its lease. `ignoring` (sparse, multikey) holds
//! the ids of the people they ignore.

use futures::TryStreamExt;
use mongodb::bson::{doc, Document};
use mongodb::options::IndexOptions;
use mongodb::IndexModel;

use super::codec::{person_of, settings_doc};
use crate::domain::notifications::NotificationSettings;
use crate::domain::Micros;
use crate::store::api::Person;
use crate::store::shared::error::{as_limit, is_duplicate_key, StoreError, StoreResult};
use crate::store::shared::metrics::Counted;

/// People read at once by id (an `$in` of this many, at most).
const BATCH: usize = 1_000;

/// The field of the ids a person ignores (an array, indexed: a person's erasure finds and
/// removes their id from every list with it).
pub(crate) const IGNORING: &str = "ignoring";

/// People by when their message is due, and by the ids they ignore.
pub(super) async fn ensure_indexes(people: &Counted<Document>) -> StoreResult<()> {
    people
        .create_index(
            IndexModel::builder()
                .keys(doc! { IGNORING: 1 })
                .options(
                    IndexOptions::builder()
                        .name(IGNORING.to_owned())
                        .sparse(true)
                        .build(),
                )
                .build(),
        )
        .await?;
    people
        .create_index(
            IndexModel::builder()
                .keys(doc! { "mail_due": 1 })
                .options(
                    IndexOptions::builder()
                        .name("mail_due".to_owned())
                        .sparse(true)
                        .build(),
                )
                .build(),
        )
        .await?;
    Ok(())
}

/// The person `user`.
pub(super) async fn person(people: &Counted<Document>, user: &str) -> StoreResult<Option<Person>> {
    people
        .find_one(doc! { "_id": user })
        .await?
        .map(|d| person_of(&d))
        .transpose()
}

/// The ids `user` ignores, in the order they were added: one read by `_id`, of that field.
pub(super) async fn ignoring(people: &Counted<Document>, user: &str) -> StoreResult<Vec<String>> {
    let found = people
        .find_one(doc! { "_id": user })
        .projection(doc! { "_id": 0, IGNORING: 1 })
        .await?;
    let Some(found) = found else {
        return Ok(Vec::new());
    };
    match found.get_array(IGNORING) {
        Ok(ids) => ids
            .iter()
            .map(|id| {
                id.as_str().map(str::to_owned).ok_or_else(|| {
                    StoreError::Corrupt(format!("person {user}: an ignored id is {id}"))
                })
            })
            .collect(),
        Err(_) => Ok(Vec::new()),
    }
}

/// Adds `target` to the ids `user` ignores (`ignored`), or takes it out, in one update. A list
/// holds at most `cap` ids: adding one more to a full list changes nothing and says `false`.
pub(super) async fn set_ignoring(
    people: &Counted<Document>,
    user: &str,
    target: &str,
    ignored: bool,
    cap: usize,
) -> StoreResult<bool> {
    if !ignored {
        people
            .update_one(doc! { "_id": user }, doc! { "$pull": { IGNORING: target } })
            .await?;
        return Ok(true);
    }
    // Room for one more, or the id is in the list already.
    let last = format!("{IGNORING}.{}", cap.saturating_sub(1));
    let filter = doc! {
        "_id": user,
        "$or": [ { last: { "$exists": false } }, { IGNORING: target } ],
    };
    let done = people
        .update_one(filter, doc! { "$addToSet": { IGNORING: target } })
        .upsert(true)
        .await;
    match done {
        Ok(_) => Ok(true),
        // The list is full (the filter missed, and the insert found the person).
        Err(err) if is_duplicate_key(&err) => Ok(false),
        Err(err) => Err(err.into()),
    }
}

/// Stores `user`'s settings.
pub(super) async fn set_settings(
    people: &Counted<Document>,
    user: &str,
    settings: &NotificationSettings,
) -> StoreResult<()> {
    people
        .update_one(
            doc! { "_id": user },
            doc! { "$set": { "settings": settings_doc(settings) } },
        )
        .upsert(true)
        .await?;
    Ok(())
}

/// Keeps `address` as `user`'s, unless it is kept already (then nothing is written).
pub(super) async fn remember_address(
    people: &Counted<Document>,
    user: &str,
    address: &str,
) -> StoreResult<()> {
    let done = people
        .update_one(
            doc! { "_id": user, "address": { "$ne": address } },
            doc! { "$set": { "address": address, "address_at": Micros::now().0 } },
        )
        .upsert(true)
        .await;
    match done {
        Ok(_) => Ok(()),
        // The person has that address already (the filter missed, and the insert found them).
        Err(err) if is_duplicate_key(&err) => Ok(()),
        Err(err) => Err(err.into()),
    }
}

/// Of `users`, those with an address.
pub(super) async fn with_address(
    people: &Counted<Document>,
    users: &[String],
) -> StoreResult<Vec<Person>> {
    let mut found = Vec::new();
    for batch in users.chunks(BATCH) {
        let docs: Vec<Document> = people
            .find(doc! { "_id": { "$in": batch }, "address": { "$exists": true } })
            .await?
            .try_collect()
            .await?;
        for doc in &docs {
            found.push(person_of(doc)?);
        }
    }
    Ok(found)
}

/// Makes `user`'s message due at `due` at the latest.
pub(super) async fn mail_due(
    people: &Counted<Document>,
    user: &str,
    due: Micros,
) -> StoreResult<()> {
    people
        .update_one(doc! { "_id": user }, doc! { "$min": { "mail_due": due.0 } })
        .await?;
    Ok(())
}

/// Claims the people whose message is due: each by moving its due time to `until`, on
/// condition that it is as read (one claimant wins each).
pub(super) async fn claim_mail(
    people: &Counted<Document>,
    now: Micros,
    until: Micros,
    limit: usize,
) -> StoreResult<Vec<Person>> {
    let Some(limit) = as_limit(limit) else {
        return Ok(Vec::new());
    };
    let due: Vec<Document> = people
        .find(doc! { "mail_due": { "$lte": now.0 } })
        .sort(doc! { "mail_due": 1 })
        .limit(limit)
        .await?
        .try_collect()
        .await?;
    let mut claimed = Vec::new();
    for doc in &due {
        let mut person = person_of(doc)?;
        let Some(was) = person.mail_due else {
            continue;
        };
        let won = people
            .update_one(
                doc! { "_id": &person.id, "mail_due": was.0 },
                doc! { "$set": { "mail_due": until.0 } },
            )
            .await?;
        if won.modified_count == 1 {
            person.mail_due = Some(until);
            claimed.push(person);
        }
    }
    Ok(claimed)
}

/// Records a message (or a message given up): mailed at `at`, and not due any more unless a
/// notification made it due again since the claim.
pub(super) async fn mailed(
    people: &Counted<Document>,
    user: &str,
    at: Option<Micros>,
    claimed: Micros,
) -> StoreResult<()> {
    let update = match at {
        Some(at) => doc! { "$set": { "last_mailed": at.0 }, "$unset": { "mail_tries": "" } },
        None => doc! { "$unset": { "mail_tries": "" } },
    };
    people.update_one(doc! { "_id": user }, update).await?;
    people
        .update_one(
            doc! { "_id": user, "mail_due": claimed.0 },
            doc! { "$unset": { "mail_due": "" } },
        )
        .await?;
    Ok(())
}

/// Records a failed try: due again at `retry`.
pub(super) async fn mail_failed(
    people: &Counted<Document>,
    user: &str,
    tries: u32,
    retry: Micros,
) -> StoreResult<()> {
    people
        .update_one(
            doc! { "_id": user },
            doc! { "$set": { "mail_due": retry.0, "mail_tries": i64::from(tries) } },
        )
        .await?;
    Ok(())
}
