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
