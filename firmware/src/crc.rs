//! CRC-32 (IEEE 802.3, as zlib) for the asset checksums. Temporary: the project's
//! weights format (core `io`, issue 7) brings its own; this one goes when it lands.

/// The CRC-32 of `bytes`, bit by bit (runs once per blob at boot).
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut c = 0xFFFF_FFFFu32;
    for &b in bytes {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
    }
    c ^ 0xFFFF_FFFF
}
