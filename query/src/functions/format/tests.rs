use super::*;

#[test]
fn openmetrics_float_matches_prometheus_spelling() {
    assert_eq!(format_openmetrics_float(0.5), "0.5");
    assert_eq!(format_openmetrics_float(0.01), "0.01");
    assert_eq!(format_openmetrics_float(0.99), "0.99");
    assert_eq!(format_openmetrics_float(1.0), "1.0");
    assert_eq!(format_openmetrics_float(0.0), "0.0");
    assert_eq!(format_openmetrics_float(-1.0), "-1.0");
    assert_eq!(format_openmetrics_float(2.0), "2.0");
    assert_eq!(format_openmetrics_float(123456.0), "123456.0");
    assert_eq!(format_openmetrics_float(1e6), "1e+06");
    assert_eq!(format_openmetrics_float(1234567.0), "1.234567e+06");
    assert_eq!(format_openmetrics_float(0.0001), "0.0001");
    assert_eq!(format_openmetrics_float(0.00001), "1e-05");
    assert_eq!(format_openmetrics_float(1.5e-300), "1.5e-300");
    assert_eq!(format_openmetrics_float(f64::INFINITY), "+Inf");
    assert_eq!(format_openmetrics_float(f64::NAN), "NaN");
}

#[test]
fn go_decimal_never_uses_exponents() {
    assert_eq!(format_go_decimal(6.0), "6");
    assert_eq!(format_go_decimal(0.1), "0.1");
    assert_eq!(format_go_decimal(1e21), "1000000000000000000000");
    assert_eq!(format_go_decimal(1e-7), "0.0000001");
    assert_eq!(format_go_decimal(f64::NEG_INFINITY), "-Inf");
    assert_eq!(format_go_decimal(f64::NAN), "NaN");
}

/// Exactly halfway between two 17-digit decimals (…7695312|5): Go picks the even digit.
#[test]
fn a_tie_between_shortest_digits_goes_to_the_even_one() {
    let v = 2838873137.0 + 197.0 / 256.0;
    assert_eq!(format_go_decimal(v), "2838873137.7695312");
    assert_eq!(format_go_exponent(v), "2.8388731377695312e+09");
    assert_eq!(format_go_g(-v), "-2.8388731377695312e+09");
    assert_eq!(format_go_exponent(1e21), "1e+21");
    assert_eq!(format_go_exponent(-1.5e-7), "-1.5e-07");
    assert_eq!(format_go_exponent(0.0), "0e+00");
    assert_eq!(format_go_decimal(-0.0), "-0");
    assert_eq!(format_go_g(123456.0), "123456");
    assert_eq!(format_go_g(0.0001), "0.0001");
}

proptest::proptest! {
    /// Every finite float reads back from each form, with as many digits as the
    /// shortest round trip needs (Rust's `{:e}` count): all bit patterns, and decimals.
    #[test]
    fn every_form_reads_back_with_the_shortest_digits(
        bits in proptest::num::u64::ANY,
        cents in -10_000_000_000i64..10_000_000_000,
    ) {
        for v in [f64::from_bits(bits), cents as f64 / 100.0] {
            if !v.is_finite() {
                continue;
            }
            let digits = |s: &str| {
                let m = s.split_once('e').map_or(s, |(m, _)| m);
                m.trim_start_matches(['-', '0', '.']).chars().filter(char::is_ascii_digit).collect::<String>().trim_end_matches('0').len()
            };
            let shortest = digits(&format!("{v:e}"));
            for s in [format_go_decimal(v), format_go_exponent(v), format_go_g(v)] {
                proptest::prop_assert_eq!(s.parse::<f64>().ok(), Some(v), "{}", s);
                if v != 0.0 {
                    proptest::prop_assert_eq!(digits(&s), shortest, "{}", s);
                }
            }
        }
    }
}

#[test]
fn le_values_parse_like_go() {
    assert_eq!(parse_go_float("+Inf"), Some(f64::INFINITY));
    assert_eq!(parse_go_float("inf"), Some(f64::INFINITY));
    assert_eq!(parse_go_float("-Inf"), Some(f64::NEG_INFINITY));
    assert_eq!(parse_go_float("1e0"), Some(1.0));
    assert_eq!(parse_go_float(".2"), Some(0.2));
    assert_eq!(parse_go_float("-.2"), Some(-0.2));
    assert!(parse_go_float("NaN").is_some_and(f64::is_nan));
    assert_eq!(parse_go_float(" 1"), None);
    assert_eq!(parse_go_float(""), None);
    assert_eq!(parse_go_float("abc"), None);
}

#[test]
fn le_values_parse_hex_and_underscores_as_go_does() {
    // Go's ParseFloat takes hex floats only with a `p` exponent.
    assert_eq!(parse_go_float("0x1p4"), Some(16.0));
    assert_eq!(parse_go_float("0X1.8P1"), Some(3.0));
    assert_eq!(parse_go_float("-0x1p-2"), Some(-0.25));
    assert_eq!(parse_go_float("0x10"), None);
    // Underscores only between digits (or after the base prefix).
    assert_eq!(parse_go_float("1_0"), Some(10.0));
    assert_eq!(parse_go_float("0x_1p4"), Some(16.0));
    assert_eq!(parse_go_float("_1"), None);
    assert_eq!(parse_go_float("1_"), None);
    assert_eq!(parse_go_float("1__0"), None);
    assert_eq!(parse_go_float("1_.5"), None);
}

#[test]
fn le_values_reject_what_go_rejects() {
    assert_eq!(parse_go_float("1e400"), None, "ErrRange in Go");
    assert_eq!(parse_go_float("--1"), None);
    assert_eq!(parse_go_float("+-1"), None);
    assert_eq!(parse_go_float("+nan"), None);
    assert_eq!(parse_go_float("infin"), None);
    assert_eq!(parse_go_float("1."), Some(1.0));
    assert_eq!(parse_go_float("+Infinity"), Some(f64::INFINITY));
    assert_eq!(parse_go_float("-1.5E-3"), Some(-0.0015));
}

#[test]
fn go_g_switches_to_exponents_at_1e6_and_below_1e_4() {
    assert_eq!(format_go_g(123456.0), "123456");
    assert_eq!(format_go_g(1e6), "1e+06");
    assert_eq!(format_go_g(1234567.0), "1.234567e+06");
    assert_eq!(format_go_g(1e21), "1e+21");
    assert_eq!(format_go_g(0.0001), "0.0001");
    assert_eq!(format_go_g(0.00001), "1e-05");
    assert_eq!(format_go_g(-2.5), "-2.5");
    assert_eq!(format_go_g(0.0), "0");
    assert_eq!(format_go_g(f64::NAN), "NaN");
    assert_eq!(format_go_g(f64::INFINITY), "+Inf");
    assert_eq!(format_go_g(f64::NEG_INFINITY), "-Inf");
}

mod props {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Every finite float in the spellings Prometheus writes (`%g`, shortest decimal,
        /// Rust's `{:e}`) reads back exactly.
        #[test]
        fn go_float_text_round_trips(bits in any::<u64>()) {
            let v = f64::from_bits(bits);
            prop_assume!(v.is_finite());
            for text in [format_go_g(v), format_go_decimal(v), format!("{v:e}")] {
                prop_assert_eq!(parse_go_float(&text).map(f64::to_bits), Some(v.to_bits()), "{}", text);
            }
        }

        /// No input makes the parser panic.
        #[test]
        fn parse_go_float_never_panics(s in "[-+0-9xXpPeE._a-fA-FinINfty]{0,12}") {
            let _ = parse_go_float(&s);
        }
    }
}
