//! Writing a result into the call's `reply` (the WIT `results` interface), item by item,
//! each checked against the room the gateway has left before it is handed over.

use crate::output::ToolOutput;
use crate::wit::{CallError, Content, EmbeddedResource, Reply, RequestError};

/// Where a result goes: the gateway's [`Reply`], or a stand-in in tests.
pub(crate) trait Sink {
    fn room(&self) -> u64;
    fn add(&self, item: Content) -> Result<(), String>;
    fn structured(&self, json: String) -> Result<(), String>;
    fn mark_error(&self);
}

impl Sink for Reply {
    fn room(&self) -> u64 {
        Reply::room(self)
    }

    fn add(&self, item: Content) -> Result<(), String> {
        Reply::add(self, &item)
    }

    fn structured(&self, json: String) -> Result<(), String> {
        Reply::structured(self, &json)
    }

    fn mark_error(&self) {
        Reply::mark_error(self)
    }
}

/// The bytes an item takes in the reply, as near as the guest can tell: its data and
/// the strings that come with it.
fn size(item: &Content) -> u64 {
    let len = |s: &str| s.len() as u64;
    match item {
        Content::Text(text) => len(text),
        Content::Image(blob) | Content::Audio(blob) => {
            blob.data.len() as u64 + len(&blob.mime_type)
        }
        Content::Resource(r) => {
            len(&r.uri)
                + r.mime_type.as_deref().map_or(0, len)
                + r.text.as_deref().map_or(0, len)
                + r.blob.as_ref().map_or(0, |b| b.len() as u64)
        }
    }
}

/// Why an item was not written: the limit, said with the numbers, or the gateway's words.
fn put(
    sink: &impl Sink,
    what: &str,
    bytes: u64,
    add: impl FnOnce() -> Result<(), String>,
) -> Result<(), String> {
    let room = sink.room();
    if bytes > room {
        return Err(format!(
            "{what} ({bytes} bytes) does not fit in the result: the gateway's limit on a \
             result (`max_result`) leaves {room} bytes"
        ));
    }
    add()
}

/// A tool's output into `sink`: its items, its structured value, its error mark.
pub(crate) fn write_output(sink: &impl Sink, output: ToolOutput) -> Result<(), CallError> {
    let ToolOutput {
        content,
        structured,
        is_error,
    } = output;
    for (i, item) in content.into_iter().enumerate() {
        let what = format!("item {} of the result", i + 1);
        put(sink, &what, size(&item), || sink.add(item)).map_err(CallError::Failed)?;
    }
    if let Some(json) = structured {
        let bytes = json.len() as u64;
        put(sink, "the structured result", bytes, || {
            sink.structured(json)
        })
        .map_err(CallError::Failed)?;
    }
    if is_error {
        sink.mark_error();
    }
    Ok(())
}

/// A resource's contents into `sink`, as `resource` items.
pub(crate) fn write_contents(
    sink: &impl Sink,
    contents: Vec<EmbeddedResource>,
) -> Result<(), RequestError> {
    for item in contents {
        let what = format!("the contents of {}", item.uri);
        let item = Content::Resource(item);
        put(sink, &what, size(&item), || sink.add(item)).map_err(RequestError::Failed)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};

    use super::{Sink, write_output};
    use crate::output::ToolOutput;
    use crate::wit::{CallError, Content};

    /// A reply of `room` bytes that keeps what fits.
    struct Fake {
        room: Cell<u64>,
        items: RefCell<Vec<Content>>,
        structured: RefCell<Option<String>>,
        error: Cell<bool>,
    }

    impl Fake {
        fn new(room: u64) -> Self {
            Self {
                room: Cell::new(room),
                items: RefCell::default(),
                structured: RefCell::default(),
                error: Cell::new(false),
            }
        }
    }

    impl Sink for Fake {
        fn room(&self) -> u64 {
            self.room.get()
        }
        fn add(&self, item: Content) -> Result<(), String> {
            if let Content::Text(t) = &item {
                self.room.set(self.room.get() - t.len() as u64);
            }
            self.items.borrow_mut().push(item);
            Ok(())
        }
        fn structured(&self, json: String) -> Result<(), String> {
            *self.structured.borrow_mut() = Some(json);
            Ok(())
        }
        fn mark_error(&self) {
            self.error.set(true);
        }
    }

    fn texts(items: &[&str]) -> ToolOutput {
        ToolOutput {
            content: items.iter().map(|t| Content::Text(t.to_string())).collect(),
            structured: Some("{}".into()),
            is_error: true,
        }
    }

    #[test]
    fn every_item_is_written_while_there_is_room() {
        let sink = Fake::new(100);
        write_output(&sink, texts(&["abc", "de"])).unwrap();
        assert_eq!(sink.items.borrow().len(), 2);
        assert_eq!(sink.structured.borrow().as_deref(), Some("{}"));
        assert!(sink.error.get());
    }

    #[test]
    fn an_item_that_does_not_fit_fails_the_call_naming_the_limit() {
        let sink = Fake::new(5);
        let err = write_output(&sink, texts(&["abc", "def"])).unwrap_err();
        match err {
            CallError::Failed(m) => {
                assert!(m.contains("item 2 of the result (3 bytes)"), "{m}");
                assert!(m.contains("(`max_result`) leaves 2 bytes"), "{m}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(sink.items.borrow().len(), 1);
        assert!(!sink.error.get());
    }
}
