//! Photon's attributes: `#[topic]` and `#[subscribe]`. Use them through the `photon` facade
//! (feature `macros`, on by default): the generated code names `::photon::...` paths
//! (`::photon::runtime`, `::photon::core::inventory`), so a crate that uses them depends on
//! `photon`, not on `photon-runtime` or `photon-core` directly.
//!
//! # `#[topic(name = "...", keyed_by = "field")]`
//! On a struct or enum that derives `Serialize` and `Deserialize` itself (the attribute
//! adds no derive). It implements `photon::runtime::TypedTopic` (the payload is the value's
//! JSON, the key is the `keyed_by` field formatted with `Display`), adds inherent
//! `publish_on(&photon)` and `subscribe_on(&photon, options)`, and declares the topic in
//! the registry (`TopicRegistry::from_inventory`). The name is checked at compile time.
//!
//! # `#[subscribe(topic = "...", durable = "...", key = "...")]`
//! On an `async fn` with one argument: a `photon::Event`, or a `#[topic]` type decoded from
//! the payload (a payload that does not decode is dead-lettered). It returns `()` or
//! `Result<(), E>` with `E: Into<PhotonError>`. `durable` names the checkpoint; `topic` may
//! be left out for a typed argument (it must match the type's topic when given); `key`
//! restricts the handler to one key. `Photon::start_executor` runs every such handler.
//!
//! ```text
//! use photon::prelude::*;
//!
//! #[topic(name = "orders", keyed_by = "order_id")]
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct Order { order_id: String, total: u32 }
//!
//! #[subscribe(durable = "billing")]
//! async fn bill(order: Order) -> Result<(), PhotonError> {
//!     println!("billing {} for {}", order.order_id, order.total);
//!     Ok(())
//! }
//! ```

mod args;
mod subscribe;
mod topic;

use proc_macro::TokenStream;

/// Declares a typed topic: `#[topic(name = "orders", keyed_by = "order_id")]`.
///
/// See the crate documentation.
#[proc_macro_attribute]
pub fn topic(attr: TokenStream, item: TokenStream) -> TokenStream {
    topic::expand(attr.into(), item.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Registers an async fn as a durable handler: `#[subscribe(durable = "billing")]`.
///
/// See the crate documentation.
#[proc_macro_attribute]
pub fn subscribe(attr: TokenStream, item: TokenStream) -> TokenStream {
    subscribe::expand(attr.into(), item.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
