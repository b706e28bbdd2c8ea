//! Request extractors that answer malformed input with the API's JSON
//! errors (axum's own answer in plain text), and uploads under a size limit.

use std::pin::Pin;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::CONTENT_LENGTH;
use axum::http::request::Parts;
use bytes::BytesMut;
use http_body::Body as _;
use serde::de::DeserializeOwned;
use tokio::sync::{Semaphore, SemaphorePermit};

use super::error::ApiError;

const SEE_THE_DOCUMENT: &str = "the API document at GET /api/openapi.json describes every route";

/// A JSON request body of type `T`.
pub(crate) struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(JsonBody(v)),
            Err(e) => Err(ApiError::bad_request(format!(
                "the request body was refused: {}; send a JSON object with `Content-Type: \
                 application/json` ({SEE_THE_DOCUMENT})",
                e.body_text()
            ))),
        }
    }
}

/// A JSON request body of type `T` that may be left out: no body (or one
/// of only whitespace) is `None`; anything else must be JSON of type `T`
/// sent as `application/json`.
pub(crate) struct OptionalJsonBody<T>(pub Option<T>);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for OptionalJsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let (parts, body) = req.into_parts();
        let bytes = match Bytes::from_request(Request::from_parts(parts.clone(), body), state).await
        {
            Ok(b) => b,
            Err(e) => {
                return Err(ApiError::bad_request(format!(
                    "the request body was refused: {} ({SEE_THE_DOCUMENT})",
                    e.body_text()
                )));
            }
        };
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJsonBody(None));
        }
        let req = Request::from_parts(parts, axum::body::Body::from(bytes));
        let JsonBody(v) = JsonBody::<T>::from_request(req, state).await?;
        Ok(OptionalJsonBody(Some(v)))
    }
}

/// The query string, as type `T`.
pub(crate) struct QueryArgs<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for QueryArgs<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(QueryArgs(v)),
            Err(e) => Err(ApiError::bad_request(format!(
                "the query string was refused: {} ({SEE_THE_DOCUMENT})",
                e.body_text()
            ))),
        }
    }
}

/// The path's parameters, as type `T` (a `String`, or a tuple of them).
pub(crate) struct PathArgs<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for PathArgs<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(v)) => Ok(PathArgs(v)),
            Err(e) => Err(ApiError::bad_request(format!(
                "the path was refused: {} ({SEE_THE_DOCUMENT})",
                e.body_text()
            ))),
        }
    }
}

/// Uploads buffered at once: each holds up to its limit in memory, so at
/// most this many are read at the same time (others wait their turn).
const CONCURRENT_UPLOADS: usize = 4;

static UPLOADS: Semaphore = Semaphore::const_new(CONCURRENT_UPLOADS);

/// How long reading one upload may take.
const UPLOAD_TIME: Duration = Duration::from_secs(120);

/// A body over the limit is still read (and dropped) up to this many times
/// the limit, so that the client, which is still sending it, gets the 400
/// instead of a broken connection; beyond that the connection is closed.
const DRAIN_FACTOR: u64 = 2;

/// A request body of at most `LIMIT` bytes, read whole. A body over the
/// limit is refused with 400 and a message that names the limit: at once
/// when its `Content-Length` says it is over twice the limit, else after
/// reading (and dropping) the rest of it, so the client hears why.
pub(crate) struct Upload<const LIMIT: usize> {
    pub bytes: Bytes,
    _turn: SemaphorePermit<'static>,
}

/// The limit as people read it: `25 MiB (26214400 bytes)`.
pub(crate) fn describe_limit(limit: usize) -> String {
    format!("{} MiB ({limit} bytes)", limit >> 20)
}

fn too_large(limit: usize, size: Option<u64>) -> ApiError {
    let size = size.map(|s| format!(" ({s} bytes)")).unwrap_or_default();
    ApiError::bad_request(format!(
        "the upload{size} is over the limit of {}: send a smaller file",
        describe_limit(limit)
    ))
}

impl<const LIMIT: usize, S: Send + Sync> FromRequest<S> for Upload<LIMIT> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, ApiError> {
        let limit = LIMIT as u64;
        let drain = limit.saturating_mul(DRAIN_FACTOR);
        let declared = req
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if let Some(size) = declared
            && size > drain
        {
            return Err(too_large(LIMIT, Some(size)));
        }
        let turn = UPLOADS
            .acquire()
            .await
            .map_err(|e| ApiError::internal(format!("cannot take an upload slot: {e}")))?;
        let mut body = req.into_body();
        let mut kept = BytesMut::with_capacity(declared.unwrap_or(0).min(limit) as usize);
        let mut seen: u64 = 0;
        let deadline = tokio::time::Instant::now() + UPLOAD_TIME;
        loop {
            let next = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx));
            let frame = match tokio::time::timeout_at(deadline, next).await {
                Ok(Some(Ok(frame))) => frame,
                Ok(None) => break,
                Ok(Some(Err(e))) => {
                    return Err(ApiError::bad_request(format!(
                        "cannot read the upload: {e}"
                    )));
                }
                Err(_) if seen > limit => break,
                Err(_) => {
                    return Err(ApiError::bad_request(format!(
                        "the upload took longer than {} s: send it faster, or a smaller file",
                        UPLOAD_TIME.as_secs()
                    )));
                }
            };
            let Some(data) = frame.data_ref() else {
                continue;
            };
            seen = seen.saturating_add(data.len() as u64);
            if seen <= limit {
                kept.extend_from_slice(data);
            } else {
                // Over: keep nothing, read on (up to `drain`) only so the
                // client gets the answer.
                kept = BytesMut::new();
                if seen > drain {
                    break;
                }
            }
        }
        if seen > limit {
            return Err(too_large(LIMIT, declared));
        }
        Ok(Upload {
            bytes: kept.freeze(),
            _turn: turn,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_said_in_mib_and_bytes() {
        assert_eq!(describe_limit(25 << 20), "25 MiB (26214400 bytes)");
        let e = too_large(25 << 20, Some(26 << 20));
        assert_eq!(e.status(), axum::http::StatusCode::BAD_REQUEST);
    }
}
