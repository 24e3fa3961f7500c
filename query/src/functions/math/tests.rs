use super::*;

fn f(name: &str, v: f64) -> f64 {
    eval_scalar_fn(name, v, &[]).expect("known function")
}

#[test]
fn rounding_functions_follow_functions_md() {
    assert_eq!(f("ceil", 1.49), 2.);
    assert_eq!(f("ceil", f64::INFINITY), f64::INFINITY);
    assert!(f("ceil", -0.0).is_sign_negative());
    assert_eq!(f("floor", 1.78), 1.);
    // Ties round up, towards +Inf.
    assert_eq!(f("round", 2.5), 3.);
    assert_eq!(f("round", -2.5), -2.);
    assert_eq!(eval_scalar_fn("round", 5.17, &[0.1]), Some(5.2));
    assert_eq!(eval_scalar_fn("round", 14., &[5.]), Some(15.));
}

#[test]
fn logs_and_exp_special_cases() {
    assert_eq!(f("ln", 0.), f64::NEG_INFINITY);
    assert!(f("ln", -1.).is_nan());
    assert_eq!(f("log2", 8.), 3.);
    assert_eq!(f("log10", 1000.), 3.);
    assert_eq!(f("exp", f64::INFINITY), f64::INFINITY);
    assert!(f("exp", f64::NAN).is_nan());
}

#[test]
fn sgn_keeps_zero_and_nan() {
    assert_eq!(f("sgn", -3.), -1.);
    assert_eq!(f("sgn", 3.), 1.);
    assert_eq!(f("sgn", 0.), 0.);
    assert!(f("sgn", f64::NAN).is_nan());
}

#[test]
fn clamp_rules() {
    assert_eq!(eval_scalar_fn("clamp", 7., &[-5., 5.]), Some(5.));
    assert_eq!(eval_scalar_fn("clamp", -7., &[-5., 5.]), Some(-5.));
    // min > max: no output at all.
    assert_eq!(eval_scalar_fn("clamp", 0., &[5., -5.]), None);
    // A NaN bound makes every value NaN.
    assert!(eval_scalar_fn("clamp", 0., &[f64::NAN, 5.]).expect("value").is_nan());
    assert!(eval_scalar_fn("clamp", 0., &[0., f64::NAN]).expect("value").is_nan());
    assert_eq!(eval_scalar_fn("clamp_min", -7., &[-5.]), Some(-5.));
    assert_eq!(eval_scalar_fn("clamp_max", 7., &[5.]), Some(5.));
    assert!(eval_scalar_fn("clamp_max", 7., &[f64::NAN]).expect("value").is_nan());
    assert_eq!(eval_scalar_fn("clamp", 0., &[]), None);
}

#[test]
fn trig_and_angle_conversion() {
    assert_eq!(f("deg", std::f64::consts::PI), 180.);
    assert_eq!(f("rad", 180.), std::f64::consts::PI);
    assert_eq!(f("sin", 0.), 0.);
    assert_eq!(f("cos", 0.), 1.);
    assert!(f("acos", 2.).is_nan());
    assert_eq!(f("atanh", 1.), f64::INFINITY);
    assert_eq!(f("asinh", 0.), 0.);
    assert_eq!(f("acosh", 1.), 0.);
}

#[test]
fn time_functions_from_functions_test() {
    assert_eq!(f("year", 0.), 1970.);
    assert_eq!(f("year", 1136239445.), 2006.);
    assert_eq!(f("month", 1136239445.), 1.);
    assert_eq!(f("day_of_month", 1136239445.), 2.);
    assert_eq!(f("day_of_year", 1136239445.), 2.);
    assert_eq!(f("day_of_week", 0.), 4.); // a Thursday
    assert_eq!(f("day_of_week", 1136239445.), 1.);
    assert_eq!(f("hour", 1136239445.), 22.);
    assert_eq!(f("minute", 1136239445.), 4.);
    assert_eq!(f("year", 1230767999.), 2008.);
    assert_eq!(f("year", 1230768000.), 2009.);
    assert_eq!(f("month", 1456790399.) + f("day_of_month", 1456790399.) / 100., 2.29);
    assert_eq!(f("month", 1456790400.) + f("day_of_month", 1456790400.) / 100., 3.01);
    assert_eq!(f("day_of_year", 1483191420.), 366.);
    assert_eq!(f("day_of_year", 1672493820.), 365.);
    assert_eq!(f("days_in_month", 1454284800.), 29.);
    assert_eq!(f("days_in_month", 1485907200.), 28.);
    assert_eq!(f("days_in_month", 1451606400.), 31.); // 2016-01-01
}

#[test]
fn time_functions_truncate_towards_zero_and_reject_non_finite() {
    // -0.5 s truncates to 0 (1970-01-01), as Go's int64() conversion does.
    assert_eq!(f("year", -0.5), 1970.);
    assert_eq!(f("year", -1.), 1969.);
    assert!(f("year", f64::NAN).is_nan());
    assert!(f("hour", f64::INFINITY).is_nan());
}

#[test]
fn unknown_names_are_none_and_known_names_are_listed() {
    assert_eq!(eval_scalar_fn("nope", 1., &[]), None);
    for name in SCALAR_FUNCTIONS {
        assert!(is_scalar_fn(name));
        let args: &[f64] = if *name == "clamp" { &[0., 1.] } else { &[1.] };
        assert!(eval_scalar_fn(name, 0.5, args).is_some(), "{name}");
    }
}

#[test]
fn trig_values_from_trig_functions_test() {
    let cases: &[(&str, f64, f64)] = &[
        ("sin", 10., -0.5440211108893699),
        ("sin", 20., 0.9129452507276277),
        ("cos", 10., -0.8390715290764524),
        ("cos", 20., 0.40808206181339196),
        ("tan", 10., 0.6483608274590867),
        ("tan", 20., 2.2371609442247427),
        ("asin", 10. - 10.1, -0.10016742116155944),
        ("acos", 10. - 10.1, 1.670963747956456),
        ("atan", 10., 1.4711276743037345),
        ("atan", 20., 1.5208379310729538),
        ("sinh", 10., 11013.232920103324),
        ("sinh", 20., 2.4258259770489514e8),
        ("cosh", 10., 11013.232920103324),
        ("cosh", 20., 2.4258259770489514e8),
        ("tanh", 10., 0.9999999958776927),
        ("tanh", 20., 1.),
        ("asinh", 10., 2.99822295029797),
        ("asinh", 20., 3.6895038689889055),
        ("acosh", 10., 2.993222846126381),
        ("acosh", 20., 3.6882538673612966),
        ("atanh", 10. - 10.1, -0.10033534773107522),
        ("rad", 10., 0.17453292519943295),
        ("rad", 20., 0.3490658503988659),
        ("deg", 10., 572.9577951308232),
        ("deg", 20., 1145.9155902616465),
    ];
    for (name, x, want) in cases {
        let got = f(name, *x);
        // promqltest compares with a relative tolerance of 1e-6, and the file relies on it:
        // its sinh(10) is really cosh(10) (they differ by 4e-9 relative).
        assert!((got - want).abs() <= 1e-6 * want.abs().max(1.0), "{name}({x}) = {got}, want {want}");
    }
    assert_eq!(f("sinh", 10.), 11013.232874703393);
    for name in
        ["sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "rad", "deg"]
    {
        assert!(f(name, f64::NAN).is_nan(), "{name}(NaN)");
    }
}
