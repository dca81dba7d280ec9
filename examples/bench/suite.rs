//! The suite's definition, read from `bench/suite.json` (which the Python peers read too,
//! `bench/peers_common.py`): each family's shapes, full and `--quick`, and each record `kernel`
//! label's minimum bytes and flops as expressions over the shape's names. The shapes and the
//! models are written there once; the family files take them from here.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::Value;

/// The definition, compiled into the binary (the GPU machine runs it without the repository's
/// files beside it).
const SUITE: &str = include_str!("../../bench/suite.json");

fn suite() -> &'static Value {
    static PARSED: OnceLock<Value> = OnceLock::new();
    PARSED.get_or_init(|| serde_json::from_str(SUITE).expect("bench/suite.json is valid JSON"))
}

fn family(name: &str) -> &'static Value {
    &suite()["families"][name]
}

/// The shapes of `family` (`"full"` or `"quick"` list), each as its numbers in the order of the
/// family's `dims`.
pub fn shapes(name: &str, quick: bool) -> Vec<Vec<usize>> {
    let list = &family(name)[if quick { "quick" } else { "full" }];
    let list = list
        .as_array()
        .unwrap_or_else(|| panic!("bench/suite.json: family {name} has no shapes"));
    list.iter().map(numbers).collect()
}

fn numbers(shape: &Value) -> Vec<usize> {
    shape
        .as_array()
        .expect("a shape is a list of numbers")
        .iter()
        .map(|d| d.as_u64().expect("a dimension is a whole number") as usize)
        .collect()
}

/// The sizes of a one-dimensional family (`n`).
pub fn sizes(name: &str, quick: bool) -> Vec<usize> {
    shapes(name, quick).into_iter().map(|s| s[0]).collect()
}

/// A family's extra list of shapes `key` (softmax's and decode attention's `plans`: shapes only
/// `--plans` times).
pub fn extra_shapes(name: &str, key: &str) -> Vec<Vec<usize>> {
    family(name)[key]
        .as_array()
        .unwrap_or_else(|| panic!("bench/suite.json: family {name} has no {key}"))
        .iter()
        .map(numbers)
        .collect()
}

/// A two-dimensional family's extra `(rows, cols)` list `key` ([`extra_shapes`]).
pub fn extra_shapes2(name: &str, key: &str) -> Vec<(usize, usize)> {
    extra_shapes(name, key)
        .into_iter()
        .map(|s| (s[0], s[1]))
        .collect()
}

/// The `(rows, cols)` shapes of a two-dimensional family.
pub fn shapes2(name: &str, quick: bool) -> Vec<(usize, usize)> {
    shapes(name, quick).into_iter().map(|s| (s[0], s[1])).collect()
}

/// The `(m, n, k)` shapes of a matrix-product family.
pub fn shapes3(name: &str, quick: bool) -> Vec<(usize, usize, usize)> {
    shapes(name, quick)
        .into_iter()
        .map(|s| (s[0], s[1], s[2]))
        .collect()
}

/// A family's extra list of numbers (`temperatures` of softmax).
pub fn floats(name: &str, key: &str) -> Vec<f64> {
    family(name)[key]
        .as_array()
        .unwrap_or_else(|| panic!("bench/suite.json: family {name} has no {key}"))
        .iter()
        .map(|x| x.as_f64().expect("a number"))
        .collect()
}

/// A family's extra shape, full or `--quick` (`f32_out` of matmul_half).
pub fn extra_shape(name: &str, key: &str, quick: bool) -> Vec<usize> {
    numbers(&family(name)[key][if quick { "quick" } else { "full" }])
}

/// The minimum bytes a `kernel` record moves at the shape named by `vars`.
pub fn bytes(kernel: &str, vars: &[(&str, usize)]) -> f64 {
    model(kernel, "bytes", vars)
}

/// The flops of a `kernel` record at the shape named by `vars`.
pub fn flops(kernel: &str, vars: &[(&str, usize)]) -> f64 {
    model(kernel, "flops", vars)
}

fn model(kernel: &str, what: &str, vars: &[(&str, usize)]) -> f64 {
    let expr = suite()["models"][kernel][what]
        .as_str()
        .unwrap_or_else(|| panic!("bench/suite.json: no {what} model for kernel {kernel}"));
    let vars: HashMap<&str, f64> = vars.iter().map(|&(k, v)| (k, v as f64)).collect();
    eval(expr, &vars).unwrap_or_else(|e| panic!("bench/suite.json: {kernel}.{what} = {expr:?}: {e}"))
}

/// Evaluates `expr` (numbers, names, `+`, `-`, `*`, parentheses) with the names' values.
pub fn eval(expr: &str, vars: &HashMap<&str, f64>) -> Result<f64, String> {
    let tokens: Vec<char> = expr.chars().filter(|c| !c.is_whitespace()).collect();
    let mut pos = 0;
    let value = sum(&tokens, &mut pos, vars)?;
    if pos != tokens.len() {
        return Err(format!("unexpected {:?} at {pos}", tokens[pos]));
    }
    Ok(value)
}

fn sum(t: &[char], pos: &mut usize, vars: &HashMap<&str, f64>) -> Result<f64, String> {
    let mut value = product(t, pos, vars)?;
    while *pos < t.len() && (t[*pos] == '+' || t[*pos] == '-') {
        let plus = t[*pos] == '+';
        *pos += 1;
        let rhs = product(t, pos, vars)?;
        value = if plus { value + rhs } else { value - rhs };
    }
    Ok(value)
}

fn product(t: &[char], pos: &mut usize, vars: &HashMap<&str, f64>) -> Result<f64, String> {
    let mut value = atom(t, pos, vars)?;
    while *pos < t.len() && t[*pos] == '*' {
        *pos += 1;
        value *= atom(t, pos, vars)?;
    }
    Ok(value)
}

fn atom(t: &[char], pos: &mut usize, vars: &HashMap<&str, f64>) -> Result<f64, String> {
    let Some(&c) = t.get(*pos) else {
        return Err("unexpected end".to_string());
    };
    if c == '(' {
        *pos += 1;
        let value = sum(t, pos, vars)?;
        if t.get(*pos) != Some(&')') {
            return Err("missing )".to_string());
        }
        *pos += 1;
        return Ok(value);
    }
    let start = *pos;
    while *pos < t.len() && (t[*pos].is_ascii_alphanumeric() || t[*pos] == '_' || t[*pos] == '.') {
        *pos += 1;
    }
    let word: String = t[start..*pos].iter().collect();
    if word.is_empty() {
        return Err(format!("unexpected {c:?} at {start}"));
    }
    if c.is_ascii_digit() {
        return word.parse().map_err(|_| format!("bad number {word}"));
    }
    vars.get(word.as_str())
        .copied()
        .ok_or_else(|| format!("no value for {word}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_has_shapes_and_every_kernel_a_model() {
        let families = suite()["families"].as_object().unwrap();
        for (name, f) in families {
            let dims = f["dims"].as_array().unwrap().len();
            for quick in [false, true] {
                let s = shapes(name, quick);
                assert!(!s.is_empty(), "{name}: no shapes");
                assert!(
                    s.iter().all(|s| s.len() == dims),
                    "{name}: a shape of the wrong rank"
                );
            }
            for kernel in f["kernels"].as_array().unwrap() {
                let kernel = kernel.as_str().unwrap();
                assert!(
                    suite()["models"][kernel]["bytes"].is_string(),
                    "{kernel}: no byte model"
                );
            }
        }
    }

    #[test]
    fn models_evaluate() {
        let mmk = [("m", 2), ("n", 3), ("k", 5)];
        assert_eq!(bytes("matmul", &mmk), 4.0 * (10 + 15 + 6) as f64);
        assert_eq!(flops("matmul", &mmk), 60.0);
        assert_eq!(bytes("add", &[("n", 10)]), 120.0);
        assert_eq!(
            bytes("cross_entropy_mean", &[("rows", 2), ("cols", 3)]),
            24.0 + 16.0 + 4.0
        );
        assert!(eval("2*(x", &HashMap::from([("x", 1.0)])).is_err());
        assert!(eval("y", &HashMap::new()).is_err());
    }
}
