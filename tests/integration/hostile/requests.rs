//! How the hostile cases are sent (reqwest, or written by hand over TCP), what each must get, and
//! the check of an answer against it.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{ENGINE_CODES, KIB};
use crate::support::Running;

/// How a case's request is sent.
#[derive(Debug, Clone)]
pub(super) enum Outgoing {
    /// `POST /graphql` with exactly these headers and this body.
    Post {
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// `GET /graphql` with these query-string parameters.
    Get {
        params: Vec<(String, String)>,
        headers: Vec<(String, String)>,
    },
    /// `POST /graphql` written by hand over TCP: `Content-Length` as given in `headers` (or the
    /// body's length), or a chunked body without one.
    Raw {
        headers: Vec<(String, String)>,
        body: Vec<u8>,
        chunked: bool,
    },
}

impl Outgoing {
    pub(super) fn with_auth(mut self, token: &str) -> Outgoing {
        self.headers_mut()
            .push(("authorization".to_owned(), format!("Bearer {token}")));
        self
    }

    pub(super) fn headers_mut(&mut self) -> &mut Vec<(String, String)> {
        match self {
            Outgoing::Post { headers, .. }
            | Outgoing::Get { headers, .. }
            | Outgoing::Raw { headers, .. } => headers,
        }
    }
}

/// A JSON body with `Content-Type: application/json`.
pub(super) fn post_json(body: &Value) -> Outgoing {
    post_bytes("application/json", serde_json::to_vec(body).expect("json"))
}

/// A body as given, with a content type.
pub(super) fn post_bytes(content_type: &str, body: impl Into<Vec<u8>>) -> Outgoing {
    Outgoing::Post {
        headers: vec![("content-type".to_owned(), content_type.to_owned())],
        body: body.into(),
    }
}

/// A GraphQL request as JSON.
pub(super) fn gql(query: &str, variables: Value) -> Outgoing {
    let mut body = json!({ "query": query });
    body["variables"] = variables;
    post_json(&body)
}

/// What a case must get.
#[derive(Debug, Clone)]
pub(super) enum Expect {
    /// 200 with data and no errors.
    Ok,
    /// 200 with no errors and this value at this JSON pointer.
    Data(&'static str, Value),
    /// This status and this `errors[0].extensions.code`.
    Code(u16, &'static str),
    /// An error from the GraphQL engine (parse, validation, document limits): 200 with
    /// `BAD_USER_INPUT`, or one of the engine codes.
    Engine,
}

pub(super) struct Case {
    pub(super) name: String,
    pub(super) send: Outgoing,
    pub(super) expect: Expect,
    /// Refused before anything reaches the database.
    pub(super) no_db: bool,
    /// A header the response must carry.
    pub(super) header: Option<(&'static str, &'static str)>,
}

impl Case {
    pub(super) fn new(name: impl Into<String>, send: Outgoing, expect: Expect) -> Case {
        Case {
            name: name.into(),
            send,
            expect,
            no_db: false,
            header: None,
        }
    }

    pub(super) fn auth(mut self, token: &str) -> Case {
        self.send = self.send.with_auth(token);
        self
    }

    pub(super) fn header(mut self, name: &str, value: &str) -> Case {
        self.send
            .headers_mut()
            .push((name.to_owned(), value.to_owned()));
        self
    }

    pub(super) fn no_db(mut self) -> Case {
        self.no_db = true;
        self
    }

    pub(super) fn expect_header(mut self, name: &'static str, value: &'static str) -> Case {
        self.header = Some((name, value));
        self
    }
}

/// What came back.
#[derive(Debug)]
pub(super) struct Answer {
    pub(super) status: u16,
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: Value,
    pub(super) text: String,
}

impl Answer {
    pub(super) fn new(status: u16, headers: Vec<(String, String)>, raw: &[u8]) -> Answer {
        let text = String::from_utf8_lossy(raw).into_owned();
        let body = serde_json::from_slice(raw).unwrap_or(Value::Null);
        Answer {
            status,
            headers,
            body,
            text,
        }
    }

    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// `status code` for the report.
    pub(super) fn summary(&self) -> String {
        let code = self.body["errors"][0]["extensions"]["code"]
            .as_str()
            .unwrap_or("-");
        format!("{} {}", self.status, code)
    }
}

pub(super) async fn send_outgoing(
    client: &reqwest::Client,
    server: &Running,
    send: &Outgoing,
) -> Answer {
    match send {
        Outgoing::Post { headers, body } => {
            let mut request = client.post(server.url("/graphql")).body(body.clone());
            for (name, value) in headers {
                request = request.header(name.as_str(), value.as_str());
            }
            from_reqwest(request.send().await.expect("send")).await
        }
        Outgoing::Get { params, headers } => {
            let mut request = client.get(server.url("/graphql")).query(params);
            for (name, value) in headers {
                request = request.header(name.as_str(), value.as_str());
            }
            from_reqwest(request.send().await.expect("send")).await
        }
        Outgoing::Raw {
            headers,
            body,
            chunked,
        } => raw_post(server.addr, headers, body, *chunked).await,
    }
}

pub(super) async fn from_reqwest(response: reqwest::Response) -> Answer {
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_owned()))
        .collect();
    let bytes = response.bytes().await.expect("response body");
    Answer::new(status, headers, &bytes)
}

/// Sends a POST by hand, so the body can be chunked or its declared length can lie. The body is
/// written while the answer is read: the server may answer (and close) before reading it all.
pub(super) async fn raw_post(
    addr: SocketAddr,
    headers: &[(String, String)],
    body: &[u8],
    chunked: bool,
) -> Answer {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (mut reader, mut writer) = stream.into_split();
    let mut head = format!("POST /graphql HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
    for (name, value) in headers {
        let _ = write!(head, "{name}: {value}\r\n");
    }
    if chunked {
        head.push_str("transfer-encoding: chunked\r\n");
    } else if !headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("content-length"))
    {
        let _ = write!(head, "content-length: {}\r\n", body.len());
    }
    head.push_str("\r\n");
    let body = body.to_vec();
    // The write half is handed back rather than dropped: dropping it would half-close the
    // connection before the answer is read.
    let writing = tokio::spawn(async move {
        let result = async {
            writer.write_all(head.as_bytes()).await?;
            if chunked {
                for chunk in body.chunks(16 * KIB) {
                    writer
                        .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                        .await?;
                    writer.write_all(chunk).await?;
                    writer.write_all(b"\r\n").await?;
                }
                writer.write_all(b"0\r\n\r\n").await?;
            } else {
                writer.write_all(&body).await?;
            }
            writer.flush().await
        }
        .await;
        (writer, result)
    });
    let mut received = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), async {
        let mut chunk = vec![0u8; 16 * KIB];
        loop {
            if parse_http(&received).is_some() {
                break;
            }
            match reader.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await;
    writing.abort();
    assert!(read.is_ok(), "no answer within 30 s to a hand-written POST");
    parse_http(&received).unwrap_or_else(|| {
        panic!(
            "an incomplete HTTP answer: {:?}",
            String::from_utf8_lossy(&received)
        )
    })
}

/// A complete HTTP/1.1 response (its body decoded), or `None` if more is needed.
pub(super) fn parse_http(bytes: &[u8]) -> Option<Answer> {
    let end = bytes.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&bytes[..end]);
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let rest = &bytes[end + 4..];
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        let mut body = Vec::new();
        let mut at = 0;
        loop {
            let line_end = rest[at..].windows(2).position(|w| w == b"\r\n")? + at;
            let size = usize::from_str_radix(
                String::from_utf8_lossy(&rest[at..line_end])
                    .split(';')
                    .next()?
                    .trim(),
                16,
            )
            .ok()?;
            let start = line_end + 2;
            if size == 0 {
                return Some(Answer::new(status, headers, &body));
            }
            if rest.len() < start + size + 2 {
                return None;
            }
            body.extend_from_slice(&rest[start..start + size]);
            at = start + size + 2;
        }
    }
    let length: usize = header("content-length")?.parse().ok()?;
    (rest.len() >= length).then(|| Answer::new(status, headers, &rest[..length]))
}

/// Checks an answer against what its case expects; `Err` says what was wrong.
pub(super) fn check(case: &Case, answer: &Answer) -> Result<(), String> {
    let errors = answer.body.get("errors").and_then(Value::as_array);
    if let Some(errors) = errors {
        if let Some(bare) = errors
            .iter()
            .find(|e| e["extensions"]["code"].as_str().is_none_or(str::is_empty))
        {
            return Err(format!("an error without a code: {bare}"));
        }
    }
    let code = answer.body["errors"][0]["extensions"]["code"].as_str();
    let no_errors = errors.is_none_or(Vec::is_empty);
    match &case.expect {
        Expect::Ok | Expect::Data(..) => {
            if answer.status != 200 || !no_errors || answer.body["data"].is_null() {
                return Err(format!("expected 200 with data, got {}", answer.summary()));
            }
            if let Expect::Data(pointer, want) = &case.expect {
                let got = answer.body.pointer(pointer);
                if got != Some(want) {
                    return Err(format!("expected {pointer} = {want}, got {got:?}"));
                }
            }
        }
        Expect::Code(status, want) => {
            if answer.status != *status || code != Some(*want) {
                return Err(format!(
                    "expected {status} {want}, got {}",
                    answer.summary()
                ));
            }
        }
        Expect::Engine => {
            let ok = match code {
                Some("BAD_USER_INPUT") => answer.status == 200,
                Some(code) => ENGINE_CODES.contains(&code) && [200, 400].contains(&answer.status),
                None => false,
            };
            if !ok {
                return Err(format!(
                    "expected an engine error (200 BAD_USER_INPUT, or one of {ENGINE_CODES:?}), got {}",
                    answer.summary()
                ));
            }
        }
    }
    if let Some((name, want)) = case.header {
        let got = answer.header(name);
        if got != Some(want) {
            return Err(format!("expected header {name}: {want}, got {got:?}"));
        }
    }
    Ok(())
}
