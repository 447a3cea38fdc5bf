//! JS numbers to Rust integers. JavaScript hands every number over as an f64; napi's own u32
//! conversion silently wraps (-1 becomes 4294967295) and truncates (2.5 becomes 2), so inputs
//! are taken as f64 and checked here, with the offending field named in the message.
//! Nanosecond times travel as plain numbers: exact up to 2^53 ns (about 104 days).

use crate::error::{invalid_argument, JsResult};

/// Largest integer a JS number holds exactly.
pub const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

pub fn to_u64(field: &str, value: f64) -> JsResult<u64> {
    if !value.is_finite() || value < 0.0 || value.fract() != 0.0 || value > MAX_SAFE_INTEGER {
        return Err(invalid_argument(format!(
            "{field} must be a non-negative integer no larger than 2^53 - 1, got {value}"
        )));
    }
    Ok(value as u64)
}

pub fn to_u32(field: &str, value: f64) -> JsResult<u32> {
    let v = to_u64(field, value)?;
    u32::try_from(v)
        .map_err(|_| invalid_argument(format!("{field} must be at most {}, got {value}", u32::MAX)))
}

pub fn to_u8(field: &str, value: f64) -> JsResult<u8> {
    let v = to_u64(field, value)?;
    u8::try_from(v)
        .map_err(|_| invalid_argument(format!("{field} must be at most {}, got {value}", u8::MAX)))
}

/// A finite, strictly positive number as f32.
pub fn to_positive_f32(field: &str, value: f64) -> JsResult<f32> {
    let v = value as f32;
    if !value.is_finite() || v <= 0.0 || !v.is_finite() {
        return Err(invalid_argument(format!(
            "{field} must be a finite number above 0, got {value}"
        )));
    }
    Ok(v)
}

/// Native time or count to a JS number; saturates instead of wrapping at i64::MAX.
pub fn to_js_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_what_u32_conversion_would_wrap_or_truncate() {
        assert!(to_u32("w", -1.0).is_err());
        assert!(to_u32("w", 2.5).is_err());
        assert!(to_u32("w", f64::NAN).is_err());
        assert!(to_u32("w", 4_294_967_296.0).is_err());
        assert_eq!(to_u32("w", 512.0).unwrap(), 512);
        assert_eq!(to_u64("t", MAX_SAFE_INTEGER).unwrap(), (1u64 << 53) - 1);
        assert!(to_u64("t", MAX_SAFE_INTEGER + 1.0).is_err());
        let err = to_u8("config.jpegQuality", 300.0).unwrap_err();
        assert_eq!(err.status.as_ref(), "INVALID_ARGUMENT");
        assert!(err.reason.starts_with("config.jpegQuality"));
    }

    #[test]
    fn positive_f32() {
        assert!(to_positive_f32("fps", 0.0).is_err());
        assert!(to_positive_f32("fps", f64::INFINITY).is_err());
        assert!(to_positive_f32("fps", 1e300).is_err());
        assert_eq!(to_positive_f32("fps", 25.0).unwrap(), 25.0);
    }
}
