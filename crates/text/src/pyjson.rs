//! `tojson` exactly as Hugging Face's chat-template environment defines it:
//!
//! ```python
//! def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
//!     return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
//!                       separators=separators, sort_keys=sort_keys)
//! ```
//!
//! minijinja's own `tojson` HTML-escapes `<`, `>`, `&` and `'` (as Jinja2's built-in does) and
//! writes compact `,`/`:` separators; Python's `json.dumps` does neither. Tool schemas in the
//! system prompt are printed with this filter, so every byte here reaches the model.

use minijinja::value::{from_args, Kwargs, Rest, ValueKind};
use minijinja::{Error, ErrorKind, Value};
use std::fmt::Write;

/// How `json.dumps` was asked to format its output.
struct Style {
    ensure_ascii: bool,
    /// `None` = single line; `Some(unit)` = one item per line, nested levels repeat `unit`.
    indent: Option<String>,
    item_sep: String,
    key_sep: String,
    sort_keys: bool,
}

/// The `tojson` filter. Positional arguments follow HF's signature order
/// (`ensure_ascii, indent, separators, sort_keys`), so `x|tojson(2)` sets ensure_ascii as in HF.
pub fn tojson_filter(value: &Value, rest: Rest<Value>) -> Result<Value, Error> {
    let (args, kwargs): (&[Value], Kwargs) = from_args(&rest)?;
    const NAMES: [&str; 4] = ["ensure_ascii", "indent", "separators", "sort_keys"];
    if args.len() > NAMES.len() {
        return Err(Error::new(ErrorKind::TooManyArguments, "tojson takes at most 4 arguments"));
    }
    let arg = |i: usize| -> Result<Value, Error> {
        match (args.get(i), kwargs.get::<Option<Value>>(NAMES[i])?) {
            (Some(_), Some(_)) => Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson got multiple values for argument '{}'", NAMES[i]),
            )),
            (Some(v), None) => Ok(v.clone()),
            (None, Some(v)) => Ok(v),
            (None, None) => Ok(Value::UNDEFINED),
        }
    };
    let (ensure_ascii, indent, separators, sort_keys) = (arg(0)?, arg(1)?, arg(2)?, arg(3)?);
    kwargs.assert_all_used()?;

    let indent = match indent.kind() {
        ValueKind::Undefined | ValueKind::None => None,
        ValueKind::String => Some(indent.as_str().unwrap_or_default().to_string()),
        // Python: `' ' * indent`, so zero or negative gives newlines without indentation.
        _ => Some(" ".repeat(usize::try_from(indent.as_i64().unwrap_or(0)).unwrap_or(0))),
    };
    // Python's default separators depend on whether an indent was given.
    let (item_sep, key_sep) = if separators.is_undefined() || separators.is_none() {
        let item = if indent.is_some() { "," } else { ", " };
        (item.to_string(), ": ".to_string())
    } else {
        let parts: Vec<String> = separators
            .try_iter()?
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<_>>()
            .filter(|p: &Vec<String>| p.len() == 2)
            .ok_or_else(|| Error::new(ErrorKind::InvalidOperation, "tojson separators must be two strings"))?;
        (parts[0].clone(), parts[1].clone())
    };
    let style =
        Style { ensure_ascii: ensure_ascii.is_true(), indent, item_sep, key_sep, sort_keys: sort_keys.is_true() };
    let mut out = String::new();
    write_value(&mut out, value, &style, 0)?;
    Ok(Value::from_safe_string(out))
}

fn write_value(out: &mut String, v: &Value, style: &Style, depth: usize) -> Result<(), Error> {
    match v.kind() {
        ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
        ValueKind::Number => write_number(out, v),
        ValueKind::String => write_str(out, v.as_str().unwrap_or_default(), style.ensure_ascii),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = v.try_iter()?.collect();
            write_container(out, style, depth, ('[', ']'), &items, |out, item, d| write_value(out, item, style, d))?;
        }
        ValueKind::Map => {
            let mut entries: Vec<(String, Value)> = Vec::new();
            for key in v.try_iter()? {
                let item = v.get_item(&key)?;
                entries.push((key_string(&key)?, item));
            }
            if style.sort_keys {
                entries.sort_by(|a, b| a.0.cmp(&b.0));
            }
            write_container(out, style, depth, ('{', '}'), &entries, |out, (k, item), d| {
                write_str(out, k, style.ensure_ascii);
                out.push_str(&style.key_sep);
                write_value(out, item, style, d)
            })?;
        }
        // Python raises TypeError for jinja2's Undefined and any other non-JSON object.
        kind => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("Object of type {kind} is not JSON serializable"),
            ))
        }
    }
    Ok(())
}

/// Writes `[a, b]` / `{...}` with Python's layout: empty containers stay `[]`/`{}` even when indenting.
fn write_container<T>(
    out: &mut String,
    style: &Style,
    depth: usize,
    (open, close): (char, char),
    items: &[T],
    mut write_item: impl FnMut(&mut String, &T, usize) -> Result<(), Error>,
) -> Result<(), Error> {
    out.push(open);
    if items.is_empty() {
        out.push(close);
        return Ok(());
    }
    let newline = |out: &mut String, level: usize| {
        if let Some(unit) = &style.indent {
            out.push('\n');
            for _ in 0..level {
                out.push_str(unit);
            }
        }
    };
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(&style.item_sep);
        }
        newline(out, depth + 1);
        write_item(out, item, depth + 1)?;
    }
    newline(out, depth);
    out.push(close);
    Ok(())
}

/// Python converts non-string dict keys: `True` -> "true", `None` -> "null", numbers via repr.
fn key_string(key: &Value) -> Result<String, Error> {
    Ok(match key.kind() {
        ValueKind::String => key.as_str().unwrap_or_default().to_string(),
        ValueKind::None => "null".into(),
        ValueKind::Bool => (if key.is_true() { "true" } else { "false" }).into(),
        ValueKind::Number => {
            let mut s = String::new();
            write_number(&mut s, key);
            s
        }
        kind => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("keys must be str, int, float, bool or None, not {kind}"),
            ))
        }
    })
}

fn write_number(out: &mut String, v: &Value) {
    if v.is_integer() {
        // Display of an integer Value is its plain decimal form (any width).
        let _ = write!(out, "{v}");
    } else {
        out.push_str(&python_float_repr(f64::try_from(v.clone()).unwrap_or(f64::NAN)));
    }
}

/// `repr(float)`: shortest round-trip digits, exponent form when exp < -4 or exp >= 16,
/// always a `.0` on integral values, `NaN`/`Infinity` as `json.dumps` (allow_nan=True) writes them.
pub fn python_float_repr(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return (if x > 0.0 { "Infinity" } else { "-Infinity" }).into();
    }
    // Rust's `{:e}` also prints the shortest round-trip digits, e.g. "-1.2345e-7".
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').expect("{:e} always has an exponent");
    let exp: i32 = exp.parse().expect("{:e} exponent is an integer");
    let (sign, mantissa) = mantissa.strip_prefix('-').map_or(("", mantissa), |m| ("-", m));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if (-4..16).contains(&exp) {
        if exp < 0 {
            let zeros = "0".repeat((-exp - 1) as usize);
            format!("{sign}0.{zeros}{digits}")
        } else {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                format!("{sign}{digits}{}.0", "0".repeat(int_len - digits.len()))
            } else {
                format!("{sign}{}.{}", &digits[..int_len], &digits[int_len..])
            }
        }
    } else {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() { String::new() } else { format!(".{rest}") };
        let exp_sign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{first}{frac}e{exp_sign}{:02}", exp.abs())
    }
}

/// Python's JSON string escaping: `\"`, `\\`, `\n`, `\r`, `\t`, `\b`, `\f`, other controls as
/// `\u00XX`; with ensure_ascii also every non-ASCII char, astral ones as surrogate pairs.
fn write_str(out: &mut String, s: &str, ensure_ascii: bool) {
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
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if ensure_ascii && !c.is_ascii() => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::python_float_repr as r;

    #[test]
    fn float_repr_matches_python() {
        let cases = [
            (1.0, "1.0"),
            (0.5, "0.5"),
            (-0.0, "-0.0"),
            (1e16, "1e+16"),
            (1234567890123456.0, "1234567890123456.0"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1.5e300, "1.5e+300"),
            (123.456, "123.456"),
            (0.1 + 0.2, "0.30000000000000004"),
            (2.5e-7, "2.5e-07"),
        ];
        for (x, want) in cases {
            assert_eq!(r(x), want, "repr({x:e})");
        }
    }
}
