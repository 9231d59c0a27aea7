//! The test suite's `#[test]`, which gives every test its guard by
//! construction. The suite's `main.rs` brings it in with `#[macro_use]`,
//! which puts it before the standard library's prelude in every module of
//! the suite, so a plain `#[test]` there is this one:
//!
//! - `#[test]`: the test runs beside other tests (`common::beside_others`);
//! - `#[test(alone)]`: no other test runs while it does (`common::alone`),
//!   for a test that measures or reads host-wide state.
//!
//! The guard is the body's first statement, held to its end. A body that
//! takes a guard of its own would wait for itself (a second guard of a
//! test that is alone): it does not compile. The expansion is the
//! standard library's `#[test]` on the same function.
//!
//! Written on `proc_macro` alone: the attribute moves tokens and reads
//! identifiers, nothing a parser crate would add to.

use proc_macro::{Delimiter, Group, TokenStream, TokenTree};

/// See the crate's documentation.
#[proc_macro_attribute]
pub fn test(attr: TokenStream, item: TokenStream) -> TokenStream {
    let guard = match attr.to_string().trim() {
        "" => "let _beside = crate::common::beside_others();",
        "alone" => "let _alone = crate::common::alone();",
        other => {
            return error(&format!(
                "#[test({other})]: the suite's tests are #[test] (beside others) or #[test(alone)]"
            ));
        }
    };
    let mut tokens: Vec<TokenTree> = item.into_iter().collect();
    let Some(TokenTree::Group(body)) = tokens.pop() else {
        return error("#[test] goes on a function with a body");
    };
    if body.delimiter() != Delimiter::Brace {
        return error("#[test] goes on a function with a body");
    }
    if let Some(name) = takes_a_guard(body.stream()) {
        return error(&format!(
            "this test calls common::{name} itself; #[test] gives every test its guard (#[test(alone)] for one that runs alone): take the call out"
        ));
    }
    let mut inner: TokenStream = guard.parse().expect("the guard is Rust");
    inner.extend(body.stream());
    let mut guarded = Group::new(Delimiter::Brace, inner);
    guarded.set_span(body.span());
    let mut out: TokenStream = "#[::core::prelude::v1::test]"
        .parse()
        .expect("the attribute is Rust");
    out.extend(tokens);
    out.extend([TokenTree::Group(guarded)]);
    out
}

/// The guard function a body calls, if it calls one (at any depth).
fn takes_a_guard(body: TokenStream) -> Option<&'static str> {
    let tokens: Vec<TokenTree> = body.into_iter().collect();
    for (i, token) in tokens.iter().enumerate() {
        match token {
            TokenTree::Group(group) => {
                if let Some(name) = takes_a_guard(group.stream()) {
                    return Some(name);
                }
            }
            TokenTree::Ident(ident) => {
                let name = ident.to_string();
                let called = matches!(tokens.get(i + 1), Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis);
                let after_common = i >= 3
                    && matches!(&tokens[i - 3], TokenTree::Ident(c) if c.to_string() == "common");
                if called && after_common {
                    match name.as_str() {
                        "alone" => return Some("alone"),
                        "beside_others" => return Some("beside_others"),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    None
}

/// A compile error with `message`, where the attribute stands.
fn error(message: &str) -> TokenStream {
    format!("::core::compile_error!({message:?});")
        .parse()
        .expect("the error is Rust")
}
