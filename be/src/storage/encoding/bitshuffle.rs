//! Bit shuffle (Doris' BIT_SHUFFLE, after the bitshuffle library): the
//! values of a page are transposed into bit planes, plane `b` holding bit `b`
//! of every value. Bits that rarely change (the high bits of small integers,
//! a float's sign and exponent) become long runs of equal bytes that the
//! page compressor then squeezes out.
//!
//! Layout for `n` values of `w` bytes: `n` is padded to a multiple of 8 with
//! zero values; plane `b` (0 = least significant bit of byte 0) takes
//! `n_pad / 8` bytes, planes in order. Groups of 8 values are transposed as
//! 8x8 bit matrices, one byte position at a time.

use tethys_common::{Result, TethysError};

/// Transposes the 8x8 bit matrix whose rows are the bytes of `x`.
fn transpose8(mut x: u64) -> u64 {
    let t = (x ^ (x >> 7)) & 0x00AA_00AA_00AA_00AA;
    x ^= t ^ (t << 7);
    let t = (x ^ (x >> 14)) & 0x0000_CCCC_0000_CCCC;
    x ^= t ^ (t << 14);
    let t = (x ^ (x >> 28)) & 0x0000_0000_F0F0_F0F0;
    x ^= t ^ (t << 28);
    x
}

/// Bytes the shuffled form of `n` values of `w` bytes takes.
pub fn shuffled_len(n: usize, w: usize) -> usize {
    n.div_ceil(8) * 8 * w
}

/// Appends the bit planes of `values` (`n` values of `w` bytes each).
pub fn shuffle(values: &[u8], w: usize, out: &mut Vec<u8>) {
    let n = values.len() / w.max(1);
    let groups = n.div_ceil(8);
    let start = out.len();
    out.resize(start + shuffled_len(n, w), 0);
    let planes = &mut out[start..];
    for g in 0..groups {
        for k in 0..w {
            let mut x = 0u64;
            for r in 0..8 {
                let e = g * 8 + r;
                if e < n {
                    x |= u64::from(values[e * w + k]) << (8 * r);
                }
            }
            let t = transpose8(x);
            for j in 0..8 {
                planes[(k * 8 + j) * groups + g] = (t >> (8 * j)) as u8;
            }
        }
    }
}

/// Reverses [`shuffle`]: the `n` values of `w` bytes held in `planes`.
pub fn unshuffle(planes: &[u8], w: usize, n: usize) -> Result<Vec<u8>> {
    if planes.len() != shuffled_len(n, w) {
        return Err(TethysError::Corruption(format!(
            "bit-shuffled block of {} bytes for {n} values of {w} bytes",
            planes.len()
        )));
    }
    let groups = n.div_ceil(8);
    let mut out = vec![0u8; n * w];
    for g in 0..groups {
        for k in 0..w {
            let mut x = 0u64;
            for j in 0..8 {
                x |= u64::from(planes[(k * 8 + j) * groups + g]) << (8 * j);
            }
            let t = transpose8(x);
            for r in 0..8 {
                let e = g * 8 + r;
                if e < n {
                    out[e * w + k] = (t >> (8 * r)) as u8;
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planes_hold_one_bit_of_every_value() {
        // Eight values with only bit 0 set: plane 0 is all ones, the rest zero.
        let mut out = Vec::new();
        shuffle(&[1u8; 8], 1, &mut out);
        assert_eq!(out, vec![0xFF, 0, 0, 0, 0, 0, 0, 0]);
        let mut out = Vec::new();
        shuffle(&[0x80, 0, 0, 0, 0, 0, 0, 0], 1, &mut out);
        assert_eq!(out, vec![0, 0, 0, 0, 0, 0, 0, 1]);
    }

    #[test]
    fn round_trips() {
        for w in [1usize, 2, 4, 8, 16] {
            for n in [0usize, 1, 7, 8, 9, 100, 4064] {
                let values: Vec<u8> = (0..n * w).map(|i| (i * 37 % 251) as u8).collect();
                let mut out = Vec::new();
                shuffle(&values, w, &mut out);
                assert_eq!(out.len(), shuffled_len(n, w));
                assert_eq!(unshuffle(&out, w, n).unwrap(), values);
            }
        }
        assert!(unshuffle(&[0; 7], 1, 8).is_err());
    }
}
