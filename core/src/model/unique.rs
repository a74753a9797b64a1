//! Refusing two records of one name (two tensors `"fc.weight"`) when a file is parsed, without allocating and without a quadratic number of name
//! comparisons on any file:
//!
//! - The names are hashed (FNV-1a, 64 bits) a block of [`BLOCK`] records at a time
//!   into a small table on the stack, which is sorted; the block is checked within
//!   itself (neighbours in hash order) and against every record before it, each of
//!   those hashed once and looked up by bisection.
//! - Equal hashes are confirmed by comparing the names, so a collision is never
//!   reported as a duplicate.
//! - Work: `n * ceil(n / BLOCK)` hashes for `n` records. The parser bounds `n` by the
//!   tape records a graph can hold, so even the largest file answers in a fraction of
//!   a second; a real model (a few hundred records) takes one pass.

/// Records hashed together (16 bytes of stack each).
const BLOCK: usize = 64;

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The first record, in order, whose name an earlier record has: its index and name.
/// `walk(off)` reads the record at `off` as `(name, next offset)`; the `count` records
/// start at `start`.
pub(crate) fn first_duplicate<'m>(
    count: usize,
    start: usize,
    walk: impl Fn(usize) -> Option<(&'m str, usize)>,
) -> Option<(usize, &'m str)> {
    let mut first = 0;
    let mut at = start;
    while first < count {
        // This block's hashes, with each record's index and offset, sorted by hash.
        let mut table = [(0u64, 0u32, 0usize); BLOCK];
        let mut len = 0;
        let mut off = at;
        let end = count.min(first + BLOCK);
        for k in first..end {
            let (name, next) = walk(off)?;
            table[len] = (fnv(name), k as u32, off);
            len += 1;
            off = next;
        }
        let block = &mut table[..len];
        block.sort_unstable_by_key(|e| (e.0, e.1));
        let name_of = |o: usize| walk(o).map(|(n, _)| n);
        let mut found: Option<(usize, &'m str)> = None;
        let mut note = |k: usize, name: &'m str| {
            if found.is_none_or(|(j, _)| k < j) {
                found = Some((k, name));
            }
        };
        for pair in block.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if let (true, Some(na), Some(nb)) = (a.0 == b.0, name_of(a.2), name_of(b.2)) {
                if na == nb {
                    note(b.1 as usize, nb);
                }
            }
        }
        // Every earlier record against the block.
        let mut o = start;
        for _ in 0..first {
            let (name, next) = walk(o)?;
            let h = fnv(name);
            let lo = block.partition_point(|e| e.0 < h);
            for e in block[lo..].iter().take_while(|e| e.0 == h) {
                if name_of(e.2) == Some(name) {
                    note(e.1 as usize, name);
                }
            }
            o = next;
        }
        if found.is_some() {
            return found;
        }
        first = end;
        at = off;
    }
    None
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::first_duplicate;
    use std::vec::Vec;

    /// Names laid out as records `0, 1, 2, ...` (the offset is the index).
    fn dup(names: &[&'static str]) -> Option<(usize, &'static str)> {
        first_duplicate(names.len(), 0, |o| names.get(o).map(|&n| (n, o + 1)))
    }

    #[test]
    fn duplicates_are_found_within_and_across_blocks() {
        assert_eq!(dup(&["a", "b", "c"]), None);
        assert_eq!(dup(&["a", "b", "a"]), Some((2, "a")));
        assert_eq!(dup(&["", "x", ""]), Some((2, "")));
        let many: Vec<&'static str> = (0..300)
            .map(|k| &*std::boxed::Box::leak(std::format!("t{k}").into_boxed_str()))
            .collect();
        assert_eq!(dup(&many), None);
        for (a, b) in [(3, 200), (70, 71), (0, 299), (130, 140)] {
            let mut names = many.clone();
            names[b] = names[a];
            assert_eq!(dup(&names), Some((b, names[a])), "{a} {b}");
        }
    }
}
