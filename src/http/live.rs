//! Streaming transports of `/graphql`: WebSockets (`graphql-transport-ws` and the legacy
//! `graphql-ws`) and Server-Sent Events (`graphql-sse`, distinct connections mode).

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_graphql::{Data, Executor};
use async_graphql_axum::{GraphQLProtocol, GraphQLWebSocket};
use axum::extract::ws::{CloseFrame, Message, WebSocket};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream::{BoxStream, SplitSink, StreamExt};
use futures::SinkExt;
use serde_json::{json, Value};

use crate::graphql::{Api, Connection};
use crate::rate::ClientKey;
use crate::service::closing::{Closing, Stage};

/// The API as the WebSocket protocol runs it: each operation with its connection's identity.
#[derive(Clone)]
struct Streaming(Api);

impl Executor for Streaming {
    async fn execute(&self, request: async_graphql::Request) -> async_graphql::Response {
        self.0.execute(request, None).await
    }

    fn execute_stream(
        &self,
        request: async_graphql::Request,
        session: Option<Arc<Data>>,
    ) -> BoxStream<'static, async_graphql::Response> {
        let connection = session
            .as_deref()
            .and_then(|data| data.get(&std::any::TypeId::of::<Connection>()))
            .and_then(|any| any.downcast_ref::<Connection>())
            .cloned()
            .unwrap_or_else(|| self.0.connection(None, None));
        self.0.execute_stream(request, &connection)
    }
}

/// How long a new WebSocket may take to send `connection_init`.
const INIT_WAIT: Duration = Duration::from_secs(10);

/// How long a socket closed for a shutdown waits for the client's close frame.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// The close reason of a socket closed because the server shuts down (code 1001).
const GOING_AWAY: &str = "the server is going away: connect again";

/// How a socket's protocol run ended.
enum Ended {
    /// The client closed it, the protocol closed it, or it broke.
    Done,
    /// The server shuts down: every operation has ended and 1001 was sent.
    GoingAway,
    /// The connection's token expired.
    Expired,
}

/// Serves a GraphQL WebSocket. The caller's identity comes from the `connection_init` payload
/// (`{"Authorization": "Bearer …"}`, also under `headers`, or `{"authToken": "…"}`), else from
/// the upgrade request's `Authorization` header. Credentials that cannot be accepted close the
/// connection as each protocol says: 4403 in `graphql-transport-ws`, `connection_error` in the
/// legacy `graphql-ws`. The server pings the client twice per `idle` period; a socket on which
/// nothing arrives (not even a pong) for `idle` is closed with 1001. When the process shuts
/// down, every operation ends (a subscription with its `complete`), then the socket is closed
/// with 1001; a socket still open when the grace period runs out is dropped.
pub(super) async fn serve_websocket(
    api: Api,
    socket: WebSocket,
    protocol: GraphQLProtocol,
    legacy: bool,
    header: Option<String>,
    client: Option<ClientKey>,
    idle: Duration,
) {
    let dropped = api.closing().reached(Stage::Dropping);
    tokio::select! {
        () = run_websocket(api, socket, protocol, legacy, header, client, idle) => {}
        () = dropped => tracing::debug!("dropping a WebSocket still open when the shutdown grace period ran out"),
    }
}

async fn run_websocket(
    api: Api,
    socket: WebSocket,
    protocol: GraphQLProtocol,
    legacy: bool,
    header: Option<String>,
    client: Option<ClientKey>,
    idle: Duration,
) {
    let closing = api.closing().clone();
    let (mut sink, mut stream) = socket.split();
    let first = tokio::select! {
        first = tokio::time::timeout(INIT_WAIT, stream.next()) => first,
        () = closing.reached(Stage::Draining) => {
            close(&mut sink, 1001, GOING_AWAY).await;
            return;
        }
    };
    let first = match first {
        Ok(Some(Ok(message))) => message,
        Ok(_) => return,
        Err(_) => {
            close(&mut sink, 4408, "Connection initialisation timeout").await;
            return;
        }
    };
    let authorization = init_payload(&first)
        .as_ref()
        .and_then(authorization_of)
        .or(header);
    let connection = api.connection(authorization.as_deref(), client);
    if let Some(why) = connection.rejected() {
        refuse(&mut sink, legacy, why).await;
        return;
    }
    let expires_in = connection.expires_in();
    let operations = connection.clone();
    let silent = Arc::new(AtomicBool::new(false));
    // Kept here, lent to the protocol: after a shutdown's 1001, the client's close frame is
    // read from it.
    let mut messages = Box::pin(until_silent(
        futures::stream::once(async move { Ok(first) }).chain(stream),
        idle,
        silent.clone(),
    ));
    // The protocol writes through a channel, so that pings can be sent between its messages and
    // the socket can still be closed when the token expires or the server shuts down.
    let (outgoing, queued) = futures::channel::mpsc::channel::<Message>(16);
    let graphql =
        GraphQLWebSocket::new_with_pair(outgoing, messages.as_mut(), Streaming(api), protocol)
            .on_connection_init(move |_| async move {
                let mut data = Data::default();
                data.insert(connection);
                Ok(data)
            })
            .serve();
    let run = async {
        let writer = Writer {
            every: idle / 2,
            silent: &silent,
            closing: &closing,
            operations: &operations,
        }
        .write(&mut sink, queued);
        tokio::pin!(graphql, writer);
        let mut protocol_done = false;
        // The protocol is polled first, so that what it writes is queued before the writer
        // looks for quiet.
        loop {
            tokio::select! {
                biased;
                () = &mut graphql, if !protocol_done => protocol_done = true,
                ended = &mut writer => break ended,
            }
        }
    };
    let ended = match expires_in {
        Some(left) => tokio::select! {
            ended = run => ended,
            () = tokio::time::sleep(left) => Ended::Expired,
        },
        None => run.await,
    };
    match ended {
        Ended::Expired => {
            refuse(
                &mut sink,
                legacy,
                "the token has expired: connect again with a new one",
            )
            .await;
        }
        Ended::GoingAway => {
            // The closing handshake: the client answers with its own close frame.
            let _ = tokio::time::timeout(CLOSE_WAIT, async {
                while let Some(Ok(message)) = messages.next().await {
                    if matches!(message, Message::Close(_)) {
                        break;
                    }
                }
            })
            .await;
        }
        Ended::Done => {}
    }
}

/// The client's messages until it has sent nothing (not even a pong) for `idle`; then `silent`
/// is set and the stream ends.
fn until_silent(
    messages: impl futures::Stream<Item = Result<Message, axum::Error>> + Send + 'static,
    idle: Duration,
    silent: Arc<AtomicBool>,
) -> impl futures::Stream<Item = Result<Message, axum::Error>> + Send + 'static {
    futures::stream::unfold(Box::pin(messages), move |mut messages| {
        let silent = silent.clone();
        async move {
            match tokio::time::timeout(idle, messages.next()).await {
                Ok(Some(message)) => Some((message, messages)),
                Ok(None) => None,
                Err(_) => {
                    silent.store(true, Ordering::Relaxed);
                    None
                }
            }
        }
    })
}

/// What writes a socket's messages: the protocol's, and a ping every `every`.
struct Writer<'a> {
    every: Duration,
    /// Set when the client stayed silent too long.
    silent: &'a AtomicBool,
    closing: &'a Closing,
    /// The connection's operations, waited for when the server shuts down.
    operations: &'a Connection,
}

impl Writer<'_> {
    /// Writes until the protocol is done (a socket closed for its silence gets 1001), or, once
    /// the server shuts down, until every operation has ended and its `complete` is written:
    /// then the socket gets 1001.
    async fn write(
        self,
        sink: &mut SplitSink<WebSocket, Message>,
        mut queued: futures::channel::mpsc::Receiver<Message>,
    ) -> Ended {
        let every = self.every;
        let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let draining = self.closing.reached(Stage::Draining);
        tokio::pin!(draining);
        let mut shutting_down = false;
        loop {
            let message = tokio::select! {
                biased;
                message = queued.next() => match message {
                    Some(message) => message,
                    None => break,
                },
                () = &mut draining, if !shutting_down => {
                    shutting_down = true;
                    continue;
                }
                // Nothing queued, and no operation left: each one's `complete` was written.
                () = self.operations.operations_ended(), if shutting_down => {
                    close(sink, 1001, GOING_AWAY).await;
                    return Ended::GoingAway;
                }
                _ = ping.tick() => Message::Ping(Default::default()),
            };
            let closing = matches!(message, Message::Close(_));
            if sink.send(message).await.is_err() || closing {
                return Ended::Done;
            }
            if shutting_down {
                // The protocol runs before quiet is looked for again: a `complete` it could not
                // queue while the queue was full is queued now.
                tokio::task::yield_now().await;
            }
        }
        if self.silent.load(Ordering::Relaxed) {
            tracing::debug!("closing a WebSocket that stayed silent");
            close(sink, 1001, "idle timeout").await;
        }
        Ended::Done
    }
}

/// Refuses the connection's credentials as each protocol says: `connection_error` (then a
/// normal close) in the legacy `graphql-ws`, 4403 in `graphql-transport-ws`.
async fn refuse(sink: &mut SplitSink<WebSocket, Message>, legacy: bool, why: &str) {
    if legacy {
        let error = json!({
            "type": "connection_error",
            "payload": { "message": why, "extensions": { "code": "UNAUTHENTICATED" } },
        });
        let _ = sink.send(Message::Text(error.to_string().into())).await;
        close(sink, 1000, "").await;
    } else {
        close(sink, 4403, "Forbidden").await;
    }
}

async fn close(sink: &mut SplitSink<WebSocket, Message>, code: u16, reason: &'static str) {
    let frame = CloseFrame {
        code,
        reason: reason.into(),
    };
    let _ = sink.send(Message::Close(Some(frame))).await;
}

/// The payload of a `connection_init` message (`None` for any other message).
fn init_payload(message: &Message) -> Option<Value> {
    let Message::Text(text) = message else {
        return None;
    };
    let mut message: Value = serde_json::from_str(text.as_str()).ok()?;
    if message.get("type")? != "connection_init" {
        return None;
    }
    Some(
        message
            .get_mut("payload")
            .map(Value::take)
            .unwrap_or_default(),
    )
}

/// The bearer credentials of a `connection_init` payload, in the shapes clients send them.
fn authorization_of(payload: &Value) -> Option<String> {
    let field = |object: &Value, names: &[&str]| {
        names
            .iter()
            .find_map(|name| object.get(*name).and_then(Value::as_str))
            .map(str::to_owned)
    };
    const HEADER: [&str; 2] = ["Authorization", "authorization"];
    field(payload, &HEADER)
        .or_else(|| payload.get("headers").and_then(|h| field(h, &HEADER)))
        .or_else(|| {
            field(payload, &["authToken", "token"]).map(|token| {
                match token.starts_with("Bearer ") {
                    true => token,
                    false => format!("Bearer {token}"),
                }
            })
        })
}

/// Runs one operation as Server-Sent Events: a `next` event per result (one for a query or a
/// mutation, one per change for a subscription), then `complete`.
pub(super) fn event_stream(
    api: &Api,
    request: async_graphql::Request,
    connection: &Connection,
) -> Response {
    let next = api.execute_stream(request, connection).map(|response| {
        let json = serde_json::to_string(&response).unwrap_or_else(|_| {
            r#"{"errors":[{"message":"internal error","extensions":{"code":"INTERNAL"}}]}"#
                .to_owned()
        });
        Ok::<_, Infallible>(Event::default().event("next").data(json))
    });
    let complete = futures::stream::once(async {
        Ok::<_, Infallible>(Event::default().event("complete").data(""))
    });
    Sse::new(next.chain(complete))
        .keep_alive(KeepAlive::default())
        .into_response()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_connection_init_has_an_init_payload() {
        let init = |text: &str| init_payload(&Message::Text(text.to_owned().into()));
        assert_eq!(
            init(r#"{"type":"connection_init","payload":{"a":1}}"#),
            Some(json!({"a": 1}))
        );
        assert_eq!(init(r#"{"type":"connection_init"}"#), Some(Value::Null));
        assert_eq!(init(r#"{"type":"subscribe","payload":{}}"#), None);
        assert_eq!(init("not json"), None);
        assert_eq!(init_payload(&Message::Binary(vec![1].into())), None);
    }

    #[test]
    fn connection_init_payloads_give_bearer_credentials() {
        let bearer = Some("Bearer abc".to_owned());
        assert_eq!(
            authorization_of(&json!({"Authorization": "Bearer abc"})),
            bearer
        );
        assert_eq!(
            authorization_of(&json!({"authorization": "Bearer abc"})),
            bearer
        );
        assert_eq!(
            authorization_of(&json!({"headers": {"Authorization": "Bearer abc"}})),
            bearer
        );
        assert_eq!(authorization_of(&json!({"authToken": "abc"})), bearer);
        assert_eq!(authorization_of(&json!({"token": "Bearer abc"})), bearer);
        assert_eq!(authorization_of(&json!({})), None);
        assert_eq!(authorization_of(&json!(null)), None);
        assert_eq!(authorization_of(&json!({"Authorization": 7})), None);
    }
}
