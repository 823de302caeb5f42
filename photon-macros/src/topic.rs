//! `#[topic]`: implements `TypedTopic` for a serde type and declares its topic.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Data, DeriveInput, Fields, LitStr};

use crate::args::{check_topic, Args};

/// Expands `#[topic(name = "...", keyed_by = "field")]` on `item`.
pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let args = Args::parse(attr, &["name", "keyed_by"])?;
    let name = args.require("name", "topic")?;
    check_topic(name)?;
    let input: DeriveInput = syn::parse2(item.clone())?;
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &input.generics,
            "#[topic] types cannot be generic: one type per topic",
        ));
    }
    let ident = &input.ident;
    let vis = &input.vis;
    let (keyed_by, topic_key) = match args.get("keyed_by") {
        Some(field) => {
            let member = key_field(&input, field)?;
            (
                quote!(::core::option::Option::Some(#field)),
                quote!(::core::option::Option::Some(::std::string::ToString::to_string(&self.#member))),
            )
        }
        None => (
            quote!(::core::option::Option::None),
            quote!(::core::option::Option::None),
        ),
    };
    let ident_text = ident.to_string();
    let publish_doc = format!(
        "Publishes this value on topic `{}` (actor `null`).",
        name.value()
    );
    let subscribe_doc = format!(
        "Streams topic `{}` from where `options` says (non-durable).",
        name.value()
    );
    Ok(quote! {
        #item

        impl ::photon::runtime::TypedTopic for #ident {
            const TOPIC: &'static str = #name;
            const KEYED_BY: ::core::option::Option<&'static str> = #keyed_by;

            fn topic_key(&self) -> ::core::option::Option<::std::string::String> {
                #topic_key
            }
        }

        impl #ident {
            #[doc = #publish_doc]
            ///
            /// # Errors
            /// As `photon::Photon::publish`, and a codec error when the value does not serialize.
            #vis async fn publish_on(
                &self,
                photon: &::photon::Photon,
            ) -> ::photon::Result<::photon::Appended> {
                <Self as ::photon::runtime::TypedTopic>::publish_on(self, photon).await
            }

            #[doc = #subscribe_doc]
            #vis fn subscribe_on(
                photon: &::photon::Photon,
                options: ::photon::runtime::SubscribeOptions,
            ) -> ::photon::runtime::TypedStream<Self> {
                <Self as ::photon::runtime::TypedTopic>::subscribe_on(photon, options)
            }
        }

        ::photon::core::inventory::submit! {
            ::photon::TopicDescriptor {
                name: #name,
                keyed_by: #keyed_by,
                type_name: ::core::concat!(::core::module_path!(), "::", #ident_text),
            }
        }
    })
}

/// The field named by `keyed_by`, which must exist on a struct with named fields.
fn key_field(input: &DeriveInput, field: &LitStr) -> syn::Result<syn::Ident> {
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new(
            field.span(),
            "`keyed_by` needs a struct with named fields",
        ));
    };
    let Fields::Named(fields) = &data.fields else {
        return Err(syn::Error::new(
            field.span(),
            "`keyed_by` needs a struct with named fields",
        ));
    };
    fields
        .named
        .iter()
        .filter_map(|f| f.ident.clone())
        .find(|ident| *ident == field.value())
        .ok_or_else(|| {
            syn::Error::new(
                field.span(),
                format!("`{}` has no field `{}`", input.ident, field.value()),
            )
        })
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::expand;

    fn error(attr: proc_macro2::TokenStream, item: proc_macro2::TokenStream) -> String {
        crate::expansion_error(expand(attr, item))
    }

    #[test]
    fn refuses_an_invalid_topic_name() {
        let message = error(
            quote!(name = "Orders"),
            quote!(
                struct Order {
                    id: String,
                }
            ),
        );
        assert_eq!(
            message,
            "invalid topic name \"Orders\": character 'O' is outside [a-z0-9._-]"
        );
    }

    #[test]
    fn refuses_a_missing_key_field() {
        let message = error(
            quote!(name = "orders", keyed_by = "nope"),
            quote!(
                struct Order {
                    id: String,
                }
            ),
        );
        assert_eq!(message, "`Order` has no field `nope`");
    }

    #[test]
    fn refuses_unknown_arguments_and_missing_name() {
        let message = error(
            quote!(name = "orders", key = "id"),
            quote!(
                struct Order {
                    id: String,
                }
            ),
        );
        assert_eq!(
            message,
            "unknown argument `key`: expected `name`, `keyed_by`"
        );
        assert_eq!(
            error(
                quote!(),
                quote!(
                    struct Order;
                )
            ),
            "#[topic] needs `name = \"...\"`"
        );
    }

    #[test]
    fn implements_the_trait_through_the_facade() {
        let expanded = expand(
            quote!(name = "orders", keyed_by = "id"),
            quote!(
                struct Order {
                    id: String,
                }
            ),
        )
        .unwrap()
        .to_string();
        assert!(
            expanded.contains(":: photon :: runtime :: TypedTopic for Order"),
            "{expanded}"
        );
        assert!(
            expanded.contains(":: photon :: core :: inventory :: submit !"),
            "{expanded}"
        );
        assert!(
            !expanded.contains("Serialize"),
            "no derive is added: {expanded}"
        );
    }
}
