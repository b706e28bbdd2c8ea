//! The API's errors: a status and a JSON body `{"error": "…"}` whose
//! message says what was wrong and what to do.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::authority::InstallRefusal;
use crate::upstream::ServerError;

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

impl From<anyhow::Error> for ApiError {
    fn from(e: anyhow::Error) -> ApiError {
        ApiError::internal(format!("{e:#}"))
    }
}

impl From<ServerError> for ApiError {
    fn from(e: ServerError) -> ApiError {
        match e {
            ServerError::NotFound(m) => ApiError::not_found(m),
            ServerError::Conflict(m) => ApiError::conflict(m),
            ServerError::Invalid(m) => ApiError::bad_request(m),
            ServerError::Unreachable(m) => ApiError::bad_gateway(m),
            ServerError::Other(e) => ApiError::internal(format!("{e:#}")),
        }
    }
}

impl From<InstallRefusal> for ApiError {
    fn from(e: InstallRefusal) -> ApiError {
        match e {
            InstallRefusal::Conflict(m) => ApiError::conflict(m),
            InstallRefusal::Refused(m) => ApiError::bad_request(m),
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
