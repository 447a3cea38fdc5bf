//! Errors across the boundary. Every error thrown to JavaScript is a plain `Error` whose `code`
//! is one of the stable strings below (napi-rs puts an error's status string into `err.code`);
//! `src/media/` rewraps them into `NativeError` with the same code. Panics never unwind into
//! Node: every exported entry point runs inside `guard`, which turns a panic into `NATIVE_PANIC`.
//!
//! Codes of this crate's own checks are below; media-core's errors keep media-core's codes
//! (`MediaError::code()`: SESSION_CLOSED, ENCODER_UNAVAILABLE, PIPELINE_INVALID, ...), and
//! napi-rs's own conversion failures keep napi's status name (`NumberExpected`, ...).

use std::any::Any;
use std::borrow::Cow;
use std::panic::{catch_unwind, AssertUnwindSafe};

use napi::bindgen_prelude::Unknown;
use napi::{Env, Error, JsError, Status};

/// A JS-visible error code. napi-rs needs `AsRef<str>` (the code) and `From<Status>` (for its
/// own failures, e.g. a value that could not be converted, which keep napi's status name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorCode(Cow<'static, str>);

impl ErrorCode {
    /// An argument has the wrong type, shape or range (also a config media-core rejects).
    pub const INVALID_ARGUMENT: ErrorCode = ErrorCode(Cow::Borrowed("INVALID_ARGUMENT"));
    /// The session was closed; only `close()` and `stats()` still work.
    pub const SESSION_CLOSED: ErrorCode = ErrorCode(Cow::Borrowed("SESSION_CLOSED"));
    /// The face photo or its landmarks could not be turned into a face rig.
    pub const RIG_ERROR: ErrorCode = ErrorCode(Cow::Borrowed("RIG_ERROR"));
    /// The driving motion could not be used.
    pub const MOTION_ERROR: ErrorCode = ErrorCode(Cow::Borrowed("MOTION_ERROR"));
    /// Native code panicked; the call had no effect that can be relied on.
    pub const NATIVE_PANIC: ErrorCode = ErrorCode(Cow::Borrowed("NATIVE_PANIC"));

    /// A code chosen by media-core (already a stable UPPER_SNAKE string).
    pub fn custom(code: &'static str) -> ErrorCode {
        ErrorCode(Cow::Borrowed(code))
    }
}

impl AsRef<str> for ErrorCode {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl From<Status> for ErrorCode {
    fn from(status: Status) -> Self {
        ErrorCode(Cow::Owned(status.as_ref().to_owned()))
    }
}

/// What every exported function returns.
pub type JsResult<T> = Result<T, Error<ErrorCode>>;

pub fn js_error(code: ErrorCode, message: impl Into<String>) -> Error<ErrorCode> {
    Error::new(code, message.into())
}

pub fn invalid_argument(message: impl Into<String>) -> Error<ErrorCode> {
    js_error(ErrorCode::INVALID_ARGUMENT, message)
}

/// A napi-rs failure inside this crate (creating a threadsafe function, say): keeps napi's
/// status name as the code.
pub fn from_napi(err: Error) -> Error<ErrorCode> {
    Error::new(ErrorCode::from(err.status), err.reason.clone())
}

/// For an `AsyncTask`'s `resolve` (JS thread): turns our error into the JS error object itself,
/// so the promise rejects with our `code` (a task's own errors only carry a napi `Status`).
pub fn rejection(env: &Env, err: Error<ErrorCode>) -> Error {
    // SAFETY: `env` is the live environment of the JS-thread callback we are called from, and
    // `value` is created in it just before it is wrapped.
    unsafe {
        let value = JsError::from(err).into_value(env.raw());
        Error::from(Unknown::from_raw_unchecked(env.raw(), value))
    }
}

/// Runs one exported call; a panic becomes a `NATIVE_PANIC` error instead of unwinding into
/// Node (which would abort the process). `what` names the call in the message.
pub fn guard<T>(what: &str, f: impl FnOnce() -> JsResult<T>) -> JsResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => Err(js_error(
            ErrorCode::NATIVE_PANIC,
            format!(
                "{what}: native code panicked: {}",
                panic_message(payload.as_ref())
            ),
        )),
    }
}

pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_turns_a_panic_into_native_panic() {
        let err = guard("thing()", || -> JsResult<()> { panic!("boom") }).unwrap_err();
        assert_eq!(err.status.as_ref(), "NATIVE_PANIC");
        assert!(
            err.reason.contains("thing(): native code panicked: boom"),
            "{}",
            err.reason
        );
    }

    #[test]
    fn napi_statuses_keep_their_name() {
        assert_eq!(ErrorCode::from(Status::InvalidArg).as_ref(), "InvalidArg");
    }
}
