//! Bodies of the CLI's fuzz targets (core/fuzz), here so that a test replays the kept
//! inputs (core/fuzz/regressions/<target>/) without nightly.
