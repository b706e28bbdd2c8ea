//! The API's errors: a status and a JSON body `{"error": "…"}` whose
//! message says what was wrong and what to do.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::{ErrorKind, HostError};

/// The body of every error response.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ErrorBody {
    /// What was wrong, where, and what to do.
    pub error: String,
}

/// An error response.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }

    /// 400: the request itself is wrong.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404: the persona, skill, server, run or ref named in the path does
    /// not exist.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    /// 409: the request conflicts with the current state.
    pub fn conflict(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, message)
    }

    /// 502: an MCP server could not be reached.
    pub fn bad_gateway(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_GATEWAY, message)
    }

    /// 503: not ready yet; retry later.
    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message)
    }

    /// 500: the host's state could not be read or written.
    pub fn internal(e: impl std::fmt::Display) -> ApiError {
        let message = format!("{e:#}");
        tracing::warn!("API request failed: {message}");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// The status.
    #[cfg(test)]
    pub fn status(&self) -> StatusCode {
        self.status
    }
}

/// Every typed error of the host maps by its kind: 400 invalid, 404 not
/// found, 409 conflict, 502 an MCP server unreachable, 500 the host's state.
impl<E: HostError> From<E> for ApiError {
    fn from(e: E) -> ApiError {
        let message = e.to_string();
        match e.kind() {
            ErrorKind::Invalid => ApiError::bad_request(message),
            ErrorKind::NotFound => ApiError::not_found(message),
            ErrorKind::Conflict => ApiError::conflict(message),
            ErrorKind::Unreachable => ApiError::bad_gateway(message),
            ErrorKind::Internal => ApiError::internal(message),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            axum::Json(ErrorBody {
                error: self.message,
            }),
        )
            .into_response()
    }
}
