//! Just enough POSIX shell to read tc scripts and tdc commands: quoting, backslashes, comments,
//! `$VAR`/`${VAR}` substitution, and splitting a command list on `;`, `&&`, `||`.

use std::collections::BTreeMap;

/// Shell variables.
pub type Vars = BTreeMap<String, String>;

/// A line the tokenizer could not read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message} (column {column})")]
pub struct ShellError {
    /// What is wrong.
    pub message: String,
    /// 1-based column (in characters).
    pub column: usize,
}

/// A word and the 1-based column where it starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Word {
    /// The word after quote removal and substitution.
    pub text: String,
    /// Column of its first character.
    pub column: usize,
    /// True if any part came from a substitution that was not defined.
    pub undefined: Option<String>,
}

/// Splits a line into words, substituting variables. Unknown variables expand to "" and are
/// reported in [`Word::undefined`].
pub fn split_words_spanned(line: &str, vars: &Vars) -> Result<Vec<Word>, ShellError> {
    let chars: Vec<char> = line.chars().collect();
    let mut words = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if i >= chars.len() || chars[i] == '#' {
            break;
        }
        let start = i;
        let mut text = String::new();
        let mut undefined = None;
        while i < chars.len() && !chars[i].is_whitespace() {
            match chars[i] {
                '\'' => {
                    i += 1;
                    while i < chars.len() && chars[i] != '\'' {
                        text.push(chars[i]);
                        i += 1;
                    }
                    if i >= chars.len() {
                        return Err(ShellError {
                            message: "unterminated single quote".into(),
                            column: start + 1,
                        });
                    }
                    i += 1;
                }
                '"' => {
                    i += 1;
                    while i < chars.len() && chars[i] != '"' {
                        if chars[i] == '\\' && i + 1 < chars.len() && "$`\"\\".contains(chars[i + 1]) {
                            text.push(chars[i + 1]);
                            i += 2;
                        } else if chars[i] == '$' {
                            i = expand(&chars, i, vars, &mut text, &mut undefined)?;
                        } else {
                            text.push(chars[i]);
                            i += 1;
                        }
                    }
                    if i >= chars.len() {
                        return Err(ShellError {
                            message: "unterminated double quote".into(),
                            column: start + 1,
                        });
                    }
                    i += 1;
                }
                '\\' => {
                    if i + 1 < chars.len() {
                        text.push(chars[i + 1]);
                    }
                    i += 2;
                }
                '$' => i = expand(&chars, i, vars, &mut text, &mut undefined)?,
                c => {
                    text.push(c);
                    i += 1;
                }
            }
        }
        words.push(Word { text, column: start + 1, undefined });
    }
    Ok(words)
}

fn expand(
    chars: &[char],
    mut i: usize,
    vars: &Vars,
    out: &mut String,
    undefined: &mut Option<String>,
) -> Result<usize, ShellError> {
    let col = i + 1;
    i += 1;
    let name: String = if i < chars.len() && chars[i] == '{' {
        let close = chars[i..]
            .iter()
            .position(|&c| c == '}')
            .ok_or(ShellError { message: "missing '}'".into(), column: col })?;
        let n: String = chars[i + 1..i + close].iter().collect();
        i += close + 1;
        n
    } else if i < chars.len() && chars[i] == '(' {
        return Err(ShellError {
            message: "command or arithmetic substitution is not supported".into(),
            column: col,
        });
    } else {
        let s = i;
        while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
            i += 1;
        }
        if s == i {
            out.push('$');
            return Ok(i);
        }
        chars[s..i].iter().collect()
    };
    // ${VAR:-default}
    let (name, default) = match name.split_once(":-") {
        Some((n, d)) => (n.to_string(), Some(d.to_string())),
        None => (name, None),
    };
    match vars.get(&name) {
        Some(v) if !(v.is_empty() && default.is_some()) => out.push_str(v),
        _ => match default {
            Some(d) => out.push_str(&d),
            None => {
                if undefined.is_none() {
                    *undefined = Some(name);
                }
            }
        },
    }
    Ok(i)
}

/// Words of a line, without positions.
pub fn split_words(line: &str, vars: &Vars) -> Result<Vec<String>, ShellError> {
    Ok(split_words_spanned(line, vars)?.into_iter().map(|w| w.text).collect())
}

/// How a command in a list is joined to the previous one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Join {
    /// First command or after `;`.
    Seq,
    /// After `&&`.
    And,
    /// After `||`.
    Or,
}

/// Splits `a || b; c && d` into commands (quotes respected), without substitution.
pub fn split_list(line: &str) -> Vec<(Join, String)> {
    let chars: Vec<char> = line.chars().collect();
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut join = Join::Seq;
    let mut i = 0;
    let mut quote: Option<char> = None;
    while i < chars.len() {
        let c = chars[i];
        if let Some(q) = quote {
            cur.push(c);
            if c == '\\' && q == '"' && i + 1 < chars.len() {
                cur.push(chars[i + 1]);
                i += 2;
                continue;
            }
            if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        match c {
            '\'' | '"' => {
                quote = Some(c);
                cur.push(c);
            }
            '\\' if i + 1 < chars.len() => {
                cur.push(c);
                cur.push(chars[i + 1]);
                i += 1;
            }
            ';' => {
                out.push((join, std::mem::take(&mut cur)));
                join = Join::Seq;
            }
            '&' if chars.get(i + 1) == Some(&'&') => {
                out.push((join, std::mem::take(&mut cur)));
                join = Join::And;
                i += 1;
            }
            '|' if chars.get(i + 1) == Some(&'|') => {
                out.push((join, std::mem::take(&mut cur)));
                join = Join::Or;
                i += 1;
            }
            _ => cur.push(c),
        }
        i += 1;
    }
    out.push((join, cur));
    out.into_iter().filter(|(_, c)| !c.trim().is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_and_variables() {
        let mut v = Vars::new();
        v.insert("DEV".into(), "eth0".into());
        v.insert("rate".into(), "100".into());
        let w = split_words(r#"tc class add dev $DEV rate ${rate}mbit 'a b' "x $DEV" \$y # c"#, &v).unwrap();
        assert_eq!(w, vec!["tc", "class", "add", "dev", "eth0", "rate", "100mbit", "a b", "x eth0", "$y"]);
        let sp = split_words_spanned("  tc $NOPE x", &v).unwrap();
        assert_eq!(sp[0].column, 3);
        assert_eq!(sp[1].undefined.as_deref(), Some("NOPE"));
        assert!(split_words("tc 'oops", &v).is_err());
    }

    #[test]
    fn lists() {
        let l = split_list("a b || /bin/true; c 'x;y' && d");
        assert_eq!(l.len(), 4);
        assert_eq!(l[1], (Join::Or, " /bin/true".to_string()));
        assert_eq!(l[2].1.trim(), "c 'x;y'");
        assert_eq!(l[3].0, Join::And);
    }
}
