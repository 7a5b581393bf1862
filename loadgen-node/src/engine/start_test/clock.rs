//! Wall-clock times as the official logs print them.

use std::time::{SystemTime, UNIX_EPOCH};

/// `YYYY-MM-DDTHH:MM:SSZ`.
pub(super) fn iso8601_utc(t: SystemTime) -> String {
    let (date, time, _) = civil(t);
    format!(
        "{}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        date.0, date.1, date.2, time.0, time.1, time.2
    )
}

/// `MM-DD-YYYY HH:MM:SS.mmm` in UTC, the power-log format.
pub(super) fn power_time(t: SystemTime) -> String {
    let (date, time, ms) = civil(t);
    format!(
        "{:02}-{:02}-{} {:02}:{:02}:{:02}.{ms:03}",
        date.1, date.2, date.0, time.0, time.1, time.2
    )
}

/// UTC calendar date, time of day and milliseconds (Howard Hinnant's
/// days-to-civil algorithm).
fn civil(t: SystemTime) -> ((i64, u32, u32), (u64, u64, u64), u64) {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        (year, month, day),
        (rem / 3600, rem % 3600 / 60, rem % 60),
        u64::from(since.subsec_millis()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_format_like_the_official_logs() {
        let t = UNIX_EPOCH + std::time::Duration::from_millis(1_795_316_125_792);
        assert_eq!(iso8601_utc(t), "2026-11-22T02:55:25Z");
        assert_eq!(power_time(t), "11-22-2026 02:55:25.792");
    }
}
