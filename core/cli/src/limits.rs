//! The budgets every command checks before it allocates for a step or runs one: bytes
//! (`--max-memory`) and multiply-accumulates (`--max-macs`), both read off the meta plan,
//! so a model file or a command line can make a command refuse, never abort the
//! process on a failed allocation or keep it busy for hours.

use torchlet::plan::Thousands;

/// `--max-macs` default: 1e11 multiply-accumulates per step. W1's training step at
/// 28x28 takes about 1.5 M, so a normal user never meets it; one core does it in tens
/// of seconds.
pub const DEFAULT_MAX_MACS: u64 = 100_000_000_000;

/// `--max-memory` default where physical memory cannot be read: 4 GiB.
pub const FALLBACK_MAX_BYTES: usize = 4 << 30;

/// The budgets of one command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The most bytes one step (and a command's outputs) may allocate.
    pub max_bytes: usize,
    /// The most multiply-accumulates one step may take.
    pub max_macs: u64,
}

impl Limits {
    /// `max_bytes` as given, or half of physical memory ([`default_max_bytes`]).
    pub fn new(max_bytes: Option<usize>, max_macs: u64) -> Limits {
        Limits {
            max_bytes: max_bytes.unwrap_or_else(default_max_bytes),
            max_macs,
        }
    }

    /// Refuses `bytes` for `what` when they exceed the memory budget.
    pub fn memory(&self, what: &str, bytes: usize) -> Result<(), String> {
        if bytes <= self.max_bytes {
            return Ok(());
        }
        Err(format!(
            "{what} needs {} bytes, more than the memory budget of {} bytes (--max-memory)",
            Thousands(bytes),
            Thousands(self.max_bytes)
        ))
    }

    /// Refuses `macs` multiply-accumulates for `what` when they exceed the work budget.
    pub fn work(&self, what: &str, macs: u64) -> Result<(), String> {
        if macs <= self.max_macs {
            return Ok(());
        }
        Err(format!(
            "{what} takes {} multiply-accumulates, more than the budget of {} (--max-macs)",
            Thousands64(macs),
            Thousands64(self.max_macs)
        ))
    }
}

/// A u64 with thousands separators (as [`Thousands`] prints a usize).
pub struct Thousands64(pub u64);

impl std::fmt::Display for Thousands64 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let digits = self.0.to_string();
        let mut out = String::with_capacity(digits.len() + digits.len() / 3);
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        f.pad(&out)
    }
}

/// Half of the machine's physical memory (`MemTotal` of /proc/meminfo), leaving the
/// other half to the system and other programs; [`FALLBACK_MAX_BYTES`] when it cannot
/// be read (not Linux, no /proc).
pub fn default_max_bytes() -> usize {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| mem_total(&s))
        .map(|total| total / 2)
        .unwrap_or(FALLBACK_MAX_BYTES)
}

/// `MemTotal:  16318412 kB` -> bytes.
fn mem_total(meminfo: &str) -> Option<usize> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: usize = line
        .trim_start_matches("MemTotal:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kb.checked_mul(1024)
}

/// clap's parser of `--max-memory`: a size as [`crate::args::bytes`] reads it.
pub fn parse_bytes(s: &str) -> Result<usize, String> {
    crate::args::bytes(s)
}

/// clap's parser of `--max-macs`: an integer (`5000000`) or a whole number in
/// scientific notation (`1e11`), at least 1.
pub fn parse_count(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let n = match t.parse::<u64>() {
        Ok(n) => n,
        Err(_) => {
            let f: f64 = t
                .parse()
                .map_err(|_| format!("{s:?}: expected a count such as 1e11 or 5000000"))?;
            // 2^64 as f64: every finite value below it converts exactly.
            if !(f.is_finite() && f.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(&f)) {
                return Err(format!("{s:?}: expected a whole number from 1 to 2^64 - 1"));
            }
            f as u64
        }
    };
    if n == 0 {
        return Err(format!("{s:?}: expected at least 1"));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_refuse_naming_the_numbers() {
        let l = Limits::new(Some(1000), 50);
        assert!(l.memory("x", 1000).is_ok() && l.work("x", 50).is_ok());
        let e = l.memory("the step", 123_456).unwrap_err();
        assert!(e.contains("123,456 bytes") && e.contains("1,000 bytes"), "{e}");
        let e = l.work("the step", 1_234_567).unwrap_err();
        assert!(e.contains("1,234,567") && e.contains("50 (--max-macs)"), "{e}");
    }

    #[test]
    fn counts_and_meminfo_parse() {
        assert_eq!(parse_count("1e11").unwrap(), 100_000_000_000);
        assert_eq!(parse_count("5000000").unwrap(), 5_000_000);
        assert_eq!(parse_count("18446744073709551615").unwrap(), u64::MAX);
        for bad in ["0", "-1", "1.5", "nan", "inf", "1e30", "lots"] {
            assert!(parse_count(bad).is_err(), "{bad}");
        }
        let m = "MemTotal:       16318412 kB\nMemFree:  1 kB\n";
        assert_eq!(mem_total(m), Some(16318412 * 1024));
        assert_eq!(mem_total("nothing"), None);
        assert!(default_max_bytes() > 0);
    }
}
