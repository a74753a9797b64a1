//! Sizes as people type them: `1x1x28x28`, `64KiB`.

/// `1x1x28x28` -> `[1, 1, 28, 28]` (rank 2 to 4, every dim from 1 to u32::MAX).
pub fn dims(s: &str) -> Result<Vec<usize>, String> {
    let d: Vec<usize> = s
        .split(['x', 'X', ','])
        .map(|p| p.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|_| format!("input size {s:?}: expected dims like 1x1x28x28"))?;
    if !(2..=4).contains(&d.len()) || d.contains(&0) {
        return Err(format!(
            "input size {s:?}: expected 2 (N, features), 3 (NCL) or 4 (NCHW) dims of at least 1"
        ));
    }
    if let Some(big) = d.iter().find(|&&n| n > u32::MAX as usize) {
        return Err(format!(
            "input size {s:?}: dim {big} is more than {} (u32::MAX)",
            u32::MAX
        ));
    }
    Ok(d)
}

/// `64KiB`, `1MiB`, `8GiB`, `64kB`, `2GB`, `20000` -> bytes.
pub fn bytes(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: usize = num
        .parse()
        .map_err(|_| format!("size {s:?}: expected e.g. 64KiB"))?;
    let k = match unit.trim() {
        "" | "B" => 1,
        "KiB" | "K" | "k" => 1024,
        "kB" | "KB" => 1000,
        "MiB" | "M" => 1024 * 1024,
        "MB" => 1_000_000,
        "GiB" | "G" => 1 << 30,
        "GB" => 1_000_000_000,
        u => {
            return Err(format!(
                "size {s:?}: unknown unit {u:?} (B, KiB, kB, MiB, MB, GiB, GB)"
            ))
        }
    };
    n.checked_mul(k).ok_or_else(|| format!("size {s:?} is too large"))
}

pub use torchlet::model::name_matches as matches;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_budgets_and_patterns() {
        assert_eq!(dims("1x1x28x28").unwrap(), [1, 1, 28, 28]);
        assert_eq!(dims("2x40x100").unwrap(), [2, 40, 100]);
        // [N, features] (an MLP's input) is an input size too; one dim or five are not.
        assert_eq!(dims("8x64").unwrap(), [8, 64]);
        assert!(dims("1x0x2x2").is_err() && dims("28").is_err() && dims("ax1x1").is_err());
        assert!(dims("1x1x1x1x1").is_err());
        assert_eq!(bytes("64KiB").unwrap(), 65536);
        assert_eq!(bytes("1MiB").unwrap(), 1 << 20);
        assert_eq!(bytes("20000").unwrap(), 20000);
        assert_eq!(bytes("8GiB").unwrap(), 8 << 30);
        assert_eq!(bytes("2GB").unwrap(), 2_000_000_000);
        assert!(bytes("99999999999999999999GiB").is_err());
        assert!(dims("1x1x4294967296x2").is_err() && dims("1x1x4294967295x2").is_ok());
        assert!(bytes("12parsecs").is_err() && bytes("KiB").is_err());
        assert!(matches("features.*", "features.0.weight"));
        assert!(matches("*.bias", "fc.bias") && !matches("*.bias", "fc.weight"));
        assert!(matches("fc.weight", "fc.weight") && !matches("fc", "fc.weight"));
        assert!(matches("*", "") && matches("a*b*c", "aXbYc") && !matches("a*b*c", "aXbY"));
    }
}
