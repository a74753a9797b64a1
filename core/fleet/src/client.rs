//! The Fleet API over HTTP: `POST /v1/fleet/<rpc>` with a protobuf body and the signed
//! headers of [`crate::sign`]; the answer's body is the protobuf response.
//!
//! - Unreachable SuperLink, or HTTP 502/503/504: wait and retry, 1 s doubling to 30 s, until
//!   [`Client::patience`] has passed (then [`Error::Transport`]).
//! - Any other status than 200 is an [`Error::Status`] with the body's text, except get-run's
//!   403 `{"code": 2007}`, which is [`Error::RunFinished`].

use crate::error::Error;
use crate::sign::{Identity, PUBLIC_KEY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The largest response body read (a message's objects come one per request).
const MAX_BODY: u64 = 256 * 1024 * 1024;

/// A signed HTTP client for one SuperLink.
#[derive(Clone)]
pub struct Client {
    base: String,
    agent: ureq::Agent,
    identity: Identity,
    /// HTTP requests made, by this client and its clones.
    requests: Arc<AtomicU64>,
    /// How long a call keeps retrying an unreachable SuperLink.
    pub patience: Duration,
}

/// Now as Python's `datetime.now(tz=UTC).isoformat()` writes it.
pub fn timestamp_now() -> String {
    let format = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]+00:00"
    );
    time::OffsetDateTime::now_utc()
        .format(&format)
        .unwrap_or_default()
}

/// Seconds since the Unix epoch (Flower's `created_at`).
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl Client {
    /// A client for `superlink` (`http://HOST:PORT`), signing with `identity`.
    pub fn new(superlink: &str, identity: Identity) -> Result<Client, Error> {
        let base = superlink.trim_end_matches('/').to_string();
        if !base.starts_with("http://") && !base.starts_with("https://") {
            return Err(Error::Transport {
                rpc: "connect",
                why: format!("--superlink {superlink:?} is not http://HOST:PORT"),
            });
        }
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        Ok(Client {
            base,
            agent,
            identity,
            requests: Arc::default(),
            patience: Duration::from_secs(600),
        })
    }

    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// HTTP requests made so far by this client and its clones (one per object a message
    /// carries, each way, besides the calls of the node's life).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// One RPC, retried while the SuperLink is unreachable.
    pub fn call<Req: prost::Message, Resp: prost::Message + Default>(
        &self,
        rpc: &'static str,
        request: &Req,
    ) -> Result<Resp, Error> {
        let body = request.encode_to_vec();
        let start = Instant::now();
        let mut wait = Duration::from_secs(1);
        loop {
            match self.post(rpc, &body) {
                Ok((200, bytes)) => {
                    return Resp::decode(&bytes[..]).map_err(|e| Error::Transport {
                        rpc,
                        why: format!("response does not decode: {e}"),
                    })
                }
                Ok((403, bytes)) if rpc == "get-run" && is_code(&bytes, 2007) => {
                    return Err(Error::RunFinished)
                }
                Ok((status @ (502..=504), _)) if start.elapsed() < self.patience => {
                    let _ = status;
                }
                Ok((status, bytes)) => {
                    let body = String::from_utf8_lossy(&bytes[..bytes.len().min(400)]).into_owned();
                    return Err(Error::Status { rpc, status, body });
                }
                Err(why) if start.elapsed() < self.patience => {
                    if wait == Duration::from_secs(1) {
                        eprintln!("fleet: {rpc}: {why}; retrying");
                    }
                }
                Err(why) => return Err(Error::Transport { rpc, why }),
            }
            std::thread::sleep(wait);
            wait = (wait * 2).min(Duration::from_secs(30));
        }
    }

    fn post(&self, rpc: &str, body: &[u8]) -> Result<(u16, Vec<u8>), String> {
        let headers = self
            .identity
            .headers(&timestamp_now())
            .map_err(|e| e.to_string())?;
        self.requests.fetch_add(1, Ordering::Relaxed);
        let mut response = self
            .agent
            .post(format!("{}/v1/fleet/{rpc}", self.base))
            .header("Content-Type", "application/protobuf")
            .header(PUBLIC_KEY_HEADER, &headers.public_key)
            .header(TIMESTAMP_HEADER, &headers.timestamp)
            .header(SIGNATURE_HEADER, &headers.signature)
            .send(body)
            .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let bytes = response
            .body_mut()
            .with_config()
            .limit(MAX_BODY)
            .read_to_vec()
            .map_err(|e| e.to_string())?;
        Ok((status, bytes))
    }
}

fn is_code(body: &[u8], code: i64) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("code")?.as_i64())
        == Some(code)
}
