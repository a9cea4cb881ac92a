//! Number and time formatting as C++ iostreams print them, so our text matches `osdmaptool`.

use crate::map::UTime;

/// `ostream << double` with the default precision 6 (printf `%g`).
pub fn g6(x: f64) -> String {
    if x.is_nan() {
        // x86 produces the negative quiet NaN for 0/0; glibc prints its sign.
        return if x.is_sign_negative() {
            "-nan".into()
        } else {
            "nan".into()
        };
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf".into() } else { "inf".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    // Round to 6 significant digits first: that decides the exponent, as %g does.
    let scientific = format!("{x:.5e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if !(-4..6).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!("{}e{sign}{:02}", trim_zeros(mantissa), exponent.abs());
    }
    let decimals = usize::try_from(5 - exponent).unwrap_or(0);
    trim_zeros(&format!("{x:.decimals$}")).to_string()
}

/// `ostream << float`: promoted to double, then `%g`.
pub fn g6_f32(x: f32) -> String {
    g6(f64::from(x))
}

fn trim_zeros(text: &str) -> &str {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    }
}

/// Days since 1970-01-01 -> (year, month, day), proleptic Gregorian.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `utime_t` as Ceph prints it: raw `sec.usec` below ten years, else ISO 8601. Ceph uses the
/// local zone; we print UTC (`+0000`), what Ceph prints on a UTC host.
pub fn utime(t: UTime) -> String {
    let microseconds = t.nanoseconds / 1000;
    if t.seconds < 60 * 60 * 24 * 365 * 10 {
        return format!("{}.{microseconds:06}", t.seconds);
    }
    let seconds = i64::from(t.seconds);
    let (year, month, day) = civil_from_days(seconds.div_euclid(86_400));
    let of_day = seconds.rem_euclid(86_400);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{microseconds:06}+0000",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

/// A uuid as `8-4-4-4-12` lowercase hex.
pub fn uuid(bytes: &[u8; 16]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// A `vector<int>` as Ceph prints it: `[1,2,3]`.
pub fn osd_list(osds: &[i32]) -> String {
    let items: Vec<String> = osds.iter().map(i32::to_string).collect();
    format!("[{}]", items.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g6_matches_printf() {
        assert_eq!(g6(1.0), "1");
        assert_eq!(g6(10.8197), "10.8197");
        assert_eq!(g6(0.106_076_123), "0.106076");
        assert_eq!(g6(0.000_012_5), "1.25e-05");
        assert_eq!(g6(1_234_567.0), "1.23457e+06");
        assert_eq!(g6(123_456.0), "123456");
        assert_eq!(g6(0.5), "0.5");
        assert_eq!(g6(f64::NAN.copysign(-1.0)), "-nan");
    }

    #[test]
    fn utime_formats() {
        assert_eq!(
            utime(UTime {
                seconds: 0,
                nanoseconds: 0
            }),
            "0.000000"
        );
        let t = UTime {
            seconds: 1_795_343_200,
            nanoseconds: 841_378_000,
        };
        assert_eq!(utime(t), "2026-11-22T10:26:40.841378+0000");
    }
}
