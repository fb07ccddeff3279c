//! Runs a request's dataloader batches inside the request's own task, once the request waits.

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, Stream, StreamExt as _};
use futures::task::AtomicWaker;

/// How often the request is polled again in a row when it wakes itself (a yielding join) before
/// its queued batches run anyway. A join of many fields goes on by two of them per poll when they
/// wake themselves (a list of 50 comments whose `viewerVote` each loads a key took 25 polls), so
/// this covers a level of 512: short of it, a level's keys were split over two batches.
const MAX_REPOLLS: usize = 256;

/// The batches one request has queued.
#[derive(Default)]
pub struct Batches {
    queued: Mutex<Vec<BoxFuture<'static, ()>>>,
    waker: AtomicWaker,
}

impl Batches {
    /// A new, empty queue (one per request).
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Queues a batch (the dataloader's spawner).
    pub fn spawn(&self, batch: BoxFuture<'static, ()>) {
        self.queued
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(batch);
        self.waker.wake();
    }

    fn take(&self) -> Vec<BoxFuture<'static, ()>> {
        std::mem::take(&mut *self.queued.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// A waker that remembers whether it was woken.
struct Flag {
    woken: AtomicBool,
    inner: Waker,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        self.inner.wake_by_ref();
    }
}

/// Runs `request` to completion, running the batches it queues in `batches` whenever the request
/// waits.
///
/// Spawned on the runtime behind a timer, a batch either waits longer than it needs to (the
/// dataloader's default 1 ms, paid once per tree level) or, with no delay on a multi-threaded
/// runtime, may start on another thread before every sibling has added its key, and then costs
/// an extra round trip. Polled here, a batch starts only once the request can go no further
/// without it: every key of the level is in, and nothing waits on a clock.
pub async fn drive<F: Future>(request: F, batches: Arc<Batches>) -> F::Output {
    let mut request = pin!(request);
    let mut runner = Runner::new(batches);
    poll_fn(move |cx: &mut Context<'_>| runner.poll(cx, |cx| request.as_mut().poll(cx))).await
}

/// [`drive`] for a stream of responses (a subscription): each item is resolved with its
/// batches run the same way.
pub fn drive_stream<S>(stream: S, batches: Arc<Batches>) -> impl Stream<Item = S::Item> + Send
where
    S: Stream + Send + 'static,
{
    let mut stream = Box::pin(stream);
    let mut runner = Runner::new(batches);
    futures::stream::poll_fn(move |cx| runner.poll(cx, |cx| stream.as_mut().poll_next(cx)))
}

/// Polls a request and runs the batches it queued once it waits.
struct Runner {
    batches: Arc<Batches>,
    running: FuturesUnordered<BoxFuture<'static, ()>>,
}

impl Runner {
    fn new(batches: Arc<Batches>) -> Self {
        Self {
            batches,
            running: FuturesUnordered::new(),
        }
    }

    /// Polls `request` (again while it wakes itself, up to [`MAX_REPOLLS`] times), then starts
    /// and polls the batches it queued.
    fn poll<T>(
        &mut self,
        cx: &mut Context<'_>,
        mut request: impl FnMut(&mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        self.batches.waker.register(cx.waker());
        for _ in 0..MAX_REPOLLS {
            let flag = Arc::new(Flag {
                woken: AtomicBool::new(false),
                inner: cx.waker().clone(),
            });
            let waker = Waker::from(flag.clone());
            if let Poll::Ready(output) = request(&mut Context::from_waker(&waker)) {
                return Poll::Ready(output);
            }
            if !flag.woken.load(Ordering::SeqCst) {
                break;
            }
        }
        loop {
            let queued = self.batches.take();
            if queued.is_empty() {
                break;
            }
            self.running.extend(queued);
        }
        while let Poll::Ready(Some(())) = self.running.poll_next_unpin(cx) {}
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use async_graphql::dataloader::{DataLoader, Loader, NoCache};

    use super::*;

    struct Counting(Arc<AtomicUsize>);

    impl Loader<u32> for Counting {
        type Value = u32;
        type Error = ();

        async fn load(
            &self,
            keys: &[u32],
        ) -> Result<std::collections::HashMap<u32, u32>, Self::Error> {
            self.0.fetch_add(1, Ordering::SeqCst);
            tokio::task::yield_now().await;
            Ok(keys.iter().map(|k| (*k, k * 2)).collect())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_level_of_keys_is_one_batch() {
        for _ in 0..200 {
            let batches = Batches::new();
            let loads = Arc::new(AtomicUsize::new(0));
            let spawner = batches.clone();
            let loader =
                DataLoader::with_cache(Counting(loads.clone()), move |f| spawner.spawn(f), NoCache)
                    .delay(Duration::ZERO);
            let request = async {
                let level = (0..50u32).map(|k| loader.load_one(k));
                let first = futures::future::join_all(level).await;
                let next = first
                    .iter()
                    .map(|v| loader.load_one((*v).ok().flatten().unwrap_or(0) + 1000));
                futures::future::join_all(next).await.len()
            };
            assert_eq!(drive(request, batches).await, 50);
            assert_eq!(loads.load(Ordering::SeqCst), 2);
        }
    }
}
