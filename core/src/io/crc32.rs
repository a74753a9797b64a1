//! CRC-32 (IEEE 802.3, the one of zlib, PNG and `zlib.crc32` in Python): reflected
//! polynomial `0xEDB8_8320`, initial value and final xor `0xFFFF_FFFF`.
//!
//! - A 1 KiB table built at compile time, one table look-up per byte.
//! - [`Crc32`] is incremental, so a writer can checksum a file it streams out in
//!   pieces (to flash) and a verifier can check one it reads back in pieces.

/// The byte-wise table of the reflected polynomial.
const TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// An incremental CRC-32.
#[derive(Clone, Copy, Debug)]
pub struct Crc32 {
    state: u32,
}

impl Default for Crc32 {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc32 {
    /// A checksum of nothing yet.
    pub const fn new() -> Self {
        Crc32 { state: 0xFFFF_FFFF }
    }

    /// Feeds more bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        let mut c = self.state;
        for &b in bytes {
            c = TABLE[((c ^ b as u32) & 0xFF) as usize] ^ (c >> 8);
        }
        self.state = c;
    }

    /// The checksum of everything fed so far.
    pub fn finish(&self) -> u32 {
        self.state ^ 0xFFFF_FFFF
    }
}

/// The CRC-32 of `bytes` in one call.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut c = Crc32::new();
    c.update(bytes);
    c.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_value_of_the_standard() {
        // The "check" value of CRC-32/ISO-HDLC in every CRC catalogue.
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn incremental_equals_one_shot() {
        let data: [u8; 100] = core::array::from_fn(|i| (i * 37 + 11) as u8);
        let mut c = Crc32::new();
        for part in data.chunks(7) {
            c.update(part);
        }
        assert_eq!(c.finish(), crc32(&data));
    }
}
