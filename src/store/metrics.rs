//! Counts database commands with the driver's command event handler.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;

/// Counts every command the driver sends, by command name.
#[derive(Debug, Default, Clone)]
pub struct CommandCounter {
    counts: Arc<Mutex<BTreeMap<String, u64>>>,
}

impl CommandCounter {
    /// A counter starting at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// The handler to install in the client options.
    pub fn handler(&self) -> EventHandler<CommandEvent> {
        let counts = self.counts.clone();
        EventHandler::callback(move |event: CommandEvent| {
            if let CommandEvent::Started(started) = event {
                let mut counts = counts.lock().unwrap_or_else(|p| p.into_inner());
                *counts.entry(started.command_name).or_default() += 1;
            }
        })
    }

    /// The counts so far, by command name.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// All commands so far.
    pub fn total(&self) -> u64 {
        self.snapshot().values().sum()
    }
}
