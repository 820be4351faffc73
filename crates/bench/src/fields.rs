//! The result fields of a run, in order, and their one-line JSON form.

use crate::measure::latency_summary;
use hdrhistogram::Histogram;

/// A value of a result field.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Uint(u64),
    /// Non-finite values (a ratio over zero) are written as null.
    Float(f64),
    Bool(bool),
    Str(String),
    Null,
}

impl Value {
    pub(crate) fn to_json(&self) -> String {
        match self {
            Value::Uint(v) => v.to_string(),
            Value::Float(v) => json_float(*v),
            Value::Bool(v) => v.to_string(),
            Value::Str(v) => json_string(v),
            Value::Null => "null".into(),
        }
    }

    /// How the readable table shows it: like JSON, strings unquoted.
    pub fn to_text(&self) -> String {
        match self {
            Value::Str(v) => v.clone(),
            Value::Null => "-".into(),
            v => v.to_json(),
        }
    }
}

/// Named results in order: one flat JSON object, written by hand (the
/// results are only numbers, booleans and short strings, which does not
/// justify a serialisation crate), or the rows of a table.
#[derive(Default)]
pub struct Fields {
    pub(crate) fields: Vec<(&'static str, Value)>,
}

impl Fields {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, key: &'static str, value: Value) {
        self.fields.push((key, value));
    }

    pub fn uint(&mut self, key: &'static str, value: u64) {
        self.push(key, Value::Uint(value));
    }

    pub fn opt_uint(&mut self, key: &'static str, value: Option<u64>) {
        self.push(key, value.map_or(Value::Null, Value::Uint));
    }

    pub fn float(&mut self, key: &'static str, value: f64) {
        self.push(key, Value::Float(value));
    }

    pub fn opt_float(&mut self, key: &'static str, value: Option<f64>) {
        self.push(key, value.map_or(Value::Null, Value::Float));
    }

    pub fn bool(&mut self, key: &'static str, value: bool) {
        self.push(key, Value::Bool(value));
    }

    pub fn string(&mut self, key: &'static str, value: &str) {
        self.push(key, Value::Str(value.into()));
    }

    /// The `latency_summary` of `latency_us`.
    pub fn latency(&mut self, latency_us: &Histogram<u64>) {
        for (key, us) in latency_summary(latency_us) {
            self.uint(key, us);
        }
    }

    pub fn extend(&mut self, other: Fields) {
        self.fields.extend(other.fields);
    }

    pub fn iter(&self) -> impl Iterator<Item = &(&'static str, Value)> {
        self.fields.iter()
    }

    /// The fields as one JSON object on one line.
    pub fn to_json_line(&self) -> String {
        let body: Vec<String> = self
            .fields
            .iter()
            .map(|(key, value)| format!("{}:{}", json_string(key), value.to_json()))
            .collect();
        format!("{{{}}}", body.join(","))
    }
}

/// Rounded so the lines stay short: two decimals for large values, six for
/// small ones (shares and ratios), trailing zeros dropped.
pub(crate) fn json_float(value: f64) -> String {
    if !value.is_finite() {
        return "null".into();
    }
    let text = if value.abs() >= 100.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.6}")
    };
    let text = text.trim_end_matches('0').trim_end_matches('.');
    match text {
        "" | "-" | "-0" => "0".into(),
        t => t.into(),
    }
}

pub(crate) fn json_string(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_one_flat_object() {
        let mut j = Fields::new();
        j.uint("commits", 12);
        j.float("ratio", 1.25);
        j.float("rate", 12345.678);
        j.float("nan", f64::NAN);
        j.opt_float("none", None);
        j.bool("on", true);
        j.string("name", "a\"b");
        assert_eq!(
            j.to_json_line(),
            r#"{"commits":12,"ratio":1.25,"rate":12345.68,"nan":null,"none":null,"on":true,"name":"a\"b"}"#
        );
    }

    #[test]
    fn floats_are_trimmed() {
        assert_eq!(json_float(0.0), "0");
        assert_eq!(json_float(3.0), "3");
        assert_eq!(json_float(0.000123), "0.000123");
        assert_eq!(json_float(-0.0000001), "0");
    }
}
