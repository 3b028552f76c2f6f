//! The little expression language of tune constraints and conditions:
//! `TILE_M * TILE_N <= 8192`, `USE_WARP_SPECIALIZATION == 1 && NUM_PRODUCER_WARPS < NUM_WARPS`.
//!
//! Integers, parameter names, `+ - * / %`, comparisons, `&& || !` and parentheses. Every
//! value is an `i64`; comparisons and logic give 0 or 1, and any non-zero value is true.
//! An expression is parsed once (a small Pratt parser; smaller than any dependency) and
//! evaluated against many configurations. Reading a parameter that is absent from a
//! configuration (inactive because its `when:` is false) is an error unless the read is
//! guarded by a short-circuit: `USE_WS == 0 || NUM_PRODUCER_WARPS < NUM_WARPS`.
//!
//! The workloads' shape expressions use it too. It depends on no other repro crate.

use std::collections::BTreeMap;
use std::fmt;

/// A parse error, at a 1-based column of the expression text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("column {col}: {message}")]
pub struct ParseError {
    pub col: usize,
    pub message: String,
}

impl ParseError {
    /// The expression, a caret under the column, and the message: for error reports.
    pub fn render(&self, source: &str) -> String {
        format!(
            "{}\n  {source}\n  {}^",
            self,
            " ".repeat(self.col.saturating_sub(1))
        )
    }
}

/// Why an expression could not be evaluated for one configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    #[error("column {col}: parameter `{name}` is inactive in this configuration; guard the read (e.g. `CONDITION && ...`)")]
    Absent { name: String, col: usize },
    #[error("column {col}: division by zero")]
    DivisionByZero { col: usize },
    #[error("column {col}: integer overflow")]
    Overflow { col: usize },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BinOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

impl BinOp {
    /// Left binding power; every binary operator is left-associative.
    fn power(self) -> u8 {
        match self {
            BinOp::Or => 1,
            BinOp::And => 2,
            BinOp::Eq | BinOp::Ne => 3,
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => 4,
            BinOp::Add | BinOp::Sub => 5,
            BinOp::Mul | BinOp::Div | BinOp::Rem => 6,
        }
    }
}

/// Binding power of the unary operators: above every binary operator.
const UNARY_POWER: u8 = 7;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Int(i64),
    Param(String),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
}

/// A parsed expression. `Display` prints it fully parenthesized (handy in tests and logs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expr {
    node: Node,
    /// 1-based column of the token that produced this node (the operator for binary nodes).
    col: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Int(i64),
    Ident(String),
    Op(&'static str),
    LParen,
    RParen,
    End,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Int(v) => write!(f, "`{v}`"),
            Tok::Ident(s) => write!(f, "`{s}`"),
            Tok::Op(s) => write!(f, "`{s}`"),
            Tok::LParen => f.write_str("`(`"),
            Tok::RParen => f.write_str("`)`"),
            Tok::End => f.write_str("the end of the expression"),
        }
    }
}

const OPERATORS: [&str; 16] = [
    "&&", "||", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "!", "&", "|",
];

fn tokenize(src: &str) -> Result<Vec<(Tok, usize)>, ParseError> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let col = i + 1;
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            let value = text.parse().map_err(|_| ParseError {
                col,
                message: format!("the number `{text}` does not fit in 64 bits"),
            })?;
            out.push((Tok::Int(value), col));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push((Tok::Ident(chars[start..i].iter().collect()), col));
        } else if c == '(' {
            out.push((Tok::LParen, col));
            i += 1;
        } else if c == ')' {
            out.push((Tok::RParen, col));
            i += 1;
        } else {
            let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
            let op = OPERATORS
                .iter()
                .find(|op| rest.starts_with(**op))
                .ok_or_else(|| ParseError {
                    col,
                    message: format!("unexpected character `{c}`"),
                })?;
            if *op == "&" || *op == "|" {
                return Err(ParseError {
                    col,
                    message: format!("bitwise `{op}` is not supported; did you mean `{op}{op}`?"),
                });
            }
            out.push((Tok::Op(op), col));
            i += op.len();
        }
    }
    out.push((Tok::End, chars.len() + 1));
    Ok(out)
}

fn binary_op(tok: &Tok) -> Option<BinOp> {
    let Tok::Op(op) = tok else { return None };
    Some(match *op {
        "||" => BinOp::Or,
        "&&" => BinOp::And,
        "==" => BinOp::Eq,
        "!=" => BinOp::Ne,
        "<" => BinOp::Lt,
        "<=" => BinOp::Le,
        ">" => BinOp::Gt,
        ">=" => BinOp::Ge,
        "+" => BinOp::Add,
        "-" => BinOp::Sub,
        "*" => BinOp::Mul,
        "/" => BinOp::Div,
        "%" => BinOp::Rem,
        _ => return None,
    })
}

/// The closest known name to `name`, if one is close enough to be a likely typo.
pub fn suggest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    let squash = |s: &str| s.replace('_', "").to_ascii_lowercase();
    known
        .iter()
        .map(|k| (strsim::levenshtein(&squash(name), &squash(k)), *k))
        .filter(|(d, k)| *d <= (k.len() / 3).max(1))
        .min()
        .map(|(_, k)| k)
}

struct Parser<'k> {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    known: &'k [&'k str],
}

impl Parser<'_> {
    fn peek(&self) -> &(Tok, usize) {
        &self.toks[self.pos]
    }

    fn next(&mut self) -> (Tok, usize) {
        let t = self.toks[self.pos].clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    /// An operand and the operators binding tighter than `min_power`.
    fn expr(&mut self, min_power: u8, after: Option<&str>) -> Result<Expr, ParseError> {
        let mut lhs = self.operand(after)?;
        loop {
            let (tok, col) = self.peek().clone();
            let Some(op) = binary_op(&tok) else { break };
            if op.power() <= min_power {
                break;
            }
            self.next();
            let Tok::Op(text) = tok else { unreachable!() };
            let rhs = self.expr(op.power(), Some(text))?;
            lhs = Expr {
                node: Node::Binary(op, Box::new(lhs), Box::new(rhs)),
                col,
            };
        }
        Ok(lhs)
    }

    fn operand(&mut self, after: Option<&str>) -> Result<Expr, ParseError> {
        let (tok, col) = self.next();
        match tok {
            Tok::Int(v) => Ok(Expr {
                node: Node::Int(v),
                col,
            }),
            Tok::Ident(name) => {
                if !self.known.contains(&name.as_str()) {
                    let hint = match suggest(&name, self.known) {
                        Some(s) => format!(" — did you mean `{s}`?"),
                        None => format!(" (known: {})", self.known.join(", ")),
                    };
                    return Err(ParseError {
                        col,
                        message: format!("unknown parameter `{name}`{hint}"),
                    });
                }
                Ok(Expr {
                    node: Node::Param(name),
                    col,
                })
            }
            Tok::Op("!") => {
                let inner = self.expr(UNARY_POWER, Some("!"))?;
                Ok(Expr {
                    node: Node::Not(Box::new(inner)),
                    col,
                })
            }
            Tok::Op("-") => {
                let inner = self.expr(UNARY_POWER, Some("-"))?;
                Ok(Expr {
                    node: Node::Neg(Box::new(inner)),
                    col,
                })
            }
            Tok::LParen => {
                let inner = self.expr(0, Some("("))?;
                let (close, ccol) = self.next();
                if close != Tok::RParen {
                    return Err(ParseError {
                        col: ccol,
                        message: format!(
                            "expected `)` to close the `(` at column {col}, found {close}"
                        ),
                    });
                }
                Ok(inner)
            }
            other => Err(ParseError {
                col,
                message: match after {
                    Some(op) => format!("expected an operand after `{op}`, found {other}"),
                    None => format!("expected a number, a parameter or `(`, found {other}"),
                },
            }),
        }
    }
}

impl Expr {
    /// Parse `src`; every parameter name must be one of `known`.
    pub fn parse(src: &str, known: &[&str]) -> Result<Expr, ParseError> {
        let mut parser = Parser {
            toks: tokenize(src)?,
            pos: 0,
            known,
        };
        let expr = parser.expr(0, None)?;
        let (tok, col) = parser.next();
        if tok != Tok::End {
            let message = match tok {
                Tok::RParen => "unmatched `)`".to_string(),
                other => {
                    format!("expected an operator or the end of the expression, found {other}")
                }
            };
            return Err(ParseError { col, message });
        }
        Ok(expr)
    }

    /// The parameter names the expression reads, sorted, each once.
    pub fn params(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.collect_params(&mut out);
        out.sort();
        out.dedup();
        out
    }

    fn collect_params(&self, out: &mut Vec<String>) {
        match &self.node {
            Node::Int(_) => {}
            Node::Param(p) => out.push(p.clone()),
            Node::Not(e) | Node::Neg(e) => e.collect_params(out),
            Node::Binary(_, a, b) => {
                a.collect_params(out);
                b.collect_params(out);
            }
        }
    }

    /// Evaluate against a configuration (active parameters only).
    pub fn eval(&self, config: &BTreeMap<String, i64>) -> Result<i64, EvalError> {
        let overflow = EvalError::Overflow { col: self.col };
        match &self.node {
            Node::Int(v) => Ok(*v),
            Node::Param(name) => config.get(name).copied().ok_or(EvalError::Absent {
                name: name.clone(),
                col: self.col,
            }),
            Node::Not(e) => Ok((e.eval(config)? == 0) as i64),
            Node::Neg(e) => e.eval(config)?.checked_neg().ok_or(overflow),
            Node::Binary(BinOp::And, a, b) => {
                Ok((a.eval(config)? != 0 && b.eval(config)? != 0) as i64)
            }
            Node::Binary(BinOp::Or, a, b) => {
                Ok((a.eval(config)? != 0 || b.eval(config)? != 0) as i64)
            }
            Node::Binary(op, a, b) => {
                let (x, y) = (a.eval(config)?, b.eval(config)?);
                let zero = EvalError::DivisionByZero { col: self.col };
                match op {
                    BinOp::Eq => Ok((x == y) as i64),
                    BinOp::Ne => Ok((x != y) as i64),
                    BinOp::Lt => Ok((x < y) as i64),
                    BinOp::Le => Ok((x <= y) as i64),
                    BinOp::Gt => Ok((x > y) as i64),
                    BinOp::Ge => Ok((x >= y) as i64),
                    BinOp::Add => x.checked_add(y).ok_or(overflow),
                    BinOp::Sub => x.checked_sub(y).ok_or(overflow),
                    BinOp::Mul => x.checked_mul(y).ok_or(overflow),
                    BinOp::Div if y == 0 => Err(zero),
                    BinOp::Rem if y == 0 => Err(zero),
                    BinOp::Div => x.checked_div(y).ok_or(overflow),
                    BinOp::Rem => x.checked_rem(y).ok_or(overflow),
                    BinOp::And | BinOp::Or => unreachable!("handled above"),
                }
            }
        }
    }

    /// True when the expression evaluates to non-zero.
    pub fn holds(&self, config: &BTreeMap<String, i64>) -> Result<bool, EvalError> {
        Ok(self.eval(config)? != 0)
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.node {
            Node::Int(v) => write!(f, "{v}"),
            Node::Param(p) => f.write_str(p),
            Node::Not(e) => write!(f, "(!{e})"),
            Node::Neg(e) => write!(f, "(-{e})"),
            Node::Binary(op, a, b) => {
                let sym = match op {
                    BinOp::Or => "||",
                    BinOp::And => "&&",
                    BinOp::Eq => "==",
                    BinOp::Ne => "!=",
                    BinOp::Lt => "<",
                    BinOp::Le => "<=",
                    BinOp::Gt => ">",
                    BinOp::Ge => ">=",
                    BinOp::Add => "+",
                    BinOp::Sub => "-",
                    BinOp::Mul => "*",
                    BinOp::Div => "/",
                    BinOp::Rem => "%",
                };
                write!(f, "({a} {sym} {b})")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: [&str; 4] = ["TILE_M", "TILE_N", "NUM_WARPS", "NUM_PRODUCER_WARPS"];

    fn parse(src: &str) -> Result<Expr, ParseError> {
        Expr::parse(src, &KNOWN)
    }

    fn cfg(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn precedence_and_associativity() {
        let cases = [
            ("1 + 2 * 3", "(1 + (2 * 3))"),
            ("1 - 2 - 3", "((1 - 2) - 3)"),
            ("TILE_M * TILE_N <= 8192", "((TILE_M * TILE_N) <= 8192)"),
            ("1 < 2 == 1", "((1 < 2) == 1)"),
            ("1 || 0 && 0", "(1 || (0 && 0))"),
            ("!1 || 1", "((!1) || 1)"),
            ("-TILE_M % 3", "((-TILE_M) % 3)"),
            ("(1 + 2) * 3", "((1 + 2) * 3)"),
            ("8 / 2 / 2", "((8 / 2) / 2)"),
        ];
        for (src, want) in cases {
            assert_eq!(parse(src).unwrap().to_string(), want, "{src}");
        }
    }

    #[test]
    fn evaluates_arithmetic_and_logic() {
        let c = cfg(&[("TILE_M", 64), ("TILE_N", 128), ("NUM_WARPS", 4)]);
        let eval = |s: &str| parse(s).unwrap().eval(&c).unwrap();
        assert_eq!(eval("1 + 2 * 3"), 7);
        assert_eq!(eval("(1 + 2) * 3"), 9);
        assert_eq!(eval("TILE_M * TILE_N <= 8192"), 1);
        assert_eq!(eval("TILE_M * TILE_N < 8192"), 0);
        assert_eq!(eval("TILE_N / TILE_M % 3"), 2);
        assert_eq!(eval("-7 / 2"), -3);
        assert_eq!(eval("!(NUM_WARPS == 4) || TILE_M != 64"), 0);
        assert_eq!(eval("NUM_WARPS >= 4 && TILE_M > 32"), 1);
    }

    #[test]
    fn absent_parameter_is_an_error_unless_guarded() {
        let c = cfg(&[("NUM_WARPS", 4)]);
        let bare = parse("NUM_PRODUCER_WARPS < NUM_WARPS").unwrap();
        assert_eq!(
            bare.eval(&c),
            Err(EvalError::Absent {
                name: "NUM_PRODUCER_WARPS".into(),
                col: 1
            })
        );
        let guarded = parse("NUM_WARPS == 4 || NUM_PRODUCER_WARPS < NUM_WARPS").unwrap();
        assert_eq!(guarded.eval(&c), Ok(1));
        let guarded = parse("NUM_WARPS != 4 && NUM_PRODUCER_WARPS < NUM_WARPS").unwrap();
        assert_eq!(guarded.eval(&c), Ok(0));
        // The guard must come first: `&&` and `||` evaluate left to right.
        let late = parse("NUM_PRODUCER_WARPS < NUM_WARPS && NUM_WARPS != 4").unwrap();
        assert!(late.eval(&c).is_err());
    }

    #[test]
    fn arithmetic_errors_name_the_column() {
        let c = cfg(&[("TILE_M", 0)]);
        assert_eq!(
            parse("8 / TILE_M").unwrap().eval(&c),
            Err(EvalError::DivisionByZero { col: 3 })
        );
        assert_eq!(
            parse("9223372036854775807 + 1").unwrap().eval(&c),
            Err(EvalError::Overflow { col: 21 })
        );
    }

    #[test]
    fn unknown_parameter_suggests_the_closest_name() {
        let err = parse("TILEM * 2 <= 64").unwrap_err();
        assert_eq!(err.col, 1);
        assert_eq!(
            err.message,
            "unknown parameter `TILEM` — did you mean `TILE_M`?"
        );
        let err = parse("1 + tile_n").unwrap_err();
        assert_eq!(
            (err.col, err.message.as_str()),
            (5, "unknown parameter `tile_n` — did you mean `TILE_N`?")
        );
        let err = parse("BLOCK < 2").unwrap_err();
        assert!(
            err.message.contains("known: TILE_M, TILE_N"),
            "{}",
            err.message
        );
    }

    #[test]
    fn syntax_errors_point_at_the_column() {
        let cases = [
            (
                "TILE_M *",
                9,
                "expected an operand after `*`, found the end of the expression",
            ),
            (
                "TILE_M * * 2",
                10,
                "expected an operand after `*`, found `*`",
            ),
            (
                "(TILE_M + 1",
                12,
                "expected `)` to close the `(` at column 1, found the end of the expression",
            ),
            ("TILE_M + 1)", 11, "unmatched `)`"),
            (
                "TILE_M 2",
                8,
                "expected an operator or the end of the expression, found `2`",
            ),
            (
                "TILE_M & 1",
                8,
                "bitwise `&` is not supported; did you mean `&&`?",
            ),
            ("TILE_M = 1", 8, "unexpected character `=`"),
            (
                "",
                1,
                "expected a number, a parameter or `(`, found the end of the expression",
            ),
            (
                "99999999999999999999",
                1,
                "the number `99999999999999999999` does not fit in 64 bits",
            ),
        ];
        for (src, col, message) in cases {
            let err = parse(src).unwrap_err();
            assert_eq!((err.col, err.message.as_str()), (col, message), "{src}");
        }
    }

    #[test]
    fn renders_a_caret_under_the_column() {
        let src = "TILE_M * ";
        let err = parse(src).unwrap_err();
        assert_eq!(
            err.render(src),
            "column 10: expected an operand after `*`, found the end of the expression\n  TILE_M * \n           ^"
        );
    }

    #[test]
    fn lists_the_parameters_read() {
        let e = parse("TILE_N * TILE_M <= 8192 && TILE_M > 1").unwrap();
        assert_eq!(e.params(), vec!["TILE_M".to_string(), "TILE_N".to_string()]);
    }
}
