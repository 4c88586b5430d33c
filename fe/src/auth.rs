//! Users and passwords. Doris starts with `root` and `admin`, both with an
//! empty password; user management arrives with privileges.

/// The stored password of a user, if the user exists.
pub fn password_of(user: &str) -> Option<&'static str> {
    match user {
        "root" | "admin" => Some(""),
        _ => None,
    }
}

/// Checks a clear-text password (HTTP basic auth, FE RPC).
pub fn check_password(user: &str, password: &str) -> bool {
    password_of(user).is_some_and(|p| p == password)
}
