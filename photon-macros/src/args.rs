//! Parsing of `key = "value"` attribute arguments.

use proc_macro2::Span;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, Lit, LitStr, MetaNameValue, Token};

/// The `name = "value"` pairs of an attribute, checked against the accepted names.
pub(crate) struct Args {
    pairs: Vec<(String, LitStr)>,
}

impl Args {
    /// Parses `tokens` as comma-separated `name = "string"` pairs, each name from `accepted`
    /// and given at most once.
    pub(crate) fn parse(tokens: proc_macro2::TokenStream, accepted: &[&str]) -> syn::Result<Self> {
        let metas = Punctuated::<MetaNameValue, Token![,]>::parse_terminated.parse2(tokens)?;
        let mut pairs: Vec<(String, LitStr)> = Vec::new();
        for meta in metas {
            let name = meta
                .path
                .get_ident()
                .map(ToString::to_string)
                .ok_or_else(|| syn::Error::new_spanned(&meta.path, "expected a plain name"))?;
            if !accepted.contains(&name.as_str()) {
                let expected = accepted.join("`, `");
                return Err(syn::Error::new_spanned(
                    &meta.path,
                    format!("unknown argument `{name}`: expected `{expected}`"),
                ));
            }
            let value = match meta.value {
                Expr::Lit(ExprLit {
                    lit: Lit::Str(value),
                    ..
                }) => value,
                other => {
                    return Err(syn::Error::new_spanned(
                        other,
                        format!("`{name}` takes a string literal"),
                    ))
                }
            };
            if pairs.iter().any(|(seen, _)| *seen == name) {
                return Err(syn::Error::new_spanned(
                    &meta.path,
                    format!("`{name}` given twice"),
                ));
            }
            pairs.push((name, value));
        }
        Ok(Self { pairs })
    }

    /// The value of `name`, if given.
    pub(crate) fn get(&self, name: &str) -> Option<&LitStr> {
        self.pairs
            .iter()
            .find(|(seen, _)| seen == name)
            .map(|(_, value)| value)
    }

    /// The value of `name`, or an error pointing at the attribute.
    pub(crate) fn require(&self, name: &str, attribute: &str) -> syn::Result<&LitStr> {
        self.get(name).ok_or_else(|| {
            syn::Error::new(
                Span::call_site(),
                format!("#[{attribute}] needs `{name} = \"...\"`"),
            )
        })
    }
}

/// Checks a topic name with Photon's own rule, at compile time.
pub(crate) fn check_topic(topic: &LitStr) -> syn::Result<()> {
    photon_core::validate_topic_name(&topic.value())
        .map_err(|err| syn::Error::new(topic.span(), err.to_string()))
}
