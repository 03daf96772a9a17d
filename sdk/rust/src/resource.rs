//! [`Resource`] and [`ResourceTemplate`]: what a plugin serves for `resources/read`, as
//! Rust functions; [`IntoContents`]: what they may return.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::RequestError;
use crate::complete::Completers;
use crate::uri_template::UriTemplate;
use crate::wit::{self, EmbeddedResource, ResourceInfo};

/// A read function's success value: the contents of the URI that was read.
pub trait IntoContents {
    /// The contents, for `uri` of the declared `mime_type`.
    fn into_contents(self, uri: &str, mime_type: Option<&str>) -> Vec<EmbeddedResource>;
}

/// Text.
impl IntoContents for String {
    fn into_contents(self, uri: &str, mime_type: Option<&str>) -> Vec<EmbeddedResource> {
        vec![EmbeddedResource {
            uri: uri.into(),
            mime_type: mime_type.map(Into::into),
            text: Some(self),
            blob: None,
        }]
    }
}

/// Text.
impl IntoContents for &str {
    fn into_contents(self, uri: &str, mime_type: Option<&str>) -> Vec<EmbeddedResource> {
        self.to_owned().into_contents(uri, mime_type)
    }
}

/// Bytes, base64-encoded for the client by the gateway.
impl IntoContents for Vec<u8> {
    fn into_contents(self, uri: &str, mime_type: Option<&str>) -> Vec<EmbeddedResource> {
        vec![EmbeddedResource {
            uri: uri.into(),
            mime_type: mime_type.map(Into::into),
            text: None,
            blob: Some(self),
        }]
    }
}

/// Contents as they are (several, or of other URIs).
impl IntoContents for Vec<EmbeddedResource> {
    fn into_contents(self, _: &str, _: Option<&str>) -> Vec<EmbeddedResource> {
        self
    }
}

type Read<A> = Box<dyn Fn(A, &str) -> Result<Vec<EmbeddedResource>, RequestError>>;

/// One resource of a fixed URI: built with [`Resource::new`], added with
/// [`Plugin::resource`](crate::Plugin::resource).
pub struct Resource {
    info: ResourceInfo,
    read: Read<()>,
}

impl Resource {
    /// The resource `uri`, named `name` inside the plugin, whose contents `read` gives.
    pub fn new<C, F>(uri: &str, name: &str, read: F) -> Self
    where
        C: IntoContents,
        F: Fn() -> Result<C, RequestError> + 'static,
    {
        Self {
            info: ResourceInfo {
                uri: uri.into(),
                name: name.into(),
                title: None,
                description: None,
                mime_type: None,
                size: None,
                annotations: None,
            },
            read: Box::new(move |(), uri| Ok(read()?.into_contents(uri, None))),
        }
    }

    pub fn uri(&self) -> &str {
        &self.info.uri
    }

    /// What `list-resources` says of it.
    pub fn info(&self) -> ResourceInfo {
        self.info.clone()
    }

    pub(crate) fn read(&self) -> Result<Vec<EmbeddedResource>, RequestError> {
        let contents = (self.read)((), &self.info.uri)?;
        Ok(with_mime(contents, self.info.mime_type.as_deref()))
    }
}

/// A family of resources whose URIs match an RFC 6570 template (`notes://{id}`): built
/// with [`ResourceTemplate::new`], added with [`Plugin::template`](crate::Plugin::template).
pub struct ResourceTemplate {
    info: wit::ResourceTemplate,
    parsed: UriTemplate,
    read: Read<Map<String, Value>>,
    pub(crate) completers: Completers,
}

impl ResourceTemplate {
    /// Resources whose URIs match `uri_template`, read by `read` from the template's
    /// variables: `P` is a struct with a `String` field per variable (or a map).
    ///
    /// # Panics
    ///
    /// When the template has a form this SDK does not match (`{name}` and `{+name}`
    /// are matched): the message says which.
    pub fn new<P, C, F>(uri_template: &str, name: &str, read: F) -> Self
    where
        P: DeserializeOwned,
        C: IntoContents,
        F: Fn(P) -> Result<C, RequestError> + 'static,
    {
        let parsed =
            UriTemplate::parse(uri_template).unwrap_or_else(|e| panic!("resource template {e}"));
        Self {
            info: wit::ResourceTemplate {
                uri_template: uri_template.into(),
                name: name.into(),
                title: None,
                description: None,
                mime_type: None,
                annotations: None,
            },
            parsed,
            read: Box::new(move |params, uri| {
                let params = serde_json::from_value(Value::Object(params))
                    .map_err(RequestError::invalid_params)?;
                Ok(read(params)?.into_contents(uri, None))
            }),
            completers: Completers::default(),
        }
    }

    /// Completes the variable `variable` (MCP `completion/complete`): `complete` gets
    /// what the user typed so far and gives the values that fit (the first 100 are sent).
    pub fn complete<F>(mut self, variable: &str, complete: F) -> Self
    where
        F: Fn(&str) -> Vec<String> + 'static,
    {
        self.completers.add(variable, complete);
        self
    }

    pub fn uri_template(&self) -> &str {
        &self.info.uri_template
    }

    /// The template's variables, in order.
    pub fn variables(&self) -> impl Iterator<Item = &str> {
        self.parsed.variables()
    }

    /// What `list-templates` says of it.
    pub fn info(&self) -> wit::ResourceTemplate {
        self.info.clone()
    }

    /// Reads `uri` if it matches; `None` if it does not.
    pub(crate) fn read(&self, uri: &str) -> Option<Result<Vec<EmbeddedResource>, RequestError>> {
        let values = self.parsed.matches(uri)?;
        let params = values
            .into_iter()
            .map(|(name, value)| (name, Value::String(value)))
            .collect();
        Some(
            (self.read)(params, uri)
                .map(|contents| with_mime(contents, self.info.mime_type.as_deref())),
        )
    }
}

/// The setters of what `list-resources` and `list-templates` say, the same for both.
macro_rules! described {
    ($ty:ty) => {
        impl $ty {
            pub fn title(mut self, title: &str) -> Self {
                self.info.title = Some(title.into());
                self
            }

            pub fn description(mut self, description: &str) -> Self {
                self.info.description = Some(description.into());
                self
            }

            /// The MIME type, listed and given to the text or bytes `read` returns.
            pub fn mime_type(mut self, mime_type: &str) -> Self {
                self.info.mime_type = Some(mime_type.into());
                self
            }

            /// MCP annotations (`audience`, `priority`, `lastModified`).
            pub fn annotations(mut self, annotations: Value) -> Self {
                self.info.annotations = Some(annotations.to_string());
                self
            }
        }
    };
}

described!(Resource);
described!(ResourceTemplate);

/// Gives contents without a MIME type the resource's.
fn with_mime(mut contents: Vec<EmbeddedResource>, mime: Option<&str>) -> Vec<EmbeddedResource> {
    for item in &mut contents {
        if item.mime_type.is_none() {
            item.mime_type = mime.map(Into::into);
        }
    }
    contents
}
