//! Word lists: read once at start from THREADQL_BANNED_WORDS and THREADQL_SUSPECT_WORDS and
//! handed to the API; a list that cannot be used stops the start, naming the variable, the file
//! and the line.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;
use threadql::app::App;
use threadql::domain::Screening;

use crate::support::{server_config, server_uri, Process, Running};

fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn banned(matched: &str) -> Screening {
    Screening::Banned {
        matched: matched.to_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lists_reach_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = server_config("words_loaded");
    config.banned_words = Some(write_file(
        dir.path(),
        "banned.txt",
        "# sold here\r\nbuy now\r\n\r\n  ＳＰＡＭ  \r\n".as_bytes(),
    ));
    config.suspect_words = Some(write_file(dir.path(), "suspect.txt", b"crypto\nspam\n"));
    let running = Running::start(config).await;
    let words = running.api.word_lists().clone();
    assert_eq!((words.banned_len(), words.suspect_len()), (2, 2));
    assert_eq!(words.screen("BUY   now!"), banned("buy now"));
    assert_eq!(words.screen("spam, spam"), banned("ＳＰＡＭ"));
    assert_eq!(
        words.screen("Crypto coins"),
        Screening::Suspect {
            matched: "crypto".to_owned()
        }
    );
    for clean in ["cryptography", "buy nowhere", "spammer", "# sold here"] {
        assert_eq!(words.screen(clean), Screening::Clean, "{clean}");
    }
    running.shutdown().await;

    let running = Running::start(server_config("words_none")).await;
    assert!(running.api.word_lists().is_empty());
    assert_eq!(running.api.word_lists().screen("spam"), Screening::Clean);
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_that_cannot_be_used_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let good = write_file(dir.path(), "good.txt", b"spam\n");
    let not_utf8 = write_file(dir.path(), "latin1.txt", b"spam\n# fine\ncaf\xe9\n");
    let no_word = write_file(dir.path(), "punctuation.txt", b"spam\n  !!!  \nham\n");
    let invisible = write_file(dir.path(), "invisible.txt", "\u{FEFF}\u{200B}\n".as_bytes());
    let missing = dir.path().join("missing.txt");
    let folder = dir.path().to_path_buf();
    for (banned, suspect, expected) in [
        (
            Some(&not_utf8),
            None,
            format!(
                "THREADQL_BANNED_WORDS {}: line 3 is not valid UTF-8",
                not_utf8.display()
            ),
        ),
        (
            Some(&good),
            Some(&no_word),
            format!(
                "THREADQL_SUSPECT_WORDS {}: line 2 (\"!!!\") has no word in it",
                no_word.display()
            ),
        ),
        (
            None,
            Some(&invisible),
            format!(
                "THREADQL_SUSPECT_WORDS {}: line 1 (\"\\u{{200b}}\") has no word in it",
                invisible.display()
            ),
        ),
        (
            Some(&missing),
            Some(&good),
            format!("cannot read THREADQL_BANNED_WORDS {}", missing.display()),
        ),
        (
            Some(&good),
            Some(&folder),
            format!("cannot read THREADQL_SUSPECT_WORDS {}", folder.display()),
        ),
    ] {
        let mut config = server_config("words_refused");
        // No database answers here: the lists are checked before one is needed.
        config.mongodb_uri = Some("mongodb://127.0.0.1:9/".to_owned());
        config.db_timeout_ms = 300;
        config.banned_words = banned.cloned();
        config.suspect_words = suspect.cloned();
        let err = match App::build(&config).await {
            Ok(_) => panic!("{expected}: the app was built"),
            Err(err) => format!("{err:#}"),
        };
        assert!(err.starts_with(&expected), "{err}\nexpected {expected}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_logs_its_lists_and_refuses_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let banned = write_file(dir.path(), "banned.txt", b"spam\nbuy now\n# a comment\n");
    let suspect = write_file(dir.path(), "suspect.txt", b"crypto\n");
    let mut served = Process::serve(&[
        ("THREADQL_MONGODB_URI", server_uri().to_owned()),
        ("THREADQL_BANNED_WORDS", banned.display().to_string()),
        ("THREADQL_SUSPECT_WORDS", suspect.display().to_string()),
    ])
    .await;
    served.signal(Signal::SIGTERM);
    let (status, logs) = served.exit_within(Duration::from_secs(60)).await;
    assert!(status.success(), "{status}:\n{logs}");
    let loaded = logs
        .lines()
        .find(|line| line.contains("word lists loaded"))
        .unwrap_or_else(|| panic!("no word list line:\n{logs}"));
    assert!(
        loaded.contains("banned=2") && loaded.contains("suspect=1"),
        "{loaded}"
    );

    let bad = write_file(dir.path(), "bad.txt", b"spam\n***\n");
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_threadql"))
        .arg("serve")
        .env("THREADQL_LISTEN", "127.0.0.1:0")
        .env("THREADQL_MONGODB_URI", server_uri())
        .env("THREADQL_BANNED_WORDS", &bad)
        .env_remove("THREADQL_SUSPECT_WORDS")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("threadql exits")
        .expect("threadql runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "a bad list was accepted: {stderr}"
    );
    let expected = format!(
        "THREADQL_BANNED_WORDS {}: line 2 (\"***\") has no word in it",
        bad.display()
    );
    assert!(stderr.contains(&expected), "{stderr}");
    assert!(!stderr.contains("threadql listening"), "{stderr}");
}
