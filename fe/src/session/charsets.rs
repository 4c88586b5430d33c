//! The character sets and collations Tethys answers with. Strings are
//! UTF-8 and compare byte-wise, as Doris' do, so there is one of each (and
//! MySQL's name for the byte-wise collation beside Doris'): what
//! `SHOW CHARSET`, `SHOW COLLATION LIKE 'utf8mb4_bin'` (a BI tool's probe)
//! and `information_schema.character_sets` / `collations` list, and what
//! `SET character_set_* / collation_*` accept.

/// A character set: name, description, default collation, max bytes a character.
pub struct Charset {
    pub name: &'static str,
    pub description: &'static str,
    pub default_collation: &'static str,
    pub maxlen: u32,
}

/// A collation: name, character set, MySQL id, whether the set's default.
pub struct Collation {
    pub name: &'static str,
    pub charset: &'static str,
    pub id: u32,
    pub is_default: bool,
}

/// One character set: strings are UTF-8, whatever a client names.
pub static CHARSETS: &[Charset] = &[Charset {
    name: "utf8mb4",
    description: "UTF-8 Unicode",
    default_collation: "utf8mb4_0900_bin",
    maxlen: 4,
}];

/// Byte-wise comparison is the only one Tethys has, under Doris' name and
/// MySQL's.
pub static COLLATIONS: &[Collation] = &[
    Collation {
        name: "utf8mb4_0900_bin",
        charset: "utf8mb4",
        id: 309,
        is_default: true,
    },
    Collation {
        name: "utf8mb4_bin",
        charset: "utf8mb4",
        id: 46,
        is_default: false,
    },
];

/// The character set a client names: any UTF-8 spelling (`utf8`, `utf8mb3`,
/// `utf8mb4`) is utf8mb4, as in Doris.
pub fn charset(name: &str) -> Option<&'static Charset> {
    name.to_ascii_lowercase()
        .starts_with("utf8")
        .then_some(&CHARSETS[0])
}

/// A collation Tethys has.
pub fn collation(name: &str) -> Option<&'static Collation> {
    COLLATIONS
        .iter()
        .find(|c| c.name.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_charset_has_its_default_collation() {
        for cs in CHARSETS {
            let co = collation(cs.default_collation).expect("listed");
            assert_eq!(co.charset, cs.name);
            assert!(co.is_default);
        }
        assert_eq!(charset("UTF8").map(|c| c.name), Some("utf8mb4"));
        assert_eq!(charset("utf8mb3").map(|c| c.name), Some("utf8mb4"));
        assert!(charset("latin1").is_none());
        assert!(collation("utf8mb4_bin").is_some());
        assert!(collation("utf8mb4_general_ci").is_none());
    }
}
