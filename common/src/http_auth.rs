//! HTTP basic authentication, as Stream Load clients send it (`-u user:pass`).

use base64::Engine;

/// Decodes an `Authorization` header value `Basic <base64(user:password)>`.
pub fn decode_basic_auth(value: &str) -> Option<(String, String)> {
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
/// `txn_operation` headers (read through `header`); the error is the message
/// Doris answers for a malformed `txn_id` or operation.
pub fn two_phase_request(
    header: impl Fn(&str) -> Option<String>,
    user: String,
    password: String,
    db: String,
) -> Result<tethys_proto::TxnOperationRequest, String> {
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
