//! `threadql migrate`: moves discussions between layouts from the command line, with a progress
//! bar, while servers keep serving them (see `store::moves`); and `threadql key-guest-ids`,
//! which keys the imported guest ids stored unkeyed.

use std::time::Duration;

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressStyle};

use crate::app;
use crate::config::{Config, MigrateArgs, RenderHtmlArgs};
use crate::domain::paging::Cursor;
use crate::domain::{Discussion, DiscussionId, GuestIds, Layout, Window};
use crate::store::{Step, Storage};

/// Discussions listed per command with `--all-from`.
const LIST_PAGE: usize = 100;

/// Runs `threadql migrate`.
pub async fn run(config: &Config, args: &MigrateArgs) -> anyhow::Result<()> {
    let (store, embedded) = app::connect(config).await?;
    let to: Layout = args.to.into();
    let result = async {
        store.layout(to)?;
        let ids = match (&args.discussion, args.all_from) {
            (Some(id), _) => vec![DiscussionId::parse(id)?],
            (None, Some(from)) => having_layout(store.as_ref(), from.into()).await?,
            (None, None) => {
                anyhow::bail!("name a discussion (--discussion) or a layout (--all-from)")
            }
        };
        let total = ids.len();
        for (n, id) in ids.iter().enumerate() {
            move_one(store.as_ref(), id, to, (n + 1, total)).await?;
        }
        Ok(())
    }
    .await;
    if let Some(db) = embedded {
        db.stop().await;
    }
    result
}

/// Every discussion whose layout is `from`, oldest first.
async fn having_layout(store: &dyn Storage, from: Layout) -> anyhow::Result<Vec<DiscussionId>> {
    let mut ids = Vec::new();
    let mut cursor = None;
    loop {
        let window = Window::After {
            cursor: cursor.take(),
            limit: LIST_PAGE,
        };
        let page = store.discussions().list(&window).await?;
        ids.extend(
            page.items
                .iter()
                .filter(|d| d.layout == from)
                .map(|d| d.id.clone()),
        );
        match page.items.last() {
            Some(last) if page.has_next => cursor = Some(Cursor::of_discussion(last)),
            _ => return Ok(ids),
        }
    }
}

/// Moves one discussion, drawing its progress.
async fn move_one(
    store: &dyn Storage,
    id: &DiscussionId,
    to: Layout,
    (n, total): (usize, usize),
) -> anyhow::Result<Discussion> {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(
            "{prefix} {msg:<9} [{bar:30}] {pos}/{len} comments ({elapsed})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_prefix(format!("[{n}/{total}] {id} → {to}"));
    bar.enable_steady_tick(Duration::from_millis(200));
    // Without a terminal the bar is hidden: progress goes out as lines instead.
    let lines = bar.is_hidden();
    let report = |step: Step| {
        let (message, position) = match step {
            Step::Reading { done, total } => ("reading", Some((done, total))),
            Step::Writing { done, total } => ("writing", Some((done, total))),
            Step::Switched => ("switched", None),
            Step::Done => ("done", None),
        };
        bar.set_message(message);
        if let Some((done, total)) = position {
            bar.set_length(total);
            bar.set_position(done);
        }
        if lines {
            match position {
                Some((done, total)) => println!("{id} {message} {done}/{total}"),
                None => println!("{id} {message}"),
            }
        }
    };
    let moved = store
        .moves()
        .migrate(id, to, &report, &|_| Vec::new())
        .await
        .with_context(|| format!("moving discussion {id} to {to}"));
    bar.finish();
    let moved = moved?;
    if moved.from == to {
        println!("{id}: already {to} (leftovers of earlier moves removed)");
    } else {
        println!("{id}: {} → {to}, {} comments", moved.from, moved.comments);
    }
    Ok(moved.discussion)
}

/// Runs `threadql key-guest-ids`: keys every imported guest id stored unkeyed, with the server
/// key (`THREADQL_ID_KEY`, else the database's), printing how many discussions it read.
pub async fn key_guest_ids(config: &Config) -> anyhow::Result<()> {
    let configured = app::configured_key(config)?;
    let (store, embedded) = app::connect(config).await?;
    let result = async {
        let key = app::server_key(configured, store.as_ref()).await?;
        let keyed = store
            .server()
            .key_guest_ids(&GuestIds::new(&key), &|so_far| {
                if so_far.discussions.is_multiple_of(1000) {
                    println!(
                        "pass {}: {} discussions read",
                        so_far.passes, so_far.discussions
                    );
                }
            })
            .await
            .context("keying the imported guest ids")?;
        println!(
            "guest ids keyed: {} ids in {} documents ({} discussions read in {} passes)",
            keyed.ids, keyed.documents, keyed.discussions, keyed.passes
        );
        Ok(())
    }
    .await;
    if let Some(db) = embedded {
        db.stop().await;
    }
    result
}

/// Runs `threadql render-html`: renders and stores the HTML of every comment stored without it,
/// in batches of `--batch`, printing a line every hundred discussions and the totals.
pub async fn render_html(config: &Config, args: &RenderHtmlArgs) -> anyhow::Result<()> {
    let configured = app::configured_key(config)?;
    let (store, embedded) = app::connect(config).await?;
    let result = async {
        let key = app::server_key(configured, store.as_ref()).await?;
        let words = std::sync::Arc::new(crate::domain::WordLists::default());
        let services = app::services(config, store.clone(), words, &key);
        let progress = |done: &crate::service::Filled| {
            if done.discussions.is_multiple_of(100) {
                eprintln!(
                    "{} discussions read, {} HTML stored",
                    done.discussions, done.stored
                );
            }
        };
        let filled = services.fill_html(args.batch as usize, &progress).await?;
        println!(
            "discussions: {}\ncomments: {}\nHTML stored: {}\nchanged meanwhile: {}",
            filled.discussions, filled.comments, filled.stored, filled.changed
        );
        anyhow::Ok(())
    }
    .await;
    if let Some(db) = embedded {
        db.stop().await;
    }
    result
}
