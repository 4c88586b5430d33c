//! Containing panics. FE and BE share one process by default, so a bug one
//! statement, load, fragment or background round runs into must end that
//! piece of work with an error (MySQL 1105, Stream Load `Fail`, a failed
//! fragment stream) and leave the process serving everyone else.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::FutureExt;

use crate::error::TethysError;

/// The message a panic was raised with.
pub fn message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".into()
    }
}

/// Panics contained since the process started.
static CONTAINED: AtomicU64 = AtomicU64::new(0);

/// How many panics [`contain`] and [`contain_sync`] (and every caller of
/// [`to_error`]) have turned into errors: a bug hit, even one the user saw
/// only as error 1105. The fuzz targets assert it stays put.
pub fn contained() -> u64 {
    CONTAINED.load(Ordering::Relaxed)
}

/// The error a panic in `what` becomes.
pub fn to_error(what: &str, payload: &(dyn Any + Send)) -> TethysError {
    CONTAINED.fetch_add(1, Ordering::Relaxed);
    let msg = message(payload);
    tracing::error!("{what} panicked: {msg}");
    TethysError::Internal(format!("{what} stopped by a bug: {msg}"))
}

/// Runs `fut`; a panic in it becomes an error naming `what`. The state
/// `fut` touches must stay consistent across a panic (the callers reset
/// what a half-run statement may leave).
pub async fn contain<F: Future>(what: &str, fut: F) -> Result<F::Output, TethysError> {
    AssertUnwindSafe(fut)
        .catch_unwind()
        .await
        .map_err(|p| to_error(what, p.as_ref()))
}

/// [`contain`] for blocking work.
pub fn contain_sync<R>(what: &str, f: impl FnOnce() -> R) -> Result<R, TethysError> {
    std::panic::catch_unwind(AssertUnwindSafe(f)).map_err(|p| to_error(what, p.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_error_naming_the_work() {
        let e = contain_sync("the test round", || -> u8 { panic!("boom {}", 1) }).unwrap_err();
        assert_eq!(
            e.to_string(),
            "internal error: the test round stopped by a bug: boom 1"
        );
        assert_eq!(contain_sync("x", || 5).unwrap(), 5);
        assert!(contained() >= 1);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let e = rt
            .block_on(contain("a statement", async { panic!("static") }))
            .map(|_: ()| ())
            .unwrap_err();
        assert!(
            e.to_string()
                .ends_with("a statement stopped by a bug: static")
        );
    }
}
