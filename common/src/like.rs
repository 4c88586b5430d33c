//! `LIKE` outside DataFusion, in time linear in the pattern times the value
//! and without recursion: `SHOW VARIABLES LIKE '<100,000 x %>'` overflowed
//! the stack of a recursive matcher and aborted the process, and
//! `'%a%a%a%a%a%a%a%a%a%a%ab'` backtracked exponentially.
//!
//! `%` is any run of characters, `_` one character, `\` takes the next
//! character literally; letters compare without regard to ASCII case, as
//! MySQL's SHOW ... LIKE does over identifiers.

/// One element of a compiled pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    /// `%`: consecutive ones are one.
    Any,
    /// `_`
    One,
    Char(char),
}

/// A compiled `LIKE` pattern.
#[derive(Debug, Clone)]
pub struct LikePattern {
    items: Vec<Item>,
}

impl LikePattern {
    pub fn new(pattern: &str) -> LikePattern {
        let mut items = Vec::with_capacity(pattern.len());
        let mut chars = pattern.chars();
        while let Some(c) = chars.next() {
            let item = match c {
                '%' if items.last() == Some(&Item::Any) => continue,
                '%' => Item::Any,
                '_' => Item::One,
                // A trailing backslash stands for itself.
                '\\' => Item::Char(chars.next().unwrap_or('\\')),
                c => Item::Char(c),
            };
            items.push(item);
        }
        LikePattern { items }
    }

    /// Whether `s` matches: the classic two-pointer walk that, on a
    /// mismatch, moves only the last `%` one character on; each character
    /// of `s` is revisited at most once per pattern element.
    pub fn matches(&self, s: &str) -> bool {
        let s: Vec<char> = s.chars().collect();
        let p = &self.items;
        let (mut pi, mut si) = (0, 0);
        // The last `%` seen and where in `s` its match ends so far.
        let mut resume: Option<(usize, usize)> = None;
        while si < s.len() {
            match p.get(pi) {
                Some(Item::Any) => {
                    resume = Some((pi, si));
                    pi += 1;
                }
                Some(Item::One) => {
                    pi += 1;
                    si += 1;
                }
                Some(Item::Char(c)) if c.eq_ignore_ascii_case(&s[si]) => {
                    pi += 1;
                    si += 1;
                }
                _ => match resume {
                    Some((any, end)) => {
                        resume = Some((any, end + 1));
                        pi = any + 1;
                        si = end + 1;
                    }
                    None => return false,
                },
            }
        }
        p[pi..].iter().all(|i| *i == Item::Any)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn like(p: &str, s: &str) -> bool {
        LikePattern::new(p).matches(s)
    }

    #[test]
    fn wildcards_escapes_and_case() {
        assert!(like("char%", "character_set_client"));
        assert!(like("%_size", "batch_size"));
        assert!(!like("batch", "batch_size"));
        assert!(like("BATCH_SIZE", "batch_size"));
        assert!(like("%", ""));
        assert!(!like("_", ""));
        assert!(like("a%b%c", "axxbyyc"));
        assert!(!like("a%b%c", "axxbyy"));
        assert!(like("%ab", "aab"));
        assert!(like("a\\_b", "a_b"));
        assert!(!like("a\\_b", "axb"));
        assert!(like("100\\%", "100%"));
        assert!(like("订单%", "订单表"));
        assert!(like("_单", "订单"));
        assert!(like("x\\", "x\\"));
    }

    #[test]
    fn hostile_patterns_finish() {
        let many = "%".repeat(100_000);
        assert!(like(&many, "anything"));
        let a = "a".repeat(10_000);
        assert!(!like("%a%a%a%a%a%a%a%a%a%a%ab", &a));
        assert!(like(&format!("{}b", "%a".repeat(200)), &format!("{a}b")));
    }
}
