use super::*;

#[test]
fn numbers_have_fixed_decimals_and_no_negative_zero() {
    assert_eq!(num(Some(1.0 / 3.0), 2), "0.33");
    assert_eq!(num(Some(-0.0001), 2), "0.00");
    assert_eq!(num(None, 2), "n/a");
    assert_eq!(num(Some(f64::NAN), 2), "n/a");
    assert_eq!(ratio(Some(1.234)), "1.23×");
}
