//! Number formatting as C++ iostreams print it, so our logs read the same as
//! the official ones byte for byte.

/// A double as `std::ostream << double` prints it by default (`%g`, six
/// significant digits).
pub(crate) fn cpp_double(x: f64) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.to_string();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    const PRECISION: i32 = 6;
    // Round to six significant digits first; the exponent of the rounded
    // value decides between fixed and scientific notation.
    let sci = format!("{:.*e}", (PRECISION - 1) as usize, x);
    let (mantissa, exponent) = sci
        .split_once('e')
        .expect("scientific format has an exponent");
    let exponent: i32 = exponent.parse().expect("exponent is an integer");
    if !(-4..PRECISION).contains(&exponent) {
        let mantissa = strip_fraction_zeros(mantissa);
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.abs())
    } else {
        let decimals = (PRECISION - 1 - exponent) as usize;
        strip_fraction_zeros(&format!("{x:.decimals$}")).to_string()
    }
}

fn strip_fraction_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// `std::fixed` with the given number of decimals (the official
/// `DoubleToString`).
pub(crate) fn fixed(x: f64, decimals: usize) -> String {
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.to_string();
    }
    if x.is_nan() {
        return "nan".to_string();
    }
    format!("{x:.decimals$}")
}

/// A double as the official JSON log writes it (`std::to_string` is not
/// used for MLLOG values; they go through the stream like any double).
pub(crate) fn json_double(x: f64) -> String {
    if x == f64::INFINITY {
        "Infinity".to_string()
    } else if x == f64::NEG_INFINITY {
        "-Infinity".to_string()
    } else if x.is_nan() {
        "NaN".to_string()
    } else {
        cpp_double(x)
    }
}

/// A JSON string literal with the escapes the official logger applies.
pub(crate) fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Uppercase hexadecimal of response bytes, as in the accuracy log.
pub(crate) fn hex_upper(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpp_double_matches_ostream_defaults() {
        let cases = [
            (2000.0, "2000"),
            (0.99, "0.99"),
            (2066.4412, "2066.44"),
            (1e6, "1e+06"),
            (999999.4, "999999"),
            (999999.6, "1e+06"),
            (5.365824e7, "5.36582e+07"),
            (0.0001, "0.0001"),
            (0.00001234, "1.234e-05"),
            (1.0, "1"),
            (-2.5, "-2.5"),
            (123456789.0, "1.23457e+08"),
            (0.0, "0"),
        ];
        for (x, want) in cases {
            assert_eq!(cpp_double(x), want, "{x}");
        }
    }

    #[test]
    fn fixed_rounds_like_std_fixed() {
        assert_eq!(fixed(90.0, 1), "90.0");
        assert_eq!(fixed(99.9, 2), "99.90");
        assert_eq!(fixed(1336970.987, 2), "1336970.99");
    }

    #[test]
    fn json_helpers() {
        assert_eq!(json_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
        assert_eq!(hex_upper(&[0x01, 0xab, 0xff]), "01ABFF");
        assert_eq!(json_double(f64::INFINITY), "Infinity");
    }
}
