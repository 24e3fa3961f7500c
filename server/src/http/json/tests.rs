use super::*;

#[test]
fn floats_are_formatted_like_go_strconv() {
    let cases: &[(f64, &str)] = &[
        (1.0, "1"),
        (0.0, "0"),
        (-0.0, "-0"),
        (123.456, "123.456"),
        (0.1 + 0.2, "0.30000000000000004"),
        (1e-6, "0.000001"),
        (1e-7, "1e-07"),
        (-2.5e-10, "-2.5e-10"),
        (1e20, "100000000000000000000"),
        (-2.5e17, "-250000000000000000"),
        (123456789012345680000.0, "123456789012345680000"),
        (1.5e-6, "0.0000015"),
        (-9.87e-6, "-0.00000987"),
        // Exactly halfway between two 17-digit decimals (…7695312|5): Go's shortest
        // formatting rounds such a tie to the even digit (Rust's `Display` writes …313).
        (2838873137.0 + 197.0 / 256.0, "2838873137.7695312"),
        (1e21, "1e+21"),
        (1.5e300, "1.5e+300"),
        (f64::NAN, "NaN"),
        (f64::INFINITY, "+Inf"),
        (f64::NEG_INFINITY, "-Inf"),
    ];
    for (v, want) in cases {
        assert_eq!(format_float(*v), *want, "formatting {v:e}");
    }
}

proptest::proptest! {
    /// Every finite float is written with the shortest digits that read back as the same
    /// float (as many as Rust's shortest formatting needs), without an exponent where
    /// Prometheus writes none: bit patterns of all magnitudes, values with few decimals
    /// (what gauges hold), large multiples and small reciprocals.
    #[test]
    fn floats_are_the_shortest_digits_that_read_back(
        bits in proptest::num::u64::ANY,
        cents in -10_000_000_000i64..10_000_000_000,
    ) {
        for v in [f64::from_bits(bits), cents as f64 / 100.0, cents as f64 * 1e7, 1.0 / cents as f64] {
            let abs = v.abs();
            if !v.is_finite() {
                continue;
            }
            let s = format_float(v);
            proptest::prop_assert_eq!(s.parse::<f64>().ok(), Some(v), "{}", s);
            if abs == 0.0 || (1e-6..1e21).contains(&abs) {
                proptest::prop_assert!(!s.contains('e'), "{s}");
                proptest::prop_assert_eq!(s.len(), format!("{v}").len(), "{}", s);
            } else {
                let digits = |m: &str| m.chars().filter(char::is_ascii_digit).count();
                let (mantissa, _) = s.split_once('e').expect("an exponent");
                let shortest = format!("{v:e}");
                proptest::prop_assert_eq!(digits(mantissa), digits(shortest.split_once('e').expect("e").0), "{}", s);
            }
        }
    }
}

#[test]
fn timestamps_are_unix_seconds_with_millisecond_fraction() {
    let enc = |t| {
        let mut s = String::new();
        write_timestamp(&mut s, t);
        s
    };
    assert_eq!(enc(1_435_781_451_781), "1435781451.781");
    assert_eq!(enc(1_500), "1.500");
    assert_eq!(enc(1_050), "1.050");
    assert_eq!(enc(1_005), "1.005");
    assert_eq!(enc(2_000), "2");
    assert_eq!(enc(0), "0");
    assert_eq!(enc(-1_500), "-1.500");
}

#[test]
fn strings_are_escaped_like_go_json() {
    let mut s = String::new();
    write_str(&mut s, "a\"b\\c\n\t<>&\u{1}\u{2028}é");
    assert_eq!(s, r#""a\"b\\c\n\t\u003c\u003e\u0026\u0001\u2028é""#);
}

/// The escaping Go's encoding/json (and json-iterator's standard-library-compatible mode,
/// which Prometheus uses) applies: `<`, `>`, `&`, U+2028 and U+2029 as `\uXXXX`; `\n`,
/// `\r`, `\t` short; every other control character (`\b` and `\f` included) as `\u00XX`;
/// DEL and other non-ASCII text as is.
#[test]
fn label_values_are_escaped_byte_for_byte_like_go() {
    let mut s = String::new();
    write_str(&mut s, "<script>&\u{2028}\u{2029}");
    assert_eq!(s, r#""\u003cscript\u003e\u0026\u2028\u2029""#);
    let mut s = String::new();
    write_str(&mut s, "\r\u{8}\u{c}\u{1f}\u{7f}\u{0}");
    assert_eq!(s, "\"\\r\\u0008\\u000c\\u001f\u{7f}\\u0000\"");
}

#[test]
fn label_sets_are_objects_in_label_order_with_go_escaping() {
    let labels = Labels::from_pairs([("__name__", "up"), ("job", "<script>&\u{2028}")]);
    let mut s = String::new();
    write_labels(&mut s, &labels);
    assert_eq!(s, r#"{"__name__":"up","job":"\u003cscript\u003e\u0026\u2028"}"#);
}

#[test]
fn envelopes_have_prometheus_field_order_and_omit_empty_annotations() {
    assert_eq!(success_envelope("[]", &[], &[]), r#"{"status":"success","data":[]}"#);
    assert_eq!(
        success_envelope("[]", &["w<1>".to_owned()], &["i&".to_owned()]),
        r#"{"status":"success","data":[],"warnings":["w\u003c1\u003e"],"infos":["i\u0026"]}"#
    );
    assert_eq!(
        error_envelope("bad_data", "parse error near <"),
        r#"{"status":"error","errorType":"bad_data","error":"parse error near \u003c"}"#
    );
}

#[test]
fn object_writer_keeps_field_order_and_escapes_keys_and_values() {
    let mut s = String::new();
    let mut o = ObjectWriter::new(&mut s);
    o.str("type", "gauge").str("help", "a <b>").int("n", -3).bool("ok", true).null("x").raw("k&", |out| {
        out.push_str("[]");
    });
    o.finish();
    assert_eq!(s, r#"{"type":"gauge","help":"a \u003cb\u003e","n":-3,"ok":true,"x":null,"k\u0026":[]}"#);
}

#[tokio::test]
async fn errors_are_answered_in_the_envelope_with_status_type_and_retry_after() {
    let resp = JsonError(crate::error::ApiError::too_many_requests("over <limit>", 7)).into_response();
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(resp.headers()[header::RETRY_AFTER], "7");
    assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/json");
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX).await.expect("body");
    assert_eq!(&body[..], br#"{"status":"error","errorType":"unavailable","error":"over \u003climit\u003e"}"#);
}
