//! What the FE and a BE read alike from a Stream Load request's headers:
//! HTTP basic authentication, as clients send it (`-u user:pass`), and the
//! two-phase-commit headers of `_stream_load_2pc`.

use base64::Engine;
use http::HeaderMap;

/// The user and password of a request's basic authorization.
pub fn basic_auth(headers: &HeaderMap) -> Option<(String, String)> {
    decode_basic_auth(headers.get("authorization")?.to_str().ok()?)
}

/// Decodes an `Authorization` header value `Basic <base64(user:password)>`.
fn decode_basic_auth(value: &str) -> Option<(String, String)> {
    let b64 = value
        .strip_prefix("Basic ")
        .or_else(|| value.strip_prefix("basic "))?;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (u, p) = text.split_once(':').unwrap_or((text.as_str(), ""));
    Some((u.to_string(), p.to_string()))
}

/// Builds a two-phase-commit request from the `txn_id`, `label` and
/// `txn_operation` headers; the error is the message Doris answers for a
/// malformed `txn_id` or operation.
pub fn two_phase_request(
    headers: &HeaderMap,
    user: String,
    password: String,
    db: String,
) -> Result<tethys_proto::TxnOperationRequest, String> {
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(|s| s.trim().to_string())
    };
    let txn_id = match header("txn_id") {
        Some(t) => t
            .parse::<i64>()
            .map_err(|_| format!("convert txn_id [{t}] failed"))?,
        None => 0,
    };
    let operation = match header("txn_operation")
        .unwrap_or_default()
        .to_ascii_lowercase()
        .as_str()
    {
        "commit" => tethys_proto::LoadAction::Commit,
        "abort" => tethys_proto::LoadAction::Abort,
        _ => return Err("transaction operation should be 'commit' or 'abort'".into()),
    };
    Ok(tethys_proto::TxnOperationRequest {
        user,
        password,
        db,
        txn_id,
        label: header("label").unwrap_or_default(),
        operation: operation.into(),
    })
}

/// The JSON answer of `_stream_load_2pc`: `Success` with the transaction's
/// message, or `Fail` with why not.
pub fn two_phase_answer(outcome: Result<String, String>) -> serde_json::Value {
    match outcome {
        Ok(msg) => serde_json::json!({"status": "Success", "msg": msg}),
        Err(msg) => serde_json::json!({"status": "Fail", "msg": msg}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic() {
        assert_eq!(
            decode_basic_auth("Basic cm9vdDo="),
            Some(("root".into(), String::new()))
        );
        assert_eq!(
            decode_basic_auth("Basic YTpiOmM="),
            Some(("a".into(), "b:c".into()))
        );
        assert_eq!(decode_basic_auth("Bearer x"), None);
        assert_eq!(decode_basic_auth("Basic !!!"), None);
    }
}
