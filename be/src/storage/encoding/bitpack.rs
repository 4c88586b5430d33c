//! Bit packing: unsigned values of `bits` bits each, stored back to back,
//! least significant bit first. FOR (frame of reference) deltas, dictionary
//! codes, string lengths and run lengths are all stored this way.
//!
//! A packed block is followed by [`PAD`] zero bytes, so the decoder reads
//! every value with one unaligned 8- or 16-byte load and no tail case; the
//! padding compresses to almost nothing.

use tethys_common::{Result, TethysError};

/// Zero bytes after every packed block.
pub const PAD: usize = 16;

/// Bits needed to hold `v` (0 for 0).
pub fn bits_for(v: u64) -> u8 {
    (64 - v.leading_zeros()) as u8
}

/// Bytes a block of `n` values of `bits` bits takes, padding included.
pub fn packed_len(n: usize, bits: u8) -> usize {
    (n * bits as usize).div_ceil(8) + PAD
}

/// Appends `values` packed at `bits` bits each (each must fit), then the
/// padding.
pub fn pack(out: &mut Vec<u8>, values: impl IntoIterator<Item = u64>, bits: u8) {
    let start = out.len();
    let bits = u32::from(bits);
    let mut acc: u128 = 0;
    let mut filled = 0u32;
    let mut n = 0usize;
    for v in values {
        n += 1;
        if bits == 0 {
            continue;
        }
        acc |= u128::from(v) << filled;
        filled += bits;
        if filled >= 64 {
            out.extend_from_slice(&(acc as u64).to_le_bytes());
            acc >>= 64;
            filled -= 64;
        }
    }
    out.extend_from_slice(&acc.to_le_bytes()[..filled.div_ceil(8) as usize]);
    out.resize(start + packed_len(n, bits as u8), 0);
}

/// Whether `buf` can be exactly one packed block of `n` values of `bits`.
fn check_block(buf: &[u8], bits: u8, n: usize) -> Result<()> {
    if bits > 64 {
        return Err(TethysError::Corruption(format!("{bits}-bit packed values")));
    }
    if buf.len() != packed_len(n, bits) {
        return Err(TethysError::Corruption(format!(
            "packed block of {} bytes for {n} values of {bits} bits",
            buf.len()
        )));
    }
    Ok(())
}

/// Calls `f(i, value)` for each of the `n` values packed in `buf`, which
/// must be exactly one packed block.
pub fn unpack(buf: &[u8], bits: u8, n: usize, mut f: impl FnMut(usize, u64)) -> Result<()> {
    check_block(buf, bits, n)?;
    let width = bits as usize;
    match bits {
        0 => (0..n).for_each(|i| f(i, 0)),
        1..=56 => {
            let mut i = 0;
            let each = |vals: &[u64]| {
                for &v in vals {
                    f(i, v);
                    i += 1;
                }
            };
            by_width!(bits, unpack_groups, buf, n, each);
        }
        _ => {
            let mask = if bits == 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            };
            for i in 0..n {
                let bit = i * width;
                let at = bit >> 3;
                let mut w = [0u8; 16];
                w.copy_from_slice(&buf[at..at + 16]);
                f(i, (u128::from_le_bytes(w) >> (bit & 7)) as u64 & mask);
            }
        }
    }
    Ok(())
}

/// Appends `map(value)` for each of the `n` values packed in `buf` (exactly
/// one packed block), in order, to `out`: `unpack` for decoders that fill a vector,
/// eight values at a time so the stores need no per-value capacity check.
pub fn unpack_into<T>(
    buf: &[u8],
    bits: u8,
    n: usize,
    out: &mut Vec<T>,
    mut map: impl FnMut(u64) -> T,
) -> Result<()> {
    out.reserve(n);
    if (1..=56).contains(&bits) && buf.len() == packed_len(n, bits) {
        let append = |vals: &[u64]| out.extend(vals.iter().map(|&v| map(v)));
        by_width!(bits, unpack_groups, buf, n, append);
        Ok(())
    } else {
        unpack(buf, bits, n, |_, v| out.push(map(v)))
    }
}

/// The sum of the `n` values packed in `buf` (exactly one packed block),
/// without storing them: what a pushed-down `sum` needs of a FOR page. Eight
/// values of at most 56 bits add up to less than 2^59, so each group is
/// summed in 64 bits and the groups in 128.
pub fn sum(buf: &[u8], bits: u8, n: usize) -> Result<u128> {
    check_block(buf, bits, n)?;
    let mut total: u128 = 0;
    if (1..=56).contains(&bits) {
        by_width!(bits, sum_groups, buf, n, &mut total);
    } else if bits > 56 {
        unpack(buf, bits, n, |_, v| total += u128::from(v))?;
    }
    Ok(total)
}

/// Appends `map(value)` for the values at `positions` (each below `n`) of
/// the `n` packed in `buf` (exactly one packed block), in the order given:
/// the few rows a filter left of a page are read without unpacking the
/// rest. Each value is one unaligned 16-byte load.
pub fn unpack_at<T>(
    buf: &[u8],
    bits: u8,
    n: usize,
    positions: &[u32],
    out: &mut Vec<T>,
    mut map: impl FnMut(u64) -> T,
) -> Result<()> {
    check_block(buf, bits, n)?;
    if let Some(p) = positions.iter().find(|&&p| p as usize >= n) {
        return Err(TethysError::Internal(format!(
            "row {p} of a page of {n} rows"
        )));
    }
    out.reserve(positions.len());
    if bits == 0 {
        out.extend(positions.iter().map(|_| map(0)));
        return Ok(());
    }
    let width = bits as usize;
    let mask = u64::MAX >> (64 - width);
    // The block ends in PAD (16) bytes past the last value's first byte:
    // every 16-byte load is in bounds.
    out.extend(positions.iter().map(|&i| {
        let bit = i as usize * width;
        let at = bit >> 3;
        let mut w = [0u8; 16];
        w.copy_from_slice(&buf[at..at + 16]);
        map((u128::from_le_bytes(w) >> (bit & 7)) as u64 & mask)
    }));
    Ok(())
}

/// Calls `f` with each group of eight of the `n` values of `B` bits
/// (B <= 56) unpacked, then with the last, shorter group. Eight values fill
/// exactly `B` bytes, so with `B` known at compile time every offset inside
/// a group is a constant and the bounds are checked once per group.
fn unpack_groups<const B: usize>(buf: &[u8], n: usize, mut f: impl FnMut(&[u64])) {
    let mask = (1u64 << B) - 1;
    // Value `j` of the group starting at `chunk`.
    let value = |chunk: &[u8], j: usize| {
        let bit = j * B;
        let at = bit >> 3;
        let mut w = [0u8; 8];
        w.copy_from_slice(&chunk[at..at + 8]);
        (u64::from_le_bytes(w) >> (bit & 7)) & mask
    };
    let groups = n / 8;
    for g in 0..groups {
        let chunk = &buf[g * B..g * B + B + 8];
        let group: [u64; 8] = std::array::from_fn(|j| value(chunk, j));
        f(&group);
    }
    let tail = n - groups * 8;
    let chunk = &buf[groups * B..];
    let rest: [u64; 8] = std::array::from_fn(|j| if j < tail { value(chunk, j) } else { 0 });
    f(&rest[..tail]);
}

/// Adds the `n` values of `B` bits (B <= 56) to `total`, eight at a time
/// as [`unpack_groups`] reads them, without writing them anywhere: two
/// values come from one 8-byte load where they fit in it (B <= 28), and the
/// sums are kept in 64 bits over runs of groups short enough not to
/// overflow them.
fn sum_groups<const B: usize>(buf: &[u8], n: usize, total: &mut u128) {
    let mask = (1u64 << B) - 1;
    // The 8 bytes from bit `bit` of `chunk` on, shifted to start there.
    let load = |chunk: &[u8], bit: usize| {
        let at = bit >> 3;
        let mut w = [0u8; 8];
        w.copy_from_slice(&chunk[at..at + 8]);
        u64::from_le_bytes(w) >> (bit & 7)
    };
    let groups = n / 8;
    // Each of the four sums takes two values a group: 2 * run values
    // below 2^B stay below 2^64.
    let run = if B <= 52 { 256 } else { 1 };
    let mut g = 0;
    while g < groups {
        let end = (g + run).min(groups);
        let mut acc = [0u64; 4];
        for gg in g..end {
            let chunk = &buf[gg * B..gg * B + B + 8];
            for (j, a) in acc.iter_mut().enumerate() {
                if 2 * B + 7 <= 64 {
                    let x = load(chunk, 2 * j * B);
                    *a += (x & mask) + ((x >> B) & mask);
                } else {
                    *a += (load(chunk, 2 * j * B) & mask) + (load(chunk, (2 * j + 1) * B) & mask);
                }
            }
        }
        *total += acc.iter().map(|&a| u128::from(a)).sum::<u128>();
        g = end;
    }
    let chunk = &buf[groups * B..];
    for j in 0..n - groups * 8 {
        *total += u128::from(load(chunk, j * B) & mask);
    }
}

/// Calls `$func::<B>(args)` for the runtime width `$bits` when it is in
/// 1..=56 (the widths an 8-byte load serves).
macro_rules! by_width {
    ($bits:expr, $func:ident, $($arg:expr),*) => {
        by_width!(@list $bits, $func, ($($arg),*),
            1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28
            29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53
            54 55 56)
    };
    (@list $bits:expr, $func:ident, $args:tt, $($b:literal)*) => {
        match $bits {
            $($b => by_width!(@call $func, $b, $args),)*
            _ => {}
        }
    };
    (@call $func:ident, $b:literal, ($($arg:expr),*)) => {
        $func::<$b>($($arg),*)
    };
}
use by_width;

#[cfg(test)]
mod tests {
    use super::*;

    /// Unpacks `n` values into a vector.
    pub fn unpack_vec(buf: &[u8], bits: u8, n: usize) -> Result<Vec<u64>> {
        let mut out = vec![0u64; n];
        unpack(buf, bits, n, |i, v| out[i] = v)?;
        Ok(out)
    }

    /// `n` scattered values of `bits` bits.
    fn sample(bits: u8, n: usize) -> Vec<u64> {
        let mask = u64::MAX.checked_shr(64 - u32::from(bits)).unwrap_or(0);
        (0..n as u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) & mask)
            .collect()
    }

    #[test]
    fn every_width_round_trips() {
        for bits in 0..=64u8 {
            for n in [0usize, 1, 7, 8, 63, 64, 65, 1000] {
                let values = sample(bits, n);
                let mut buf = vec![0xAB];
                pack(&mut buf, values.iter().copied(), bits);
                assert_eq!(buf.len(), 1 + packed_len(n, bits));
                assert_eq!(
                    unpack_vec(&buf[1..], bits, n).unwrap(),
                    values,
                    "{bits} bits"
                );
            }
        }
    }

    #[test]
    fn sum_matches_the_unpacked_values() {
        for bits in 0..=64u8 {
            for n in [0usize, 1, 7, 8, 9, 63, 64, 65, 4064] {
                let values = sample(bits, n);
                let mut buf = Vec::new();
                pack(&mut buf, values.iter().copied(), bits);
                let want: u128 = values.iter().map(|&v| u128::from(v)).sum();
                assert_eq!(sum(&buf, bits, n).unwrap(), want, "{bits} bits, {n} values");
            }
        }
        // All ones at the widest width summed over runs of 256 groups (52)
        // and at the widest group width: the 64-bit sums must not wrap.
        for bits in [52u8, 56] {
            let mut buf = Vec::new();
            let max = (1u64 << bits) - 1;
            pack(&mut buf, std::iter::repeat_n(max, 4064), bits);
            assert_eq!(sum(&buf, bits, 4064).unwrap(), u128::from(max) * 4064);
        }
        let mut buf = Vec::new();
        pack(&mut buf, std::iter::repeat_n((1u64 << 56) - 1, 4064), 56);
        assert!(
            sum(&buf[1..], 56, 4064).is_err(),
            "a short block is refused"
        );
    }

    #[test]
    fn unpack_into_matches_unpack() {
        for bits in 0..=64u8 {
            for n in [0usize, 1, 7, 8, 9, 63, 64, 65, 4064] {
                let values = sample(bits, n);
                let mut buf = Vec::new();
                pack(&mut buf, values.iter().copied(), bits);
                let mut out = vec![7u64];
                unpack_into(&buf, bits, n, &mut out, |v| v).unwrap();
                assert_eq!(out[0], 7);
                assert_eq!(&out[1..], &values[..], "{bits} bits, {n} values");
            }
        }
        assert!(unpack_into(&[0u8; 3], 5, 8, &mut Vec::new(), |v| v).is_err());
    }

    #[test]
    fn unpack_at_reads_the_values_asked_for() {
        for bits in 0..=64u8 {
            for n in [1usize, 7, 8, 9, 65, 4064] {
                let values = sample(bits, n);
                let mut buf = Vec::new();
                pack(&mut buf, values.iter().copied(), bits);
                let positions: Vec<u32> = (0..n as u32).filter(|i| i % 3 != 1).collect();
                let mut out = vec![];
                unpack_at(&buf, bits, n, &positions, &mut out, |v| v).unwrap();
                let want: Vec<u64> = positions.iter().map(|&i| values[i as usize]).collect();
                assert_eq!(out, want, "{bits} bits, {n} values");
                // The last row alone, where the padding is all that follows.
                let mut last = vec![];
                unpack_at(&buf, bits, n, &[n as u32 - 1], &mut last, |v| v).unwrap();
                assert_eq!(last, [values[n - 1]]);
                assert!(unpack_at(&buf, bits, n, &[n as u32], &mut last, |v| v).is_err());
            }
        }
        assert!(unpack_at(&[0u8; 3], 5, 8, &[0], &mut Vec::new(), |v| v).is_err());
    }

    #[test]
    fn wrong_lengths_are_errors() {
        let mut buf = Vec::new();
        pack(&mut buf, [1, 2, 3], 2);
        assert!(unpack_vec(&buf[..buf.len() - 1], 2, 3).is_err());
        assert!(unpack_vec(&buf, 2, 5).is_err());
        assert!(unpack_vec(&buf, 65, 3).is_err());
        assert_eq!(bits_for(0), 0);
        assert_eq!(bits_for(255), 8);
        assert_eq!(bits_for(u64::MAX), 64);
    }
}
