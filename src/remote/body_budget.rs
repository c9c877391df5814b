//! Request bodies in flight, bounded in all and per principal. A body is read whole (the quirk
//! mender, the routing-header check, the hang-up watcher and rmcp each need it), and a tool
//! call's JSON is parsed and its base64 decoded after that: one 100 MiB upload costs the server
//! several times its size until the call is done. Each authenticated POST's body is read here
//! once, and a large one reserves its size in both budgets before it is read (by its
//! `Content-Length`, else the largest request once it passes [`FREE`]), all at once so that
//! no two bodies each hold part and wait for the rest; the room is held until the response has
//! gone out. A request that finds no room waits its turn for a while, then is told to retry.
//! Small bodies pass free, so a large one waiting never holds up anyone's `1+1`. Later readers
//! take the same bytes without a copy.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::{Bytes, BytesMut};
use http_body::{Body as HttpBody, Frame};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use axum::extract::Request;
use axum::response::Response;
use http::{StatusCode, header};

use super::auth::{plain, retry_later};
use crate::host::lock::Locked;

/// Body bytes in flight in the whole server: two of the largest requests at once.
const TOTAL: usize = 320 << 20;
/// Body bytes in flight for one principal: one of the largest requests and room for more.
const PER_PRINCIPAL: usize = 192 << 20;
/// Budgets count in KiB, so a semaphore's permits stay few.
const UNIT: usize = 1024;
/// Bodies up to this size are not counted: bounded by the connection cap, and never queued.
const FREE: usize = 1 << 20;

/// Why a body was not read.
#[derive(Debug, thiserror::Error)]
pub enum BodyRefusal {
    #[error("the request is over the {0} byte limit, or it was cut off")]
    TooLarge(usize),
    #[error(
        "the server is reading other large requests; send this one again in a moment (request bodies in flight are bounded, {} MiB in all, {} MiB per principal)",
        TOTAL >> 20,
        PER_PRINCIPAL >> 20
    )]
    Busy,
}

pub struct BodyBudget {
    /// How long a body waits for room before the client is told to retry: the time a body
    /// may take to arrive (CODE_SANDBOX_HTTP_BODY_TIMEOUT), since one waiting is not read.
    wait: Duration,
    total: Arc<Semaphore>,
    per_principal: Mutex<HashMap<Arc<str>, Arc<Semaphore>>>,
}

/// Room taken by one body, given back when dropped.
#[derive(Default)]
pub struct Held(Vec<OwnedSemaphorePermit>);

impl BodyBudget {
    pub fn new(wait: Duration) -> Self {
        BodyBudget {
            wait,
            total: Arc::new(Semaphore::new(TOTAL / UNIT)),
            per_principal: Mutex::new(HashMap::new()),
        }
    }

    fn own(&self, who: &Arc<str>) -> Arc<Semaphore> {
        let mut m = self.per_principal.locked();
        // Principals whose bodies are all read hold nothing: their entries go.
        m.retain(|_, s| Arc::strong_count(s) > 1 || s.available_permits() < PER_PRINCIPAL / UNIT);
        m.entry(who.clone())
            .or_insert_with(|| Arc::new(Semaphore::new(PER_PRINCIPAL / UNIT)))
            .clone()
    }

    /// Reads `body` (at most `limit` bytes; `declared`: its `Content-Length`), reserving
    /// room for it first when it is large.
    pub async fn read(
        &self,
        who: &Arc<str>,
        mut body: Body,
        limit: usize,
        declared: Option<usize>,
    ) -> Result<(Bytes, Held), BodyRefusal> {
        let mut held = Held::default();
        if let Some(size) = declared {
            if size > limit {
                return Err(BodyRefusal::TooLarge(limit));
            }
            if size > FREE {
                held = self.reserve(who, size).await?;
            }
        }
        let mut bytes = BytesMut::with_capacity(declared.unwrap_or(0).min(limit));
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            let frame = frame.map_err(|_| BodyRefusal::TooLarge(limit))?;
            let Ok(data) = frame.into_data() else { continue };
            if bytes.len() + data.len() > limit {
                return Err(BodyRefusal::TooLarge(limit));
            }
            if bytes.len() + data.len() > FREE && held.0.is_empty() {
                // No size was given: a body past the free part may be as large as any.
                held = self.reserve(who, limit).await?;
            }
            bytes.extend_from_slice(&data);
        }
        Ok((bytes.freeze(), held))
    }

    /// `size` bytes of both budgets, each taken whole: the principal's, then the server's.
    async fn reserve(&self, who: &Arc<str>, size: usize) -> Result<Held, BodyRefusal> {
        let units = size.div_ceil(UNIT);
        let own = take(&self.own(who), units, self.wait).await?;
        let total = take(&self.total, units, self.wait).await?;
        Ok(Held(vec![own, total]))
    }
}

async fn take(
    from: &Arc<Semaphore>,
    units: usize,
    wait: Duration,
) -> Result<OwnedSemaphorePermit, BodyRefusal> {
    let units = u32::try_from(units).map_err(|_| BodyRefusal::Busy)?;
    match tokio::time::timeout(wait, from.clone().acquire_many_owned(units)).await {
        Ok(Ok(p)) => Ok(p),
        _ => Err(BodyRefusal::Busy),
    }
}

/// A response body that holds its request's room until it has been sent (or dropped).
struct HoldWhile {
    inner: Body,
    held: Option<Held>,
}

impl HttpBody for HoldWhile {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.held = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A POST's body read once within the bodies' budget (later readers take the same bytes), and
/// the room it holds; the refusal when it is too large or no room comes.
pub async fn read_request(
    budget: &BodyBudget,
    who: &Arc<str>,
    req: Request,
) -> Result<(Request, Option<Held>), Response> {
    if req.method() != http::Method::POST {
        return Ok((req, None));
    }
    let (parts, body) = req.into_parts();
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    match budget
        .read(who, body, crate::config::MAX_REQUEST_BYTES, declared)
        .await
    {
        Ok((bytes, held)) => Ok((Request::from_parts(parts, Body::from(bytes)), Some(held))),
        Err(e @ BodyRefusal::TooLarge(_)) => Err(plain(StatusCode::PAYLOAD_TOO_LARGE, &e.to_string())),
        Err(e @ BodyRefusal::Busy) => Err(retry_later(StatusCode::SERVICE_UNAVAILABLE, &e.to_string(), "5")),
    }
}

/// The response, holding the request's room until it has been sent.
pub fn hold(response: Response, held: Option<Held>) -> Response {
    let Some(held) = held else { return response };
    let (parts, body) = response.into_parts();
    let body = HoldWhile {
        inner: body,
        held: Some(held),
    };
    Response::from_parts(parts, Body::new(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_principal_past_its_share_waits_while_others_read() {
        let budget = BodyBudget::new(Duration::from_secs(120));
        let (alice, bob) = (Arc::<str>::from("alice"), Arc::<str>::from("bob"));
        let big = Bytes::from(vec![b'x'; 150 << 20]);
        let size = Some(big.len());
        let (read, first) = budget
            .read(&alice, Body::from(big.clone()), 160 << 20, size)
            .await
            .unwrap();
        assert_eq!(read.len(), 150 << 20);
        // alice's second large body finds no room in her share; a small one of hers, and
        // bob's large one, read at once.
        let second = tokio::time::timeout(
            Duration::from_millis(200),
            budget.read(&alice, Body::from(big.clone()), 160 << 20, size),
        )
        .await;
        assert!(second.is_err(), "alice read two 150 MiB bodies at once");
        let (small, _) = budget
            .read(&alice, Body::from("{}"), 1024, Some(2))
            .await
            .unwrap();
        assert_eq!(&small[..], b"{}");
        let (bobs, _) = budget
            .read(&bob, Body::from(big.clone()), 160 << 20, None)
            .await
            .unwrap();
        assert_eq!(bobs.len(), 150 << 20, "a body of no declared size");
        drop(first);
        let (again, _) = budget
            .read(&alice, Body::from(big), 160 << 20, size)
            .await
            .unwrap();
        assert_eq!(again.len(), 150 << 20);
        let over = budget.read(&bob, Body::from(vec![0u8; 2048]), 1024, None).await;
        assert!(matches!(over, Err(BodyRefusal::TooLarge(1024))));
        let declared = budget.read(&bob, Body::from("{}"), 1024, Some(4096)).await;
        assert!(
            matches!(declared, Err(BodyRefusal::TooLarge(1024))),
            "refused by its header"
        );
    }
}
